//! AF_PACKET port tests over a veth pair whose ends sit in two network
//! namespaces made for the test: the port under test on end `a`, a plain
//! packet socket on end `b` as the independent peer. Needs root, `ip` and
//! `ethtool`; see `rawsock::testnet::preflight` for what happens without.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rawsock::testnet::{preflight, Netns, Veth};
use rawsock::{AfPacket, AfPacketConfig, Error};

/// Both namespaces and the pair; fields drop in order, the pair first.
struct Net {
    veth: Veth,
    a: Netns,
    b: Netns,
}

fn net() -> Option<Net> {
    if let Some(why) = preflight(&["ip", "ethtool"]) {
        test_skips::skipped(why);
        return None;
    }
    let a = Netns::new().expect("namespace a");
    let b = Netns::new().expect("namespace b");
    let veth = Veth::new(&a, &b).expect("veth pair");
    Some(Net { veth, a, b })
}

impl Net {
    fn port(&self, cfg: AfPacketConfig) -> AfPacket {
        self.a
            .enter(|| AfPacket::open(&cfg))
            .unwrap()
            .expect("open AfPacket")
    }

    fn set_mtu(&self, mtu: u32) {
        let mtu = mtu.to_string();
        for (ns, dev) in [(&self.a, self.veth.a()), (&self.b, self.veth.b())] {
            ns.ip(&["link", "set", "dev", dev, "mtu", &mtu]).unwrap();
        }
    }

    fn peer(&self) -> Plain {
        let b = self.veth.b().to_owned();
        self.b.enter(|| Plain::open(&b)).unwrap().expect("peer")
    }
}

/// 60..=1514 bytes: every 29th length plus the edges.
fn sizes() -> Vec<usize> {
    let mut v: Vec<usize> = (60..=1514).step_by(29).collect();
    v.extend([61, 64, 1513, 1514]);
    v
}

#[test]
fn received_frames_arrive_byte_exact() {
    let Some(net) = net() else {
        return;
    };
    let mut port = net.port(AfPacketConfig::new(net.veth.a()));
    assert_eq!(port.mac(), mac_of(&net.a, net.veth.a()));
    let peer = net.peer();
    let frames: Vec<Vec<u8>> = sizes()
        .into_iter()
        .enumerate()
        .map(|(i, len)| test_frame(len, i as u32))
        .collect();
    for f in &frames {
        peer.send(f);
    }
    let got = rx_test_frames(&mut port, frames.len(), Duration::from_secs(3));
    assert_eq!(got.len(), frames.len(), "frames received");
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!(g, f, "frame of {} bytes", f.len());
    }
    let c = port.counters();
    assert!(c.rx_frames >= frames.len() as u64);
    assert_eq!(c.oversize, 0);
    assert_eq!(c.vlan_restored, 0);
    assert_eq!(c.rx_malformed, 0);
    assert_eq!(c.kernel_drops, 0);
}

#[test]
fn transmitted_frames_arrive_byte_exact() {
    let Some(net) = net() else {
        return;
    };
    let mut port = net.port(AfPacketConfig::new(net.veth.a()));
    let peer = net.peer();
    let frames: Vec<Vec<u8>> = sizes()
        .into_iter()
        .enumerate()
        .map(|(i, len)| test_frame(len, i as u32))
        .collect();
    let runt = vec![0u8; 13];
    let oversize = test_frame(1519, 999);
    let mut burst: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    burst.insert(3, &runt);
    burst.insert(7, &oversize);
    assert_eq!(port.tx_burst(burst.iter().copied()), burst.len());
    let got = peer.recv_test_frames(frames.len(), Duration::from_secs(3));
    assert_eq!(got.len(), frames.len(), "frames received by the peer");
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!(g, f, "frame of {} bytes", f.len());
    }
    let c = port.counters();
    assert_eq!(c.tx_frames, frames.len() as u64);
    assert_eq!(
        c.tx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!((c.tx_runt, c.tx_oversize, c.tx_errors), (1, 1, 0));
    // PACKET_IGNORE_OUTGOING: the port does not see its own frames.
    let echo = rx_test_frames(&mut port, 1, Duration::from_millis(100));
    assert!(
        echo.is_empty(),
        "own transmissions received: {}",
        echo.len()
    );
}

