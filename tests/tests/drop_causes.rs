//! Every cause under which the NIC drops a frame, provoked on purpose and
//! counted exactly, on the interfaces where it applies: frames the ports
//! refuse (oversize, malformed, matching nothing, a full wire FIFO), frames
//! a pipe or queue has no room or no notification for, frames a stream
//! pipe cannot carry, and frames sent to a port wired to nothing.
//!
//! The engine is stepped by the test (no thread), so every count is exact.

use enso::{Device, Mbuf};
use enso_tests::*;
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::wire::ETHERTYPE_IPV4;
use nic_emu::{DeviceConfig, Engine, GeneratorConfig, WireConfig};

/// A device with these ports, small rings, in a fresh directory.
fn device(name: &str, ports: Vec<WireConfig>) -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = DeviceConfig::new(name, ports[0].clone());
    cfg.ports = ports;
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 64 << 10;
    cfg.notif_ring_entries = 1024;
    (Engine::new(cfg).expect("device"), dir)
}

/// Sends `frames` from queue `q` (one buffer each), stepping the engine
/// until the ring took them all; returns the number sent.
fn send_frames(e: &mut Engine, dev: &mut Device, q: enso::QueueId, frames: &[Vec<u8>]) -> usize {
    let mut sent = 0;
    for f in frames {
        let mut m: Mbuf = dev.alloc_mbuf(f.len()).expect("a free buffer");
        dev.mbuf_data_mut(&mut m).copy_from_slice(f);
        let mut v = vec![m];
        for _ in 0..10_000 {
            if dev.tx_burst(q, &mut v).expect("tx_burst") == 1 {
                break;
            }
            e.step();
        }
        assert!(v.is_empty(), "the TX ring never took a frame");
        sent += 1;
    }
    e.run_until_idle(1000);
    sent
}

/// A 64 B IPv4 frame whose header states total length `total`.
fn ipv4_stating(total: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[23] = 17;
    f
}

#[test]
fn oversize_and_malformed_frames_are_dropped_at_the_port_and_counted() {
    // Port 0 loops back what it sends: the packetized interface sends any
    // bytes its descriptors describe, as a wire may deliver them.
    let (mut e, _dir) = device("badrx", vec![WireConfig::Loopback]);
    let mut dev = Device::attach_engine(&mut e, pkt_opts(1, 64)).expect("attach");
    let q = dev.alloc_queue(0, true).expect("queue");
    let tf = TestFrames::new(1, 0);
    let mut good = vec![0u8; 128];
    let n = tf.build(FrameKind::Ipv4Udp, 0, 0, 128, &mut good);
    good.truncate(n);
    let frames = [
        // Stating more than the largest frame: oversize.
        ipv4_stating(u16::MAX),
        ipv4_stating(1600),
        // Stating less than its own IPv4 header, or more than arrived:
        // malformed.
        ipv4_stating(4),
        ipv4_stating(19),
        ipv4_stating(200),
        good.clone(),
    ];
    assert_eq!(send_frames(&mut e, &mut dev, q, &frames), 6);
    let s = e.stats();
    let c = &s.ports[0].counters;
    assert_eq!((c.tx_frames, c.rx_frames), (6, 6), "{c:?}");
    assert_eq!((c.drop_oversize, c.drop_malformed), (2, 3), "{c:?}");
    assert_eq!(s.drops()["oversize"], 2);
    assert_eq!(s.drops()["malformed"], 3);
    assert_eq!(s.total_drops(), 5, "{:?}", s.drops());
    // The one good frame arrived, intact.
    let mut got = Vec::new();
    dev.rx_burst(q, &mut got, 32).expect("rx_burst");
    assert_eq!(got.len(), 1);
    assert_eq!(dev.mbuf_data(&got[0]), &good[..]);
}

