//! Experiment: echo throughput against the number of pipes (Ensō) or RSS
//! queues (packetized) that one application core serves.
//!
//! The paper's claim: an Ensō NIC keeps its rate as an application's
//! pipes grow to a thousand, while a descriptor-ring NIC loses rate as its
//! queues grow, because every queue's descriptor ring and posted buffers
//! compete for the cache. Here every (interface, count) pair is a [`Rig`]
//! (the NIC engine with its generator on side A, the echo server on side
//! B), all of them alive at once and run interleaved, so that each
//! interface's rate at N pipes over its rate at the fewest is a median of
//! per-round ratios, measured on whatever placement each round had.
//!
//! The generator cycles through [`ScalingPlan::flows`] flows, several per
//! pipe, hashed over the fallback pipes or RSS queues, so that every pipe
//! or queue receives traffic.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::echo::bottleneck;
use crate::emu::{Interface, Rig, RigConfig};
use crate::interleave::{Interleave, InterleaveReport, Order, TrialResult, Variant};
use crate::placement::Placement;
use crate::plot::{LineChart, Series};
use crate::progress::Progress;
use crate::refring::Mode;
use crate::results::Table;
use crate::stats;

/// The paper's pipe counts.
pub const DEFAULT_COUNTS: [u32; 4] = [1, 2, 32, 1024];
/// Most pipes or queues one application may use here.
pub const MAX_COUNT: u32 = 1024;
/// Fewest generator flows, whatever the count.
pub const MIN_FLOWS: u32 = 16;

/// How to run the experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalingPlan {
    /// Interfaces to measure.
    pub interfaces: Vec<Interface>,
    /// Pipe (queue) counts, in the order given.
    pub counts: Vec<u32>,
    /// Packet size on the wire, with FCS.
    pub wire_size: usize,
    /// Generator flows per pipe (at least [`MIN_FLOWS`] in all).
    pub flows_per_pipe: u32,
    /// Most frames in flight.
    pub window: u64,
    /// Packetized: RX descriptors per queue (and the buffers posted).
    pub rx_ring: u32,
    /// Packetized: TX descriptors per queue.
    pub tx_ring: u32,
    /// Length of one trial.
    pub trial: Duration,
    /// Length of the interleaved run (warm-up round included).
    pub total: Duration,
}

impl ScalingPlan {
    /// The defaults: both interfaces at `counts`, 64 B, 4 flows per pipe,
    /// 512 frames in flight, rings of 1024 descriptors (DPDK's usual
    /// setting: 1024 queues of 4096 RX buffers would post 8 GiB).
    pub fn new(counts: Vec<u32>) -> Self {
        ScalingPlan {
            interfaces: Interface::BOTH.to_vec(),
            counts,
            wire_size: 64,
            flows_per_pipe: 4,
            window: 512,
            rx_ring: 1024,
            tx_ring: 1024,
            trial: Duration::from_millis(100),
            total: Duration::from_millis(12_000),
        }
    }

    /// Generator flows at `pipes` pipes.
    pub fn flows(&self, pipes: u32) -> u32 {
        pipes.saturating_mul(self.flows_per_pipe).max(MIN_FLOWS)
    }

    /// The rig of `interface` at `pipes`.
    pub fn rig(&self, interface: Interface, pipes: u32) -> RigConfig {
        let mut rig = RigConfig::new(interface, Mode::Echo, self.wire_size);
        rig.pipes = pipes;
        rig.flows = self.flows(pipes);
        rig.window = Some(self.window);
        rig.rx_ring = self.rx_ring;
        rig.tx_ring = self.tx_ring;
        rig
    }

    /// Every variant: (name, interface, pipes), interfaces outer.
    pub fn variants(&self) -> Vec<(String, Interface, u32)> {
        self.interfaces
            .iter()
            .flat_map(|&i| self.counts.iter().map(move |&n| (label(i, n), i, n)))
            .collect()
    }

    /// Checks the counts and every rig.
    pub fn check(&self) -> Result<(), String> {
        if self.counts.is_empty() {
            return Err("no pipe counts given".into());
        }
        for (i, &n) in self.counts.iter().enumerate() {
            if !(1..=MAX_COUNT).contains(&n) {
                return Err(format!("pipe count {n} is outside 1..={MAX_COUNT}"));
            }
            if self.counts[..i].contains(&n) {
                return Err(format!("pipe count {n} is given twice"));
            }
        }
        if self.interfaces.is_empty() {
            return Err("no interface to measure".into());
        }
        if self.window > u64::from(self.rx_ring) {
            return Err(format!(
                "a window of {} frames can overflow an RX ring of {} descriptors when every \
                 flow hashes to one queue",
                self.window, self.rx_ring
            ));
        }
        for (_, i, n) in self.variants() {
            self.rig(i, n).check()?;
        }
        Ok(())
    }

