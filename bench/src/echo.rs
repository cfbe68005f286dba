//! Experiment: packet rate of the echo server (or an rx loop) on the
//! emulated NIC, Ensō vs packetized, against the reference datapath.
//!
//! Each interface is a [`Rig`] (NIC engine with its built-in generator on
//! side A, application on side B); the reference ring ([`RefVariant`]) runs
//! the same direction(s) on the same two cores at the same frame size. The
//! three run interleaved ([`Interleave`]), so every ratio (Ensō/packetized,
//! each/reference) is a median of per-round ratios.
//!
//! Each side's busy time per packet is reported, and its inverse, the rate
//! that side could sustain alone ("capacity"): when the NIC engine is the
//! busy side, the emulated NIC, not the interface, limits the rate, and the
//! application's capacity is the better measure of the interface's cost.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::emu::{Interface, Rig, RigConfig};
use crate::interleave::{Interleave, InterleaveReport, Order, TrialResult, Variant};
use crate::placement::{Placement, Side};
use crate::progress::Progress;
use crate::refring::{self, Mode, RefConfig, RefVariant};
use crate::results::Table;
use crate::stats;

/// Name of the reference variant in reports.
pub const REFERENCE: &str = "reference";

/// A side busier than this share of the window is taken as the limit.
pub const BOTTLENECK_BUSY: f64 = 0.85;

/// How to run the experiment at one packet size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EchoPlan {
    /// Interfaces to measure, in this order.
    pub interfaces: Vec<Interface>,
    /// Rig settings shared by the interfaces (interface field ignored).
    pub rig: RigConfig,
    /// Frames per commit/release of the reference ring.
    pub reference_batch: usize,
    /// Length of one trial.
    pub trial: Duration,
    /// Interleaved run length per size (warm-up round included).
    pub total: Duration,
    /// Whether to run the reference at all.
    pub reference: bool,
}

/// One interface (or the reference) at one size, as printed and saved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EchoSummary {
    /// `enso`, `packetized` or `reference`.
    pub interface: String,
    /// `echo` or `rx`.
    pub mode: Mode,
    /// Packet size on the wire, with FCS.
    pub pkt_size: usize,
    /// Frame bytes in memory (no FCS).
    pub frame_bytes: usize,
    /// Median packet rate over rounds.
    pub mpps: f64,
    /// Slowest and fastest trial.
    pub mpps_range: [f64; 2],
    /// Ethernet line rate the median rate fills (frame + 24 B per packet).
    pub gbps: f64,
    /// Frame bytes only.
    pub goodput_gbps: f64,
    /// NIC engine busy ns per packet (`Stats.engine.busy_ns` delta /
    /// packets); for the reference, its producer.
    pub nic_ns_per_pkt: f64,
    /// Application busy ns per packet; for the reference, its consumer.
    pub app_ns_per_pkt: f64,
    /// Share of the window the NIC engine was busy.
    pub nic_busy: f64,
    /// Share of the window the application was busy.
    pub app_busy: f64,
    /// 1e3 / nic_ns_per_pkt: what the emulated NIC could move alone, Mpps.
    pub nic_capacity_mpps: f64,
    /// 1e3 / app_ns_per_pkt: what the application could handle if the NIC
    /// kept up, Mpps.
    pub app_capacity_mpps: f64,
    /// `nic`, `app`, or `neither` (both sides waited: in-flight window,
    /// batching or cross-core latency); for the reference, `producer`,
    /// `consumer` or `neither`.
    pub bottleneck: String,
    /// RX notifications per packet (Ensō only).
    pub notifications_per_pkt: Option<f64>,
    /// Packets per RX notification (Ensō only): the k_rx of the PCIe model.
    pub packets_per_notification: Option<f64>,
    /// TX notifications per packet (Ensō echo only).
    pub tx_notifications_per_pkt: Option<f64>,
    /// PCIe link bytes per packet, device to host (Gen3 x16 TLP model).
    pub pcie_up_per_pkt: Option<f64>,
    /// PCIe link bytes per packet, host to device.
    pub pcie_down_per_pkt: Option<f64>,
    /// Share of PCIe link bytes that are metadata.
    pub pcie_metadata_fraction: Option<f64>,
    /// Frames the NIC dropped, by cause, over all measured trials.
    pub drops: BTreeMap<String, u64>,
    /// Frames sent that neither came back nor were counted as drops (should
    /// be 0).
    pub unaccounted: i64,
    /// Packets counted over all measured trials.
    pub packets: u64,
    /// Median reference rate over the same rounds, Mpps.
    pub reference_mpps: Option<f64>,
    /// Frames per batch of the reference ring.
    pub reference_batch: usize,
    /// Median over rounds of this rate / the reference's.
    pub ratio_to_reference: Option<f64>,
    /// Per-round range of that ratio.
    pub ratio_to_reference_range: Option<[f64; 2]>,
    /// Ensō / packetized, median of per-round ratios (with both interfaces).
    pub speedup: Option<f64>,
    /// Per-round range of the speedup.
    pub speedup_range: Option<[f64; 2]>,
    /// Ensō / packetized application capacity, median of per-round ratios.
    pub app_capacity_speedup: Option<f64>,
    /// Median cross-core round trip of the probes before each round, ns.
    pub probe_rtt_ns: Option<f64>,
    /// Smallest and largest probe.
    pub probe_rtt_range_ns: Option<[f64; 2]>,
    /// Whether any measured trial shared its cores with other work.
    pub contended: bool,
    /// How many did.
    pub contended_trials: usize,
    /// Measured trials.
    pub trials: usize,
    /// Core of the NIC engine (and generator), and of the application.
    pub cores: Cores,
    /// Pipes (Ensō) or queues (packetized).
    pub pipes: u32,
    /// Generator flows.
    pub flows: u32,
    /// Generator in-flight window (echo).
    pub window: Option<u64>,
    /// Trial length, ms.
    pub trial_ms: u64,
    /// Anything a reader must know to interpret the numbers.
    pub notes: Vec<String>,
}

