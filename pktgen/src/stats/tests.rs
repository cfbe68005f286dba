//! Tests of counters, samples, the CSV, loss and the histograms.

use super::*;

fn counters(rx: (u64, u64), tx: (u64, u64), rtt: (u64, u64)) -> Counters {
    Counters {
        rx_bytes: rx.0,
        rx_packets: rx.1,
        tx_bytes: tx.0,
        tx_packets: tx.1,
        rtt_sum_ns: rtt.0,
        rtt_samples: rtt.1,
    }
}

#[test]
fn samples_are_per_interval_and_totals_cumulative() {
    let mut r = Recorder::new();
    // 1 s of 1 M frames of 60 B each way: 480 Mb/s goodput, 672 tput.
    let c1 = counters(
        (60_000_000, 1_000_000),
        (60_000_000, 1_000_000),
        (5_000_000, 1000),
    );
    let s = *r.record(c1, Duration::from_secs(1));
    assert_eq!(s.rx.goodput_mbps, 480.0);
    assert_eq!(s.rx.tput_mbps, 672.0);
    assert_eq!(s.rx.pkt_rate_kpps, 1000.0);
    assert_eq!(s.mean_rtt_ns, Some(5000.0));
    // Half a second more, at half the rate: same rates, running totals.
    let c2 = counters(
        (75_000_000, 1_250_000),
        (75_000_000, 1_250_000),
        (5_000_000, 1000),
    );
    let s = *r.record(c2, Duration::from_millis(1500));
    assert_eq!(s.interval, Duration::from_millis(500));
    assert_eq!(s.tx.goodput_mbps, 240.0);
    assert_eq!(s.tx.pkt_rate_kpps, 500.0);
    assert_eq!((s.tx.bytes, s.tx.packets), (75_000_000, 1_250_000));
    assert_eq!(s.mean_rtt_ns, None);
    let t = r.totals();
    assert_eq!(t.rx.packets, 1_250_000);
    assert!((t.rx.pkt_rate_kpps - 1_250_000.0 / 1.5 / 1e3).abs() < 1e-9);
    assert_eq!(t.mean_rtt_ns, Some(5000.0));
    assert_eq!(r.samples().len(), 2);
    // Throughput is goodput plus 24 B per frame.
    for s in r.samples() {
        let extra = s.rx.pkt_rate_kpps * 1e3 * 24.0 * 8.0 / 1e6;
        assert!((s.rx.tput_mbps - s.rx.goodput_mbps - extra).abs() < 1e-6);
    }
}

#[test]
fn the_drain_does_not_dilute_the_last_interval_or_the_totals() {
    let ms = Duration::from_millis;
    let mut r = Recorder::new();
    // 1 M frames of 60 B each way in the first second.
    r.record(
        counters((60_000_000, 1_000_000), (60_000_000, 1_000_000), (0, 0)),
        ms(1000),
    );
    // 50 k more sent by 1.05 s, received by 1.1 s; the drain waits until
    // 1.2 s.
    let end = counters((63_000_000, 1_050_000), (63_000_000, 1_050_000), (0, 0));
    let span = TrafficSpan {
        first_sent: Some(ms(0)),
        last_sent: Some(ms(1050)),
        last_received: Some(ms(1100)),
    };
    let s = *r.finish(end, ms(1200), span).unwrap();
    assert_eq!((s.at, s.interval), (ms(1200), ms(200)));
    assert_eq!((s.send_ns, s.receive_ns), (Some(ms(50)), Some(ms(100))));
    // 50 k frames in 50 ms and in 100 ms, not in 200 ms.
    assert!((s.tx.pkt_rate_kpps - 1000.0).abs() < 1e-6, "{s:?}");
    assert!((s.rx.pkt_rate_kpps - 500.0).abs() < 1e-6, "{s:?}");
    let t = r.totals();
    assert_eq!((t.at, t.interval), (ms(1200), ms(1200)));
    assert_eq!((t.send_ns, t.receive_ns), (Some(ms(1050)), Some(ms(1100))));
    assert!((t.tx.pkt_rate_kpps - 1000.0).abs() < 1e-6, "{t:?}");
    assert!((t.rx.pkt_rate_kpps - 1_050_000.0 / 1.1 / 1e3).abs() < 1e-6);
    let j = serde_json::to_value(t).unwrap();
    assert_eq!(j["send_ns"], 1_050_000_000u64);
    assert_eq!(j["receive_ns"], 1_100_000_000u64);
    assert_eq!(j["t_ns"], 1_200_000_000u64);
    assert_eq!(serde_json::from_value::<Sample>(j).unwrap(), t);
    // Interval samples carry neither.
    let j = serde_json::to_value(r.samples()[0]).unwrap();
    assert!(j.get("send_ns").is_none() && j.get("receive_ns").is_none());
    // Frames sent from 0.2 s on: the send time starts there.
    let span = TrafficSpan {
        first_sent: Some(ms(200)),
        ..span
    };
    assert_eq!(span.send_time(), ms(850));
    assert_eq!(TrafficSpan::default().send_time(), Duration::ZERO);
    // Nothing after the last sample: nothing recorded.
    let mut r = Recorder::new();
    r.record(end, ms(1200));
    assert!(r.finish(end, ms(1200), span).is_none());
    assert_eq!(r.totals().send_ns, Some(ms(850)));
}

