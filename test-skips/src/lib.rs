//! Tests that cannot run on this machine (not root, a tool or library
//! missing) return early and pass; this crate makes them say so where it
//! is seen. [`skipped`] and [`missing`] print one line and record the skip
//! in a file of its own under the target directory
//! (`target/<profile>/skipped-tests/<run>/`), and the last test binary of
//! `cargo test` (this crate's `skipped`, a test without the test harness)
//! lists every skip of the run, one line each.
//!
//! A run is the `cargo test` process: every test binary it starts is its
//! child, so the records of one run are those made under the same parent
//! process (its pid and start time). Records of runs whose process is gone
//! are removed when the list is printed, so earlier runs never show.
//!
//! No dependencies: product crates' tests use it as a dev-dependency.

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where the records of all runs go: `skipped-tests/` next to the
/// `deps/` directory the test executables run from.
pub fn records_root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    Some(deps.parent()?.join("skipped-tests"))
}

/// The run this process belongs to: its parent's pid and start time (the
/// start time tells a reused pid apart), as a directory name.
pub fn run_id() -> String {
    let ppid = std::os::unix::process::parent_id();
    match start_time(ppid) {
        Some(t) => format!("{ppid}-{t}"),
        None => ppid.to_string(),
    }
}

/// The start time of process `pid` (clock ticks after boot, field 22 of
/// `/proc/<pid>/stat`); `None` if it is gone or this is not Linux.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the run named `id` (from [`run_id`]) is still going.
fn run_alive(id: &str) -> bool {
    let mut parts = id.splitn(2, '-');
    let Some(pid) = parts.next().and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    match parts.next() {
        Some(t) => start_time(pid).is_some_and(|now| now.to_string() == t),
        None => Path::new(&format!("/proc/{pid}")).exists(),
    }
}

/// The test calling: the name of its thread, which the test harness names
/// after the test (with `--test-threads=1` tests run on `main`).
fn test_name() -> String {
    match std::thread::current().name() {
        Some(n) if n != "main" => n.to_string(),
        _ => "(test on the main thread)".to_string(),
    }
}

/// The test binary: its package (`CARGO_PKG_NAME`, which cargo sets when it
/// runs tests) and target (the executable's name without cargo's hash).
fn binary_name() -> String {
    let target = std::env::current_exe()
        .ok()
        .and_then(|e| e.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| match s.rsplit_once('-') {
            Some((name, hash))
                if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                name.to_string()
            }
            _ => s,
        })
        .unwrap_or_else(|| "?".to_string());
    match std::env::var("CARGO_PKG_NAME") {
        Ok(pkg) if pkg.replace('-', "_") != target => format!("{pkg}/{target}"),
        Ok(pkg) => pkg,
        Err(_) => target,
    }
}

/// One line: `binary test: why`.
fn record_line(why: &str) -> String {
    let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("{} {}: {why}", binary_name(), test_name())
}

/// Records that the calling test did not run (or ran only in part), and
/// why, in a file of its own; prints the line. The test then returns and
/// passes.
pub fn skipped(why: impl Display) {
    let line = record_line(&why.to_string());
    eprintln!("SKIPPED {line}");
    if let Err(e) = write_record(&line) {
        eprintln!("(the skip could not be recorded: {e})");
    }
}

/// As [`skipped`], for what is missing on this machine (a tool, a
/// library, a compiler): under `CI=true`, where `.ci/run` installs all of
/// them, the test fails instead.
pub fn missing(why: impl Display) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI=true and {why}");
    }
    skipped(why);
}

fn write_record(line: &str) -> std::io::Result<()> {
    static N: AtomicU64 = AtomicU64::new(0);
    let root = records_root().ok_or_else(|| std::io::Error::other("no executable path"))?;
    let dir = root.join(run_id());
    std::fs::create_dir_all(&dir)?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("{nanos:020}-{}-{n}", std::process::id());
    // Written aside and renamed: a reader sees whole records only.
    let tmp = dir.join(format!(".{name}"));
    let mut f = std::fs::File::create(&tmp)?;
    writeln!(f, "{line}")?;
    drop(f);
    std::fs::rename(&tmp, dir.join(format!("{name}.skip")))
}

/// The skips recorded so far by run `id` under `root`, oldest first.
pub fn read_run(root: &Path, id: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.join(id)) else {
        return vec![];
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "skip"))
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim_end().to_string())
        .collect()
}

/// Removes the records of runs under `root` whose process is gone, and
/// those of run `done` (listed already).
pub fn clean(root: &Path, done: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == done || !run_alive(&name) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The summary of `skips`, one line each.
pub fn summary(skips: &[String]) -> String {
    if skips.is_empty() {
        return "no test skipped in this run\n".to_string();
    }
    let mut s = format!(
        "{} test{} skipped in this run (not root, or a tool missing):\n",
        skips.len(),
        if skips.len() == 1 { "" } else { "s" }
    );
    for l in skips {
        s.push_str("  ");
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_the_test_and_its_reason_on_one_line() {
        assert_eq!(
            record_line("testpmd\n  missing"),
            "test-skips tests::a_record_names_the_test_and_its_reason_on_one_line: testpmd missing"
        );
    }

    #[test]
    fn a_run_reads_its_own_records_in_order_and_cleans_up() {
        let root = tempfile_dir();
        let own = run_id();
        let gone = "4294967295-1";
        for (run, name, line) in [
            (own.as_str(), "2-1-0.skip", "b"),
            (own.as_str(), "1-1-0.skip", "a"),
            (own.as_str(), ".3-1-0", "half-written"),
            (gone, "1-1-0.skip", "stale"),
        ] {
            std::fs::create_dir_all(root.join(run)).unwrap();
            std::fs::write(root.join(run).join(name), format!("{line}\n")).unwrap();
        }
        assert_eq!(read_run(&root, &own), ["a", "b"]);
        assert_eq!(read_run(&root, gone), ["stale"]);
        // Another run still going keeps its records.
        let alive = format!(
            "{}-{}",
            std::process::id(),
            start_time(std::process::id()).unwrap()
        );
        std::fs::create_dir_all(root.join(&alive)).unwrap();
        clean(&root, &own);
        let mut left: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [alive]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_summary_has_one_line_per_skip() {
        assert_eq!(summary(&[]), "no test skipped in this run\n");
        let s = summary(&["p/t a: no tshark".into(), "p/t b: not root".into()]);
        assert_eq!(s.lines().count(), 3);
        assert!(s.starts_with("2 tests skipped"));
        assert!(s.contains("\n  p/t a: no tshark\n"));
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "test-skips-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
