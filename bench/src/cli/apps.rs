//! `bench apps`: the paper's applications (Maglev, KV, telemetry, log
//! monitor) on both interfaces, one body of logic each, in alternating
//! trials; throughput, application busy time per unit and the speedup.

use std::path::PathBuf;
use std::time::Duration;

use bench::app_trial::{run_trial, AppKind, KvLoad, LoadArgs, LogLoad, TrialOptions, TrialResult};
use bench::placement::Side;
use bench::plot::{HBar, HBarChart};
use bench::probe::{self, PlacementClass, APART_FROM_NS, SIBLINGS_BELOW_NS};
use bench::results::Table;
use clap::Args;
use enso_apps::maglev::FlowWorkload;
use enso_apps::nic::Interface;
use serde::Serialize;

use super::Given;
use crate::Common;

/// What `--json` prints.
const JSON_HELP: &str = "Print the results as one JSON array on stdout, one object per row \
    (application, and Maglev's flows, the log monitor's pattern set and event share or KV's \
    batch), and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct AppsArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Applications to run (maglev, telemetry, kv, log_monitor).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "maglev,telemetry,kv,log_monitor"
    )]
    apps: Vec<String>,
    /// Log monitor: pattern sets to run it with, one row each: `all` (every
    /// built-in pattern) or services joined by `+` (sshd, nginx, postfix,
    /// apache). What a monitor costs depends on what it looks for, so the
    /// rows span a range, as the paper's "2-100 Gb/s" does; by default every
    /// built-in set, one row each, and all of them together.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "all,sshd,nginx,postfix,apache"
    )]
    log_patterns: Vec<String>,
    /// Log monitor: shares of the generated log's lines that are events the
    /// patterns detect (0..=1), one row per pattern set and share. A log
    /// with few events is cheaper to scan, so the interface's share of the
    /// cost grows: routine logs are mostly such lines.
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.02")]
    log_event_shares: Vec<f64>,
    /// KV: requests per request frame (1..=32), one row each. The fewer,
    /// the larger the share of per-frame work (the interface's included) in
    /// a request's cost.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "4,1",
        value_parser = clap::value_parser!(u64).range(1..=32)
    )]
    kv_batch: Vec<u64>,
    /// Maglev: flows the NIC's generator cycles through, one row each. The
    /// paper's two workloads are 16 flows ("cached": every flow stays in
    /// the connection table) and 1048576 ("SYN flood": far more than the
    /// table's 65536 entries, so every packet is a new flow that is looked
    /// up in the Maglev table and evicts an older one).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16,1048576",
        value_parser = clap::value_parser!(u32).range(1..=(1 << 24))
    )]
    maglev_flows: Vec<u32>,
    /// Trials per interface and application (alternating Ensō, packetized).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    rounds: u64,
    /// Measured time of a trial.
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    trial_ms: u64,
    /// Pipes (Ensō) or queues (packetized) per application.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pipes: u32,
    /// Write a results directory under results/.
    #[arg(long)]
    save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    #[serde(flatten)]
    load: LoadArgs,
}

