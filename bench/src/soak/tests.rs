use super::*;
use nic_emu::counters::{
    AppStats, GeneratorCounters, PipeCounters, PipeStats, PortStats, QueueCounters, QueueStats,
};

fn stats(sent: u64, returned: u64, pipe_full: u64) -> Stats {
    let mut s = Stats::default();
    for port in 0..2 {
        s.ports.push(PortStats {
            port,
            generator: Some(GeneratorCounters {
                sent,
                returned,
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    s.detached_pipes.drop_pipe_full = pipe_full;
    s
}

#[test]
fn every_frame_is_verified_or_counted() {
    // 2 x 1000 sent, 2 x 900 back, 150 pipe_full, 40 unread, 10 app drops.
    let a = Accounting::of(&stats(1000, 900, 150), 40, 10);
    assert_eq!((a.frames, a.verified), (2000, 1800));
    assert_eq!(a.dropped["pipe_full"], 150);
    assert_eq!(a.dropped[UNREAD_ON_DETACH], 40);
    assert_eq!(a.dropped[APP_TX_RING_FULL], 10);
    assert_eq!(a.dropped.values().sum::<u64>(), 200);
    assert_eq!(a.unexplained_loss, 0);
    assert!(a.passes());
}

#[test]
fn a_frame_missing_or_extra_is_unexplained() {
    // Unread frames not counted: loss.
    let a = Accounting::of(&stats(1000, 900, 150), 39, 10);
    assert_eq!(a.unexplained_loss, 1);
    assert!(!a.passes());
    // More counted than sent (a duplicate the bitmap missed, a cause
    // counted twice): negative.
    let a = Accounting::of(&stats(1000, 900, 150), 41, 10);
    assert_eq!(a.unexplained_loss, -1);
    assert!(!a.passes());
    // Corrupt frames are accounted for, but fail.
    let mut s = stats(1000, 900, 150);
    s.ports[0].generator.as_mut().unwrap().corrupt = 1;
    s.ports[0].generator.as_mut().unwrap().returned = 899;
    let a = Accounting::of(&s, 40, 10);
    assert_eq!((a.unexplained_loss, a.corrupt), (0, 1));
    assert!(!a.passes());
    // Nothing verified fails however the sums come out.
    let a = Accounting::of(&stats(10, 0, 20), 0, 0);
    assert_eq!(a.unexplained_loss, 0);
    assert!(!a.passes());
}

#[test]
fn delivered_frames_are_the_pipes_and_queues_of_one_application() {
    let mut s = Stats::default();
    let pipe = |rx| PipeStats {
        pipe_id: 0,
        counters: PipeCounters {
            rx_frames: rx,
            ..Default::default()
        },
    };
    let queue = |rx| QueueStats {
        queue_id: 0,
        counters: QueueCounters {
            rx_frames: rx,
            ..Default::default()
        },
    };
    s.apps.push(AppStats {
        app_id: 3,
        pipes: vec![pipe(5), pipe(7)],
        queues: vec![queue(11)],
        ..Default::default()
    });
    s.apps.push(AppStats {
        app_id: 4,
        pipes: vec![pipe(100)],
        ..Default::default()
    });
    assert_eq!(delivered_to(&s, 3), Some(23));
    assert_eq!(delivered_to(&s, 4), Some(100));
    assert_eq!(delivered_to(&s, 5), None);
}

#[test]
fn roles_cover_both_interfaces_on_every_thread_and_every_port() {
    let mut all = Vec::new();
    for h in 0..HOSTS {
        let r = roles_of(h);
        assert!(r.iter().any(|(role, _)| *role == Role::Packetized), "{r:?}");
        assert!(r.iter().any(|(role, _)| *role != Role::Packetized), "{r:?}");
        assert!(r.iter().all(|(_, p)| *p == h as u32), "{r:?}");
        all.extend(r);
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 6, "every role on every port, once");
}

#[test]
fn incarnations_bind_other_flows_within_their_half() {
    let cfg = SoakConfig {
        duration: Duration::from_secs(1),
        sizes: SizeSpec::Fixed(60),
        flows: 64,
        churn: None,
    };
    let a = cfg.bound_flows(Role::EnsoFlows, 0);
    let b = cfg.bound_flows(Role::EnsoFlows, 1);
    assert_eq!(a.len(), ENSO_BOUND as usize);
    assert!(a.iter().all(|f| !b.contains(f)), "{a:?} {b:?}");
    assert!(a.iter().chain(&b).all(|&f| f < 32));
    let q = cfg.bound_flows(Role::Packetized, 5);
    assert_eq!(q.len(), QUEUE_BOUND as usize);
    assert!(q.iter().all(|&f| (32..64).contains(&f)), "{q:?}");
    assert!(cfg.bound_flows(Role::EnsoFallback, 3).is_empty());
    let small = SoakConfig { flows: 4, ..cfg };
    for g in 0..5 {
        let f = small.bound_flows(Role::EnsoFlows, g);
        assert_eq!(f.len(), 2);
        assert!(f.iter().all(|&f| f < 2));
        let f = small.bound_flows(Role::Packetized, g);
        assert!(f.iter().all(|&f| (2..4).contains(&f)));
    }
    assert!(small.check().is_ok());
    assert!(SoakConfig { flows: 3, ..small }.check().is_err());
}
