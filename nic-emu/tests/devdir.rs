//! The device directory under attack: what a local user can plant where a
//! device is about to make its directory, and what must come of it (a
//! refusal naming the path, or a directory of the device's own), never a
//! file touched outside it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

fn cfg(parent: &Path, name: &str) -> DeviceConfig {
    let mut c = DeviceConfig::new(name.to_string(), WireConfig::Null);
    c.dir = parent.to_path_buf();
    c.pipe_size = 1 << 16;
    c.notif_ring_entries = 256;
    c
}

fn start(parent: &Path, name: &str) -> Result<Nic, String> {
    Nic::start(
        cfg(parent, name),
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())
}

/// A directory with a file in it, mode 0755: what an attacker points a
/// link at.
fn victim(parent: &Path) -> std::path::PathBuf {
    let v = parent.join("victim");
    std::fs::create_dir(&v).unwrap();
    std::fs::set_permissions(&v, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(v.join("precious.txt"), b"keep me").unwrap();
    v
}

fn assert_untouched(v: &Path) {
    let m = std::fs::metadata(v).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o755, "the victim's mode changed");
    let mut names: Vec<_> = std::fs::read_dir(v)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["precious.txt"], "files appeared in the victim");
    assert_eq!(std::fs::read(v.join("precious.txt")).unwrap(), b"keep me");
}

