//! Interleaved trials: the only comparison that survives a machine whose
//! absolute speed swings by up to 4x.
//!
//! An experiment implements [`Variant`] for each thing it compares (or wraps
//! a closure with [`variant`]). [`Interleave`] runs one short trial of each
//! variant per *round* — A, B, A, B, … — with a cross-core probe before each
//! round, and reports per variant the median rate over rounds and the
//! median over rounds of the per-round ratio to a reference variant. A ratio
//! taken within a round compares two trials measured a few hundred
//! milliseconds apart, on the same placement; the median over rounds then
//! discards the rounds in which the host moved the cores mid-round.
//!
//! Variants must leave both cores idle between trials (no thread spinning),
//! or the probe measures the scheduler instead of the placement.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::frames::{FCS_LEN, WIRE_GAP};
use crate::placement::Placement;
use crate::probe::{self, Probe};
use crate::progress::Progress;
use crate::results::Table;
use crate::stats;

/// `Duration` as integer nanoseconds in JSON.
pub use hostcpu::duration_ns;

/// What one trial of one variant measured.
///
/// `bytes` counts frame bytes as they sit in memory (no FCS); the wire rate
/// adds the FCS, preamble and inter-frame gap (24 B per packet, as EnsōGen
/// counts). Busy time is per named side ("producer", "consumer", "nic",
/// "app", …): the time that side spent doing work rather than waiting.
///
/// `preempted`, `preempted_ns` and `steal_ms` say whether the trial had its
/// cores to itself (see [`crate::contention`]); a trial whose threads (one
/// per side in `busy_ns`) lost more than 1% of their time to other work is
/// reported as contended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    /// Packets delivered (for an echo: packets that came back).
    pub packets: u64,
    /// Frame bytes delivered (no FCS).
    pub bytes: u64,
    /// Wall-clock time the packets took.
    #[serde(rename = "elapsed_ns", with = "duration_ns")]
    pub elapsed: Duration,
    /// Busy nanoseconds per side.
    pub busy_ns: BTreeMap<String, u64>,
    /// Involuntary context switches of the measured threads.
    #[serde(default)]
    pub preempted: u64,
    /// Time the measured threads spent runnable but not running, ns.
    #[serde(default)]
    pub preempted_ns: u64,
    /// Host steal time during the trial, summed over CPUs, ms.
    #[serde(default)]
    pub steal_ms: f64,
    /// Any other counters the variant wants to report (summarised by median).
    pub extra: BTreeMap<String, f64>,
}

impl TrialResult {
    /// Packets per second.
    pub fn pps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.packets as f64 / s
        } else {
            0.0
        }
    }

    /// Millions of packets per second.
    pub fn mpps(&self) -> f64 {
        self.pps() / 1e6
    }

    /// Frame bytes per second as Gb/s (no FCS): EnsōGen's "goodput".
    pub fn goodput_gbps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.bytes as f64 * 8.0 / s / 1e9
        } else {
            0.0
        }
    }

    /// Ethernet line rate this trial would fill, Gb/s: frame bytes plus FCS,
    /// preamble and inter-frame gap (24 B per packet). 64 B packets at
    /// 148.81 Mpps are 100 Gb/s.
    pub fn wire_gbps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            (self.bytes + self.packets * (FCS_LEN + WIRE_GAP) as u64) as f64 * 8.0 / s / 1e9
        } else {
            0.0
        }
    }

    /// CPU cost per packet of `side`: its busy nanoseconds per packet.
    pub fn ns_per_packet(&self, side: &str) -> Option<f64> {
        let busy = *self.busy_ns.get(side)?;
        (self.packets > 0).then(|| busy as f64 / self.packets as f64)
    }

    /// Whether other work took a significant share of the trial's time on
    /// the measured cores ([`crate::contention::is_significant`]).
    pub fn contended(&self) -> bool {
        crate::contention::is_significant(
            self.preempted,
            self.preempted_ns,
            self.steal_ms,
            self.elapsed,
            self.busy_ns.len(),
        )
    }

    /// Fraction of the elapsed time `side` was busy.
    pub fn busy_fraction(&self, side: &str) -> Option<f64> {
        let busy = *self.busy_ns.get(side)?;
        let e = self.elapsed.as_nanos() as f64;
        (e > 0.0).then(|| busy as f64 / e)
    }
}

