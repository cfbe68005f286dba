//! `bench isolation`: whether one application's flow rules slow another
//! application's lookups (application A fills its quota of rules;
//! application B's echo rate with A detached and attached, interleaved).

use std::time::Duration;

use clap::Args;
use serde::Serialize;

use bench::emu::{Interface, RigConfig};
use bench::isolation::{self, IsolationPlan, IsolationRun, ALONE, CROWDED};
use bench::placement::{Placement, Side};
use bench::progress::Progress;
use bench::refring::Mode;

use crate::{print_json, Common};

/// What `--json` prints.
const JSON_HELP: &str = "Print the run as one JSON object on stdout (`quota`: the quota \
    phase; `alone_mpps`, `crowded_mpps`, `ratio`: the echo rates; `report`: every trial), and \
    nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct IsolationArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Bind calls application A makes, each with a distinct UDP rule, on
    /// one pipe (all past its quota must be refused).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u32).range(1..=16_000_000))]
    pub(crate) binds: u32,
    /// Packet size on the wire with FCS (64..1518).
    #[arg(long, default_value_t = 64)]
    pub(crate) size: usize,
    /// Application B's pipes (its flows' rules spread over them).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) pipes: u32,
    /// UDP flows the generator cycles through: application B binds one
    /// rule per flow.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=2048))]
    pub(crate) flows: u32,
    /// Most frames in flight (sent, not back).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) window: u64,
    /// Length of one trial (one state, A detached or attached).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) trial_ms: u64,
    /// Measured rounds: one trial of each state per round, the order
    /// alternating.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) rounds: u64,
    /// Rounds run first and left out of the medians.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=100))]
    pub(crate) warmup: u64,
}

/// Checks the arguments before anything runs.
pub(crate) fn check(args: &IsolationArgs) -> Result<(), String> {
    args.common.check()?;
    plan(args).rig.check()
}

fn plan(args: &IsolationArgs) -> IsolationPlan {
    let mut rig = RigConfig::new(Interface::Enso, Mode::Echo, args.size);
    rig.pipes = args.pipes;
    rig.flows = args.flows;
    rig.window = Some(args.window);
    rig.flow_rules = true;
    IsolationPlan {
        rig,
        binds: args.binds,
        trial: Duration::from_millis(args.trial_ms),
        rounds: args.rounds as usize,
        warmup: args.warmup as usize,
    }
}

/// The one object `--json` prints.
#[derive(Serialize)]
struct Summary<'a> {
    plan: &'a IsolationPlan,
    cores: [Option<usize>; 2],
    quota: &'a isolation::QuotaReport,
    quota_holds: bool,
    own_rules: usize,
    alone_mpps: Option<f64>,
    alone_mpps_range: Option<[f64; 2]>,
    crowded_mpps: Option<f64>,
    crowded_mpps_range: Option<[f64; 2]>,
    /// Median of per-round crowded / alone.
    ratio: Option<f64>,
    ratio_range: Option<[f64; 2]>,
    /// Rules the NIC held at the start of each state's trials (median).
    alone_rules: Option<f64>,
    crowded_rules: Option<f64>,
    /// Frames no rule claimed (dropped), over all measured trials.
    no_match_drops: u64,
    drops: u64,
    probe_rtt_ns: Option<f64>,
    probe_rtt_range_ns: Option<[f64; 2]>,
    contended_trials: usize,
    trials: usize,
    fills: usize,
    fill_ms: Option<f64>,
    report: &'a bench::interleave::InterleaveReport,
}

fn summary<'a>(plan: &'a IsolationPlan, placement: &Placement, r: &'a IsolationRun) -> Summary<'a> {
    let v = |n: &str| r.report.variant(n);
    let rate = |n: &str| v(n).map(|s| s.median_mpps);
    let range = |n: &str| v(n).map(|s| [s.min_mpps, s.max_mpps]);
    let rules = |n: &str| v(n).and_then(|s| s.median_extra.get("flow_rules").copied());
    let sum = |key: &str| -> u64 {
        r.report
            .measured()
            .flat_map(|round| round.trials.iter())
            .map(|t| t.result.extra.get(key).copied().unwrap_or(0.0) as u64)
            .sum()
    };
    Summary {
        plan,
        cores: [placement.core(Side::A), placement.core(Side::B)],
        quota: &r.quota,
        quota_holds: r.quota.holds(),
        own_rules: r.own_rules,
        alone_mpps: rate(ALONE),
        alone_mpps_range: range(ALONE),
        crowded_mpps: rate(CROWDED),
        crowded_mpps_range: range(CROWDED),
        ratio: r.ratio,
        ratio_range: r.ratio_range,
        alone_rules: rules(ALONE),
        crowded_rules: rules(CROWDED),
        no_match_drops: sum("drop_no_match"),
        drops: sum("drops"),
        probe_rtt_ns: r.report.probe_median_ns,
        probe_rtt_range_ns: r.report.probe_range_ns.map(|(a, b)| [a, b]),
        contended_trials: r.report.variants.iter().map(|v| v.contended_trials).sum(),
        trials: r.report.variants.iter().map(|v| v.trials).sum(),
        fills: r.fills,
        fill_ms: r.fill_ms,
        report: &r.report,
    }
}

