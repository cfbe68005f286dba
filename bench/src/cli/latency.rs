//! `bench latency`: RTT percentiles against offered load for per-packet,
//! reactive and prefetching notifications and the packetized interface.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use bench::latency::{self, LatencyPlan, StrategyResult};
use bench::placement::{Placement, Side};
use bench::plot::LineChart;
use bench::probe;
use bench::progress::Progress;
use bench::results::{ResultsDir, Table};

use super::echo::text_table;
use crate::{print_json, Common};

/// What `--json` prints.
const JSON_HELP: &str = "Print the results as one JSON array on stdout, one object per \
    strategy, and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct LatencyArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Emulated one-way interconnect latency (register writes,
    /// notifications, completions), ns.
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub(crate) interconnect_latency_ns: u64,
    /// Packet size on the wire with FCS.
    #[arg(long, default_value_t = 64)]
    pub(crate) size: usize,
    /// Pipes (Ensō) or queues (packetized).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) pipes: u32,
    /// Generator flows.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub(crate) flows: u32,
    /// Offered loads in % of the reactive strategy's zero-loss maximum.
    #[arg(
        long,
        default_value = "1,10,20,30,40,50,60,70,80,90,95,99",
        value_name = "PCT,..."
    )]
    pub(crate) loads: String,
    /// Trial length at each load point.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) trial_ms: u64,
    /// Trial length during the zero-loss search.
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) search_trial_ms: u64,
    /// Unmeasured run on each fresh device first.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub(crate) warmup_ms: u64,
    /// Search precision, as a fraction of the upper bound.
    #[arg(long, default_value_t = 0.02)]
    pub(crate) precision: f64,
    /// Tries at a rate before it counts as lossy.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub(crate) attempts: u32,
    /// Rate of the lowest load, where the NIC and the echo server sleep
    /// between frames and the wake-up cost is measured (frames per second,
    /// below 2000 so that both park before each frame); 0: not measured.
    #[arg(long, default_value_t = 1000.0)]
    pub(crate) wake_pps: f64,
    /// Rounds of the wake-up measurement (each one trial spinning, one
    /// parking).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) wake_rounds: u32,
    /// Trial length of the wake-up measurement.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) wake_trial_ms: u64,
    /// Write a results directory under results/.
    #[arg(long)]
    pub(crate) save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

pub(crate) fn plan(args: &LatencyArgs) -> Result<LatencyPlan, String> {
    let mut plan = LatencyPlan::new(args.interconnect_latency_ns);
    plan.rig.wire_size = args.size;
    plan.rig.pipes = args.pipes;
    plan.rig.flows = args.flows;
    plan.rig.check()?;
    plan.loads_pct = super::parse_list(&args.loads, "load")?;
    if plan.loads_pct.iter().any(|l| !(*l > 0.0 && *l <= 200.0)) {
        return Err("loads are percentages in (0, 200]".into());
    }
    super::check_unique("--loads", &plan.loads_pct)?;
    if !(args.precision > 0.0 && args.precision < 0.5) {
        return Err("--precision must be in (0, 0.5)".into());
    }
    plan.point_trial = Duration::from_millis(args.trial_ms);
    plan.search_trial = Duration::from_millis(args.search_trial_ms);
    plan.warmup = Duration::from_millis(args.warmup_ms);
    plan.precision = args.precision;
    plan.attempts = args.attempts;
    // Slower than one frame per park threshold, or the sides never sleep.
    let most = 1.0 / enso::PARK_AFTER.as_secs_f64();
    if !(args.wake_pps == 0.0 || (args.wake_pps >= 10.0 && args.wake_pps < most)) {
        return Err(format!(
            "--wake-pps must be 0 (not measured) or in [10, {most:.0}) frames per second, \
             so that the NIC and the server sleep between frames"
        ));
    }
    Ok(plan)
}

/// Checks every value before anything runs.
pub(crate) fn check(args: &LatencyArgs) -> Result<(), String> {
    args.common.check()?;
    plan(args).map(|_| ())
}

/// Where the threads ran and where the load came from, in words.
pub(crate) fn placement_text(p: &Placement) -> String {
    let c = |s: Side| p.core(s).map_or_else(|| "-".to_string(), |c| c.to_string());
    format!(
        "NIC engine with its built-in traffic generator on core {} (the generator runs in the \
         engine thread, so no third busy thread), echo server on core {}; the load and the \
         round-trip times come from the built-in generator (frames stamped when sent, timed \
         when they return)",
        c(Side::A),
        c(Side::B)
    )
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |x| x.to_string())
}

