use std::thread;
use std::time::{Duration, Instant};

use super::*;
use crate::frames::{slot_len, udp_frame, SEQ_OFFSET};

/// Deterministic pseudo-random frame lengths in 60..=1514 (xorshift).
fn lengths(n: usize, mut state: u64) -> Vec<usize> {
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            60 + (state % (1514 - 60 + 1)) as usize
        })
        .collect()
}

/// The template with `seq` written where a pushed copy carries it.
fn expected(template: &[u8], seq_offset: usize, seq: u64) -> Vec<u8> {
    let mut f = template.to_vec();
    f[seq_offset..seq_offset + 8].copy_from_slice(&seq.to_le_bytes());
    f
}

#[test]
fn mixed_sizes_arrive_once_in_order_across_many_wraps() {
    // 4 KiB ring, frames up to 1514 B: the ring wraps every few frames, and
    // a sequence number at offset 59 straddles a flit (and, at times, the
    // ring end).
    let frames: Vec<Vec<u8>> = lengths(97, 0x9e37_79b9)
        .into_iter()
        .enumerate()
        .map(|(i, len)| udp_frame(len, i as u32))
        .collect();
    for seq_offset in [SEQ_OFFSET, 59] {
        let templates = Templates::new(&frames, seq_offset).unwrap();
        let (mut tx, mut rx) = ring(4096).unwrap();
        const N: u64 = 30_000;
        let producer = {
            let templates = templates.clone();
            thread::spawn(move || {
                let mut seq = 0;
                let mut pushed_bytes = 0usize;
                while seq < N {
                    let i = (seq % templates.len() as u64) as usize;
                    if tx.push_template(&templates, i, seq) {
                        pushed_bytes += slot_len(templates.frame_len(i));
                        seq += 1;
                        if seq % 3 == 0 {
                            tx.commit();
                        }
                    } else {
                        tx.commit();
                        thread::yield_now();
                    }
                }
                pushed_bytes
            })
        };
        let mut seq = 0u64;
        let mut wrapped = 0;
        let mut ring_bytes = 0usize;
        loop {
            let Some(f) = rx.next_frame() else {
                // Release before waiting, or a producer waiting for that
                // space never commits more.
                rx.release();
                if rx.is_finished() {
                    break;
                }
                thread::yield_now();
                continue;
            };
            let i = (seq % frames.len() as u64) as usize;
            assert_eq!(f.len(), frames[i].len(), "frame {seq}");
            assert_eq!(f.read_u64_le(seq_offset), Some(seq), "frame {seq}");
            assert_eq!(
                f.to_vec(),
                expected(&frames[i], seq_offset, seq),
                "frame {seq}"
            );
            let (a, b) = f.parts();
            assert_eq!(a.len() + b.len(), f.len());
            if !b.is_empty() {
                wrapped += 1;
            }
            ring_bytes += f.slot_len();
            seq += 1;
            if seq.is_multiple_of(5) {
                rx.release();
            }
        }
        assert_eq!(seq, N, "every frame exactly once");
        assert_eq!(producer.join().unwrap(), ring_bytes);
        assert!(ring_bytes / 4096 > 1000, "the ring wrapped many times");
        assert!(wrapped > 100, "many frames were split at the ring end");
    }
}

#[test]
fn arbitrary_frames_and_views_copy_exactly() {
    // push() of caller frames, then push_view() of each into a second ring
    // of another size (so frames wrap at different places in each).
    let lens = lengths(5000, 7);
    let (mut a_tx, mut a_rx) = ring(2048).unwrap();
    let (mut b_tx, mut b_rx) = ring(8192).unwrap();
    let mut next_push = 0;
    let mut next_check = 0;
    let frame = |k: usize| {
        let mut f = udp_frame(lens[k], k as u32);
        f[SEQ_OFFSET..SEQ_OFFSET + 8].copy_from_slice(&(k as u64).to_le_bytes());
        f
    };
    while next_check < lens.len() {
        while next_push < lens.len() {
            match a_tx.push(&frame(next_push)) {
                Ok(()) => next_push += 1,
                Err(PushError::Full) => break,
                Err(e) => panic!("{e}"),
            }
        }
        a_tx.commit();
        while let Some(f) = a_rx.peek() {
            if !b_tx.push_view(&f) {
                break;
            }
            a_rx.advance();
        }
        a_rx.release();
        b_tx.commit();
        while let Some(f) = b_rx.next_frame() {
            assert_eq!(f.to_vec(), frame(next_check), "frame {next_check}");
            next_check += 1;
        }
        b_rx.release();
    }
    drop(a_tx);
    assert!(a_rx.is_finished());
    assert!(!b_rx.is_finished(), "b's producer is still open");
    b_tx.close();
    assert!(b_rx.is_finished());
}

