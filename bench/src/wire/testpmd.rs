//! DPDK's `dpdk-testpmd` as a traffic source or sink for `bench wire`:
//! started with a `--vdev` (memif or AF_PACKET), `--stats-period 1` so it
//! prints its ports' packet rates once a second, and stopped with SIGINT,
//! after which it prints its accumulated counters.
//!
//! EAL runs with `--no-huge --no-pci` and its own `--file-prefix`; the
//! runtime directory EAL makes for that prefix is removed on drop.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a testpmd does with its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fwd {
    /// Sends frames of this length (no FCS) as fast as it can.
    TxOnly(usize),
    /// Receives and frees.
    RxOnly,
}

/// Why testpmd is not usable here, or None.
pub fn missing() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|d| d.join("dpdk-testpmd").is_file()) {
        return Some(
            "dpdk-testpmd not found (Debian: apt-get install dpdk dpdk-dev librte-net-memif23)"
                .into(),
        );
    }
    None
}

/// One printed rate sample: when the line was read, and the value.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Instant,
    rx_pps: f64,
    tx_pps: f64,
}

#[derive(Debug, Default)]
struct Seen {
    text: String,
    samples: Vec<Sample>,
    /// The Rx-pps of the block being read (the Tx-pps line follows it).
    pending_rx: Option<f64>,
}

impl Seen {
    fn line(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
        let t = line.trim_start();
        if let Some(v) = t.strip_prefix("Rx-pps:") {
            self.pending_rx = first_number(v);
        } else if let Some(v) = t.strip_prefix("Tx-pps:") {
            if let (Some(rx), Some(tx)) = (self.pending_rx.take(), first_number(v)) {
                self.samples.push(Sample {
                    at: Instant::now(),
                    rx_pps: rx,
                    tx_pps: tx,
                });
            }
        }
    }
}

fn first_number(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

/// A running testpmd; killed on drop if still running.
#[derive(Debug)]
pub struct TestPmd {
    child: Child,
    seen: Arc<Mutex<Seen>>,
    cmdline: String,
    runtime_dirs: Vec<PathBuf>,
}

/// Counters testpmd printed when it stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Frames its forwarding engine received.
    pub rx: u64,
    /// Frames it sent.
    pub tx: u64,
    /// Frames it could not send (the port's ring was full).
    pub tx_dropped: u64,
}