/// One interface's figures for one application (medians over trials).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Side2 {
    /// Requests or packets per second, in millions.
    pub(crate) rate_m: f64,
    pub(crate) gbps: f64,
    pub(crate) app_ns_per_unit: f64,
    pub(crate) nic_ns_per_unit: f64,
    pub(crate) app_busy_fraction: f64,
    /// What limited the rate: the busier of the emulated NIC and the
    /// application, or the application when it was busy at least 80% of the
    /// time and the NIC dropped frames for lack of room (more than 1% of
    /// those handled: an open-loop load offered more than it took).
    pub(crate) bottleneck: &'static str,
    pub(crate) trials: Vec<f64>,
    /// KV with `--kv-load client`: the client's round-trip latency, the
    /// medians over trials of each trial's p50 and p99, ns (none where no
    /// latency was measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) p50_latency_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) p99_latency_ns: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct AppOut {
    pub(crate) app: &'static str,
    /// Log monitor: the pattern set (`all` or services joined by `+`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patterns: Option<String>,
    /// Log monitor: the share of the log's lines that are events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) log_event_share: Option<f64>,
    /// KV: requests per request frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kv_batch: Option<usize>,
    /// Maglev: flows the generator cycles through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) flows: Option<u32>,
    pub(crate) unit: &'static str,
    pub(crate) enso: Side2,
    pub(crate) packetized: Side2,
    /// Ensō rate / packetized rate, median of per-round ratios.
    pub(crate) speedup: f64,
    /// Packetized / Ensō application busy time per unit (what the interface
    /// costs the application, whatever limited the rate).
    pub(crate) app_cost_speedup: f64,
    /// The target the issue sets for `speedup`.
    pub(crate) target_speedup: f64,
    pub(crate) load: String,
    /// Cross-core probe before the row's trials...
    pub(crate) probe_rtt_ns: f64,
    /// ...and after them (the host may move the vCPUs in between).
    pub(crate) probe_after_rtt_ns: f64,
    /// Each round's pair of trials, with the placement the probes around
    /// it found.
    pub(crate) rounds: Vec<RoundOut>,
    /// The rounds grouped by placement (rounds whose placement changed
    /// during the pair left out): the speedup with the vCPUs close and
    /// with them apart can differ several times over.
    pub(crate) by_placement: Vec<PlacementOut>,
}

/// One round: an Ensō trial then a packetized one.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RoundOut {
    pub(crate) placement: PlacementClass,
    pub(crate) probe_before_ns: f64,
    pub(crate) probe_after_ns: f64,
    pub(crate) enso_rate_m: f64,
    pub(crate) packetized_rate_m: f64,
    pub(crate) speedup: f64,
}

/// The rounds of one placement.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlacementOut {
    pub(crate) placement: PlacementClass,
    pub(crate) rounds: usize,
    /// Medians over those rounds.
    pub(crate) speedup: f64,
    pub(crate) enso_rate_m: f64,
    pub(crate) packetized_rate_m: f64,
}

/// Groups `rounds` by placement, in the order siblings, close, apart;
/// rounds of a mixed placement are left out.
fn by_placement(rounds: &[RoundOut]) -> Vec<PlacementOut> {
    let mut classes: Vec<PlacementClass> = rounds
        .iter()
        .map(|r| r.placement)
        .filter(|&c| c != PlacementClass::Mixed)
        .collect();
    classes.sort();
    classes.dedup();
    classes
        .into_iter()
        .map(|c| {
            let of = |f: &dyn Fn(&RoundOut) -> f64| {
                median(rounds.iter().filter(|r| r.placement == c).map(f).collect())
            };
            PlacementOut {
                placement: c,
                rounds: rounds.iter().filter(|r| r.placement == c).count(),
                speedup: speedup_of(
                    rounds
                        .iter()
                        .filter(|r| r.placement == c)
                        .map(|r| r.speedup)
                        .collect(),
                ),
                enso_rate_m: of(&|r| r.enso_rate_m),
                packetized_rate_m: of(&|r| r.packetized_rate_m),
            }
        })
        .collect()
}

/// The table cell of [`AppOut::by_placement`]: `close 1.65 (3), apart
/// 3.61 (2)`.
fn placement_cell(v: &[PlacementOut]) -> String {
    if v.is_empty() {
        return "-".to_string();
    }
    v.iter()
        .map(|p| format!("{} {:.2} ({})", p.placement.name(), p.speedup, p.rounds))
        .collect::<Vec<_>>()
        .join(", ")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    }
}

/// A round's speedup: Ensō's rate over the packetized side's, or NaN
/// (null in JSON) when the packetized side handled nothing, where the old
/// floor of 1e-9 made it some 1e16.
fn round_ratio(enso: f64, packetized: f64) -> f64 {
    if packetized > 0.0 {
        enso / packetized
    } else {
        f64::NAN
    }
}

/// The median of the rounds' speedups that exist; NaN if none does.
fn speedup_of(ratios: Vec<f64>) -> f64 {
    let v: Vec<f64> = ratios.into_iter().filter(|r| r.is_finite()).collect();
    if v.is_empty() {
        f64::NAN
    } else {
        median(v)
    }
}

