use super::*;

#[test]
fn a_threaded_run_keeps_its_probe_and_contention() {
    use crate::interleave::{variant, Interleave, TrialResult};
    use std::time::Duration;
    let mut n = 0;
    let mut a = variant("enso", move |d| {
        n += 1;
        TrialResult {
            packets: 10,
            elapsed: d,
            preempted: u64::from(n == 2),
            ..Default::default()
        }
    });
    let mut b = variant("packetized", |d| TrialResult {
        packets: 10,
        elapsed: d,
        ..Default::default()
    });
    let mut report = Interleave::new(Duration::from_millis(1))
        .rounds(2)
        .warmup(0)
        .no_probe()
        .run(&crate::placement::Placement::pick(), &mut [&mut a, &mut b]);
    report.probe_median_ns = Some(84.0);
    report.probe_range_ns = Some((80.0, 370.0));
    let c = RunContext::of(&report);
    assert_eq!(c.probe_rtt_ns, Some(84.0));
    assert_eq!(c.probe_rtt_range_ns, Some([80.0, 370.0]));
    assert_eq!((c.contended_trials, c.trials), (1, 4));
    assert_eq!(
        c.describe(),
        "probe: cross-core round trip median 84 ns (80..370); contended: 1 of 4 trials \
         shared their cores with other work"
    );
}

const SAMPLE: &str = "\
desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: D1 cache:         32768 B, 64 B, 8-way associative
desc: LL cache:         33554432 B, 64 B, 16-way associative
cmd: bench cache-worker
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
fl=/src/enso-lib/src/app.rs
fn=enso::app::EnsoDriver::poll
10 100 1 0 40 2 1 20 1
fi=/src/nic-emu/src/wire.rs
11 50 0 0 10 0 0
fe=/src/enso-lib/src/app.rs
fl=/src/nic-emu/src/engine.rs
fn=nic_emu::engine::Engine::step
5 1000 3 1 300 30 2 200 20 2
fl=/glibc/memmove.S
fn=__memmove_avx_unaligned_erms
1 500 0 0 100 10 1 100 10 1
fl=/src/apps/src/echo.rs
fn=<enso_apps::echo::Echo as enso::app::PacketHandler>::handle
3 70 0 0 7 1 0 7 0 0
fl=/src/enso-lib/src/app.rs
fn=enso::app::EnsoDriver::poll
12 10 0 0 0 0 0 0 0 0
summary: 1730 4 1 457 43 4 327 31 3
";

#[test]
fn parses_and_attributes_by_function() {
    let p = parse_profile(SAMPLE).unwrap();
    assert_eq!(p.events.len(), 9);
    assert_eq!(p.desc.len(), 3);
    assert_eq!(p.functions.len(), 4, "the same (file, fn) is merged");
    let poll = &p.functions[0];
    // Lines 10, 11 (inlined file, short line: zero-filled), 12.
    assert_eq!(poll.counts, vec![160, 1, 0, 50, 2, 1, 20, 1, 0]);
    let sides = p.by_side();
    let app = sides[&CodeSide::App];
    assert_eq!(app.instructions, 230.0);
    assert_eq!(app.data_refs, 50.0 + 20.0 + 7.0 + 7.0);
    assert_eq!(app.d1_misses, 2.0 + 1.0 + 1.0);
    assert_eq!(app.ll_data_misses, 1.0);
    assert_eq!(sides[&CodeSide::Engine].instructions, 1000.0);
    assert_eq!(sides[&CodeSide::Engine].d1_misses, 50.0);
    assert_eq!(sides[&CodeSide::Other].ll_data_misses, 2.0);
}

#[test]
fn cache_geometry() {
    assert_eq!(parse_size("32K"), Some(32768));
    assert_eq!(parse_size("32M\n"), Some(32 << 20));
    assert_eq!(parse_size("x"), None);
    let l1 = CacheGeometry {
        size: 32768,
        ways: 8,
        line: 64,
    };
    assert_eq!(l1.valgrind_spec().as_deref(), Some("32768,8,64"));
    let odd = CacheGeometry {
        size: 12 << 20,
        ways: 16,
        line: 64,
    };
    assert_eq!(odd.valgrind_spec(), None, "12 MiB / 16 ways: 12288 sets");
    let zero = CacheGeometry {
        size: 1,
        ways: 0,
        line: 64,
    };
    assert_eq!(zero.valgrind_spec(), None);
}

#[test]
fn classification() {
    assert_eq!(classify("enso::device::Device::poll"), CodeSide::App);
    assert_eq!(
        classify("<enso_apps::echo::Echo as enso::app::PacketHandler>::handle"),
        CodeSide::App
    );
    assert_eq!(
        classify("bench::stepped::Stepped::app_phase"),
        CodeSide::App
    );
    assert_eq!(
        classify("bench::stepped::Stepped::engine_phase"),
        CodeSide::Engine
    );
    assert_eq!(
        classify("pcie_model::link::LinkConfig::dma_write_tlps"),
        CodeSide::Engine
    );
    assert_eq!(classify("__memmove_avx_unaligned_erms"), CodeSide::Other);
    assert_eq!(
        classify("core::ptr::drop_in_place<enso::Device>"),
        CodeSide::Other
    );
}

#[test]
fn bad_files_are_errors() {
    assert!(parse_profile("hello").is_err());
    assert!(
        parse_profile("events: Ir\n10 5\n").is_err(),
        "counts before fn="
    );
    assert!(parse_profile("events: Ir\nfn=f\n10 x\n").is_err());
}

#[test]
fn difference_of_two_runs_is_per_packet() {
    let p = parse_profile(SAMPLE).unwrap();
    let mut big = p.clone();
    for f in &mut big.functions {
        for c in &mut f.counts {
            *c *= 3;
        }
    }
    let w = |n| WorkerOutput {
        packets: n,
        rx_notifications: n / 10,
        drops: 0,
    };
    let r = difference(Interface::Enso, 64, &(w(100), p), &(w(300), big)).unwrap();
    // App instructions went 230 -> 690 over 200 packets.
    assert!((r.app_instructions_per_pkt - 2.3).abs() < 1e-9);
    assert!((r.app_d1_misses_per_pkt - 0.04).abs() < 1e-9);
    assert!((r.engine_instructions_per_pkt.unwrap() - 10.0).abs() < 1e-9);
    assert!((r.notifications_per_pkt.unwrap() - 0.1).abs() < 1e-9);
    assert_eq!(
        r.app_top_functions[0].function,
        "enso::app::EnsoDriver::poll"
    );
    let r0 = r.clone();
    let mut pk = r.clone();
    pk.interface = "packetized".into();
    pk.app_instructions_per_pkt = 4.6;
    pk.app_d1_misses_per_pkt = 0.16;
    let ra = ratios(&[r, pk]).unwrap();
    assert!((ra.app_instructions - 0.5).abs() < 1e-9);
    assert!((ra.app_d1_misses - 0.25).abs() < 1e-9);
    assert!(targets(&ra).iter().all(|t| t.1));
    assert_eq!(
        ra.app_d1_misses_beyond_frame, None,
        "under a miss per packet"
    );
    let big = |n: &str, d1: f64| CacheResult {
        interface: n.into(),
        app_d1_misses_per_pkt: d1,
        ..r0.clone()
    };
    let rb = ratios(&[big("enso", 1.1), big("packetized", 1.8)]).unwrap();
    assert!((rb.app_d1_misses_beyond_frame.unwrap() - 0.125).abs() < 1e-9);
    assert!(targets(&rb)[0].0.contains("which both take: 0.125"));
}
