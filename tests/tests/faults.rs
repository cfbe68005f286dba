//! Stalls, many pipes, and hostile applications.

use std::sync::atomic::Ordering;

use enso::Device;
use enso_tests::*;
use nic_emu::engine::AttachRequest;
use nic_emu::layout::{self, reg};
use nic_emu::testframe::TestFrames;
use nic_emu::wire::PROTO_UDP;
use nic_emu::{Engine, GeneratorConfig, SizeSpec};

#[test]
fn stalled_application_drops_whole_frames_then_resumes_cleanly() {
    let g = GeneratorConfig {
        count: Some(100_000),
        sizes: SizeSpec::Range(64, 600),
        burst: 16,
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("stall", g);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts(1)).unwrap();
    dev.alloc_rxtx_pipe(true).unwrap();
    // The application stalls: the 64 KiB pipe fills and frames are dropped.
    for _ in 0..2000 {
        e.step();
    }
    let s = e.stats();
    let full = s.drops()["pipe_full"];
    assert!(full > 0, "no pipe-full drops while stalled");
    // No partial frame was written: what is in the pipe is whole frames.
    let pending: Vec<usize> = {
        dev.poll().unwrap();
        let pipe = dev.next_pipe_with_data().unwrap().unwrap();
        let b = dev.peek(pipe).unwrap();
        let v = b.packets().map(|p| p.len()).collect();
        assert!(b.packets().error().is_none());
        v
    };
    assert!(!pending.is_empty());
    // Resume.
    run_stepped_echo(&mut e, &mut dev, 10_000_000);
    let s = e.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(g.sent, 100_000);
    assert_eq!(g.corrupt + g.duplicate + g.foreign, 0);
    assert_eq!(g.returned + s.total_drops(), g.sent, "{:?}", s.drops());
    assert!(g.returned > 1000);
}

#[test]
fn a_thousand_pipes_on_one_notification_buffer() {
    let g = GeneratorConfig {
        count: Some(200_000),
        flows: 16384,
        burst: 64,
        max_in_flight: Some(1024),
        ..Default::default()
    };
    let (mut cfg, _dir) = generator_device("many", g);
    cfg.pipe_size = 4096;
    let mut e = Engine::new(cfg).unwrap();
    // Enough credits to queue every pipe's fallback registration before the
    // stepped engine runs (it completes them as it goes).
    let o = enso::DeviceOptions {
        tx_credits: 2048,
        ..opts(1024)
    };
    let mut dev = Device::attach_engine(&mut e, o).unwrap();
    for _ in 0..1024 {
        dev.alloc_rxtx_pipe(true).unwrap();
    }
    run_stepped_echo(&mut e, &mut dev, 10_000_000);
    let s = e.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
    assert_eq!((g.returned, g.corrupt), (200_000, 0));
    let pipes = &s.apps[0].pipes;
    assert_eq!(pipes.len(), 1024);
    assert!(
        pipes.iter().all(|p| p.counters.rx_frames > 50),
        "a pipe got no traffic"
    );
}

#[test]
fn wrap_around_many_times() {
    let g = GeneratorConfig {
        count: Some(400_000),
        sizes: SizeSpec::Range(60, 1536),
        burst: 4,
        // Frames stay in the pipe until their send completes and software
        // frees them, a step after the generator saw them: 2 x 4 x 24 flits
        // fit in the 256-flit pipe.
        max_in_flight: Some(4),
        ..Default::default()
    };
    let (mut cfg, _dir) = generator_device("wrap", g);
    cfg.pipe_size = 16 << 10;
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts(1)).unwrap();
    dev.alloc_rxtx_pipe(true).unwrap();
    run_stepped_echo(&mut e, &mut dev, 20_000_000);
    let s = e.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(
        (g.returned, g.corrupt, g.duplicate),
        (400_000, 0, 0),
        "{:?}",
        s.drops()
    );
    let wraps = s.apps[0].pipes[0].counters.rx_bytes / (16 << 10);
    assert!(wraps > 10_000, "only {wraps} wraps");
}