#[test]
fn full_ring_uses_every_byte_and_refuses_more() {
    let t = Templates::new(&[udp_frame(60, 0)], SEQ_OFFSET).unwrap();
    let (mut tx, mut rx) = ring(1024).unwrap();
    for seq in 0..16 {
        assert!(tx.push_template(&t, 0, seq), "slot {seq} of 16");
    }
    assert!(
        !tx.push_template(&t, 0, 16),
        "no flit kept free, none extra"
    );
    assert_eq!(tx.push(&udp_frame(60, 0)), Err(PushError::Full));
    assert!(rx.next_frame().is_none(), "nothing visible before commit");
    assert_eq!(tx.pending(), 1024);
    tx.commit();
    assert_eq!(rx.next_frame().unwrap().read_u64_le(SEQ_OFFSET), Some(0));
    assert!(!tx.push_template(&t, 0, 16), "consumed but not released");
    rx.release();
    assert!(tx.push_template(&t, 0, 16));
    assert_eq!(rx.unreleased(), 0);
}

#[test]
fn bad_inputs_are_typed_errors() {
    assert_eq!(ring(1000).unwrap_err(), RingError::BadCapacity(1000));
    assert_eq!(ring(32).unwrap_err(), RingError::BadCapacity(32));
    let (mut tx, _rx) = ring(256).unwrap();
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(tx.push(&arp), Err(PushError::NoLength));
    let mut short = udp_frame(100, 0);
    short.truncate(90);
    assert_eq!(
        tx.push(&short),
        Err(PushError::LengthMismatch {
            header: 100,
            actual: 90
        })
    );
    assert_eq!(
        tx.push(&udp_frame(300, 0)),
        Err(PushError::TooLarge {
            slot: 320,
            capacity: 256
        })
    );

    let none: [Vec<u8>; 0] = [];
    assert_eq!(Templates::new(&none, 0).unwrap_err(), TemplateError::Empty);
    assert!(matches!(
        Templates::new(&[udp_frame(60, 0), arp], 0),
        Err(TemplateError::Frame {
            index: 1,
            error: PushError::NoLength
        })
    ));
    assert!(matches!(
        Templates::new(&[udp_frame(60, 0)], 53),
        Err(TemplateError::SeqOutside {
            index: 0,
            len: 60,
            seq_offset: 53
        })
    ));

    let t = udp_templates(1518, 1);
    let cfg = RefConfig {
        ring_bytes: 1024,
        ..RefConfig::default()
    };
    assert!(matches!(
        cfg.check(&t),
        Err(RefError::FrameTooLarge { slot: 1536, .. })
    ));
    let cfg = RefConfig {
        batch: 0,
        ..RefConfig::default()
    };
    assert!(matches!(cfg.check(&t), Err(RefError::ZeroBatch)));
    assert!(RefVariant::new("x", cfg, t, Placement::pick()).is_err());
}

#[test]
fn runs_verify_in_both_modes() {
    let frames: Vec<Vec<u8>> = lengths(11, 3)
        .into_iter()
        .enumerate()
        .map(|(i, len)| udp_frame(len, i as u32))
        .collect();
    let templates = Templates::new(&frames, SEQ_OFFSET).unwrap();
    for mode in [Mode::Rx, Mode::Echo] {
        let cfg = RefConfig {
            mode,
            ring_bytes: 16 << 10,
            batch: 8,
        };
        let run = run(
            &cfg,
            &templates,
            &Placement::pick(),
            Duration::from_millis(20),
        )
        .unwrap();
        // Whatever the scheduler does: the producer pushes its first batch
        // before it first looks at the stop flag, and the consumer reads
        // until the producer closes the ring.
        assert!(run.packets > 0, "{mode}");
        assert!(run.verified, "{mode}: {run:?}");
        let n = frames.len() as u64;
        let cycle: u64 = frames.iter().map(|f| f.len() as u64).sum();
        let rest: u64 = frames[..(run.packets % n) as usize]
            .iter()
            .map(|f| f.len() as u64)
            .sum();
        assert_eq!(run.bytes, run.packets / n * cycle + rest, "{mode}");
        let trial = run.to_trial();
        assert_eq!(trial.packets, run.packets);
        assert!(trial.busy_ns.contains_key("producer") && trial.busy_ns.contains_key("consumer"));
        assert!(run.producer.busy_ns <= run.producer.elapsed.as_nanos() as u64);
    }
}

