//! Zero-loss throughput search (RFC 2544 §26.1), as a pure algorithm over
//! any [`Trial`]: the generator running against a device, or a simulation.
//!
//! For each frame size: warm up, then try the maximum rate; after that,
//! binary search: a trial with any loss sets `upper = rate`, a trial without
//! loss sets `lower = rate`, and the next rate is the midpoint. A trial in
//! which the generator could not offer the rate ([`TrialOutcome::underrun`])
//! counts as one with loss: it measured nothing at that rate. The search
//! stops when `upper - lower` is at most the precision. Defaults are the
//! Ensō paper's: 0.1 Gb/s precision, 1 s trials, 5 s warm-up (RFC 2544 asks
//! for 60 s trials and a 2 s drain, which the trial itself owns).
//!
//! The reported rate is always one at which a trial was actually run and
//! lost nothing, or none (`null` in JSON) if no trial passed: `lower` only
//! ever takes such rates. A noisy device therefore yields a rate it really
//! sustained once; set [`SearchConfig::repeats`] to demand that a rate pass
//! several trials.
//!
//! A trial that fails to run (or is interrupted) ends the search with
//! [`SearchError::Trial`], which carries what was found until then: the
//! sizes that finished and the trials of the one in progress
//! ([`SizeResult::finished`] false).
//!
//! Rates are Ethernet throughput in Gb/s (24 B per frame on top of the frame
//! bytes); sizes are frame sizes with FCS, as in RFC 2544.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::serde_util::duration_ns;
use crate::traffic::{MAX_SIZE, MIN_SIZE};

/// Frame sizes of RFC 2544 (the Ensō paper used all but 1280).
pub const RFC2544_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// What a trial measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialOutcome {
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// The generator could not offer the load: it sent clearly fewer
    /// frames than the rate and duration call for. Such a trial says
    /// nothing about the device at that rate and does not pass, lossless
    /// or not.
    #[serde(default)]
    pub underrun: bool,
}

impl TrialOutcome {
    /// Frames sent and not received.
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    /// Frames were sent and exactly those came back. Sending nothing, or
    /// receiving more than was sent (duplicates, foreign frames), does not
    /// count as a lossless trial.
    pub fn lossless(&self) -> bool {
        self.sent > 0 && self.received == self.sent
    }

    /// Lossless at the load asked for: what moves the search up.
    pub fn passed(&self) -> bool {
        self.lossless() && !self.underrun
    }
}

/// One trial to run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialSpec {
    /// Frame size with FCS; `None` when the traffic has its own sizes (a
    /// pcap replay).
    pub size: Option<usize>,
    /// Offered load, Gb/s of Ethernet throughput.
    pub rate_gbps: f64,
    /// How long to send.
    #[serde(rename = "duration_ns", with = "duration_ns")]
    pub duration: Duration,
}

/// Something that can offer a load for a while and count what came back.
pub trait Trial {
    /// Why a trial could not be run (not loss: that is an outcome).
    type Error;

    /// Sends at `spec.rate_gbps` for `spec.duration`, waits for what is in
    /// flight to drain, and counts frames sent and received.
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Self::Error>;

    /// Unmeasured traffic before the trials of a size. By default a trial
    /// whose outcome is ignored.
    fn warm_up(&mut self, spec: &TrialSpec) -> Result<(), Self::Error> {
        self.run(spec).map(|_| ())
    }
}

