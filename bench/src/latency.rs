//! Experiment: round-trip time of the echo server against offered load,
//! for four notification strategies, with an emulated interconnect latency.
//!
//! - `per_packet`: the NIC notifies every frame (the paper's baseline);
//! - `reactive`: at most one outstanding notification per pipe (Ensō's
//!   default);
//! - `reactive_prefetch`: reactive at the NIC, and the library rewrites the
//!   next pipe's head in `next_pipe_with_data` so its notification is on its
//!   way while the current pipe is processed;
//! - `packetized`: descriptor rings.
//!
//! The load comes from the NIC's built-in generator, which runs in the
//! engine thread: the engine (with the generator) is pinned to one core and
//! the echo server to the other, two busy threads on two cores. The
//! generator stamps each frame when it sends it and records the round trip
//! when the frame comes back; a rig is built per point because the rate is
//! part of the device's configuration.
//!
//! For each strategy: the highest rate with zero loss (binary search on
//! the generator's rate; a trial loses if any frame sent was not back
//! after the drain, or if the generator could not send at the rate asked),
//! then p50/p99 RTT at fixed fractions of the *reactive* strategy's
//! maximum, the same absolute loads for all four.
//!
//! The host moves the two vCPUs between placements that differ 3-4x in
//! speed, so the four searches run in lockstep (one trial of each per
//! step, one upper bound for all), every step and load point records a
//! probe, a bound set by a failure on another placement is tried again,
//! and load points probed on another placement than the search are
//! counted (`placement_moved_points`).

use std::collections::BTreeMap;
use std::time::Duration;

use nic_emu::NotificationMode;
use serde::{Deserialize, Serialize};

use crate::emu::{Interface, Rig, RigConfig, RigTrial};
use crate::placement::Placement;
use crate::progress::Progress;
use crate::refring::Mode;

mod wake;
pub use wake::{wake_cost, WakeCost, WakeRound};

/// A notification strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// One notification per frame.
    PerPacket,
    /// Reactive notifications.
    Reactive,
    /// Reactive, with the library prefetching the next pipe's notification.
    ReactivePrefetch,
    /// Descriptor rings.
    Packetized,
}

impl Strategy {
    /// All four, the reference (reactive) first.
    pub const ALL: [Strategy; 4] = [
        Strategy::Reactive,
        Strategy::PerPacket,
        Strategy::ReactivePrefetch,
        Strategy::Packetized,
    ];

    /// The name used in results.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::PerPacket => "per_packet",
            Strategy::Reactive => "reactive",
            Strategy::ReactivePrefetch => "reactive_prefetch",
            Strategy::Packetized => "packetized",
        }
    }

    /// The rig for this strategy.
    pub fn rig(self, base: &RigConfig) -> RigConfig {
        let (interface, mode) = match self {
            Strategy::PerPacket => (Interface::Enso, NotificationMode::PerPacket),
            Strategy::Reactive => (Interface::Enso, NotificationMode::Reactive),
            Strategy::ReactivePrefetch => (Interface::Enso, NotificationMode::ReactivePrefetch),
            Strategy::Packetized => (Interface::Packetized, NotificationMode::Reactive),
        };
        RigConfig {
            interface,
            notification_mode: mode,
            ..base.clone()
        }
    }
}

/// How to run the experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyPlan {
    /// Strategies, in order; the first is the one loads are relative to
    /// (reactive by default).
    pub strategies: Vec<Strategy>,
    /// Rig settings shared by all (interface and notification mode are set
    /// per strategy; rate per point; no in-flight window, so an overload
    /// shows as loss; timestamps on).
    pub rig: RigConfig,
    /// Offered loads in % of the reference strategy's zero-loss maximum.
    pub loads_pct: Vec<f64>,
    /// Trial length at each load point.
    pub point_trial: Duration,
    /// Trial length during the zero-loss search.
    pub search_trial: Duration,
    /// Unmeasured run on each new rig first (page faults, caches).
    pub warmup: Duration,
    /// Search precision as a fraction of the upper bound.
    pub precision: f64,
    /// Attempts at a rate before it counts as lossy.
    pub attempts: u32,
    /// Sent rate below this share of the rate asked is a failure: the
    /// emulated NIC could not offer the load.
    pub min_offered_share: f64,
}