fn parse_app(s: &str) -> Result<AppKind, String> {
    match s.trim() {
        "maglev" => Ok(AppKind::Maglev),
        "telemetry" => Ok(AppKind::Telemetry),
        "kv" => Ok(AppKind::Kv),
        "log_monitor" | "logmon" => Ok(AppKind::Logmon),
        o => Err(format!(
            "unknown application {o:?} (maglev, telemetry, kv, log_monitor)"
        )),
    }
}

/// The services of a `--log-patterns` set (empty for `all`).
fn services_of(set: &str) -> Result<Vec<String>, String> {
    if set == "all" {
        return Ok(Vec::new());
    }
    let v: Vec<String> = set.split('+').map(|s| s.trim().to_string()).collect();
    enso_apps::logmon::builtin_for(&v).map_err(|e| format!("--log-patterns {set:?}: {e}"))?;
    Ok(v)
}

/// The row name: the application, and the log monitor's pattern set.
pub(crate) fn label(o: &AppOut) -> String {
    if let Some(f) = o.flows {
        return match f {
            FlowWorkload::SYN_FLOOD_FLOWS => format!("{} ({f} flows, SYN flood)", o.app),
            FlowWorkload::CACHED_FLOWS => format!("{} ({f} flows, cached)", o.app),
            _ => format!("{} ({f} flows)", o.app),
        };
    }
    match (&o.patterns, o.kv_batch) {
        (Some(p), _) => match o.log_event_share {
            Some(s) => format!("{} ({p} patterns, {} events)", o.app, percent(s)),
            None => format!("{} ({p} patterns)", o.app),
        },
        (None, Some(1)) => format!("{} (1 request per frame)", o.app),
        (None, Some(b)) => format!("{} ({b} requests per frame)", o.app),
        (None, None) => o.app.to_string(),
    }
}

/// A share as a percentage for row names: `0.3` -> `30%`, `0.025` -> `2.5%`.
fn percent(share: f64) -> String {
    format!("{}%", (share * 1000.0).round() / 10.0)
}

fn target(app: AppKind) -> f64 {
    match app {
        AppKind::Maglev | AppKind::Telemetry => 2.5,
        AppKind::Kv => 1.3,
        AppKind::Logmon => 1.5,
    }
}

/// Frames the NIC dropped because the application had not made room (a
/// full pipe, notification ring or RX ring), per unit handled: under an
/// open-loop load the NIC offered more than the application took, so the
/// application limited the rate however busy the NIC's engine was.
fn room_drop_share(r: &TrialResult) -> f64 {
    let n: u64 = ["pipe_full", "notif_ring_full", "no_rx_descriptor"]
        .iter()
        .filter_map(|k| r.nic_drops.get(*k))
        .sum();
    n as f64 / r.units.max(1) as f64
}

fn side(rs: &[TrialResult]) -> Side2 {
    let m = |f: &dyn Fn(&TrialResult) -> f64| median(rs.iter().map(f).collect());
    let app_busy = m(&|r| r.app_busy_fraction);
    let nic_busy = m(&|r| r.nic_busy_ns_per_unit * r.rate / 1e9);
    Side2 {
        rate_m: m(&|r| r.rate / 1e6),
        gbps: m(&|r| r.gbps),
        app_ns_per_unit: m(&|r| r.app_busy_ns_per_unit),
        nic_ns_per_unit: m(&|r| r.nic_busy_ns_per_unit),
        app_busy_fraction: app_busy,
        bottleneck: if nic_busy < app_busy || (m(&room_drop_share) > 0.01 && app_busy >= 0.8) {
            "app"
        } else {
            "nic"
        },
        trials: rs.iter().map(|r| r.rate / 1e6).collect(),
        p50_latency_ns: latency_median(rs, |l| l.p50_ns),
        p99_latency_ns: latency_median(rs, |l| l.p99_ns),
    }
}

