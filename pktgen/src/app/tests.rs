//! Tests of the command's reports and exit codes.

use super::summary::{search_status, shortfall, write_search, write_summary};
use super::*;
use crate::search::{SearchConfig, SearchResult, SizeResult};
use crate::stats::{Counters, TrafficSpan};

#[test]
fn summary_and_shortfall_note_use_the_send_time() {
    let cfg = cli::parse(["pktgen", "--size", "64", "--rate", "10Mpps"]).unwrap();
    let stream = TxStream::from_source(&cfg.traffic).unwrap();
    let limit = cfg.rate.limiter_setting(&stream.profile()).unwrap();
    let ms = Duration::from_millis;
    let mut rec = Recorder::new();
    let c = Counters {
        tx_packets: 1_000_000,
        tx_bytes: 60_000_000,
        rx_packets: 1_000_000,
        rx_bytes: 60_000_000,
        ..Counters::default()
    };
    // 1 M frames sent in 0.5 s, back by 0.6 s, the run over at 0.7 s.
    let span = TrafficSpan {
        first_sent: Some(ms(0)),
        last_sent: Some(ms(500)),
        last_received: Some(ms(600)),
    };
    rec.finish(c, ms(700), span);
    let mut report = Report::new(cfg, ClockInfo::emulated_nic());
    report.finish(&rec, None);
    let note = shortfall(&report.totals, false, Some(limit), &stream).unwrap();
    assert!(
        note.starts_with("sent 2.000 Mpps, 20.0% of the 10.000 Mpps"),
        "{note}"
    );
    let mut out = Vec::new();
    write_summary(&mut out, &report, None).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(
            "TX 1000000 frames, 60000000 bytes in 0.500 s of sending: 1.344 Gb/s, 2.000 Mpps"
        ),
        "{text}"
    );
    assert!(
        text.contains("RX 1000000 frames, 60000000 bytes in 0.600 s to the last received: 1.120 Gb/s, 1.667 Mpps"),
        "{text}"
    );
    assert!(shortfall(&report.totals, true, Some(limit), &stream).is_none());
}

fn size(size: usize, rate: Option<f64>, tried: &[f64], finished: bool) -> SizeResult {
    use crate::search::{TrialOutcome, TrialRecord, TrialSpec};
    SizeResult {
        size: Some(size),
        rate_gbps: rate,
        rate_mpps: rate.map(|r| r * 1.488),
        converged: rate.is_some() && finished,
        finished,
        trials: tried
            .iter()
            .map(|&r| TrialRecord {
                spec: TrialSpec {
                    size: Some(size),
                    rate_gbps: r,
                    duration: Duration::from_secs(1),
                },
                outcome: TrialOutcome::default(),
                lossless: Some(r) == rate,
                passed: Some(r) == rate,
            })
            .collect(),
    }
}

#[test]
fn search_summary_says_when_no_rate_was_found_or_it_was_cut_short() {
    let text = |z: &SearchResult| {
        let mut out = Vec::new();
        write_search(&mut out, z).unwrap();
        String::from_utf8(out).unwrap()
    };
    let mut z = SearchResult {
        config: SearchConfig::default(),
        sizes: vec![size(64, Some(1.0), &[2.0, 1.0], true)],
        interrupted: false,
    };
    assert_eq!(
        text(&z),
        "zero-loss 64 B: 1.000 Gb/s (1.488 Mpps), 2 trials\n"
    );
    assert_eq!(search_status(&z), 0);
    // No trial passed: no rate, the lowest tried, status 1.
    z.sizes.push(size(128, None, &[1.0, 0.5, 0.25], true));
    assert!(text(&z).ends_with(
        "zero-loss 128 B: no lossless rate found (lowest tried 0.250 Gb/s), 3 trials\n"
    ));
    assert_eq!(search_status(&z), 1);
    // Interrupted during a size: what it found so far; status 130.
    z.sizes.push(size(256, Some(0.5), &[1.0, 0.5], false));
    z.sizes.push(size(512, None, &[], false));
    z.interrupted = true;
    let t = text(&z);
    assert!(
        t.ends_with(
            "zero-loss 256 B: interrupted after 2 trials, best so far 0.500 Gb/s\n\
             zero-loss 512 B: interrupted after 0 trials\ninterrupted\n"
        ),
        "{t}"
    );
    assert_eq!(search_status(&z), 130);
}

#[test]
fn the_nic_is_named_the_limit_when_it_dropped_or_sent_less() {
    use crate::report::DeviceReport;
    use std::collections::BTreeMap;
    let device = |drops: &[(&str, u64)], mine: u64| DeviceReport {
        drops: drops.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        total_drops: drops.iter().map(|(_, n)| n).sum(),
        generator_drops: BTreeMap::from([
            ("pipe_full".to_string(), mine),
            ("notif_ring_full".to_string(), 0),
        ]),
        ..DeviceReport::default()
    };
    // Nothing dropped, the rate reached (or no counters): no verdict.
    let clean = device(&[("pipe_full", 0), ("wire_fifo_full", 0)], 0);
    assert_eq!(nic_limit(Some(&clean), None), None);
    assert_eq!(nic_limit(None, None), None);

    let d = device(&[("pipe_full", 1200), ("wire_fifo_full", 0)], 1200);
    let l = nic_limit(Some(&d), None).unwrap();
    assert_eq!(
        l.line,
        "the NIC dropped 1200 frames (pipe full 1200; all in the generator's RX pipes): the \
         generator's receiver, not the NIC or the wire, was the limit at this rate"
    );
    assert_eq!((l.dropped, l.in_generator_pipes), (1200, 1200));
    assert!(l.generator_receiver);
    let both = nic_limit(Some(&d), Some((4.5e6, 5.0e6))).unwrap();
    assert!(
        both.line.ends_with(
            "all in the generator's RX pipes) and sent 90.0% of the rate asked for: the \
             generator's receiver and the emulated NIC, not the wire, were the limit at this rate"
        ),
        "{}",
        both.line
    );
    assert!(both.generator_receiver);
    assert_eq!(l.causes, BTreeMap::from([("pipe_full".to_string(), 1200)]));
    assert_eq!(l.sent_fraction, None);

    let d = device(&[("pipe_full", 30), ("wire_fifo_full", 10)], 0);
    let l = nic_limit(Some(&d), Some((4.0e6, 5.0e6))).unwrap();
    assert_eq!(
        l.line,
        "the NIC dropped 40 frames (pipe full 30, wire fifo full 10; none in the generator's RX \
         pipes) and sent 80.0% of the rate asked for: the emulated NIC, not the wire, was the \
         limit at this rate"
    );
    let f = l.sent_fraction.unwrap();
    assert!((0.799..0.801).contains(&f), "{f}");
    assert!(!l.generator_receiver);

    // Sending short alone is enough, and the report carries the verdict.
    let l = nic_limit(Some(&clean), Some((1.0e6, 2.0e6))).unwrap();
    assert_eq!(l.dropped, 0);
    assert!(l
        .line
        .starts_with("sent 50.0% of the rate asked for: the emulated NIC"));
    let cfg = cli::parse(["pktgen", "--size", "64"]).unwrap();
    let mut report = Report::new(cfg, ClockInfo::emulated_nic());
    report.nic_limit = Some(l.clone());
    let mut out = Vec::new();
    write_summary(&mut out, &report, None).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with(&format!("{}\n", l.line)), "{text}");
    let back: Report = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(back.nic_limit, Some(l));
}