impl TestPmd {
    /// Starts testpmd: EAL on cores `main` (its control thread, which
    /// sleeps) and `fwd` (the forwarding loop, which polls), one port made
    /// by `vdev`, inside network namespace `netns` if given.
    pub fn spawn(
        tag: &str,
        netns: Option<&str>,
        (main, fwd_core): (usize, usize),
        vdev: &str,
        fwd: Fwd,
    ) -> Result<TestPmd, String> {
        let prefix = format!("bench-wire-{}-{tag}", std::process::id());
        let lcores = format!("{main},{fwd_core}");
        let mut args: Vec<String> = vec![
            "--no-huge".into(),
            "--no-pci".into(),
            "-m".into(),
            "1024".into(),
            "--file-prefix".into(),
            prefix.clone(),
            "-l".into(),
            lcores,
            "--main-lcore".into(),
            main.to_string(),
            "--log-level".into(),
            "lib.eal:error".into(),
            format!("--vdev={vdev}"),
            "--".into(),
            "--total-num-mbufs=32768".into(),
            "--no-flush-rx".into(),
            "--stats-period".into(),
            "1".into(),
            "-a".into(),
        ];
        match fwd {
            Fwd::TxOnly(len) => {
                args.push("--forward-mode=txonly".into());
                args.push(format!("--txpkts={len}"));
            }
            Fwd::RxOnly => args.push("--forward-mode=rxonly".into()),
        }
        let (program, all): (&str, Vec<String>) = match netns {
            Some(ns) => {
                let mut all: Vec<String> = vec!["netns".into(), "exec".into(), ns.into()];
                all.push("dpdk-testpmd".into());
                all.extend(args);
                ("ip", all)
            }
            None => ("dpdk-testpmd", args),
        };
        let cmdline = format!("{program} {}", all.join(" "));
        let mut child = Command::new(program)
            .args(&all)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        for stream in [
            Box::new(child.stdout.take().expect("piped")) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().expect("piped")),
        ] {
            let seen = seen.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    seen.lock().unwrap_or_else(|e| e.into_inner()).line(&line);
                }
            });
        }
        let mut runtime_dirs = vec![PathBuf::from("/var/run/dpdk").join(&prefix)];
        if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR") {
            runtime_dirs.push(PathBuf::from(xdg).join("dpdk").join(&prefix));
        }
        runtime_dirs.push(std::env::temp_dir().join("dpdk").join(&prefix));
        Ok(TestPmd {
            child,
            seen,
            cmdline,
            runtime_dirs,
        })
    }

    /// What it printed so far.
    pub fn output(&self) -> String {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .text
            .clone()
    }

    /// An error naming the command and its last lines if it has exited.
    pub fn check_running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.failure(&format!("exited early ({status})"))),
            Err(e) => Err(self.failure(&e.to_string())),
        }
    }

    fn failure(&self, what: &str) -> String {
        let out = self.output();
        let tail: Vec<&str> = out.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "dpdk-testpmd {what}: {}\n  {}",
            self.cmdline,
            tail.join("\n  ")
        )
    }

    /// Waits (at most `limit`) until it has started forwarding; false if
    /// it did not.
    pub fn wait_until_forwarding(&mut self, limit: Duration) -> Result<bool, String> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            self.check_running()?;
            if self.output().contains("start packet forwarding") {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(false)
    }

    /// Waits (at most `limit`) until a printed sample shows frames
    /// received (`rx`) or sent; false if none did.
    pub fn wait_for_traffic(&mut self, rx: bool, limit: Duration) -> Result<bool, String> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            self.check_running()?;
            let moving = self
                .seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .samples
                .iter()
                .any(|s| if rx { s.rx_pps > 0.0 } else { s.tx_pps > 0.0 });
            if moving {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(false)
    }

    /// The (Rx-pps, Tx-pps) samples printed between `from` and `to`.
    pub fn rates_between(&self, from: Instant, to: Instant) -> Vec<(f64, f64)> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .samples
            .iter()
            .filter(|s| s.at > from && s.at <= to)
            .map(|s| (s.rx_pps, s.tx_pps))
            .collect()
    }

    /// Stops it (SIGINT, then SIGKILL after 20 s) and reads the counters it
    /// printed on the way out.
    pub fn stop(mut self) -> Result<Totals, String> {
        self.check_running()?;
        // `kill` rather than libc: one process, off the measured path.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(self.failure("did not stop within 20 s of SIGINT"));
                }
            }
        }
        // Let the readers catch the last lines.
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until && !self.output().contains("Bye") {
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = self.output();
        let num = |key: &str| memif::testpmd::accumulated(&out, key);
        match (num("RX-packets:"), num("TX-packets:"), num("TX-dropped:")) {
            (Some(rx), Some(tx), Some(tx_dropped)) => Ok(Totals { rx, tx, tx_dropped }),
            _ => Err(self.failure("printed no statistics this parser knows")),
        }
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for d in &self.runtime_dirs {
            // Only the directory EAL made for our own prefix.
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_pair_rx_and_tx_rates_of_a_block() {
        let mut s = Seen::default();
        for l in [
            "  ######################## NIC statistics for port 0  ########################",
            "  RX-packets: 83618528   RX-missed: 0          RX-bytes:  5351585792",
            "  Throughput (since last show)",
            "  Rx-pps:     14829981          Rx-bps:   7118391160",
            "  Tx-pps:            7          Tx-bps:            0",
            "  Rx-pps:           12          Rx-bps:   7118391160",
            "  Tx-pps:            x          Tx-bps:            0",
        ] {
            s.line(l);
        }
        assert_eq!(s.samples.len(), 1);
        assert_eq!(s.samples[0].rx_pps, 14829981.0);
        assert_eq!(s.samples[0].tx_pps, 7.0);
    }
}
