//! `bench breakdown`: each application's instructions per request on each
//! interface, split into receive, application, response and send (plus the
//! engine's and other code's), from cachegrind; and the hidden
//! `bench breakdown-worker` that cachegrind runs.

use clap::Args;
use serde::Serialize;

use bench::breakdown::{self, App, Breakdown, WorkerConfig};
use bench::progress::Progress;
use enso_apps::nic::Interface;

use crate::print_json;

/// Applications to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AppChoice {
    /// The echo server.
    Echo,
    /// MICA-like key-value store.
    Kv,
    /// Maglev load balancer.
    Maglev,
    /// NitroSketch telemetry.
    Telemetry,
    /// Log monitor.
    Logmon,
    /// All of them.
    All,
}

impl AppChoice {
    fn apps(self) -> Vec<App> {
        match self {
            AppChoice::Echo => vec![App::Echo],
            AppChoice::Kv => vec![App::Kv],
            AppChoice::Maglev => vec![App::Maglev],
            AppChoice::Telemetry => vec![App::Telemetry],
            AppChoice::Logmon => vec![App::Logmon],
            AppChoice::All => App::ALL.to_vec(),
        }
    }
}

/// Interfaces to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IfaceChoice {
    /// Ensō only.
    Enso,
    /// Packetized only.
    Packetized,
    /// Both.
    Both,
}

impl IfaceChoice {
    fn interfaces(self) -> Vec<Interface> {
        match self {
            IfaceChoice::Enso => vec![Interface::Enso],
            IfaceChoice::Packetized => vec![Interface::Packetized],
            IfaceChoice::Both => vec![Interface::Enso, Interface::Packetized],
        }
    }
}

/// What `--json` prints.
const JSON_HELP: &str = "Print the report as one JSON object on stdout (one element per \
    application and interface in its `results`), and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct BreakdownArgs {
    /// Application(s) to measure.
    #[arg(long, value_enum, default_value_t = AppChoice::All)]
    pub(crate) app: AppChoice,
    /// Interface(s) to measure.
    #[arg(long, value_enum, default_value_t = IfaceChoice::Both)]
    pub(crate) interface: IfaceChoice,
    /// Units (requests for KV, packets otherwise) measured: the longer run
    /// handles this many more than the shorter one.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(100..=10_000_000))]
    pub(crate) units: u64,
    /// Units the shorter run handles (rings and pipes wrap during them).
    #[arg(long, default_value_t = breakdown::DEFAULT_WARM_UNITS, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub(crate) warm: u64,
    #[arg(long, help = JSON_HELP)]
    pub(crate) json: bool,
}

/// Arguments of the hidden worker (see `bench::breakdown::worker_args`).
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct WorkerArgs {
    #[arg(long, value_enum)]
    app: App,
    #[arg(long, value_enum)]
    interface: Interface,
    #[arg(long)]
    units: u64,
}

pub(crate) fn worker(args: &WorkerArgs) -> Result<(), String> {
    let out = breakdown::run_worker(&WorkerConfig {
        app: args.app,
        interface: args.interface,
        units: args.units,
    })?;
    print_json(&out)
}

/// How the figures are made (for the report and `--json`).
pub(crate) const METHOD: &str = "Instructions counted by cachegrind (valgrind --tool=cachegrind \
    --cache-sim=no) on a deterministic single-threaded stepped run of each application (one NIC \
    engine step, then the application polls until it finds nothing; the NIC's built-in \
    generator makes the load as in `bench apps`), twice with different request counts; the \
    difference divided by the extra requests. Costs are attributed by the function they were \
    compiled into and the source file of the (inlined) code: receive = the library's RX path \
    and the drivers' poll loops, application = the application's logic in enso_apps (with the aho_corasick and \
    regex crates the log monitor matches with), \
    response = building replies and rewriting frames (KV message framing, Maglev's header \
    rewrite, the echo byte), send = the library's TX path, engine = nic_emu and pcie_model, \
    other = libc and std (memcpy).";

/// What `bench breakdown --json` prints.
#[derive(Serialize)]
pub(crate) struct BreakdownReport {
    pub(crate) results: Vec<Breakdown>,
    /// Ensō / packetized of the application side's total, per app.
    pub(crate) app_side_ratios: Vec<(App, f64)>,
    pub(crate) method: String,
    pub(crate) valgrind: String,
}

/// Measures `apps` on `interfaces`; progress on stderr unless `quiet`.
pub(crate) fn measure(
    apps: &[App],
    interfaces: &[Interface],
    warm: u64,
    units: u64,
    quiet: bool,
) -> Result<BreakdownReport, String> {
    let valgrind = bench::cache::valgrind_version()?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let tmp = std::env::temp_dir();
    let mut progress = Progress::new("breakdown", (apps.len() * interfaces.len()) as u64, quiet);
    let mut results = Vec::new();
    for &a in apps {
        for &i in interfaces {
            results.push(breakdown::measure(&exe, a, i, warm, units, &tmp)?);
            progress.step(1, &format!("{a} {}", i.name()));
        }
    }
    progress.finish();
    let app_side_ratios = apps
        .iter()
        .filter_map(|&a| breakdown::app_ratio(&results, a).map(|r| (a, r)))
        .collect();
    Ok(BreakdownReport {
        results,
        app_side_ratios,
        method: METHOD.into(),
        valgrind,
    })
}

pub(crate) fn run(args: &BreakdownArgs) -> Result<(), String> {
    let r = measure(
        &args.app.apps(),
        &args.interface.interfaces(),
        args.warm,
        args.units,
        args.json,
    )?;
    if args.json {
        return print_json(&r);
    }
    println!("Instructions per request (KV) or packet, application side by part:\n");
    print!("{}", breakdown::table(&r.results));
    println!();
    for b in &r.results {
        println!(
            "{} on {}: top application-side functions per {}:",
            b.app, b.interface, b.unit
        );
        for (f, p, v) in &b.top_functions {
            println!("  {v:8.1}  {p:?}  {f}");
        }
    }
    println!("\n{}", r.method);
    Ok(())
}
