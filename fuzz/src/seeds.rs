//! The seed corpora: a few well-formed inputs of each kind, from which the
//! fuzzer mutates (written to `fuzz/corpus` by `enso-fuzz-seeds`).

use std::time::Duration;

use enso_abi::wire;
use enso_apps::kv::key_hash;
use enso_apps::kv::wire::{encode_batch, BatchKind, Message, Op};
use nic_emu::testframe::{FrameKind, TestFrames};

/// `(target, file name, bytes)` of every seed.
pub fn all() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut v = Vec::new();
    for (name, f) in frames() {
        v.push(("frames", name, f));
    }
    for (name, s) in steering() {
        v.push(("steering", name.into(), s));
    }
    for (name, p) in pcaps() {
        v.push(("pcap", name.into(), p));
    }
    for (name, b) in kv() {
        v.push(("kv", name.into(), b));
    }
    for (name, b) in engine() {
        v.push(("engine", name.into(), b));
    }
    for (name, b) in memif() {
        v.push(("memif", name.into(), b));
    }
    v
}

fn test_frame(kind: FrameKind, len: usize) -> Vec<u8> {
    let mut buf = [0u8; wire::MAX_FRAME];
    let n = TestFrames::new(4, 1).build(kind, 5, 1, len, &mut buf);
    buf[..n].to_vec()
}

/// Ethernet header with `ty` after the addresses.
fn eth(ty: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ty.to_be_bytes());
    f
}

/// Frames of every kind the NIC delimits.
pub fn frames() -> Vec<(String, Vec<u8>)> {
    let mut v = vec![
        (
            "ipv4-udp-64".to_string(),
            test_frame(FrameKind::Ipv4Udp, 64),
        ),
        ("ipv4-udp-300".into(), test_frame(FrameKind::Ipv4Udp, 300)),
        ("ipv6-udp-100".into(), test_frame(FrameKind::Ipv6Udp, 100)),
        ("raw-80".into(), test_frame(FrameKind::Raw, 80)),
    ];
    // ARP request, padded to 60 bytes.
    let mut arp = eth(wire::ETHERTYPE_ARP);
    arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    arp.resize(60, 0);
    v.push(("arp".into(), arp));
    // 802.1Q-tagged IPv4 (TCP SYN), and QinQ around IPv6.
    let inner = test_frame(FrameKind::Ipv4Udp, 80);
    let mut vlan = eth(wire::ETHERTYPE_VLAN);
    vlan.extend_from_slice(&[0, 5]);
    vlan.extend_from_slice(&inner[12..]);
    vlan[14 + 4 + 9 + 4] = wire::PROTO_TCP;
    vlan[14 + 4 + 20 + 13] = 0x02;
    v.push(("vlan-ipv4-tcp-syn".into(), vlan));
    let inner = test_frame(FrameKind::Ipv6Udp, 120);
    let mut qinq = eth(wire::ETHERTYPE_QINQ);
    qinq.extend_from_slice(&[0, 7]);
    qinq.extend_from_slice(&wire::ETHERTYPE_VLAN.to_be_bytes());
    qinq.extend_from_slice(&[0, 9]);
    qinq.extend_from_slice(&inner[12..]);
    v.push(("qinq-ipv6".into(), qinq));
    // 802.3 with a length field (LLC), padded.
    let mut llc = eth(46);
    llc.extend_from_slice(&[0x42, 0x42, 0x03]);
    llc.resize(60, 0);
    v.push(("ieee8023-llc".into(), llc));
    // A marker flit, as the NIC writes before an opaque frame.
    let mut m = [0u8; wire::FLIT];
    wire::write_marker(&mut m, 80);
    v.push(("marker".into(), m.to_vec()));
    v
}