    /// The fewest pipes measured: the rates are relative to it.
    pub fn fewest(&self) -> u32 {
        self.counts.iter().copied().min().unwrap_or(1)
    }
}

/// A variant's name: `enso x32`, `packetized x1024`.
pub fn label(interface: Interface, pipes: u32) -> String {
    format!("{} x{pipes}", interface.name())
}

/// One interface at one count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalingPoint {
    /// `enso` or `packetized`.
    pub interface: String,
    /// Pipes (Ensō) or RSS queues (packetized).
    pub pipes: u32,
    /// Generator flows.
    pub flows: u32,
    /// Median packet rate over rounds (echoed packets).
    pub mpps: f64,
    /// Slowest and fastest trial.
    pub mpps_range: [f64; 2],
    /// Ethernet line rate the median fills.
    pub gbps: f64,
    /// Rate over the same interface's at the fewest pipes, median of
    /// per-round ratios.
    pub relative_to_fewest: Option<f64>,
    /// Per-round range of that ratio.
    pub relative_range: Option<[f64; 2]>,
    /// NIC engine busy ns per packet.
    pub nic_ns_per_pkt: f64,
    /// Application busy ns per packet.
    pub app_ns_per_pkt: f64,
    /// Share of the window the engine was busy.
    pub nic_busy: f64,
    /// Share of the window the application was busy.
    pub app_busy: f64,
    /// `nic`, `app` or `neither`.
    pub bottleneck: String,
    /// Ensō: packets per RX notification.
    pub packets_per_notification: Option<f64>,
    /// Frames the NIC dropped over the measured trials.
    pub drops: u64,
    /// Trials that shared their cores with other work.
    pub contended_trials: usize,
    /// Measured trials.
    pub trials: usize,
}

/// Everything a run measured.
#[derive(Debug, Serialize, Deserialize)]
pub struct ScalingRun {
    /// The plan it ran.
    pub plan: ScalingPlan,
    /// One per interface and count, interfaces outer.
    pub points: Vec<ScalingPoint>,
    /// The interleaved trials, with the probe before each round.
    pub report: InterleaveReport,
}

/// Runs the plan: every rig started first, then interleaved, then stopped.
pub fn run(
    plan: &ScalingPlan,
    placement: &Placement,
    progress: &mut Progress,
) -> Result<ScalingRun, String> {
    plan.check()?;
    let mut rigs = Vec::new();
    for (name, i, n) in plan.variants() {
        progress.note(&format!("starting {name}"));
        rigs.push(Rig::start(&name, plan.rig(i, n), placement)?);
    }
    let report = {
        let mut variants: Vec<&mut dyn Variant> =
            rigs.iter_mut().map(|r| r as &mut dyn Variant).collect();
        Interleave::new(plan.trial)
            .total(plan.total)
            .warmup(1)
            .order(Order::Rotate)
            .run_with(placement, &mut variants, progress)
    };
    for r in &rigs {
        if let Some(e) = r.error() {
            return Err(format!("{}: {e}", r.config().interface));
        }
    }
    drop(rigs);
    Ok(ScalingRun {
        points: summarise(plan, &report),
        plan: plan.clone(),
        report,
    })
}

/// Expected rounds (warm-up included) for the progress bar.
pub fn expected_rounds(plan: &ScalingPlan) -> usize {
    Interleave::new(plan.trial)
        .total(plan.total)
        .expected_rounds(plan.variants().len())
}

fn per_trial(report: &InterleaveReport, name: &str, f: impl Fn(&TrialResult) -> f64) -> f64 {
    let v: Vec<f64> = report
        .measured()
        .filter_map(|r| r.trial(name))
        .map(f)
        .collect();
    stats::median(&v).unwrap_or(f64::NAN)
}