impl LatencyPlan {
    /// 64 B, 2 pipes, 16 flows, 400 ns interconnect latency, loads 1, 10,
    /// 20 … 90, 95, 99 %, 200 ms points, 150 ms search trials.
    pub fn new(interconnect_latency_ns: u64) -> Self {
        let mut rig = RigConfig::new(Interface::Enso, Mode::Echo, 64);
        rig.window = None;
        rig.timestamps = true;
        rig.interconnect_latency_ns = interconnect_latency_ns;
        LatencyPlan {
            strategies: Strategy::ALL.to_vec(),
            rig,
            loads_pct: vec![
                1.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0,
            ],
            point_trial: Duration::from_millis(200),
            search_trial: Duration::from_millis(150),
            warmup: Duration::from_millis(30),
            precision: 0.02,
            attempts: 2,
            min_offered_share: 0.97,
        }
    }
}

/// One trial at one rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Offered load as % of the reference's zero-loss maximum (search
    /// trials: none).
    pub offered_load_pct: Option<f64>,
    /// Rate asked of the generator, Mpps.
    pub offered_mpps: f64,
    /// Rate the generator sent at, Mpps.
    pub sent_mpps: f64,
    /// Rate that came back, Mpps.
    pub achieved_mpps: f64,
    /// Frames sent in the trial that did not come back (drops and frames
    /// still in flight after the drain).
    pub loss: u64,
    /// `loss / sent`.
    pub loss_fraction: f64,
    /// Drops by cause.
    pub drops: BTreeMap<String, u64>,
    /// Round-trip time percentiles, ns (from the generator's timestamps).
    pub p50_rtt_ns: Option<u64>,
    /// See `p50_rtt_ns`.
    pub p90_rtt_ns: Option<u64>,
    /// See `p50_rtt_ns`.
    pub p99_rtt_ns: Option<u64>,
    /// See `p50_rtt_ns`.
    pub p999_rtt_ns: Option<u64>,
    /// Mean RTT, ns.
    pub mean_rtt_ns: Option<u64>,
    /// Round trips recorded.
    pub rtt_samples: u64,
    /// RX notifications per packet (Ensō), or descriptor write-backs are
    /// not counted: `None` for packetized.
    pub notifications_per_pkt: Option<f64>,
    /// NIC engine and application busy shares.
    pub nic_busy: f64,
    /// See `nic_busy`.
    pub app_busy: f64,
    /// Whether other work shared the cores during the trial.
    pub contended: bool,
    /// Whether this trial passed as zero-loss.
    pub zero_loss: bool,
    /// Cross-core probe taken before this step (all strategies of a load
    /// point, or of a search step, share it), ns.
    pub probe_rtt_ns: Option<f64>,
}

/// Judges a trial: zero loss, and the generator kept up with the rate.
pub fn passes(p: &Point, min_offered_share: f64) -> bool {
    p.loss == 0 && p.sent_mpps >= p.offered_mpps * min_offered_share
}

fn point(
    strategy: Strategy,
    offered_mpps: f64,
    pct: Option<f64>,
    t: &RigTrial,
    min_share: f64,
) -> Point {
    let secs = t.elapsed_ns as f64 / 1e9;
    let loss = (t.total_drops() as i64 + t.unaccounted.max(0)) as u64;
    let lat = t.latency.as_ref();
    let tr = t.to_trial();
    let mut p = Point {
        offered_load_pct: pct,
        offered_mpps,
        sent_mpps: t.sent as f64 / secs / 1e6,
        achieved_mpps: t.packets as f64 / secs / 1e6,
        loss,
        // The generator sends only in the window (it is paused for the
        // drain), so `sent` is everything the trial sent.
        loss_fraction: if t.sent > 0 {
            loss as f64 / t.sent as f64
        } else {
            0.0
        },
        drops: t.drops.clone(),
        p50_rtt_ns: lat.filter(|l| l.count > 0).map(|l| l.p50_ns),
        p90_rtt_ns: lat.filter(|l| l.count > 0).map(|l| l.p90_ns),
        p99_rtt_ns: lat.filter(|l| l.count > 0).map(|l| l.p99_ns),
        p999_rtt_ns: lat.filter(|l| l.count > 0).map(|l| l.p999_ns),
        mean_rtt_ns: lat.filter(|l| l.count > 0).map(|l| l.mean_ns),
        rtt_samples: lat.map_or(0, |l| l.count),
        notifications_per_pkt: (strategy != Strategy::Packetized && t.packets > 0)
            .then(|| t.rx_notifications as f64 / t.packets as f64),
        nic_busy: tr.busy_fraction("nic").unwrap_or(f64::NAN),
        app_busy: tr.busy_fraction("app").unwrap_or(f64::NAN),
        contended: tr.contended(),
        zero_loss: false,
        probe_rtt_ns: None,
    };
    p.zero_loss = passes(&p, min_share);
    p
}

