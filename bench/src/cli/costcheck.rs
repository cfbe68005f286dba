//! `bench cost-check`: the engine's instructions per echoed packet against
//! a baseline kept in the repository, so that a change that makes the
//! emulated NIC costlier fails CI instead of passing unnoticed.
//!
//! Four cases, each the difference of two cachegrind runs of the stepped
//! worker (the method of `bench cache`, deterministic for one binary on
//! one CPU): Ensō and the packetized interface, each driven as the
//! stepped engine (one [`nic_emu::Engine::step`] per application pass)
//! and through the engine thread's own loop ([`nic_emu::EngineLoop`],
//! turning until a turn finds no work). The baseline records the CPU's
//! cache-line instructions, which choose some of the engine's paths: on a
//! CPU with others the check says so and compares nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

use bench::cache::{self, WorkerConfig};
use bench::emu::Interface;
use bench::progress::Progress;
use bench::results::Table;

use super::echo::text_table;
use crate::print_json;

/// The baseline's default place, from the repository's root.
pub(crate) const DEFAULT_BASELINE: &str = "bench/baselines/engine-instructions.json";

#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct CostCheckArgs {
    /// The baseline file.
    #[arg(long, default_value = DEFAULT_BASELINE)]
    baseline: PathBuf,
    /// Largest growth allowed over the baseline (0.05: 5%).
    #[arg(long, default_value_t = 0.05)]
    tolerance: f64,
    /// Packets measured per case (the difference between the two runs).
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(5000..=1_000_000))]
    packets: u64,
    /// Write the measured counts as the new baseline instead of checking
    /// (commit it on its own, saying why the counts moved).
    #[arg(long)]
    update: bool,
    /// Print the outcome as one JSON object on stdout, and nothing on
    /// stderr but errors.
    #[arg(long)]
    json: bool,
}

/// The baseline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Baseline {
    /// What the file is and how to change it.
    pub(crate) note: String,
    /// The CPU's cache-line instructions when it was measured
    /// ([`nic_emu::engine::line_ops`]).
    pub(crate) line_ops: String,
    /// Frame size on the wire with FCS.
    pub(crate) pkt_size: usize,
    /// Engine instructions per packet by case (`enso/step`, ...).
    pub(crate) engine_instructions_per_pkt: BTreeMap<String, f64>,
}

const NOTE: &str = "Engine instructions per echoed packet (bench cost-check: cachegrind, \
    stepped worker). CI fails when a case grows by more than the tolerance. Change this file \
    only with `bench cost-check --update`, in a commit of its own that says why.";

/// One case's outcome.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CaseOutcome {
    case: String,
    baseline: Option<f64>,
    measured: f64,
    /// measured / baseline - 1.
    change: Option<f64>,
    passed: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    baseline_file: String,
    line_ops: String,
    tolerance: f64,
    cases: Vec<CaseOutcome>,
    /// `None`: nothing compared (updated, or another CPU).
    passed: Option<bool>,
    notes: Vec<String>,
}

const CASES: [(Interface, bool); 4] = [
    (Interface::Enso, false),
    (Interface::Enso, true),
    (Interface::Packetized, false),
    (Interface::Packetized, true),
];

fn case_name(i: Interface, engine_loop: bool) -> String {
    format!("{}/{}", i.name(), if engine_loop { "loop" } else { "step" })
}

/// Compares `measured` with `base`: a case passes when it is at most
/// `tolerance` above its baseline; a case the baseline lacks fails.
pub(crate) fn compare(
    base: &BTreeMap<String, f64>,
    measured: &BTreeMap<String, f64>,
    tolerance: f64,
) -> Vec<CaseOutcome> {
    measured
        .iter()
        .map(|(case, &m)| {
            let b = base.get(case).copied();
            let change = b.map(|b| m / b - 1.0);
            CaseOutcome {
                case: case.clone(),
                baseline: b,
                measured: m,
                change,
                // 1e-9: 105 over 100 is +5% exactly, not a float's hair above it.
                passed: change.is_some_and(|c| c <= tolerance + 1e-9),
            }
        })
        .collect()
}

pub(crate) fn check(args: &CostCheckArgs) -> Result<(), String> {
    if !(0.0..1.0).contains(&args.tolerance) {
        return Err(format!(
            "--tolerance must be in [0, 1), not {}",
            args.tolerance
        ));
    }
    Ok(())
}