/// The points of an interleaved run.
pub fn summarise(plan: &ScalingPlan, report: &InterleaveReport) -> Vec<ScalingPoint> {
    let fewest = plan.fewest();
    let mut out = Vec::new();
    for (name, interface, pipes) in plan.variants() {
        let Some(v) = report.variant(&name) else {
            continue;
        };
        let base = label(interface, fewest);
        let rel = (pipes != fewest)
            .then(|| report.ratio(&name, &base))
            .flatten();
        let ns = |side: &str| {
            v.median_ns_per_packet
                .get(side)
                .copied()
                .unwrap_or(f64::NAN)
        };
        let nic_busy = per_trial(report, &name, |t| {
            t.busy_fraction("nic").unwrap_or(f64::NAN)
        });
        let app_busy = per_trial(report, &name, |t| {
            t.busy_fraction("app").unwrap_or(f64::NAN)
        });
        let notif = per_trial(report, &name, |t| {
            t.extra.get("rx_notifications").copied().unwrap_or(0.0) / t.packets.max(1) as f64
        });
        let drops: u64 = report
            .measured()
            .filter_map(|r| r.trial(&name))
            .map(|t| t.extra.get("drops").copied().unwrap_or(0.0) as u64)
            .sum();
        out.push(ScalingPoint {
            interface: interface.name().to_string(),
            pipes,
            flows: plan.flows(pipes),
            mpps: v.median_mpps,
            mpps_range: [v.min_mpps, v.max_mpps],
            gbps: v.median_wire_gbps,
            relative_to_fewest: if pipes == fewest {
                Some(1.0)
            } else {
                rel.as_ref().map(|r| r.median)
            },
            relative_range: rel.as_ref().map(|r| [r.min, r.max]),
            nic_ns_per_pkt: ns("nic"),
            app_ns_per_pkt: ns("app"),
            nic_busy,
            app_busy,
            bottleneck: bottleneck(nic_busy, app_busy).to_string(),
            packets_per_notification: (interface == Interface::Enso && notif > 0.0)
                .then(|| 1.0 / notif),
            drops,
            contended_trials: v.contended_trials,
            trials: v.trials,
        });
    }
    out
}

fn opt(x: Option<f64>, prec: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
}

/// One row per point.
pub fn table(points: &[ScalingPoint]) -> Table {
    let mut t = Table::new([
        "interface",
        "pipes/queues",
        "flows",
        "Mpps",
        "min..max",
        "vs fewest",
        "NIC ns/pkt",
        "app ns/pkt",
        "limit",
        "pkts/notif",
        "drops",
        "contended",
    ]);
    for p in points {
        t.push([
            p.interface.clone(),
            p.pipes.to_string(),
            p.flows.to_string(),
            format!("{:.2}", p.mpps),
            format!("{:.2}..{:.2}", p.mpps_range[0], p.mpps_range[1]),
            opt(p.relative_to_fewest, 2),
            format!("{:.1}", p.nic_ns_per_pkt),
            format!("{:.1}", p.app_ns_per_pkt),
            p.bottleneck.clone(),
            opt(p.packets_per_notification, 1),
            p.drops.to_string(),
            format!("{}/{}", p.contended_trials, p.trials),
        ]);
    }
    t
}

/// What the run says, in words: each interface's rate at the most pipes
/// against the fewest.
pub fn interpretation(points: &[ScalingPoint]) -> Vec<String> {
    let mut by: BTreeMap<&str, Vec<&ScalingPoint>> = BTreeMap::new();
    for p in points {
        by.entry(p.interface.as_str()).or_default().push(p);
    }
    let mut lines = Vec::new();
    for (iface, ps) in by {
        let (Some(lo), Some(hi)) = (
            ps.iter().min_by_key(|p| p.pipes),
            ps.iter().max_by_key(|p| p.pipes),
        ) else {
            continue;
        };
        if lo.pipes == hi.pipes {
            continue;
        }
        let rel = hi.relative_to_fewest;
        let verb = match rel {
            Some(r) if r >= 0.9 => "kept",
            Some(r) if r >= 0.5 => "lost some of",
            Some(_) => "lost most of",
            None => "has no ratio for",
        };
        lines.push(format!(
            "{iface}: {:.2} Mpps with {} against {:.2} with {}: it {verb} its rate ({} of the \
             rate with {}, median of per-round ratios; limit {} -> {}).",
            hi.mpps,
            hi.pipes,
            lo.mpps,
            lo.pipes,
            opt(rel, 2),
            lo.pipes,
            lo.bottleneck,
            hi.bottleneck
        ));
    }
    lines
}

