//! `bench cache`: the application side's cache behaviour per interface
//! (hardware counters where the machine has them, cachegrind otherwise),
//! and the hidden `bench cache-worker` that cachegrind runs.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use bench::cache::{self, CacheResult, Ratios, RunContext, WorkerConfig};
use bench::emu::Interface;
use bench::plot::BarChart;
use bench::progress::Progress;
use bench::results::{ResultsDir, Table};

use super::echo::{text_table, Which};
use super::Given;
use crate::{print_json, Common};

/// Where the figures come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Source {
    /// Hardware counters if the machine has them, else cachegrind.
    Auto,
    /// Hardware counters only.
    Perf,
    /// Cachegrind only.
    Cachegrind,
}

/// What `--json` prints.
const JSON_HELP: &str = "Print the report as one JSON object on stdout, one element per \
    interface in its `results`, and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct CacheArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Interface(s) to measure.
    #[arg(long, value_enum, default_value_t = Which::Both)]
    pub(crate) interface: Which,
    /// Where the figures come from.
    #[arg(long, value_enum, default_value_t = Source::Auto)]
    pub(crate) source: Source,
    /// Packet size on the wire with FCS.
    #[arg(long, default_value_t = 64)]
    pub(crate) size: usize,
    /// Cachegrind: packets measured: the longer run echoes this many more
    /// than the shorter one (which first cycles twice through the pipe or
    /// buffer pool); the difference is measured.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(5000..=10_000_000))]
    pub(crate) packets: u64,
    /// Cachegrind: generator frames per engine step.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) burst: u64,
    /// Cachegrind: most frames in flight (the NIC at most this far ahead).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(crate) window: u64,
    /// Cachegrind: pipes (Ensō) or queues (packetized).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) pipes: u32,
    /// Perf: interleaved run length.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub(crate) duration_ms: u64,
    /// Perf: trial length.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) trial_ms: u64,
    /// Write a results directory under results/.
    #[arg(long)]
    pub(crate) save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

/// Arguments of the hidden worker (see `bench::cache::worker_args`).
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct WorkerArgs {
    #[arg(long, value_enum)]
    interface: Interface,
    #[arg(long)]
    size: usize,
    #[arg(long)]
    packets: u64,
    #[arg(long, default_value_t = 32)]
    burst: usize,
    #[arg(long, default_value_t = 64)]
    window: u64,
    #[arg(long, default_value_t = 1)]
    pipes: u32,
    #[arg(long)]
    engine_loop: bool,
}

pub(crate) fn worker(args: &WorkerArgs) -> Result<(), String> {
    let out = cache::run_worker(&WorkerConfig {
        interface: args.interface,
        wire_size: args.size,
        packets: args.packets,
        burst: args.burst,
        window: args.window,
        pipes: args.pipes,
        engine_loop: args.engine_loop,
    })?;
    print_json(&out)
}

/// What `bench cache --json` prints.
#[derive(Serialize)]
pub(crate) struct CacheReport {
    pub(crate) source: String,
    pub(crate) pkt_size: usize,
    pub(crate) results: Vec<CacheResult>,
    /// Ensō / packetized, application side.
    pub(crate) ratios: Option<Ratios>,
    pub(crate) targets: Vec<String>,
    pub(crate) targets_met: Option<bool>,
    /// How the run was made and what it cannot show.
    pub(crate) method: String,
    /// Whether other work shared the cores (perf); cachegrind is simulated.
    pub(crate) contended: Option<bool>,
    /// Perf: the cross-core probe and the contention of the threaded run
    /// (cachegrind: none, it is single-threaded and simulated).
    pub(crate) run: Option<RunContext>,
    pub(crate) notes: Vec<String>,
}