/// Operation sequences for the `steering` target (see its decoder).
pub fn steering() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        // bind UDP, frame of it, unbind, frame again.
        (
            "bind-lookup-unbind",
            vec![
                0, 0, 0, 1, 2, 3, 1, 5, 3, 0, 0, 1, 2, 3, 1, 0, 2, 0, 0, 1, 2, 3, 1, 3, 0, 0, 1, 2,
                3, 1, 0,
            ],
        ),
        // fallback pipes, round robin, frames.
        (
            "fallback-rr",
            vec![
                5, 1, 3, 5, 1, 4, 5, 1, 5, 7, 1, 1, 3, 1, 2, 0, 0, 0, 0, 0, 3, 1, 2, 0, 0, 0, 0, 0,
                6, 1, 4, 3, 1, 7, 1, 1, 1, 1, 1,
            ],
        ),
        // TCP listen + connection, SYN and established frames.
        (
            "tcp-syn",
            vec![
                0, 0, 3, 0, 1, 0, 2, 9, 0, 0, 3, 1, 1, 3, 2, 8, 3, 0, 3, 1, 1, 3, 2, 1, 3, 0, 3, 1,
                1, 3, 2, 0,
            ],
        ),
        // Fill the table in bulk, then remove a share by pipe.
        (
            "bulk-retain",
            vec![
                8, 0, 0xff, 0x1f, 1, 2, 3, 4, 9, 0, 2, 1, 3, 0, 0, 1, 2, 3, 0, 0,
            ],
        ),
    ]
}

fn pcap_of(frames: &[(&[u8], Option<u32>)]) -> Vec<u8> {
    let mut w = pktgen::pcap::CaptureWriter::new(Vec::new()).expect("pcap header");
    for (i, (f, _)) in frames.iter().enumerate() {
        w.write(Duration::from_micros(i as u64 * 10), f)
            .expect("pcap record");
    }
    let mut out = w.finish().expect("pcap");
    // Records whose original length is larger (cut by a snap length):
    // patch their orig_len fields (record headers are 16 bytes).
    let mut at = 24;
    for (f, orig) in frames {
        if let Some(o) = orig {
            out[at + 12..at + 16].copy_from_slice(&o.to_le_bytes());
        }
        at += 16 + f.len();
    }
    out
}

fn pcapng(frame: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    let mut block = |ty: u32, body: &[u8]| {
        let len = 12 + body.len().next_multiple_of(4);
        v.extend_from_slice(&ty.to_le_bytes());
        v.extend_from_slice(&(len as u32).to_le_bytes());
        v.extend_from_slice(body);
        v.resize(v.len().next_multiple_of(4), 0);
        v.extend_from_slice(&(len as u32).to_le_bytes());
    };
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&u64::MAX.to_le_bytes());
    block(0x0A0D_0D0A, &shb);
    block(1, &[1, 0, 0, 0, 0, 0, 1, 0]);
    let mut epb = Vec::new();
    epb.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
    epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    epb.extend_from_slice(frame);
    block(6, &epb);
    v
}

/// A small pcap of several kinds of frame, one with records cut by a snap
/// length, and a small pcapng.
pub fn pcaps() -> Vec<(&'static str, Vec<u8>)> {
    let f = frames();
    let get = |n: &str| {
        f.iter()
            .find(|(k, _)| k == n)
            .expect("seed frame")
            .1
            .clone()
    };
    let (v4, arp, raw, qinq) = (
        get("ipv4-udp-64"),
        get("arp"),
        get("raw-80"),
        get("qinq-ipv6"),
    );
    let snapped = &get("ipv4-udp-300")[..64];
    vec![
        (
            "mixed.pcap",
            pcap_of(&[(&v4, None), (&arp, None), (&raw, None), (&qinq, None)]),
        ),
        (
            "snapped.pcap",
            pcap_of(&[(snapped, Some(300)), (&v4, None)]),
        ),
        ("one.pcapng", pcapng(&v4)),
    ]
}

/// Valid request batches (UDP payloads).
pub fn kv() -> Vec<(&'static str, Vec<u8>)> {
    let req = |op: Op, key: &'static [u8], value: &'static [u8], opaque| Message {
        op: op as u8,
        status: 0,
        key_hash: key_hash(key),
        opaque,
        key,
        value,
    };
    let batch = |msgs: &[Message<'_>]| {
        let mut buf = vec![0u8; 1400];
        let n = encode_batch(&mut buf, BatchKind::Request, msgs).expect("fits");
        buf.truncate(n);
        buf
    };
    vec![
        ("get", batch(&[req(Op::Get, b"key-0001", b"", 1)])),
        (
            "set-get-delete",
            batch(&[
                req(Op::Set, b"key-0001", b"value-01", 1),
                req(Op::Get, b"key-0001", b"", 2),
                req(Op::Delete, b"key-0001", b"", 3),
                req(Op::Get, b"key-0001", b"", 4),
            ]),
        ),
        (
            "sets",
            batch(&[
                req(Op::Set, b"a", b"1", 7),
                req(Op::Set, b"bb", &[0x55; 200], 8),
                req(Op::Get, b"bb", b"", 9),
            ]),
        ),
    ]
}