#[test]
fn full_transmit_ring_leaves_the_rest_to_the_caller() {
    let Some(net) = net() else {
        return;
    };
    let cfg = AfPacketConfig {
        tx_frames: 8,
        ..AfPacketConfig::new(net.veth.a())
    };
    let mut port = net.port(cfg);
    let slots = port.tx_slots();
    assert!((8..16).contains(&slots), "{slots} slots");
    let peer = net.peer();
    let frames: Vec<Vec<u8>> = (0..100).map(|i| test_frame(100 + i, i as u32)).collect();
    let first = port.tx_burst(frames.iter().map(Vec::as_slice));
    assert_eq!(first, slots, "a fresh ring takes exactly its slot count");
    assert_eq!(port.counters().tx_ring_full, 1);
    let mut sent = first;
    let deadline = Instant::now() + Duration::from_secs(3);
    while sent < frames.len() && Instant::now() < deadline {
        sent += port.tx_burst(frames[sent..].iter().map(Vec::as_slice));
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(sent, frames.len(), "all frames taken in time");
    let got = peer.recv_test_frames(frames.len(), Duration::from_secs(3));
    assert_eq!(got.len(), frames.len());
    assert!(
        got.iter().zip(&frames).all(|(g, f)| g == f),
        "order or bytes differ"
    );
    // An empty burst on a drained ring is no ring-full event.
    let before = port.counters().tx_ring_full;
    assert_eq!(port.tx_burst(std::iter::empty()), 0);
    assert_eq!(port.counters().tx_ring_full, before);
}

#[test]
fn vlan_tags_stripped_by_the_kernel_are_restored() {
    let Some(net) = net() else {
        return;
    };
    // Room for the 1519-byte tagged frame below.
    net.set_mtu(1600);
    let mut port = net.port(AfPacketConfig::new(net.veth.a()));
    let peer = net.peer();
    let inner = test_frame(100, 1);
    let frames = [
        tagged(&inner, 0x8100, 0xa064), // 802.1Q, PCP 5, VID 100
        tagged(&inner, 0x8100, 0x0000), // priority tag, VID 0
        tagged(&inner, 0x88a8, 0x0123), // 802.1ad
        tagged(&tagged(&inner, 0x8100, 0x0007), 0x88a8, 0x0200), // QinQ
        tagged(&test_frame(1514, 2), 0x8100, 0x0fff), // full-size + tag = 1518
        tagged(&test_frame(1515, 3), 0x8100, 0x0001), // 1519: over max_frame
    ];
    for f in &frames {
        peer.send(f);
    }
    let got = rx_test_frames(&mut port, 5, Duration::from_secs(3));
    assert_eq!(got.len(), 5);
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!(g, f, "frame tagged {:02x?}", &f[12..16]);
    }
    // Settle: the oversize frame may trail in a later block.
    rx_test_frames(&mut port, 1, Duration::from_millis(50));
    let c = port.counters();
    assert_eq!(c.vlan_restored, 5);
    assert_eq!(c.oversize, 1);
}

#[test]
fn jumbo_frames_are_counted_as_oversize() {
    let Some(net) = net() else {
        return;
    };
    net.set_mtu(9000);
    let mut port = net.port(AfPacketConfig::new(net.veth.a()));
    let peer = net.peer();
    let frames = [
        test_frame(9014, 1),
        test_frame(1519, 2),
        test_frame(1518, 3),
        test_frame(60, 4),
    ];
    for f in &frames {
        peer.send(f);
    }
    let got = rx_test_frames(&mut port, 2, Duration::from_secs(3));
    assert_eq!(got, frames[2..].to_vec());
    let c = port.counters();
    assert_eq!(c.oversize, 2);
    assert_eq!(c.rx_malformed, 0);
}

