//! Experiment: where each application's instructions per request go, per
//! interface.
//!
//! `bench apps` measures how much faster each application runs on Ensō
//! than on the packetized interface; this says why. Each application runs
//! in a deterministic single-threaded stepped loop ([`run_worker`]: one
//! engine step, then the application polls until it finds nothing),
//! fed by the NIC's built-in generator as in `bench apps` (closed loop
//! for echo, Maglev and KV, open loop for the telemetry and log sinks;
//! the KV store is preloaded directly, and the generator replays the
//! client's request frames). The worker runs under
//! `valgrind --tool=cachegrind --cache-sim=no` twice, with `warm` and
//! `warm + units` units (requests for KV, packets otherwise); the
//! difference between the two profiles is the cost of the extra units
//! alone, since setup, warm-up and exit are the same in both runs.
//!
//! Cachegrind names every cost by the function it was compiled into and
//! the source file of the (possibly inlined) code, so a generic driver's
//! poll loop with the application inlined into it still splits by file.
//! [`classify`] maps (function, file) to a [`Part`] with the ordered rules
//! of [`RULES`], the one place they live:
//!
//! - **receive**: the library's RX path (notifications, `next_pipe`,
//!   `recv`, `rx_burst`, descriptor refill) and the drivers' poll loops;
//! - **application**: the application's own logic in `enso_apps` (the
//!   store, hashing, the Maglev table, the sketch, pattern scanning, with
//!   the `aho_corasick` and `regex` crates the log monitor matches with);
//! - **response**: building or writing responses and rewriting frames
//!   (the KV message framing, Maglev's header rewrite, the echo byte);
//! - **send**: the library's TX path (`send`, `tx_burst`, completions
//!   and reclaim);
//! - **engine**: the emulated NIC (`nic_emu`, `pcie_model`), reported
//!   apart: it is the hardware's work;
//! - **other**: code of neither (libc's `memcpy`, `std`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use enso::{Device, EnsoDriver, PacketHandler, PacketizedDriver};
use enso_apps::echo::TestFrameEcho;
use enso_apps::kv::{KvServer, ServerConfig};
use enso_apps::logmon::{builtin_for, LogMonitor, LogPatterns};
use enso_apps::maglev::{Maglev, MaglevConfig};
use enso_apps::nic::{
    add_fallback_rx_pipes, AppDriver, EnsoReplyDriver, Interface, PacketizedReplyDriver,
};
use enso_apps::telemetry::Telemetry;
use nic_emu::Engine;

use crate::app_trial::{self, AppKind, TrialOptions};
use crate::cache::{cachegrind_worker, Profile};

/// The applications the breakdown covers.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum App {
    /// The echo server of the microbenchmarks.
    Echo,
    /// MICA-like key-value store.
    Kv,
    /// Maglev load balancer.
    Maglev,
    /// NitroSketch telemetry.
    Telemetry,
    /// Log monitor.
    Logmon,
}

impl App {
    /// All of them.
    pub const ALL: [App; 5] = [App::Echo, App::Kv, App::Maglev, App::Telemetry, App::Logmon];

    /// The name used on command lines and in results.
    pub fn name(self) -> &'static str {
        match self {
            App::Echo => "echo",
            App::Kv => "kv",
            App::Maglev => "maglev",
            App::Telemetry => "telemetry",
            App::Logmon => "logmon",
        }
    }

    /// What one unit is.
    pub fn unit(self) -> &'static str {
        match self {
            App::Kv => "request",
            _ => "packet",
        }
    }
}

impl std::fmt::Display for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an instruction's cost is counted.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// The library's RX path and the drivers' poll loops.
    Receive,
    /// The application's own logic.
    Application,
    /// Building or writing responses, rewriting frames.
    Response,
    /// The library's TX path.
    Send,
    /// The emulated NIC.
    Engine,
    /// Neither side's (libc, std).
    Other,
}

impl Part {
    /// All parts, in table order.
    pub const ALL: [Part; 6] = [
        Part::Receive,
        Part::Application,
        Part::Response,
        Part::Send,
        Part::Engine,
        Part::Other,
    ];

    /// Whether the part is the application side's.
    pub fn is_app_side(self) -> bool {
        matches!(
            self,
            Part::Receive | Part::Application | Part::Response | Part::Send
        )
    }
}

/// One classification rule: it matches when every given pattern is a
/// substring of its field.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// Substring of the function name.
    pub function: Option<&'static str>,
    /// Substring of the source file of the code.
    pub file: Option<&'static str>,
    /// Where a match is counted.
    pub part: Part,
}