pub(crate) fn max_table(results: &[StrategyResult]) -> Table {
    let mut t = Table::new([
        "strategy",
        "max zero-loss Mpps",
        "first lossy Mpps",
        "saturated Mpps",
        "notif/pkt at max",
        "p50 at max ns",
        "p99 at max ns",
        "probe ns",
    ]);
    for r in results {
        t.push([
            r.strategy.clone(),
            format!("{:.3}", r.max_zero_loss_mpps),
            format!("{:.3}", r.lowest_lossy_mpps),
            format!("{:.3}", r.saturation_mpps),
            r.notifications_per_pkt_at_max
                .map_or_else(|| "-".to_string(), |v| format!("{v:.3}")),
            opt(r.p50_rtt_ns_at_max),
            opt(r.p99_rtt_ns_at_max),
            r.search_probe_rtt_ns
                .map_or_else(|| "-".to_string(), |v| format!("{v:.0}")),
        ]);
    }
    t
}

pub(crate) fn points_table(results: &[StrategyResult]) -> Table {
    let mut t = Table::new([
        "load %",
        "offered Mpps",
        "strategy",
        "sent Mpps",
        "achieved Mpps",
        "p50 ns",
        "p99 ns",
        "notif/pkt",
        "loss",
        "zero-loss",
        "contended",
        "probe ns",
    ]);
    let n = results.iter().map(|r| r.points.len()).max().unwrap_or(0);
    for i in 0..n {
        for r in results {
            let Some(p) = r.points.get(i) else { continue };
            t.push([
                format!("{}", p.offered_load_pct.unwrap_or(f64::NAN)),
                format!("{:.3}", p.offered_mpps),
                r.strategy.clone(),
                format!("{:.3}", p.sent_mpps),
                format!("{:.3}", p.achieved_mpps),
                opt(p.p50_rtt_ns),
                opt(p.p99_rtt_ns),
                p.notifications_per_pkt
                    .map_or_else(|| "-".to_string(), |v| format!("{v:.3}")),
                p.loss.to_string(),
                if p.zero_loss { "yes" } else { "no" }.to_string(),
                if p.contended { "yes" } else { "no" }.to_string(),
                p.probe_rtt_ns
                    .map_or_else(|| "-".to_string(), |v| format!("{v:.0}")),
            ]);
        }
    }
    t
}

/// What a run measured.
pub(crate) struct Outcome {
    pub(crate) placement: Placement,
    pub(crate) plan: LatencyPlan,
    pub(crate) text: String,
    pub(crate) results: Vec<StrategyResult>,
    pub(crate) probe_before: f64,
    pub(crate) probe_after: f64,
    /// What waking adds at the lowest load (`None`: not measured).
    pub(crate) wake: Option<latency::WakeCost>,
}

/// What `--json` prints.
#[derive(Serialize)]
struct JsonOut<'a> {
    strategies: &'a [StrategyResult],
    wake: Option<&'a latency::WakeCost>,
}

impl Outcome {
    /// Cores and the probe before the run, for figure titles.
    pub(crate) fn placement_short(&self) -> String {
        super::placement_short(
            &self.placement,
            Some(self.probe_before),
            Some((
                self.probe_before.min(self.probe_after),
                self.probe_before.max(self.probe_after),
            )),
        )
    }

    /// Trials that shared their cores, and trials in all.
    pub(crate) fn contention(&self) -> (usize, usize) {
        (
            self.results.iter().map(|r| r.contended_trials).sum(),
            self.results.iter().map(|r| r.trials).sum(),
        )
    }
}

