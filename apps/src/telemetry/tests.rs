//! Sketch tests against exact counts.
//!
//! # The error bound used here
//!
//! For a flow with `f` packets out of `n`, one row's estimate is `1/p` times
//! the samples that landed in its counter: its own (binomial, variance
//! `f(1-p)/p` once scaled) plus those of the flows that share the counter.
//! Each other flow `y` shares it with probability `1/w` and then adds
//! variance `f_y^2 + f_y(1-p)/p`. The few largest flows would dominate that
//! sum but almost never share a counter with a given flow in more than one
//! row, and the median (Count Sketch) or minimum (Count-Min) over rows
//! ignores a minority of such rows. So the bound takes, per row,
//!
//! ```text
//! sigma^2(f) = f(1-p)/p + (F2_res + (n - f)(1-p)/p) / w
//! ```
//!
//! where `F2_res` is the sum of squared counts of all flows but the 100
//! largest, and checks that no tested flow shares a counter with one of
//! the 100 largest in more rows than the estimator tolerates (2 of 5 for
//! the median, 4 of 5 for the minimum). Then:
//!
//! * Count Sketch (unbiased): `|estimate - f| <= 4 sigma(f)`;
//! * Count-Min (collisions only add, `(n - f)/w` on average):
//!   `f - 4 sigma(f) <= estimate <= f + (n - f)/w + 4 sigma(f)`.
//!
//! Four standard deviations keep the chance of a violation per flow below
//! about 1e-4 even for the minimum of five rows, and the trace is seeded,
//! so the test is deterministic.
//!
//! **Heavy-hitter tolerance.** A flow whose whole interval lies above the
//! threshold must be reported; one whose whole interval lies below must not;
//! flows whose interval straddles the threshold may go either way, because
//! no estimator with this error can classify them. At p = 0.01 after 4 M
//! packets a flow at the threshold (about 2,100 packets) has only about 21
//! samples per row, so that band is wide (roughly 0.45x to 2.3x the
//! threshold); with p = 1 it shrinks to the collision noise, a few percent.

use super::*;
use crate::packet::{emit_udp_frame, Endpoints, MacAddr};
use crate::zipf::Zipf;
use std::collections::HashSet;
use std::sync::OnceLock;

const PACKETS: usize = 1 << 22;
const FLOWS: u64 = 1 << 20;
/// Above 1.45 fewer than 100 flows exceed 0.05% of the traffic, so the
/// 100-entry table can hold every heavy hitter; 1.5 gives about 83.
const SKEW: f64 = 1.5;

fn flow(rank: u32) -> FlowKey {
    FlowKey {
        src: Ipv4Addr::from(0x0A00_0000 + rank),
        dst: Ipv4Addr::from(0xC0A8_0000 | (mix64(u64::from(rank)) as u32 & 0xFFFF)),
    }
}

struct Trace {
    /// Flow rank of each packet.
    packets: Vec<u32>,
    /// Exact packets per rank.
    counts: Vec<u64>,
    /// Ranks sorted by decreasing count.
    by_count: Vec<u32>,
}

fn trace() -> &'static Trace {
    static TRACE: OnceLock<Trace> = OnceLock::new();
    TRACE.get_or_init(|| {
        let z = Zipf::new(FLOWS, SKEW).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2019);
        let packets: Vec<u32> = (0..PACKETS).map(|_| z.sample(&mut rng) as u32).collect();
        let mut counts = vec![0u64; FLOWS as usize];
        for &r in &packets {
            counts[r as usize] += 1;
        }
        let mut by_count: Vec<u32> = (0..FLOWS as u32).collect();
        by_count.sort_by(|&a, &b| counts[b as usize].cmp(&counts[a as usize]).then(a.cmp(&b)));
        Trace {
            packets,
            counts,
            by_count,
        }
    })
}

fn run(config: &NitroConfig, packets: &[u32]) -> NitroSketch {
    let mut s = NitroSketch::new(config).unwrap();
    for &r in packets {
        s.observe(flow(r));
    }
    s
}

