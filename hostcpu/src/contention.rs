//! Whether a measurement had its cores to itself.
//!
//! Two things can steal a measured thread's core: another thread on the
//! same vCPU (the thread is preempted: its involuntary context switches and
//! its run-queue wait time grow) and the host (the vCPU does not run: the
//! machine's steal time grows). All are read from /proc, so they cost
//! nothing during a run and need no privileges.
//!
//! Short kernel work preempts a busy thread now and then on any machine;
//! what matters is how much time it lost. A measurement is *contended* when
//! its threads waited on the run queue, or the host stole, more than
//! [`SIGNIFICANT_FRACTION`] of their time (elapsed time x measured threads).

use std::fs;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Share of a measurement's elapsed time that its threads may lose to other
/// work before it is reported as contended.
pub const SIGNIFICANT_FRACTION: f64 = 0.01;

/// Whether the time `threads` measured threads lost to other work (their
/// summed run-queue wait, or host steal) is a significant share of their
/// time over `elapsed`. `switches` without any known wait time (no
/// schedstat on this kernel) count as significant.
pub fn is_significant(
    switches: u64,
    waited_ns: u64,
    steal_ms: f64,
    elapsed: Duration,
    threads: usize,
) -> bool {
    let limit = elapsed.as_nanos() as f64 * threads.max(1) as f64 * SIGNIFICANT_FRACTION;
    waited_ns as f64 > limit || steal_ms * 1e6 > limit || (waited_ns == 0 && switches > 0)
}

/// Nanoseconds the calling thread has spent runnable but waiting for its
/// CPU, from `/proc/thread-self/schedstat`; `None` where it does not exist.
pub fn run_queue_wait_ns() -> Option<u64> {
    let stat = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().nth(1)?.parse().ok()
}

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

/// How much a thread was kept off its core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preemption {
    /// Involuntary context switches.
    pub switches: u64,
    /// Time spent runnable but not running, ns (0 if unknown).
    pub waited_ns: u64,
}

impl std::ops::Add for Preemption {
    type Output = Preemption;
    fn add(self, o: Preemption) -> Preemption {
        Preemption {
            switches: self.switches + o.switches,
            waited_ns: self.waited_ns + o.waited_ns,
        }
    }
}

/// Counts a thread's preemptions over a span of its life.
#[derive(Debug, Clone, Copy)]
pub struct PreemptionCounter {
    switches: Option<u64>,
    waited: Option<u64>,
}

impl PreemptionCounter {
    /// Starts counting for the calling thread.
    pub fn start() -> Self {
        PreemptionCounter {
            switches: involuntary_switches(),
            waited: run_queue_wait_ns(),
        }
    }

    /// Preemptions of the calling thread (the same one) since `start`.
    pub fn stop(&self) -> Preemption {
        let delta = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        Preemption {
            switches: delta(self.switches, involuntary_switches()),
            waited_ns: delta(self.waited, run_queue_wait_ns()),
        }
    }
}

/// Ids of this process's threads called `name` (as `/proc/self/task/*/comm`
/// shows it: the kernel keeps the first 15 bytes of a thread's name).
pub fn threads_named(name: &str) -> Vec<u32> {
    let want = &name.as_bytes()[..name.len().min(15)];
    let Ok(dir) = fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut tids: Vec<u32> = dir
        .flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = fs::read(e.path().join("comm")).ok()?;
            (comm.strip_suffix(b"\n").unwrap_or(&comm) == want).then_some(tid)
        })
        .collect();
    tids.sort_unstable();
    tids
}

/// Involuntary switches and run-queue wait so far of thread `tid` of this
/// process; `None` if it has gone or /proc does not tell.
pub fn thread_preemption(tid: u32) -> Option<Preemption> {
    let task = format!("/proc/self/task/{tid}");
    let status = fs::read_to_string(format!("{task}/status")).ok()?;
    let switches = status.lines().find_map(|l| {
        l.strip_prefix("nonvoluntary_ctxt_switches:")
            .and_then(|v| v.trim().parse().ok())
    })?;
    let waited_ns = fs::read_to_string(format!("{task}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    Some(Preemption {
        switches,
        waited_ns,
    })
}

