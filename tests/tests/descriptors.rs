//! The packetized interface's descriptor rules, driven by hand (no
//! library): the NIC uses RX descriptors only up to the tail software rang,
//! writes each back with DD, EOP, the length and the flow hash, and wraps
//! around the ring; it sends TX descriptors only up to the tail, writes
//! back DD only on those with RS (and on those it refuses), and wraps.

use std::sync::atomic::Ordering;

use enso_tests::*;
use nic_emu::engine::AttachRequest;
use nic_emu::layout::{self, config, desc, reg};
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{Engine, GeneratorConfig, SizeSpec, WireConfig};

const RX_RING: usize = 0x10000;
const TX_RING: usize = 0x11000;
const TX_NOTIF_RING: usize = 0x1000;
const BUFS: usize = 0x20000;
/// Entries of each ring (the smallest the NIC takes).
const ENTRIES: u32 = 8;

/// A raw application with one descriptor queue on port 0, both rings of
/// [`ENTRIES`] set up (nothing handed to the NIC yet).
fn raw_queue(e: &mut Engine) -> (RawApp, u32) {
    let mut raw = RawApp::attach(
        e,
        AttachRequest {
            pipes: 0,
            dma_bytes: 1 << 20,
            desc_queues: 1,
        },
    );
    let dq = layout::DESC_QUEUE_BASE + raw.info.desc_queue_base;
    let bits = ENTRIES.trailing_zeros() << desc::LOG2_SHIFT; // port 0
    raw.write(layout::reg_addr(dq, reg::RX_MEM_LOW), RX_RING as u32 | bits);
    raw.write(layout::reg_addr(dq, reg::RX_MEM_HIGH), 0);
    raw.write(layout::reg_addr(dq, reg::TX_MEM_LOW), TX_RING as u32 | bits);
    raw.write(layout::reg_addr(dq, reg::TX_MEM_HIGH), 0);
    (raw, dq)
}

/// Posts buffer `i` in RX descriptor `i`.
fn post_rx(raw: &RawApp, i: usize) {
    let d = raw.desc(RX_RING + i * 16);
    d.qw0.store((BUFS + i * 2048) as u64, Ordering::Relaxed);
    d.qw1.store(0, Ordering::Relaxed);
}

/// The write-back of RX descriptor `i`: (DD, EOP, length).
fn rx_wb(raw: &RawApp, i: usize) -> (bool, bool, usize) {
    let w = raw.desc(RX_RING + i * 16).qw1.load(Ordering::Acquire);
    (
        w & desc::RX_DD != 0,
        w & desc::RX_EOP != 0,
        ((w >> 32) & desc::LEN_MASK) as usize,
    )
}

/// Runs the generator for exactly `n` frames (one a step), then lets the
/// engine settle.
fn send(e: &mut Engine, n: usize) {
    e.set_generators_paused(false);
    for _ in 0..n {
        e.step();
    }
    e.set_generators_paused(true);
    e.run_until_idle(100);
}

