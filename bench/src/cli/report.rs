//! `bench report`: runs the experiments behind each of the paper's claims
//! and writes one Markdown report: per claim, what was measured here (with
//! the placement it was measured on), what the performance model predicts
//! for the paper's hardware, and the paper's number, side by side, with
//! the figure and a paragraph on what differs and why.
//!
//! The experiments are the subcommands' own: their arguments are parsed
//! from words (as `bench all` does), they run through the same `measure`
//! functions and write their results directories under the report's with
//! the same `save` functions; the report adds the predictions, the paper's
//! numbers and figures of its own, each as SVG and PNG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use bench::pcie::PcieResult;
use bench::plot::{HBar, HBarChart, LineChart, Series};
use bench::predict::{self, params, Inputs, SizeCounts};
use bench::results::{ResultsDir, Table};
use bench::scaling::ScalingPoint;
use pcie_model::BytesPerPacket;

use super::{all, apps, breakdown, cache, echo, latency, parse_words, pcie, scaling, Given};
use crate::{print_json, Common};

mod claims;
mod figures;
use claims::*;
use figures::*;

/// What `--json` prints.
const JSON_HELP: &str = "Print one JSON object on stdout (`report`: the report's path; \
    `claims`: per claim its rows of measured, predicted and paper values and its figures; \
    `errors`: experiments that failed), and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Short runs of every experiment (a few minutes in all) instead of
    /// each experiment's defaults.
    #[arg(long)]
    pub(crate) quick: bool,
    /// The smallest runs that still exercise every experiment (seconds;
    /// for tests).
    #[arg(long, hide = true, conflicts_with = "quick")]
    pub(crate) smoke: bool,
    /// Write under results/report-<time>/ (the default without --out).
    #[arg(long)]
    pub(crate) save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

/// How long the experiments run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Full,
    Quick,
    Smoke,
}

impl Level {
    fn of(args: &ReportArgs) -> Self {
        if args.smoke {
            Level::Smoke
        } else if args.quick {
            Level::Quick
        } else {
            Level::Full
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Full => "each experiment's defaults",
            Level::Quick => "quick settings (--quick)",
            Level::Smoke => "the smallest settings (test-sized)",
        }
    }
}

/// The experiments' arguments at `level` (besides output and cores).
fn settings(level: Level) -> [Vec<&'static str>; 6] {
    // What every level measures: both interfaces, the paper's sizes.
    let echo = ["--interface", "both", "--sizes", "64,128,256,512,1024,1518"];
    match level {
        Level::Full => [echo.to_vec(), vec![], vec![], vec![], vec![], vec![]],
        Level::Quick => [
            [&echo[..], &["--duration-ms", "1500", "--trial-ms", "80"]].concat(),
            vec!["--packets", "30000"],
            vec!["--packets", "20000"],
            [&["--loads", "1,25,50,75,90"][..], super::all::QUICK_LATENCY].concat(),
            vec!["--duration-ms", "8000", "--trial-ms", "60"],
            vec![
                "--maglev-flows",
                "16",
                "--kv-batch",
                "4",
                "--log-patterns",
                "all,apache",
                "--log-event-shares",
                "0.02",
                "--rounds",
                "3",
                "--trial-ms",
                "250",
            ],
        ],
        Level::Smoke => [
            vec![
                "--interface",
                "both",
                "--sizes",
                "64,1518",
                "--duration-ms",
                "240",
                "--trial-ms",
                "30",
            ],
            vec!["--sizes", "64,1518", "--packets", "3000"],
            vec!["--packets", "5000"],
            vec![
                "--loads",
                "20,80",
                "--trial-ms",
                "40",
                "--search-trial-ms",
                "40",
                "--warmup-ms",
                "10",
                "--precision",
                "0.05",
                "--attempts",
                "2",
            ],
            vec![
                "--pipes",
                "1,32",
                "--duration-ms",
                "400",
                "--trial-ms",
                "25",
            ],
            vec![
                "--maglev-flows",
                "16",
                "--kv-batch",
                "4",
                "--log-patterns",
                "all",
                "--log-event-shares",
                "0.02",
                "--rounds",
                "1",
                "--trial-ms",
                "50",
            ],
        ],
    }
}

/// The breakdown's units in the shorter run and units measured at
/// `level` (each of its 20 cachegrind runs takes seconds).
fn breakdown_counts(level: Level) -> (u64, u64) {
    match level {
        Level::Full => (bench::breakdown::DEFAULT_WARM_UNITS, 20_000),
        Level::Quick => (4000, 4000),
        Level::Smoke => (1000, 1000),
    }
}