/// Everything one strategy measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StrategyResult {
    /// `per_packet`, `reactive`, `reactive_prefetch` or `packetized`.
    pub strategy: String,
    /// Highest rate that passed, Mpps.
    pub max_zero_loss_mpps: f64,
    /// Lowest rate that failed (the search's upper bound), Mpps; equal to
    /// the maximum if every rate tried passed.
    pub lowest_lossy_mpps: f64,
    /// Notifications per packet in the trial at the maximum (Ensō).
    pub notifications_per_pkt_at_max: Option<f64>,
    /// p50/p99 RTT in the trial at the maximum.
    pub p50_rtt_ns_at_max: Option<u64>,
    /// See `p50_rtt_ns_at_max`.
    pub p99_rtt_ns_at_max: Option<u64>,
    /// Saturation rate with an in-flight window (the search's start), Mpps.
    pub saturation_mpps: f64,
    /// Every search trial, in order.
    pub search: Vec<Point>,
    /// The load points.
    pub points: Vec<Point>,
    /// Packet size on the wire with FCS.
    pub pkt_size: usize,
    /// Emulated one-way interconnect latency, ns.
    pub interconnect_latency_ns: u64,
    /// Pipes or queues.
    pub pipes: u32,
    /// How threads were placed and where the load came from.
    pub placement: String,
    /// Trials in which other work shared the cores.
    pub contended_trials: usize,
    /// Trials in all.
    pub trials: usize,
    /// Median probe round trip during the search, ns.
    pub search_probe_rtt_ns: Option<f64>,
    /// Load points whose probe differs from the search's by more than
    /// [`PLACEMENT_MOVED`]x: the host moved the cores, the loads are
    /// relative to a maximum measured on another placement.
    pub placement_moved_points: usize,
}

/// A probe this many times faster or slower than another means the host
/// moved the two vCPUs in between (close placements probe at about 80 ns,
/// distant ones several hundred).
pub const PLACEMENT_MOVED: f64 = 1.5;

/// Whether two probes were taken on different placements.
pub fn placement_moved(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => (a / b).max(b / a) > PLACEMENT_MOVED,
        _ => false,
    }
}

/// One trial on a fresh rig at `rate` (None: full speed with a window).
fn trial_at(
    plan: &LatencyPlan,
    strategy: Strategy,
    rate_pps: Option<f64>,
    window: Duration,
    placement: &Placement,
) -> Result<RigTrial, String> {
    let mut cfg = strategy.rig(&plan.rig);
    cfg.rate_pps = rate_pps;
    if rate_pps.is_none() {
        cfg.window = Some(1024);
    }
    let mut rig = Rig::start(strategy.name(), cfg, placement)?;
    if !plan.warmup.is_zero() {
        rig.trial(plan.warmup)?;
    }
    let t = rig.trial(window)?;
    rig.stop();
    Ok(t)
}

/// Result of a zero-loss search.
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    /// Highest passing rate (pps), 0 if none passed.
    pub lo: f64,
    /// Lowest failing rate (pps).
    pub hi: f64,
    /// The trial at `lo`, if any passed.
    pub at_lo: Option<Point>,
    /// Every trial.
    pub trials: Vec<Point>,
}