/// The ordinary (unsampled) sketch's counters, computed independently.
fn reference_counters(s: &NitroSketch, packets: &[u32]) -> Vec<i32> {
    let mut c = vec![0i32; s.depth() * s.width()];
    for &r in packets {
        let k = flow(r);
        for row in 0..s.depth() {
            let delta = match s.kind() {
                SketchKind::CountMin => 1,
                SketchKind::CountSketch => s.row_sign(row, k),
            };
            c[row * s.width() + s.row_index(row, k)] += delta;
        }
    }
    c
}

#[test]
fn with_p_one_it_is_exactly_the_unsampled_sketch() {
    let packets = &trace().packets[..300_000];
    for base in [NitroConfig::count_min(), NitroConfig::count_sketch()] {
        // A narrow sketch too, so that collisions are exercised.
        for width in [base.width, 997] {
            let cfg = NitroConfig {
                probability: 1.0,
                width,
                ..base
            };
            let s = run(&cfg, packets);
            assert_eq!(s.packets(), packets.len() as u64);
            assert_eq!(s.samples(), (packets.len() * s.depth()) as u64);
            assert_eq!(
                s.counters(),
                &reference_counters(&s, packets)[..],
                "{cfg:?}"
            );
        }
    }
}

#[test]
fn gaps_are_geometric_with_mean_one_over_p() {
    let mut s = NitroSketch::new(&NitroConfig::count_min()).unwrap();
    let draws = 200_000;
    let (mut sum, mut ones) = (0u64, 0u64);
    for _ in 0..draws {
        let g = s.draw_gap();
        assert!(g >= 1);
        sum += g;
        ones += u64::from(g == 1);
    }
    let mean = sum as f64 / draws as f64;
    // Mean 1/p = 100, standard deviation of the mean sqrt(1-p)/p/sqrt(draws).
    assert!(
        (mean - 100.0).abs() < 5.0 * 99.5 / (draws as f64).sqrt(),
        "mean gap {mean}"
    );
    // P(gap = 1) = p.
    let share = ones as f64 / draws as f64;
    assert!(
        (share - 0.01).abs() < 5.0 * (0.01f64 * 0.99 / draws as f64).sqrt(),
        "{share}"
    );
}

#[test]
fn sampled_slots_occur_at_rate_p_and_packets_are_counted_exactly() {
    let packets = &trace().packets[..1_000_000];
    let mut s = NitroSketch::new(&NitroConfig::count_min()).unwrap();
    for (i, &r) in packets.iter().enumerate() {
        s.observe(flow(r));
        if i < 20_000 {
            assert_eq!(s.packets(), i as u64 + 1);
        }
    }
    assert_eq!(s.packets(), packets.len() as u64);
    let expected = packets.len() as f64 * 5.0 * 0.01;
    let got = s.samples() as f64;
    assert!(
        (got - expected).abs() < 5.0 * expected.sqrt(),
        "{got} samples, expected {expected}"
    );
    // Count-Min counters hold exactly the sampled updates.
    assert_eq!(
        s.counters().iter().map(|&c| i64::from(c)).sum::<i64>() as u64,
        s.samples()
    );
}

struct Bounds {
    lower: f64,
    upper: f64,
}

/// The interval of the module docs for the flow of `rank`.
fn bounds(s: &NitroSketch, t: &Trace, rank: u32, f2_res: f64, top: &[u32]) -> Bounds {
    let (n, p, w) = (t.packets.len() as f64, s.probability(), s.width() as f64);
    let f = t.counts[rank as usize] as f64;
    let sigma = (f * (1.0 - p) / p + (f2_res + (n - f) * (1.0 - p) / p) / w).sqrt();
    // The estimator tolerates a minority (median) or all but one (minimum)
    // of rows shared with one of the largest flows.
    let shared_rows = (0..s.depth())
        .filter(|&row| {
            let col = s.row_index(row, flow(rank));
            top.iter()
                .any(|&o| o != rank && s.row_index(row, flow(o)) == col)
        })
        .count();
    match s.kind() {
        SketchKind::CountSketch => {
            assert!(
                shared_rows <= s.depth() / 2,
                "rank {rank} collides in {shared_rows} rows"
            );
            Bounds {
                lower: f - 4.0 * sigma,
                upper: f + 4.0 * sigma,
            }
        }
        SketchKind::CountMin => {
            assert!(shared_rows < s.depth(), "rank {rank} collides in every row");
            Bounds {
                lower: f - 4.0 * sigma,
                upper: f + (n - f) / w + 4.0 * sigma,
            }
        }
    }
}

