use super::*;

#[test]
fn charts_are_written() {
    let tmp = tempfile::tempdir().unwrap();
    let line = LineChart::new("rate vs size", "packet size (B)", "Mpps")
        .log_x()
        .series("ref", vec![(64.0, 55.0), (256.0, 30.0), (1518.0, 6.0)])
        .series(
            "other",
            vec![(64.0, 20.0), (256.0, 15.0), (1518.0, f64::NAN)],
        );
    let p = tmp.path().join("line.svg");
    line.render_svg(&p).unwrap();
    let svg = std::fs::read_to_string(&p).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
    assert!(svg.contains("rate vs size") && svg.contains("other"));

    let bars = BarChart::new("apps", "Mpps", ["echo", "maglev", "kv"])
        .series("enso", vec![50.0, 40.0, 7.6])
        .series("packetized", vec![20.0, f64::NAN, 5.8]);
    let p = tmp.path().join("bars.svg");
    bars.render_svg(&p).unwrap();
    let svg = std::fs::read_to_string(&p).unwrap();
    assert!(svg.contains("maglev") && svg.contains("packetized"));

    let dir = crate::results::ResultsDir::at("t", tmp.path().join("r")).unwrap();
    let lp = dir.line_chart("l.svg", &line).unwrap();
    let bp = dir.bar_chart("b.svg", &bars).unwrap();
    assert!(std::fs::metadata(lp).unwrap().len() > 0);
    assert!(std::fs::metadata(bp).unwrap().len() > 0);
}

#[test]
fn stacked_bars_add_up() {
    let bars = BarChart::new("pcie", "B/pkt", ["enso 64", "packetized 64"])
        .series("data", vec![150.0, 170.0])
        .series("metadata", vec![10.0, f64::NAN])
        .stacked();
    assert_eq!(
        bars.segments(),
        vec![
            vec![(0.0, 150.0), (0.0, 170.0)],
            vec![(150.0, 160.0), (170.0, 170.0)]
        ]
    );
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("stacked.svg");
    bars.render_svg(&p).unwrap();
    assert!(std::fs::read_to_string(&p).unwrap().contains("metadata"));
}

#[test]
fn empty_and_bad_charts_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("x.svg");
    assert!(matches!(
        LineChart::new("t", "x", "y").render_svg(&p),
        Err(PlotError::NoData)
    ));
    assert!(matches!(
        LineChart::new("t", "x", "y")
            .log_x()
            .series("s", vec![(0.0, 1.0)])
            .render_svg(&p),
        Err(PlotError::NonPositiveOnLogAxis(_))
    ));
    assert!(matches!(
        BarChart::new("t", "y", Vec::<String>::new()).render_svg(&p),
        Err(PlotError::NoData)
    ));
}

#[test]
fn log_axis_ticks_are_1_2_5_per_decade() {
    assert_eq!(
        decade_ticks(0.8, 60.0),
        vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
    );
    assert_eq!(decade_ticks(1.0, 1000.0).len(), 10, "1 and 1000 included");
    assert_eq!(decade_ticks(3.0, 4.0), Vec::<f64>::new(), "none inside");
    assert_eq!(
        decade_ticks(0.0, 10.0),
        Vec::<f64>::new(),
        "not on a log axis"
    );
    assert_eq!(decade_ticks(10.0, 1.0), Vec::<f64>::new());
    // Microseconds spanning four decades: no more than 13 labels.
    let t = decade_ticks(0.9, 5000.0);
    assert_eq!((t[0], t[t.len() - 1], t.len()), (1.0, 5000.0, 12));
    // A log x axis labels the measured sizes when there are few.
    let c = LineChart::new("t", "x", "y")
        .log_x()
        .series("s", vec![(64.0, 1.0), (1518.0, 2.0), (256.0, 3.0)]);
    assert_eq!(c.ticks(), Some(vec![64.0, 256.0, 1518.0]));
}

#[test]
fn titles_wrap_at_spaces() {
    assert_eq!(wrap("a bb ccc", 4), vec!["a bb", "ccc"]);
    assert_eq!(wrap("averylongword x", 4), vec!["averylongword", "x"]);
    assert_eq!(wrap("one\ntwo", 80), vec!["one", "two"]);
    let lines = title_lines(&format!("{}\nsub", "word ".repeat(30)));
    assert!(lines.iter().filter(|(p, _)| *p == 0).count() >= 2);
    assert_eq!(lines.last(), Some(&(1, "sub".to_string())));
}

#[test]
fn the_legend_goes_where_the_lines_are_not() {
    // Lines rising to the upper right: the legend goes upper left.
    let rising = [(0.0, 0.0), (0.5, 0.5), (1.0, 1.0), (0.9, 0.95)];
    assert!(matches!(
        legend_corner(&rising),
        SeriesLabelPosition::UpperLeft
    ));
    let falling = [(0.0, 1.0), (0.1, 0.9), (1.0, 0.5)];
    assert!(matches!(
        legend_corner(&falling),
        SeriesLabelPosition::UpperRight
    ));
    let top = [(0.0, 1.0), (1.0, 1.0), (0.5, 1.0)];
    assert!(matches!(
        legend_corner(&top),
        SeriesLabelPosition::LowerRight
    ));
}

#[test]
fn speedup_bars_render_as_svg_and_png() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = HBarChart::new("Speedup (x)\ncores 0,1", "speedup (x)");
    c.reference = Some((1.0, "1x".into()));
    c.legend = vec![(0, "close".into())];
    c.suffix = "x".into();
    for (i, v) in [2.5, 0.8, f64::NAN].into_iter().enumerate() {
        c = c.bar(HBar {
            label: format!("row {i}"),
            value: v,
            range: Some((v * 0.9, v * 1.1)),
            colour: 0,
            flagged: i == 1,
        });
    }
    let (_, h) = c.size();
    assert!(h > 150 + 3 * 46, "{h}");
    let svg = tmp.path().join("s.svg");
    c.render_svg(&svg).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    for want in ["row 0", "2.50x", "0.80x", "no value", "cores 0,1", "close"] {
        assert!(text.contains(want), "{want}");
    }
    let png = tmp.path().join("s.png");
    svg_to_png(&svg, &png, 1.0).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(bytes.len() > 5000, "{}", bytes.len());
    assert!(matches!(
        HBarChart::new("t", "x").render_svg(&svg),
        Err(PlotError::NoData)
    ));
}

#[test]
fn number_labels() {
    assert_eq!(format_num(1518.0), "1518");
    assert_eq!(format_num(64.0), "64");
    assert_eq!(format_num(12.34), "12.3");
    assert_eq!(format_num(0.5), "0.50");
    assert_eq!(format_num(0.0), "0");
}