/// One of the things an experiment compares.
pub trait Variant {
    /// Name shown in results; unique within one interleaved run.
    fn name(&self) -> &str;
    /// Runs one trial of about `duration` and reports it. Must leave both
    /// cores idle when it returns.
    fn run_trial(&mut self, duration: Duration) -> TrialResult;
}

/// A [`Variant`] made from a name and a closure; see [`variant`].
pub struct FnVariant<F> {
    name: String,
    f: F,
}

impl<F> std::fmt::Debug for FnVariant<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnVariant")
            .field("name", &self.name)
            .finish()
    }
}

/// A variant named `name` whose trials call `f`.
pub fn variant<F: FnMut(Duration) -> TrialResult>(name: impl Into<String>, f: F) -> FnVariant<F> {
    FnVariant {
        name: name.into(),
        f,
    }
}

impl<F: FnMut(Duration) -> TrialResult> Variant for FnVariant<F> {
    fn name(&self) -> &str {
        &self.name
    }
    fn run_trial(&mut self, duration: Duration) -> TrialResult {
        (self.f)(duration)
    }
}

/// When an interleaved run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// After this many measured rounds (warm-up rounds not counted).
    Rounds(usize),
    /// Once this much time has passed (at least one measured round).
    #[serde(with = "duration_ns")]
    Total(Duration),
}

/// In which order the variants run within a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// A, B, C every round.
    Fixed,
    /// Round r starts at variant r mod n (A B, B A, …): a variant does not
    /// always run first, which cancels a steady drift within rounds.
    Rotate,
}

/// How to interleave: trial length, when to stop, warm-up, probe, order,
/// and which variant the ratios are taken against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interleave {
    /// Length of one trial.
    #[serde(rename = "trial_ns", with = "duration_ns")]
    pub trial: Duration,
    /// When to stop.
    pub stop: Stop,
    /// Rounds run first and left out of the summaries.
    pub warmup_rounds: usize,
    /// Length of the probe before each round; `None` for no probe.
    pub probe: Option<ProbeLen>,
    /// Order within a round.
    pub order: Order,
    /// Variant the ratios are taken against; the first one if `None`.
    pub reference: Option<String>,
}

/// Length of a per-round probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeLen(#[serde(with = "duration_ns")] pub Duration);

impl Interleave {
    /// Trials of `trial` length, 5 measured rounds after 1 warm-up round, a
    /// default-length probe per round, fixed order, ratios to the first
    /// variant.
    pub fn new(trial: Duration) -> Self {
        Interleave {
            trial,
            stop: Stop::Rounds(5),
            warmup_rounds: 1,
            probe: Some(ProbeLen(probe::DEFAULT_DURATION)),
            order: Order::Fixed,
            reference: None,
        }
    }

    /// Stop after `n` measured rounds.
    pub fn rounds(mut self, n: usize) -> Self {
        self.stop = Stop::Rounds(n.max(1));
        self
    }

    /// Stop once `total` has passed.
    pub fn total(mut self, total: Duration) -> Self {
        self.stop = Stop::Total(total);
        self
    }

    /// Run `n` warm-up rounds first.
    pub fn warmup(mut self, n: usize) -> Self {
        self.warmup_rounds = n;
        self
    }

    /// Probe for `len` before each round.
    pub fn probe(mut self, len: Duration) -> Self {
        self.probe = Some(ProbeLen(len));
        self
    }

    /// Do not probe (synthetic variants, tests).
    pub fn no_probe(mut self) -> Self {
        self.probe = None;
        self
    }

    /// Set the order within a round.
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// Take ratios against the variant called `name`.
    pub fn reference(mut self, name: &str) -> Self {
        self.reference = Some(name.to_string());
        self
    }

    /// Rounds to expect (for progress): exact for [`Stop::Rounds`], an
    /// estimate for [`Stop::Total`].
    pub fn expected_rounds(&self, variants: usize) -> usize {
        match self.stop {
            Stop::Rounds(n) => n + self.warmup_rounds,
            Stop::Total(total) => {
                let probe = self.probe.map_or(Duration::ZERO, |p| p.0);
                let round = self.trial * variants.max(1) as u32 + probe;
                (total.as_secs_f64() / round.as_secs_f64().max(1e-9)).ceil() as usize
            }
        }
    }