/// Doublings of the upper bound at most, when the bound itself passes.
pub const MAX_DOUBLINGS: u32 = 4;

/// Times a search reopens its upper bound after the placement moved.
pub const MAX_REOPEN: u32 = 2;

/// A zero-loss search advanced one trial at a time, so several can run in
/// lockstep (the strategies' searches then see the same placement).
///
/// The bound `hi_pps` is tried first and doubled (at most
/// [`MAX_DOUBLINGS`] times) while it passes; then the interval is halved
/// down to `precision * hi_pps`. Each rate gets up to `attempts` tries.
#[derive(Clone, Debug, PartialEq)]
pub struct Searcher {
    s: Search,
    /// The first upper bound.
    bound: f64,
    /// Probe of the trial that last lowered `hi`.
    hi_probe: Option<f64>,
    /// Times the upper bound was reopened because the placement moved.
    reopened: u32,
    step: f64,
    attempts: u32,
    rate: f64,
    tries: u32,
    doublings: u32,
    done: bool,
}

impl Searcher {
    /// A search below `hi_pps`.
    pub fn new(hi_pps: f64, precision: f64, attempts: u32) -> Self {
        Searcher {
            s: Search {
                lo: 0.0,
                hi: hi_pps,
                at_lo: None,
                trials: Vec::new(),
            },
            bound: hi_pps,
            hi_probe: None,
            reopened: 0,
            step: (precision * hi_pps).max(1.0),
            attempts: attempts.max(1),
            rate: hi_pps,
            tries: 0,
            doublings: 0,
            done: false,
        }
    }

    /// The rate to try next, or `None` once the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        (!self.done).then_some(self.rate)
    }

    /// Before a step, with the probe taken for it: if the host has moved
    /// the cores since the trial that set the upper bound failed (probes
    /// [`PLACEMENT_MOVED`]x apart), that failure says nothing about this
    /// placement, so the bound is reopened (at most [`MAX_REOPEN`] times).
    pub fn placement(&mut self, probe_rtt_ns: f64) {
        if self.done || self.reopened >= MAX_REOPEN {
            return;
        }
        if placement_moved(self.hi_probe, Some(probe_rtt_ns)) {
            self.reopened += 1;
            self.hi_probe = None;
            self.s.hi = self.bound.max(self.s.lo * 2.0);
            self.rate = self.s.hi;
            self.tries = 0;
        }
    }

    /// Records the trial at [`Searcher::next_rate`].
    pub fn record(&mut self, p: Point) {
        if self.done {
            return;
        }
        let pass = p.zero_loss;
        self.s.trials.push(p.clone());
        self.tries += 1;
        if !pass && self.tries < self.attempts {
            return; // another try at the same rate
        }
        self.tries = 0;
        let s = &mut self.s;
        if pass {
            s.lo = self.rate;
            s.at_lo = Some(p);
            if self.rate >= s.hi {
                if self.doublings == MAX_DOUBLINGS {
                    self.done = true;
                    return;
                }
                self.doublings += 1;
                s.hi = self.rate * 2.0;
                self.rate = s.hi;
                return;
            }
        } else {
            s.hi = self.rate;
            self.hi_probe = s.trials.last().and_then(|t| t.probe_rtt_ns);
        }
        if s.hi - s.lo <= self.step {
            self.done = true;
            return;
        }
        self.rate = (s.lo + s.hi) / 2.0;
    }

    /// The outcome so far.
    pub fn result(self) -> Search {
        self.s
    }
}

/// Runs a [`Searcher`] to the end with `run` doing the trials.
pub fn search(
    hi_pps: f64,
    precision: f64,
    attempts: u32,
    mut run: impl FnMut(f64) -> Result<Point, String>,
) -> Result<Search, String> {
    let mut s = Searcher::new(hi_pps, precision, attempts);
    while let Some(rate) = s.next_rate() {
        s.record(run(rate)?);
    }
    Ok(s.result())
}

