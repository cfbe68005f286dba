//! An application whose device process dies mid-run says so in one line
//! and fails, rather than waiting forever or ending as if all was well.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nic_emu::{DeviceConfig, Nic, RunOptions};

/// Set (to the directory) in the environment of the device process.
const DEVICE_DIR: &str = "ENSO_APPS_TEST_DEVICE_DIR";
/// Printed by the device process once an application has attached (after
/// the test harness's own words on the same line).
const ATTACHED: &str = "device: attached";

/// Not a test: the device process that `the_apps_fail_when_their_device_dies`
/// starts (this test binary run again with only this test). Runs a device
/// named `gone` with a generator on port 0 until killed.
#[test]
#[ignore = "run by another test as a device process"]
fn device_process() {
    let dir = std::env::var(DEVICE_DIR).expect("run by the_apps_fail_when_their_device_dies");
    let gen = nic_emu::spec::parse_wire("generator:size=64,pps=100000").unwrap();
    let mut cfg = DeviceConfig::new("gone", gen);
    cfg.dir = dir.into();
    let opts = RunOptions {
        listen: true,
        ..Default::default()
    };
    let nic = Nic::start(cfg, opts).expect("device starts");
    let start = Instant::now();
    while nic.stats().apps.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30), "nobody attached");
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("{ATTACHED}");
    // Until the test kills this process.
    std::thread::sleep(Duration::from_secs(60));
}

/// Starts the device process in `dir`; returns once `app` has attached.
fn device_with(dir: &Path, app: &mut dyn FnMut() -> Child) -> (Child, Child) {
    let mut dev = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "device_process", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(DEVICE_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sock = dir.join("enso-gone").join(nic_emu::device::CONTROL_SOCKET);
    let start = Instant::now();
    while !sock.exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "no device");
        std::thread::sleep(Duration::from_millis(10));
    }
    let child = app();
    let mut lines = BufReader::new(dev.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("the device process ended").unwrap();
        if line.ends_with(ATTACHED) {
            break;
        }
    }
    (dev, child)
}

/// Waits for `child` to exit, for at most `limit` (then kills it and
/// fails); returns its status, its standard error and how long it took.
fn wait_at_most(mut child: Child, limit: Duration, app: &str) -> (ExitStatus, String, Duration) {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{app} still running {limit:?} after its device died");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = start.elapsed();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, err, took)
}

/// How long an application may take to notice that its device died and
/// exit: they look every 10 ms (`cli::ALIVE_CHECK`), so a second or two is
/// ample even on a loaded host, and far short of any timeout of theirs.
const NOTICE: Duration = Duration::from_secs(3);

#[test]
fn the_apps_fail_when_their_device_dies() {
    // Every server on both interfaces, and the clients (which send through
    // Ensō TX pipes only).
    let servers: [(&str, &str, &[&str]); 5] = [
        ("echo", env!("CARGO_BIN_EXE_echo"), &[]),
        (
            "maglev",
            env!("CARGO_BIN_EXE_maglev"),
            &["--backend-count", "4"],
        ),
        (
            "kv",
            env!("CARGO_BIN_EXE_kv"),
            &["--log-mb", "1", "--buckets", "1024"],
        ),
        ("telemetry", env!("CARGO_BIN_EXE_telemetry"), &[]),
        ("logmon", env!("CARGO_BIN_EXE_logmon"), &[]),
    ];
    let mut runs: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for (app, bin, extra) in servers {
        for interface in ["enso", "packetized"] {
            let mut args = vec!["--interface", interface];
            args.extend_from_slice(extra);
            runs.push((app, bin, args));
        }
    }
    runs.push((
        "log-client",
        env!("CARGO_BIN_EXE_log-client"),
        vec!["--passes", "0"],
    ));
    // Nothing answers its requests here: it waits on a full window.
    runs.push(("kv-client", env!("CARGO_BIN_EXE_kv-client"), vec![]));
    let mut took = Vec::new();
    for (app, bin, extra) in &runs {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        // No --duration-s: they would run until killed.
        let (mut dev, child) = device_with(dir.path(), &mut || {
            Command::new(bin)
                .args(["--device", "gone", "--dir", &d, "--progress-s", "0"])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        });
        // Let it serve (or send) for a while first.
        std::thread::sleep(Duration::from_millis(300));
        dev.kill().unwrap();
        dev.wait().unwrap();
        let what = format!("{app} {}", extra.join(" "));
        let (status, err, t) = wait_at_most(child, Duration::from_secs(10), &what);
        assert_eq!(status.code(), Some(1), "{what}: {err}");
        assert_eq!(
            err,
            format!("{app}: device gone: it was stopped or its process exited\n"),
            "{what}"
        );
        assert!(t <= NOTICE, "{what} took {t:?} to notice");
        took.push((what, t));
    }
    eprintln!("exits after the device died: {took:?}");
}