#[test]
fn rx_descriptors_are_used_up_to_the_tail_written_back_and_wrapped() {
    let g = GeneratorConfig {
        sizes: SizeSpec::Range(64, 600),
        burst: 1,
        paused: true,
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("desc-rx", g);
    let mut e = Engine::new(cfg).expect("device");
    let (mut raw, dq) = raw_queue(&mut e);
    // The queue is port 0's fallback (a configuration notification).
    let nb = layout::NBUF_QUEUE_BASE + raw.info.nbuf_id;
    raw.write(layout::reg_addr(nb, reg::TX_MEM_LOW), TX_NOTIF_RING as u32);
    raw.write(layout::reg_addr(nb, reg::TX_MEM_HIGH), 0);
    let n = raw.tx_notif(TX_NOTIF_RING);
    n.config_id.store(config::FALLBACK, Ordering::Relaxed);
    n.args[0].store(config::FALLBACK_ADD, Ordering::Relaxed);
    let target = layout::DESC_TARGET_BASE + raw.info.desc_queue_base;
    n.args[1].store(u64::from(target), Ordering::Relaxed);
    n.signal.store(layout::signal::CONFIG, Ordering::Relaxed);
    raw.write(layout::reg_addr(nb, reg::TX_TAIL), 1);
    for i in 0..ENTRIES as usize {
        post_rx(&raw, i);
    }
    // Five descriptors handed over; a tail that would give the NIC the
    // whole ring (8 of 8, past its own head) is refused.
    raw.write(layout::reg_addr(dq, reg::RX_TAIL), 5);
    raw.write(layout::reg_addr(dq, reg::RX_TAIL), 0);
    send(&mut e, 20);
    let s = e.stats();
    assert_eq!(s.generator(0).expect("generator").sent, 20);
    let a = &s.apps[0];
    assert_eq!(a.counters.reject_bad_register_value, 1, "{:?}", a.counters);
    let qc = &a.queues[0].counters;
    assert_eq!((qc.rx_frames, qc.drop_no_descriptor), (5, 15), "{qc:?}");
    // Frames 0..5 in descriptors 0..5, each written back whole; the rest
    // untouched.
    let tf = TestFrames::new(1, 0);
    let mut scratch = vec![0u8; 2048];
    let check = |raw: &RawApp, i: usize, seq: u64, scratch: &mut [u8]| {
        let (dd, eop, len) = rx_wb(raw, i);
        assert!(dd && eop, "descriptor {i}");
        let mut frame = vec![0u8; len];
        raw_read(raw, BUFS + i * 2048, &mut frame);
        let v = tf.verify(&frame, 0, None, scratch).expect("intact frame");
        assert_eq!(v.seq, seq, "descriptor {i}");
        // The flow hash replaces the buffer address.
        let hash = raw.desc(RX_RING + i * 16).qw0.load(Ordering::Relaxed);
        let nic_emu::wire::SteerKey::Ipv4 { tuple, .. } = nic_emu::wire::steer_key(&frame) else {
            panic!("descriptor {i}: not an IPv4 test frame");
        };
        assert_eq!(
            hash,
            u64::from(nic_emu::wire::hash_tuple(&tuple)),
            "descriptor {i}"
        );
    };
    for i in 0..5 {
        check(&raw, i, i as u64, &mut scratch);
    }
    for i in 5..ENTRIES as usize {
        assert_eq!(rx_wb(&raw, i), (false, false, 0), "descriptor {i}");
    }
    // Software takes 0..5 and posts them again; the tail wraps to 4: the
    // NIC now owns 5, 6, 7, 0, 1, 2, 3 (seven: one is always kept back).
    for i in 0..5 {
        post_rx(&raw, i);
    }
    raw.write(layout::reg_addr(dq, reg::RX_TAIL), 4);
    send(&mut e, 10);
    let s = e.stats();
    let qc = &s.apps[0].queues[0].counters;
    assert_eq!((qc.rx_frames, qc.drop_no_descriptor), (12, 18), "{qc:?}");
    for (k, i) in [5usize, 6, 7, 0, 1, 2, 3].into_iter().enumerate() {
        check(&raw, i, 20 + k as u64, &mut scratch);
    }
    assert_eq!(rx_wb(&raw, 4), (false, false, 0), "beyond the tail");
}

/// Reads `out.len()` bytes at `off` of the raw application's region.
fn raw_read(raw: &RawApp, off: usize, out: &mut [u8]) {
    // Descriptors are 16 B of atomics: read the bytes 8 at a time through
    // them (the buffers are 16 B aligned and a multiple of 16 long).
    for (k, chunk) in out.chunks_mut(16).enumerate() {
        let d = raw.desc(off + k * 16);
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&d.qw0.load(Ordering::Relaxed).to_le_bytes());
        b[8..].copy_from_slice(&d.qw1.load(Ordering::Relaxed).to_le_bytes());
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// Writes `bytes` at `off` of the raw application's region (16 B aligned).
fn raw_write(raw: &RawApp, off: usize, bytes: &[u8]) {
    for (k, chunk) in bytes.chunks(16).enumerate() {
        let mut b = [0u8; 16];
        b[..chunk.len()].copy_from_slice(chunk);
        let d = raw.desc(off + k * 16);
        d.qw0.store(
            u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            Ordering::Relaxed,
        );
        d.qw1.store(
            u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
            Ordering::Relaxed,
        );
    }
}

#[test]
fn tx_descriptors_are_sent_up_to_the_tail_and_only_rs_ones_written_back() {
    let (mut cfg, _dir) = generator_device("desc-tx", GeneratorConfig::default());
    cfg.ports = vec![WireConfig::Null];
    let mut e = Engine::new(cfg).expect("device");
    let (mut raw, dq) = raw_queue(&mut e);
    let tf = TestFrames::new(1, 0);
    let mut f = vec![0u8; 64];
    tf.build(FrameKind::Ipv4Udp, 0, 0, 64, &mut f);
    // Descriptor `i` sends buffer `i` (64 B), with RS if asked.
    let post = |raw: &RawApp, i: usize, rs: bool, eop: bool| {
        raw_write(raw, BUFS + i * 2048, &f);
        let d = raw.desc(TX_RING + i * 16);
        d.qw0.store((BUFS + i * 2048) as u64, Ordering::Relaxed);
        let mut qw1 = 64;
        if eop {
            qw1 |= desc::TX_EOP;
        }
        if rs {
            qw1 |= desc::TX_RS;
        }
        d.qw1.store(qw1, Ordering::Relaxed);
    };
    let done = |raw: &RawApp, i: usize| {
        let w = raw.desc(TX_RING + i * 16).qw1.load(Ordering::Acquire);
        (w & desc::TX_DD != 0, w & desc::TX_ERR != 0)
    };
    let sent = |e: &Engine| e.stats().ports[0].counters.tx_discarded;
    // RS on every third descriptor.
    for i in 0..6 {
        post(&raw, i, i % 3 == 2, true);
    }
    raw.write(layout::reg_addr(dq, reg::TX_TAIL), 4);
    e.run_until_idle(100);
    assert_eq!(sent(&e), 4, "only up to the tail");
    let wb: Vec<_> = (0..6).map(|i| done(&raw, i)).collect();
    assert_eq!(
        wb,
        [
            (false, false),
            (false, false),
            (true, false),
            (false, false),
            (false, false),
            (false, false)
        ]
    );
    raw.write(layout::reg_addr(dq, reg::TX_TAIL), 6);
    e.run_until_idle(100);
    assert_eq!(sent(&e), 6);
    assert_eq!(
        (done(&raw, 4), done(&raw, 5)),
        ((false, false), (true, false))
    );
    // Around the end of the ring: 6, 7, 0, 1 (RS on 1), then 2 without
    // EOP, which the NIC refuses and writes back with an error, RS or not.
    post(&raw, 6, false, true);
    post(&raw, 7, false, true);
    post(&raw, 0, false, true);
    post(&raw, 1, true, true);
    post(&raw, 2, false, false);
    raw.write(layout::reg_addr(dq, reg::TX_TAIL), 3);
    e.run_until_idle(100);
    assert_eq!(sent(&e), 10);
    let wb: Vec<_> = [6, 7, 0, 1, 2].iter().map(|&i| done(&raw, i)).collect();
    assert_eq!(
        wb,
        [
            (false, false),
            (false, false),
            (false, false),
            (true, false),
            (true, true)
        ]
    );
    let s = e.stats();
    let qc = &s.apps[0].queues[0].counters;
    assert_eq!((qc.tx_frames, qc.tx_bad_descriptor), (10, 1), "{qc:?}");
    assert_eq!(s.apps[0].counters.reject_bad_descriptor, 1);
    assert_eq!(s.drops()["tx_bad_descriptor"], 1);
}