#[test]
fn a_symlink_planted_at_the_device_path_is_refused_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let v = victim(tmp.path());
    std::os::unix::fs::symlink(&v, tmp.path().join("enso-planted")).unwrap();
    let e = start(tmp.path(), "planted").expect_err("started through a link");
    assert!(e.contains("symbolic link"), "{e}");
    assert!(e.contains("enso-planted"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert_untouched(&v);
    // The link is left as it was.
    assert!(std::fs::symlink_metadata(tmp.path().join("enso-planted"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_symlink_planted_while_devices_start_is_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let v = victim(tmp.path());
    let link = tmp.path().join("enso-race");
    let stop = Arc::new(AtomicBool::new(false));
    // Every tenth try the attacker is held (and says so) and the path is
    // cleared, so that a device gets to start whatever the host's load;
    // otherwise it plants the link again whenever the path is free, as
    // fast as it can, and now and then takes it away.
    let hold = Arc::new(AtomicBool::new(false));
    let held = Arc::new(AtomicBool::new(false));
    let planter = {
        let (stop, link, v) = (stop.clone(), link.clone(), v.clone());
        let (hold, held) = (hold.clone(), held.clone());
        std::thread::spawn(move || {
            let mut planted = 0u64;
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                if hold.load(Ordering::SeqCst) {
                    held.store(true, Ordering::SeqCst);
                    std::thread::yield_now();
                    continue;
                }
                held.store(false, Ordering::SeqCst);
                i += 1;
                if std::os::unix::fs::symlink(&v, &link).is_ok() {
                    planted += 1;
                }
                if i.is_multiple_of(7) {
                    let _ = std::fs::remove_file(&link);
                }
                std::thread::yield_now();
            }
            planted
        })
    };
    let (mut started, mut refused) = (0, 0);
    for attempt in 0..300 {
        let quiet = attempt % 10 == 0;
        hold.store(quiet, Ordering::SeqCst);
        if quiet {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !held.load(Ordering::SeqCst) {
                assert!(
                    std::time::Instant::now() < until,
                    "the planter did not stop"
                );
                std::thread::yield_now();
            }
            let _ = std::fs::remove_file(&link);
        }
        match start(tmp.path(), "race") {
            Ok(nic) => {
                // What it made is a real directory of its own.
                let m = std::fs::symlink_metadata(nic.dir()).unwrap();
                assert!(m.is_dir(), "the device's directory is not a directory");
                assert_eq!(m.mode() & 0o777, 0o700);
                assert!(nic.dir().join("control.sock").exists());
                started += 1;
                nic.stop();
            }
            Err(e) => {
                assert!(!quiet, "refused with no link planted: {e}");
                assert!(
                    e.contains("symbolic link") || e.contains("already running"),
                    "an unclear refusal: {e}"
                );
                refused += 1;
            }
        }
        assert_untouched(&v);
    }
    stop.store(true, Ordering::SeqCst);
    let planted = planter.join().unwrap();
    assert_untouched(&v);
    assert!(planted > 0, "the link was never planted");
    assert!(started >= 30, "started {started}, refused {refused}");
    assert!(
        refused > 0,
        "started {started}, refused {refused}: the race was not run"
    );
}

#[test]
fn a_directory_that_is_not_a_device_is_refused_and_kept_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("enso-notes");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(d.join("notes.txt"), b"mine").unwrap();
    let e = start(tmp.path(), "notes").expect_err("took over a directory");
    assert!(e.contains("notes.txt") && e.contains("not removing"), "{e}");
    assert_eq!(std::fs::read(d.join("notes.txt")).unwrap(), b"mine");
    // Nor one without the device's marker, even if it holds only what a
    // device would.
    std::fs::remove_file(d.join("notes.txt")).unwrap();
    std::fs::write(d.join("stats.json"), b"{}").unwrap();
    let e = start(tmp.path(), "notes").expect_err("took over an unmarked directory");
    assert!(e.contains("device.pid"), "{e}");
    assert!(d.join("stats.json").is_file());
    // A regular file at the path is refused too, and kept.
    std::fs::write(tmp.path().join("enso-file"), b"x").unwrap();
    let e = start(tmp.path(), "file").expect_err("replaced a file");
    assert!(e.contains("regular file"), "{e}");
    assert_eq!(std::fs::read(tmp.path().join("enso-file")).unwrap(), b"x");
}

#[test]
fn a_dead_devices_directory_is_reclaimed_and_a_live_ones_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("enso-dead");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A socket nobody listens on, a snapshot, and a marker naming this
    // process with another start time: a process that has gone, whose pid
    // was reused.
    drop(std::os::unix::net::UnixListener::bind(d.join("control.sock")).unwrap());
    std::fs::write(d.join("stats.json"), b"{}").unwrap();
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let start_time: u64 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let pid = std::process::id();
    std::fs::write(d.join("device.pid"), format!("{pid} {}\n", start_time + 1)).unwrap();
    let nic = start(tmp.path(), "dead").expect("a dead device's directory was not reclaimed");
    nic.stop();
    assert!(!d.exists(), "the device's directory outlived it");

    // The same, with a marker naming this very process: it still runs.
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(d.join("device.pid"), format!("{pid} {start_time}\n")).unwrap();
    let e = start(tmp.path(), "dead").expect_err("took a live device's directory");
    assert!(e.contains("still runs"), "{e}");
    assert!(d.join("device.pid").is_file());
}

#[test]
fn a_parent_anyone_may_write_to_without_the_sticky_bit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let open = tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = start(&open, "x").expect_err("started in a directory anyone may swap");
    assert!(e.contains("not sticky"), "{e}");
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
    // Sticky, as /dev/shm and /tmp are: fine.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    start(&open, "x")
        .expect("a sticky parent was refused")
        .stop();
}

#[test]
fn a_directory_of_another_user_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        test_skips::skipped("not root: needs root to give a directory to another user");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("enso-theirs");
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
    let e = start(tmp.path(), "theirs").expect_err("took another user's directory");
    assert!(e.contains("uid 65534"), "{e}");
    assert!(d.is_dir());
}

#[test]
fn names_that_leave_the_directory_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("nm");
    std::fs::create_dir(&sub).unwrap();
    for name in ["nm/../enso-nm", "..", "../x", "a/b", "", ".x"] {
        let e = start(&sub, name).expect_err(name);
        assert!(e.starts_with("bad device name"), "{name}: {e}");
    }
    assert_eq!(std::fs::read_dir(&sub).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}