/// Operation sequences for the `engine` target (see its decoder).
pub fn engine() -> Vec<(&'static str, Vec<u8>)> {
    let step = |n: u8| [12u8, n.clamp(1, 15)];
    let consume = [10u8, 1];
    // A test frame written at page 9 and sent on `port` with a TX
    // notification of the friendly ring.
    let send = |port: u8| {
        let mut v = vec![8, 0, 100, 0, 3, 1, 1, 9, 0];
        v.extend_from_slice(&[5, 1, 0, 1, 9, 0, 2, 3, port]);
        for _ in 0..5 {
            v.extend_from_slice(&[1, 0]);
        }
        v
    };
    let mut echo = vec![0x02, 8];
    for _ in 0..6 {
        echo.extend_from_slice(&step(7));
        echo.extend_from_slice(&consume);
    }
    let mut tx = vec![0x00, 4];
    tx.extend_from_slice(&step(3));
    tx.extend(send(1));
    tx.extend_from_slice(&step(3));
    tx.extend(send(0));
    tx.extend_from_slice(&step(3));
    tx.extend_from_slice(&consume);
    tx.extend_from_slice(&step(3));
    // Bind a generator flow to pipe 1 (config FLOW_BIND), then run.
    let mut bind = vec![
        0x1a, 16, 5, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 2, 1, 1, 0, 1, 0, 1,
    ];
    for _ in 0..4 {
        bind.extend_from_slice(&step(5));
        bind.extend_from_slice(&consume);
    }
    vec![
        ("echo-friendly", echo),
        ("tx-both-ports", tx),
        ("bind-flow", bind),
    ]
}

/// memif sessions (see `crate::memif` for how the bytes decode): a whole
/// handshake and frames both ways, chained frames, messages decoded as
/// bytes and a refused INIT, and a head moved impossibly far.
pub fn memif() -> Vec<(&'static str, Vec<u8>)> {
    use memif::msg::{fixed_str, AddRing, Init, Msg, RING_FLAG_C2S, VERSION};
    // No messages to decode; INIT, ADD_REGION (the rings' own file), the
    // C2S and S2C rings (cookies as they should be), CONNECT.
    let handshake = [0u8, 0, 1, 2, 2, 1, 0, 2, 0, 0, 3];
    // A 100-byte frame in C2S slot 0, published; receive; two S2C buffers
    // posted; two frames sent; a poll.
    let frames = [0u8, 0, 100, 0, 0, 1, 1, 2, 8, 3, 2, 4, 2, 50, 0, 200, 0, 6];
    // After that frame (written, not yet published), one chained over
    // slots 1 and 2 (2048 + 100 bytes); all three published at once.
    let chained = [0u8, 1, 0, 8, 1, 0, 2, 100, 0, 0, 1, 3, 2, 8, 6];
    let mut both = handshake.to_vec();
    both.extend_from_slice(&frames);
    let mut chain = handshake.to_vec();
    chain.extend_from_slice(&frames[..5]);
    chain.extend_from_slice(&chained);
    // Three messages to decode (INIT, an unknown type, ADD_RING), then an
    // INIT of another version, which the server refuses.
    let mut decode = vec![3u8];
    decode.extend_from_slice(
        &Msg::Init(Init {
            version: VERSION,
            id: 7,
            mode: 0,
            secret: [1; 24],
            name: fixed_str("seed"),
        })
        .encode(),
    );
    let mut unknown = [0u8; 128];
    unknown[0] = 9;
    decode.extend_from_slice(&unknown);
    decode.extend_from_slice(
        &Msg::AddRing(AddRing {
            flags: RING_FLAG_C2S,
            index: 0,
            region: 0,
            offset: 0,
            log2_ring_size: 3,
            private_hdr_size: 0,
        })
        .encode(),
    );
    decode.extend_from_slice(&[0x80, 0x00, 0x01, 0, 0, 0, 0, 0]);
    // The C2S head moved 0x8000 ahead, then a receive.
    let mut head = handshake.to_vec();
    head.extend_from_slice(&[0x81, 0x00, 0x80, 2, 8, 6]);
    vec![
        ("frames-both-ways", both),
        ("chained", chain),
        ("decode-and-refused-init", decode),
        ("head-too-far", head),
    ]
}
