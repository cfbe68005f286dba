//! The application driver: runs of forwarded and dropped frames in one batch.

use enso::app::{EnsoDriver, Verdict};
use enso::Device;
use enso_tests::*;
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{Engine, GeneratorConfig, SizeSpec};

#[test]
fn forwarded_and_dropped_frames_are_sent_and_freed_in_order() {
    runs_of_forwarded_and_dropped(vec![FrameKind::Ipv4Udp]);
}

/// With opaque frames too, each behind a marker flit that belongs to its
/// frame's run, not to the run before it.
#[test]
fn runs_keep_each_marker_flit_with_its_frame() {
    runs_of_forwarded_and_dropped(vec![FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw]);
}

fn runs_of_forwarded_and_dropped(kinds: Vec<FrameKind>) {
    let g = GeneratorConfig {
        kinds,
        count: Some(120_000),
        sizes: SizeSpec::Range(60, 400),
        flows: 8,
        // 16 frames a step, polled every third step: what is in the pipes
        // (including bytes waiting for their send to complete) stays well
        // under a pipe's 1023 flits, so nothing is dropped for lack of room.
        burst: 16,
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("driver", g);
    let mut e = Engine::new(cfg).unwrap();
    let dev = Device::attach_engine(&mut e, opts(2)).unwrap();
    let mut d = EnsoDriver::new(dev);
    d.add_fallback_pipes(2).unwrap();
    let mut dropped = 0u64;
    let mut handler = |f: &mut [u8]| {
        let v = TestFrames::peek(f).unwrap();
        // Drop frames in irregular runs; echo the rest.
        if v.seq.is_multiple_of(7) || v.seq % 11 < 2 {
            dropped += 1;
            Verdict::Drop
        } else {
            let e = v.kind.echo_offset();
            f[e] = f[e].wrapping_add(1);
            Verdict::Forward
        }
    };
    for step in 0..2_000_000 {
        e.step();
        // Poll less often than the engine steps, so sends are in flight when
        // later drops are discarded.
        if step % 3 == 0 {
            while d.poll(&mut handler).unwrap() > 0 {}
        }
        if e.generators_finished() && step % 64 == 0 {
            let s = e.stats();
            let gc = s.generator(0).unwrap();
            if gc.returned + d.stats.dropped + s.total_drops() == gc.sent
                && d.dev.tx_in_flight() == 0
            {
                break;
            }
        }
    }
    e.run_until_idle(100);
    let s = e.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
    assert_eq!((g.corrupt, g.duplicate), (0, 0));
    assert_eq!(g.returned + d.stats.dropped, 120_000);
    assert_eq!(d.stats.dropped, dropped);
    assert!(dropped > 20_000);
    // Everything was handed back: the NIC's view of both pipes is empty.
    for p in &s.apps[0].pipes {
        assert!(
            p.counters.rx_frames > 10_000 && p.counters.head_writes > 0,
            "{p:?}"
        );
    }
    assert_eq!(d.dev.tx_in_flight(), 0);
}