/// The experiments' arguments, each with the options its words give.
struct Runs {
    echo: (echo::EchoArgs, Given),
    pcie: (pcie::PcieArgs, Given),
    cache: (cache::CacheArgs, Given),
    latency: (latency::LatencyArgs, Given),
    scaling: (scaling::ScalingArgs, Given),
    apps: (apps::AppsArgs, Given),
}

fn runs(args: &ReportArgs, root: &Path) -> Result<Runs, String> {
    let [e, p, c, l, s, a] = settings(Level::of(args));
    let common = &args.common;
    let mut pw = all::words(common, root, "pcie", &p);
    // pcie has no --cores (it is single-threaded).
    if let Some(i) = pw.iter().position(|x| x == "--cores") {
        pw.drain(i..i + 2);
    }
    Ok(Runs {
        echo: parse_words(&all::words(common, root, "echo", &e))?,
        pcie: parse_words(&pw)?,
        cache: parse_words(&all::words(common, root, "cache", &c))?,
        latency: parse_words(&all::words(common, root, "latency", &l))?,
        scaling: parse_words(&all::words(common, root, "scaling", &s))?,
        apps: parse_words(&all::words(common, root, "apps", &a))?,
    })
}

/// Checks, before anything runs, every value the experiments will check.
pub(crate) fn check(args: &ReportArgs) -> Result<(), String> {
    args.common.check()?;
    super::check_out(&args.out)?;
    let root = args.out.clone().unwrap_or_else(|| PathBuf::from("results"));
    let r = runs(args, &root)?;
    let named = |name: &str, c: Result<(), String>| c.map_err(|e| format!("{name}: {e}"));
    named("echo", echo::check(&r.echo.0, &r.echo.1))?;
    named("pcie", pcie::check(&r.pcie.0))?;
    named("cache", cache::check(&r.cache.0, &r.cache.1))?;
    named("latency", latency::check(&r.latency.0))?;
    named("scaling", scaling::plan(&r.scaling.0).map(|_| ()))?;
    named("apps", apps::check(&r.apps.0, &r.apps.1))
}

/// One line of a claim's table.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct ClaimRow {
    /// What is compared.
    pub(crate) metric: String,
    /// Unit of the three values.
    pub(crate) unit: String,
    /// Measured here.
    pub(crate) measured: Option<f64>,
    /// Where it was measured (cores, probe; or "stepped").
    pub(crate) placement: String,
    /// The model's prediction for the paper's hardware.
    pub(crate) predicted: Option<f64>,
    /// The paper's number.
    pub(crate) paper: Option<f64>,
    /// The paper's claim in words where it gives no number (or a bound).
    pub(crate) paper_note: Option<String>,
}

/// One of the paper's claims.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct Claim {
    /// Section title.
    pub(crate) title: String,
    /// What the paper claims, in one sentence.
    pub(crate) claim: String,
    /// The table.
    pub(crate) rows: Vec<ClaimRow>,
    /// Figures (paths relative to the report), each with a caption.
    pub(crate) figures: Vec<(String, String)>,
    /// What differs and why.
    pub(crate) paragraph: String,
    /// Why nothing was measured, if so.
    pub(crate) missing: Option<String>,
}

/// A number for a table cell: three significant digits or so.
pub(crate) fn num(v: f64) -> String {
    if !v.is_finite() {
        "-".to_string()
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), num)
}

/// The report's Markdown: a header, then one section per claim.
pub(crate) fn render(header: &str, claims: &[Claim]) -> String {
    let mut md = String::from(header);
    for (i, c) in claims.iter().enumerate() {
        let _ = write!(
            md,
            "\n## {}. {}\n\n**Paper:** {}\n\n",
            i + 1,
            c.title,
            c.claim
        );
        if let Some(m) = &c.missing {
            let _ = writeln!(md, "_Not measured in this run: {m}._\n");
        }
        if !c.rows.is_empty() {
            let mut t = Table::new([
                "metric",
                "unit",
                "measured here",
                "placement",
                "predicted (paper's hardware)",
                "paper",
            ]);
            for r in &c.rows {
                let paper = match (&r.paper, &r.paper_note) {
                    (Some(p), Some(n)) => format!("{} ({n})", num(*p)),
                    (Some(p), None) => num(*p),
                    (None, Some(n)) => n.clone(),
                    (None, None) => "-".to_string(),
                };
                t.push([
                    r.metric.clone(),
                    r.unit.clone(),
                    cell(r.measured),
                    if r.measured.is_some() {
                        r.placement.clone()
                    } else {
                        "-".to_string()
                    },
                    cell(r.predicted),
                    paper,
                ]);
            }
            md.push_str(&t.markdown());
            md.push('\n');
        }
        for (path, caption) in &c.figures {
            let _ = writeln!(md, "![{caption}]({path})\n");
        }
        if !c.paragraph.is_empty() {
            let _ = writeln!(md, "{}\n", c.paragraph);
        }
    }
    md
}

