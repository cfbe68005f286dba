//! Timestamping, rate limiting, per-port steering, delay lines and emulated
//! interconnect latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use enso::batch::write_frame;
use enso::{Device, DeviceOptions};
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{Clock, DeviceConfig, Engine, Nic, RunOptions, WireConfig};

fn device(name: &str, ports: Vec<WireConfig>) -> (DeviceConfig, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = DeviceConfig::new(name, ports[0].clone());
    cfg.ports = ports;
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 256 << 10;
    cfg.notif_ring_entries = 1024;
    (cfg, dir)
}

fn opts() -> DeviceOptions {
    DeviceOptions {
        pipes: 4,
        tx_pipes: 1,
        tx_pipe_size: 256 << 10,
        ..Default::default()
    }
}

/// Writes `n` 64 B test frames into the TX pipe and sends them on `port`.
fn send_frames(dev: &mut Device, tx: enso::TxPipe, first_seq: u64, n: u64, port: u32) {
    let tf = TestFrames::new(1, 9);
    let mut f = [0u8; 64];
    let buf = dev.tx_buf(tx, 64 * n as usize).unwrap();
    let mut at = 0;
    for s in first_seq..first_seq + n {
        let len = tf.build(FrameKind::Ipv4Udp, s, 0, 64, &mut f);
        at += write_frame(&mut buf[at..], &f[..len]).unwrap();
    }
    dev.send(tx, at, port).unwrap();
}

#[test]
fn rtt_of_a_delay_line_is_measured_exactly_with_a_manual_clock() {
    // Port 0 is cabled to itself through a 7 us delay line.
    let (cfg, _d) = device(
        "rtt",
        vec![WireConfig::Cable {
            peer: 0,
            delay_ns: 7000,
        }],
    );
    let mut e = Engine::new(cfg).unwrap();
    let t = Arc::new(AtomicU64::new(1_000_000));
    e.set_clock(Clock::Manual(t.clone()));
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let rx = dev.alloc_rx_pipe(true).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    dev.set_timestamping(0, Some(18)).unwrap();
    e.run_until_idle(10);
    send_frames(&mut dev, tx, 0, 100, 0);
    let mut rtts = vec![];
    for _ in 0..200 {
        e.step();
        t.fetch_add(500, Ordering::Relaxed);
        let n = {
            let b = dev.recv(rx).unwrap();
            for p in b.packets() {
                rtts.push(u32::from_le_bytes(p[18..22].try_into().unwrap()));
            }
            b.len()
        };
        dev.free(rx, n).unwrap();
    }
    assert_eq!(rtts.len(), 100);
    // Every frame left at a step boundary and arrives at the first step at
    // or after 7 us later; the clock advances 500 ns per step.
    assert!(rtts.iter().all(|&r| r == 7000), "{rtts:?}");
    // Without timestamping the field is the frame's own bytes again.
    dev.set_timestamping(0, None).unwrap();
    e.run_until_idle(10);
    send_frames(&mut dev, tx, 100, 1, 0);
    for _ in 0..40 {
        e.step();
        t.fetch_add(500, Ordering::Relaxed);
    }
    let b = dev.recv(rx).unwrap();
    let p = b.packets().next().unwrap();
    assert_eq!(&p[18..22], &[0, 0, 0, 0]);
}