#[test]
fn csv_has_ensogen_columns() {
    let mut r = Recorder::new();
    r.record(
        counters((600, 10), (1200, 20), (1000, 10)),
        Duration::from_secs(1),
    );
    r.record(
        counters((600, 10), (1200, 20), (1000, 10)),
        Duration::from_secs(2),
    );
    let mut w = CsvWriter::new(Vec::new(), true, CsvFormat::Detailed).unwrap();
    for s in r.samples() {
        w.write(s).unwrap();
    }
    let text = String::from_utf8(w.finish().unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "rx_goodput_mbps,rx_tput_mbps,rx_pkt_rate_kpps,rx_bytes,rx_packets,\
         tx_goodput_mbps,tx_tput_mbps,tx_pkt_rate_kpps,tx_bytes,tx_packets,mean_rtt_ns"
    );
    assert_eq!(
        lines[1],
        "0.005,0.007,0.010,600,10,0.010,0.013,0.020,1200,20,100.0"
    );
    // No frames timed in the second interval: empty RTT field.
    assert_eq!(
        lines[2],
        "0.000,0.000,0.000,600,10,0.000,0.000,0.000,1200,20,"
    );
    let mut w = CsvWriter::new(Vec::new(), false, CsvFormat::Detailed).unwrap();
    w.write(&r.samples()[0]).unwrap();
    let text = String::from_utf8(w.finish().unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], CSV_COLUMNS.join(","));
    assert_eq!(
        lines[1],
        "0.005,0.007,0.010,600,10,0.010,0.013,0.020,1200,20"
    );
}

#[test]
fn ensogen_csv_holds_whole_numbers_in_ensogen_units() {
    let mut r = Recorder::new();
    // 1.5 s: 1 000 000 frames of 60 B received, 1 000 001 sent, RTTs
    // summing to 1 234 567.8 ns per frame.
    r.record(
        counters(
            (60_000_000, 1_000_000),
            (60_000_060, 1_000_001),
            (1_234_567_800_000, 1_000_000),
        ),
        Duration::from_millis(1500),
    );
    r.record(
        counters(
            (60_000_000, 1_000_000),
            (60_000_060, 1_000_001),
            (1_234_567_800_000, 1_000_000),
        ),
        Duration::from_millis(2500),
    );
    let mut w = CsvWriter::new(Vec::new(), true, CsvFormat::EnsoGen).unwrap();
    for s in r.samples() {
        w.write(s).unwrap();
    }
    let text = String::from_utf8(w.finish().unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        [&CSV_COLUMNS[..], &[RTT_COLUMN]].concat().join(",")
    );
    // RX: 320 Mb/s of goodput, 448 with 24 B a frame, 666.67 kpps;
    // TX: 320.00032 Mb/s, 448.000448 and 666.667333 kpps; RTT 1234567.8.
    assert_eq!(
        lines[1],
        "320,448,666,60000000,1000000,320,448,666,60000060,1000001,1234567"
    );
    // Nothing in the second interval: zero rates, zero RTT, the totals.
    assert_eq!(lines[2], "0,0,0,60000000,1000000,0,0,0,60000060,1000001,0");
    for line in &lines[1..] {
        for v in line.split(',') {
            v.parse::<u64>().unwrap();
        }
    }
}

