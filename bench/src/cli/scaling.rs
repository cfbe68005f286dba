//! `bench scaling`: echo throughput with 1, 2, 32, 1024 pipes (Ensō) and
//! RSS queues (packetized) for one application core, interleaved.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use bench::placement::Placement;
use bench::progress::Progress;
use bench::results::ResultsDir;
use bench::scaling::{self, ScalingPlan, ScalingRun};

use super::echo::{placement_line, text_table, Which};
use crate::{print_json, Common};

/// What `--json` prints.
const JSON_HELP: &str = "Print one JSON object on stdout (`points`: one per interface and \
    count; `probe_rtt_ns`, `probe_range_ns`, `placement`), and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct ScalingArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Pipe (Ensō) and RSS queue (packetized) counts, each 1..=1024; rates
    /// are relative to the fewest.
    #[arg(long, default_value = "1,2,32,1024", value_name = "A,B,...")]
    pub(crate) pipes: String,
    /// Interface(s) to measure.
    #[arg(long, value_enum, default_value_t = Which::Both)]
    pub(crate) interface: Which,
    /// Packet size on the wire with FCS (64..1518).
    #[arg(long, default_value_t = 64)]
    pub(crate) size: usize,
    /// Generator flows per pipe or queue (at least 16 flows in all), so
    /// that every pipe or queue receives traffic.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) flows_per_pipe: u32,
    /// Most frames in flight (at most --rx-ring).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(crate) window: u64,
    /// Packetized: RX and TX descriptors per queue (a power of two).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(64..=4096))]
    pub(crate) rx_ring: u32,
    /// Interleaved run length (a warm-up round included): at least two
    /// rounds of one --trial-ms trial per variant.
    #[arg(long, default_value_t = 12_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub(crate) duration_ms: u64,
    /// Length of one trial.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) trial_ms: u64,
    /// Write a results directory under results/.
    #[arg(long)]
    pub(crate) save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

/// Parses `--pipes`: counts, each 1..=1024, none twice.
pub(crate) fn parse_counts(text: &str) -> Result<Vec<u32>, String> {
    let mut v = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!(
                "--pipes '{text}': an empty count (two commas, or one at an end)"
            ));
        }
        let n: u32 = part
            .parse()
            .map_err(|_| format!("--pipes: {part:?} is not a count"))?;
        v.push(n);
    }
    Ok(v)
}

/// The plan, every value checked.
pub(crate) fn plan(args: &ScalingArgs) -> Result<ScalingPlan, String> {
    let mut plan = ScalingPlan::new(parse_counts(&args.pipes)?);
    plan.interfaces = args.interface.interfaces();
    plan.wire_size = args.size;
    plan.flows_per_pipe = args.flows_per_pipe;
    plan.window = args.window;
    if !args.rx_ring.is_power_of_two() {
        return Err(format!("--rx-ring {}: not a power of two", args.rx_ring));
    }
    plan.rx_ring = args.rx_ring;
    plan.tx_ring = args.rx_ring;
    plan.trial = Duration::from_millis(args.trial_ms);
    plan.total = Duration::from_millis(args.duration_ms);
    plan.check()
        .map_err(|e| match e.strip_prefix("pipe count") {
            Some(rest) => format!("--pipes: {}", rest.trim_start()),
            None => e,
        })?;
    super::check_trials_fit(
        args.trial_ms,
        args.duration_ms,
        plan.variants().len() as u64,
    )?;
    Ok(plan)
}

/// Checks every value before anything runs.
pub(crate) fn check(args: &ScalingArgs) -> Result<(), String> {
    args.common.check()?;
    plan(args)?;
    super::check_out(&args.out)
}

/// What a run measured, and where.
pub(crate) struct Outcome {
    pub(crate) placement: Placement,
    pub(crate) run: ScalingRun,
}

impl Outcome {
    /// Cores and the probe, for titles: `cores 0,1, probe 85 ns (close)`.
    pub(crate) fn placement_short(&self) -> String {
        super::placement_short(
            &self.placement,
            self.run.report.probe_median_ns,
            self.run.report.probe_range_ns,
        )
    }
}