#[test]
fn frames_no_rule_and_no_fallback_claims_are_dropped_on_both_interfaces() {
    let g = GeneratorConfig {
        count: Some(100),
        flows: 4,
        ..Default::default()
    };
    for packetized in [false, true] {
        let (cfg, _dir) = generator_device(if packetized { "nm-p" } else { "nm-e" }, g.clone());
        let mut e = Engine::new(cfg).expect("device");
        // Flow 0 bound, nothing else: flows 1..3 match nothing.
        let mut rule = TestFrames::flow_tuple(0);
        rule.src_ip = 0;
        rule.src_port = 0;
        let _dev = if packetized {
            let mut dev = Device::attach_engine(&mut e, pkt_opts(1, 64)).expect("attach");
            let q = dev.alloc_queue(0, false).expect("queue");
            dev.bind_queue(q, rule).expect("bind");
            dev
        } else {
            let mut dev = Device::attach_engine(&mut e, opts(1)).expect("attach");
            let p = dev.alloc_rx_pipe(false).expect("pipe");
            dev.bind(p, rule).expect("bind");
            dev
        };
        e.run_until_idle(100);
        for _ in 0..1000 {
            e.step();
        }
        let s = e.stats();
        assert_eq!(s.generator(0).expect("generator").sent, 100);
        assert_eq!(s.ports[0].counters.drop_no_match, 75, "{:?}", s.drops());
        assert_eq!(s.total_drops(), 75, "{:?}", s.drops());
    }
}