const CACHEGRIND_METHOD: &str = "cachegrind (simulated caches, sized as this machine's L1 and \
last level): deterministic single-threaded stepped echo (one engine step, then the \
application's pass; generator bursts of 32, at most 64 frames in flight), run twice with \
different packet counts; the difference is divided by the extra packets, so setup, warm-up and \
exit cancel out. Attributed by function: application = enso::, enso_apps:: and the worker's \
application pass; engine = nic_emu::, pcie_model:: and the worker's engine pass; other = \
libc/std (mostly the engine's frame copies). Engine and application map shared memory at \
different addresses, so frames the engine writes are not in the application's view of the \
cache (as after a DMA write); but lines the application read recently and the NIC rewrote \
since (descriptors, notifications) still hit, where a real DMA write would invalidate them.";

/// Checks the size before anything runs: a size outside the range failed
/// only inside the cachegrind worker (or divided by zero at 0).
fn check_size(args: &CacheArgs) -> Result<(), String> {
    bench::frames::check_wire_size(args.size).map_err(|e| format!("--size: {e}"))
}

/// Options only hardware counters use (threaded interleaved runs): (id,
/// flag).
const PERF_OPTIONS: [(&str, &str); 3] = [
    ("cores", "--cores"),
    ("duration_ms", "--duration-ms"),
    ("trial_ms", "--trial-ms"),
];
/// Options only cachegrind uses (the stepped single-threaded worker).
const CACHEGRIND_OPTIONS: [(&str, &str); 4] = [
    ("packets", "--packets"),
    ("burst", "--burst"),
    ("window", "--window"),
    ("pipes", "--pipes"),
];

