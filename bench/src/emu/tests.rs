use super::*;

#[test]
fn generator_follows_the_wire_size_convention() {
    let c = RigConfig::new(Interface::Enso, Mode::Echo, 64);
    assert_eq!(c.frame_len(), 60);
    let g = c.generator();
    assert_eq!(g.sizes, SizeSpec::Fixed(60));
    assert_eq!(g.max_in_flight, Some(1024));
    assert!(g.paused);
    let rx = RigConfig::new(Interface::Packetized, Mode::Rx, 1518);
    assert_eq!(rx.generator().sizes, SizeSpec::Fixed(1514));
    assert_eq!(rx.generator().max_in_flight, None, "nothing comes back");
    assert!(RigConfig::new(Interface::Enso, Mode::Echo, 63)
        .check()
        .is_err());
    assert!(RigConfig::new(Interface::Enso, Mode::Echo, 1519)
        .check()
        .is_err());
}

#[test]
fn touch_reads_and_consumes() {
    let mut f = frames::udp_frame(60, 3);
    f[frames::SEQ_OFFSET..frames::SEQ_OFFSET + 8].copy_from_slice(&7u64.to_le_bytes());
    let mut t = Touch::default();
    assert_eq!(t.handle(&mut f), Verdict::Consume);
    assert_eq!(t.handle(&mut f), Verdict::Consume);
    assert_eq!(t.sum, 14);
    assert_eq!(t.handle(&mut [0u8; 10]), Verdict::Consume);
}

#[test]
fn trial_extras_name_drops_by_cause() {
    let t = RigTrial {
        elapsed_ns: 1_000_000,
        packets: 1000,
        bytes: 60_000,
        sent: 1010,
        nic_busy_ns: 500_000,
        app_busy_ns: 250_000,
        rx_notifications: 100,
        tx_notifications: 50,
        delivered: 1000,
        drops: [("pipe_full".to_string(), 10)].into(),
        unaccounted: 0,
        drained: true,
        pcie_up_bytes: 0,
        pcie_down_bytes: 0,
        pcie_metadata_bytes: 0,
        preempted: Default::default(),
        steal_ms: 0.0,
        app_pinned: true,
        app_perf: None,
        latency: None,
        stats: None,
    };
    let tr = t.to_trial();
    assert_eq!(tr.extra["drop_pipe_full"], 10.0);
    assert_eq!(tr.extra["drops"], 10.0);
    assert_eq!(tr.ns_per_packet("nic"), Some(500.0));
    assert_eq!(tr.ns_per_packet("app"), Some(250.0));
    assert!((tr.mpps() - 1.0).abs() < 1e-9);
}