/// Runs the whole experiment. `progress` gets a step per trial.
pub fn run(
    plan: &LatencyPlan,
    placement: &Placement,
    placement_text: &str,
    progress: &mut Progress,
) -> Result<Vec<StrategyResult>, String> {
    let probe = || crate::probe::measure(placement, crate::probe::DEFAULT_DURATION).rtt_ns;
    // Saturation, then the zero-loss searches, all in lockstep: one trial
    // of each strategy per step, a probe before each step.
    let mut sat = Vec::new();
    let p0 = probe();
    for &st in &plan.strategies {
        let t = trial_at(plan, st, None, plan.search_trial, placement)?;
        let mpps = t.packets as f64 / (t.elapsed_ns as f64 / 1e9) / 1e6;
        progress.step(1, &format!("{} saturates at {mpps:.2} Mpps", st.name()));
        sat.push(mpps);
    }
    // One bound for all, above the fastest saturation: a strategy whose
    // saturation trial landed on a slow placement still gets room.
    let bound = (sat.iter().copied().fold(0.0, f64::max) * 1.3 * 1e6).max(1e4);
    let mut searchers: Vec<Searcher> = sat
        .iter()
        .map(|_| Searcher::new(bound, plan.precision, plan.attempts))
        .collect();
    let mut search_probes = vec![p0];
    while searchers.iter().any(|s| s.next_rate().is_some()) {
        let rtt = probe();
        search_probes.push(rtt);
        for (i, &st) in plan.strategies.iter().enumerate() {
            searchers[i].placement(rtt);
            let Some(rate) = searchers[i].next_rate() else {
                continue;
            };
            let t = trial_at(plan, st, Some(rate), plan.search_trial, placement)?;
            let mut p = point(st, rate / 1e6, None, &t, plan.min_offered_share);
            p.probe_rtt_ns = Some(rtt);
            progress.step(
                1,
                &format!(
                    "{} {:.2} Mpps: {}",
                    st.name(),
                    rate / 1e6,
                    if p.zero_loss {
                        "no loss".to_string()
                    } else {
                        format!("loss {} (sent {:.2} Mpps)", p.loss, p.sent_mpps)
                    }
                ),
            );
            searchers[i].record(p);
        }
    }
    let search_probe = crate::stats::median(&search_probes);
    let mut results: Vec<StrategyResult> = Vec::new();
    for ((&st, searcher), sat_mpps) in plan.strategies.iter().zip(searchers).zip(sat) {
        let s = searcher.result();
        results.push(StrategyResult {
            strategy: st.name().to_string(),
            max_zero_loss_mpps: s.lo / 1e6,
            lowest_lossy_mpps: s.hi / 1e6,
            notifications_per_pkt_at_max: s.at_lo.as_ref().and_then(|p| p.notifications_per_pkt),
            p50_rtt_ns_at_max: s.at_lo.as_ref().and_then(|p| p.p50_rtt_ns),
            p99_rtt_ns_at_max: s.at_lo.as_ref().and_then(|p| p.p99_rtt_ns),
            saturation_mpps: sat_mpps,
            search_probe_rtt_ns: search_probe,
            search: s.trials,
            points: Vec::new(),
            pkt_size: plan.rig.wire_size,
            interconnect_latency_ns: plan.rig.interconnect_latency_ns,
            pipes: plan.rig.pipes,
            placement: placement_text.to_string(),
            contended_trials: 0,
            trials: 0,
            placement_moved_points: 0,
        });
    }
    let reference = results
        .first()
        .map(|r| r.max_zero_loss_mpps)
        .filter(|m| *m > 0.0)
        .ok_or("the reference strategy passed at no rate: no loads to offer")?;
    // Loads outer, strategies inner: the strategies at one load run close
    // together in time, on the same placement.
    for &pct in &plan.loads_pct {
        let mpps = reference * pct / 100.0;
        let rtt = probe();
        for (i, &st) in plan.strategies.iter().enumerate() {
            let t = trial_at(plan, st, Some(mpps * 1e6), plan.point_trial, placement)?;
            let mut p = point(st, mpps, Some(pct), &t, plan.min_offered_share);
            p.probe_rtt_ns = Some(rtt);
            progress.step(
                1,
                &format!(
                    "{} at {pct}% ({mpps:.2} Mpps): p50 {} ns, p99 {} ns, loss {}",
                    st.name(),
                    p.p50_rtt_ns.map_or("-".into(), |v| v.to_string()),
                    p.p99_rtt_ns.map_or("-".into(), |v| v.to_string()),
                    p.loss
                ),
            );
            results[i].points.push(p);
        }
    }
    for r in &mut results {
        let all = r.search.iter().chain(&r.points);
        r.trials = all.clone().count();
        r.contended_trials = all.filter(|p| p.contended).count();
        r.placement_moved_points = r
            .points
            .iter()
            .filter(|p| placement_moved(r.search_probe_rtt_ns, p.probe_rtt_ns))
            .count();
    }
    Ok(results)
}

