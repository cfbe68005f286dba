//! The engine writes the generator's frames in runs (frames that follow one
//! to the same pipe or descriptor queue, without deciding again what the
//! first decided); with tracing on it writes every frame on its own. Runs
//! are the emulator's shortcut, not the NIC's behaviour: both ways must
//! leave the same frames, counters, drops and PCIe counts.

use enso::app::{EnsoDriver, PacketizedDriver, Verdict};
use enso::Device;
use enso_tests::*;
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{Engine, GeneratorConfig, PipeWriteMode, SizeSpec, Stats};

/// An application's frame handler, and a driver's poll that runs it.
type Handler<'a> = &'a mut dyn FnMut(&mut [u8]) -> Verdict;
type Poll = Box<dyn FnMut(Handler<'_>) -> usize>;

#[derive(Clone, Copy, Debug)]
enum Interface {
    Enso,
    Packetized,
}

/// What one stepped run left: the stats, and a digest of every frame the
/// application saw, in order.
struct Outcome {
    stats: Stats,
    frames_seen: u64,
    digest: u64,
}

/// The generator sends 60 000 frames, mostly single-line ones with some of
/// several lines and some opaque (a marker line before them in a pipe),
/// over 16 flows spread on two pipes or queues; the application polls
/// every third step, so pipes and rings fill and frames are dropped, and
/// the pipes wrap many times.
fn stepped(interface: Interface, traced: bool, writes: Option<PipeWriteMode>) -> Outcome {
    let g = GeneratorConfig {
        count: Some(60_000),
        sizes: SizeSpec::Mix(vec![64, 64, 64, 64, 64, 64, 128, 300, 1500]),
        kinds: vec![
            FrameKind::Ipv4Udp,
            FrameKind::Ipv4Udp,
            FrameKind::Ipv4Udp,
            FrameKind::Ipv4Udp,
            FrameKind::Ipv4Udp,
            FrameKind::Raw,
        ],
        flows: 16,
        burst: 64,
        max_in_flight: Some(4096),
        ..Default::default()
    };
    let (mut cfg, _dir) = generator_device("runs", g);
    // Posted register writes are applied every step (by default a busy
    // engine looks at them after a while, measured in real time).
    cfg.tuning.register_poll_flits = 0;
    cfg.tuning.pipe_writes = writes;
    let mut e = Engine::new(cfg).unwrap();
    if traced {
        e.enable_trace();
    }
    let mut frames_seen = 0u64;
    let mut digest = 0xcbf2_9ce4_8422_2325u64;
    let mut handler = |f: &mut [u8]| {
        frames_seen += 1;
        for &b in f.iter() {
            digest = (digest ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        if let Some(v) = TestFrames::peek(f) {
            let o = v.kind.echo_offset();
            f[o] = f[o].wrapping_add(1);
        }
        Verdict::Forward
    };
    let mut poll: Poll = match interface {
        Interface::Enso => {
            let dev = Device::attach_engine(&mut e, opts(2)).unwrap();
            let mut d = EnsoDriver::new(dev);
            d.add_fallback_pipes(2).unwrap();
            Box::new(move |mut h| d.poll(&mut h).unwrap())
        }
        Interface::Packetized => {
            let dev = Device::attach_engine(&mut e, pkt_opts(2, 128)).unwrap();
            let mut d = PacketizedDriver::new(dev, 32);
            d.add_rss_queues_on(0, 2).unwrap();
            Box::new(move |mut h| d.poll(&mut h).unwrap())
        }
    };
    let mut idle = 0;
    for step in 0..200_000 {
        e.step();
        if step % 3 == 0 {
            while poll(&mut handler) > 0 {}
        }
        if e.generators_finished() {
            let s = e.stats();
            let gc = s.generator(0).unwrap();
            if gc.returned + s.total_drops() == gc.sent {
                idle += 1;
                if idle > 64 {
                    break;
                }
            }
        }
    }
    drop(poll);
    Outcome {
        stats: e.stats(),
        frames_seen,
        digest,
    }
}

fn same_outcome(interface: Interface, writes: Option<PipeWriteMode>) {
    let runs = stepped(interface, false, writes);
    let single = stepped(interface, true, None);
    if let Some(m) = writes {
        assert_eq!(runs.stats.engine.pipe_writes, m, "{interface:?}");
    }
    let (a, b) = (&runs.stats, &single.stats);
    // The scenario exercises what it is meant to: runs, drops, wraps.
    // (`frames` counts both directions: most of the 60 000 received.)
    assert!(
        a.engine.run_frames > 30_000,
        "{interface:?}: {} of {} frames in runs",
        a.engine.run_frames,
        a.engine.frames
    );
    assert_eq!(b.engine.run_frames, 0, "{interface:?}: runs while traced");
    assert!(a.total_drops() > 0, "{interface:?}: nothing dropped");
    let g = a.generator(0).unwrap();
    assert_eq!(g.sent, 60_000);
    assert!(g.returned > 30_000, "{interface:?}: {g:?}");
    assert_eq!((g.corrupt, g.duplicate), (0, 0));
    // Both ways alike.
    assert_eq!(runs.frames_seen, single.frames_seen, "{interface:?}");
    assert_eq!(runs.digest, single.digest, "{interface:?}: frames differ");
    assert_eq!(a.engine.frames, b.engine.frames, "{interface:?}");
    assert_eq!(a.drops(), b.drops(), "{interface:?}");
    assert_eq!(a.pcie, b.pcie, "{interface:?}: PCIe counts differ");
    for (pa, pb) in a.ports.iter().zip(&b.ports) {
        assert_eq!(pa.counters, pb.counters, "{interface:?}: port counters");
        assert_eq!(pa.generator, pb.generator, "{interface:?}: generator");
    }
    assert_eq!(a.apps.len(), b.apps.len());
    for (x, y) in a.apps.iter().zip(&b.apps) {
        assert_eq!(x.counters, y.counters, "{interface:?}: app counters");
        let pipes = |s: &nic_emu::counters::AppStats| {
            s.pipes
                .iter()
                .map(|p| (p.pipe_id, p.counters.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(pipes(x), pipes(y), "{interface:?}: pipe counters");
        let queues = |s: &nic_emu::counters::AppStats| {
            s.queues
                .iter()
                .map(|q| (q.queue_id, q.counters.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(queues(x), queues(y), "{interface:?}: queue counters");
    }
}

#[test]
fn enso_frames_written_in_runs_match_frames_written_one_by_one() {
    same_outcome(Interface::Enso, None);
}

#[test]
fn packetized_frames_written_in_runs_match_frames_written_one_by_one() {
    same_outcome(Interface::Packetized, None);
}

/// Frames of one or two lines written into pipes with non-temporal stores
/// (zero-padded whole lines, fenced before the tail is published) read back
/// exactly as frames written one by one with ordinary stores.
#[test]
fn enso_frames_streamed_in_runs_match_frames_written_one_by_one() {
    same_outcome(Interface::Enso, Some(PipeWriteMode::NonTemporal));
}

/// Prefetching the lines ahead for writing changes nothing either.
#[test]
fn enso_frames_with_lines_prefetched_ahead_match_frames_written_one_by_one() {
    same_outcome(Interface::Enso, Some(PipeWriteMode::PrefetchAhead));
}