/// The JSON `--json` prints.
#[derive(Serialize)]
struct Json<'a> {
    points: &'a [scaling::ScalingPoint],
    probe_rtt_ns: Option<f64>,
    probe_range_ns: Option<(f64, f64)>,
    placement: String,
    plan: &'a ScalingPlan,
}

impl Outcome {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::to_value(Json {
            points: &self.run.points,
            probe_rtt_ns: self.run.report.probe_median_ns,
            probe_range_ns: self.run.report.probe_range_ns,
            placement: placement_line(&self.placement, false),
            plan: &self.run.plan,
        })
        .unwrap_or_default()
    }
}

pub(crate) fn measure(args: &ScalingArgs) -> Result<Outcome, String> {
    let plan = plan(args)?;
    let placement = args.common.placement()?;
    let json = args.common.json;
    if !json {
        eprintln!(
            "scaling: echo at {} B with {:?} pipes/queues, {:.1} s interleaved in {} ms trials",
            plan.wire_size,
            plan.counts,
            args.duration_ms as f64 / 1e3,
            args.trial_ms
        );
        eprintln!("{}", placement_line(&placement, false));
    }
    let mut progress = Progress::new("scaling", scaling::expected_rounds(&plan) as u64, json);
    let run = scaling::run(&plan, &placement, &mut progress);
    progress.finish();
    Ok(Outcome {
        placement,
        run: run?,
    })
}

pub(crate) fn print(o: &Outcome) {
    println!("{}", placement_line(&o.placement, false));
    if let (Some(m), Some((lo, hi))) = (o.run.report.probe_median_ns, o.run.report.probe_range_ns) {
        println!("probe: cross-core round trip median {m:.0} ns ({lo:.0}..{hi:.0})");
    }
    print!("{}", text_table(&scaling::table(&o.run.points)));
    for line in scaling::interpretation(&o.run.points) {
        println!("{line}");
    }
}

pub(crate) fn run(args: &ScalingArgs) -> Result<(), String> {
    let o = measure(args)?;
    if args.common.json {
        print_json(&o.json())?;
    } else {
        print(&o);
    }
    if let Some(dir) = super::results_dir("scaling", args.save, &args.out)? {
        save(&dir, args, &o).map_err(|e| e.to_string())?;
        if !args.common.json {
            eprintln!("results: {}", dir.path().display());
        }
    }
    Ok(())
}

/// The summary's text: placement, table, what it says.
pub(crate) fn summary_md(o: &Outcome) -> String {
    let mut md = format!(
        "# Echo rate vs pipes or RSS queues, one application core\n\n{}. {} B packets; \
         every (interface, count) pair runs interleaved with the others, so \"vs fewest\" is \
         a median of per-round ratios to the same interface with the fewest pipes. The \
         generator's flows ({} per pipe, at least {}) hash over the pipes or queues.\n\n",
        placement_line(&o.placement, false),
        o.run.plan.wire_size,
        o.run.plan.flows_per_pipe,
        scaling::MIN_FLOWS,
    );
    if let (Some(m), Some((lo, hi))) = (o.run.report.probe_median_ns, o.run.report.probe_range_ns) {
        md.push_str(&format!(
            "Probe (cross-core round trip): median {m:.0} ns ({lo:.0}..{hi:.0}).\n\n"
        ));
    }
    md.push_str(&scaling::table(&o.run.points).markdown());
    md.push('\n');
    for line in scaling::interpretation(&o.run.points) {
        md.push_str(&format!("- {line}\n"));
    }
    md
}

/// A point as a CSV row (no nested values).
#[derive(Serialize)]
struct CsvRow<'a> {
    interface: &'a str,
    pipes: u32,
    flows: u32,
    mpps: f64,
    mpps_min: f64,
    mpps_max: f64,
    gbps: f64,
    relative_to_fewest: Option<f64>,
    nic_ns_per_pkt: f64,
    app_ns_per_pkt: f64,
    nic_busy: f64,
    app_busy: f64,
    bottleneck: &'a str,
    packets_per_notification: Option<f64>,
    drops: u64,
    contended_trials: usize,
    trials: usize,
}