/// How to search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    /// Upper end of the search, Gb/s.
    pub max_rate_gbps: f64,
    /// Stop when the interval is at most this wide, Gb/s.
    pub precision_gbps: f64,
    /// Length of each trial.
    #[serde(rename = "trial_ns", with = "duration_ns")]
    pub trial: Duration,
    /// Warm-up before each size's trials; zero for none.
    #[serde(rename = "warmup_ns", with = "duration_ns")]
    pub warmup: Duration,
    /// Rate of the warm-up; `None` for the maximum rate.
    pub warmup_rate_gbps: Option<f64>,
    /// Frame sizes to search, with FCS; empty for one search with the
    /// traffic's own sizes.
    pub sizes: Vec<usize>,
    /// Trials per rate; the rate is lossless only if all of them are.
    pub repeats: u32,
    /// Most rates tried per size before giving up (the result is then the
    /// best lossless rate so far, marked not converged).
    pub max_rates: u32,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            max_rate_gbps: crate::rate::LINE_RATE_GBPS,
            precision_gbps: 0.1,
            trial: Duration::from_secs(1),
            warmup: Duration::from_secs(5),
            warmup_rate_gbps: None,
            sizes: RFC2544_SIZES.to_vec(),
            repeats: 1,
            max_rates: 64,
        }
    }
}

/// A search configuration that makes no sense.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SearchConfigError {
    /// Maximum rate not positive and finite.
    #[error("maximum rate must be a positive number of Gb/s, not {0}")]
    MaxRate(f64),
    /// Precision not positive and finite.
    #[error("precision must be a positive number of Gb/s, not {0}")]
    Precision(f64),
    /// Warm-up rate not positive and finite.
    #[error("warm-up rate must be a positive number of Gb/s, not {0}")]
    WarmupRate(f64),
    /// Zero-length trials.
    #[error("trial duration must be above zero")]
    TrialDuration,
    /// A frame size outside 64..=1540.
    #[error("frame size {0} is outside {MIN_SIZE}..={MAX_SIZE}")]
    Size(usize),
    /// `repeats` or `max_rates` is zero.
    #[error("repeats and max rates must be at least 1")]
    Zero,
}

impl SearchConfig {
    /// Checks the configuration.
    pub fn validate(&self) -> Result<(), SearchConfigError> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !ok(self.max_rate_gbps) {
            return Err(SearchConfigError::MaxRate(self.max_rate_gbps));
        }
        if !ok(self.precision_gbps) {
            return Err(SearchConfigError::Precision(self.precision_gbps));
        }
        if let Some(r) = self.warmup_rate_gbps.filter(|r| !ok(*r)) {
            return Err(SearchConfigError::WarmupRate(r));
        }
        if self.trial.is_zero() {
            return Err(SearchConfigError::TrialDuration);
        }
        if let Some(&s) = self
            .sizes
            .iter()
            .find(|s| !(MIN_SIZE..=MAX_SIZE).contains(*s))
        {
            return Err(SearchConfigError::Size(s));
        }
        if self.repeats == 0 || self.max_rates == 0 {
            return Err(SearchConfigError::Zero);
        }
        Ok(())
    }
}

/// A search that could not finish.
#[derive(Debug, thiserror::Error)]
pub enum SearchError<E> {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] SearchConfigError),
    /// A trial failed to run.
    #[error("trial failed: {error}")]
    Trial {
        /// Why.
        error: E,
        /// What the search found until then: every size that finished,
        /// then the one in progress with its trials so far (not
        /// [`SizeResult::finished`]).
        partial: Box<SearchResult>,
    },
}

/// One trial that was run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// What was asked.
    #[serde(flatten)]
    pub spec: TrialSpec,
    /// What was measured.
    #[serde(flatten)]
    pub outcome: TrialOutcome,
    /// Whether this trial lost nothing.
    pub lossless: bool,
    /// Whether it lost nothing at the load asked for (see
    /// [`TrialOutcome::passed`]).
    #[serde(default)]
    pub passed: bool,
}