const fn f(function: &'static str, part: Part) -> Rule {
    Rule {
        function: Some(function),
        file: None,
        part,
    }
}

const fn fl(file: &'static str, part: Part) -> Rule {
    Rule {
        function: None,
        file: Some(file),
        part,
    }
}

const fn both(function: &'static str, file: &'static str, part: Part) -> Rule {
    Rule {
        function: Some(function),
        file: Some(file),
        part,
    }
}

/// The application-side rules, in order (the first that matches wins);
/// they apply to functions of the application side only ([`side_of`]).
/// Anything of the application side no rule matches is receive (the
/// drivers' loops and the library's RX bookkeeping).
pub const RULES: &[Rule] = &[
    // The application's code, by the file it was written in (the drivers
    // inline it into their poll loops).
    fl("/apps/src/kv/wire.rs", Part::Response),
    fl("/apps/src/echo.rs", Part::Response),
    both("maglev", "/apps/src/packet/", Part::Response),
    f("enso_apps::packet::finish_", Part::Response),
    // An application's own trait impls (prefetching) that the drivers'
    // code was inlined into are the application's.
    both("<enso_apps::kv::", "/apps/src/nic", Part::Application),
    fl("/apps/src/nic", Part::Receive),
    fl("/apps/src/", Part::Application),
    // The pattern-matching crates only the log monitor uses.
    f("aho_corasick::", Part::Application),
    f("regex_automata::", Part::Application),
    f("regex::", Part::Application),
    f("memchr::", Part::Application),
    // The library's TX path.
    fl("/enso-lib/src/device/tx.rs", Part::Send),
    f("tx_burst", Part::Send),
    f("tx_reclaim", Part::Send),
    f("reclaim", Part::Send),
    f("::send", Part::Send),
    f("complet", Part::Send),
    // Application code compiled into a function of its own.
    f("enso_apps::kv::wire", Part::Response),
    f("enso_apps::echo", Part::Response),
    f("enso_apps::nic", Part::Receive),
    f("enso_apps::", Part::Application),
];

/// The crates whose functions are the application side's: the library,
/// the applications, and the matching crates the log monitor calls.
pub const APP_CRATES: [&str; 6] = [
    "enso::",
    "enso_apps::",
    "aho_corasick::",
    "regex_automata::",
    "regex::",
    "memchr::",
];

/// Which side a function is on: `Some(Part::Engine)` for the NIC,
/// `Some(Part::Other)` for neither, `None` for the application side (then
/// [`RULES`] say where).
pub fn side_of(function: &str) -> Option<Part> {
    let n = function.trim_start_matches('<');
    let starts = |ps: &[&str]| ps.iter().any(|p| n.starts_with(p));
    if starts(&["nic_emu::", "pcie_model::"]) || n.contains("::engine_phase") {
        Some(Part::Engine)
    } else if starts(&APP_CRATES) || n.contains("::app_phase") {
        None
    } else {
        Some(Part::Other)
    }
}

/// The part a cost belongs to, from the function it was compiled into and
/// the source file of the code.
pub fn classify(function: &str, file: &str) -> Part {
    if let Some(p) = side_of(function) {
        return p;
    }
    RULES
        .iter()
        .find(|r| {
            r.function.is_none_or(|s| function.contains(s))
                && r.file.is_none_or(|s| file.contains(s))
        })
        .map_or(Part::Receive, |r| r.part)
}

/// Instructions per part, summed over a profile.
pub fn by_part(p: &Profile) -> BTreeMap<Part, f64> {
    let ir = p.events.iter().position(|e| e == "Ir");
    let mut m = BTreeMap::new();
    for f in &p.functions {
        let v = ir.and_then(|i| f.counts.get(i)).copied().unwrap_or(0);
        *m.entry(classify(&f.function, &f.file)).or_insert(0.0) += v as f64;
    }
    m
}

/// The worker's settings (also its command line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// Application.
    pub app: App,
    /// Interface.
    pub interface: Interface,
    /// Units (requests, packets) to handle after setup.
    pub units: u64,
}

/// What the worker prints (one JSON line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerOutput {
    /// Units handled.
    pub units: u64,
    /// Frames the application received.
    pub frames: u64,
    /// NIC drops.
    pub drops: u64,
}