/// Counts another thread's preemptions (one this process started, found by
/// [`threads_named`]) over a span of its life.
#[derive(Debug, Clone, Copy)]
pub struct ThreadPreemptionCounter {
    tid: u32,
    start: Option<Preemption>,
}

impl ThreadPreemptionCounter {
    /// Starts counting for thread `tid`.
    pub fn start(tid: u32) -> Self {
        ThreadPreemptionCounter {
            tid,
            start: thread_preemption(tid),
        }
    }

    /// Preemptions of the thread since `start` (zero if unknown).
    pub fn stop(&self) -> Preemption {
        match (self.start, thread_preemption(self.tid)) {
            (Some(a), Some(b)) => Preemption {
                switches: b.switches.saturating_sub(a.switches),
                waited_ns: b.waited_ns.saturating_sub(a.waited_ns),
            },
            _ => Preemption::default(),
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
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    /// Field `name` of /proc/thread-self/status.
    fn status_field(name: &str) -> u64 {
        let status = fs::read_to_string("/proc/thread-self/status").unwrap();
        status
            .lines()
            .find_map(|l| {
                let (key, value) = l.split_once(':')?;
                (key == name).then(|| value.trim().parse().unwrap())
            })
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    }

    /// Field `i` (0: time on the CPU, 1: time waiting for it) of
    /// /proc/thread-self/schedstat, ns.
    fn schedstat_field(i: usize) -> u64 {
        let stat = fs::read_to_string("/proc/thread-self/schedstat").unwrap();
        let fields: Vec<u64> = stat
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        fields[i]
    }

    /// The machine's steal so far, ms, from the "cpu " line of /proc/stat.
    fn stat_steal_ms() -> f64 {
        let stat = fs::read_to_string("/proc/stat").unwrap();
        let cpu = stat.lines().next().unwrap();
        let fields: Vec<&str> = cpu.split_whitespace().collect();
        assert_eq!(fields[0], "cpu", "{cpu}");
        // user nice system idle iowait irq softirq steal
        fields[8].parse::<f64>().unwrap() * 1000.0 / USER_HZ
    }

    #[test]
    fn counters_read_proc() {
        // Linux only. Each reader's value lies between two readings of its
        // own field taken just before and after it (the counters only
        // grow). The sleeps make the neighbouring voluntary switch count
        // grow well past the involuntary one meanwhile, so a reader of the
        // wrong line falls outside its bracket.
        let nonvoluntary = || status_field("nonvoluntary_ctxt_switches");
        for _ in 0..3 {
            let (before, read, after) = (nonvoluntary(), involuntary_switches(), nonvoluntary());
            assert!(
                read.is_some_and(|r| (before..=after).contains(&r)),
                "{read:?} {after}"
            );
            // Each sleep gives the core away (a sleep preempted just before
            // it gives the core away may not: sleep until 20 did).
            let voluntary = || status_field("voluntary_ctxt_switches");
            let (want, deadline) = (voluntary() + 20, Instant::now() + Duration::from_secs(10));
            while voluntary() < want {
                assert!(Instant::now() < deadline, "sleeps are voluntary switches");
                std::thread::sleep(Duration::from_micros(50));
            }

            let wait = || schedstat_field(1);
            let (before, read, after) = (wait(), run_queue_wait_ns(), wait());
            assert!(
                read.is_some_and(|r| (before..=after).contains(&r)),
                "{read:?} {after}"
            );

            let (before, read, after) = (stat_steal_ms(), steal_ms(), stat_steal_ms());
            assert!(
                read.is_some_and(|r| before <= r && r <= after),
                "{read:?} {after}"
            );
        }
        assert!(runnable_threads().unwrap() >= 1, "this thread runs");

        // A span reports what its counters gained over it: no more than
        // their fields gained over a longer span around it.
        let (switches, waited, steal) = (nonvoluntary(), schedstat_field(1), stat_steal_ms());
        let (p, s) = (PreemptionCounter::start(), StealCounter::start());
        // Started from real readings: one that could not read would report
        // zero whatever happened.
        assert!(p.switches.is_some() && p.waited.is_some() && s.start.is_some());
        for _ in 0..20 {
            std::thread::sleep(Duration::from_micros(50));
        }
        let (preempted, stolen) = (p.stop(), s.stop());
        assert!(
            preempted.switches <= nonvoluntary() - switches,
            "{preempted:?}"
        );
        assert!(
            preempted.waited_ns <= schedstat_field(1) - waited,
            "{preempted:?}"
        );
        assert!(
            (0.0..=stat_steal_ms() - steal).contains(&stolen),
            "{stolen}"
        );
    }

    #[test]
    fn a_thread_sharing_its_core_is_preempted() {
        // Two busy threads pinned to one core: the scheduler must take the
        // core from each in turn, so the measured one is preempted and
        // waits for its core. Run until a span shows both, within a
        // deadline far beyond any time slice.
        let core = *crate::cores::usable_cores()
            .first()
            .expect("this process's cores can be listed");
        let stop = AtomicBool::new(false);
        let (preempted, ran) = std::thread::scope(|s| {
            let rival = s.spawn(|| {
                assert!(crate::cores::pin_current(core), "pinned to {core}");
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            let measured = s.spawn(|| {
                let pinned = crate::cores::pin_current(core);
                let begin = Instant::now();
                let counter = PreemptionCounter::start();
                let deadline = begin + Duration::from_secs(20);
                let mut preempted = counter.stop();
                while pinned
                    && (preempted.switches == 0 || preempted.waited_ns == 0)
                    && Instant::now() < deadline
                {
                    for _ in 0..10_000 {
                        std::hint::spin_loop();
                    }
                    preempted = counter.stop();
                }
                assert!(pinned, "pinned to {core}");
                (preempted, begin.elapsed())
            });
            let measured = measured.join();
            stop.store(true, Ordering::Relaxed);
            rival.join().unwrap();
            measured.unwrap()
        });
        assert!(preempted.switches > 0, "{preempted:?} in {ran:?}");
        assert!(preempted.waited_ns > 0, "{preempted:?} in {ran:?}");
        // The wait fell within the span.
        assert!(
            preempted.waited_ns <= ran.as_nanos() as u64,
            "{preempted:?} in {ran:?}"
        );
    }

    #[test]
    fn other_threads_are_found_by_name() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("contention-unit-test-thread".into())
            .spawn(move || rx.recv())
            .unwrap();
        // The new thread sets its own name: wait (bounded) until /proc shows it.
        let start = std::time::Instant::now();
        let mut tids = threads_named("contention-unit-test-thread");
        while tids.is_empty() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
            tids = threads_named("contention-unit-test-thread");
        }
        assert_eq!(tids.len(), 1, "the name is matched on its first 15 bytes");
        let c = ThreadPreemptionCounter::start(tids[0]);
        assert!(thread_preemption(tids[0]).is_some());
        let _ = c.stop();
        tx.send(()).unwrap();
        t.join().unwrap().unwrap();
        // The kernel releases an exited thread's /proc entry shortly after
        // the join returns: wait (bounded) for it to go.
        let start = std::time::Instant::now();
        while thread_preemption(tids[0]).is_some() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(thread_preemption(tids[0]).is_none(), "gone after join");
    }

    #[test]
    fn significance_is_a_share_of_elapsed_time() {
        let second = Duration::from_secs(1);
        assert!(!is_significant(0, 0, 0.0, second, 1));
        assert!(
            !is_significant(30, 2_000_000, 0.0, second, 1),
            "2 ms of 1 s"
        );
        assert!(
            is_significant(30, 20_000_000, 0.0, second, 1),
            "20 ms of 1 s"
        );
        assert!(
            !is_significant(30, 15_000_000, 0.0, second, 2),
            "15 ms of 2 x 1 s"
        );
        assert!(is_significant(0, 0, 25.0, second, 2), "25 ms steal");
        assert!(
            is_significant(1, 0, 0.0, second, 1),
            "switches, wait unknown"
        );
    }
}
