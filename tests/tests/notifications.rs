//! The notification rules, checked on the NIC's own event stream.

use std::collections::HashMap;

use enso::Device;
use enso_tests::*;
use nic_emu::engine::TraceEvent;
use nic_emu::{Engine, GeneratorConfig, NotificationMode};

/// Asserts the reactive invariant: after a notification for a pipe, the NIC
/// sends no other for it until software writes the pipe's head. Returns
/// (frames, notifications).
fn check_reactive(trace: &[TraceEvent]) -> (u64, u64) {
    let mut outstanding: HashMap<u32, bool> = HashMap::new();
    let (mut frames, mut notifs) = (0, 0);
    for (i, ev) in trace.iter().enumerate() {
        match *ev {
            TraceEvent::Frame { .. } => frames += 1,
            TraceEvent::Notify { pipe, .. } => {
                let o = outstanding.entry(pipe).or_default();
                assert!(
                    !*o,
                    "event {i}: second outstanding notification for pipe {pipe}"
                );
                *o = true;
                notifs += 1;
            }
            TraceEvent::HeadWrite { pipe, .. } => {
                outstanding.insert(pipe, false);
            }
        }
    }
    (frames, notifs)
}

fn run(
    mode: NotificationMode,
    g: GeneratorConfig,
    pipes: u32,
    app_every: usize,
) -> (Engine, Device) {
    let (mut cfg, dir) = generator_device("notif", g);
    cfg.notification_mode = mode;
    let mut engine = Engine::new(cfg).unwrap();
    std::mem::forget(dir); // removed with the process's temp files
    engine.enable_trace();
    let mut dev = Device::attach_engine(&mut engine, opts(pipes)).unwrap();
    dev.set_prefetch(false);
    for _ in 0..pipes {
        dev.alloc_rxtx_pipe(true).unwrap();
    }
    for i in 0..2_000_000 {
        engine.step();
        if i % app_every == 0 {
            echo_ready(&mut dev);
            dev.reap_completions().unwrap();
        }
        if engine.generators_finished() && i % 64 == 0 {
            let s = engine.stats();
            if s.generator(0).unwrap().in_flight() <= s.total_drops() && dev.tx_in_flight() == 0 {
                break;
            }
        }
    }
    (engine, dev)
}

#[test]
fn one_at_a_time_gives_one_notification_per_frame() {
    let g = GeneratorConfig {
        count: Some(20_000),
        max_in_flight: Some(1),
        burst: 1,
        ..Default::default()
    };
    let (mut e, _d) = run(NotificationMode::Reactive, g, 1, 1);
    let (frames, notifs) = check_reactive(&e.take_trace());
    assert_eq!(frames, 20_000);
    let ratio = notifs as f64 / frames as f64;
    assert!(
        (0.95..=1.0).contains(&ratio),
        "notifications per frame {ratio}"
    );
    assert_eq!(e.stats().generator(0).unwrap().returned, 20_000);
}

#[test]
fn saturation_gives_far_fewer_notifications_than_frames() {
    let g = GeneratorConfig {
        count: Some(200_000),
        burst: 64,
        // A batch is freed only when its whole TX notification completes:
        // the pipe holds the window, the batch being sent and what completed
        // since the last poll (256 + 256 + 5 x 64 flits < 1023).
        max_in_flight: Some(256),
        ..Default::default()
    };
    let (mut e, _d) = run(NotificationMode::Reactive, g, 2, 4);
    let (frames, notifs) = check_reactive(&e.take_trace());
    assert_eq!(frames, 200_000, "{:?}", e.stats().drops());
    assert!(
        (notifs as f64) < frames as f64 / 16.0,
        "{notifs} notifications for {frames} frames"
    );
    let s = e.stats();
    assert_eq!(s.generator(0).unwrap().returned, 200_000);
    assert_eq!(s.total_drops(), 0);
}