/// The trial settings the breakdown uses: `bench apps`'s workloads with a
/// smaller log, the generator sending 32 frames per step, and a window of
/// 256 frames (64 KV request frames) where the load is a closed loop.
pub fn trial_options() -> TrialOptions {
    let mut o = TrialOptions {
        generator_burst: 32,
        generator_window: 256,
        kv_window: 64,
        log_bytes: 256 << 10,
        dir: Some(std::env::temp_dir()),
        ..TrialOptions::default()
    };
    // Nothing may depend on the clock.
    o.tuning.register_poll_flits = 0;
    o.tuning.evict_ahead_adaptive = false;
    o
}

/// The engine's side of a round: one step.
#[inline(never)]
fn engine_phase(e: &mut Engine) -> usize {
    e.step()
}

/// The application's side of a round: poll until nothing is left.
#[inline(never)]
fn app_phase<D: AppDriver<H>, H>(d: &mut D, h: &mut H) -> Result<usize, String> {
    let mut total = 0;
    loop {
        let n = d.poll(h).map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
    }
}

/// Sets up (until the NIC has installed `targets` fallback targets), then
/// runs rounds until `units(d, h)` has grown by `cfg.units`.
fn drive<D: AppDriver<H>, H>(
    e: &mut Engine,
    d: &mut D,
    h: &mut H,
    targets: usize,
    units: impl Fn(&D, &H) -> u64,
    want: u64,
) -> Result<WorkerOutput, String> {
    for _ in 0..1000 {
        if e.stats().fallback_pipes >= targets {
            break;
        }
        e.run_until_idle(100);
        app_phase(d, h)?;
    }
    if e.stats().fallback_pipes < targets {
        return Err("the NIC did not set up the application's pipes".into());
    }
    e.set_generators_paused(false);
    let start = units(d, h);
    let mut idle = 0;
    while units(d, h) - start < want {
        engine_phase(e);
        if app_phase(d, h)? == 0 {
            idle += 1;
            if idle > 1000 {
                return Err("no progress in 1000 rounds".into());
            }
        } else {
            idle = 0;
        }
    }
    Ok(WorkerOutput {
        units: units(d, h) - start,
        frames: d.stats().frames,
        drops: e.stats().total_drops(),
    })
}

fn kv_units<D>(_: &D, h: &KvServer) -> u64 {
    h.stats().requests
}

fn packet_units<D: AppDriver<H>, H>(d: &D, _: &H) -> u64 {
    d.stats().frames
}

/// A `PacketHandler` on either interface's plain driver.
fn run_packet<H: PacketHandler>(
    e: &mut Engine,
    iface: Interface,
    h: &mut H,
    sink: bool,
    want: u64,
) -> Result<WorkerOutput, String> {
    let s = |x: &dyn std::fmt::Display| x.to_string();
    let dev =
        Device::attach_engine(e, app_trial::app_options(iface, 1, false)).map_err(|x| s(&x))?;
    match iface {
        Interface::Enso => {
            let mut d = EnsoDriver::new(dev);
            if sink {
                add_fallback_rx_pipes(&mut d, 0, 1).map_err(|x| s(&x))?;
            } else {
                d.add_fallback_pipes_on(0, 1).map_err(|x| s(&x))?;
            }
            drive(e, &mut d, h, 1, packet_units, want)
        }
        Interface::Packetized => {
            let mut d = PacketizedDriver::new(dev, trial_options().burst);
            d.add_rss_queues_on(0, 1).map_err(|x| s(&x))?;
            drive(e, &mut d, h, 1, packet_units, want)
        }
    }
}

