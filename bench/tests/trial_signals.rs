//! A trial binary stopped by a signal removes the devices it made.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The device directories of process `pid` in /dev/shm (app-trial names
/// them `enso-apps-<app>-<interface>-<pid>-<n>`).
fn dirs_of(pid: u32) -> Vec<String> {
    let tag = format!("-{pid}-");
    std::fs::read_dir("/dev/shm")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("enso-apps-") && n.contains(&tag))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn sigterm_removes_the_trial_devices() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_app-trial"))
        .args([
            "--app",
            "maglev",
            "--interface",
            "enso",
            "--duration-s",
            "30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let start = Instant::now();
    while dirs_of(pid).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "app-trial made no device"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) with a pid we spawned and have not yet waited for.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert_eq!(dirs_of(pid), Vec::<String>::new());
}