    /// Runs the variants interleaved without showing progress.
    pub fn run(
        &self,
        placement: &Placement,
        variants: &mut [&mut dyn Variant],
    ) -> InterleaveReport {
        self.run_with(placement, variants, &mut Progress::hidden())
    }

    /// Runs the variants interleaved, reporting each round to `progress`.
    ///
    /// # Panics
    /// If `variants` is empty, two variants share a name, or the reference
    /// names no variant.
    pub fn run_with(
        &self,
        placement: &Placement,
        variants: &mut [&mut dyn Variant],
        progress: &mut Progress,
    ) -> InterleaveReport {
        assert!(!variants.is_empty(), "nothing to interleave");
        let names: Vec<String> = variants.iter().map(|v| v.name().to_string()).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "two variants are called {n:?}");
        }
        let reference = self.reference.clone().unwrap_or_else(|| names[0].clone());
        assert!(
            names.contains(&reference),
            "reference {reference:?} is not a variant"
        );

        let started = Instant::now();
        let mut rounds = Vec::new();
        let mut measured = 0;
        loop {
            let index = rounds.len();
            let warmup = index < self.warmup_rounds;
            if !warmup {
                let done = match self.stop {
                    Stop::Rounds(n) => measured >= n,
                    Stop::Total(total) => measured > 0 && started.elapsed() >= total,
                };
                if done {
                    break;
                }
            }
            let probe = self.probe.map(|len| probe::measure(placement, len.0));
            let n = variants.len();
            let first = match self.order {
                Order::Fixed => 0,
                Order::Rotate => index % n,
            };
            let mut trials: Vec<NamedTrial> = (0..n)
                .map(|k| {
                    let v = &mut variants[(first + k) % n];
                    NamedTrial {
                        variant: v.name().to_string(),
                        result: v.run_trial(self.trial),
                    }
                })
                .collect();
            trials.sort_by_key(|t| names.iter().position(|n| *n == t.variant));
            let round = Round {
                index,
                warmup,
                probe,
                trials,
            };
            progress.step(1, &round.one_line());
            rounds.push(round);
            if !warmup {
                measured += 1;
            }
        }
        InterleaveReport::new(self.clone(), names, reference, rounds)
    }
}

/// One variant's trial within a round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedTrial {
    /// The variant's name.
    pub variant: String,
    /// What it measured.
    pub result: TrialResult,
}

/// One round: a probe, then one trial of each variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// Position in the run, from 0 (warm-up rounds included).
    pub index: usize,
    /// Whether this is a warm-up round (left out of the summaries).
    pub warmup: bool,
    /// The probe taken before the round.
    pub probe: Option<Probe>,
    /// The trials, in the order the variants were given.
    pub trials: Vec<NamedTrial>,
}

impl Round {
    /// The trial of `variant` in this round.
    pub fn trial(&self, variant: &str) -> Option<&TrialResult> {
        self.trials
            .iter()
            .find(|t| t.variant == variant)
            .map(|t| &t.result)
    }

    fn one_line(&self) -> String {
        let mut s = format!("round {}", self.index);
        if self.warmup {
            s.push_str(" (warm-up)");
        }
        if let Some(p) = &self.probe {
            let _ = write!(s, ": probe {:.0} ns", p.rtt_ns);
        }
        for t in &self.trials {
            let _ = write!(s, ", {} {:.2} Mpps", t.variant, t.result.mpps());
        }
        let shared = self.trials.iter().filter(|t| t.result.contended()).count()
            + usize::from(self.probe.as_ref().is_some_and(Probe::contended));
        if shared > 0 {
            s.push_str(" [cores shared]");
        }
        s
    }
}

/// Median over rounds of a per-round ratio between two variants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatioSummary {
    /// Variant on top of the ratio.
    pub numerator: String,
    /// Variant below.
    pub denominator: String,
    /// Median of the per-round ratios.
    pub median: f64,
    /// Smallest per-round ratio.
    pub min: f64,
    /// Largest per-round ratio.
    pub max: f64,
    /// The per-round ratios, in round order.
    pub per_round: Vec<f64>,
}