#[test]
fn hostile_application_cannot_disturb_another() {
    // Several seeds: each run's counters show both halves of the attack
    // (register writes and TX notifications) reaching the NIC's checks.
    let mut tx_seen = Vec::new();
    for (k, seed) in [0x9e37_79b9_7f4a_7c15u64, 0x0123_4567_89ab_cdef, 42]
        .into_iter()
        .enumerate()
    {
        tx_seen.push(hostile_run(&format!("hostile{k}"), seed));
    }
    // In every run the attacker's TX half was read and judged: DATA
    // notifications taken from its ring and their frames sent (its own
    // garbage, which the generator counted as corrupt or foreign at most),
    // refused notifications, frames and configurations.
    for c in &tx_seen {
        assert!(c.tx_notifications > 0 && c.tx_frames > 0, "{c:?}");
        assert!(c.reject_bad_tx_notification > 0, "{c:?}");
        assert!(c.reject_bad_tx_frame > 0, "{c:?}");
        assert!(
            c.config_notifications > 0 && c.reject_bad_config > 0,
            "{c:?}"
        );
    }
}

/// One hostile run with this seed; returns the attacker's counters after
/// checking that the victim was not disturbed.
fn hostile_run(tag: &str, seed: u64) -> nic_emu::counters::AppCounters {
    let g = GeneratorConfig {
        count: Some(200_000),
        flows: 8,
        burst: 32,
        max_in_flight: Some(256),
        ..Default::default()
    };
    let (cfg, _dir) = generator_device(tag, g);
    let mut e = Engine::new(cfg).unwrap();
    // The victim: a well-behaved echo server bound to the generator's flows.
    let mut victim = Device::attach_engine(&mut e, opts(2)).unwrap();
    let p = victim.alloc_rxtx_pipe(false).unwrap();
    for f in 0..8 {
        let mut rule = TestFrames::flow_tuple(f);
        rule.src_ip = 0;
        rule.src_port = 0;
        assert_eq!(rule.protocol, PROTO_UDP);
        victim.bind(p, rule).unwrap();
    }
    // The attacker: raw access to its own shared memory, no library.
    let mut raw = RawApp::attach(
        &mut e,
        AttachRequest {
            pipes: 4,
            dma_bytes: 8 << 20,
            desc_queues: 0,
        },
    );
    let info = raw.info.clone();
    let mut rng = Rng(seed);
    let nb = layout::NBUF_QUEUE_BASE + info.nbuf_id;
    // Its TX notification ring, set up as the library sets one up (so
    // that the NIC reads what it writes there), 1 MiB into its region;
    // its random register writes may move or disable it later.
    let ring_off = 1usize << 20;
    let entries = e.config().notif_ring_entries;
    raw.write(layout::reg_addr(nb, reg::TX_MEM_LOW), ring_off as u32);
    raw.write(layout::reg_addr(nb, reg::TX_MEM_HIGH), 0);
    let mut tail = 0u32;
    let mut hostile = 0u64;
    let mut step = 0u64;
    while step < 5_000_000 {
        step += 1;
        e.step();
        echo_ready(&mut victim);
        victim.reap_completions().unwrap();
        if hostile < 400_000 {
            // A burst of random register writes: mostly its own registers
            // with random values, some anywhere in the window.
            for _ in 0..64 {
                let r = rng.next_u64();
                let addr = match r % 4 {
                    0 => r as u32 >> 8,
                    1 => layout::reg_addr(nb, (r >> 8) as u32 % 8 * 4),
                    2 => layout::reg_addr(
                        info.pipe_base + (r >> 8) as u32 % 6,
                        (r >> 16) as u32 % 8 * 4,
                    ),
                    _ => layout::reg_addr(
                        (r >> 8) as u32 % layout::NUM_QUEUES,
                        (r >> 20) as u32 % 8 * 4,
                    ),
                };
                let value = match (r >> 40) % 3 {
                    0 => rng.next_u64() as u32,
                    1 => (rng.next_u64() % 64) as u32,
                    _ => ((rng.next_u64() % (info.dma_len as u64 / 4096)) * 4096) as u32,
                };
                if !raw.post(addr, value) {
                    break;
                }
                hostile += 1;
            }
            raw.publish();
            // Random TX notifications all over its region, and as many in
            // its ring, handed to the NIC by moving the ring's tail.
            for i in 0..32 {
                let slot = if i % 2 == 0 {
                    (rng.next_u64() % (info.dma_len as u64 / 64)) as usize * 64
                } else {
                    tail = (tail + 1) % entries;
                    ring_off + (tail as usize + entries as usize - 1) % entries as usize * 64
                };
                let n = raw.tx_notif(slot);
                n.signal
                    .store((rng.next_u64() % 4) as u32, Ordering::Relaxed);
                n.config_id
                    .store((rng.next_u64() % 7) as u32, Ordering::Relaxed);
                n.address.store(
                    rng.next_u64() % (2 * info.dma_len as u64),
                    Ordering::Relaxed,
                );
                n.length
                    .store((rng.next_u64() % (4 << 20)) as u32, Ordering::Relaxed);
                n.port.store((rng.next_u64() % 3) as u32, Ordering::Relaxed);
                for a in &n.args {
                    a.store(rng.next_u64(), Ordering::Relaxed);
                }
            }
            if raw.post(layout::reg_addr(nb, reg::TX_TAIL), tail) {
                raw.publish();
            }
        }
        if hostile >= 400_000 && e.generators_finished() && step.is_multiple_of(64) {
            let s = e.stats();
            if s.generator(0).unwrap().in_flight() == 0 {
                break;
            }
        }
    }
    assert!(hostile >= 400_000, "only {hostile} hostile writes");
    let s = e.stats();
    let g = s.generator(0).unwrap();
    // Every one of the victim's frames came back intact, exactly once.
    assert_eq!((g.returned, g.duplicate), (200_000, 0), "{g:?}");
    let attacker = s.apps.iter().find(|a| a.app_id == info.app_id).unwrap();
    let c = &attacker.counters;
    // Whatever the attacker transmitted is its own garbage, seen as such.
    assert!(g.corrupt + g.foreign <= c.tx_frames, "{g:?} vs {c:?}");
    assert!(
        c.reject_foreign_register > 0 && c.reject_bad_register_value > 0,
        "{c:?}"
    );
    let v = s
        .apps
        .iter()
        .find(|a| a.app_id == victim.info().app_id)
        .unwrap();
    assert_eq!(
        v.counters.reject_bad_register_value + v.counters.reject_foreign_register,
        0
    );
    c.clone()
}

