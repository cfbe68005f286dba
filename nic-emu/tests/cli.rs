//! The standalone `nic-emu` binary: a device in its own process whose
//! counters another process reads; clear errors for bad arguments.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nic-emu");

#[test]
fn run_and_read_stats_from_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // A generator with nobody attached: every frame is a counted no_match drop.
    let mut nic = Command::new(BIN)
        .args([
            "run",
            "--name",
            "cli0",
            "--dir",
            d,
            "--port",
            "generator:size=64,pps=100000",
        ])
        .args(["--duration-s", "20", "--progress-s", "0"])
        .args(["--register-poll-flits", "0", "--register-poll-ns", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let stats = loop {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no stats from the running device"
        );
        std::thread::sleep(Duration::from_millis(100));
        let out = Command::new(BIN)
            .args(["stats", "--name", "cli0", "--dir", d, "--json"])
            .output()
            .unwrap();
        if !out.status.success() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if v["ports"][0]["generator"]["sent"].as_u64().unwrap_or(0) > 1000 {
            break v;
        }
    };
    let sent = stats["ports"][0]["generator"]["sent"].as_u64().unwrap();
    let no_match = stats["ports"][0]["counters"]["drop_no_match"]
        .as_u64()
        .unwrap();
    // The snapshot is taken at one instant: every frame sent arrived and was
    // dropped for want of a pipe.
    assert_eq!(no_match, sent, "{stats}");
    // The human-readable form names the causes.
    let out = Command::new(BIN)
        .args(["stats", "--name", "cli0", "--dir", d])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("no_match"), "{text}");
    // SIGTERM stops it cleanly and removes the device directory.
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(nic.id() as i32, libc::SIGTERM) };
    let status = nic.wait().unwrap();
    assert!(status.success());
    assert!(!dir.path().join("enso-cli0").exists());
}

#[test]
fn bad_arguments_give_one_clear_line() {
    for args in [
        vec!["run", "--port", "wire"],
        vec!["run", "--pipe-size", "1000"],
        vec!["run", "--port", "cable:3"],
        vec!["run", "--port", "generator:size=10"],
        vec!["stats", "--name", "does-not-exist", "--dir", "/nonexistent"],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("nic-emu: "), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn no_subcommand_is_one_line_naming_them_not_the_whole_help() {
    let out = Command::new(BIN).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "nic-emu: a subcommand is required (run, stats): see nic-emu --help\n"
    );
    // Asked for, the help is still there.
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("stats") && help.lines().count() > 5, "{help}");
}