/// The figure: Mpps against pipes (log axis at the counts measured), one
/// line per interface, contended points ringed. `placement`: the cores and
/// probe, for the title.
pub fn chart(points: &[ScalingPoint], wire_size: usize, placement: &str) -> LineChart {
    let mut c = LineChart::new(
        &format!(
            "Echo rate (Mpps, log axis) vs pipes or RSS queues, one application core, {wire_size} B\n{placement}"
        ),
        "pipes (Ensō) or RSS queues (packetized), log axis",
        "echoed packets (Mpps, median), log axis",
    )
    .log_x()
    .log_y()
    .flagged_label("trials on shared cores");
    for (ci, iface) in ["enso", "packetized"].into_iter().enumerate() {
        let mut pts = Vec::new();
        let mut flagged = Vec::new();
        // A log axis has no room for a rate of zero (a trial that moved
        // nothing); such a point is left out.
        for p in points
            .iter()
            .filter(|p| p.interface == iface && p.mpps > 0.0)
        {
            if p.contended_trials * 2 > p.trials {
                flagged.push(pts.len());
            }
            pts.push((f64::from(p.pipes), p.mpps));
        }
        if pts.is_empty() {
            continue;
        }
        let mut s = Series::new(iface, pts);
        s.colour = Some(ci);
        s.dashed = iface == "packetized";
        s.flagged = flagged;
        c = c.push(s);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interleave::variant;

    #[test]
    fn plans_check_their_counts() {
        let ok = ScalingPlan::new(DEFAULT_COUNTS.to_vec());
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(ok.variants().len(), 8);
        assert_eq!(ok.variants()[7].0, "packetized x1024");
        assert_eq!(ok.fewest(), 1);
        for (counts, e) in [
            (vec![], "no pipe counts given"),
            (vec![0], "pipe count 0 is outside 1..=1024"),
            (vec![1, 2048], "pipe count 2048 is outside 1..=1024"),
            (vec![2, 32, 2], "pipe count 2 is given twice"),
        ] {
            assert_eq!(ScalingPlan::new(counts).check(), Err(e.to_string()));
        }
        let mut w = ScalingPlan::new(vec![1]);
        w.window = 2048;
        assert!(w.check().unwrap_err().contains("can overflow"));
    }

    #[test]
    fn every_pipe_gets_flows() {
        let p = ScalingPlan::new(DEFAULT_COUNTS.to_vec());
        assert_eq!(p.flows(1), MIN_FLOWS);
        assert_eq!(p.flows(32), 128);
        assert_eq!(p.flows(1024), 4096);
        let r = p.rig(Interface::Packetized, 1024);
        assert_eq!((r.pipes, r.flows, r.rx_ring), (1024, 4096, 1024));
        assert_eq!(r.window, Some(512));
    }

    fn fake(name: String, mpps: f64) -> impl Variant {
        variant(name, move |d: Duration| {
            let packets = (mpps * d.as_secs_f64() * 1e6) as u64;
            let ns = d.as_nanos() as u64;
            TrialResult {
                packets,
                bytes: packets * 60,
                elapsed: d,
                busy_ns: [("nic".to_string(), ns), ("app".to_string(), ns / 2)].into(),
                extra: [("rx_notifications".to_string(), packets as f64 / 4.0)].into(),
                ..Default::default()
            }
        })
    }

    #[test]
    fn rates_are_relative_to_the_fewest_pipes() {
        let plan = ScalingPlan::new(vec![1, 32, 1024]);
        let rates = [20.0, 19.0, 18.0, 10.0, 8.0, 4.0];
        let mut vs: Vec<_> = plan
            .variants()
            .into_iter()
            .zip(rates)
            .map(|((n, _, _), r)| fake(n, r))
            .collect();
        let mut refs: Vec<&mut dyn Variant> =
            vs.iter_mut().map(|v| v as &mut dyn Variant).collect();
        let report = Interleave::new(Duration::from_millis(5))
            .rounds(2)
            .warmup(0)
            .no_probe()
            .run(&Placement::pick(), &mut refs);
        let pts = summarise(&plan, &report);
        assert_eq!(pts.len(), 6);
        let rel: Vec<f64> = pts.iter().map(|p| p.relative_to_fewest.unwrap()).collect();
        for (got, want) in rel.iter().zip([1.0, 0.95, 0.9, 1.0, 0.8, 0.4]) {
            assert!((got - want).abs() < 0.02, "{rel:?}");
        }
        assert_eq!(pts[0].packets_per_notification.map(f64::round), Some(4.0));
        assert_eq!(pts[3].packets_per_notification, None);
        assert_eq!(pts[0].bottleneck, "nic");
        let words = interpretation(&pts).join("\n");
        assert!(words.contains("enso: 18.00 Mpps with 1024"), "{words}");
        assert!(words.contains("kept its rate"), "{words}");
        assert!(
            words.contains("packetized") && words.contains("lost most of"),
            "{words}"
        );
        let c = chart(&pts, 64, "cores 0,1");
        assert_eq!(c.series.len(), 2);
        assert!(c.title.contains("Mpps") && c.title.contains("cores 0,1"));
        assert_eq!(table(&pts).rows.len(), 6);
    }
}