/// What the run measured, experiment by experiment (None: failed).
#[derive(Default)]
struct Measured {
    echo: Option<echo::Outcome>,
    pcie: Option<Vec<PcieResult>>,
    cache: Option<cache::CacheReport>,
    breakdown: Option<breakdown::BreakdownReport>,
    latency: Option<latency::Outcome>,
    scaling: Option<scaling::Outcome>,
    apps: Option<apps::Outcome>,
    errors: std::collections::BTreeMap<String, String>,
}

impl Measured {
    fn missing(&self, name: &str) -> String {
        self.errors
            .get(name)
            .cloned()
            .unwrap_or_else(|| "the experiment did not run".into())
    }
}

/// The JSON `--json` prints.
#[derive(Serialize)]
struct ReportJson<'a> {
    report: String,
    claims: &'a [Claim],
    errors: &'a std::collections::BTreeMap<String, String>,
    predictions_from: &'a str,
}

pub(crate) fn run(args: &ReportArgs) -> Result<(), String> {
    let dir = match &args.out {
        Some(p) => ResultsDir::at("report", p.clone()),
        None => ResultsDir::create("report", None),
    }
    .map_err(|e| e.to_string())?;
    dir.write_config(args).map_err(|e| e.to_string())?;
    let root = dir.path().to_path_buf();
    let r = runs(args, &root)?;
    let json = args.common.json;
    let mut m = Measured::default();
    let say = |what: &str| {
        if !json {
            eprintln!("report: {what}");
        }
    };
    let sub = |name: &str| ResultsDir::at(name, root.join(name)).map_err(|e| e.to_string());

    say("pcie (stepped echo: PCIe bytes per packet)");
    let a = &r.pcie.0;
    let res = pcie::progress(a)
        .and_then(|mut p| {
            let x = pcie::measure_all(a, &mut p);
            p.finish();
            x
        })
        .and_then(|x| {
            pcie::save(&sub("pcie")?, a, &x).map_err(|e| e.to_string())?;
            Ok(x)
        });
    keep(&mut m.pcie, &mut m.errors, "pcie", res, json);

    say("echo (rate vs packet size, both interfaces)");
    let a = &r.echo.0;
    let res = echo::measure(a).and_then(|o| {
        echo::save(&sub("echo")?, a, &o).map_err(|e| e.to_string())?;
        Ok(o)
    });
    keep(&mut m.echo, &mut m.errors, "echo", res, json);

    say("scaling (pipes and RSS queues for one application core)");
    let a = &r.scaling.0;
    let res = scaling::measure(a).and_then(|o| {
        scaling::save(&sub("scaling")?, a, &o).map_err(|e| e.to_string())?;
        Ok(o)
    });
    keep(&mut m.scaling, &mut m.errors, "scaling", res, json);

    say("apps (Maglev, telemetry, KV, log monitor)");
    let a = &r.apps.0;
    let res = apps::measure(a).and_then(|o| {
        apps::save(&sub("apps")?, a, &o)?;
        Ok(o)
    });
    keep(&mut m.apps, &mut m.errors, "apps", res, json);

    say("latency (notification strategies vs load)");
    let a = &r.latency.0;
    let res = latency::measure(a).and_then(|o| {
        latency::save(&sub("latency")?, a, &o).map_err(|e| e.to_string())?;
        Ok(o)
    });
    keep(&mut m.latency, &mut m.errors, "latency", res, json);

    say("cache (application-side cache behaviour)");
    let (a, given) = &r.cache;
    let mut progress = cache::progress(a);
    let res = cache::measure(a, given, &mut progress);
    progress.finish();
    let res = res.and_then(|x| {
        cache::save(&sub("cache")?, a, &x).map_err(|e| e.to_string())?;
        Ok(x)
    });
    keep(&mut m.cache, &mut m.errors, "cache", res, json);

    say("breakdown (each application's instructions per request, by part)");
    let (warm, units) = breakdown_counts(Level::of(args));
    let res = breakdown::measure(
        &bench::breakdown::App::ALL,
        &[
            enso_apps::nic::Interface::Enso,
            enso_apps::nic::Interface::Packetized,
        ],
        warm,
        units,
        json,
    )
    .and_then(|x| {
        let d = sub("breakdown")?;
        d.write_json("breakdown.json", &x)
            .map_err(|e| e.to_string())?;
        d.write_summary(&bench::breakdown::table(&x.results))
            .map_err(|e| e.to_string())?;
        d.bar_chart("breakdown.svg", &bench::breakdown::chart(&x.results))
            .map_err(|e| e.to_string())?;
        Ok(x)
    });
    keep(&mut m.breakdown, &mut m.errors, "breakdown", res, json);

    say("predictions and the report");
    let (pred, from) = predictions(&m, &root);
    let mut claims = vec![
        throughput(&m, pred.as_ref(), &dir)?,
        echo_speedup(&m, pred.as_ref(), &dir)?,
        pcie_share(&m, pred.as_ref(), &dir)?,
        cache_claim(&m, &dir)?,
        notifications(&m, pred.as_ref(), &dir)?,
        scaling_claim(&m, pred.as_ref(), &dir)?,
        apps_claim(&m, pred.as_ref(), &dir)?,
        breakdown_claim(&m),
    ];
    for c in &mut claims {
        // Every figure also as PNG, beside its SVG.
        let mut figures = Vec::new();
        for (svg, caption) in &c.figures {
            let png = dir.png_of(svg).map_err(|e| e.to_string())?;
            let rel = png
                .strip_prefix(&root)
                .map_or_else(|_| png.display().to_string(), |p| p.display().to_string());
            figures.push((rel, caption.clone()));
        }
        c.figures = figures;
    }
    let md = render(&header(args, &m, &from), &claims);
    let report = dir.file("report.md");
    std::fs::write(&report, md).map_err(|e| format!("{}: {e}", report.display()))?;
    if json {
        print_json(&ReportJson {
            report: report.display().to_string(),
            claims: &claims,
            errors: &m.errors,
            predictions_from: &from,
        })?;
    } else {
        eprintln!("report: {}", report.display());
    }
    if m.errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} experiment(s) failed (their sections say so): {}",
            m.errors.len(),
            m.errors.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    }
}