#[test]
fn cycle_histogram_is_shaped_as_ensogens_file() {
    // The array covers cycles 10..20, i.e. 50..100 ns.
    let mut h = CycleHistogram::new(10, 10);
    assert_eq!(h.window_ns(), 50..100);
    for ns in [52, 54, 55, 99, 100, 49, 7, 1_000_000, 1_000_004] {
        h.record(ns);
    }
    assert_eq!(h.count(), 9);
    assert_eq!(h.outside_entries(), 4);
    let mut out = Vec::new();
    h.write(&mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "50,2\n55,1\n95,1\n5,1\n45,1\n100,1\n1000000,2\n"
    );
    // EnsōGen's defaults: 2 us up to 5 ms.
    let h = CycleHistogram::new(DEFAULT_HIST_OFFSET, DEFAULT_HIST_LEN);
    assert_eq!(h.window_ns(), 2_000..5_002_000);
}

#[test]
fn live_line_is_one_line() {
    let s = Sample::between(
        &Counters::default(),
        &counters(
            (60_000_000, 1_000_000),
            (60_000_000, 1_000_000),
            (2_000_000, 1000),
        ),
        Duration::from_secs(1),
        Duration::from_secs(3),
    );
    let l = live_line(&s);
    assert!(!l.contains('\n'));
    assert!(l.contains("RX   0.672 Gb/s    1.000 Mpps"), "{l}");
    assert!(l.ends_with("RTT 2000 ns"), "{l}");
}

#[test]
fn latency_percentiles_and_loss() {
    let mut h = LatencyHistogram::new();
    for v in 1..=1000u64 {
        h.record(v);
    }
    let s = h.summary();
    assert_eq!((s.count, s.min_ns, s.max_ns), (1000, 1, 1000));
    assert_eq!(
        (s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns),
        (500, 900, 990, 999)
    );
    assert!((s.mean_ns - 500.5).abs() < 1e-9);
    // Large values are within 0.1%.
    h.record(1_234_567);
    assert!(h.summary().max_ns.abs_diff(1_234_567) <= 1235);
    h.record(u64::MAX);
    assert_eq!(h.saturated(), 1);
    assert_eq!(LatencyHistogram::new().summary(), LatencySummary::default());
    let loss = Loss::new(1000, 990);
    assert_eq!((loss.lost, loss.excess), (10, 0));
    assert!((loss.ratio - 0.01).abs() < 1e-12);
    let line = summary_line(&loss, Some(&s));
    assert!(
        line.starts_with("lost 10 of 1000 (1.0000%); RTT min 1 ns, p50 500 ns"),
        "{line}"
    );
    assert_eq!(Loss::new(5, 7).excess, 2);
    assert_eq!(Loss::new(0, 0).ratio, 0.0);
}

#[test]
fn rtt_hist_file_round_trips_and_merges() {
    let mut a = LatencyHistogram::new();
    a.record_n(500, 3);
    a.record_n(1005, 2);
    a.record(10);
    let mut file = Vec::new();
    a.write_rtt_hist(&mut file).unwrap();
    assert_eq!(
        String::from_utf8(file.clone()).unwrap(),
        "10,1\n500,3\n1005,2\n"
    );
    let b = LatencyHistogram::read_rtt_hist(file.as_slice()).unwrap();
    assert_eq!(b.summary(), a.summary());
    let mut c = LatencyHistogram::new();
    c.record(20);
    c.merge(&b);
    assert_eq!(c.count(), 7);
    assert_eq!(c.summary().min_ns, 10);
    assert!(matches!(
        LatencyHistogram::read_rtt_hist(&b"10,1\nnope\n"[..]),
        Err(HistFileError::BadLine(2))
    ));
    c.reset();
    assert!(c.is_empty());
}