/// One variant over all measured rounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VariantSummary {
    /// The variant's name.
    pub name: String,
    /// Measured trials behind the medians.
    pub trials: usize,
    /// Median rate, Mpps.
    pub median_mpps: f64,
    /// Slowest trial, Mpps.
    pub min_mpps: f64,
    /// Fastest trial, Mpps.
    pub max_mpps: f64,
    /// Median goodput (frame bytes), Gb/s.
    pub median_goodput_gbps: f64,
    /// Median Ethernet line rate filled, Gb/s.
    pub median_wire_gbps: f64,
    /// Median busy ns per packet, per side.
    pub median_ns_per_packet: BTreeMap<String, f64>,
    /// Median of each extra counter.
    pub median_extra: BTreeMap<String, f64>,
    /// Median over rounds of (this variant's Mpps / the reference's Mpps).
    pub ratio_to_reference: f64,
    /// Measured trials during which the cores were shared (preemption or
    /// host steal): their rates understate the variant.
    pub contended_trials: usize,
}

/// Everything an interleaved run measured, with its summaries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InterleaveReport {
    /// How the run was configured.
    pub config: Interleave,
    /// The variant ratios are taken against.
    pub reference: String,
    /// Per-variant summaries, in the order the variants were given.
    pub variants: Vec<VariantSummary>,
    /// Median probe round trip over measured rounds, ns.
    pub probe_median_ns: Option<f64>,
    /// Smallest and largest probe round trip over measured rounds, ns: a
    /// wide spread means the placement moved during the run.
    pub probe_range_ns: Option<(f64, f64)>,
    /// Every round, warm-up included.
    pub rounds: Vec<Round>,
}

impl InterleaveReport {
    fn new(config: Interleave, names: Vec<String>, reference: String, rounds: Vec<Round>) -> Self {
        let mut report = InterleaveReport {
            config,
            reference,
            variants: Vec::new(),
            probe_median_ns: None,
            probe_range_ns: None,
            rounds,
        };
        let probes: Vec<f64> = report
            .measured()
            .filter_map(|r| r.probe.as_ref().map(|p| p.rtt_ns))
            .collect();
        report.probe_median_ns = stats::median(&probes);
        report.probe_range_ns = stats::min_max(&probes);
        report.variants = names.iter().map(|n| report.summarise(n)).collect();
        report
    }

    /// The measured (not warm-up) rounds.
    pub fn measured(&self) -> impl Iterator<Item = &Round> {
        self.rounds.iter().filter(|r| !r.warmup)
    }