/// Where the threads ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cores {
    /// NIC engine and its built-in generator (reference: producer).
    pub nic: Option<usize>,
    /// Application (reference: consumer).
    pub app: Option<usize>,
}

/// Everything one size measured.
#[derive(Debug, Serialize, Deserialize)]
pub struct EchoRun {
    /// Per interface, then the reference.
    pub summaries: Vec<EchoSummary>,
    /// The interleaved trials.
    pub report: InterleaveReport,
}

/// Runs the plan at its size; rigs are started first and stopped after.
pub fn run(
    plan: &EchoPlan,
    placement: &Placement,
    progress: &mut Progress,
) -> Result<EchoRun, String> {
    let mut rigs = Vec::new();
    for &i in &plan.interfaces {
        let cfg = RigConfig {
            interface: i,
            ..plan.rig.clone()
        };
        rigs.push(Rig::start(i.name(), cfg, placement)?);
    }
    let mut reference = if plan.reference {
        let mode = plan.rig.mode;
        Some(
            RefVariant::new(
                REFERENCE,
                RefConfig {
                    mode,
                    ring_bytes: 2 << 20,
                    batch: plan.reference_batch,
                },
                refring::udp_templates(plan.rig.wire_size, plan.rig.flows),
                placement.clone(),
            )
            .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    let mut interleave = Interleave::new(plan.trial)
        .total(plan.total)
        .warmup(1)
        .order(Order::Rotate);
    if reference.is_some() {
        interleave = interleave.reference(REFERENCE);
    }
    let report = {
        let mut variants: Vec<&mut dyn Variant> =
            rigs.iter_mut().map(|r| r as &mut dyn Variant).collect();
        if let Some(r) = reference.as_mut() {
            variants.push(r);
        }
        interleave.run_with(placement, &mut variants, progress)
    };
    for r in &rigs {
        if let Some(e) = r.error() {
            return Err(format!("{}: {e}", r.config().interface));
        }
    }
    drop(rigs);
    let summaries = summarise(plan, placement, &report);
    Ok(EchoRun { summaries, report })
}

fn trials<'a>(
    report: &'a InterleaveReport,
    name: &'a str,
) -> impl Iterator<Item = &'a TrialResult> {
    report.measured().filter_map(move |r| r.trial(name))
}

fn median_by(report: &InterleaveReport, name: &str, f: impl Fn(&TrialResult) -> f64) -> f64 {
    let v: Vec<f64> = trials(report, name).map(f).collect();
    stats::median(&v).unwrap_or(f64::NAN)
}

