use super::*;
use crate::engine::Clock;

#[test]
fn fifo_keeps_order_and_refuses_when_full() {
    let mut f = FrameFifo::new(3);
    assert!(f.push(&[1; 60]));
    assert!(f.push(&[2; 61]));
    assert!(f.push(&[3; 62]));
    assert!(!f.push(&[4; 63]));
    assert_eq!(f.front().unwrap(), &[1u8; 60][..]);
    f.pop();
    assert!(f.push(&[5; 64]));
    let mut seen = vec![];
    while let Some(x) = f.front() {
        seen.push((x[0], x.len()));
        f.pop();
    }
    assert_eq!(seen, [(2, 61), (3, 62), (5, 64)]);
}

#[test]
fn generator_counts_duplicates_corruption_and_foreign() {
    let cfg = GeneratorConfig {
        count: Some(10),
        flows: 2,
        sizes: SizeSpec::Mix(vec![64, 200]),
        echo_increment: 0,
        ..Default::default()
    };
    let mut g = Generator::new(cfg);
    let mut sent = vec![];
    while !g.finished() {
        g.emit(0, &Clock::Monotonic, |f, _| sent.push(f.to_vec()));
    }
    assert_eq!(sent.len(), 10);
    for f in &sent {
        g.on_return(f, 0);
    }
    g.on_return(&sent[3], 0);
    let mut bad = sent[4].clone();
    *bad.last_mut().unwrap() ^= 1;
    g.on_return(&bad, 0);
    g.on_return(&[0u8; 60], 0);
    assert_eq!(g.counters.returned, 10);
    assert_eq!(g.counters.duplicate, 1);
    assert_eq!(g.counters.corrupt, 1);
    assert_eq!(g.counters.foreign, 1);
}

#[test]
fn templates_cover_a_million_small_flows_within_their_memory_bound() {
    assert!(templates_fit(1 << 20, 64));
    assert!(templates_fit(1 << 16, 1518));
    assert!(!templates_fit(1 << 20, 1518), "1.6 GB of frames");
    assert!(!templates_fit((1 << 20) + 1, 64));
    assert!(!templates_fit(0, 64));
}

#[test]
fn frames_from_templates_are_the_frames_built_whole() {
    // With more flows than templates fit (1518 B), every frame is built;
    // with 2^20 64 B flows, they come from templates: the same frames.
    for (flows, size) in [(1u32 << 20, 64usize), (1 << 20, 1518), (3, 64)] {
        let cfg = GeneratorConfig {
            flows,
            sizes: SizeSpec::Fixed(size),
            burst: 64,
            ..Default::default()
        };
        let mut g = Generator::new(cfg);
        assert_eq!(
            g.templates.len(),
            if size == 64 { flows as usize } else { 0 }
        );
        let mut sent: Vec<Vec<u8>> = vec![];
        for _ in 0..2 {
            g.emit(0, &Clock::Monotonic, |f, _| sent.push(f.to_vec()));
        }
        assert_eq!(sent.len(), 128);
        let frames = TestFrames::new(flows, 0);
        let mut want = vec![0u8; MAX_FRAME];
        for (seq, f) in sent.iter().enumerate() {
            let flow = seq as u32 % flows;
            let n = frames.build(FrameKind::Ipv4Udp, seq as u64, flow, size, &mut want);
            assert_eq!(&f[..], &want[..n], "flows {flows}, frame {seq}");
        }
    }
}

#[test]
fn rate_and_window_limit_what_is_sent() {
    let mut g = Generator::new(GeneratorConfig {
        rate_pps: Some(1e6),
        burst: 1000,
        ..Default::default()
    });
    let mut n = g.emit(0, &Clock::Monotonic, |_, _| {});
    assert_eq!(n, 1);
    n += g.emit(10_000, &Clock::Monotonic, |_, _| {}); // 10 us at 1 Mpps: 10 more are due
    assert_eq!(n, 11);
    let mut g = Generator::new(GeneratorConfig {
        max_in_flight: Some(5),
        burst: 100,
        ..Default::default()
    });
    assert_eq!(g.emit(0, &Clock::Monotonic, |_, _| {}), 5);
    assert_eq!(g.emit(0, &Clock::Monotonic, |_, _| {}), 0);
}