/// Keeps an experiment's outcome, or its error.
fn keep<T>(
    slot: &mut Option<T>,
    errors: &mut std::collections::BTreeMap<String, String>,
    name: &str,
    r: Result<T, String>,
    json: bool,
) {
    match r {
        Ok(x) => *slot = Some(x),
        Err(e) => {
            if !json {
                eprintln!("report: {name} failed: {e}");
            }
            errors.insert(name.to_string(), e);
        }
    }
}

/// The model's rows, fed with this run's counts: packets per notification
/// and PCIe bytes from the pcie experiment, application costs from this
/// run's echo and apps where their placement is the one the model takes
/// (cores sharing a last-level cache), else from the checked-in runs.
/// Also says where the costs came from.
fn predictions(m: &Measured, root: &Path) -> (Option<predict::Report>, String) {
    let Some(p) = &m.pcie else {
        return (None, "no predictions: the pcie experiment failed".into());
    };
    let mut sizes: Vec<SizeCounts> = Vec::new();
    for e in p.iter().filter(|r| r.interface == "enso") {
        let Some(k) = p
            .iter()
            .find(|r| r.interface == "packetized" && r.pkt_size == e.pkt_size)
        else {
            continue;
        };
        sizes.push(SizeCounts {
            wire_size: e.pkt_size,
            frame_bytes: e.frame_bytes,
            k_rx: e.k_rx.unwrap_or(1.0),
            k_tx: e.k_tx.unwrap_or(1.0),
            enso_measured: BytesPerPacket {
                up: e.up_bytes_per_pkt,
                down: e.down_bytes_per_pkt,
            },
            packetized_measured: BytesPerPacket {
                up: k.up_bytes_per_pkt,
                down: k.down_bytes_per_pkt,
            },
        });
    }
    let mut skipped = Vec::new();
    let base = predict::default_results_dir();
    let mut from = Vec::new();
    let echo = match m.echo.as_ref().and_then(|_| {
        predict::load_echo(&root.join("echo"), &mut skipped)
            .ok()
            .flatten()
    }) {
        Some(c) => {
            from.push("echo costs from this run".to_string());
            Some(c)
        }
        None => {
            from.push(format!(
                "echo costs from docs/results/{} (this run's were not measured with the cores \
                 sharing a last-level cache)",
                params::ECHO_COSTS
            ));
            predict::load_echo(&base.join(params::ECHO_COSTS), &mut skipped)
                .ok()
                .flatten()
        }
    };
    let mut apps = m
        .apps
        .as_ref()
        .and_then(|_| predict::load_apps(&root.join("apps"), &mut skipped).ok())
        .unwrap_or_default();
    let mine: Vec<String> = apps.iter().map(|a| a.app.clone()).collect();
    // Applications this run has no usable row for take the checked-in one.
    let others: Vec<predict::AppCost> =
        predict::load_apps(&base.join(params::APPS_COSTS), &mut skipped)
            .unwrap_or_default()
            .into_iter()
            .filter(|a| !mine.contains(&a.app))
            .collect();
    let mut theirs: Vec<String> = others.iter().map(|a| a.app.clone()).collect();
    theirs.dedup();
    let mut mine = mine;
    mine.dedup();
    if !mine.is_empty() {
        from.push(format!("costs of {} from this run", mine.join(", ")));
    }
    if !theirs.is_empty() {
        from.push(format!(
            "costs of {} from docs/results/{} (this run's rows of them were not measured with \
             the cores sharing a last-level cache)",
            theirs.join(", "),
            params::APPS_COSTS
        ));
    }
    apps.extend(others);
    let report = predict::report(Inputs {
        sizes,
        echo,
        apps,
        skipped,
    });
    (Some(report), from.join("; "))
}