fn per_packet(t: &TrialResult, key: &str) -> f64 {
    match t.extra.get(key) {
        Some(v) if t.packets > 0 => v / t.packets as f64,
        _ => f64::NAN,
    }
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Which side limited the rate: the busier one if it was busy most of the
/// time, else neither.
pub fn bottleneck(nic_busy: f64, app_busy: f64) -> &'static str {
    if nic_busy.max(app_busy) < BOTTLENECK_BUSY || !(nic_busy.is_finite() && app_busy.is_finite()) {
        "neither"
    } else if nic_busy >= app_busy {
        "nic"
    } else {
        "app"
    }
}

/// The per-variant summaries of an interleaved run.
pub fn summarise(
    plan: &EchoPlan,
    placement: &Placement,
    report: &InterleaveReport,
) -> Vec<EchoSummary> {
    let has = |n: &str| report.variant(n).is_some();
    let both = has("enso") && has("packetized");
    let speedup = both.then(|| report.ratio("enso", "packetized")).flatten();
    let capacity = |t: &TrialResult| 1e3 / t.ns_per_packet("app").unwrap_or(f64::NAN);
    let app_capacity_speedup = both
        .then(|| report.ratio_by("enso", "packetized", capacity))
        .flatten();
    let reference_mpps = report.variant(REFERENCE).map(|v| v.median_mpps);
    let probe = report.probe_range_ns.map(|(a, b)| [a, b]);
    let mut out = Vec::new();
    for v in &report.variants {
        let name = v.name.as_str();
        let is_ref = name == REFERENCE;
        let (nic_side, app_side) = if is_ref {
            ("producer", "consumer")
        } else {
            ("nic", "app")
        };
        let nic_ns = v
            .median_ns_per_packet
            .get(nic_side)
            .copied()
            .unwrap_or(f64::NAN);
        let app_ns = v
            .median_ns_per_packet
            .get(app_side)
            .copied()
            .unwrap_or(f64::NAN);
        let nic_busy = median_by(report, name, |t| {
            t.busy_fraction(nic_side).unwrap_or(f64::NAN)
        });
        let app_busy = median_by(report, name, |t| {
            t.busy_fraction(app_side).unwrap_or(f64::NAN)
        });
        let enso = name == "enso";
        let notif = median_by(report, name, |t| per_packet(t, "rx_notifications"));
        let tx_notif = median_by(report, name, |t| per_packet(t, "tx_notifications"));
        let up = median_by(report, name, |t| per_packet(t, "pcie_up_bytes"));
        let down = median_by(report, name, |t| per_packet(t, "pcie_down_bytes"));
        let meta = median_by(report, name, |t| {
            let total = t.extra.get("pcie_up_bytes").copied().unwrap_or(0.0)
                + t.extra.get("pcie_down_bytes").copied().unwrap_or(0.0);
            t.extra
                .get("pcie_metadata_bytes")
                .copied()
                .unwrap_or(f64::NAN)
                / total
        });
        let mut drops: BTreeMap<String, u64> = BTreeMap::new();
        let mut unaccounted = 0i64;
        let mut packets = 0u64;
        let mut undrained = 0;
        for t in trials(report, name) {
            packets += t.packets;
            for (k, x) in &t.extra {
                if let Some(cause) = k.strip_prefix("drop_") {
                    *drops.entry(cause.to_string()).or_insert(0) += *x as u64;
                }
            }
            unaccounted += t.extra.get("unaccounted").copied().unwrap_or(0.0) as i64;
            if t.extra.get("drained") == Some(&0.0) {
                undrained += 1;
            }
        }
        // Only against the reference ring: without it the report's
        // reference is merely the first variant, not a ratio to the ring.
        let ratio = report
            .variant(REFERENCE)
            .and_then(|_| report.ratio(name, &report.reference));
        let mut notes = placement.notes.clone();
        if undrained > 0 {
            notes.push(format!(
                "{undrained} trials did not drain within the timeout: frames were still in flight"
            ));
        }
        if v.contended_trials > 0 {
            notes.push(format!(
                "{} of {} trials shared their cores with other work: their rates are low",
                v.contended_trials, v.trials
            ));
        }
        let (nic_core, app_core) = (placement.core(Side::A), placement.core(Side::B));
        out.push(EchoSummary {
            interface: name.to_string(),
            mode: plan.rig.mode,
            pkt_size: plan.rig.wire_size,
            frame_bytes: plan.rig.frame_len(),
            mpps: v.median_mpps,
            mpps_range: [v.min_mpps, v.max_mpps],
            gbps: v.median_wire_gbps,
            goodput_gbps: v.median_goodput_gbps,
            nic_ns_per_pkt: nic_ns,
            app_ns_per_pkt: app_ns,
            nic_busy,
            app_busy,
            nic_capacity_mpps: 1e3 / nic_ns,
            app_capacity_mpps: 1e3 / app_ns,
            // The reference ring has no NIC or application: its sides are
            // the producer and the consumer.
            bottleneck: match (is_ref, bottleneck(nic_busy, app_busy)) {
                (true, "nic") => "producer",
                (true, "app") => "consumer",
                (_, b) => b,
            }
            .to_string(),
            notifications_per_pkt: enso.then(|| finite(notif)).flatten(),
            packets_per_notification: enso.then(|| finite(1.0 / notif)).flatten(),
            tx_notifications_per_pkt: (enso && plan.rig.mode == Mode::Echo)
                .then(|| finite(tx_notif))
                .flatten(),
            pcie_up_per_pkt: (!is_ref).then(|| finite(up)).flatten(),
            pcie_down_per_pkt: (!is_ref).then(|| finite(down)).flatten(),
            pcie_metadata_fraction: (!is_ref).then(|| finite(meta)).flatten(),
            drops,
            unaccounted,
            packets,
            reference_mpps,
            reference_batch: plan.reference_batch,
            ratio_to_reference: ratio.as_ref().map(|r| r.median),
            ratio_to_reference_range: ratio.as_ref().map(|r| [r.min, r.max]),
            speedup: (both && !is_ref)
                .then(|| speedup.as_ref().map(|r| r.median))
                .flatten(),
            speedup_range: (both && !is_ref)
                .then(|| speedup.as_ref().map(|r| [r.min, r.max]))
                .flatten(),
            app_capacity_speedup: (both && !is_ref)
                .then(|| app_capacity_speedup.as_ref().map(|r| r.median))
                .flatten(),
            probe_rtt_ns: report.probe_median_ns,
            probe_rtt_range_ns: probe,
            contended: v.contended_trials > 0,
            contended_trials: v.contended_trials,
            trials: v.trials,
            cores: Cores {
                nic: nic_core,
                app: app_core,
            },
            pipes: plan.rig.pipes,
            flows: plan.rig.flows,
            window: (plan.rig.mode == Mode::Echo)
                .then_some(plan.rig.window)
                .flatten(),
            trial_ms: plan.trial.as_millis() as u64,
            notes,
        });
    }
    out
}