/// Checks estimates and the heavy-hitter report of `s` after the whole
/// trace; returns (flows that had to be reported, flows reported).
fn check_accuracy(s: &NitroSketch) -> (usize, usize) {
    let t = trace();
    assert_eq!(s.packets(), t.packets.len() as u64);
    let top = &t.by_count[..100];
    let f2_res: f64 = t.by_count[100..]
        .iter()
        .map(|&r| (t.counts[r as usize] as f64).powi(2))
        .sum();
    let threshold = DEFAULT_THRESHOLD * t.packets.len() as f64;
    assert_eq!(s.threshold_packets(), threshold);

    // Estimates of the 300 largest flows (all heavy hitters and well past
    // the threshold) lie within their bounds.
    for &rank in &t.by_count[..300] {
        let b = bounds(s, t, rank, f2_res, top);
        let e = s.estimate(flow(rank));
        assert!(
            b.lower <= e && e <= b.upper,
            "rank {rank}: true {}, estimate {e}, bounds [{:.0}, {:.0}]",
            t.counts[rank as usize],
            b.lower,
            b.upper
        );
    }

    // The report: every flow surely above the threshold is in it, and no
    // flow surely below.
    let report = s.report();
    assert_eq!(report.packets, t.packets.len() as u64);
    assert!(report.heavy_hitters.len() <= DEFAULT_TOP_K);
    assert!(report
        .heavy_hitters
        .windows(2)
        .all(|w| w[0].estimate >= w[1].estimate));
    let reported: HashSet<FlowKey> = report.heavy_hitters.iter().map(|h| h.flow).collect();
    let mut must = 0;
    for &rank in &t.by_count[..300] {
        let b = bounds(s, t, rank, f2_res, top);
        if b.lower >= threshold {
            must += 1;
            assert!(
                reported.contains(&flow(rank)),
                "missed heavy hitter rank {rank}"
            );
        }
        if b.upper < threshold {
            assert!(
                !reported.contains(&flow(rank)),
                "reported light flow rank {rank}"
            );
        }
    }
    // Reported flows outside the 300 largest would be far below threshold.
    let largest: HashSet<FlowKey> = t.by_count[..300].iter().map(|&r| flow(r)).collect();
    assert!(reported.is_subset(&largest));
    let worst_top10 = t.by_count[..10]
        .iter()
        .map(|&r| (s.estimate(flow(r)) / t.counts[r as usize] as f64 - 1.0).abs())
        .fold(0.0, f64::max);
    eprintln!(
        "{:?} p={}: {must} flows surely heavy, {} reported, worst relative error in the top 10 {:.4}",
        s.kind(),
        s.probability(),
        reported.len(),
        worst_top10
    );
    (must, reported.len())
}

#[test]
fn count_min_heavy_hitters_within_the_error_bound() {
    let s = run(&NitroConfig::count_min(), &trace().packets);
    let (must, reported) = check_accuracy(&s);
    assert!(
        must >= 40,
        "only {must} flows are surely heavy: the test is too weak"
    );
    assert!(reported >= must);
}

#[test]
fn count_sketch_heavy_hitters_within_the_error_bound() {
    let s = run(&NitroConfig::count_sketch(), &trace().packets);
    let (must, reported) = check_accuracy(&s);
    assert!(
        must >= 40,
        "only {must} flows are surely heavy: the test is too weak"
    );
    assert!(reported >= must);
}

