//! The generator on a small machine: one flow's frames that come back are
//! dealt out over every RX pipe, and a short low-rate run through a NIC
//! whose port is cabled to itself loses nothing, with the threads chosen
//! from this machine's cores and the receiver parking or spinning.

mod common;

use std::time::Duration;

use pktgen::rate::Rate;
use pktgen::session::{rx_pipe_count, Idle, RunPlan, Session, SessionOptions, RX_SPACE};
use pktgen::stream::TxStream;
use pktgen::threads::{choose_threads, other_busy_threads, usable_core_count};
use pktgen::traffic::TrafficSpec;

const QUEUES: u32 = 4;
/// 1.28 MB of 64 B flits: the RX pipes hold them all even if the receiver
/// did not run at all during the run, so no loss is allowed however busy
/// the machine.
const FRAMES: u64 = 20_000;

#[test]
fn a_low_rate_run_loses_nothing_and_uses_every_rx_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let nic = common::self_loop(dir.path(), 0);
    // One flow: under the NIC's flow hash every frame would go to one pipe.
    let stream = TxStream::synthetic(&TrafficSpec::default()).unwrap();
    let limit = Rate::parse("100Mbps")
        .unwrap()
        .limiter_setting(&stream.profile())
        .unwrap();
    let threads = choose_threads(None, usable_core_count(), other_busy_threads(false));
    let mut s = Session::attach_nic(
        &nic,
        SessionOptions {
            queues: QUEUES,
            port: 0,
        },
    )
    .unwrap();
    let rx_app = s.rx_app_id();
    // Four queues on the default 2 MiB pipes: raised to 32 MiB of pipes.
    let pipes = s.rx_pipes();
    assert_eq!(pipes as u32, rx_pipe_count(QUEUES, s.rx_pipe_size()));
    assert_eq!(pipes * s.rx_pipe_size(), RX_SPACE);
    for (i, idle) in [Idle::Park, Idle::Spin].into_iter().enumerate() {
        let plan = RunPlan {
            limit: Some(limit),
            count: Some(FRAMES),
            duration: Some(Duration::from_secs(30)),
            single_core: threads.single(),
            idle,
            ..RunPlan::new(&stream)
        };
        let out = s.run(&plan, None, &mut |_, _| {}).unwrap();
        assert_eq!(out.counters.tx_packets, FRAMES, "{idle:?}");
        assert_eq!(out.counters.rx_packets, FRAMES, "{idle:?}");
        assert!(!out.interrupted && !out.device_gone);

        let stats = nic.stats();
        let dropped: u64 = stats.drops().values().sum();
        assert_eq!(dropped, 0, "{idle:?}: {:?}", stats.drops());
        let per_pipe: Vec<u64> = stats
            .apps
            .iter()
            .filter(|a| a.app_id == rx_app)
            .flat_map(|a| &a.pipes)
            .map(|p| p.counters.rx_frames)
            .collect();
        assert_eq!(per_pipe.len(), pipes, "{per_pipe:?}");
        // Round robin: each pipe holds its share of every run so far.
        let share = FRAMES * (i as u64 + 1) / pipes as u64;
        for n in &per_pipe {
            assert!(
                (share - share / 10..=share + share / 10).contains(n),
                "{idle:?}: {per_pipe:?}"
            );
        }
        assert_eq!(per_pipe.iter().sum::<u64>(), FRAMES * (i as u64 + 1));
    }
    drop(s);
    nic.stop();
}