#[test]
fn replay_sends_its_frames_in_order_over_and_over() {
    let frames: Vec<Box<[u8]>> = (0..3u8).map(|i| vec![i; 60 + i as usize].into()).collect();
    let replay = crate::config::ReplayFrames::new(frames.clone()).unwrap();
    let cfg = GeneratorConfig {
        replay: Some(replay),
        count: Some(7),
        burst: 2,
        max_in_flight: Some(5),
        ..Default::default()
    };
    cfg.validate().unwrap();
    let mut g = Generator::new(cfg);
    let mut sent: Vec<Vec<u8>> = vec![];
    while g.emit(0, &Clock::Monotonic, |f, _| sent.push(f.to_vec())) > 0 {}
    assert_eq!(sent.len(), 5, "the in-flight window holds");
    for f in &sent[..4] {
        g.on_return(f, 0);
    }
    while g.emit(0, &Clock::Monotonic, |f, _| sent.push(f.to_vec())) > 0 {}
    let order: Vec<u8> = sent.iter().map(|f| f[0]).collect();
    assert_eq!(
        order,
        [0, 1, 2, 0, 1, 2, 0],
        "in order, wrapping, up to the count"
    );
    assert!(sent.iter().all(|f| f.len() == 60 + f[0] as usize));
    assert!(g.finished());
    assert_eq!((g.counters.sent, g.counters.returned), (7, 4));
    assert_eq!(
        g.counters.sent_bytes,
        sent.iter().map(|f| f.len() as u64).sum::<u64>()
    );
}

#[test]
fn replay_refuses_bad_frames_and_timestamps() {
    use crate::config::ReplayFrames;
    assert!(ReplayFrames::new(vec![]).is_err());
    let e = ReplayFrames::new(vec![vec![0u8; 60].into(), vec![0u8; 13].into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("replay frame 1: 13 bytes"), "{e}");
    assert!(ReplayFrames::new(vec![vec![0u8; MAX_FRAME + 1].into()]).is_err());
    let cfg = GeneratorConfig {
        replay: Some(ReplayFrames::new(vec![vec![0u8; 60].into()]).unwrap()),
        timestamps: true,
        ..Default::default()
    };
    assert!(cfg.validate().is_err());
}

#[test]
fn a_huge_rate_sends_whole_bursts() {
    let mut g = Generator::new(GeneratorConfig {
        rate_pps: Some(1e30),
        burst: 16,
        ..Default::default()
    });
    assert_eq!(g.emit(0, &Clock::Monotonic, |_, _| {}), 1);
    // A second at 1e30 pps: far more than u64::MAX frames are due.
    assert_eq!(g.emit(1_000_000_000, &Clock::Monotonic, |_, _| {}), 16);
}

#[test]
fn a_batch_of_returns_counts_what_returns_one_by_one_count() {
    // Every setting `Returns` treats apart (plain sequence checks) or
    // hands to `on_return` (full checks, a duplicate map).
    for (verify, count) in [
        (VerifyLevel::Sequence, None),
        (VerifyLevel::Sequence, Some(12)),
        (VerifyLevel::Full, None),
    ] {
        let cfg = GeneratorConfig {
            count,
            flows: 3,
            sizes: SizeSpec::Mix(vec![64, 200]),
            echo_increment: 0,
            verify,
            ..Default::default()
        };
        let (mut one, mut batch) = (Generator::new(cfg.clone()), Generator::new(cfg));
        let mut sent = vec![];
        for _ in 0..12 {
            one.emit(0, &Clock::Monotonic, |f, _| sent.push(f.to_vec()));
        }
        for _ in 0..12 {
            batch.emit(0, &Clock::Monotonic, |_, _| {});
        }
        assert!(sent.len() >= 12, "{verify:?}: {} sent", sent.len());
        // Good frames, a repeat, one from the future, a foreign one.
        let mut future = sent[0].clone();
        let p = FrameKind::Ipv4Udp.payload_offset();
        future[p + 4..p + 12].copy_from_slice(&u64::MAX.to_le_bytes());
        let mut back: Vec<&[u8]> = sent.iter().map(|f| &f[..]).collect();
        back.extend([&sent[2][..], &future[..], &[0u8; 60][..]]);
        for f in &back {
            one.on_return(f, 0);
        }
        {
            let mut r = batch.returns();
            for f in &back {
                r.on_return(f, 0);
            }
        }
        assert_eq!(batch.counters, one.counters, "{verify:?}");
        assert_eq!(
            one.counters.returned,
            sent.len() as u64 + u64::from(count.is_none())
        );
        assert_eq!(one.counters.foreign, 1, "{verify:?}");
        assert!(one.counters.corrupt >= 1, "{verify:?}");
    }
}