fn pred_row<'a>(p: Option<&'a predict::Report>, metric: &str) -> Option<&'a predict::Row> {
    p.and_then(|r| r.rows.iter().find(|x| x.metric == metric))
}

fn predicted(p: Option<&predict::Report>, metric: &str) -> Option<f64> {
    pred_row(p, metric).map(|r| r.predicted)
}

fn paper(p: Option<&predict::Report>, metric: &str) -> Option<f64> {
    pred_row(p, metric).and_then(|r| r.paper)
}

/// `a / b` when both are there.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

fn header(args: &ReportArgs, m: &Measured, from: &str) -> String {
    let machine = bench::results::Machine::detect();
    let mut s = String::from("# Ensō on the emulated NIC: measured, predicted, and the paper\n\n");
    let _ = writeln!(
        s,
        "Each section takes one of the paper's claims and puts three numbers side by side: \
         what this run **measured** on the emulated NIC (with where the host had put the two \
         vCPUs: the cross-core probe, ~40-60 ns sibling hyperthreads, ~60-150 ns close, from \
         200 ns apart), what the performance model (`bench predict`) **predicts** for the \
         paper's hardware (PCIe 3.0 x16, 100 GbE, one 3.1 GHz core), and the **paper**'s \
         number. The emulated NIC is a CPU core doing per frame what the FPGA does in \
         parallel: its absolute rates are this machine's, and the comparable quantities are \
         the ratios between interfaces measured in the same interleaved rounds.\n"
    );
    let _ = writeln!(
        s,
        "- Settings: {} (`bench report{}`); each experiment's results directory is beside this \
         file.",
        Level::of(args).name(),
        if args.quick { " --quick" } else { "" }
    );
    let _ = writeln!(
        s,
        "- Machine: {}, {} hardware threads, kernel {}; commit {}{}.",
        machine.cpu_model.as_deref().unwrap_or("unknown CPU"),
        machine.cores,
        machine.kernel.as_deref().unwrap_or("?"),
        machine
            .git_commit
            .as_deref()
            .map_or("?", |c| &c[..c.len().min(12)]),
        if machine.git_dirty == Some(true) {
            " (with uncommitted changes)"
        } else {
            ""
        }
    );
    let _ = writeln!(s, "- Predictions: {from}.");
    if !m.errors.is_empty() {
        let _ = writeln!(
            s,
            "- Failed: {}.",
            m.errors
                .iter()
                .map(|(k, v)| format!("{k} ({v})"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    s
}

#[cfg(test)]
mod tests;