impl<'a> From<&'a scaling::ScalingPoint> for CsvRow<'a> {
    fn from(p: &'a scaling::ScalingPoint) -> Self {
        CsvRow {
            interface: &p.interface,
            pipes: p.pipes,
            flows: p.flows,
            mpps: p.mpps,
            mpps_min: p.mpps_range[0],
            mpps_max: p.mpps_range[1],
            gbps: p.gbps,
            relative_to_fewest: p.relative_to_fewest,
            nic_ns_per_pkt: p.nic_ns_per_pkt,
            app_ns_per_pkt: p.app_ns_per_pkt,
            nic_busy: p.nic_busy,
            app_busy: p.app_busy,
            bottleneck: &p.bottleneck,
            packets_per_notification: p.packets_per_notification,
            drops: p.drops,
            contended_trials: p.contended_trials,
            trials: p.trials,
        }
    }
}

pub(crate) fn save(
    dir: &ResultsDir,
    args: &ScalingArgs,
    o: &Outcome,
) -> Result<(), bench::results::ResultsError> {
    dir.write_config(&(args, &o.run.plan))?;
    dir.write_json("scaling.json", &o.run)?;
    let rows: Vec<CsvRow<'_>> = o.run.points.iter().map(CsvRow::from).collect();
    dir.write_csv("scaling.csv", &rows)?;
    dir.write_table("trials.csv", &o.run.report.trial_table())?;
    dir.write_summary(&summary_md(o))?;
    dir.line_chart(
        "scaling.svg",
        &scaling::chart(&o.run.points, o.run.plan.wire_size, &o.placement_short()),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_words(w: &[&str]) -> Result<(), String> {
        let words: Vec<String> = w.iter().map(|s| s.to_string()).collect();
        let (a, _) = super::super::parse_words::<ScalingArgs>(&words)?;
        check(&a)
    }

    #[test]
    fn pipe_counts_are_checked() {
        assert_eq!(check_words(&[]), Ok(()));
        assert_eq!(
            check_words(&["--pipes", "1,1024", "--interface", "enso"]),
            Ok(())
        );
        for (pipes, e) in [
            ("0,2", "--pipes: 0 is outside 1..=1024"),
            ("1,2048", "--pipes: 2048 is outside 1..=1024"),
            ("1,2,1", "--pipes: 1 is given twice"),
            (
                "1,,2",
                "--pipes '1,,2': an empty count (two commas, or one at an end)",
            ),
            ("1,x", "--pipes: \"x\" is not a count"),
        ] {
            assert_eq!(
                check_words(&["--pipes", pipes]),
                Err(e.to_string()),
                "{pipes}"
            );
        }
    }

    #[test]
    fn other_values_are_checked() {
        assert!(check_words(&["--rx-ring", "1000"])
            .unwrap_err()
            .contains("not a power of two"));
        assert!(check_words(&["--window", "4096"])
            .unwrap_err()
            .contains("can overflow"));
        assert!(
            check_words(&["--trial-ms", "1000", "--duration-ms", "2000"])
                .unwrap_err()
                .starts_with("--trial-ms 1000 does not fit")
        );
        assert!(check_words(&["--size", "60"]).is_err());
        assert!(check_words(&["--cores", "0,0"]).is_err());
    }

    #[test]
    fn the_plan_follows_the_arguments() {
        let words: Vec<String> = [
            "--pipes",
            "2,32",
            "--interface",
            "packetized",
            "--rx-ring",
            "512",
            "--window",
            "256",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (a, _) = super::super::parse_words::<ScalingArgs>(&words).unwrap();
        let p = plan(&a).unwrap();
        assert_eq!(p.counts, vec![2, 32]);
        assert_eq!(p.fewest(), 2);
        assert_eq!(p.variants().len(), 2);
        assert_eq!((p.rx_ring, p.tx_ring, p.window), (512, 512, 256));
    }
}
