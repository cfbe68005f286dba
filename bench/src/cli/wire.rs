//! `bench wire`: Mpps through the NIC's memif and afpacket backends beside
//! DPDK's own drivers on the same wire, interleaved.

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::Duration;

use bench::interleave::{variant, Interleave, InterleaveReport, TrialResult, Variant};
use bench::plot::BarChart;
use bench::progress::Progress;
use bench::results::Table;
use bench::wire::emu::NicMode;
use bench::wire::{median, Backend, Setup, WireEnv};
use clap::Args;
use serde::Serialize;

use crate::{print_json, Common};

/// What `--json` prints.
const JSON_HELP: &str = "Print the results as one JSON array on stdout, one object per \
    backend, packet size and setup, and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct WireArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Backends to measure: memif (no root needed) and afpacket (makes two
    /// network namespaces and a veth pair of its own: root).
    #[arg(long, value_delimiter = ',', default_value = "memif,afpacket")]
    backends: Vec<String>,
    /// Packet sizes on the wire with FCS (64..=1518).
    #[arg(long, default_value = "64,1518")]
    sizes: String,
    /// How the emulated NIC runs: threaded (engine and application on two
    /// threads, as users run it) and/or stepped (the application steps the
    /// engine: one thread, one core, as a DPDK application and its driver).
    #[arg(long, value_delimiter = ',', default_value = "threaded,stepped")]
    nic: Vec<String>,
    /// Measured rounds (each runs every setup once, in turn, after one
    /// warm-up round).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    rounds: u64,
    /// Measured window of one trial (it starts a second after frames
    /// arrive; testpmd prints its rate once a second, so at least 2000).
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(2000..=600_000))]
    trial_ms: u64,
    /// Write a results directory under results/.
    #[arg(long)]
    save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Measure nothing: draw `ratio.svg` again from DIR/wire.json (a
    /// results directory an earlier run wrote).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["save", "out"])]
    replot: Option<PathBuf>,
}

/// One backend, size and setup.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct Row {
    backend: Backend,
    wire_size: usize,
    setup: String,
    /// Median over the measured rounds of the sink's rate.
    mpps: f64,
    min_mpps: f64,
    max_mpps: f64,
    /// Median of the source's rate over the same windows.
    offered_mpps: f64,
    /// The DPDK setup it is compared with (none for DPDK's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    compared_with: Option<String>,
    /// Median of the per-round ratios to that setup.
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_dpdk: Option<f64>,
    /// The goal for that ratio, and whether the median met it.
    #[serde(skip_serializing_if = "Option::is_none")]
    goal: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    goal_met: Option<bool>,
    /// Frames the NIC's backend dropped per trial (median), by any cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    wire_drops: Option<f64>,
    /// Frames the NIC dropped per trial (median) for other causes: on
    /// transmit, its queue towards a wire that could not keep up.
    #[serde(skip_serializing_if = "Option::is_none")]
    nic_drops: Option<f64>,
    /// Frames the kernel dropped at the veth's peer end per trial (its
    /// receive backlog was full; afpacket transmit setups).
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_dropped: Option<f64>,
    /// The cross-core probe over this row's rounds (median ns).
    probe_rtt_ns: Option<f64>,
    per_round_mpps: Vec<f64>,
}