fn fmt_opt(x: Option<f64>, prec: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
}

/// One row per summary: the table printed and written to summary.md.
pub fn table(summaries: &[EchoSummary]) -> Table {
    let mut t = Table::new([
        "size",
        "interface",
        "Mpps",
        "min..max",
        "Gb/s",
        "NIC ns/pkt",
        "app ns/pkt",
        "NIC busy",
        "app busy",
        "app capacity Mpps",
        "limit",
        "notif/pkt",
        "drops",
        "ratio to ref",
    ]);
    for s in summaries {
        let is_ref = s.interface == REFERENCE;
        t.push([
            s.pkt_size.to_string(),
            s.interface.clone(),
            format!("{:.2}", s.mpps),
            format!("{:.2}..{:.2}", s.mpps_range[0], s.mpps_range[1]),
            format!("{:.1}", s.gbps),
            format!("{:.1}", s.nic_ns_per_pkt),
            format!("{:.1}", s.app_ns_per_pkt),
            format!("{:.0}%", s.nic_busy * 100.0),
            format!("{:.0}%", s.app_busy * 100.0),
            format!("{:.1}", s.app_capacity_mpps),
            if is_ref {
                "-".to_string()
            } else {
                s.bottleneck.clone()
            },
            fmt_opt(s.notifications_per_pkt, 4),
            s.drops.values().sum::<u64>().to_string(),
            fmt_opt(s.ratio_to_reference, 3),
        ]);
    }
    t
}

