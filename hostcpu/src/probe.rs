//! Cross-core cache-line round-trip probe.
//!
//! Two threads, pinned to the two cores of a [`Placement`], bounce a counter
//! in one 128 B-aligned cache line: side A writes an odd value, side B answers
//! with the next even value, and A times batches of such round trips. The
//! median round trip tells which physical placement the host gave the two
//! vCPUs right now (same core complex or not), which moves absolute rates by
//! up to 4x; every result prints it. A probe takes a few tens of milliseconds
//! and is meant to run before (and after) every trial.
//!
//! Both cores must be otherwise idle while the probe runs: a variant that
//! keeps a spinning thread on either core between trials makes the probe
//! measure the scheduler instead.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::contention::{self, Preemption, PreemptionCounter};
use super::placement::{Placement, Side};
use super::stats;
use super::wait::Spin;

/// A probe of 30 ms: enough for about a hundred thousand round trips.
pub const DEFAULT_DURATION: Duration = Duration::from_millis(30);

/// Round trips timed together as one sample (amortises the clock read).
const BATCH: u64 = 64;
/// Samples taken before this much time has passed (or a quarter of the
/// probe, if shorter) are discarded as warm-up.
const WARMUP: Duration = Duration::from_millis(2);
/// Tells side B to stop; never a value of the ping-pong itself.
const STOP: u64 = u64::MAX;

/// What one probe measured.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Probe {
    /// Median cross-core round trip of one cache line, in nanoseconds.
    #[serde(rename = "probe_rtt_ns")]
    pub rtt_ns: f64,
    /// 10th percentile of the per-sample round trip, ns.
    pub p10_ns: f64,
    /// 90th percentile of the per-sample round trip, ns.
    pub p90_ns: f64,
    /// Samples (each the mean of a batch of round trips) behind the median.
    pub samples: usize,
    /// Round trips performed in total.
    pub round_trips: u64,
    /// `[core A, core B]` the two threads were placed on.
    pub cores: [Option<usize>; 2],
    /// Whether both threads were pinned to distinct cores.
    pub two_cores: bool,
    /// How much the two probe threads were kept off their cores: when
    /// significant, another thread shared a core and the round trip is not
    /// the placement's alone.
    pub preempted: Preemption,
    /// Wall-clock time the probe took.
    #[serde(rename = "duration_ns", with = "super::duration_ns")]
    pub duration: Duration,
}

impl Probe {
    /// Whether other work took a significant share of the probe's time.
    pub fn contended(&self) -> bool {
        contention::is_significant(
            self.preempted.switches,
            self.preempted.waited_ns,
            0.0,
            self.duration,
            2,
        )
    }
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = |c: Option<usize>| c.map_or_else(|| "-".to_string(), |c| c.to_string());
        write!(
            f,
            "probe: cores {},{} cache-line round trip {:.0} ns (p10 {:.0}, p90 {:.0}, {} samples)",
            c(self.cores[0]),
            c(self.cores[1]),
            self.rtt_ns,
            self.p10_ns,
            self.p90_ns,
            self.samples
        )?;
        if !self.two_cores {
            write!(f, " [not two distinct pinned cores]")?;
        }
        if self.contended() {
            write!(
                f,
                " [cores shared: preempted {} times, {:.1} ms]",
                self.preempted.switches,
                self.preempted.waited_ns as f64 / 1e6
            )?;
        }
        Ok(())
    }
}

/// Where the host had put the two vCPUs, from the cross-core probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacementClass {
    /// Hyperthreads of one core (probe below [`SIBLINGS_BELOW_NS`]).
    Siblings,
    /// Cores of one complex, sharing a last-level cache.
    Close,
    /// Cores in different complexes (probe at least [`APART_FROM_NS`]).
    Apart,
    /// The probes before and after the pair disagreed: the host moved the
    /// vCPUs during it.
    Mixed,
}

/// Probe round trips below this: sibling hyperthreads (~40-60 ns on the development machine).
pub const SIBLINGS_BELOW_NS: f64 = 60.0;
/// Probe round trips from this on: different core complexes (~350-400 ns
/// on the development machine, against ~60-90 within one).
pub const APART_FROM_NS: f64 = 200.0;

impl PlacementClass {
    /// The placement a probe round trip of `rtt_ns` indicates.
    pub fn of(rtt_ns: f64) -> Self {
        if rtt_ns < SIBLINGS_BELOW_NS {
            PlacementClass::Siblings
        } else if rtt_ns < APART_FROM_NS {
            PlacementClass::Close
        } else {
            PlacementClass::Apart
        }
    }

    /// The placement of a pair of trials between two probes.
    pub fn between(before_ns: f64, after_ns: f64) -> Self {
        let (a, b) = (Self::of(before_ns), Self::of(after_ns));
        if a == b {
            a
        } else {
            PlacementClass::Mixed
        }
    }

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            PlacementClass::Siblings => "siblings",
            PlacementClass::Close => "close",
            PlacementClass::Apart => "apart",
            PlacementClass::Mixed => "mixed",
        }
    }
}

impl Probe {
    /// The placement this probe's median round trip indicates.
    pub fn class(&self) -> PlacementClass {
        PlacementClass::of(self.rtt_ns)
    }
}

/// One cache line, alone in a 128 B block (the adjacent-line prefetcher
/// pulls pairs of lines on x86_64).
#[repr(C, align(128))]
struct Line(AtomicU64);