pub(crate) fn measure(args: &LatencyArgs) -> Result<Outcome, String> {
    let plan = plan(args)?;
    let placement = args.common.placement()?;
    let text = placement_text(&placement);
    let json = args.common.json;
    let before = probe::measure(&placement, probe::DEFAULT_DURATION);
    if !json {
        eprintln!(
            "latency: {} B echo, interconnect latency {} ns",
            args.size, args.interconnect_latency_ns
        );
        eprintln!("threads: {text}");
        eprintln!("{before}");
    }
    let wake_trials = if args.wake_pps > 0.0 {
        2 * u64::from(args.wake_rounds)
    } else {
        0
    };
    let mut progress = Progress::new(
        "latency",
        latency::expected_trials(&plan) + wake_trials,
        json,
    );
    let results = latency::run(&plan, &placement, &text, &mut progress)?;
    let wake = if args.wake_pps > 0.0 {
        Some(latency::wake_cost(
            &plan,
            &placement,
            args.wake_pps,
            args.wake_rounds,
            Duration::from_millis(args.wake_trial_ms),
            &mut progress,
        )?)
    } else {
        None
    };
    progress.finish();
    let after = probe::measure(&placement, probe::DEFAULT_DURATION);
    Ok(Outcome {
        placement,
        plan,
        text,
        results,
        probe_before: before.rtt_ns,
        probe_after: after.rtt_ns,
        wake,
    })
}

/// What the columns mean and what the emulation leaves out.
const NOTES: &str = "A point is zero-loss if every frame came back and the generator sent at \
least 97% of the rate asked (below that, the emulated NIC could not offer the load: sent < \
offered). The emulated interconnect latency delays register writes (both interfaces), Ensō's \
RX notifications and TX completions; nic-emu does not delay descriptor write-backs, so a \
packetized round trip crosses the interconnect once less than an Ensō one.";

/// Says so if the host moved the cores between the search and the loads.
fn moved_warning(results: &[StrategyResult]) -> Option<String> {
    let moved = results.first()?.placement_moved_points;
    (moved > 0).then(|| {
        format!(
            "placement moved: the probe at {moved} of {} load points differs from the search's \
             by more than {}x, so those loads are fractions of a maximum measured on another \
             placement (compare strategies within a load point, not across the run)",
            results[0].points.len(),
            latency::PLACEMENT_MOVED
        )
    })
}

pub(crate) fn print(o: &Outcome) {
    println!("threads: {}", o.text);
    println!(
        "probe: cross-core round trip {:.0} ns before, {:.0} ns after",
        o.probe_before, o.probe_after
    );
    print!("{}", text_table(&max_table(&o.results)));
    print!("{}", text_table(&points_table(&o.results)));
    println!("{NOTES}");
    if let Some(w) = moved_warning(&o.results) {
        println!("{w}");
    }
    let (c, n) = o.contention();
    println!("contended: {c} of {n} trials shared their cores with other work");
    if let Some(w) = &o.wake {
        print!("{}", w.text());
    }
}

pub(crate) fn run(args: &LatencyArgs) -> Result<(), String> {
    let o = measure(args)?;
    if args.common.json {
        print_json(&JsonOut {
            strategies: &o.results,
            wake: o.wake.as_ref(),
        })?;
    } else {
        print(&o);
    }
    if let Some(dir) = super::results_dir("latency", args.save, &args.out)? {
        save(&dir, args, &o).map_err(|e| e.to_string())?;
        if !args.common.json {
            eprintln!("results: {}", dir.path().display());
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct Row<'a> {
    strategy: &'a str,
    probe_rtt_ns: Option<f64>,
    offered_load_pct: Option<f64>,
    offered_mpps: f64,
    sent_mpps: f64,
    achieved_mpps: f64,
    loss: u64,
    loss_fraction: f64,
    p50_rtt_ns: Option<u64>,
    p90_rtt_ns: Option<u64>,
    p99_rtt_ns: Option<u64>,
    p999_rtt_ns: Option<u64>,
    mean_rtt_ns: Option<u64>,
    rtt_samples: u64,
    notifications_per_pkt: Option<f64>,
    nic_busy: f64,
    app_busy: f64,
    contended: bool,
    zero_loss: bool,
}

fn rows<'a>(results: &'a [StrategyResult], search: bool) -> Vec<Row<'a>> {
    results
        .iter()
        .flat_map(|r| {
            let pts = if search { &r.search } else { &r.points };
            pts.iter().map(move |p| Row {
                strategy: &r.strategy,
                probe_rtt_ns: p.probe_rtt_ns,
                offered_load_pct: p.offered_load_pct,
                offered_mpps: p.offered_mpps,
                sent_mpps: p.sent_mpps,
                achieved_mpps: p.achieved_mpps,
                loss: p.loss,
                loss_fraction: p.loss_fraction,
                p50_rtt_ns: p.p50_rtt_ns,
                p90_rtt_ns: p.p90_rtt_ns,
                p99_rtt_ns: p.p99_rtt_ns,
                p999_rtt_ns: p.p999_rtt_ns,
                mean_rtt_ns: p.mean_rtt_ns,
                rtt_samples: p.rtt_samples,
                notifications_per_pkt: p.notifications_per_pkt,
                nic_busy: p.nic_busy,
                app_busy: p.app_busy,
                contended: p.contended,
                zero_loss: p.zero_loss,
            })
        })
        .collect()
}

