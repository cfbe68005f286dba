//! Whether a measurement had its cores to itself.
//!
//! Two things can steal a measured thread's core: another process on the
//! same vCPU (the thread is preempted: its involuntary context switches
//! grow) and the host (the vCPU does not run: the machine's steal time
//! grows). Both are read from /proc, so they cost nothing during a run and
//! need no privileges; a result that reports either is not a clean number.

use std::fs;

/// Involuntary context switches of the calling thread so far, from
/// `/proc/thread-self/status`; `None` where that file does not exist.
pub fn involuntary_switches() -> Option<u64> {
    let status = fs::read_to_string("/proc/thread-self/status").ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix("nonvoluntary_ctxt_switches:")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Clock ticks per second in /proc/stat (USER_HZ: 100 on Linux).
const USER_HZ: f64 = 100.0;

/// Machine-wide steal time so far (all CPUs), in milliseconds.
pub fn steal_ms() -> Option<f64> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().find(|l| l.starts_with("cpu "))?;
    // user nice system idle iowait irq softirq steal ...
    let steal: u64 = cpu.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal as f64 * 1000.0 / USER_HZ)
}

/// Threads runnable on the whole machine right now (the 4th field of
/// /proc/loadavg), the calling thread included.
pub fn runnable_threads() -> Option<u32> {
    let load = fs::read_to_string("/proc/loadavg").ok()?;
    load.split_whitespace()
        .nth(3)?
        .split_once('/')?
        .0
        .parse()
        .ok()
}

/// Counts a thread's preemptions over a span of its life.
#[derive(Debug, Clone, Copy)]
pub struct PreemptionCounter {
    start: Option<u64>,
}

impl PreemptionCounter {
    /// Starts counting for the calling thread.
    pub fn start() -> Self {
        PreemptionCounter {
            start: involuntary_switches(),
        }
    }

    /// Preemptions of the calling thread (the same one) since `start`.
    pub fn stop(&self) -> u64 {
        match (self.start, involuntary_switches()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        }
    }
}

/// Machine-wide steal over a span.
#[derive(Debug, Clone, Copy)]
pub struct StealCounter {
    start: Option<f64>,
}

impl StealCounter {
    /// Starts counting.
    pub fn start() -> Self {
        StealCounter { start: steal_ms() }
    }

    /// Milliseconds of steal (summed over CPUs) since `start`.
    pub fn stop(&self) -> f64 {
        match (self.start, steal_ms()) {
            (Some(a), Some(b)) => (b - a).max(0.0),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_read_proc() {
        // Linux only: every field exists and the counters never go back.
        let p = PreemptionCounter::start();
        let s = StealCounter::start();
        std::thread::yield_now();
        assert!(involuntary_switches().is_some());
        assert!(steal_ms().is_some());
        assert!(runnable_threads().unwrap() >= 1);
        let _ = p.stop();
        assert!(s.stop() >= 0.0);
    }
}