/// The result for one frame size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    /// Frame size with FCS (`None`: the traffic's own sizes).
    pub size: Option<usize>,
    /// Highest rate at which a trial passed (lost nothing at the load
    /// asked for), Gb/s; `None` (`null`) if no trial passed.
    pub rate_gbps: Option<f64>,
    /// The same in Mpps (for a fixed size and a rate found only).
    pub rate_mpps: Option<f64>,
    /// Whether a rate was found and the search narrowed the interval
    /// between it and the lowest rate that lost to the precision. False
    /// when no trial passed, when `max_rates` ran out first, and when the
    /// search of this size did not finish.
    pub converged: bool,
    /// Whether the search of this size ran to its end; false when a trial
    /// failed or the search was interrupted (its rate is then the best
    /// found so far).
    #[serde(default = "yes")]
    pub finished: bool,
    /// Every trial, in order (warm-ups not included).
    pub trials: Vec<TrialRecord>,
}

fn yes() -> bool {
    true
}

impl SizeResult {
    /// The lowest rate a trial ran at, Gb/s.
    pub fn lowest_tried_gbps(&self) -> Option<f64> {
        self.trials
            .iter()
            .map(|t| t.spec.rate_gbps)
            .reduce(f64::min)
    }
}

/// The result of a whole search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The configuration used.
    pub config: SearchConfig,
    /// One result per size, in the configured order (after an error or an
    /// interruption: the sizes searched until then).
    pub sizes: Vec<SizeResult>,
    /// The search was stopped from outside (Ctrl-C) before it ended.
    #[serde(default)]
    pub interrupted: bool,
}

/// Runs the search.
pub fn search<T: Trial>(
    cfg: &SearchConfig,
    trial: &mut T,
) -> Result<SearchResult, SearchError<T::Error>> {
    search_with_progress(cfg, trial, |_| {})
}

/// Runs the search, calling `progress` after every trial.
pub fn search_with_progress<T: Trial>(
    cfg: &SearchConfig,
    trial: &mut T,
    mut progress: impl FnMut(&TrialRecord),
) -> Result<SearchResult, SearchError<T::Error>> {
    cfg.validate()?;
    let sizes: Vec<Option<usize>> = if cfg.sizes.is_empty() {
        vec![None]
    } else {
        cfg.sizes.iter().copied().map(Some).collect()
    };
    let mut out = SearchResult {
        config: cfg.clone(),
        sizes: Vec::with_capacity(sizes.len()),
        interrupted: false,
    };
    for size in sizes {
        let (r, failed) = search_size(cfg, trial, size, &mut progress);
        out.sizes.push(r);
        if let Some(error) = failed {
            return Err(SearchError::Trial {
                error,
                partial: Box::new(out),
            });
        }
    }
    Ok(out)
}