/// Runs the worker's stepped datapath in this process.
pub fn run_worker(cfg: &WorkerConfig) -> Result<WorkerOutput, String> {
    let opts = trial_options();
    let s = |x: &dyn std::fmt::Display| x.to_string();
    let kind = match cfg.app {
        App::Echo | App::Maglev => AppKind::Maglev,
        App::Kv => AppKind::Kv,
        App::Telemetry => AppKind::Telemetry,
        App::Logmon => AppKind::Logmon,
    };
    let dc = app_trial::device_config(kind, cfg.interface, &opts).map_err(|x| s(&x))?;
    let mut e = Engine::new(dc).map_err(|x| s(&x))?;
    let (iface, want) = (cfg.interface, cfg.units);
    match cfg.app {
        App::Echo => run_packet(&mut e, iface, &mut TestFrameEcho::default(), false, want),
        App::Maglev => {
            let mut h = Maglev::new(
                app_trial::backends(opts.maglev_backends),
                &MaglevConfig::default(),
            )
            .map_err(|x| s(&x))?;
            run_packet(&mut e, iface, &mut h, false, want)
        }
        App::Telemetry => {
            let mut h = Telemetry::new(&opts.sketch, std::time::Duration::from_secs(3600))
                .map_err(|x| s(&x))?;
            run_packet(&mut e, iface, &mut h, true, want)
        }
        App::Logmon => {
            let patterns = builtin_for(&opts.log_services)
                .map_err(|x| s(&x))
                .and_then(|p| LogPatterns::new(&p).map_err(|x| s(&x)))?;
            let mut h = LogMonitor::new(&patterns);
            run_packet(&mut e, iface, &mut h, true, want)
        }
        App::Kv => {
            let mut server = KvServer::new(&ServerConfig::default()).map_err(|x| s(&x))?;
            app_trial::kv_preload(&mut server, &opts).map_err(|x| s(&x))?;
            let dev = Device::attach_engine(&mut e, app_trial::app_options(iface, 1, true))
                .map_err(|x| s(&x))?;
            match iface {
                Interface::Enso => {
                    let mut d = EnsoReplyDriver::new(dev).map_err(|x| s(&x))?;
                    d.add_fallback_pipes_on(0, 1).map_err(|x| s(&x))?;
                    drive(&mut e, &mut d, &mut server, 1, kv_units, want)
                }
                Interface::Packetized => {
                    let mut d = PacketizedReplyDriver::new(dev, opts.burst);
                    d.add_rss_queues_on(0, 1).map_err(|x| s(&x))?;
                    drive(&mut e, &mut d, &mut server, 1, kv_units, want)
                }
            }
        }
    }
}

/// The hidden subcommand's arguments for `cfg`.
pub fn worker_args(cfg: &WorkerConfig) -> Vec<String> {
    vec![
        "breakdown-worker".into(),
        "--app".into(),
        cfg.app.name().into(),
        "--interface".into(),
        cfg.interface.name().into(),
        "--units".into(),
        cfg.units.to_string(),
    ]
}

/// Runs `exe breakdown-worker <cfg>` under cachegrind (instruction counts
/// only), the profile in `out_file`.
pub fn run_under_cachegrind(
    exe: &Path,
    cfg: &WorkerConfig,
    out_file: &Path,
) -> Result<(WorkerOutput, Profile), String> {
    let who = format!("the {} worker on {}", cfg.app, cfg.interface);
    let opts = ["--cache-sim=no".to_string()];
    let r = cachegrind_worker(exe, &worker_args(cfg), &opts, out_file, &who)?;
    let _ = std::fs::remove_file(out_file);
    Ok(r)
}

/// One application on one interface: instructions per unit by part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Application.
    pub app: App,
    /// `enso` or `packetized`.
    pub interface: Interface,
    /// `request` or `packet`.
    pub unit: String,
    /// Units the figures are divided by (the difference of the two runs).
    pub units: u64,
    /// Instructions per unit, by part.
    pub parts: BTreeMap<Part, f64>,
    /// Receive + application + response + send.
    pub app_total: f64,
    /// Everything (the application side, the engine and other code).
    pub total: f64,
    /// The application-side functions that cost most, per unit (with
    /// their part).
    pub top_functions: Vec<(String, Part, f64)>,
}

impl Breakdown {
    /// Instructions per unit of `p`.
    pub fn part(&self, p: Part) -> f64 {
        self.parts.get(&p).copied().unwrap_or(0.0)
    }
}

/// The per-unit breakdown from two runs with `small` and `large` units.
pub fn difference(
    app: App,
    interface: Interface,
    small: &(WorkerOutput, Profile),
    large: &(WorkerOutput, Profile),
) -> Result<Breakdown, String> {
    let n = large.0.units as f64 - small.0.units as f64;
    if n <= 0.0 {
        return Err("the two runs handled the same number of units".into());
    }
    let (a, b) = (by_part(&small.1), by_part(&large.1));
    let parts: BTreeMap<Part, f64> = Part::ALL
        .iter()
        .map(|&p| {
            let d = b.get(&p).copied().unwrap_or(0.0) - a.get(&p).copied().unwrap_or(0.0);
            (p, d / n)
        })
        .collect();
    let app_total = parts
        .iter()
        .filter(|(p, _)| p.is_app_side())
        .map(|(_, v)| v)
        .sum();
    let total = parts.values().sum();
    let per_fn = |p: &Profile| {
        let ir = p.events.iter().position(|e| e == "Ir");
        let mut m: BTreeMap<(String, Part), f64> = BTreeMap::new();
        for f in &p.functions {
            let part = classify(&f.function, &f.file);
            if part.is_app_side() {
                let v = ir.and_then(|i| f.counts.get(i)).copied().unwrap_or(0);
                *m.entry((f.function.clone(), part)).or_insert(0.0) += v as f64;
            }
        }
        m
    };
    let (fa, fb) = (per_fn(&small.1), per_fn(&large.1));
    let mut top: Vec<(String, Part, f64)> = fb
        .iter()
        .map(|(k, v)| {
            (
                k.0.clone(),
                k.1,
                (v - fa.get(k).copied().unwrap_or(0.0)) / n,
            )
        })
        .filter(|t| t.2 > 0.5)
        .collect();
    top.sort_by(|x, y| y.2.total_cmp(&x.2));
    top.truncate(8);
    Ok(Breakdown {
        app,
        interface,
        unit: app.unit().to_string(),
        units: n as u64,
        parts,
        app_total,
        total,
        top_functions: top,
    })
}

