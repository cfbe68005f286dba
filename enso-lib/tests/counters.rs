//! The NIC's counters through the library ([`Device::port_stats`]), from a
//! device in this process (asked directly) and from a standalone one (its
//! `stats.json` snapshot), whose port 0 loops back what is sent.

use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions, FlowRule, PortStats, StatsError};
use nic_emu::testframe::{FrameKind, TestFrames, DST_IP, DST_PORT};
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

fn rule(flow: u16) -> FlowRule {
    FlowRule {
        dst_ip: DST_IP,
        dst_port: DST_PORT + flow,
        protocol: 17,
        ..Default::default()
    }
}

/// Sends `n` 64-byte frames of `flow` from TX pipe `tx`.
fn send(dev: &mut Device, tx: enso::TxPipe, flow: u32, n: usize) {
    let tf = TestFrames::new(4, 0);
    let buf = dev.tx_buf(tx, n * 64).unwrap();
    for (i, slot) in buf.chunks_mut(64).enumerate() {
        tf.build(FrameKind::Ipv4Udp, i as u64, flow, 64, slot);
    }
    dev.send(tx, n * 64, 0).unwrap();
}

fn check(standalone: bool) {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("ctr-{standalone}-{}", std::process::id());
    let mut cfg = DeviceConfig::new(&name, WireConfig::Loopback);
    cfg.dir = dir.path().into();
    // 256 flits a pipe: one kept free, 255 one-flit frames fit.
    cfg.pipe_size = 16 << 10;
    let nic = Nic::start(
        cfg,
        RunOptions {
            listen: standalone,
            ..Default::default()
        },
    )
    .unwrap();
    let opts = DeviceOptions {
        pipes: 2,
        tx_pipes: 1,
        ..Default::default()
    };
    let mut dev = if standalone {
        Device::open_in(dir.path(), &name, opts).unwrap()
    } else {
        Device::attach_nic(&nic, opts).unwrap()
    };
    assert_eq!(dev.port_stats(1), Err(StatsError::NoPort(1)));
    let a = dev.alloc_rx_pipe(false).unwrap();
    let b = dev.alloc_rx_pipe(false).unwrap();
    dev.bind(a, rule(1)).unwrap();
    dev.bind(b, rule(2)).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    // 5 frames to `a`, 300 to `b` (which is never read: 45 do not fit),
    // and 3 that match no rule.
    send(&mut dev, tx, 1, 5);
    send(&mut dev, tx, 2, 300);
    send(&mut dev, tx, 3, 3);
    let until = Instant::now() + Duration::from_secs(5);
    let s: PortStats = loop {
        let _ = dev.reap_completions();
        // A standalone device writes its first snapshot 200 ms after it
        // starts.
        let s = match dev.port_stats(0) {
            Ok(s) => s,
            Err(e) if standalone && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
                eprintln!("no snapshot yet: {e}");
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        if s.rx_frames >= 308 && s.pipes.iter().map(|p| p.rx_frames).sum::<u64>() >= 260 {
            break s;
        }
        assert!(Instant::now() < until, "counters did not arrive: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!((s.port, s.rx_frames, s.tx_frames), (0, 308, 308), "{s:?}");
    assert_eq!((s.rx_bytes, s.tx_bytes), (308 * 64, 308 * 64), "{s:?}");
    assert_eq!(s.drops.no_match, 3, "{s:?}");
    assert_eq!(s.pipes.len(), 2);
    assert_eq!(s.pipes[0].pipe, a);
    assert_eq!((s.pipes[0].rx_frames, s.pipes[0].pipe_full), (5, 0));
    assert_eq!(s.pipes[1].pipe, b);
    assert_eq!((s.pipes[1].rx_frames, s.pipes[1].pipe_full), (255, 45));
    assert_eq!(s.dropped(), 48);
    drop(dev);
    nic.try_stop().unwrap();
}

#[test]
fn port_stats_of_an_in_process_device_count_frames_and_drops_by_cause() {
    check(false);
}

#[test]
fn port_stats_of_a_standalone_device_come_from_its_snapshot() {
    check(true);
}

#[test]
fn a_stepped_engine_gives_no_counters_through_the_handle() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = DeviceConfig::new(
        format!("ctr-step-{}", std::process::id()),
        WireConfig::Loopback,
    );
    cfg.dir = dir.path().into();
    let mut e = nic_emu::Engine::new(cfg).unwrap();
    let dev = Device::attach_engine(&mut e, DeviceOptions::default()).unwrap();
    match dev.port_stats(0) {
        Err(StatsError::Unavailable(m)) => assert!(m.contains("stepped"), "{m}"),
        other => panic!("{other:?}"),
    }
}