/// Unsampled, only hash collisions blur the picture: the report must equal
/// the true heavy-hitter set except for flows within a few percent of the
/// threshold.
#[test]
fn unsampled_report_equals_the_true_heavy_hitters() {
    let t = trace();
    let s = run(
        &NitroConfig {
            probability: 1.0,
            ..NitroConfig::count_sketch()
        },
        &t.packets,
    );
    let (must, reported) = check_accuracy(&s);
    let truly_heavy = t
        .by_count
        .iter()
        .take_while(|&&r| t.counts[r as usize] as f64 >= DEFAULT_THRESHOLD * t.packets.len() as f64)
        .count();
    assert!(
        truly_heavy < DEFAULT_TOP_K,
        "{truly_heavy} true heavy hitters"
    );
    assert!(must + 4 >= truly_heavy, "{must} certain of {truly_heavy}");
    assert!(
        reported.abs_diff(truly_heavy) <= 4,
        "{reported} reported, {truly_heavy} true"
    );
}

fn endpoints(src: Ipv4Addr, dst: Ipv4Addr) -> Endpoints {
    Endpoints {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: src,
        dst_ip: dst,
        src_port: 1,
        dst_port: 2,
    }
}

#[test]
fn frames_are_keyed_by_source_and_destination() {
    let mut t = Telemetry::new(
        &NitroConfig {
            probability: 1.0,
            ..NitroConfig::count_min()
        },
        Duration::from_secs(1),
    )
    .unwrap();
    let a = FlowKey {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
    };
    let b = FlowKey {
        src: Ipv4Addr::new(10, 0, 0, 2),
        dst: Ipv4Addr::new(10, 0, 0, 1),
    };
    let mut buf = [0u8; 128];
    for (key, n) in [(a, 30u32), (b, 12)] {
        let mut ep = endpoints(key.src, key.dst);
        for i in 0..n {
            ep.src_port = i as u16; // ports do not matter
            let len = emit_udp_frame(&mut buf, &ep, b"x").unwrap();
            assert_eq!(FlowKey::from_frame(&buf[..len]), Some(key));
            assert_eq!(t.process(&buf[..len]), Verdict::Consume);
        }
    }
    t.process(&[0u8; 10]);
    let s = t.sketch();
    assert_eq!((s.packets(), s.unkeyed()), (43, 1));
    assert_eq!(s.estimate(a), 30.0);
    assert_eq!(s.estimate(b), 12.0);
    let flows: Vec<(FlowKey, f64)> = s.top_flows().iter().map(|h| (h.flow, h.estimate)).collect();
    assert_eq!(flows, [(a, 30.0), (b, 12.0)]);
}

#[test]
fn unsampled_frames_are_not_read() {
    // Garbage frames: only sampled ones are parsed, and they count as
    // unkeyed; nothing reaches the counters.
    let mut s = NitroSketch::new(&NitroConfig::count_sketch()).unwrap();
    let mut sampled_packets = 0u64;
    for _ in 0..100_000 {
        let before = s.samples();
        s.observe_frame(&[0xFF; 3]);
        sampled_packets += u64::from(s.samples() > before);
    }
    assert_eq!(s.packets(), 100_000);
    assert_eq!(s.unkeyed(), sampled_packets);
    assert!(
        sampled_packets > 3_000 && sampled_packets < 6_000,
        "{sampled_packets}"
    );
    assert!(s.counters().iter().all(|&c| c == 0));
    assert!(s.top_flows().is_empty());
}

#[test]
fn reports_are_periodic_and_reset_starts_an_epoch() {
    let mut t = Telemetry::new(
        &NitroConfig {
            probability: 1.0,
            ..NitroConfig::count_sketch()
        },
        Duration::from_millis(100),
    )
    .unwrap();
    let heavy = flow(1);
    for i in 0..10_000u32 {
        t.sketch_mut()
            .observe(if i % 2 == 0 { heavy } else { flow(100 + i) });
    }
    let t0 = Instant::now();
    assert_eq!(t.poll_report(t0), None);
    assert_eq!(t.poll_report(t0 + Duration::from_millis(50)), None);
    let r = t.poll_report(t0 + Duration::from_millis(100)).expect("due");
    assert_eq!(r.packets, 10_000);
    assert_eq!(r.threshold_packets, 5.0);
    assert_eq!(r.heavy_hitters[0].flow, heavy);
    assert_eq!(r.heavy_hitters[0].estimate, 5_000.0);
    let text = r.to_string();
    assert!(
        text.contains("10.0.0.1 -> ") && text.contains("50.000%"),
        "{text}"
    );
    assert_eq!(t.poll_report(t0 + Duration::from_millis(150)), None);
    t.sketch_mut().reset();
    assert_eq!(t.sketch().packets(), 0);
    assert_eq!(t.sketch().estimate(heavy), 0.0);
    t.sketch_mut().observe(heavy);
    assert_eq!(t.sketch().packets(), 1);
}