/// The median over the trials that measured latency of `f` of it.
fn latency_median(
    rs: &[TrialResult],
    f: impl Fn(&enso_apps::load::LatencyStats) -> u64,
) -> Option<f64> {
    let v: Vec<f64> = rs
        .iter()
        .filter_map(|r| r.latency.as_ref())
        .filter(|l| l.count > 0)
        .map(|l| f(l) as f64)
        .collect();
    (!v.is_empty()).then(|| median(v))
}

/// The latency lines under the table: one per row whose client measured
/// round trips (KV with `--kv-load client`).
fn latency_lines(outs: &[AppOut]) -> String {
    let mut s = String::new();
    for o in outs {
        let side = |x: &Side2| match (x.p50_latency_ns, x.p99_latency_ns) {
            (Some(p50), Some(p99)) => format!("p50 {p50:.0} ns, p99 {p99:.0} ns"),
            _ => "not measured".to_string(),
        };
        if o.enso.p50_latency_ns.is_some() || o.packetized.p50_latency_ns.is_some() {
            s.push_str(&format!(
                "\n{}: client round-trip latency (medians over trials): enso {}; packetized {}.\n",
                label(o),
                side(&o.enso),
                side(&o.packetized)
            ));
        }
    }
    s
}

/// The name of an application on the command line and in results.
fn app_name(app: AppKind) -> &'static str {
    match app {
        AppKind::Logmon => "log_monitor",
        other => other.name(),
    }
}

/// Options only some applications use: (id, flag, the applications).
const APP_OPTIONS: [(&str, &str, &[AppKind]); 6] = [
    ("maglev_flows", "--maglev-flows", &[AppKind::Maglev]),
    ("log_patterns", "--log-patterns", &[AppKind::Logmon]),
    ("log_event_shares", "--log-event-shares", &[AppKind::Logmon]),
    ("log_load", "--log-load", &[AppKind::Logmon]),
    ("kv_batch", "--kv-batch", &[AppKind::Kv]),
    ("kv_load", "--kv-load", &[AppKind::Kv]),
];

/// Options of the load the NIC's built-in generator makes: (id, flag).
const GENERATOR_OPTIONS: [(&str, &str); 2] = [
    ("generator_burst", "--generator-burst"),
    ("line_rate_gbps", "--line-rate-gbps"),
];

impl AppsArgs {
    /// The applications chosen.
    fn app_kinds(&self) -> Result<Vec<AppKind>, String> {
        self.apps.iter().map(|s| parse_app(s)).collect()
    }
}

/// Checks every value before anything runs, and refuses options given
/// (`given`) that none of the applications chosen uses.
pub(crate) fn check(a: &AppsArgs, given: &Given) -> Result<(), String> {
    a.common.check()?;
    let apps = a.app_kinds()?;
    let names: Vec<&str> = apps.iter().map(|&x| app_name(x)).collect();
    super::check_unique("--apps", &names)?;
    for &share in &a.log_event_shares {
        if !(0.0..=1.0).contains(&share) {
            return Err(format!("--log-event-shares: {share} is outside 0..=1"));
        }
    }
    super::check_unique("--log-event-shares", &a.log_event_shares)?;
    let sets: Vec<&str> = a.log_patterns.iter().map(|p| p.trim()).collect();
    for set in &sets {
        services_of(set)?;
    }
    super::check_unique("--log-patterns", &sets)?;
    super::check_unique("--kv-batch", &a.kv_batch)?;
    super::check_unique("--maglev-flows", &a.maglev_flows)?;
    for (id, flag, users) in APP_OPTIONS {
        if given.has(id) && !apps.iter().any(|x| users.contains(x)) {
            let users: Vec<&str> = users.iter().map(|&x| app_name(x)).collect();
            return Err(format!(
                "{flag} applies only to {}, and --apps selects {}",
                users.join(" and "),
                names.join(", ")
            ));
        }
    }
    let generated = apps.iter().any(|&x| match x {
        AppKind::Kv => a.load.kv_load == KvLoad::Generator,
        AppKind::Logmon => a.load.log_load == LogLoad::Generator,
        AppKind::Maglev | AppKind::Telemetry => true,
    });
    if let Some((_, flag)) = GENERATOR_OPTIONS.iter().find(|(id, _)| given.has(id)) {
        if !generated {
            return Err(format!(
                "{flag} applies only to loads the NIC's generator makes, and every \
                 application chosen takes its load from a client"
            ));
        }
    }
    super::check_pipe_writes(
        given,
        a.load.tuning.evict_ahead_lines,
        a.load.tuning.evict_ahead_always,
        a.load.tuning.pipe_writes,
    )
}