pub(crate) fn run(args: &CostCheckArgs) -> Result<(), String> {
    let line_ops = nic_emu::engine::line_ops();
    let base: Option<Baseline> = if args.update {
        None
    } else {
        let text = std::fs::read_to_string(&args.baseline)
            .map_err(|e| format!("{}: {e}", args.baseline.display()))?;
        Some(serde_json::from_str(&text).map_err(|e| format!("{}: {e}", args.baseline.display()))?)
    };
    let mut notes = vec![cache::valgrind_version()?];
    if let Some(b) = &base {
        if b.line_ops != line_ops {
            let msg = format!(
                "skipped: the baseline was measured on a CPU with cache-line instructions \
                 [{}], this one has [{line_ops}]; the engine takes other paths here, so \
                 nothing is compared (measure a baseline on this CPU with --update)",
                b.line_ops
            );
            if args.json {
                return print_json(&Report {
                    baseline_file: args.baseline.display().to_string(),
                    line_ops,
                    tolerance: args.tolerance,
                    cases: Vec::new(),
                    passed: None,
                    notes: vec![msg],
                });
            }
            eprintln!("bench cost-check: {msg}");
            return Ok(());
        }
    }
    let size = base.as_ref().map_or(64, |b| b.pkt_size);
    let (cache_opts, _) = cache::cache_options();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let tmp = std::env::temp_dir().join(format!("bench-cost-check.{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let mut progress = Progress::new("cost-check", 2 * CASES.len() as u64, args.json);
    let mut measured = BTreeMap::new();
    let outcome = (|| -> Result<(), String> {
        for (i, engine_loop) in CASES {
            let cfg = WorkerConfig {
                interface: i,
                wire_size: size,
                packets: args.packets,
                burst: 32,
                window: 64,
                pipes: 1,
                engine_loop,
            };
            let name = case_name(i, engine_loop);
            let r = cache::measure_difference(&exe, &cfg, &cache_opts, &tmp, &mut |n| {
                progress.step(1, &format!("{name} {n} packets"))
            })?;
            let e = r
                .engine_instructions_per_pkt
                .ok_or("cachegrind gave no engine count")?;
            measured.insert(name, e);
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    outcome?;
    progress.finish();
    let (cases, passed) = match &base {
        Some(b) => {
            let c = compare(&b.engine_instructions_per_pkt, &measured, args.tolerance);
            for o in &c {
                if o.change.is_some_and(|x| x < -args.tolerance) {
                    notes.push(format!(
                        "{} is {:.1}% below its baseline: update the baseline (--update) in a \
                         commit of its own, so that the gain is kept",
                        o.case,
                        -100.0 * o.change.unwrap_or(0.0)
                    ));
                }
            }
            let ok = c.iter().all(|o| o.passed);
            (c, Some(ok))
        }
        None => {
            let b = Baseline {
                note: NOTE.into(),
                line_ops: line_ops.clone(),
                pkt_size: size,
                engine_instructions_per_pkt: measured.clone(),
            };
            let text = serde_json::to_string_pretty(&b).map_err(|e| e.to_string())? + "\n";
            std::fs::write(&args.baseline, text)
                .map_err(|e| format!("{}: {e}", args.baseline.display()))?;
            notes.push(format!("wrote {}", args.baseline.display()));
            (compare(&measured, &measured, args.tolerance), None)
        }
    };
    let report = Report {
        baseline_file: args.baseline.display().to_string(),
        line_ops,
        tolerance: args.tolerance,
        cases,
        passed,
        notes,
    };
    if args.json {
        print_json(&report)?;
    } else {
        print(&report);
    }
    match report.passed {
        Some(false) => Err(format!(
            "the engine's instructions per packet grew by more than {:.0}% over {} in: {}",
            100.0 * args.tolerance,
            report.baseline_file,
            report
                .cases
                .iter()
                .filter(|o| !o.passed)
                .map(|o| o.case.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => Ok(()),
    }
}

fn print(r: &Report) {
    let mut t = Table::new(["case", "baseline", "measured", "change", "verdict"]);
    for o in &r.cases {
        t.push([
            o.case.clone(),
            o.baseline.map_or("-".into(), |b| format!("{b:.1}")),
            format!("{:.1}", o.measured),
            o.change
                .map_or("-".into(), |c| format!("{:+.1}%", 100.0 * c)),
            match (r.passed, o.passed) {
                (None, _) => "baseline".into(),
                (_, true) => "ok".into(),
                (_, false) => "GREW".into(),
            },
        ]);
    }
    println!(
        "Engine instructions per echoed packet (cachegrind; CPU line ops [{}]; tolerance {:.0}%)",
        r.line_ops,
        100.0 * r.tolerance
    );
    print!("{}", text_table(&t));
    for n in &r.notes {
        println!("note: {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: &[(&str, f64)]) -> BTreeMap<String, f64> {
        v.iter().map(|(k, x)| (k.to_string(), *x)).collect()
    }

    #[test]
    fn growth_within_the_tolerance_passes_and_beyond_it_fails() {
        let base = map(&[("enso/step", 100.0), ("enso/loop", 200.0)]);
        let c = compare(
            &base,
            &map(&[("enso/step", 105.0), ("enso/loop", 210.1)]),
            0.05,
        );
        assert_eq!(c.len(), 2);
        let by: BTreeMap<_, _> = c.iter().map(|o| (o.case.as_str(), o)).collect();
        assert!(by["enso/step"].passed, "exactly +5%");
        assert!(!by["enso/loop"].passed, "+5.05%");
        assert!((by["enso/loop"].change.unwrap() - 0.0505).abs() < 1e-9);
    }

    #[test]
    fn a_drop_passes_and_a_case_without_a_baseline_fails() {
        let base = map(&[("enso/step", 100.0)]);
        let c = compare(
            &base,
            &map(&[("enso/step", 50.0), ("packetized/step", 1.0)]),
            0.05,
        );
        let by: BTreeMap<_, _> = c.iter().map(|o| (o.case.as_str(), o)).collect();
        assert!(by["enso/step"].passed);
        assert!(!by["packetized/step"].passed);
        assert_eq!(by["packetized/step"].baseline, None);
    }

    #[test]
    fn the_repositorys_baseline_names_every_case() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("baselines/engine-instructions.json"),
        )
        .unwrap();
        let b: Baseline = serde_json::from_str(&text).unwrap();
        let names: Vec<String> = CASES.iter().map(|&(i, l)| case_name(i, l)).collect();
        let keys: Vec<String> = b.engine_instructions_per_pkt.keys().cloned().collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        for v in b.engine_instructions_per_pkt.values() {
            assert!(*v > 10.0 && *v < 10_000.0, "{v}");
        }
    }
}