#[test]
fn frames_without_an_rx_descriptor_are_dropped_and_counted() {
    // A 64-entry RX ring arms 32 descriptors (one block of 32 is kept back,
    // as DPDK's ixgbe does); the application never takes a frame.
    let g = GeneratorConfig {
        count: Some(100),
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("nodesc", g);
    let mut e = Engine::new(cfg).expect("device");
    let mut dev = Device::attach_engine(&mut e, pkt_opts(1, 64)).expect("attach");
    let q = dev.alloc_queue(0, true).expect("queue");
    for _ in 0..1000 {
        e.step();
    }
    let s = e.stats();
    let qc = &s.apps[0].queues[0].counters;
    assert_eq!((qc.rx_frames, qc.drop_no_descriptor), (32, 68), "{qc:?}");
    assert_eq!(s.drops()["no_rx_descriptor"], 68);
    assert_eq!(s.total_drops(), 68, "{:?}", s.drops());
    let mut got = Vec::new();
    dev.rx_burst(q, &mut got, 64).expect("rx_burst");
    assert_eq!(got.len(), 32);
}

#[test]
fn frames_a_full_notification_ring_cannot_announce_are_dropped_and_counted() {
    // One notification per frame, a ring of 64 slots (one kept free), and
    // an application that reads none of them.
    let g = GeneratorConfig {
        count: Some(100),
        ..Default::default()
    };
    let (mut cfg, _dir) = generator_device("notiffull", g);
    cfg.notif_ring_entries = 64;
    cfg.notification_mode = nic_emu::NotificationMode::PerPacket;
    let mut e = Engine::new(cfg).expect("device");
    let mut dev = Device::attach_engine(&mut e, opts(1)).expect("attach");
    dev.alloc_rx_pipe(true).expect("pipe");
    for _ in 0..1000 {
        e.step();
    }
    let s = e.stats();
    let pc = &s.apps[0].pipes[0].counters;
    assert_eq!((pc.rx_frames, pc.drop_notif_ring_full), (63, 37), "{pc:?}");
    assert_eq!(s.drops()["notif_ring_full"], 37);
    assert_eq!(s.total_drops(), 37, "{:?}", s.drops());
}

#[test]
fn a_stream_pipe_drops_and_counts_what_is_not_udp() {
    // Opaque (non-IP) frames reach a stream pipe, which carries only UDP
    // payloads.
    let g = GeneratorConfig {
        count: Some(40),
        kinds: vec![FrameKind::Raw],
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("notudp", g);
    let mut e = Engine::new(cfg).expect("device");
    let mut dev = Device::attach_engine(&mut e, opts(1)).expect("attach");
    dev.alloc_stream_pipe_on(0, true).expect("stream pipe");
    for _ in 0..1000 {
        e.step();
    }
    let s = e.stats();
    assert_eq!(s.generator(0).expect("generator").sent, 40);
    let pc = &s.apps[0].pipes[0].counters;
    assert_eq!((pc.rx_frames, pc.drop_not_udp), (0, 40), "{pc:?}");
    assert_eq!(s.drops()["stream_not_udp"], 40);
    assert_eq!(s.total_drops(), 40, "{:?}", s.drops());
}

#[test]
fn frames_sent_to_a_null_wire_are_counted_as_discarded_on_both_interfaces() {
    let (mut e, _dir) = device("null", vec![WireConfig::Null]);
    let o = enso::DeviceOptions {
        pipes: 1,
        tx_pipes: 1,
        tx_pipe_size: 64 << 10,
        ..pkt_opts(1, 64)
    };
    let mut dev = Device::attach_engine(&mut e, o).expect("attach");
    // 40 through descriptors...
    let q = dev.alloc_queue(0, false).expect("queue");
    let tf = TestFrames::new(1, 0);
    let mut f = vec![0u8; 64];
    tf.build(FrameKind::Ipv4Udp, 0, 0, 64, &mut f);
    assert_eq!(send_frames(&mut e, &mut dev, q, &vec![f.clone(); 40]), 40);
    // ... and 25 from a TX pipe, one send each.
    let tx = dev.alloc_tx_pipe().expect("tx pipe");
    for seq in 0..25 {
        let b = dev.tx_buf(tx, 64).expect("tx_buf");
        let n = tf.build(FrameKind::Ipv4Udp, seq, 0, 64, b);
        dev.send(tx, n, 0).expect("send");
        e.step();
    }
    e.run_until_idle(1000);
    let s = e.stats();
    let c = &s.ports[0].counters;
    assert_eq!((c.tx_frames, c.tx_discarded), (65, 65), "{c:?}");
    assert_eq!(s.apps[0].queues[0].counters.tx_frames, 40);
    assert_eq!(s.apps[0].counters.tx_frames, 25);
}

#[test]
fn frames_a_full_wire_fifo_cannot_hold_are_dropped_and_counted() {
    // A cable from port 0 back to itself with a delay of a second, and a
    // clock that stands still: nothing sent is ever due, so the receiving
    // FIFO fills and every frame past its size is lost on the wire.
    let cable = WireConfig::Cable {
        peer: 0,
        delay_ns: 1_000_000_000,
    };
    let (mut e, _dir) = device("fifo", vec![cable]);
    e.set_clock(nic_emu::Clock::Manual(std::sync::Arc::new(
        std::sync::atomic::AtomicU64::new(1_000_000),
    )));
    let mut dev = Device::attach_engine(&mut e, pkt_opts(1, 1024)).expect("attach");
    let q = dev.alloc_queue(0, true).expect("queue");
    let tf = TestFrames::new(1, 0);
    let mut f = vec![0u8; 64];
    tf.build(FrameKind::Ipv4Udp, 0, 0, 64, &mut f);
    let fifo = nic_emu::port::WIRE_FIFO_FRAMES;
    let n = fifo + 100;
    assert_eq!(send_frames(&mut e, &mut dev, q, &vec![f; n]), n);
    let s = e.stats();
    let c = &s.ports[0].counters;
    assert_eq!(c.tx_frames, n as u64, "{c:?}");
    assert_eq!(c.drop_wire_fifo_full, 100, "{c:?}");
    assert_eq!(c.rx_frames, 0, "{c:?}");
    assert_eq!(s.drops()["wire_fifo_full"], 100);
    assert_eq!(s.total_drops(), 100, "{:?}", s.drops());
}

#[test]
fn tx_descriptors_a_rate_limit_holds_back_at_a_detach_are_counted() {
    let (mut e, _dir) = device("detach-desc", vec![WireConfig::Null]);
    let mut dev = Device::attach_engine(&mut e, pkt_opts(1, 64)).expect("attach");
    let q = dev.alloc_queue(0, false).expect("queue");
    // One flit every 5 ms.
    dev.set_rate_limit(0, Some((1, 1_000_000)))
        .expect("rate limit");
    e.run_until_idle(100);
    let tf = TestFrames::new(1, 0);
    let mut v = Vec::new();
    for seq in 0..10 {
        let mut m = dev.alloc_mbuf(64).expect("a free buffer");
        tf.build(FrameKind::Ipv4Udp, seq, 0, 64, dev.mbuf_data_mut(&mut m));
        v.push(m);
    }
    assert_eq!(dev.tx_burst(q, &mut v).expect("tx_burst"), 10);
    let id = e.app_ids()[0];
    assert!(e.detach(id));
    let s = e.stats();
    let sent = s.ports[0].counters.tx_frames;
    let held = s.detached_apps.tx_descriptors_discarded;
    // What the limit let through went out; the rest is counted, not lost.
    assert!(sent < 10 && held > 0, "sent {sent}, held back {held}");
    assert_eq!(sent + held, 10);
    assert_eq!(s.detached_queues.tx_frames, sent);
    assert_eq!(s.drops()["tx_descriptors_discarded_on_detach"], held);
    assert_eq!(s.total_drops(), held, "{:?}", s.drops());
}