/// Trials the plan runs (for progress), if every search takes the
/// expected number of steps.
pub fn expected_trials(plan: &LatencyPlan) -> u64 {
    let search = (1.0 / plan.precision.max(1e-3)).log2().ceil() as u64 + 2;
    (plan.strategies.len() as u64) * (1 + search + plan.loads_pct.len() as u64)
}

/// The RTT chart: p50 (solid, dots) and p99 (dashed, triangles) per
/// strategy on a log axis in µs, points measured on shared cores ringed;
/// `placement` (cores and probe) goes into the title.
pub fn rtt_chart(results: &[StrategyResult], placement: &str) -> crate::plot::LineChart {
    let first = results.first();
    let title = format!(
        "Echo round-trip time (µs, log axis) vs offered load (Mpps)\np50 solid with dots, p99 dashed with triangles; {} B, {} ns interconnect; {placement}",
        first.map_or(0, |r| r.pkt_size),
        first.map_or(0, |r| r.interconnect_latency_ns),
    );
    let mut chart =
        crate::plot::LineChart::new(&title, "offered load (Mpps)", "round-trip time (µs)")
            .log_y()
            .flagged_label("measured on shared cores");
    for (i, r) in results.iter().enumerate() {
        for (pct, dashed) in [("p50", false), ("p99", true)] {
            let mut points = Vec::new();
            let mut flagged = Vec::new();
            for p in &r.points {
                let v = if dashed { p.p99_rtt_ns } else { p.p50_rtt_ns };
                if let Some(v) = v.filter(|&v| v > 0) {
                    if p.contended {
                        flagged.push(points.len());
                    }
                    points.push((p.offered_mpps, v as f64 / 1e3));
                }
            }
            let mut s = crate::plot::Series::new(format!("{} {pct}", r.strategy), points);
            s.colour = Some(i);
            s.dashed = dashed;
            s.flagged = flagged;
            chart = chart.push(s);
        }
    }
    chart
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(rate: f64, ok: bool) -> Point {
        Point {
            offered_load_pct: None,
            offered_mpps: rate / 1e6,
            sent_mpps: rate / 1e6,
            achieved_mpps: rate / 1e6,
            loss: u64::from(!ok),
            loss_fraction: 0.0,
            drops: BTreeMap::new(),
            p50_rtt_ns: None,
            p90_rtt_ns: None,
            p99_rtt_ns: None,
            p999_rtt_ns: None,
            mean_rtt_ns: None,
            rtt_samples: 0,
            notifications_per_pkt: Some(0.5),
            nic_busy: 0.0,
            app_busy: 0.0,
            contended: false,
            zero_loss: ok,
            probe_rtt_ns: None,
        }
    }

    #[test]
    fn search_converges_on_the_threshold() {
        // Lossless up to 6.3 Mpps.
        let s = search(10e6, 0.01, 1, |r| Ok(p(r, r <= 6.3e6))).unwrap();
        assert!(s.lo <= 6.3e6 && s.hi > 6.3e6, "{} {}", s.lo, s.hi);
        assert!(s.hi - s.lo <= 0.1e6 + 1.0);
        assert_eq!(s.trials[0].offered_mpps, 10.0, "the bound is tried first");
        assert!(s.at_lo.unwrap().zero_loss);
        // Everything passes: the bound doubles, then gives up.
        let s = search(10e6, 0.01, 1, |r| Ok(p(r, true))).unwrap();
        assert_eq!((s.lo, s.trials.len()), (160e6, 5));
        // The threshold is above the first bound: found after one doubling.
        let s = search(10e6, 0.01, 1, |r| Ok(p(r, r <= 13e6))).unwrap();
        assert!(s.lo <= 13e6 && s.hi > 13e6 && s.hi - s.lo <= 0.1e6 + 1.0);
        assert_eq!(s.trials[1].offered_mpps, 20.0);
        // Nothing passes: lo stays 0.
        let s = search(10e6, 0.05, 1, |r| Ok(p(r, false))).unwrap();
        assert_eq!(s.lo, 0.0);
        assert!(s.at_lo.is_none());
    }

    #[test]
    fn a_second_attempt_can_pass() {
        let mut n = 0;
        let s = search(4e6, 0.25, 2, |r| {
            n += 1;
            // The first try at every rate fails (a hiccup); the second passes
            // below 3 Mpps.
            Ok(p(r, n % 2 == 0 && r < 3e6))
        })
        .unwrap();
        assert!(s.lo >= 2e6 && s.lo < 3e6, "{}", s.lo);
        assert!(s.trials.len() >= 4);
    }

    #[test]
    fn searchers_run_in_lockstep() {
        let mut a = Searcher::new(10e6, 0.05, 1);
        let mut b = Searcher::new(10e6, 0.05, 1);
        let mut steps = 0;
        while a.next_rate().is_some() || b.next_rate().is_some() {
            steps += 1;
            if let Some(r) = a.next_rate() {
                a.record(p(r, r <= 3e6));
            }
            if let Some(r) = b.next_rate() {
                b.record(p(r, r <= 8e6));
            }
        }
        let (a, b) = (a.result(), b.result());
        assert!(a.lo <= 3e6 && a.hi > 3e6);
        assert!(b.lo <= 8e6 && b.hi > 8e6);
        assert!(steps <= 6, "{steps}");
    }

    #[test]
    fn a_failure_on_another_placement_reopens_the_bound() {
        let mut s = Searcher::new(10e6, 0.05, 1);
        // Slow placement: the bound fails.
        let mut f = p(10e6, false);
        f.probe_rtt_ns = Some(380.0);
        s.record(f);
        assert_eq!(s.next_rate(), Some(5e6));
        s.placement(380.0);
        assert_eq!(s.next_rate(), Some(5e6), "same placement: keep halving");
        s.placement(82.0);
        assert_eq!(s.next_rate(), Some(10e6), "moved: the bound is tried again");
        let mut ok = p(10e6, true);
        ok.probe_rtt_ns = Some(82.0);
        s.record(ok);
        assert_eq!(s.next_rate(), Some(20e6), "and doubles when it passes");
    }

    #[test]
    fn placement_moves_are_a_factor_apart() {
        assert!(!placement_moved(Some(80.0), Some(100.0)));
        assert!(placement_moved(Some(80.0), Some(380.0)));
        assert!(placement_moved(Some(380.0), Some(80.0)));
        assert!(!placement_moved(None, Some(80.0)));
    }

    #[test]
    fn a_trial_fails_if_the_generator_falls_short() {
        let mut x = p(5e6, true);
        assert!(passes(&x, 0.97));
        x.sent_mpps = 4.5;
        assert!(!passes(&x, 0.97));
        x.sent_mpps = 5.0;
        x.loss = 1;
        assert!(!passes(&x, 0.97));
    }

    #[test]
    fn strategies_configure_their_rigs() {
        let plan = LatencyPlan::new(400);
        assert_eq!(plan.rig.window, None, "an overload must show as loss");
        assert!(plan.rig.timestamps);
        let r = Strategy::ReactivePrefetch.rig(&plan.rig);
        assert_eq!(r.notification_mode, NotificationMode::ReactivePrefetch);
        assert_eq!(r.interconnect_latency_ns, 400);
        assert_eq!(
            Strategy::Packetized.rig(&plan.rig).interface,
            Interface::Packetized
        );
        assert_eq!(
            Strategy::ALL[0],
            Strategy::Reactive,
            "loads are relative to it"
        );
        assert_eq!(plan.loads_pct.len(), 12);
        assert!(expected_trials(&plan) > 4 * 12);
    }
}