/// What a run measured: where, and one row per application and variant.
pub(crate) struct Outcome {
    pub(crate) placement: bench::placement::Placement,
    pub(crate) outs: Vec<AppOut>,
}

/// Runs every row: the applications' trials, alternating interfaces, with
/// a probe before each row and after each round.
pub(crate) fn measure(a: &AppsArgs) -> Result<Outcome, String> {
    let apps = a.app_kinds()?;
    let placement = a.common.placement()?;
    // One run per application, per pattern set for the log monitor and per
    // batch size for KV.
    // (application, log monitor's pattern set and event share, KV batch,
    // Maglev's flows)
    type Run = (AppKind, Option<(String, f64)>, Option<usize>, Option<u32>);
    let mut runs: Vec<Run> = Vec::new();
    for app in apps {
        match app {
            AppKind::Logmon => {
                for &share in &a.log_event_shares {
                    for set in &a.log_patterns {
                        let set = set.trim().to_string();
                        services_of(&set)?;
                        runs.push((app, Some((set, share)), None, None));
                    }
                }
            }
            AppKind::Kv => {
                for &b in &a.kv_batch {
                    runs.push((app, None, Some(b as usize), None));
                }
            }
            AppKind::Maglev => {
                for &f in &a.maglev_flows {
                    runs.push((app, None, None, Some(f)));
                }
            }
            _ => runs.push((app, None, None, None)),
        }
    }
    let mut outs = Vec::new();
    for (app, log, kv_batch, flows) in runs {
        let (patterns, log_event_share) = match log {
            Some((p, s)) => (Some(p), Some(s)),
            None => (None, None),
        };
        let probe = probe::measure(&placement, probe::DEFAULT_DURATION);
        let opts = a.load.apply(TrialOptions {
            duration: Duration::from_millis(a.trial_ms),
            warmup: Duration::from_millis(150),
            nic_core: placement.core(Side::A),
            app_core: placement.core(Side::B),
            pipes: a.pipes,
            kv_batch: kv_batch.unwrap_or(TrialOptions::default().kv_batch),
            flows: flows.unwrap_or(TrialOptions::default().flows),
            log_services: patterns
                .as_deref()
                .map(services_of)
                .transpose()?
                .unwrap_or_default(),
            log_event_share: log_event_share.unwrap_or(enso_apps::logmon::DEFAULT_EVENT_SHARE),
            ..Default::default()
        });
        let mut per: [Vec<TrialResult>; 2] = [Vec::new(), Vec::new()];
        let mut ratios = Vec::new();
        let mut rounds = Vec::new();
        let mut before = probe.rtt_ns;
        for round in 0..a.rounds {
            let mut rates = [0.0; 2];
            for (i, iface) in Interface::ALL.into_iter().enumerate() {
                let r = run_trial(app, iface, &opts)
                    .map_err(|e| format!("{app} on {}: {e}", iface.name()))?;
                if !a.common.json {
                    eprintln!(
                        "  {app:<11}{} round {} {:<10} {:>8.3} M{}/s  app {:>7.1} ns/{}",
                        patterns
                            .as_deref()
                            .zip(log_event_share)
                            .map(|(p, s)| format!(" ({p}, {} events)", percent(s)))
                            .or(kv_batch.map(|b| format!(" (batch {b})")))
                            .or(flows.map(|f| format!(" ({f} flows)")))
                            .unwrap_or_default(),
                        round + 1,
                        iface.name(),
                        r.rate / 1e6,
                        r.unit,
                        r.app_busy_ns_per_unit,
                        r.unit.strip_suffix('s').unwrap_or(r.unit)
                    );
                }
                rates[i] = r.rate;
                per[i].push(r);
            }
            let ratio = round_ratio(rates[0], rates[1]);
            ratios.push(ratio);
            // This round's after-probe is the next one's before-probe.
            let after = probe::measure(&placement, probe::DEFAULT_DURATION).rtt_ns;
            rounds.push(RoundOut {
                placement: PlacementClass::between(before, after),
                probe_before_ns: before,
                probe_after_ns: after,
                enso_rate_m: rates[0] / 1e6,
                packetized_rate_m: rates[1] / 1e6,
                speedup: ratio,
            });
            before = after;
        }
        let [e, p] = per;
        let enso = side(&e);
        let packetized = side(&p);
        outs.push(AppOut {
            app: app_name(app),
            patterns,
            log_event_share,
            kv_batch,
            flows,
            unit: e[0].unit,
            speedup: speedup_of(ratios),
            app_cost_speedup: packetized.app_ns_per_unit / enso.app_ns_per_unit.max(1e-9),
            target_speedup: target(app),
            load: e[0].load.clone(),
            probe_rtt_ns: probe.rtt_ns,
            probe_after_rtt_ns: before,
            by_placement: by_placement(&rounds),
            rounds,
            enso,
            packetized,
        });
    }
    Ok(Outcome { placement, outs })
}