/// The flags among `options` that `given` gives.
fn given_flags(given: &Given, options: &[(&str, &'static str)]) -> Vec<&'static str> {
    options
        .iter()
        .filter(|(id, _)| given.has(id))
        .map(|&(_, flag)| flag)
        .collect()
}

/// Checks every value before anything runs, and refuses the options of
/// the source not chosen.
pub(crate) fn check(args: &CacheArgs, given: &Given) -> Result<(), String> {
    check_size(args)?;
    let (unused, other, chosen) = match args.source {
        Source::Cachegrind => (PERF_OPTIONS.as_slice(), "perf", "cachegrind"),
        Source::Perf => (CACHEGRIND_OPTIONS.as_slice(), "cachegrind", "perf"),
        Source::Auto => (&[][..], "", ""),
    };
    if let Some(flag) = given_flags(given, unused).first() {
        return Err(format!(
            "{flag} applies only to --source {other}, and --source selects {chosen}"
        ));
    }
    args.common.check()?;
    if args.source != Source::Cachegrind {
        super::check_trials_fit(
            args.trial_ms,
            args.duration_ms,
            args.interface.interfaces().len() as u64,
        )?;
    }
    Ok(())
}

/// The note that options `given` for the source `auto` did not pick are
/// unused.
fn unused_note(given: &Given, options: &[(&str, &'static str)], source: &str) -> Option<String> {
    let flags = given_flags(given, options);
    (!flags.is_empty()).then(|| format!("{} unused: {source} only", flags.join(", ")))
}

pub(crate) fn measure(
    args: &CacheArgs,
    given: &Given,
    progress: &mut Progress,
) -> Result<CacheReport, String> {
    check_size(args)?;
    let interfaces = args.interface.interfaces();
    let mut notes = Vec::new();
    let use_perf = match args.source {
        Source::Cachegrind => false,
        Source::Perf => {
            bench::perf::Counters::open()?;
            true
        }
        Source::Auto => match bench::perf::Counters::open() {
            Ok(_) => {
                notes.extend(unused_note(given, &CACHEGRIND_OPTIONS, "cachegrind"));
                true
            }
            Err(e) => {
                notes.push(format!("no hardware counters ({e}): using cachegrind"));
                notes.extend(unused_note(given, &PERF_OPTIONS, "hardware counters"));
                false
            }
        },
    };
    if use_perf {
        super::check_trials_fit(args.trial_ms, args.duration_ms, interfaces.len() as u64)?;
        let placement = args.common.placement()?;
        let (results, context) = cache::perf_run(
            &interfaces,
            args.size,
            Duration::from_millis(args.trial_ms),
            Duration::from_millis(args.duration_ms),
            &placement,
            progress,
        )?;
        let ratios = cache::ratios(&results);
        return Ok(report(
            "perf",
            args.size,
            results,
            ratios,
            "perf: hardware counters of the application thread (user space only) during \
             interleaved threaded echo runs (NIC engine on one core, application on the other); \
             L1d and LLC figures are load misses."
                .into(),
            Some(context),
            notes,
        ));
    }
    let version = cache::valgrind_version()?;
    notes.push(version);
    let (cache_opts, caches) = cache::cache_options();
    notes.extend(caches);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    remove_stale_work_dirs(&std::env::temp_dir());
    let tmp = std::env::temp_dir().join(format!("{WORK_DIR_PREFIX}{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let mut results = Vec::new();
    let outcome = (|| -> Result<(), String> {
        for &i in &interfaces {
            let cfg = WorkerConfig {
                interface: i,
                wire_size: args.size,
                packets: args.packets,
                burst: args.burst as usize,
                window: args.window,
                pipes: args.pipes,
                engine_loop: false,
            };
            results.push(cache::measure_difference(
                &exe,
                &cfg,
                &cache_opts,
                &tmp,
                &mut |n| progress.step(1, &format!("{i} {n} packets")),
            )?);
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    outcome?;
    let ratios = cache::ratios(&results);
    Ok(report(
        "cachegrind",
        args.size,
        results,
        ratios,
        CACHEGRIND_METHOD.into(),
        None,
        notes,
    ))
}

/// The cachegrind runs' working directory in the temporary directory is
/// this followed by the process id.
const WORK_DIR_PREFIX: &str = "bench-cache-";

/// Removes the working directories under `base` whose process has gone:
/// a run stopped by a signal (Ctrl-C) exits at once and leaves its own
/// (partial cachegrind profiles) behind.
fn remove_stale_work_dirs(base: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(WORK_DIR_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists();
        if gone && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn report(
    source: &str,
    pkt_size: usize,
    results: Vec<CacheResult>,
    ratios: Option<Ratios>,
    method: String,
    run: Option<RunContext>,
    notes: Vec<String>,
) -> CacheReport {
    let t = ratios.as_ref().map(cache::targets).unwrap_or_default();
    CacheReport {
        source: source.to_string(),
        pkt_size,
        results,
        targets_met: ratios.as_ref().map(|_| t.iter().all(|x| x.1)),
        ratios,
        targets: t.into_iter().map(|x| x.0).collect(),
        method,
        contended: run.as_ref().map(|r| r.contended_trials > 0),
        run,
        notes,
    }
}

pub(crate) fn table(r: &CacheReport) -> Table {
    let mut t = Table::new([
        "interface",
        "app instr/pkt",
        "app data refs/pkt",
        "app D1 miss/pkt",
        "app LL miss/pkt",
        "app D1 miss rate",
        "engine instr/pkt",
        "engine D1 miss/pkt",
        "other instr/pkt",
        "notif/pkt",
    ]);
    let o = |x: Option<f64>, p: usize| x.map_or_else(|| "-".to_string(), |v| format!("{v:.p$}"));
    for x in &r.results {
        t.push([
            x.interface.clone(),
            format!("{:.1}", x.app_instructions_per_pkt),
            o(x.app_data_refs_per_pkt, 1),
            format!("{:.4}", x.app_d1_misses_per_pkt),
            o(x.app_ll_misses_per_pkt, 4),
            o(x.app_d1_miss_rate.map(|v| v * 100.0), 2) + "%",
            o(x.engine_instructions_per_pkt, 1),
            o(x.engine_d1_misses_per_pkt, 3),
            o(x.other_instructions_per_pkt, 1),
            o(x.notifications_per_pkt, 4),
        ]);
    }
    t
}

pub(crate) fn print(r: &CacheReport) {
    println!("{}", r.method);
    print!("{}", text_table(&table(r)));
    for x in &r.results {
        if !x.app_top_functions.is_empty() {
            println!(
                "{} application functions (instructions, D1 misses per packet):",
                x.interface
            );
            for f in &x.app_top_functions {
                println!(
                    "  {:>7.1} {:>7.4}  {}",
                    f.instructions_per_pkt, f.d1_misses_per_pkt, f.function
                );
            }
        }
    }
    if let Some(ra) = &r.ratios {
        println!(
            "Ensō / packetized (application): instructions {:.3}x, D1 misses {:.3}x{}",
            ra.app_instructions,
            ra.app_d1_misses,
            ra.app_ll_misses
                .map_or_else(String::new, |l| format!(", LL misses {l:.3}x"))
        );
    }
    if let Some(run) = &r.run {
        println!("{}", run.describe());
    }
    for t in &r.targets {
        println!("target: {t}");
    }
    for n in &r.notes {
        eprintln!("note: {n}");
    }
}

/// The run's progress: two runs per interface (on stderr; none with
/// `--json`).
pub(crate) fn progress(args: &CacheArgs) -> Progress {
    let steps = 2 * args.interface.interfaces().len() as u64;
    Progress::new("cache", steps, args.common.json)
}

pub(crate) fn run(args: &CacheArgs, given: &Given) -> Result<(), String> {
    let mut progress = progress(args);
    let r = measure(args, given, &mut progress)?;
    progress.finish();
    if args.common.json {
        print_json(&r)?;
    } else {
        print(&r);
    }
    if let Some(dir) = super::results_dir("cache", args.save, &args.out)? {
        save(&dir, args, &r).map_err(|e| e.to_string())?;
        if !args.common.json {
            eprintln!("results: {}", dir.path().display());
        }
    }
    Ok(())
}

/// Where the figures were measured, for titles and the report.
pub(crate) fn placement_of(r: &CacheReport) -> String {
    match &r.run {
        Some(run) => run.describe(),
        None => format!(
            "{}: simulated caches, stepped single-threaded run (no cross-core placement)",
            r.source
        ),
    }
}

pub(crate) fn save(
    dir: &ResultsDir,
    args: &CacheArgs,
    r: &CacheReport,
) -> Result<(), bench::results::ResultsError> {
    dir.write_config(args)?;
    dir.write_json("cache.json", r)?;
    let t = table(r);
    dir.write_table("cache.csv", &t)?;
    let mut md = format!(
        "# Application cache behaviour at {} B ({})\n\n{}\n\n",
        r.pkt_size, r.source, r.method
    );
    md.push_str(&t.markdown());
    md.push('\n');
    if let Some(ra) = &r.ratios {
        md.push_str(&format!(
            "Ensō / packetized, application side: instructions {:.3}x, D1 misses {:.3}x.\n\n",
            ra.app_instructions, ra.app_d1_misses
        ));
    }
    for t in &r.targets {
        md.push_str(&format!("- Target: {t}.\n"));
    }
    if let Some(run) = &r.run {
        md.push_str(&format!("- {}.\n", run.describe()));
    }
    dir.write_summary(&md)?;
    let cats: Vec<String> = r.results.iter().map(|x| x.interface.clone()).collect();
    dir.bar_chart(
        "d1_misses.svg",
        &BarChart::new(
            &format!(
                "Application L1d misses per packet (misses/packet), {} B\n{}",
                r.pkt_size,
                placement_of(r)
            ),
            "misses per packet",
            cats.clone(),
        )
        .series(
            "app D1 misses/pkt",
            r.results.iter().map(|x| x.app_d1_misses_per_pkt).collect(),
        ),
    )?;
    dir.bar_chart(
        "instructions.svg",
        &BarChart::new(
            &format!(
                "Application instructions per packet, {} B\n{}",
                r.pkt_size,
                placement_of(r)
            ),
            "instructions per packet",
            cats,
        )
        .series(
            "app instructions/pkt",
            r.results
                .iter()
                .map(|x| x.app_instructions_per_pkt)
                .collect(),
        ),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_directories_of_processes_gone_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let b = base.path();
        // Above the largest pid Linux hands out (2^22): no such process.
        let stale = b.join(format!("{WORK_DIR_PREFIX}4194305"));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("cachegrind.enso.1.out"), b"partial").unwrap();
        let mine = b.join(format!("{WORK_DIR_PREFIX}{}", std::process::id()));
        std::fs::create_dir(&mine).unwrap();
        let other = b.join(format!("{WORK_DIR_PREFIX}x"));
        std::fs::create_dir(&other).unwrap();
        remove_stale_work_dirs(b);
        assert!(!stale.exists());
        assert!(mine.exists(), "a running process's directory stays");
        assert!(other.exists(), "not a process's: not ours to remove");
    }

    #[test]
    fn a_perf_report_says_where_the_cores_were() {
        let run = RunContext {
            probe_rtt_ns: Some(84.0),
            probe_rtt_range_ns: Some([80.0, 90.0]),
            contended_trials: 2,
            trials: 20,
        };
        let r = report(
            "perf",
            64,
            Vec::new(),
            None,
            String::new(),
            Some(run),
            Vec::new(),
        );
        assert_eq!(r.contended, Some(true));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["run"]["probe_rtt_ns"], 84.0);
        let r = report(
            "cachegrind",
            64,
            Vec::new(),
            None,
            String::new(),
            None,
            Vec::new(),
        );
        assert_eq!(r.contended, None, "simulated: no cores to share");
    }

    fn check_words(w: &[&str]) -> Result<(), String> {
        let words: Vec<String> = w.iter().map(|s| s.to_string()).collect();
        let (a, given) = super::super::parse_words::<CacheArgs>(&words)?;
        check(&a, &given)
    }

    #[test]
    fn options_of_the_source_not_chosen_are_refused() {
        for ok in [
            &[][..],
            &["--cores", "0,1", "--packets", "5000", "--trial-ms", "100"],
            &[
                "--source",
                "cachegrind",
                "--packets",
                "5000",
                "--pipes",
                "2",
            ],
            &[
                "--source",
                "perf",
                "--trial-ms",
                "100",
                "--duration-ms",
                "1000",
            ],
        ] {
            // Cores 0 and 1 may not both be this process's: only the
            // options' use is checked here.
            match check_words(ok) {
                Err(e) if e.starts_with("--cores 0,1: core") => {}
                r => assert_eq!(r, Ok(()), "{ok:?}"),
            }
        }
        assert_eq!(
            check_words(&["--source", "cachegrind", "--cores", "0,0"]),
            Err("--cores applies only to --source perf, and --source selects cachegrind".into())
        );
        assert!(check_words(&["--source", "cachegrind", "--trial-ms", "100"]).is_err());
        assert_eq!(
            check_words(&["--source", "perf", "--window", "8"]),
            Err("--window applies only to --source cachegrind, and --source selects perf".into())
        );
        assert!(check_words(&["--source", "perf", "--pipes", "1"]).is_err());
        // Whichever source auto picks, the values are checked.
        assert_eq!(
            check_words(&["--cores", "0,0"]),
            Err("--cores 0,0: both sides on core 0: give two distinct cores".into())
        );
        assert!(check_words(&["--trial-ms", "5000"]).is_err());
        assert!(check_words(&["--size", "60"]).is_err());
    }

    #[test]
    fn auto_notes_the_options_of_the_source_it_did_not_pick() {
        let words: Vec<String> = ["--cores", "0,1", "--trial-ms", "100", "--pipes", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (_, given) = super::super::parse_words::<CacheArgs>(&words).unwrap();
        assert_eq!(
            unused_note(&given, &PERF_OPTIONS, "hardware counters").as_deref(),
            Some("--cores, --trial-ms unused: hardware counters only")
        );
        assert_eq!(
            unused_note(&given, &CACHEGRIND_OPTIONS, "cachegrind").as_deref(),
            Some("--pipes unused: cachegrind only")
        );
        assert_eq!(
            unused_note(&Given::default(), &PERF_OPTIONS, "hardware counters"),
            None
        );
    }
}