/// What limited each interface, in words.
pub fn interpretation(summaries: &[EchoSummary]) -> Vec<String> {
    let mut lines = Vec::new();
    for s in summaries.iter().filter(|s| s.interface != REFERENCE) {
        let line = match s.bottleneck.as_str() {
            "nic" => format!(
                "{} at {} B: the emulated NIC limited the rate (engine busy {:.0}% of the time, \
                 {:.1} ns per packet); the application was busy {:.0}% and could handle \
                 about {:.1} Mpps ({:.1} ns per packet) if the NIC kept up, so compare the \
                 interfaces by application cost, not by rate.",
                s.interface,
                s.pkt_size,
                s.nic_busy * 100.0,
                s.nic_ns_per_pkt,
                s.app_busy * 100.0,
                s.app_capacity_mpps,
                s.app_ns_per_pkt
            ),
            "app" => format!(
                "{} at {} B: the application limited the rate (busy {:.0}%, {:.1} ns per \
                 packet); the NIC engine was busy {:.0}%.",
                s.interface,
                s.pkt_size,
                s.app_busy * 100.0,
                s.app_ns_per_pkt,
                s.nic_busy * 100.0
            ),
            _ if s.contended => format!(
                "{} at {} B: neither side was busy most of the time (NIC {:.0}%, application \
                 {:.0}%), but {} of {} trials shared their cores with other work, which idles \
                 both sides too: no conclusion on the limit from this run.",
                s.interface,
                s.pkt_size,
                s.nic_busy * 100.0,
                s.app_busy * 100.0,
                s.contended_trials,
                s.trials
            ),
            _ => format!(
                "{} at {} B: neither side was busy most of the time (NIC {:.0}%, application \
                 {:.0}%): the rate is bound by latency (the in-flight window, batching, the \
                 cross-core round trip).",
                s.interface,
                s.pkt_size,
                s.nic_busy * 100.0,
                s.app_busy * 100.0
            ),
        };
        lines.push(line);
    }
    // One line per size: a sweep has a speedup at every size.
    let mut sizes: Vec<usize> = Vec::new();
    for s in summaries {
        if !sizes.contains(&s.pkt_size) {
            sizes.push(s.pkt_size);
        }
    }
    for size in sizes {
        let by = |n: &str| {
            summaries
                .iter()
                .find(|s| s.interface == n && s.pkt_size == size)
        };
        let (Some(e), Some(_)) = (by("enso"), by("packetized")) else {
            continue;
        };
        if let Some(sp) = e.speedup {
            let mut l = format!(
                "Ensō / packetized at {} B: {:.2}x the packet rate (median of per-round ratios",
                e.pkt_size, sp
            );
            if let Some([lo, hi]) = e.speedup_range {
                let _ = write!(l, ", {lo:.2}..{hi:.2}");
            }
            l.push(')');
            if let Some(c) = e.app_capacity_speedup {
                let _ = write!(l, " and {c:.2}x the application capacity");
            }
            l.push('.');
            lines.push(l);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interleave::variant;

    fn fake(name: &str, mpps: f64, nic_busy: f64, app_busy: f64) -> impl Variant {
        let name = name.to_string();
        let is_ref = name == REFERENCE;
        variant(name, move |d: Duration| {
            let ns = d.as_nanos() as u64;
            let packets = (mpps * d.as_secs_f64() * 1e6) as u64;
            let (a, b) = if is_ref {
                ("producer", "consumer")
            } else {
                ("nic", "app")
            };
            TrialResult {
                packets,
                bytes: packets * 60,
                elapsed: d,
                busy_ns: [
                    (a.to_string(), (ns as f64 * nic_busy) as u64),
                    (b.to_string(), (ns as f64 * app_busy) as u64),
                ]
                .into(),
                extra: [
                    ("rx_notifications".to_string(), packets as f64 / 8.0),
                    ("drop_pipe_full".to_string(), 2.0),
                    ("unaccounted".to_string(), 0.0),
                ]
                .into(),
                ..Default::default()
            }
        })
    }

    #[test]
    fn summaries_carry_ratios_capacity_and_bottleneck() {
        let mut e = fake("enso", 20.0, 0.99, 0.5);
        let mut p = fake("packetized", 10.0, 0.6, 0.98);
        let mut r = fake(REFERENCE, 40.0, 0.9, 0.3);
        let report = Interleave::new(Duration::from_millis(10))
            .rounds(3)
            .warmup(0)
            .no_probe()
            .reference(REFERENCE)
            .run(&Placement::pick(), &mut [&mut e, &mut p, &mut r]);
        let plan = EchoPlan {
            interfaces: Interface::BOTH.to_vec(),
            rig: RigConfig::new(Interface::Enso, Mode::Echo, 64),
            reference_batch: 32,
            trial: Duration::from_millis(10),
            total: Duration::from_millis(30),
            reference: true,
        };
        let s = summarise(&plan, &Placement::pick(), &report);
        assert_eq!(s.len(), 3);
        let (en, pk, rf) = (&s[0], &s[1], &s[2]);
        assert_eq!(en.interface, "enso");
        assert!((en.speedup.unwrap() - 2.0).abs() < 1e-6);
        assert!((en.ratio_to_reference.unwrap() - 0.5).abs() < 1e-6);
        assert!((pk.ratio_to_reference.unwrap() - 0.25).abs() < 1e-6);
        assert_eq!(rf.speedup, None);
        assert_eq!(en.bottleneck, "nic");
        assert_eq!(pk.bottleneck, "app");
        assert_eq!(rf.bottleneck, "producer", "the reference has no NIC");
        // 20 Mpps with the app busy half the time: 25 ns per packet.
        assert!(
            (en.app_ns_per_pkt - 25.0).abs() < 0.1,
            "{}",
            en.app_ns_per_pkt
        );
        assert!((en.app_capacity_mpps - 40.0).abs() < 0.2);
        assert!((en.notifications_per_pkt.unwrap() - 0.125).abs() < 1e-3);
        assert!((en.packets_per_notification.unwrap() - 8.0).abs() < 0.1);
        assert_eq!(
            pk.notifications_per_pkt, None,
            "only Ensō has notifications"
        );
        assert_eq!(en.drops["pipe_full"], 6, "summed over 3 trials");
        assert_eq!(en.reference_mpps, Some(40.0));
        // capacity: enso 40, packetized 10/0.98 -> ratio ~3.92
        assert!((en.app_capacity_speedup.unwrap() - 3.92).abs() < 0.01);
        assert!(!en.contended);
        let t = table(&s);
        assert_eq!(t.rows.len(), 3);
        let words = interpretation(&s).join("\n");
        assert!(
            words.contains("the emulated NIC limited the rate"),
            "{words}"
        );
        assert!(words.contains("2.00x the packet rate"), "{words}");
    }

    /// Summaries of `rounds` rounds of a fake Ensō at 20 Mpps and a fake
    /// packetized side at 10, without the reference ring.
    fn summaries_without_reference(rounds: usize) -> Vec<EchoSummary> {
        let mut e = fake("enso", 20.0, 0.99, 0.5);
        let mut p = fake("packetized", 10.0, 0.6, 0.98);
        let report = Interleave::new(Duration::from_millis(10))
            .rounds(rounds)
            .warmup(0)
            .no_probe()
            .run(&Placement::pick(), &mut [&mut e, &mut p]);
        let plan = EchoPlan {
            interfaces: Interface::BOTH.to_vec(),
            rig: RigConfig::new(Interface::Enso, Mode::Echo, 64),
            reference_batch: 32,
            trial: Duration::from_millis(10),
            total: Duration::from_millis(20),
            reference: false,
        };
        summarise(&plan, &Placement::pick(), &report)
    }

    #[test]
    fn without_the_reference_ring_there_is_no_ratio_to_it() {
        let s = summaries_without_reference(2);
        for x in &s {
            assert_eq!(x.reference_mpps, None, "{}", x.interface);
            assert_eq!(x.ratio_to_reference, None, "{}", x.interface);
            assert_eq!(x.ratio_to_reference_range, None, "{}", x.interface);
        }
        let t = table(&s);
        let col = t.headers.iter().position(|h| h == "ratio to ref").unwrap();
        assert!(t.rows.iter().all(|r| r[col] == "-"), "{:?}", t.rows);
        assert!((s[0].speedup.unwrap() - 2.0).abs() < 1e-6);
    }

    #[test]
    fn a_sweep_says_the_speedup_at_every_size() {
        let mut all = summaries_without_reference(1);
        let mut large = all.clone();
        for s in &mut large {
            s.pkt_size = 1518;
            s.speedup = Some(1.25);
        }
        all.extend(large);
        let words = interpretation(&all).join("\n");
        assert!(words.contains("at 64 B: 2.00x the packet rate"), "{words}");
        assert!(
            words.contains("at 1518 B: 1.25x the packet rate"),
            "{words}"
        );
    }

    #[test]
    fn bottleneck_needs_a_busy_side() {
        assert_eq!(bottleneck(0.99, 0.4), "nic");
        assert_eq!(bottleneck(0.5, 0.9), "app");
        assert_eq!(bottleneck(0.5, 0.6), "neither");
        assert_eq!(bottleneck(f64::NAN, 0.9), "neither");
    }
}