pub(crate) fn save(
    dir: &ResultsDir,
    args: &LatencyArgs,
    o: &Outcome,
) -> Result<(), bench::results::ResultsError> {
    let (plan, results, text) = (&o.plan, &o.results, &o.text);
    let (probe_before, probe_after) = (o.probe_before, o.probe_after);
    dir.write_config(&(args, plan))?;
    dir.write_json("latency.json", results)?;
    if let Some(w) = &o.wake {
        dir.write_json("wake.json", w)?;
    }
    dir.write_csv("latency.csv", &rows(results, false))?;
    dir.write_csv("search.csv", &rows(results, true))?;
    let mut md = format!(
        "# Echo RTT vs offered load ({} B, interconnect latency {} ns)\n\n{text}.\n\
         Probe (cross-core round trip): {probe_before:.0} ns before, {probe_after:.0} ns after.\n\n\
         Zero-loss maximum: binary search on the generator's rate ({} ms trials, {} tries per \
         rate, precision {:.0}% of the upper bound); a trial loses if any frame did not come \
         back after the drain, or the generator sent below {:.0}% of the rate asked. Loads are \
         % of the reactive strategy's maximum, the same absolute rates for every strategy \
         ({} ms per point, a fresh device per point).\n\n",
        plan.rig.wire_size,
        plan.rig.interconnect_latency_ns,
        plan.search_trial.as_millis(),
        plan.attempts,
        plan.precision * 100.0,
        plan.min_offered_share * 100.0,
        plan.point_trial.as_millis()
    );
    md.push_str(&max_table(results).markdown());
    md.push('\n');
    md.push_str(&points_table(results).markdown());
    md.push('\n');
    md.push_str(NOTES);
    md.push('\n');
    if let Some(w) = moved_warning(results) {
        md.push_str(&format!("\n**{w}**\n"));
    }
    let c: usize = results.iter().map(|r| r.contended_trials).sum();
    let n: usize = results.iter().map(|r| r.trials).sum();
    md.push_str(&format!(
        "\n{c} of {n} trials shared their cores with other work.\n"
    ));
    if let Some(w) = &o.wake {
        md.push_str(&format!("\n```\n{}```\n", w.text()));
    }
    dir.write_summary(&md)?;
    let series = |r: &StrategyResult, f: &dyn Fn(&latency::Point) -> Option<u64>| {
        r.points
            .iter()
            .filter_map(|p| f(p).map(|v| (p.offered_mpps, v as f64)))
            .collect::<Vec<_>>()
    };
    let placement = o.placement_short();
    let chart = latency::rtt_chart(results, &placement);
    let mut p99 = LineChart::new(
        &format!("p99 round-trip time (µs, log axis) vs offered load (Mpps)\n{placement}"),
        "offered load (Mpps)",
        "p99 RTT (µs)",
    )
    .log_y();
    for r in results {
        let pts = series(r, &|p| p.p99_rtt_ns.filter(|&v| v > 0))
            .into_iter()
            .map(|(x, y)| (x, y / 1e3))
            .collect();
        p99 = p99.series(&r.strategy, pts);
    }
    dir.line_chart("rtt.svg", &chart)?;
    dir.line_chart("p99.svg", &p99)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_words(w: &[&str]) -> Result<(), String> {
        let words: Vec<String> = w.iter().map(|s| s.to_string()).collect();
        let (a, _) = super::super::parse_words::<LatencyArgs>(&words)?;
        check(&a)
    }

    #[test]
    fn load_points_are_given_once() {
        assert_eq!(check_words(&[]), Ok(()));
        assert_eq!(check_words(&["--loads", "10,50,90"]), Ok(()));
        for loads in ["50,50", "10,50,50.0", "50, 10 ,50"] {
            assert_eq!(
                check_words(&["--loads", loads]),
                Err("--loads: 50 is given twice".into()),
                "{loads}"
            );
        }
        assert!(check_words(&["--loads", "0"]).is_err());
        assert!(check_words(&["--cores", "0,0"]).is_err());
    }
}