#[test]
fn sizes_are_bounded_before_anything_is_allocated() {
    let ok = NitroConfig::count_min();
    let bad = |c: NitroConfig| NitroSketch::new(&c).unwrap_err();
    // depth * width wrapped in release builds (a tiny counter array that
    // rows then indexed beyond); just above the limit would be 1 GiB more.
    for (depth, width) in [
        (2, usize::MAX / 2 + 1),
        (1, MAX_COUNTERS + 1),
        (5, MAX_COUNTERS / 5 + 1),
        (MAX_DEPTH, usize::MAX),
    ] {
        let e = bad(NitroConfig { depth, width, ..ok });
        assert_eq!(e, NitroConfigError::TooManyCounters { depth, width });
        assert!(e.to_string().contains("1 GiB"), "{e}");
    }
    // 2 * top_k overflowed in the index size.
    for top_k in [MAX_TOP_K + 1, usize::MAX / 2 + 1, usize::MAX] {
        let e = bad(NitroConfig { top_k, ..ok });
        assert_eq!(e, NitroConfigError::BadTopK(top_k));
        assert!(e.to_string().contains(&MAX_TOP_K.to_string()), "{e}");
    }
    // Sensible sizes (including the paper's) still work.
    for c in [
        NitroConfig::count_min(),
        NitroConfig::count_sketch(),
        NitroConfig {
            depth: 1,
            width: 1 << 20,
            top_k: 1 << 16,
            ..ok
        },
    ] {
        let s = NitroSketch::new(&c).unwrap();
        assert_eq!((s.depth(), s.width()), (c.depth, c.width));
        assert_eq!(s.counters().len(), c.depth * c.width);
    }
}

#[test]
fn configuration_is_validated() {
    let ok = NitroConfig::count_min();
    let bad = |c: NitroConfig| NitroSketch::new(&c).unwrap_err();
    assert_eq!(
        bad(NitroConfig { depth: 0, ..ok }),
        NitroConfigError::BadDepth(0)
    );
    assert_eq!(
        bad(NitroConfig { depth: 17, ..ok }),
        NitroConfigError::BadDepth(17)
    );
    assert_eq!(
        bad(NitroConfig { width: 0, ..ok }),
        NitroConfigError::BadWidth
    );
    assert_eq!(
        bad(NitroConfig {
            probability: 0.0,
            ..ok
        }),
        NitroConfigError::BadProbability(0.0)
    );
    assert_eq!(
        bad(NitroConfig {
            probability: 1.5,
            ..ok
        }),
        NitroConfigError::BadProbability(1.5)
    );
    // So small that 1 - p is 1: the gaps would be infinite.
    assert_eq!(
        bad(NitroConfig {
            probability: 1e-17,
            ..ok
        }),
        NitroConfigError::BadProbability(1e-17)
    );
    assert!(NitroSketch::new(&NitroConfig {
        probability: MIN_PROBABILITY,
        ..ok
    })
    .is_ok());
    assert_eq!(
        bad(NitroConfig { top_k: 0, ..ok }),
        NitroConfigError::BadTopK(0)
    );
    assert_eq!(
        bad(NitroConfig {
            threshold: -1.0,
            ..ok
        }),
        NitroConfigError::BadThreshold(-1.0)
    );
    // Even depths take the mean of the middle rows.
    let mut s = NitroSketch::new(&NitroConfig {
        depth: 4,
        probability: 1.0,
        ..NitroConfig::count_sketch()
    })
    .unwrap();
    s.observe(flow(3));
    assert_eq!(s.estimate(flow(3)), 1.0);
}