#[test]
fn per_packet_mode_gives_exactly_one_per_frame() {
    let g = GeneratorConfig {
        count: Some(50_000),
        burst: 32,
        max_in_flight: Some(256),
        ..Default::default()
    };
    let (mut e, d) = run(NotificationMode::PerPacket, g, 2, 3);
    let trace = e.take_trace();
    let frames = trace
        .iter()
        .filter(|x| matches!(x, TraceEvent::Frame { .. }))
        .count();
    let notifs = trace
        .iter()
        .filter(|x| matches!(x, TraceEvent::Notify { .. }))
        .count();
    assert_eq!(frames, 50_000);
    assert_eq!(notifs, frames);
    assert_eq!(d.stats().notifications, 50_000);
    assert_eq!(e.stats().generator(0).unwrap().returned, 50_000);
}

#[test]
fn prefetch_head_rewrite_sends_latest_tail_without_freeing() {
    let g = GeneratorConfig {
        count: Some(10),
        burst: 10,
        ..Default::default()
    };
    let (mut cfg, _dir) = generator_device("prefetch", g);
    cfg.notification_mode = NotificationMode::Reactive;
    let mut e = Engine::new(cfg).unwrap();
    e.enable_trace();
    let mut dev = Device::attach_engine(&mut e, opts(1)).unwrap();
    let p = dev.alloc_rx_pipe(true).unwrap();
    e.step(); // enable, then 10 frames: one notification (reactive)
    let first = dev.recv(p).unwrap().packet_count();
    assert!(first >= 1);
    e.step();
    // More frames may have arrived without a notification; a prefetch asks
    // for one with the latest tail while nothing was freed.
    let before = e.stats().apps[0].pipes[0].counters.notifications;
    dev.prefetch(p).unwrap();
    e.step();
    let s = e.stats();
    let c = &s.apps[0].pipes[0].counters;
    assert_eq!(c.head_rewrites, 1);
    assert_eq!(c.notifications, before + 1);
    dev.poll().unwrap();
    let total = first + dev.recv(p).unwrap().packet_count();
    assert_eq!(total, 10);
    check_reactive(&e.take_trace());
}

/// A head write that finds data pending owes a notification; when the
/// notification ring is full at that moment, the NIC sends it as soon as
/// software frees ring slots, rather than leaving the data unannounced
/// until another frame happens to arrive for the pipe.
#[test]
fn a_notification_refused_by_a_full_ring_is_sent_once_there_is_room() {
    use nic_emu::testframe::{FrameKind, TestFrames};
    // Two frames for pipe A (flow 0), then one for each of 63 other pipes:
    // as many notifications as a 64-entry ring holds.
    let tf = TestFrames::new(64, 0);
    let frame = |flow: u32| {
        let mut b = [0u8; 64];
        let n = tf.build(FrameKind::Ipv4Udp, 0, flow, 64, &mut b);
        b[..n].to_vec().into_boxed_slice()
    };
    let mut frames = vec![frame(0), frame(0)];
    frames.extend((1..64).map(frame));
    let g = GeneratorConfig {
        count: Some(65),
        burst: 2,
        paused: true,
        replay: Some(nic_emu::ReplayFrames::new(frames).unwrap()),
        ..Default::default()
    };
    let (mut cfg, _dir) = generator_device("owed", g);
    cfg.notif_ring_entries = 64;
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, opts(64)).unwrap();
    let pipes: Vec<_> = (0..64)
        .map(|f| {
            let p = dev.alloc_rx_pipe(false).unwrap();
            dev.bind(p, TestFrames::flow_tuple(f)).unwrap();
            // Configuration goes through the (64-entry) TX ring too.
            e.run_until_idle(10);
            p
        })
        .collect();
    let a = pipes[0];
    e.run_until_idle(10);
    e.set_generators_paused(false);
    // Both of A's frames arrive; one notification says the first is there.
    e.step();
    let first = dev.recv(a).unwrap().len();
    assert_eq!(first, 64);
    // The other pipes' frames fill the ring before A's is freed.
    for _ in 0..40 {
        e.step();
    }
    dev.free(a, first).unwrap();
    e.step();
    let s = e.stats();
    assert_eq!(s.apps[0].counters.notif_ring_full, 1, "{:?}", s.drops());
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
    // Software takes the other notifications, which frees the ring.
    assert_eq!(dev.recv(pipes[1]).unwrap().len(), 64);
    e.step();
    assert_eq!(dev.recv(a).unwrap().len(), 64, "A's second frame announced");
}