/// The table and the summary's text of a run.
pub(crate) fn summary(a: &AppsArgs, o: &Outcome) -> (Table, String) {
    let (placement, outs) = (&o.placement, &o.outs);
    let mut table = Table::new([
        "app",
        "unit",
        "enso M/s",
        "packetized M/s",
        "speedup",
        "speedup by placement (rounds)",
        "target",
        "enso app ns/unit",
        "packetized app ns/unit",
        "app cost ratio",
        "limited by (enso/packetized)",
        "probe ns (before/after)",
    ]);
    for o in outs {
        table.push([
            label(o),
            o.unit.to_string(),
            format!("{:.3}", o.enso.rate_m),
            format!("{:.3}", o.packetized.rate_m),
            format!("{:.2}", o.speedup),
            placement_cell(&o.by_placement),
            format!("{:.1}", o.target_speedup),
            format!("{:.1}", o.enso.app_ns_per_unit),
            format!("{:.1}", o.packetized.app_ns_per_unit),
            format!("{:.2}", o.app_cost_speedup),
            format!("{}/{}", o.enso.bottleneck, o.packetized.bottleneck),
            format!("{:.0}/{:.0}", o.probe_rtt_ns, o.probe_after_rtt_ns),
        ]);
    }
    let md = format!(
        "# Applications on both interfaces\n\nNIC engine on core {}, application on core {}; {} alternating trials of {} ms per interface. Where the NIC's built-in generator makes the load, it sends {} frames per engine step, {}.\n\n{}{}\n\nspeedup = Ensō rate / packetized rate (median of per-round ratios); app cost ratio = packetized / Ensō application busy ns per unit. limited by: the busier of the emulated NIC and the application, or the application when it was at least 80% busy and the NIC dropped frames for lack of room (open-loop loads); when it is the NIC, the emulator, not the interface, limits the rate. probe: the cross-core round trip of one cache line before and after the row's trials (~80 ns: the vCPUs close together; several hundred: apart). speedup by placement: the median speedup of the rounds (pairs of trials) whose probes before and after both found the vCPUs as sibling hyperthreads (probe under {SIBLINGS_BELOW_NS} ns), close (same core complex) or apart (probe from {APART_FROM_NS} ns), with the number of such rounds; a round during which the host moved the vCPUs counts in none.\n",
        core_name(placement.core(Side::A)),
        core_name(placement.core(Side::B)),
        a.rounds,
        a.trial_ms,
        a.load.generator_burst,
        if a.load.line_rate_gbps > 0.0 {
            format!("paced at {} Gb/s on the wire", a.load.line_rate_gbps)
        } else {
            "as fast as the engine makes frames (unpaced)".to_string()
        },
        table.markdown(),
        latency_lines(outs)
    );
    (table, md)
}

