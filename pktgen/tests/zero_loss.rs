//! The zero-loss search end to end, against an in-process device under
//! test whose capacity is set by the NIC's rate limiter on the echo
//! server's port.

use std::time::Duration;

use pktgen::cli::TrafficSource;
use pktgen::inprocess::{InProcessNic, InProcessOptions, GENERATOR_PORT};
use pktgen::rate::{FrameProfile, Rate};
use pktgen::search::{search, SearchConfig};
use pktgen::session::{Session, SessionOptions};
use pktgen::traffic::TrafficSpec;
use pktgen::zeroloss::DeviceTrial;

#[test]
fn search_converges_below_the_capacity_of_the_device_under_test() {
    const CAPACITY_GBPS: f64 = 0.2;
    // The echo server sends back at most 0.2 Gb/s of 64 B frames, and its
    // small pipes (14 ms of frames at that rate) overflow within a trial at
    // any rate the search tries above it.
    let limit = Rate::gbps(CAPACITY_GBPS)
        .limiter_setting(&FrameProfile::fixed(60))
        .unwrap();
    let dut = InProcessNic::start(&InProcessOptions {
        echo_pipes: 1,
        pipe_size: 256 << 10,
        echo_rate_limit: Some((limit.num, limit.den)),
        ..InProcessOptions::default()
    })
    .unwrap();
    let mut s = Session::attach_nic(
        dut.nic(),
        SessionOptions {
            queues: 2,
            port: GENERATOR_PORT,
        },
    )
    .unwrap();
    let cfg = SearchConfig {
        max_rate_gbps: 1.0,
        precision_gbps: 0.1,
        trial: Duration::from_millis(150),
        warmup: Duration::ZERO,
        sizes: vec![64],
        ..SearchConfig::default()
    };
    let mut trial = DeviceTrial::new(&mut s, TrafficSource::Synthetic(TrafficSpec::default()));
    // Three busy threads rather than four: the NIC's limiter keeps its rate
    // better when its engine thread is not crowded out.
    trial.single_core = true;
    let r = search(&cfg, &mut trial).unwrap();
    let z = &r.sizes[0];
    for t in &z.trials {
        eprintln!(
            "{:.4} Gb/s: sent {} received {} underrun {}",
            t.spec.rate_gbps, t.outcome.sent, t.outcome.received, t.outcome.underrun
        );
    }
    assert_eq!(z.size, Some(64));
    assert!(z.converged, "{z:?}");
    assert!(
        z.rate_gbps <= CAPACITY_GBPS,
        "{} Gb/s for a device of {CAPACITY_GBPS} Gb/s: {:?}",
        z.rate_gbps,
        z.trials
    );
    // Zero only if the machine was so busy that the generator never
    // offered the load of a trial.
    assert!(
        z.rate_gbps > 0.0 || z.trials.iter().all(|t| t.outcome.underrun),
        "{:?}",
        z.trials
    );
    // The rate reported is one a trial ran at and lost nothing.
    if z.rate_gbps > 0.0 {
        let at_rate: Vec<_> = z
            .trials
            .iter()
            .filter(|t| t.spec.rate_gbps == z.rate_gbps)
            .collect();
        assert!(!at_rate.is_empty());
        assert!(at_rate
            .iter()
            .all(|t| t.passed && t.outcome.sent > 0 && t.outcome.received == t.outcome.sent));
    }
    // The first trial, at 1 Gb/s, overflowed the device under test.
    assert!(!z.trials[0].passed);
    assert!(z.trials[0].outcome.sent > z.trials[0].outcome.received);
    drop(s);
    dut.stop().unwrap();
}