fn opt(x: Option<f64>, prec: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
}

fn print(s: &Summary<'_>) {
    let q = s.quota;
    let refused: Vec<String> = q.refused.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!(
        "quota: application A made {} binds with distinct UDP rules on one pipe in {:.0} ms: \
         {} applied, {} refused ({}), first refusal at call {}",
        q.tries,
        q.elapsed_ms,
        q.applied,
        q.tries - q.applied,
        if refused.is_empty() {
            "none".to_string()
        } else {
            refused.join(", ")
        },
        q.first_refused
            .map_or_else(|| "-".to_string(), |i| i.to_string()),
    );
    println!(
        "quota: the NIC holds {} rules after ({} of application A, {} of application B); \
         quota {} per application: {}",
        q.nic_rules_after,
        q.nic_rules_added,
        s.own_rules,
        q.quota,
        if s.quota_holds {
            "held (exactly the quota applied, every other call refused naming it)"
        } else {
            "NOT held"
        }
    );
    let c = |x: Option<usize>| x.map_or_else(|| "-".to_string(), |c| c.to_string());
    println!(
        "echo: application B, {} B, {} pipes, {} flows each with its own rule (no fallback \
         pipe); NIC engine on core {}, B on core {}; {} ms trials",
        s.plan.rig.wire_size,
        s.plan.rig.pipes,
        s.plan.rig.flows,
        c(s.cores[0]),
        c(s.cores[1]),
        s.plan.trial.as_millis()
    );
    let range =
        |r: Option<[f64; 2]>| r.map_or_else(String::new, |[a, b]| format!(" ({a:.2}..{b:.2})"));
    println!(
        "echo: A detached ({} rules in the NIC): {} Mpps{}",
        opt(s.alone_rules, 0),
        opt(s.alone_mpps, 2),
        range(s.alone_mpps_range)
    );
    println!(
        "echo: A attached ({} rules in the NIC): {} Mpps{}",
        opt(s.crowded_rules, 0),
        opt(s.crowded_mpps, 2),
        range(s.crowded_mpps_range)
    );
    println!(
        "echo: attached / detached {} (per round {}), {} measured trials, {} frames no rule \
         claimed, {} drops; A re-attached {} times, median {} ms for attach and {} binds",
        opt(s.ratio, 3),
        s.ratio_range
            .map_or_else(|| "-".to_string(), |[a, b]| format!("{a:.3}..{b:.3}")),
        s.trials,
        s.no_match_drops,
        s.drops,
        s.fills,
        opt(s.fill_ms, 0),
        q.quota
    );
    match (s.probe_rtt_ns, s.probe_rtt_range_ns) {
        (Some(m), Some([lo, hi])) => {
            println!("probe: cross-core round trip median {m:.0} ns ({lo:.0}..{hi:.0})")
        }
        _ => println!("probe: none"),
    }
    if s.contended_trials > 0 {
        println!(
            "contended: {} of {} trials shared their cores with other work (ratios are per round)",
            s.contended_trials, s.trials
        );
    } else {
        println!(
            "contended: no ({} trials had their cores to themselves)",
            s.trials
        );
    }
}

pub(crate) fn run(args: &IsolationArgs) -> Result<(), String> {
    let placement = args.common.placement()?;
    let plan = plan(args);
    let json = args.common.json;
    if !json {
        eprintln!(
            "isolation: {} binds by application A, then {} rounds ({} warm-up) of {} ms echo \
             trials of application B with A detached and attached",
            plan.binds, plan.rounds, plan.warmup, args.trial_ms
        );
    }
    let rounds = (plan.rounds + plan.warmup) as u64;
    let mut progress = Progress::new("isolation", rounds, json);
    let r = isolation::run(&plan, &placement, &mut progress)?;
    progress.finish();
    let s = summary(&plan, &placement, &r);
    if json {
        print_json(&s)
    } else {
        print(&s);
        Ok(())
    }
}
