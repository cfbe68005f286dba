//! Device directories made by this process, removed if a signal stops it.
//!
//! An engine's device directory (shared-memory files and the control
//! socket, in `/dev/shm` by default) is removed when its owner drops it. A
//! process killed by SIGTERM (as `timeout` does) or SIGINT drops nothing,
//! so binaries that run engines in process and have no shutdown path of
//! their own (bench, app-trial, enso-demo) call
//! [`remove_devices_on_signal`]: the directories the engines made are then
//! removed before the process ends.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn dirs() -> MutexGuard<'static, Vec<PathBuf>> {
    // A panic while holding the lock leaves a list that is still valid.
    DIRS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Notes a device directory this process made.
pub(crate) fn register(dir: &Path) {
    dirs().push(dir.to_path_buf());
}

/// Forgets a device directory (its owner has gone).
pub(crate) fn unregister(dir: &Path) {
    dirs().retain(|d| d != dir);
}

/// On SIGINT, SIGTERM or SIGHUP, removes the device directories that this
/// process's engines made and have not yet dropped, then exits with the
/// status a death by that signal reports (128 + its number). Call once,
/// early; a process that handles these signals itself should not.
pub fn remove_devices_on_signal() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("device-cleanup".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                for d in dirs().iter() {
                    crate::devdir::remove_files(d);
                }
                std::process::exit(128 + sig);
            }
        });
}