    fn summarise(&self, name: &str) -> VariantSummary {
        let trials: Vec<&TrialResult> = self.measured().filter_map(|r| r.trial(name)).collect();
        let med = |f: &dyn Fn(&TrialResult) -> f64| {
            stats::median(&trials.iter().map(|t| f(t)).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let mpps: Vec<f64> = trials.iter().map(|t| t.mpps()).collect();
        let (min_mpps, max_mpps) = stats::min_max(&mpps).unwrap_or((f64::NAN, f64::NAN));
        let mut median_ns_per_packet = BTreeMap::new();
        let mut median_extra = BTreeMap::new();
        for t in &trials {
            for side in t.busy_ns.keys() {
                median_ns_per_packet.entry(side.clone()).or_insert(f64::NAN);
            }
            for key in t.extra.keys() {
                median_extra.entry(key.clone()).or_insert(f64::NAN);
            }
        }
        for (side, v) in median_ns_per_packet.iter_mut() {
            *v = med(&|t| t.ns_per_packet(side).unwrap_or(f64::NAN));
        }
        for (key, v) in median_extra.iter_mut() {
            *v = med(&|t| t.extra.get(key).copied().unwrap_or(f64::NAN));
        }
        VariantSummary {
            name: name.to_string(),
            trials: trials.len(),
            median_mpps: stats::median(&mpps).unwrap_or(f64::NAN),
            min_mpps,
            max_mpps,
            median_goodput_gbps: med(&TrialResult::goodput_gbps),
            median_wire_gbps: med(&TrialResult::wire_gbps),
            median_ns_per_packet,
            median_extra,
            ratio_to_reference: self
                .ratio(name, &self.reference)
                .map_or(f64::NAN, |r| r.median),
            contended_trials: trials.iter().filter(|t| t.contended()).count(),
        }
    }

    /// The summary of `name`.
    pub fn variant(&self, name: &str) -> Option<&VariantSummary> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Speedup of `numerator` over `denominator`: the median over measured
    /// rounds of the per-round ratio of their packet rates.
    pub fn ratio(&self, numerator: &str, denominator: &str) -> Option<RatioSummary> {
        self.ratio_by(numerator, denominator, TrialResult::pps)
    }

    /// Like [`InterleaveReport::ratio`], for any per-trial metric. Rounds in
    /// which either value is missing, NaN, or the denominator is 0 are skipped.
    pub fn ratio_by(
        &self,
        numerator: &str,
        denominator: &str,
        metric: impl Fn(&TrialResult) -> f64,
    ) -> Option<RatioSummary> {
        let per_round: Vec<f64> = self
            .measured()
            .filter_map(|r| {
                let a = metric(r.trial(numerator)?);
                let b = metric(r.trial(denominator)?);
                let ratio = a / b;
                (b != 0.0 && ratio.is_finite()).then_some(ratio)
            })
            .collect();
        let median = stats::median(&per_round)?;
        let (min, max) = stats::min_max(&per_round)?;
        Some(RatioSummary {
            numerator: numerator.to_string(),
            denominator: denominator.to_string(),
            median,
            min,
            max,
            per_round,
        })
    }

    /// One row per variant: median rate, spread, ratio, cost per packet.
    pub fn summary_table(&self) -> Table {
        let sides: Vec<String> = self
            .variants
            .iter()
            .flat_map(|v| v.median_ns_per_packet.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut headers: Vec<String> = ["variant", "median Mpps", "min..max Mpps", "wire Gb/s"]
            .map(String::from)
            .to_vec();
        headers.push(format!("ratio to {}", self.reference));
        headers.extend(sides.iter().map(|s| format!("{s} ns/pkt")));
        let rows = self
            .variants
            .iter()
            .map(|v| {
                let mut row = vec![
                    v.name.clone(),
                    format!("{:.2}", v.median_mpps),
                    format!("{:.2}..{:.2}", v.min_mpps, v.max_mpps),
                    format!("{:.2}", v.median_wire_gbps),
                    format!("{:.3}", v.ratio_to_reference),
                ];
                row.extend(sides.iter().map(|s| {
                    v.median_ns_per_packet
                        .get(s)
                        .map_or_else(String::new, |x| format!("{x:.2}"))
                }));
                row
            })
            .collect();
        Table { headers, rows }
    }

    /// One row per trial (warm-up included), for CSV: round, variant, probe,
    /// packets, bytes, elapsed, rates, busy ns per side, extra counters.
    pub fn trial_table(&self) -> Table {
        let mut sides = std::collections::BTreeSet::new();
        let mut extras = std::collections::BTreeSet::new();
        for t in self.rounds.iter().flat_map(|r| &r.trials) {
            sides.extend(t.result.busy_ns.keys().cloned());
            extras.extend(t.result.extra.keys().cloned());
        }
        let mut headers: Vec<String> = [
            "round",
            "warmup",
            "variant",
            "probe_rtt_ns",
            "packets",
            "bytes",
            "elapsed_ns",
            "mpps",
            "goodput_gbps",
            "wire_gbps",
            "preempted",
            "preempted_ns",
            "steal_ms",
        ]
        .map(String::from)
        .to_vec();
        headers.extend(sides.iter().map(|s| format!("busy_ns_{s}")));
        headers.extend(extras.iter().cloned());
        let mut rows = Vec::new();
        for r in &self.rounds {
            for t in &r.trials {
                let res = &t.result;
                let mut row = vec![
                    r.index.to_string(),
                    r.warmup.to_string(),
                    t.variant.clone(),
                    r.probe
                        .as_ref()
                        .map_or_else(String::new, |p| format!("{:.1}", p.rtt_ns)),
                    res.packets.to_string(),
                    res.bytes.to_string(),
                    res.elapsed.as_nanos().to_string(),
                    format!("{:.4}", res.mpps()),
                    format!("{:.4}", res.goodput_gbps()),
                    format!("{:.4}", res.wire_gbps()),
                    res.preempted.to_string(),
                    res.preempted_ns.to_string(),
                    format!("{:.1}", res.steal_ms),
                ];
                row.extend(sides.iter().map(|s| {
                    res.busy_ns
                        .get(s)
                        .map_or_else(String::new, |x| x.to_string())
                }));
                row.extend(
                    extras
                        .iter()
                        .map(|k| res.extra.get(k).map_or_else(String::new, |x| x.to_string())),
                );
                rows.push(row);
            }
        }
        Table { headers, rows }
    }

    /// A markdown summary: the table and the probe spread.
    pub fn markdown(&self) -> String {
        let mut s = self.summary_table().markdown();
        let measured = self.measured().count();
        let _ = write!(
            s,
            "\n{} measured rounds of {} ms trials ({} warm-up).",
            measured,
            self.config.trial.as_millis(),
            self.config.warmup_rounds
        );
        if let (Some(m), Some((lo, hi))) = (self.probe_median_ns, self.probe_range_ns) {
            let _ = write!(
                s,
                " Probe round trip: median {m:.0} ns, range {lo:.0}..{hi:.0} ns."
            );
        }
        let contended: usize = self.variants.iter().map(|v| v.contended_trials).sum();
        let total: usize = self.variants.iter().map(|v| v.trials).sum();
        if contended > 0 {
            let _ = write!(
                s,
                " {contended} of {total} trials shared their cores with other work \
                 (preemption or host steal): their rates are low."
            );
        }
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic variant whose rate follows a script, with per-round
    /// "placement" factors applied to all variants alike.
    fn scripted(
        name: &str,
        base_mpps: f64,
        factors: Vec<f64>,
    ) -> FnVariant<impl FnMut(Duration) -> TrialResult> {
        let mut round = 0;
        variant(name, move |d: Duration| {
            let f = factors[round % factors.len()];
            round += 1;
            let packets = (base_mpps * f * 1e6 * d.as_secs_f64()).round() as u64;
            TrialResult {
                packets,
                bytes: packets * 60,
                elapsed: d,
                busy_ns: [("app".to_string(), d.as_nanos() as u64 / 2)].into(),
                extra: [("round".to_string(), round as f64)].into(),
                ..Default::default()
            }
        })
    }

    #[test]
    fn medians_and_ratios_of_scripted_variants() {
        // Placement swings 4x between rounds; B is always 2x A.
        let factors = vec![1.0, 4.0, 0.5, 2.0, 1.0];
        let mut a = scripted("A", 10.0, factors.clone());
        let mut b = scripted("B", 20.0, factors);
        let cfg = Interleave::new(Duration::from_millis(100))
            .rounds(5)
            .warmup(0)
            .no_probe();
        let report = cfg.run(&Placement::pick(), &mut [&mut a, &mut b]);

        assert_eq!(report.rounds.len(), 5);
        assert_eq!(report.reference, "A");
        let va = report.variant("A").unwrap();
        let vb = report.variant("B").unwrap();
        assert_eq!(va.trials, 5);
        // Rates over rounds: A = 10,40,5,20,10 -> median 10.
        assert!((va.median_mpps - 10.0).abs() < 1e-9, "{}", va.median_mpps);
        assert!((va.min_mpps - 5.0).abs() < 1e-9);
        assert!((va.max_mpps - 40.0).abs() < 1e-9);
        assert!((vb.median_mpps - 20.0).abs() < 1e-9);
        // Every per-round ratio is exactly 2, whatever the placement.
        assert!((vb.ratio_to_reference - 2.0).abs() < 1e-9);
        assert!((va.ratio_to_reference - 1.0).abs() < 1e-9);
        let r = report.ratio("B", "A").unwrap();
        assert_eq!(r.per_round.len(), 5);
        assert!(r.per_round.iter().all(|x| (x - 2.0).abs() < 1e-9));
        let inv = report.ratio("A", "B").unwrap();
        assert!((inv.median - 0.5).abs() < 1e-9);
        // Busy 50 ms of 100 ms at 1 Mpps-per-trial rates: ns/pkt = busy/packets.
        let ns = va.median_ns_per_packet["app"];
        assert!((ns - 50.0).abs() < 1e-6, "{ns}");
        assert!((va.median_extra["round"] - 3.0).abs() < 1e-9);
        // 60 B frames at 10 Mpps: 4.8 Gb/s goodput, 84 B on the wire.
        assert!((va.median_goodput_gbps - 4.8).abs() < 1e-6);
        assert!((va.median_wire_gbps - 6.72).abs() < 1e-6);
    }

    #[test]
    fn warmup_rounds_are_left_out_and_rotation_keeps_names() {
        let mut a = scripted("A", 10.0, vec![100.0, 1.0, 1.0, 3.0]);
        let mut b = scripted("B", 30.0, vec![100.0, 1.0, 1.0, 3.0]);
        let cfg = Interleave::new(Duration::from_millis(10))
            .rounds(3)
            .warmup(1)
            .order(Order::Rotate)
            .reference("B")
            .no_probe();
        let report = cfg.run(&Placement::pick(), &mut [&mut a, &mut b]);
        assert_eq!(report.rounds.len(), 4);
        assert!(report.rounds[0].warmup);
        assert_eq!(report.measured().count(), 3);
        // Trials are stored in the given order even when rotated.
        for r in &report.rounds {
            assert_eq!(r.trials[0].variant, "A");
            assert_eq!(r.trials[1].variant, "B");
        }
        let va = report.variant("A").unwrap();
        assert!(
            (va.median_mpps - 10.0).abs() < 1e-9,
            "warm-up 1000 Mpps excluded"
        );
        assert!((va.ratio_to_reference - 1.0 / 3.0).abs() < 1e-9);
        let trials = report.trial_table();
        assert_eq!(trials.rows.len(), 8);
        assert!(trials.headers.contains(&"busy_ns_app".to_string()));
        assert!(report.markdown().contains("ratio to B"));
        assert!(!report.markdown().contains("shared their cores"));
    }

    #[test]
    fn total_duration_runs_at_least_one_round() {
        let mut a = scripted("A", 1.0, vec![1.0]);
        let cfg = Interleave::new(Duration::from_millis(1))
            .total(Duration::ZERO)
            .warmup(0)
            .no_probe();
        let report = cfg.run(&Placement::pick(), &mut [&mut a]);
        assert_eq!(report.measured().count(), 1);
    }

    #[test]
    fn contended_trials_are_counted_and_reported() {
        let mut n = 0;
        let mut a = variant("A", move |d| {
            n += 1;
            TrialResult {
                packets: 10,
                elapsed: d,
                preempted: u64::from(n == 2),
                preempted_ns: if n == 2 { 5_000_000 } else { 0 },
                ..Default::default()
            }
        });
        let report = Interleave::new(Duration::from_millis(1))
            .rounds(3)
            .warmup(0)
            .no_probe()
            .run(&Placement::pick(), &mut [&mut a]);
        assert_eq!(report.variant("A").unwrap().contended_trials, 1);
        assert!(report
            .markdown()
            .contains("1 of 3 trials shared their cores"));
        assert!(report.rounds[1].one_line().ends_with("[cores shared]"));
        let table = report.trial_table();
        let col = table.headers.iter().position(|h| h == "preempted").unwrap();
        assert_eq!(table.rows[1][col], "1");
    }

    #[test]
    fn zero_denominators_are_skipped() {
        let mut zero = variant("Z", |d| TrialResult {
            elapsed: d,
            ..Default::default()
        });
        let mut one = scripted("A", 1.0, vec![1.0]);
        let report = Interleave::new(Duration::from_millis(1))
            .rounds(2)
            .warmup(0)
            .no_probe()
            .run(&Placement::pick(), &mut [&mut zero, &mut one]);
        assert!(report.ratio("A", "Z").is_none());
        assert!(report.variant("A").unwrap().ratio_to_reference.is_nan());
        assert!((report.ratio("Z", "A").unwrap().median - 0.0).abs() < 1e-12);
    }
}