/// Runs the probe for about `duration` on `placement`'s two cores.
pub fn measure(placement: &Placement, duration: Duration) -> Probe {
    let began = Instant::now();
    let line = Arc::new(Line(AtomicU64::new(0)));
    let start = Arc::new(Barrier::new(2));

    let b_line = Arc::clone(&line);
    let b_start = Arc::clone(&start);
    let ponger = placement
        .spawn(Side::B, "probe-b", move |pinned| {
            b_start.wait();
            let preempted = PreemptionCounter::start();
            let mut spin = Spin::default();
            let mut seen = 0u64;
            loop {
                // SYNC POINT: Acquire pairs with side A's Release store of
                // an odd value (or STOP).
                let v = b_line.0.load(Ordering::Acquire);
                if v == STOP {
                    return (pinned, preempted.stop());
                }
                if v != seen && v % 2 == 1 {
                    seen = v + 1;
                    // SYNC POINT: Release pairs with side A's Acquire load
                    // waiting for the even answer.
                    b_line.0.store(seen, Ordering::Release);
                    spin.reset();
                } else {
                    spin.poll();
                }
            }
        })
        .expect("spawn probe thread");

    let a_line = Arc::clone(&line);
    let pinger = placement
        .spawn(Side::A, "probe-a", move |pinned| {
            start.wait();
            let preempted = PreemptionCounter::start();
            let begin = Instant::now();
            let deadline = begin + duration;
            let warmup = WARMUP.min(duration / 4);
            let mut samples = Vec::with_capacity(4096);
            let mut value = 1u64;
            let mut round_trips = 0u64;
            let mut spin = Spin::default();
            loop {
                let t0 = Instant::now();
                for _ in 0..BATCH {
                    // SYNC POINT: Release pairs with side B's Acquire load.
                    a_line.0.store(value, Ordering::Release);
                    // SYNC POINT: Acquire pairs with side B's Release store
                    // of `value + 1`.
                    while a_line.0.load(Ordering::Acquire) != value + 1 {
                        spin.poll();
                    }
                    spin.reset();
                    value += 2;
                }
                let t1 = Instant::now();
                round_trips += BATCH;
                if t0.duration_since(begin) >= warmup {
                    samples.push((t1 - t0).as_nanos() as f64 / BATCH as f64);
                }
                if t1 >= deadline {
                    break;
                }
            }
            // SYNC POINT: Release pairs with side B's Acquire load; B exits.
            a_line.0.store(STOP, Ordering::Release);
            (pinned, samples, round_trips, preempted.stop())
        })
        .expect("spawn probe thread");

    let (a_pinned, samples, round_trips, a_preempted) =
        pinger.join().expect("probe thread panicked");
    let (b_pinned, b_preempted) = ponger.join().expect("probe thread panicked");
    Probe {
        rtt_ns: stats::median(&samples).unwrap_or(f64::NAN),
        p10_ns: stats::quantile(&samples, 0.1).unwrap_or(f64::NAN),
        p90_ns: stats::quantile(&samples, 0.9).unwrap_or(f64::NAN),
        samples: samples.len(),
        round_trips,
        cores: placement.cores(),
        two_cores: a_pinned && b_pinned && placement.is_two_cores(),
        preempted: a_preempted + b_preempted,
        duration: began.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every probe must report, however the scheduler treated it.
    fn check(p: &Probe, placement: &Placement, duration: Duration) {
        // Side A times whole batches and stops at the first batch that ends
        // past the deadline: at least one batch, and never early.
        assert!(p.round_trips >= BATCH, "{p:?}");
        assert_eq!(p.round_trips % BATCH, 0, "{p:?}");
        assert!(p.duration >= duration, "{p:?}");
        // A sample is one batch, minus those of the warm-up.
        assert!(p.samples as u64 <= p.round_trips / BATCH, "{p:?}");
        assert_eq!(p.cores, placement.cores());
        let json = serde_json::to_value(p).unwrap();
        assert_eq!(json["round_trips"], p.round_trips);
        if p.samples == 0 {
            // A probe whose batches all fell in the warm-up (a thread was
            // kept off its core that long) has no round trip to report.
            assert!(p.rtt_ns.is_nan() && p.p10_ns.is_nan() && p.p90_ns.is_nan());
            assert!(json["probe_rtt_ns"].is_null(), "{json}");
        } else {
            assert!(p.rtt_ns.is_finite() && p.rtt_ns > 0.0, "{p:?}");
            assert!(p.p10_ns <= p.rtt_ns && p.rtt_ns <= p.p90_ns, "{p:?}");
            assert_eq!(json["probe_rtt_ns"].as_f64(), Some(p.rtt_ns), "{json}");
        }
    }

    #[test]
    fn probe_reports_samples() {
        // A loaded machine can stall a probe thread past a whole short
        // probe, leaving no sample after the warm-up: probe again until one
        // has samples, within a deadline far beyond any scheduler stall.
        let placement = Placement::pick();
        let duration = Duration::from_millis(10);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let p = measure(&placement, duration);
            check(&p, &placement, duration);
            if p.samples > 0 {
                break;
            }
            assert!(Instant::now() < deadline, "no probe had samples: {p:?}");
        }
    }

    #[test]
    fn probes_classify_placements() {
        assert_eq!(PlacementClass::of(39.0), PlacementClass::Siblings);
        assert_eq!(PlacementClass::of(85.0), PlacementClass::Close);
        assert_eq!(PlacementClass::of(380.0), PlacementClass::Apart);
        assert_eq!(PlacementClass::between(84.0, 90.0), PlacementClass::Close);
        assert_eq!(PlacementClass::between(84.0, 380.0), PlacementClass::Mixed);
        assert_eq!(PlacementClass::between(39.0, 85.0), PlacementClass::Mixed);
    }
}
