use super::*;

fn report_args(w: &[&str]) -> ReportArgs {
    let words: Vec<String> = w.iter().map(|s| s.to_string()).collect();
    parse_words::<ReportArgs>(&words).unwrap().0
}

#[test]
fn every_level_passes_every_experiment_s_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let o = tmp.path().join("r");
    let o = o.to_str().unwrap();
    for w in [
        &["--out", o][..],
        &["--out", o, "--quick"],
        &["--out", o, "--smoke"],
    ] {
        assert_eq!(check(&report_args(w)), Ok(()), "{w:?}");
    }
    assert_eq!(
        check(&report_args(&["--cores", "0,0", "--out", o])),
        Err("--cores 0,0: both sides on core 0: give two distinct cores".into())
    );
    assert!(!tmp.path().join("r").exists(), "checking writes nothing");
}

#[test]
fn quick_and_smoke_settings_are_shorter() {
    let r = |w: &[&str]| runs(&report_args(w), Path::new("/tmp/x")).unwrap();
    let (full, quick, smoke) = (r(&[]), r(&["--quick"]), r(&["--smoke"]));
    assert!(quick.echo.0.duration_ms < full.echo.0.duration_ms);
    assert!(smoke.echo.0.duration_ms < quick.echo.0.duration_ms);
    assert!(quick.scaling.0.duration_ms < full.scaling.0.duration_ms);
    assert_eq!(full.scaling.0.pipes, "1,2,32,1024");
    assert_eq!(quick.scaling.0.pipes, "1,2,32,1024");
    assert!(quick.pcie.0.packets < full.pcie.0.packets);
    assert_eq!(quick.echo.0.sizes, full.echo.0.sizes);
    assert_eq!(
        smoke.latency.0.out.as_deref(),
        Some(Path::new("/tmp/x/latency"))
    );
}

fn synthetic() -> Vec<Claim> {
    vec![
        Claim {
            title: "Echo speedup".into(),
            claim: "2.5x at 64 B".into(),
            rows: vec![ClaimRow {
                metric: "speedup at 64 B".into(),
                unit: "x".into(),
                measured: Some(2.134),
                placement: "cores 0,1, probe 85 ns (close)".into(),
                predicted: Some(1.69),
                paper: Some(148.8 / 59.0),
                paper_note: None,
            }],
            figures: vec![("echo_speedup.png".into(), "Echo speedup".into())],
            paragraph: "Measured 2.13x.".into(),
            missing: None,
        },
        Claim {
            title: "Cache behaviour".into(),
            claim: "fewer misses".into(),
            rows: vec![ClaimRow {
                metric: "L1d misses, Ensō / packetized".into(),
                unit: "x".into(),
                measured: None,
                placement: "ignored without a measurement".into(),
                predicted: None,
                paper: None,
                paper_note: Some("<= 0.25".into()),
            }],
            missing: Some("valgrind is not installed".into()),
            ..Default::default()
        },
    ]
}

#[test]
fn the_report_has_a_section_and_table_per_claim() {
    let md = render("# Report\n", &synthetic());
    assert!(
        md.starts_with("# Report\n\n## 1. Echo speedup\n\n**Paper:** 2.5x at 64 B\n"),
        "{md}"
    );
    assert!(md.contains(
        "| metric | unit | measured here | placement | predicted (paper's hardware) | paper |"
    ));
    assert!(
        md.contains(
            "| speedup at 64 B | x | 2.13 | cores 0,1, probe 85 ns (close) | 1.69 | 2.52 |"
        ),
        "{md}"
    );
    assert!(md.contains("![Echo speedup](echo_speedup.png)"));
    assert!(md.contains("\n## 2. Cache behaviour\n"));
    assert!(md.contains("_Not measured in this run: valgrind is not installed._"));
    // No measurement, no placement; a bound in words stands for the paper.
    assert!(
        md.contains("| L1d misses, Ensō / packetized | x | - | - | - | <= 0.25 |"),
        "{md}"
    );
}

#[test]
fn cells_keep_three_digits() {
    assert_eq!(num(148.8), "148.8");
    assert_eq!(num(2.5221), "2.52");
    assert_eq!(num(0.0391), "0.039");
    assert_eq!(num(f64::NAN), "-");
    assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
    assert_eq!(ratio(Some(3.0), Some(0.0)), None);
    assert_eq!(ratio(None, Some(2.0)), None);
}

#[test]
fn enso_predictions_follow_the_packets_per_notification() {
    let pt = |pipes: u32, k: f64| ScalingPoint {
        interface: "enso".into(),
        pipes,
        flows: 16,
        mpps: 10.0,
        mpps_range: [9.0, 11.0],
        gbps: 6.7,
        relative_to_fewest: Some(1.0),
        relative_range: None,
        nic_ns_per_pkt: 30.0,
        app_ns_per_pkt: 8.0,
        nic_busy: 1.0,
        app_busy: 0.3,
        bottleneck: "nic".into(),
        packets_per_notification: Some(k),
        drops: 0,
        contended_trials: 0,
        trials: 3,
    };
    let pred = enso_scaling_prediction(&[pt(1, 128.0), pt(1024, 1.0)], 60);
    assert_eq!(pred[0], (1, 1.0));
    // One notification per packet: the per-packet ceiling (~45 Mpps at
    // 64 B against the line rate's 148.8 at k = 128).
    assert!(pred[1].1 > 0.2 && pred[1].1 < 0.45, "{pred:?}");
}