/// Runs the binary with `args` (and a device directory in a temporary
/// directory), killing it if it runs for more than 10 s; returns its exit
/// status and stderr.
fn run_briefly(args: &[&str]) -> (std::process::ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(args)
        .args(["--dir", dir.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status, err)
}

#[test]
fn out_of_range_run_settings_give_one_clear_line() {
    let run = |extra: &[&'static str]| {
        let mut v = vec!["run", "--name", "cli-bad"];
        v.extend_from_slice(extra);
        v
    };
    for (args, says) in [
        (run(&["--duration-s", "nan"]), "--duration-s"),
        (run(&["--duration-s", "1e30"]), "--duration-s"),
        (run(&["--duration-s=-1"]), "--duration-s"),
        (run(&["--duration-s", "0"]), "--duration-s"),
        (
            run(&["--progress-s=-1", "--duration-s", "1"]),
            "--progress-s",
        ),
        (
            run(&["--progress-s", "nan", "--duration-s", "1"]),
            "--progress-s",
        ),
        (
            run(&["--port", "generator:burst=18446744073709551615"]),
            "burst",
        ),
        (run(&["--port", "generator:burst=100000000000"]), "burst"),
        (run(&["--port", "generator:burst=0"]), "burst 0"),
        (run(&["--port", "generator:flows=0"]), "flows 0"),
        (run(&["--port", "generator:count=0"]), "count 0"),
        (
            run(&["--port", "generator:inflight=0"]),
            "in-flight window 0",
        ),
        (
            run(&["--port", "cable:0:delay=-1"]),
            "cable delay must be a whole number of ns in 0..=1000000000",
        ),
        (
            run(&["--port", "cable:0:delay=5000000000"]),
            "cable delay must be in 0..=1000000000 ns",
        ),
        (
            run(&["--port", "cable:1"]),
            "cable to port 1, which does not exist (ports are 0..=0",
        ),
        (
            run(&["--port", "generator:size=64,size=128"]),
            "generator option size is given twice",
        ),
        (
            run(&["--latency-ns", "18446744073709551615"]),
            "interconnect latency",
        ),
        (
            run(&["--notif-entries", "2147483648"]),
            "notification rings",
        ),
    ] {
        let (status, err) = run_briefly(&args);
        assert!(!status.success(), "{args:?}");
        assert!(err.starts_with("nic-emu: "), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_missing_directory_is_refused_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir");
    let out = Command::new(BIN)
        .args(["run", "--name", "cli-dir", "--duration-s", "1"])
        .args(["--dir", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("nic-emu: ") && err.contains("not an existing directory"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!dir.path().join("no").exists());
}

#[test]
fn sigterm_stops_a_saturated_generator_and_removes_the_device_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut nic = Command::new(BIN)
        .args(["run", "--name", "cli-term", "--progress-s", "0"])
        .args(["--dir", dir.path().to_str().unwrap()])
        .args(["--port", "generator:burst=4096"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dev = dir.path().join("enso-cli-term");
    let start = Instant::now();
    while !dev.join("stats.json").exists() {
        assert!(start.elapsed() < Duration::from_secs(10), "device not up");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(nic.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = nic.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = nic.kill();
            let _ = nic.wait();
            panic!("SIGTERM did not stop the device within 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    assert!(!dev.exists());
}

#[test]
fn stats_of_a_killed_device_is_an_error_not_its_stale_counters() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut nic = Command::new(BIN)
        .args(["run", "--name", "cli-kill", "--dir", d, "--progress-s", "0"])
        .args(["--port", "generator:size=64,pps=100000"])
        // Ends by itself should the test fail before it kills it.
        .args(["--duration-s", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stats = || {
        Command::new(BIN)
            .args(["stats", "--name", "cli-kill", "--dir", d])
            .output()
            .unwrap()
    };
    let start = Instant::now();
    while !stats().status.success() {
        assert!(start.elapsed() < Duration::from_secs(10), "device not up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Killed: no chance to remove its directory, snapshot included.
    nic.kill().unwrap();
    nic.wait().unwrap();
    let dev = dir.path().join("enso-cli-kill");
    assert!(dev.join("stats.json").is_file());
    let out = stats();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        err.starts_with("nic-emu: device 'cli-kill' is not running"),
        "{err}"
    );
    assert!(
        err.contains("stats.json"),
        "names the stale snapshot: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn a_failed_standard_output_is_one_line_or_a_quiet_end_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let run = |name: &str| {
        let mut c = Command::new(BIN);
        c.args(["run", "--name", name, "--dir", d]).args([
            "--duration-s",
            "0.2",
            "--progress-s",
            "0",
        ]);
        c
    };
    // A full disk: one line naming the failure.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = run("full0").stdout(full).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nic-emu: failed printing to stdout") && !err.contains("panicked"),
        "{err}"
    );
    // A reader that has gone (`nic-emu run ... | head -0`): a quiet end
    // with the status of a SIGPIPE death.
    let mut child = run("pipe0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_name_too_long_for_the_socket_is_refused_and_leaves_no_directory() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("cli-{}", "x".repeat(120));
    let out = Command::new(BIN)
        .args([
            "run",
            "--name",
            &name,
            "--duration-s",
            "1",
            "--progress-s",
            "0",
        ])
        .args(["--dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("nic-emu: ") && err.contains("too long for a Unix socket path"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn sighup_stops_the_device_and_removes_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut nic = Command::new(BIN)
        .args(["run", "--name", "cli-hup", "--progress-s", "0"])
        .args(["--dir", dir.path().to_str().unwrap()])
        // Ends by itself should the test fail before it signals it.
        .args(["--duration-s", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dev = dir.path().join("enso-cli-hup");
    let start = Instant::now();
    while !dev.join("stats.json").exists() {
        assert!(start.elapsed() < Duration::from_secs(10), "device not up");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(nic.id() as i32, libc::SIGHUP) };
    let status = nic.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!dev.exists());
}

#[test]
fn a_killed_devices_directory_is_reclaimed_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let start_dev = || {
        Command::new(BIN)
            .args([
                "run",
                "--name",
                "cli-again",
                "--dir",
                d,
                "--progress-s",
                "0",
            ])
            .args(["--duration-s", "30"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let sock = dir.path().join("enso-cli-again").join("control.sock");
    let wait_up = || {
        let start = Instant::now();
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(start.elapsed() < Duration::from_secs(10), "device not up");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut first = start_dev();
    wait_up();
    // A second device of the same name is refused while the first runs.
    let out = Command::new(BIN)
        .args([
            "run",
            "--name",
            "cli-again",
            "--dir",
            d,
            "--progress-s",
            "0",
        ])
        .args(["--duration-s", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("already running"), "{err}");
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(dir.path().join("enso-cli-again/device.pid").is_file());
    // Dead: its marker names a process that has gone, so it is reclaimed.
    let mut second = start_dev();
    wait_up();
    // SAFETY: kill with a pid we spawned and still own (not yet waited for).
    unsafe { libc::kill(second.id() as i32, libc::SIGTERM) };
    let status = second.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!dir.path().join("enso-cli-again").exists());
}

#[test]
fn stats_of_a_stopped_device_is_an_error_naming_the_snapshots_age() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut nic = Command::new(BIN)
        .args(["run", "--name", "cli-stop", "--dir", d, "--progress-s", "0"])
        .args(["--duration-s", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stats = || {
        Command::new(BIN)
            .args(["stats", "--name", "cli-stop", "--dir", d])
            .output()
            .unwrap()
    };
    let start = Instant::now();
    while !stats().status.success() {
        assert!(start.elapsed() < Duration::from_secs(10), "device not up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = nic.id() as i32;
    // SAFETY: signals to a child we spawned and have not waited for.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(2500));
    let out = stats();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    nic.wait().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    assert!(err.contains("has not written its counters for"), "{err}");
    assert!(err.contains("stopped or stuck"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn names_that_leave_the_directory_are_refused_by_run_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for name in ["nm/../enso-nm", "..", "a/b", ""] {
        for sub in ["run", "stats"] {
            let out = Command::new(BIN)
                .args([sub, "--name", name, "--dir", d])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{sub} {name}: {err}");
            assert!(err.contains("bad device name"), "{sub} {name}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