#[test]
fn a_stream_pipe_rewritten_by_writes_applied_before_a_drop_is_decided_afresh() {
    // A full stream pipe makes the NIC apply the application's posted
    // writes before dropping a frame. If those writes disable the pipe or
    // make it a frame pipe, the frame must be decided again: not appended
    // with the stream pipe's old state (that wrote at offset 0 of the
    // region, or left a byte count as a flit index, and the next frame far
    // past the pipe).
    for disable in [true, false] {
        let g = GeneratorConfig {
            sizes: SizeSpec::Fixed(256),
            burst: 64,
            ..Default::default()
        };
        let (mut cfg, _dir) = generator_device("stream-rewrite", g);
        cfg.pipe_size = 4096;
        let mut e = Engine::new(cfg).unwrap();
        // Time stands still: the engine, saturated, defers its register
        // polls, so only the look before a drop applies the writes below.
        e.set_clock(nic_emu::Clock::Manual(std::sync::Arc::new(
            std::sync::atomic::AtomicU64::new(1_000_000),
        )));
        let mut dev = Device::attach_engine(&mut e, opts(2)).unwrap();
        let rx = dev.alloc_stream_pipe_on(0, true).unwrap();
        let id = dev.pipe_id(rx).unwrap();
        for _ in 0..20 {
            e.step();
        }
        let pipe = |e: &Engine| {
            e.stats().apps[0]
                .pipes
                .iter()
                .find(|p| p.pipe_id == id)
                .unwrap()
                .counters
                .clone()
        };
        let full = pipe(&e);
        assert!(full.drop_pipe_full > 0, "{full:?}");
        // The library stops here; its queue is continued by hand.
        let mut raw = RawApp::join(dev.info());
        let low = if disable {
            0
        } else {
            // A frame pipe at the end of the region, port 0.
            (raw.info.dma_len - raw.info.pipe_size) as u32
        };
        assert!(raw.post(layout::reg_addr(id, layout::reg::RX_MEM_LOW), low));
        assert!(raw.post(layout::reg_addr(id, layout::reg::RX_MEM_HIGH), 0));
        raw.publish();
        for _ in 0..20 {
            e.step();
        }
        let after = pipe(&e);
        let s = e.stats();
        if disable {
            assert_eq!(after.rx_frames, full.rx_frames, "{after:?}");
            assert!(s.ports[0].counters.drop_no_match >= 64, "{:?}", s.drops());
        } else {
            // Frames of 256 B fill the 4 KiB frame pipe (4 lines each, one
            // line kept free): 15 frames, the rest dropped as pipe-full.
            assert_eq!(after.rx_frames, full.rx_frames + 15, "{after:?}");
            assert!(after.drop_pipe_full > full.drop_pipe_full, "{after:?}");
        }
    }
}

