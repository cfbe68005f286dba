//! Echo end to end through the emulated NIC: every frame comes back exactly
//! once with only the echo byte changed, and the counters add up.

use enso::Device;
use enso_tests::*;
use nic_emu::testframe::FrameKind;
use nic_emu::{Engine, GeneratorConfig, SizeSpec};

fn mixed(count: u64, flows: u32) -> GeneratorConfig {
    GeneratorConfig {
        sizes: SizeSpec::Range(64, 1518),
        kinds: vec![FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw],
        flows,
        count: Some(count),
        max_in_flight: Some(256),
        ..Default::default()
    }
}

#[test]
fn stepped_echo_mixed_sizes_many_pipes() {
    let (cfg, _dir) = generator_device("echo-mixed", mixed(300_000, 64));
    let mut engine = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut engine, opts(8)).unwrap();
    for _ in 0..8 {
        dev.alloc_rxtx_pipe(true).unwrap();
    }
    run_stepped_echo(&mut engine, &mut dev, 50_000_000);
    let s = engine.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(g.sent, 300_000);
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
    assert_eq!(g.returned, g.sent, "{g:?}");
    assert_eq!((g.corrupt, g.duplicate, g.foreign), (0, 0, 0));
    // Every pipe got traffic (hash over 64 flows).
    assert!(s.apps[0]
        .pipes
        .iter()
        .all(|p| p.counters.rx_frames > 10_000));
}