#[test]
fn kernel_drops_are_counted_when_the_ring_is_not_read() {
    let Some(net) = net() else {
        return;
    };
    let cfg = AfPacketConfig {
        rx_block_size: 64 * 1024,
        rx_blocks: 2,
        ..AfPacketConfig::new(net.veth.a())
    };
    let mut port = net.port(cfg);
    let peer = net.peer();
    const SENT: u32 = 2000;
    for i in 0..SENT {
        peer.send(&test_frame(1000, i));
    }
    let first = port.counters();
    assert!(first.kernel_drops > 0, "no drops: {first:?}");
    assert!(first.kernel_ring_freezes > 0, "no freeze: {first:?}");
    let got = rx_test_frames(&mut port, SENT as usize, Duration::from_millis(300));
    assert!(!got.is_empty() && got.len() < SENT as usize);
    // The frames that made it are in order.
    let seqs: Vec<u32> = got
        .iter()
        .map(|f| u32::from_be_bytes([f[14], f[15], f[16], f[17]]))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "out of order");
    let second = port.counters();
    eprintln!("sent {SENT}, received {}, {second:?}", got.len());
    assert!(second.kernel_drops >= first.kernel_drops, "not accumulated");
    // Every frame is either received or counted as dropped (a little slack
    // for frames lost elsewhere on a busy machine).
    let accounted = got.len() as u64 + second.kernel_drops;
    assert!(
        accounted <= u64::from(SENT) && accounted + 16 >= u64::from(SENT),
        "{} received + {} dropped, {SENT} sent",
        got.len(),
        second.kernel_drops
    );
    // The ring works again once read.
    peer.send(&test_frame(64, SENT));
    let after = rx_test_frames(&mut port, 1, Duration::from_secs(2));
    assert_eq!(after, vec![test_frame(64, SENT)]);
}