/// Searches one size; on a failed trial, returns what was found so far
/// (not finished) and the error.
fn search_size<T: Trial>(
    cfg: &SearchConfig,
    trial: &mut T,
    size: Option<usize>,
    progress: &mut impl FnMut(&TrialRecord),
) -> (SizeResult, Option<T::Error>) {
    // Invariant: `lower` is 0 (none found) or a rate at which every trial
    // passed (lost nothing at the load asked for);
    // `upper` is the maximum or a rate at which a trial lost frames.
    let (mut lower, mut upper) = (0.0f64, cfg.max_rate_gbps);
    let mut trials = Vec::new();
    let mut converged = false;
    let mut failed = None;
    let result = |lower: f64, converged, trials, finished| {
        let rate = (lower > 0.0).then_some(lower);
        SizeResult {
            size,
            rate_gbps: rate,
            rate_mpps: rate
                .zip(size)
                .map(|(r, s)| r * 1e3 / ((s + crate::rate::WIRE_GAP) as f64 * 8.0)),
            converged: converged && rate.is_some(),
            finished,
            trials,
        }
    };
    if !cfg.warmup.is_zero() {
        let spec = TrialSpec {
            size,
            rate_gbps: cfg.warmup_rate_gbps.unwrap_or(cfg.max_rate_gbps),
            duration: cfg.warmup,
        };
        if let Err(e) = trial.warm_up(&spec) {
            return (result(lower, false, trials, false), Some(e));
        }
    }
    let mut rate = cfg.max_rate_gbps;
    'rates: for _ in 0..cfg.max_rates {
        let spec = TrialSpec {
            size,
            rate_gbps: rate,
            duration: cfg.trial,
        };
        let mut lossless = true;
        for _ in 0..cfg.repeats {
            let outcome = match trial.run(&spec) {
                Ok(o) => o,
                Err(e) => {
                    failed = Some(e);
                    break 'rates;
                }
            };
            let rec = TrialRecord {
                spec,
                outcome,
                lossless: outcome.lossless(),
                passed: outcome.passed(),
            };
            progress(&rec);
            trials.push(rec);
            if !rec.passed {
                lossless = false;
                break;
            }
        }
        if lossless {
            lower = rate;
        } else {
            upper = rate;
        }
        if upper - lower <= cfg.precision_gbps {
            converged = true;
            break;
        }
        rate = (lower + upper) / 2.0;
    }
    let finished = failed.is_none();
    (result(lower, converged, trials, finished), failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Frames a trial offers: 1000 per Gb/s per second, at least one.
    fn offered(spec: &TrialSpec) -> u64 {
        ((spec.rate_gbps * 1000.0 * spec.duration.as_secs_f64()) as u64).max(1)
    }

    /// Lossless up to `capacity` Gb/s; above it, only `capacity/rate` of
    /// the frames get through.
    struct Device {
        capacity: f64,
        runs: Vec<TrialSpec>,
        warmups: Vec<TrialSpec>,
    }

    impl Device {
        fn new(capacity: f64) -> Self {
            Self {
                capacity,
                runs: Vec::new(),
                warmups: Vec::new(),
            }
        }
    }

    impl Trial for Device {
        type Error = std::convert::Infallible;
        fn run(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Self::Error> {
            self.runs.push(*spec);
            let sent = offered(spec);
            let received = if spec.rate_gbps <= self.capacity {
                sent
            } else {
                (sent as f64 * self.capacity / spec.rate_gbps) as u64
            };
            Ok(TrialOutcome {
                sent,
                received,
                ..TrialOutcome::default()
            })
        }
        fn warm_up(&mut self, spec: &TrialSpec) -> Result<(), Self::Error> {
            self.warmups.push(*spec);
            Ok(())
        }
    }

    /// Always loses above `capacity`, and loses one frame with probability
    /// `p` within `band` below it.
    struct Noisy {
        capacity: f64,
        band: f64,
        p: f64,
        rng: Xoshiro256PlusPlus,
    }

    impl Trial for Noisy {
        type Error = std::convert::Infallible;
        fn run(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Self::Error> {
            let sent = offered(spec);
            let lossy = spec.rate_gbps > self.capacity
                || (spec.rate_gbps > self.capacity - self.band && self.rng.gen_bool(self.p));
            Ok(TrialOutcome {
                sent,
                received: sent - u64::from(lossy),
                ..TrialOutcome::default()
            })
        }
    }

    fn quick() -> SearchConfig {
        SearchConfig {
            warmup: Duration::ZERO,
            sizes: vec![64],
            ..SearchConfig::default()
        }
    }

    /// The reported rate is none or a rate some trial ran at without loss.
    fn measured_lossless(r: &SizeResult) -> bool {
        r.rate_gbps.is_none_or(|rate| {
            r.trials
                .iter()
                .any(|t| t.spec.rate_gbps == rate && t.lossless)
        })
    }

    #[test]
    fn converges_to_the_capacity_within_the_precision() {
        let cfg = quick();
        for capacity in [0.35, 1.0, 12.5, 37.31, 64.0, 99.95] {
            let mut dev = Device::new(capacity);
            let r = search(&cfg, &mut dev).unwrap();
            let s = &r.sizes[0];
            assert!(s.converged && s.finished);
            let rate = s.rate_gbps.unwrap();
            assert!(rate <= capacity, "{capacity}: {rate}");
            assert!(capacity - rate <= cfg.precision_gbps, "{capacity}: {rate}");
            assert!(measured_lossless(s));
            // Binary search from 100 Gb/s to 0.1 Gb/s: about log2(1000) trials.
            assert!(s.trials.len() <= 12, "{}", s.trials.len());
            assert_eq!(s.trials[0].spec.rate_gbps, 100.0);
            assert!(s.trials.iter().all(|t| t.spec.duration == cfg.trial));
        }
    }

    #[test]
    fn a_device_faster_than_the_maximum_needs_one_trial() {
        let mut dev = Device::new(150.0);
        let r = search(&quick(), &mut dev).unwrap();
        assert_eq!(r.sizes[0].rate_gbps, Some(100.0));
        assert_eq!(r.sizes[0].trials.len(), 1);
        // 64 B frames at 100 Gb/s are 148.81 Mpps.
        assert!((r.sizes[0].rate_mpps.unwrap() - 148.8095).abs() < 1e-3);
    }

    #[test]
    fn a_device_slower_than_the_precision_reports_no_rate() {
        let mut dev = Device::new(0.05);
        let r = search(&quick(), &mut dev).unwrap();
        let s = &r.sizes[0];
        // No trial passed: no rate (not 0 Gb/s), and not converged on one.
        assert_eq!((s.rate_gbps, s.rate_mpps), (None, None));
        assert!(!s.converged && s.finished);
        assert!(s.trials.iter().all(|t| !t.lossless));
        // 100, 50, 25, ... down to the first rate within the precision.
        assert_eq!(s.lowest_tried_gbps(), Some(100.0 / 1024.0));
        let j = serde_json::to_value(s).unwrap();
        assert!(j["rate_gbps"].is_null() && j["rate_mpps"].is_null(), "{j}");
        assert_eq!(j["converged"], false);
        assert_eq!(serde_json::from_value::<SizeResult>(j).unwrap(), *s);
    }

    #[test]
    fn noisy_device_never_yields_a_lossy_rate() {
        let cfg = quick();
        for seed in 0..200 {
            let mut dev = Noisy {
                capacity: 42.0,
                band: 2.0,
                p: 0.4,
                rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            };
            let s = search(&cfg, &mut dev).unwrap().sizes.remove(0);
            assert!(s.converged);
            let rate = s.rate_gbps.unwrap();
            assert!(rate <= 42.0);
            assert!(measured_lossless(&s), "seed {seed}");
            // Loss only starts 2 Gb/s below the capacity.
            assert!(
                rate >= 42.0 - 2.0 - cfg.precision_gbps,
                "seed {seed}: {rate}"
            );
        }
        // A device that loses at random at any rate: still only measured rates.
        for seed in 0..100 {
            let mut dev = Noisy {
                capacity: 1000.0,
                band: 1000.0,
                p: 0.5,
                rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            };
            let s = search(&cfg, &mut dev).unwrap().sizes.remove(0);
            assert!(measured_lossless(&s), "seed {seed}");
        }
    }

    #[test]
    fn repeats_demand_every_trial_at_a_rate_to_pass() {
        // Loses on every second trial it runs below 50 Gb/s... and above.
        struct Flaky(u32);
        impl Trial for Flaky {
            type Error = std::convert::Infallible;
            fn run(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Self::Error> {
                self.0 += 1;
                let sent = offered(spec);
                let lossy = spec.rate_gbps > 50.0 || self.0.is_multiple_of(2);
                Ok(TrialOutcome {
                    sent,
                    received: sent - u64::from(lossy),
                    ..TrialOutcome::default()
                })
            }
        }
        let cfg = SearchConfig {
            repeats: 2,
            ..quick()
        };
        let s = search(&cfg, &mut Flaky(0)).unwrap().sizes.remove(0);
        // No rate ever passes two trials in a row.
        assert_eq!(s.rate_gbps, None);
        let s = search(&quick(), &mut Flaky(0)).unwrap().sizes.remove(0);
        assert!(s.rate_gbps.is_some() && measured_lossless(&s));
    }

    #[test]
    fn warms_up_once_per_size_and_passes_sizes_through() {
        let cfg = SearchConfig {
            sizes: vec![64, 1518],
            warmup: Duration::from_secs(5),
            warmup_rate_gbps: Some(10.0),
            trial: Duration::from_millis(250),
            ..SearchConfig::default()
        };
        let mut dev = Device::new(70.0);
        let r = search(&cfg, &mut dev).unwrap();
        assert_eq!(r.sizes.len(), 2);
        assert_eq!(
            dev.warmups,
            vec![
                TrialSpec {
                    size: Some(64),
                    rate_gbps: 10.0,
                    duration: Duration::from_secs(5)
                },
                TrialSpec {
                    size: Some(1518),
                    rate_gbps: 10.0,
                    duration: Duration::from_secs(5)
                }
            ]
        );
        let n64 = r.sizes[0].trials.len();
        assert!(dev.runs[..n64].iter().all(|t| t.size == Some(64)));
        assert!(dev.runs[n64..].iter().all(|t| t.size == Some(1518)));
        assert!(dev
            .runs
            .iter()
            .all(|t| t.duration == Duration::from_millis(250)));
        // No sizes: one search with the traffic's own.
        let cfg = SearchConfig {
            sizes: vec![],
            ..quick()
        };
        let r = search(&cfg, &mut Device::new(70.0)).unwrap();
        assert_eq!(r.sizes.len(), 1);
        assert_eq!((r.sizes[0].size, r.sizes[0].rate_mpps), (None, None));
    }

    #[test]
    fn trials_that_cannot_offer_the_rate_do_not_pass() {
        // No loss at any rate, but the generator offers at most 30 Gb/s.
        struct Slow;
        impl Trial for Slow {
            type Error = std::convert::Infallible;
            fn run(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Self::Error> {
                let sent = offered(&TrialSpec {
                    rate_gbps: spec.rate_gbps.min(30.0),
                    ..*spec
                });
                Ok(TrialOutcome {
                    sent,
                    received: sent,
                    underrun: spec.rate_gbps > 30.0,
                })
            }
        }
        let r = search(&quick(), &mut Slow).unwrap();
        let s = &r.sizes[0];
        let rate = s.rate_gbps.unwrap();
        assert!(rate <= 30.0 && rate > 29.9, "{rate}");
        let first = s.trials[0];
        assert!(first.lossless && !first.passed && first.outcome.underrun);
        assert!(s
            .trials
            .iter()
            .any(|t| t.spec.rate_gbps == rate && t.passed));
        let j = serde_json::to_value(first).unwrap();
        assert_eq!(
            (j["underrun"].clone(), j["passed"].clone()),
            (true.into(), false.into())
        );
    }

    #[test]
    fn sending_nothing_is_not_lossless_and_errors_propagate() {
        assert!(!TrialOutcome {
            sent: 0,
            received: 0,
            ..TrialOutcome::default()
        }
        .lossless());
        assert!(!TrialOutcome {
            sent: 5,
            received: 6,
            ..TrialOutcome::default()
        }
        .lossless());
        assert_eq!(
            TrialOutcome {
                sent: 5,
                received: 3,
                ..TrialOutcome::default()
            }
            .lost(),
            2
        );
        struct Broken;
        impl Trial for Broken {
            type Error = &'static str;
            fn run(&mut self, _: &TrialSpec) -> Result<TrialOutcome, &'static str> {
                Err("device gone")
            }
        }
        let e = search(&quick(), &mut Broken).unwrap_err();
        assert_eq!(e.to_string(), "trial failed: device gone");
        // The progress callback sees every trial.
        let mut seen = 0;
        let r = search_with_progress(&quick(), &mut Device::new(20.0), |_| seen += 1).unwrap();
        assert_eq!(seen, r.sizes[0].trials.len());
        // Giving up early keeps the best rate so far.
        let cfg = SearchConfig {
            max_rates: 3,
            ..quick()
        };
        let s = search(&cfg, &mut Device::new(60.0))
            .unwrap()
            .sizes
            .remove(0);
        assert!(!s.converged);
        assert_eq!(s.trials.len(), 3);
        // 100 lost, 50 did not, 75 lost.
        assert_eq!(s.rate_gbps, Some(50.0));
    }

    #[test]
    fn a_failed_trial_keeps_what_was_found() {
        // Lossless up to 60 Gb/s; the 15th trial run fails.
        struct Stops(Device, usize);
        impl Trial for Stops {
            type Error = &'static str;
            fn run(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, &'static str> {
                if self.0.runs.len() + 1 == self.1 {
                    return Err("interrupted");
                }
                Ok(self.0.run(spec).unwrap_or_else(|e| match e {}))
            }
        }
        let cfg = SearchConfig {
            sizes: vec![64, 512, 1518],
            ..quick()
        };
        let whole = search(&cfg, &mut Device::new(60.0)).unwrap();
        let first = whole.sizes[0].trials.len();
        let mut t = Stops(Device::new(60.0), first + 3);
        let Err(SearchError::Trial { error, partial }) = search(&cfg, &mut t) else {
            panic!("the search did not stop");
        };
        assert_eq!(error, "interrupted");
        assert!(!partial.interrupted, "only the caller knows why");
        // The first size finished as it would have; the second has the
        // trials that ran, its best rate so far, and is marked unfinished.
        assert_eq!(partial.sizes.len(), 2);
        assert_eq!(partial.sizes[0], whole.sizes[0]);
        let s = &partial.sizes[1];
        assert!(!s.finished && !s.converged);
        assert_eq!(s.trials, whole.sizes[1].trials[..2]);
        // 100 lost, 50 passed.
        assert_eq!(s.rate_gbps, Some(50.0));
        let j = serde_json::to_value(&*partial).unwrap();
        assert_eq!(j["sizes"][1]["finished"], false);
        assert_eq!(serde_json::from_value::<SearchResult>(j).unwrap(), *partial);

        // A failure in a warm-up: the size is there with no trials.
        struct NoWarmUp;
        impl Trial for NoWarmUp {
            type Error = ();
            fn run(&mut self, _: &TrialSpec) -> Result<TrialOutcome, ()> {
                Err(())
            }
        }
        let cfg = SearchConfig {
            warmup: Duration::from_secs(1),
            ..quick()
        };
        let Err(SearchError::Trial { partial, .. }) = search(&cfg, &mut NoWarmUp) else {
            panic!("the search did not stop");
        };
        assert_eq!(partial.sizes.len(), 1);
        assert!(partial.sizes[0].trials.is_empty() && !partial.sizes[0].finished);
        assert_eq!(partial.sizes[0].rate_gbps, None);
    }

    #[test]
    fn bad_configs_are_refused() {
        let bad = [
            SearchConfig {
                precision_gbps: 0.0,
                ..quick()
            },
            SearchConfig {
                max_rate_gbps: f64::NAN,
                ..quick()
            },
            SearchConfig {
                trial: Duration::ZERO,
                ..quick()
            },
            SearchConfig {
                sizes: vec![64, 20],
                ..quick()
            },
            SearchConfig {
                repeats: 0,
                ..quick()
            },
            SearchConfig {
                warmup_rate_gbps: Some(-1.0),
                ..quick()
            },
        ];
        for cfg in bad {
            assert!(matches!(
                search(&cfg, &mut Device::new(1.0)),
                Err(SearchError::Config(_))
            ));
        }
        let j = serde_json::to_value(SearchConfig::default()).unwrap();
        assert_eq!(j["trial_ns"], 1_000_000_000u64);
        assert_eq!(j["sizes"][5], 1280);
    }
}