/// Writes a run's results into `d`.
pub(crate) fn save(
    d: &bench::results::ResultsDir,
    a: &AppsArgs,
    o: &Outcome,
) -> Result<(), String> {
    let outs = &o.outs;
    let (table, md) = summary(a, o);
    d.write_config(a).map_err(|e| e.to_string())?;
    d.write_json("apps.json", outs).map_err(|e| e.to_string())?;
    d.write_table("apps.csv", &table)
        .map_err(|e| e.to_string())?;
    d.write_summary(&md).map_err(|e| e.to_string())?;
    d.hbar_chart("apps.svg", &speedup_chart(o))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The colour of a placement in the speedup figure.
fn placement_colour(c: PlacementClass) -> usize {
    match c {
        PlacementClass::Siblings => 2,
        PlacementClass::Close => 0,
        PlacementClass::Apart => 1,
        PlacementClass::Mixed => 7,
    }
}

/// Each row's speedup as a labelled horizontal bar, its rounds' range as a
/// whisker, coloured by the placement the probes around the row found,
/// with a line at 1x.
pub(crate) fn speedup_chart(o: &Outcome) -> HBarChart {
    let probes: Vec<f64> = o
        .outs
        .iter()
        .flat_map(|r| [r.probe_rtt_ns, r.probe_after_rtt_ns])
        .collect();
    let (lo, hi) = bench::stats::min_max(&probes).unwrap_or((f64::NAN, f64::NAN));
    let mut chart = HBarChart::new(
        &format!(
            "Application speedup: Ensō rate / packetized rate (x, median of per-round ratios)\n\
             NIC engine on core {}, application on core {}; probes {lo:.0}..{hi:.0} ns",
            core_name(o.placement.core(Side::A)),
            core_name(o.placement.core(Side::B)),
        ),
        "speedup (x): Ensō / packetized; whiskers: slowest and fastest round",
    );
    chart.suffix = "x".into();
    chart.reference = Some((1.0, "1x: no speedup".into()));
    let mut used = Vec::new();
    for r in &o.outs {
        let class = PlacementClass::between(r.probe_rtt_ns, r.probe_after_rtt_ns);
        let rounds: Vec<f64> = r
            .rounds
            .iter()
            .map(|x| x.speedup)
            .filter(|x| x.is_finite())
            .collect();
        if !used.contains(&class) {
            used.push(class);
        }
        chart = chart.bar(HBar {
            label: label(r),
            value: r.speedup,
            range: bench::stats::min_max(&rounds).filter(|_| rounds.len() > 1),
            colour: placement_colour(class),
            flagged: false,
        });
    }
    used.sort();
    chart.legend = used
        .into_iter()
        .map(|c| {
            (
                placement_colour(c),
                match c {
                    PlacementClass::Mixed => "vCPUs moved during the row".to_string(),
                    c => format!("vCPUs {} (probe)", c.name()),
                },
            )
        })
        .collect();
    chart
}

pub(crate) fn run(a: &AppsArgs) -> Result<(), String> {
    let o = measure(a)?;
    let outs = &o.outs;
    let (_, md) = summary(a, &o);
    // Made only now, as the other experiments do: a run that fails or is
    // interrupted leaves no empty results directory behind (`--out` was
    // checked before the run).
    let dir = super::results_dir("apps", a.save, &a.out)?;
    if let Some(d) = &dir {
        save(d, a, &o)?;
    }
    if a.common.json {
        println!(
            "{}",
            serde_json::to_string(&outs).map_err(|e| e.to_string())?
        );
    } else {
        println!("{md}");
        if let Some(d) = &dir {
            eprintln!("results: {}", d.path().display());
        }
    }
    Ok(())
}

/// A core for the summary: its number, or "any" when unpinned.
fn core_name(core: Option<usize>) -> String {
    core.map_or_else(|| "any".to_string(), |c| c.to_string())
}

#[cfg(test)]
mod tests;