#[test]
fn ticks_come_while_the_sides_run_and_stop_with_them() {
    let templates = Templates::new(&[udp_frame(60, 0)], SEQ_OFFSET).unwrap();
    let cfg = RefConfig {
        mode: Mode::Rx,
        ring_bytes: 16 << 10,
        batch: 8,
    };
    let duration = Duration::from_millis(100);
    let every = Duration::from_millis(10);
    // A loaded machine may oversleep a tick past the end of the run, or
    // start the sides late: run until a run had ticks and its sides ran
    // for at least half of it, within a deadline far beyond any stall.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut ticks = Vec::new();
        let began = Instant::now();
        let run = run_ticking(&cfg, &templates, &Placement::pick(), duration, every, |t| {
            ticks.push(t)
        })
        .unwrap();
        let took = began.elapsed();
        assert!(run.verified, "{run:?}");
        // Ticks never come early (sleeps do not end early): each at least
        // `every` after the start or the last, so at most 9, all within
        // the run.
        assert!(ticks.len() < 10, "{ticks:?}");
        assert!(ticks.first().is_none_or(|&t| t >= every), "{ticks:?}");
        assert!(ticks.windows(2).all(|w| w[1] - w[0] >= every), "{ticks:?}");
        assert!(ticks.iter().all(|&t| t < duration), "{ticks:?}");
        // The ticks did not end the run: it lasted its whole duration, and
        // the sides ran within it.
        assert!(took >= duration, "{took:?}");
        assert!(run.elapsed <= took, "{run:?} in {took:?}");
        if !ticks.is_empty() && run.elapsed >= duration / 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no run with ticks that lasted: {ticks:?} {run:?}"
        );
    }
}

#[test]
fn triangular_numbers() {
    assert_eq!(triangular(0), 0);
    assert_eq!(triangular(1), 0);
    assert_eq!(triangular(4), 6);
    assert_eq!(triangular(5), 10);
}

#[test]
fn reference_variants_interleave_with_probes() {
    use crate::interleave::Interleave;
    let placement = Placement::pick();
    let cfg = |batch| RefConfig {
        batch,
        ring_bytes: 64 << 10,
        ..RefConfig::default()
    };
    let mut big =
        RefVariant::new("batch32", cfg(32), udp_templates(64, 4), placement.clone()).unwrap();
    let mut small =
        RefVariant::new("batch1", cfg(1), udp_templates(64, 4), placement.clone()).unwrap();
    let probe = Duration::from_millis(10);
    // A probe whose thread was kept off its core for the whole warm-up
    // has no round trip (NaN): interleave again until a run's probes have
    // one, within a deadline far beyond any stall.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let report = Interleave::new(Duration::from_millis(5))
            .rounds(2)
            .warmup(0)
            .probe(probe)
            .run(&placement, &mut [&mut big, &mut small]);
        // One probe before each round's trials, on the trials' cores.
        assert_eq!(report.rounds.len(), 2);
        for r in &report.rounds {
            let p = r.probe.as_ref().expect("every round is probed");
            assert!(p.round_trips > 0 && p.duration >= probe, "{p:?}");
            assert_eq!(p.cores, placement.cores());
            assert_eq!(r.trials.len(), 2);
        }
        // Each trial delivers the producer's first batch at least (it
        // pushes that before it looks at the stop flag), all verified.
        for v in &report.variants {
            assert_eq!(v.trials, 2, "{}", v.name);
            assert_eq!(v.median_extra["verified"], 1.0, "{}", v.name);
            assert!(v.median_ns_per_packet.contains_key("consumer"));
        }
        let ratio = report.ratio("batch1", "batch32").expect("both delivered");
        assert_eq!(ratio.per_round.len(), 2, "{ratio:?}");
        // The probes' median is that of the probes that measured.
        let rtts: Vec<f64> = report
            .rounds
            .iter()
            .filter_map(|r| r.probe.as_ref().map(|p| p.rtt_ns))
            .filter(|rtt| !rtt.is_nan())
            .collect();
        match rtts[..] {
            [] => assert_eq!(report.probe_median_ns, None),
            [a] => assert_eq!(report.probe_median_ns, Some(a)),
            [a, b] => assert_eq!(report.probe_median_ns, Some((a + b) / 2.0)),
            _ => unreachable!("two rounds"),
        }
        if report.probe_median_ns.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "no probe measured: {report:?}");
    }
}
