//! The same datapath with the NIC on its own thread, and in another process.

use std::time::{Duration, Instant};

use enso::Device;
use enso_tests::*;
use nic_emu::testframe::FrameKind;
use nic_emu::{GeneratorConfig, Nic, RunOptions, SizeSpec};

fn mixed(count: u64, flows: u32) -> GeneratorConfig {
    GeneratorConfig {
        sizes: SizeSpec::Range(64, 1518),
        kinds: vec![FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw],
        flows,
        count: Some(count),
        max_in_flight: Some(128),
        paused: true,
        ..Default::default()
    }
}

fn wait_done(nic: &Nic, count: u64) {
    let start = Instant::now();
    loop {
        let s = nic.stats();
        let g = s.generator(0).unwrap();
        if g.returned + s.total_drops() + g.corrupt + g.duplicate >= count {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "stuck: {g:?} {:?}",
            s.drops()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn threaded_nic_echo_through_sixteen_pipes() {
    let (mut cfg, _dir) = generator_device("threaded", mixed(1_000_000, 256));
    cfg.pipe_size = 256 << 10;
    let nic = Nic::start(cfg, RunOptions::default()).unwrap();
    let mut dev = Device::attach_nic(&nic, opts(16)).unwrap();
    for _ in 0..16 {
        dev.alloc_rxtx_pipe(true).unwrap();
    }
    nic.with_engine(|e| e.set_generators_paused(false));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let app = std::thread::spawn(move || {
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            if echo_ready(&mut dev) == 0 {
                std::thread::yield_now();
            }
        }
        dev
    });
    wait_done(&nic, 1_000_000);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(app.join().unwrap());
    let s = nic.stop();
    let g = s.generator(0).unwrap();
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
    assert_eq!(
        (g.sent, g.returned, g.corrupt, g.duplicate),
        (1_000_000, 1_000_000, 0, 0)
    );
    // The application detached; its pipes' counters remain in the totals.
    assert_eq!(s.apps.len(), 0);
    assert_eq!(s.pipe_sum(|p| p.rx_frames), 1_000_000);
}

#[test]
fn nic_and_echo_in_separate_processes() {
    let (mut cfg, dir) = generator_device("procs", mixed(300_000, 16));
    cfg.pipe_size = 256 << 10;
    let nic = Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )
    .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_enso-echo-client"))
        .args(["--dir", dir.path().to_str().unwrap(), "--name", "procs"])
        .args(["--frames", "300000", "--pipes", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Start the traffic once the client's four fallback pipes are in place.
    let start = Instant::now();
    while nic.stats().fallback_pipes < 4 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "client never set up its pipes"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    nic.with_engine(|e| e.set_generators_paused(false));
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_done(&nic, 300_000);
    // The client's exit closed its control connection: it was detached.
    let start = Instant::now();
    while !nic.stats().apps.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "not detached");
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = nic.stop();
    let g = s.generator(0).unwrap();
    assert_eq!(
        (g.returned, g.corrupt, g.duplicate),
        (300_000, 0, 0),
        "{:?}",
        s.drops()
    );
    // Its shared-memory files were removed.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn attach_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let e = Device::open_in(dir.path(), "nothing-here", opts(1)).unwrap_err();
    assert!(e.to_string().contains("cannot reach device"), "{e}");
}