/// Units the shorter run handles before the measured ones: enough for the
/// rings and pipes to have wrapped and the KV replay to be in its steady
/// state.
pub const DEFAULT_WARM_UNITS: u64 = 6000;

/// Runs `app` on `interface` under cachegrind twice (`warm` and
/// `warm + units` units) and returns the per-unit breakdown. Profiles go
/// to `tmp`.
pub fn measure(
    exe: &Path,
    app: App,
    interface: Interface,
    warm: u64,
    units: u64,
    tmp: &Path,
) -> Result<Breakdown, String> {
    let mut runs = Vec::new();
    for n in [warm, warm + units] {
        let cfg = WorkerConfig {
            app,
            interface,
            units: n,
        };
        let file = tmp.join(format!(
            "cachegrind.breakdown.{app}.{}.{n}.out",
            interface.name()
        ));
        runs.push(run_under_cachegrind(exe, &cfg, &file)?);
    }
    for (w, _) in &runs {
        if w.drops > 0 && !matches!(app, App::Telemetry | App::Logmon) {
            return Err(format!(
                "{app} on {interface}: the NIC dropped {} frames",
                w.drops
            ));
        }
    }
    difference(app, interface, &runs[0], &runs[1])
}

/// Ensō / packetized of the application-side totals of `app`, if both
/// were measured.
pub fn app_ratio(results: &[Breakdown], app: App) -> Option<f64> {
    let get = |i: Interface| {
        results
            .iter()
            .find(|b| b.app == app && b.interface == i)
            .map(|b| b.app_total)
    };
    match (get(Interface::Enso), get(Interface::Packetized)) {
        (Some(e), Some(p)) if p > 0.0 => Some(e / p),
        _ => None,
    }
}

/// The table: one row per application and interface, instructions per
/// unit by part, and the Ensō/packetized ratio of the application side.
pub fn table(results: &[Breakdown]) -> String {
    let mut s = String::from(
        "| app | interface | unit | receive | application | response | send | app side | Ensō/packetized (app side) | engine | other | total |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for b in results {
        let ratio = match (b.interface, app_ratio(results, b.app)) {
            (Interface::Enso, Some(r)) => format!("{r:.2}"),
            _ => String::new(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {:.1} |\n",
            b.app,
            b.interface,
            b.unit,
            b.part(Part::Receive),
            b.part(Part::Application),
            b.part(Part::Response),
            b.part(Part::Send),
            b.app_total,
            ratio,
            b.part(Part::Engine),
            b.part(Part::Other),
            b.total,
        ));
    }
    s
}

/// The application side of each run as stacked bars: one bar per
/// application and interface, one segment per part.
pub fn chart(results: &[Breakdown]) -> crate::plot::BarChart {
    let cats: Vec<String> = results
        .iter()
        .map(|b| {
            let i = match b.interface {
                Interface::Enso => "Ensō",
                Interface::Packetized => "pkt",
            };
            format!("{} {i}", b.app)
        })
        .collect();
    let mut c = crate::plot::BarChart::new(
        "Application-side instructions per request (KV) or packet, by part \
         (cachegrind, stepped run)",
        "instructions",
        cats,
    )
    .stacked();
    for p in [Part::Receive, Part::Application, Part::Response, Part::Send] {
        let name = match p {
            Part::Receive => "receive",
            Part::Application => "application",
            Part::Response => "response",
            _ => "send",
        };
        c = c.series(name, results.iter().map(|b| b.part(p)).collect());
    }
    c
}

#[cfg(test)]
mod tests;