pub(crate) fn parse_backends(v: &[String]) -> Result<Vec<Backend>, String> {
    let b: Vec<Backend> = v
        .iter()
        .map(|s| Backend::parse(s.trim()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--backends: {e}"))?;
    super::check_unique(
        "--backends",
        &v.iter().map(|s| s.trim()).collect::<Vec<_>>(),
    )?;
    if b.is_empty() {
        return Err("--backends: none given".into());
    }
    Ok(b)
}

pub(crate) fn parse_modes(v: &[String]) -> Result<Vec<NicMode>, String> {
    super::check_unique("--nic", &v.iter().map(|s| s.trim()).collect::<Vec<_>>())?;
    let m: Vec<NicMode> = v
        .iter()
        .map(|s| match s.trim() {
            "threaded" => Ok(NicMode::Threaded),
            "stepped" => Ok(NicMode::Stepped),
            o => Err(format!("--nic: unknown mode {o:?} (threaded, stepped)")),
        })
        .collect::<Result<_, _>>()?;
    if m.is_empty() {
        return Err("--nic: none given".into());
    }
    Ok(m)
}

pub(crate) fn check(a: &WireArgs) -> Result<(), String> {
    a.common.check()?;
    parse_backends(&a.backends)?;
    parse_modes(&a.nic)?;
    super::parse_sizes(&a.sizes)?;
    super::check_out(&a.out)
}

pub(crate) fn run(a: &WireArgs) -> Result<(), String> {
    if let Some(dir) = &a.replot {
        let path = dir.join("wire.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("--replot: cannot read {}: {e}", path.display()))?;
        let rows: Vec<Row> = serde_json::from_str(&text)
            .map_err(|e| format!("--replot: {} is not bench wire's JSON: {e}", path.display()))?;
        let svg = dir.join("ratio.svg");
        ratio_chart(&rows)
            .render_svg(&svg)
            .map_err(|e| format!("{}: {e}", svg.display()))?;
        eprintln!("wrote {}", svg.display());
        return Ok(());
    }
    let backends = parse_backends(&a.backends)?;
    let modes = parse_modes(&a.nic)?;
    let sizes = super::parse_sizes(&a.sizes)?;
    let placement = a.common.placement()?;
    let trial = Duration::from_millis(a.trial_ms);
    let plan = Interleave::new(trial).rounds(a.rounds as usize);
    let total: usize = backends
        .iter()
        .map(|&b| sizes.len() * plan.expected_rounds(Setup::all(b, &modes).len()))
        .sum();
    let total = total as u64;
    let mut progress = Progress::new("wire", total, a.common.json);
    let mut rows = Vec::new();
    let mut reports = Vec::new();
    for &backend in &backends {
        let env = WireEnv::new(backend, &placement)?;
        let setups = Setup::all(backend, &modes);
        for &size in &sizes {
            let failed: RefCell<Option<String>> = RefCell::new(None);
            let mut vs: Vec<_> = setups
                .iter()
                .map(|&s| {
                    let (env, failed) = (&env, &failed);
                    variant(s.name(), move |d: Duration| {
                        if failed.borrow().is_some() {
                            return TrialResult::default();
                        }
                        match env.trial(s, size, d) {
                            Ok(r) => r,
                            Err(e) => {
                                *failed.borrow_mut() =
                                    Some(format!("{} {size} B {}: {e}", backend.name(), s.name()));
                                TrialResult::default()
                            }
                        }
                    })
                })
                .collect();
            let mut refs: Vec<&mut dyn Variant> =
                vs.iter_mut().map(|v| v as &mut dyn Variant).collect();
            progress.note(&format!("{} at {size} B", backend.name()));
            let report = plan.run_with(&placement, &mut refs, &mut progress);
            drop(refs);
            drop(vs);
            if let Some(e) = failed.into_inner() {
                progress.finish();
                return Err(e);
            }
            rows.extend(rows_of(backend, size, &setups, &report));
            reports.push(report);
        }
    }
    progress.finish();
    let table = table(&rows);
    if let Some(dir) = super::results_dir("wire", a.save, &a.out)? {
        let e = |e: bench::results::ResultsError| e.to_string();
        dir.write_config(a).map_err(e)?;
        dir.write_json("wire.json", &rows).map_err(e)?;
        dir.write_json("rounds.json", &reports).map_err(e)?;
        dir.write_table("wire.csv", &table).map_err(e)?;
        dir.write_summary(&summary(&rows, &table)).map_err(e)?;
        dir.bar_chart("ratio.svg", &ratio_chart(&rows)).map_err(e)?;
        if !a.common.json {
            eprintln!("results: {}", dir.path().display());
        }
    }
    if a.common.json {
        print_json(&rows)
    } else {
        println!("{}", summary(&rows, &table));
        Ok(())
    }
}

fn rows_of(backend: Backend, size: usize, setups: &[Setup], r: &InterleaveReport) -> Vec<Row> {
    setups
        .iter()
        .map(|&s| {
            let name = s.name();
            let trials: Vec<&TrialResult> = r.measured().filter_map(|x| x.trial(&name)).collect();
            let mpps: Vec<f64> = trials.iter().map(|t| t.mpps()).collect();
            let (lo, hi) = bench::stats::min_max(&mpps).unwrap_or((f64::INFINITY, 0.0));
            let extra = |k: &str| -> Vec<f64> {
                trials
                    .iter()
                    .filter_map(|t| t.extra.get(k).copied())
                    .collect()
            };
            let reference = s.reference(backend);
            let ratio = reference
                .and_then(|x| r.ratio(&name, &x.name()))
                .map(|x| x.median);
            let drops = extra("wire_drops");
            let kdrops = extra("kernel_dropped");
            let ndrops = extra("nic_drops");
            Row {
                backend,
                wire_size: size,
                setup: name,
                mpps: median(mpps.clone()),
                min_mpps: lo,
                max_mpps: hi,
                offered_mpps: median(extra("offered_mpps")),
                compared_with: reference.map(|x| x.name()),
                ratio_to_dpdk: ratio,
                goal: ratio.map(|_| backend.goal()),
                goal_met: ratio.map(|x| x >= backend.goal()),
                wire_drops: (!drops.is_empty()).then(|| median(drops)),
                kernel_dropped: (!kdrops.is_empty()).then(|| median(kdrops)),
                nic_drops: (!ndrops.is_empty()).then(|| median(ndrops)),
                probe_rtt_ns: r.probe_median_ns,
                per_round_mpps: mpps,
            }
        })
        .collect()
}

/// The emulated NIC's rate over DPDK's, one group of bars per backend and
/// size, one bar per setup (a rate spread over 0.1..20 Mpps reads badly
/// on one linear axis; the ratios, with the goals, do not).
fn ratio_chart(rows: &[Row]) -> BarChart {
    let mut groups: Vec<(Backend, usize)> = Vec::new();
    let mut setups: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r.ratio_to_dpdk.is_some()) {
        if !groups.contains(&(r.backend, r.wire_size)) {
            groups.push((r.backend, r.wire_size));
        }
        if !setups.contains(&r.setup) {
            setups.push(r.setup.clone());
        }
    }
    // The legend sits top right: the lower memif ratios go there.
    groups.sort_by_key(|&(b, size)| (b == Backend::Memif, size));
    let mut chart = BarChart::new(
        "Emulated NIC / DPDK on the same wire (goals: memif 0.8, afpacket 1.0)",
        "rate / DPDK's rate",
        groups.iter().map(|(b, s)| format!("{} {s} B", b.name())),
    );
    for s in &setups {
        let values = groups
            .iter()
            .map(|&(b, size)| {
                rows.iter()
                    .find(|r| r.backend == b && r.wire_size == size && &r.setup == s)
                    .and_then(|r| r.ratio_to_dpdk)
                    .unwrap_or(f64::NAN)
            })
            .collect();
        chart = chart.series(s, values);
    }
    chart
}

fn table(rows: &[Row]) -> Table {
    let mut t = Table::new([
        "backend",
        "size",
        "setup",
        "Mpps (median)",
        "min..max",
        "offered Mpps",
        "vs dpdk",
        "goal",
        "NIC drops/trial",
        "backend drops/trial",
        "kernel drops/trial",
        "probe ns",
    ]);
    for r in rows {
        t.push([
            r.backend.name().to_string(),
            r.wire_size.to_string(),
            r.setup.clone(),
            format!("{:.2}", r.mpps),
            format!("{:.2}..{:.2}", r.min_mpps, r.max_mpps),
            format!("{:.2}", r.offered_mpps),
            match (&r.compared_with, r.ratio_to_dpdk) {
                (Some(w), Some(x)) => format!("{x:.2} of {w}"),
                _ => "-".into(),
            },
            match (r.goal, r.goal_met) {
                (Some(g), Some(true)) => format!(">= {g}: met"),
                (Some(g), Some(false)) => format!(">= {g}: NOT met"),
                _ => "-".into(),
            },
            r.nic_drops.map_or("-".into(), |x| format!("{x:.0}")),
            r.wire_drops.map_or("-".into(), |x| format!("{x:.0}")),
            r.kernel_dropped.map_or("-".into(), |x| format!("{x:.0}")),
            r.probe_rtt_ns.map_or("-".into(), |x| format!("{x:.0}")),
        ]);
    }
    t
}

fn summary(rows: &[Row], table: &Table) -> String {
    let mut s = String::from(
        "# bench wire: Mpps through the NIC's backends beside DPDK's drivers\n\n\
         Rate = frames the sink received per second (median over rounds). `dpdk`: testpmd \
         txonly to testpmd rxonly on the same wire; `emu-tx-*`: the emulated NIC sends, \
         testpmd receives; `emu-rx-*`: testpmd sends, the emulated NIC receives. `threaded`: \
         the NIC's engine and the application poll on two threads (with the peer, three \
         polling threads on this machine's cores); `stepped`: one thread steps the engine \
         and runs the application. `vs dpdk`: median of per-round ratios.\n\n",
    );
    s.push_str(&table.markdown());
    let n = rows.iter().filter(|r| r.goal.is_some()).count();
    let met = rows.iter().filter(|r| r.goal_met == Some(true)).count();
    s.push_str(&format!(
        "\n{met} of {n} rows meet the goal (afpacket >= 1.0x net_af_packet, memif >= 0.8x \
         testpmd-to-testpmd memif).\n"
    ));
    s
}