#[test]
fn a_notification_moving_a_tail_backwards_is_ignored_and_counted() {
    // Ten 64 B frames (one flit each) arrive and are taken; the last ones
    // are not yet freed.
    let g = GeneratorConfig {
        count: Some(10),
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("backwards", g);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts(1)).unwrap();
    let pipe = dev.alloc_rx_pipe(true).unwrap();
    let mut got = 0;
    for _ in 0..10_000 {
        e.step();
        got += dev.recv(pipe).unwrap().packets().count();
        if got == 10 {
            break;
        }
        // Free what was taken, so that the NIC notifies the next frames;
        // the last batch stays taken and not freed.
        dev.free_all(pipe).unwrap();
    }
    assert_eq!(got, 10, "{:?}", e.stats().drops());
    let before = dev.stats().notifications;
    assert_eq!(dev.stats().bogus_notifications, 0);
    // A faulty device then says the pipe ends one flit earlier: behind
    // what software has already taken.
    let raw = RawApp::join(dev.info());
    let (rx_ring, _) = layout::notif_rings(dev.info().notif_ring_entries);
    let slot = before as usize % dev.info().notif_ring_entries as usize;
    let n = raw.rx_notif(rx_ring + slot * layout::NOTIF_SLOT);
    n.pipe_id.store(dev.info().pipe_base, Ordering::Relaxed);
    n.tail.store(9, Ordering::Relaxed);
    n.signal.store(layout::signal::DATA, Ordering::Release);
    // Nothing is handed out again, and the notification is counted.
    assert_eq!(dev.recv(pipe).unwrap().len(), 0);
    assert_eq!(dev.stats().bogus_notifications, 1);
    assert_eq!(dev.stats().notifications, before + 1);
    // The frames taken are still software's to free.
    dev.free_all(pipe).unwrap();
}

#[test]
fn an_application_cannot_shrink_or_grow_its_shared_files() {
    let g = GeneratorConfig {
        count: Some(1000),
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("shrink", g);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts(1)).unwrap();
    let pipe = dev.alloc_rx_pipe(true).unwrap();
    let info = dev.info().clone();
    // Shrunk, the engine's next access past the new end would fault and end
    // the device; grown, nothing would fault but the size is the device's.
    for path in [&info.dma_path, &info.mmio_path] {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let len = f.metadata().unwrap().len();
        for to in [0, len / 2, len + 4096] {
            let err = f.set_len(to).expect_err("the file is sealed");
            assert_eq!(
                err.kind(),
                std::io::ErrorKind::PermissionDenied,
                "{path:?} to {to}: {err}"
            );
        }
        assert_eq!(f.metadata().unwrap().len(), len);
    }
    // The device runs on.
    let mut got = 0;
    for _ in 0..100_000 {
        e.step();
        let n = dev.recv(pipe).unwrap().packets().count();
        got += n;
        dev.free_all(pipe).unwrap();
        if got == 1000 {
            break;
        }
    }
    assert_eq!(got, 1000);
}

#[test]
fn zeroing_head_and_tail_before_enabling_is_accepted() {
    // A generator that sends nothing: the engine looks at register writes
    // every step.
    let g = GeneratorConfig {
        paused: true,
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("zeroing", g);
    let mut e = Engine::new(cfg).unwrap();
    let mut raw = RawApp::attach(
        &mut e,
        AttachRequest {
            pipes: 2,
            dma_bytes: 8 << 20,
            desc_queues: 0,
        },
    );
    let info = raw.info.clone();
    let nb = layout::NBUF_QUEUE_BASE + info.nbuf_id;
    // The real NIC's enabling order: zero head and tail first.
    for q in [info.pipe_base, info.pipe_base + 1] {
        assert!(raw.post(layout::reg_addr(q, reg::RX_HEAD), 0));
        assert!(raw.post(layout::reg_addr(q, reg::RX_TAIL), 0));
    }
    for r in [reg::RX_HEAD, reg::RX_TAIL, reg::TX_HEAD, reg::TX_TAIL] {
        assert!(raw.post(layout::reg_addr(nb, r), 0));
    }
    raw.publish();
    e.run_until_idle(10);
    let c = e.stats().apps[0].counters.clone();
    assert_eq!(c.mmio_writes, 8);
    assert_eq!(
        (c.reject_foreign_register, c.reject_bad_register_value),
        (0, 0)
    );
    // Anything but zero there is still refused.
    assert!(raw.post(layout::reg_addr(info.pipe_base, reg::RX_TAIL), 5));
    assert!(raw.post(layout::reg_addr(info.pipe_base, reg::RX_HEAD), 5));
    raw.publish();
    e.run_until_idle(10);
    let c = e.stats().apps[0].counters.clone();
    assert_eq!(c.mmio_writes, 10);
    assert_eq!(
        (c.reject_foreign_register, c.reject_bad_register_value),
        (1, 1)
    );
}
