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