#[test]
fn rtt_with_the_real_clock_covers_the_delay() {
    let (cfg, _d) = device(
        "rtt-real",
        vec![WireConfig::Cable {
            peer: 0,
            delay_ns: 200_000,
        }],
    );
    let nic = Nic::start(cfg, RunOptions::default()).unwrap();
    let mut dev = Device::attach_nic(&nic, opts()).unwrap();
    let rx = dev.alloc_rx_pipe(true).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    dev.set_timestamping(0, Some(18)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let start = Instant::now();
    send_frames(&mut dev, tx, 0, 10, 0);
    let mut rtts = vec![];
    while rtts.len() < 10 && start.elapsed() < Duration::from_secs(10) {
        let n = {
            let b = dev.recv(rx).unwrap();
            for p in b.packets() {
                rtts.push(u32::from_le_bytes(p[18..22].try_into().unwrap()));
            }
            b.len()
        };
        dev.free(rx, n).unwrap();
    }
    assert_eq!(rtts.len(), 10);
    // Never less than the line's delay (the clock is monotonic, 1 ns), and
    // never more than the time since the first was handed to the NIC.
    let bound = start.elapsed().as_nanos() as u64;
    assert!(rtts.iter().all(|&r| r >= 200_000), "{rtts:?}");
    assert!(
        rtts.iter().all(|&r| u64::from(r) <= bound),
        "{rtts:?} within {bound} ns"
    );
}

#[test]
fn rate_limiter_sends_the_configured_count_per_interval() {
    let (cfg, _d) = device("limit", vec![WireConfig::Null]);
    let mut e = Engine::new(cfg).unwrap();
    let t = Arc::new(AtomicU64::new(1_000_000));
    e.set_clock(Clock::Manual(t.clone()));
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    // One flit every 100 cycles of 200 MHz: one 64 B frame per 500 ns.
    dev.set_rate_limit(0, Some((1, 100))).unwrap();
    e.run_until_idle(10);
    send_frames(&mut dev, tx, 0, 4000, 0);
    let sent = |e: &Engine| e.stats().ports[0].counters.tx_frames;
    let mut per_ms = vec![];
    let mut last = 0;
    for _ in 0..5 {
        for _ in 0..1000 {
            e.step();
            t.fetch_add(1000, Ordering::Relaxed);
            dev.reap_completions().unwrap();
        }
        let s = sent(&e);
        per_ms.push(s - last);
        last = s;
    }
    // 1 ms at 2 M frames/s = 2000 frames, give or take the burst bound.
    assert!((1995..=2025).contains(&per_ms[0]), "{per_ms:?}");
    assert!((1995..=2005).contains(&per_ms[1]), "{per_ms:?}");
    assert_eq!(last, 4000, "{per_ms:?}");
    // Removing the limit lets the next ones go at once.
    dev.set_rate_limit(0, None).unwrap();
    send_frames(&mut dev, tx, 4000, 500, 0);
    e.run_until_idle(1000);
    assert_eq!(sent(&e), 4500);
}

#[test]
fn a_limiter_with_deep_bursts_starts_at_its_rate() {
    let (cfg, _d) = device("limit-start", vec![WireConfig::Null]);
    let mut e = Engine::new(cfg).unwrap();
    let t = Arc::new(AtomicU64::new(1_000_000));
    e.set_clock(Clock::Manual(t.clone()));
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    // One flit per 100 cycles again, in bursts of up to 20 000 flits (10 ms
    // of credit, as pktgen widens its limiter).
    dev.set_rate_limit(0, Some((20_000, 2_000_000))).unwrap();
    let sent = |e: &Engine| e.stats().ports[0].counters.tx_frames;
    let run_us = |e: &mut Engine, dev: &mut Device, us: usize| {
        for _ in 0..us {
            e.step();
            t.fetch_add(1000, Ordering::Relaxed);
            dev.reap_completions().unwrap();
        }
    };
    // The limiter set, nothing to send for 5 ms (an application setting up).
    run_us(&mut e, &mut dev, 5000);
    send_frames(&mut dev, tx, 0, 4000, 0);
    run_us(&mut e, &mut dev, 100);
    // 100 us at 2 M frames/s: 200 frames, not the 4000 a full bucket
    // would let out at once.
    assert!((195..=205).contains(&sent(&e)), "{}", sent(&e));
    // The rest at the rate; then a pause of 5 ms with nothing to send banks
    // nothing either.
    run_us(&mut e, &mut dev, 1900);
    assert_eq!(sent(&e), 4000);
    run_us(&mut e, &mut dev, 5000);
    send_frames(&mut dev, tx, 4000, 1000, 0);
    run_us(&mut e, &mut dev, 100);
    assert!((4195..=4205).contains(&sent(&e)), "{}", sent(&e));
}

#[test]
fn each_port_steers_separately() {
    // Port 0 and 1 are cabled: what one app sends on port 0 reaches the
    // other app's pipe on port 1, and its echo comes back to port 0.
    let (cfg, _d) = device(
        "ports",
        vec![
            WireConfig::Cable {
                peer: 1,
                delay_ns: 0,
            },
            WireConfig::Cable {
                peer: 0,
                delay_ns: 0,
            },
        ],
    );
    let mut e = Engine::new(cfg).unwrap();
    let mut gen = Device::attach_engine(&mut e, opts()).unwrap();
    let mut dut = Device::attach_engine(&mut e, opts()).unwrap();
    let g_rx = gen.alloc_rx_pipe_on(0, true).unwrap();
    let g_tx = gen.alloc_tx_pipe().unwrap();
    let d_pipe = dut.alloc_rxtx_pipe_on(1, true).unwrap();
    e.run_until_idle(10);
    send_frames(&mut gen, g_tx, 0, 1000, 0);
    let tf = TestFrames::new(1, 9);
    let mut scratch = [0u8; 1536];
    let mut back = 0;
    for _ in 0..2000 {
        e.step();
        // The device under test echoes.
        let n = {
            let mut b = dut.recv(d_pipe).unwrap();
            for p in b.packets_mut() {
                p[58] = p[58].wrapping_add(1);
            }
            b.len()
        };
        if n > 0 {
            dut.send_and_free_on(d_pipe, n, 1).unwrap();
        }
        // The generator checks what came back.
        let n = {
            let b = gen.recv(g_rx).unwrap();
            for p in b.packets() {
                tf.verify(p, 1, None, &mut scratch).unwrap();
                back += 1;
            }
            b.len()
        };
        gen.free(g_rx, n).unwrap();
    }
    assert_eq!(back, 1000);
    let s = e.stats();
    assert_eq!(s.total_drops(), 0);
    assert_eq!(s.ports[1].counters.rx_frames, 1000);
    assert_eq!(s.ports[0].counters.rx_frames, 1000);
}

#[test]
fn interconnect_latency_delays_register_writes_and_notifications() {
    let (mut cfg, _d) = device(
        "latency",
        vec![WireConfig::Cable {
            peer: 0,
            delay_ns: 0,
        }],
    );
    cfg.interconnect_latency_ns = 2_000_000; // 2 ms each way, to dwarf scheduling noise
    let nic = Nic::start(cfg, RunOptions::default()).unwrap();
    let mut dev = Device::attach_nic(&nic, opts()).unwrap();
    let rx = dev.alloc_rx_pipe(true).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let start = Instant::now();
    send_frames(&mut dev, tx, 0, 1, 0);
    loop {
        if dev.recv(rx).unwrap().packet_count() == 1 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    // The TX tail write needed one crossing, the RX notification another.
    assert!(
        start.elapsed() >= Duration::from_millis(4),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn generator_measures_round_trip_times() {
    let g = nic_emu::GeneratorConfig {
        count: Some(5000),
        timestamps: true,
        burst: 8,
        ..Default::default()
    };
    let (mut cfg, _d) = device("gen-rtt", vec![WireConfig::Generator(g)]);
    // Every frame is notified at once, so each is echoed in the step it
    // arrives and sent back in the next. (Under reactive notifications a
    // busy pipe's next batch waits for the head write: that is the cost the
    // latency experiment measures.)
    cfg.notification_mode = nic_emu::NotificationMode::PerPacket;
    // And the engine applies the TX tail write in the very next step, even
    // though its generator keeps it busy.
    cfg.tuning.register_poll_flits = 0;
    let mut e = Engine::new(cfg).unwrap();
    let t = Arc::new(AtomicU64::new(1_000_000));
    e.set_clock(Clock::Manual(t.clone()));
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    dev.alloc_rxtx_pipe(true).unwrap();
    e.run_until_idle(5);
    e.reset_generator_latency();
    for _ in 0..2000 {
        e.step();
        t.fetch_add(1000, Ordering::Relaxed);
        enso_tests::echo_ready(&mut dev);
    }
    let s = e.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(
        (g.returned, g.corrupt),
        (5000, 0),
        "timestamp bytes are not corruption"
    );
    let l = g.latency.as_ref().unwrap();
    // Sent in one step, echoed, sent back in the next: exactly one step.
    assert_eq!(l.count, 5000);
    assert_eq!(
        (l.min_ns, l.p50_ns, l.p99_ns, l.max_ns),
        (1000, 1000, 1000, 1000),
        "{l:?}"
    );
    e.reset_generator_latency();
    assert_eq!(
        e.stats()
            .generator(0)
            .unwrap()
            .latency
            .as_ref()
            .unwrap()
            .count,
        0
    );
}

/// An IPv4/UDP frame carrying `payload`.
fn udp_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 42 + payload.len()];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 1, 0, 1]);
    f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f[42..].copy_from_slice(payload);
    let c = nic_emu::wire::ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn stream_pipe_carries_payloads_contiguously() {
    let (mut cfg, _d) = device(
        "stream",
        vec![
            WireConfig::Cable {
                peer: 1,
                delay_ns: 0,
            },
            WireConfig::Cable {
                peer: 0,
                delay_ns: 0,
            },
        ],
    );
    cfg.pipe_size = 4096;
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    let rx = dev.alloc_stream_pipe_on(1, true).unwrap();
    e.run_until_idle(10);
    // A log of numbered lines, cut into frames at arbitrary points.
    let text: Vec<u8> = (0..3000)
        .flat_map(|i| format!("line {i} of the log\n").into_bytes())
        .collect();
    let mut got = Vec::new();
    let mut sent = 0;
    let mut cut = 7;
    let mut steps = 0;
    while got.len() < text.len() {
        steps += 1;
        assert!(
            steps < 100_000,
            "stuck at {} of {} bytes: {:?}",
            got.len(),
            text.len(),
            e.stats().apps[0]
        );
        if sent < text.len() {
            let n = cut.min(text.len() - sent);
            cut = cut * 7 % 301 + 1;
            let f = udp_frame(&text[sent..sent + n]);
            let buf = dev.tx_buf(tx, 2048).unwrap();
            let len = enso::batch::write_frame(buf, &f).unwrap();
            dev.send(tx, len, 0).unwrap();
            sent += n;
        }
        e.step();
        // Take whole lines only; the unfinished one stays in the pipe.
        let whole = {
            let b = dev.peek(rx).unwrap();
            let bytes = b.bytes();
            let whole = bytes.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
            got.extend_from_slice(&bytes[..whole]);
            whole
        };
        dev.confirm(rx, whole).unwrap();
        if whole > 0 {
            dev.free(rx, whole).unwrap();
        } else {
            // Nothing to hand back: ask for the latest tail instead (the
            // NIC notifies again only when the head is written).
            dev.prefetch(rx).unwrap();
        }
        e.step();
    }
    assert_eq!(got, text);
    let s = e.stats();
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
    assert!(s.apps[0]
        .pipes
        .iter()
        .any(|p| p.counters.rx_bytes == text.len() as u64));
}

/// The step (counting from 1) in which a head write posted after the first
/// step takes effect, with the generator sending `burst` frames every step.
fn step_applying_a_head_write(burst: usize, poll_flits: u32) -> usize {
    let g = nic_emu::GeneratorConfig {
        sizes: nic_emu::SizeSpec::Fixed(64), // one flit each
        burst,
        max_in_flight: None,
        paused: true,
        ..Default::default()
    };
    let (mut cfg, _d) = device("poll", vec![WireConfig::Generator(g)]);
    cfg.tuning.register_poll_flits = poll_flits;
    cfg.tuning.register_poll_ns = u64::MAX;
    let mut e = Engine::new(cfg).unwrap();
    e.set_clock(Clock::Manual(Arc::new(AtomicU64::new(1_000_000))));
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let p = dev.alloc_rx_pipe(true).unwrap();
    e.run_until_idle(10);
    e.set_generators_paused(false);
    let head_writes = |e: &Engine| -> u64 {
        e.stats().apps[0]
            .pipes
            .iter()
            .map(|p| p.counters.head_writes)
            .sum()
    };
    e.step();
    let n = dev.recv(p).unwrap().len();
    // The first frame is notified at once; the others wait for this head
    // write (reactive notifications).
    assert_eq!(n, 64);
    dev.free(p, n).unwrap();
    let before = head_writes(&e);
    for step in 2..100 {
        e.step();
        if head_writes(&e) > before {
            return step;
        }
    }
    panic!("the head write was never applied");
}

#[test]
fn a_saturated_engine_applies_posted_writes_after_a_bounded_number_of_flits() {
    // Looking every step: the next step applies it.
    assert_eq!(step_applying_a_head_write(32, 0), 2);
    // Saturated (32 frames a step) and looking every 128 flits: it looked
    // at the start of step 1 and looks again at the start of step 5.
    assert_eq!(step_applying_a_head_write(32, 128), 5);
    // Keeping up (4 frames a step): it looks every step whatever the limit.
    assert_eq!(step_applying_a_head_write(4, 128), 2);
}

#[test]
fn send_sends_only_bytes_reserved_with_tx_buf() {
    let (cfg, _d) = device("reserve", vec![WireConfig::Null]);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    let not_reserved = |asked, reserved| Err(enso::SendError::NotReserved { asked, reserved });
    // Nothing reserved yet: sending would send whatever the ring holds.
    assert_eq!(dev.send(tx, 64, 0), not_reserved(64, 0));
    let tf = TestFrames::new(1, 9);
    let mut f = [0u8; 64];
    let len = tf.build(FrameKind::Ipv4Udp, 0, 0, 64, &mut f);
    let buf = dev.tx_buf(tx, 128).unwrap();
    let at = write_frame(buf, &f[..len]).unwrap();
    assert_eq!(dev.send(tx, 192, 0), not_reserved(192, 128));
    assert_eq!(dev.send(tx, at, 0), Ok(()));
    // A send ends the span.
    assert_eq!(dev.send(tx, 64, 0), not_reserved(64, 0));
    e.run_until_idle(10);
    let s = e.stats();
    assert_eq!(s.ports[0].counters.tx_frames, 1);
    assert_eq!(s.apps[0].counters.reject_bad_tx_frame, 0);
}

#[test]
fn a_stopped_in_process_device_is_gone() {
    let (cfg, _d) = device("gone", vec![WireConfig::Null]);
    let nic = Nic::start(cfg, RunOptions::default()).unwrap();
    let mut dev = Device::attach_nic(
        &nic,
        DeviceOptions {
            tx_credits: 2,
            ..opts()
        },
    )
    .unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    assert_eq!(dev.check_alive(), Ok(()));
    nic.stop();
    assert_eq!(dev.check_alive(), Err(enso::DeviceError::Gone));
    // Sends that wait for completions a stopped device never makes end
    // with "gone", not "stalled".
    let frame = [0u8; 64];
    let err = (0..3)
        .find_map(|_| {
            let buf = dev.tx_buf(tx, 64).ok()?;
            buf.copy_from_slice(&frame);
            dev.send(tx, 64, 0).err()
        })
        .expect("a send fails once the credits are spent");
    assert_eq!(err, enso::SendError::Device(enso::DeviceError::Gone));
}

#[test]
fn round_robin_holds_for_fallback_pipes_added_later() {
    let (cfg, _d) = device("rr", vec![WireConfig::Loopback]);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    let mut pipes = vec![
        dev.alloc_rx_pipe(true).unwrap(),
        dev.alloc_rx_pipe(true).unwrap(),
    ];
    dev.set_fallback_round_robin(pipes[0], true).unwrap();
    // Added after the policy was set: before, every add reset it to hash.
    pipes.push(dev.alloc_rx_pipe(true).unwrap());
    e.run_until_idle(10);
    // One flow: by hash it would all land in one pipe.
    send_frames(&mut dev, tx, 0, 300, 0);
    let mut counts = [0; 3];
    for _ in 0..200 {
        e.step();
        for (i, &p) in pipes.iter().enumerate() {
            let len = {
                let b = dev.recv(p).unwrap();
                counts[i] += b.packets().count();
                b.len()
            };
            dev.free(p, len).unwrap();
        }
    }
    assert_eq!(counts, [100, 100, 100]);
    assert_eq!(e.stats().apps[0].counters.reject_bad_config, 0);
}

#[test]
fn frames_dropped_on_arrival_leave_the_generators_window() {
    let g = nic_emu::GeneratorConfig {
        max_in_flight: Some(8),
        ..Default::default()
    };
    let (cfg, _d) = device("window", vec![WireConfig::Generator(g)]);
    let mut e = Engine::new(cfg).unwrap();
    // No application yet: every frame matches nothing and is dropped.
    for _ in 0..10 {
        e.step();
    }
    let gen = |e: &Engine| e.stats().generator(0).unwrap().clone();
    let before = gen(&e);
    assert!(before.sent >= 8, "{before:?}");
    assert_eq!(before.dropped_on_arrival, before.sent);
    assert_eq!(e.stats().ports[0].counters.drop_no_match, before.sent);
    // Once a pipe receives them, frames flow: the dropped ones did not
    // keep the window shut.
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let p = dev.alloc_rxtx_pipe(true).unwrap();
    let echo = FrameKind::Ipv4Udp.echo_offset();
    for _ in 0..200 {
        e.step();
        let n = {
            let mut b = dev.recv(p).unwrap();
            for f in b.packets_mut() {
                f[echo] = f[echo].wrapping_add(1);
            }
            b.len()
        };
        if n > 0 {
            dev.send_and_free(p, n).unwrap();
        }
    }
    let after = gen(&e);
    assert!(after.returned >= 100, "{after:?}");
    assert_eq!(after.corrupt, 0);
    assert_eq!(after.dropped_on_arrival, before.sent);
}

#[test]
fn a_tx_frame_that_cannot_be_delimited_is_counted_with_what_it_takes_along() {
    let (cfg, _d) = device("bad-tx", vec![WireConfig::Null]);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    let tf = TestFrames::new(1, 9);
    let mut f = [0u8; 64];
    let len = tf.build(FrameKind::Ipv4Udp, 0, 0, 64, &mut f);
    // A good frame, one whose IPv4 total length (4) is shorter than its
    // own header, then two good ones the NIC can no longer find.
    let mut bad = f;
    bad[16..18].copy_from_slice(&4u16.to_be_bytes());
    let buf = dev.tx_buf(tx, 256).unwrap();
    let mut at = write_frame(buf, &f[..len]).unwrap();
    // Written raw: the library's `write_frame` refuses it.
    buf[at..at + len].copy_from_slice(&bad[..len]);
    at += 64;
    for _ in 0..2 {
        at += write_frame(&mut buf[at..], &f[..len]).unwrap();
    }
    assert_eq!(at, 256);
    dev.send(tx, at, 0).unwrap();
    e.run_until_idle(10);
    let s = e.stats();
    assert_eq!(s.ports[0].counters.tx_frames, 1);
    let c = &s.apps[0].counters;
    assert_eq!(c.reject_bad_tx_frame, 1);
    assert_eq!(c.tx_bytes_discarded, 192);
    assert_eq!(s.drops().get("tx_bad_frame"), Some(&1));
}

/// Four 64 B test frames written into `tx` and handed to the NIC in one
/// notification.
fn send_four(dev: &mut Device, tx: enso::TxPipe) {
    let tf = TestFrames::new(1, 9);
    let mut f = [0u8; 64];
    let len = tf.build(FrameKind::Ipv4Udp, 0, 0, 64, &mut f);
    let buf = dev.tx_buf(tx, 256).unwrap();
    let mut at = 0;
    for _ in 0..4 {
        at += write_frame(&mut buf[at..], &f[..len]).unwrap();
    }
    dev.send(tx, at, 0).unwrap();
}

#[test]
fn frames_handed_over_before_a_detach_are_still_sent() {
    let (cfg, _d) = device("detach-tx", vec![WireConfig::Null]);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    send_four(&mut dev, tx);
    // The application goes before the engine has looked at its registers.
    let id = e.app_ids()[0];
    assert!(e.detach(id));
    let s = e.stats();
    assert_eq!(s.ports[0].counters.tx_frames, 4);
    assert_eq!(s.detached_apps.tx_frames, 4);
    assert_eq!(s.detached_apps.tx_notifications_discarded, 0);
    assert_eq!(
        s.drops().get("tx_notifications_discarded_on_detach"),
        Some(&0)
    );
}

#[test]
fn frames_a_rate_limit_holds_back_at_a_detach_are_counted() {
    let (cfg, _d) = device("detach-limited", vec![WireConfig::Null]);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts()).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    // One flit every 5 ms.
    dev.set_rate_limit(0, Some((1, 1_000_000))).unwrap();
    send_four(&mut dev, tx);
    let id = e.app_ids()[0];
    assert!(e.detach(id));
    let s = e.stats();
    assert!(
        s.ports[0].counters.tx_frames < 4,
        "{:?}",
        s.ports[0].counters
    );
    assert_eq!(s.detached_apps.tx_notifications_discarded, 1);
    assert_eq!(
        s.drops().get("tx_notifications_discarded_on_detach"),
        Some(&1)
    );
}

#[test]
fn a_device_that_cannot_listen_leaves_no_directory() {
    // A control socket path longer than a Unix socket address holds.
    let (cfg, d) = device(&"x".repeat(120), vec![WireConfig::Null]);
    let dev_dir = cfg.device_dir();
    let started = Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    );
    let Err(e) = started else {
        panic!("started, though the socket cannot be bound");
    };
    let e = e.to_string();
    assert!(e.contains("control"), "{e}");
    assert!(!dev_dir.exists(), "{} left behind", dev_dir.display());
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}
