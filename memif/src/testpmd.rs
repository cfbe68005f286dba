//! Running DPDK's `dpdk-testpmd` as a memif peer, for tests (here and in
//! other crates): feature `test-support`.
//!
//! Needs `dpdk-testpmd` (Debian: package `dpdk-dev`) and the memif PMD
//! (`librte-net-memif23`). [`missing_tool`] says which is missing, for the
//! test to skip with (`test_skips::missing`, which records the skip, or
//! fails under `CI=true`).
//!
//! testpmd runs with `--no-huge --no-pci -m 1024` on lcores 0 and 1, with
//! `-a` (start forwarding at once); a newline on its stdin stops it, and it
//! prints its accumulated forward statistics, which [`TestPmd::stop`] reads.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Serialises the tests: each testpmd busy-polls a core of two.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether `dir` holds a file whose name starts with `prefix`.
fn has_file(dir: &std::path::Path, prefix: &str) -> bool {
    std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
    })
}

/// What is missing to run testpmd as a memif peer (testpmd itself or the
/// memif PMD), with the package to install; `None` when nothing is.
pub fn missing_tool() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|d| d.join("dpdk-testpmd").is_file()) {
        return Some(
            "dpdk-testpmd not found (Debian: apt-get install dpdk-dev librte-net-memif23)".into(),
        );
    }
    // The PMD sits in the library directory and in DPDK's PMD directory
    // (e.g. /usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0), which testpmd loads.
    let libdirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ];
    let found = libdirs.iter().any(|lib| {
        let dpdk = std::path::Path::new(lib).join("dpdk");
        has_file(std::path::Path::new(lib), "librte_net_memif.so")
            || std::fs::read_dir(&dpdk).is_ok_and(|d| {
                d.flatten()
                    .any(|pmds| has_file(&pmds.path(), "librte_net_memif.so"))
            })
    });
    if !found {
        return Some("DPDK's memif PMD (librte_net_memif.so) not found (Debian: apt-get install librte-net-memif23)".into());
    }
    None
}

/// The counter `key` (e.g. `"RX-packets:"`) of the accumulated forward
/// statistics testpmd prints when it stops, from its output `out`; `None`
/// if there are none or they lack it.
pub fn accumulated(out: &str, key: &str) -> Option<u64> {
    let stats = out
        .split("Accumulated forward statistics for all ports")
        .nth(1)?;
    let at = stats.find(key)? + key.len();
    stats[at..].split_whitespace().next()?.parse().ok()
}

/// A running testpmd; killed on drop if still running.
pub struct TestPmd {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<String>>,
    cmdline: String,
    /// EAL's runtime directory for our --file-prefix, removed on drop.
    runtime_dir: std::path::PathBuf,
}

impl TestPmd {
    pub fn spawn(tag: &str, vdev: &str, fwd: &str) -> TestPmd {
        TestPmd::spawn_with(tag, vdev, fwd, &[])
    }

    pub fn spawn_with(tag: &str, vdev: &str, fwd: &str, eal_extra: &[&str]) -> TestPmd {
        TestPmd::spawn_full(tag, vdev, fwd, eal_extra, &[])
    }

    /// As [`TestPmd::spawn_with`], with testpmd's own options `app_extra`
    /// (after `--`: `--txpkts=64`, `--tx-first`...).
    pub fn spawn_full(
        tag: &str,
        vdev: &str,
        fwd: &str,
        eal_extra: &[&str],
        app_extra: &[&str],
    ) -> TestPmd {
        let prefix = format!("memif-test-{}-{tag}", std::process::id());
        let mut args: Vec<&str> = eal_extra.to_vec();
        let vdev_arg = format!("--vdev={vdev}");
        let fwd_arg = format!("--forward-mode={fwd}");
        args.extend([
            "--no-huge",
            "--no-pci",
            "-m",
            "1024",
            "--file-prefix",
            &prefix,
            "--main-lcore",
            "0",
            "-l",
            "0,1",
            &vdev_arg,
            "--",
            "--total-num-mbufs=32768",
            // Without this, testpmd drains and drops whatever arrives in
            // the first second of forwarding, uncounted.
            "--no-flush-rx",
            &fwd_arg,
            "-a",
        ]);
        args.extend(app_extra);
        let cmdline = format!("dpdk-testpmd {}", args.join(" "));
        eprintln!("running: {cmdline}");
        let mut child = Command::new("dpdk-testpmd")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn dpdk-testpmd");
        let out = Arc::new(Mutex::new(String::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let out = out.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut o = out.lock().unwrap();
                    o.push_str(&line);
                    o.push('\n');
                }
            });
        }
        TestPmd {
            stdin: child.stdin.take(),
            child,
            out,
            cmdline,
            runtime_dir: std::path::Path::new("/var/run/dpdk").join(&prefix),
        }
    }

    pub fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "testpmd exited early ({status}):\n{}\n{}",
                self.cmdline,
                self.output()
            );
        }
    }

    /// Presses enter, waits (bounded) for exit; returns the accumulated
    /// (RX-packets, TX-packets) and the output.
    pub fn stop(mut self) -> (u64, u64, String) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "testpmd did not exit:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the reader threads catch the last lines.
        std::thread::sleep(Duration::from_millis(200));
        let out = self.output();
        let num = |key: &str| -> u64 {
            accumulated(&out, key)
                .unwrap_or_else(|| panic!("no {key} in the statistics of:\n{out}"))
        };
        (num("RX-packets:"), num("TX-packets:"), out)
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}