#[test]
fn non_ethernet_interfaces_are_refused() {
    let Some(net) = net() else {
        return;
    };
    // The loopback of the test's own namespace.
    let res = net
        .a
        .enter(|| AfPacket::open(&AfPacketConfig::new("lo")))
        .unwrap();
    match res {
        Err(Error::Interface { name, reason }) => {
            assert_eq!(name, "lo");
            assert!(reason.contains("Ethernet"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // An interface of the other namespace is not visible here.
    let b = net.veth.b().to_owned();
    let res = net
        .a
        .enter(|| AfPacket::open(&AfPacketConfig::new(&b)))
        .unwrap();
    assert!(matches!(res, Err(Error::Interface { .. })), "{res:?}");
}

#[test]
fn low_rate_frames_wait_at_most_about_the_block_timeout() {
    let Some(net) = net() else {
        return;
    };
    let mut port = net.port(AfPacketConfig::new(net.veth.a()));
    let peer = net.peer();
    for i in 0..5u32 {
        let start = Instant::now();
        peer.send(&test_frame(64, i));
        let got = rx_test_frames(&mut port, 1, Duration::from_secs(2));
        let waited = start.elapsed();
        eprintln!("frame {i} waited {waited:?}");
        assert_eq!(got.len(), 1);
        // 1 ms block timeout; allow generous scheduling slack on a busy
        // machine while still catching a kernel-default timeout of 8+ ms
        // on every try.
        assert!(waited < Duration::from_millis(500), "{waited:?}");
        if waited < Duration::from_millis(8) {
            return;
        }
    }
    panic!("no frame arrived within 8 ms in 5 tries");
}

#[test]
fn promiscuous_membership_ends_with_the_port() {
    let Some(net) = net() else {
        return;
    };
    let promiscuity = || {
        let out = net
            .a
            .ip(&["-d", "link", "show", "dev", net.veth.a()])
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let mut words = text.split_whitespace();
        words.find(|w| *w == "promiscuity");
        words
            .next()
            .expect("promiscuity count")
            .parse::<u32>()
            .unwrap()
    };
    assert_eq!(promiscuity(), 0);
    let cfg = AfPacketConfig {
        promiscuous: true,
        ..AfPacketConfig::new(net.veth.a())
    };
    let port = net.port(cfg);
    assert_eq!(promiscuity(), 1);
    drop(port);
    assert_eq!(promiscuity(), 0);
}

#[test]
fn unfinished_checksums_from_the_local_stack_are_counted() {
    let Some(net) = net() else {
        return;
    };
    let mut port = net.port(AfPacketConfig::new(net.veth.a()));
    let (a, b) = (net.veth.a(), net.veth.b());
    let mac_a = mac_of(&net.a, a)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    net.b
        .ip(&["addr", "add", "198.18.1.2/24", "dev", b])
        .unwrap();
    net.b
        .ip(&["neigh", "add", "198.18.1.1", "lladdr", &mac_a, "dev", b])
        .unwrap();
    let sock = net
        .b
        .enter(|| std::net::UdpSocket::bind("198.18.1.2:0"))
        .unwrap()
        .unwrap();
    let count_udp = |port: &mut AfPacket| {
        let mut n = 0;
        let deadline = Instant::now() + Duration::from_secs(2);
        while n == 0 && Instant::now() < deadline {
            port.wait_rx(10).unwrap();
            port.rx_burst(64, |f| {
                if f.len() > 42 && f[12..14] == [8, 0] && f[23] == 17 && f[36..38] == [0, 9] {
                    n += 1;
                }
            });
        }
        n
    };
    // Offloads off (as the test pair is made): finished checksums.
    sock.send_to(b"offload off", "198.18.1.1:9").unwrap();
    assert_eq!(count_udp(&mut port), 1);
    assert_eq!(port.counters().csum_not_ready, 0);
    // Checksum offload on: the frame crosses the pair with its checksum
    // left to do, and the port says so.
    net.b.exec("ethtool", &["-K", b, "tx", "on"]).unwrap();
    sock.send_to(b"offload on", "198.18.1.1:9").unwrap();
    assert_eq!(count_udp(&mut port), 1);
    assert_eq!(port.counters().csum_not_ready, 1);
}

#[test]
fn ring_to_ring_traffic_wraps_both_rings_in_order() {
    let Some(net) = net() else {
        return;
    };
    let mut rx = net.port(AfPacketConfig::new(net.veth.a()));
    let cfg_b = AfPacketConfig::new(net.veth.b());
    let mut tx = net
        .b
        .enter(|| AfPacket::open(&cfg_b))
        .unwrap()
        .expect("open the sending port");
    const TOTAL: u32 = 50_000;
    let size = |seq: u32| 60 + (seq as usize * 97) % 1455;
    let (mut next_tx, mut next_rx, mut bad) = (0u32, 0u32, 0u32);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut batch: Vec<Vec<u8>> = Vec::new();
    while next_rx < TOTAL && Instant::now() < deadline {
        if next_tx < TOTAL {
            batch.clear();
            batch.extend((next_tx..TOTAL.min(next_tx + 32)).map(|s| test_frame(size(s), s)));
            next_tx += tx.tx_burst(batch.iter().map(Vec::as_slice)) as u32;
        } else {
            rx.wait_rx(10).unwrap();
        }
        rx.rx_burst(256, |f| {
            if !is_test_frame(f) {
                return;
            }
            if f != test_frame(size(next_rx), next_rx).as_slice() {
                bad += 1;
            }
            next_rx += 1;
        });
    }
    let (r, t) = (rx.counters(), tx.counters());
    assert_eq!(
        (next_tx, next_rx, bad),
        (TOTAL, TOTAL, 0),
        "rx {r:?} tx {t:?}"
    );
    assert_eq!(r.kernel_drops, 0);
    // Many times round both rings.
    assert!(u64::from(TOTAL) > 20 * tx.tx_slots() as u64);
    assert!(r.rx_bytes > 5 * 32 * 128 * 1024);
}
