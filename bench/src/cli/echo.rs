//! `bench echo`: packet rate of echo (or rx) on the emulated NIC, Ensō vs
//! packetized vs the reference ring.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use bench::echo::{self, EchoPlan, EchoRun, EchoSummary, REFERENCE};
use bench::emu::{Interface, RigConfig};
use bench::placement::{Placement, Side};
use bench::plot::{BarChart, LineChart};
use bench::progress::Progress;
use bench::refring::Mode;
use bench::results::{ResultsDir, Table};

use super::Given;
use crate::{print_json, Common};

/// Which interfaces to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Which {
    Enso,
    Packetized,
    Both,
}

impl Which {
    pub(crate) fn interfaces(self) -> Vec<Interface> {
        match self {
            Which::Enso => vec![Interface::Enso],
            Which::Packetized => vec![Interface::Packetized],
            Which::Both => Interface::BOTH.to_vec(),
        }
    }
}

/// What `--json` prints.
const JSON_HELP: &str = "Print the results as JSON on stdout: one object for one interface \
    at one size, else one array of an object per interface and size (each with `speedup` \
    when both interfaces run), and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct EchoArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Interface(s) to measure (interleaved with the reference ring).
    #[arg(long, value_enum, default_value_t = Which::Enso)]
    pub(crate) interface: Which,
    /// echo: the application sends every frame back to the generator; rx:
    /// it receives, touches and frees every frame.
    // The values' own descriptions are the reference ring's (producer and
    // consumer cores, two rings), not this experiment's: the text above
    // says what each does here.
    #[arg(long, value_enum, default_value_t = Mode::Echo, hide_possible_values = true)]
    pub(crate) mode: Mode,
    /// Packet size on the wire with FCS (64..1518); frames in memory are
    /// 4 bytes shorter.
    #[arg(long, default_value_t = 64, conflicts_with = "sizes")]
    pub(crate) size: usize,
    /// Sweep these sizes instead (e.g. 64,128,256,512,1024,1518): writes a
    /// CSV and a rate-vs-size plot.
    #[arg(long, value_name = "A,B,...")]
    pub(crate) sizes: Option<String>,
    /// Interleaved run length per size (a warm-up round included): at
    /// least two rounds of one --trial-ms trial per variant.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub(crate) duration_ms: u64,
    /// Length of one trial.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) trial_ms: u64,
    /// Pipes (Ensō) or RSS queues (packetized) the application uses.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) pipes: u32,
    /// UDP flows the generator cycles through.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub(crate) flows: u32,
    /// Echo: most frames in flight (sent, not back). The default is at most
    /// what one pipe or RX ring holds, so nothing is dropped whatever the
    /// flow hash; a larger window can overflow one, and what that drops is
    /// counted (`drops`).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) window: u64,
    /// Generator frames per engine step.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) burst: u64,
    /// Frames per batch of the reference ring (the generator's burst and
    /// the packetized driver's rx_burst are 32).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(crate) ref_batch: u64,
    /// Leave the reference ring out.
    #[arg(long)]
    pub(crate) no_reference: bool,
    /// Write a results directory under results/.
    #[arg(long)]
    pub(crate) save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// How the emulated NIC uses its CPU core (the same flags as `nic-emu
    /// run`'s host tuning).
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) tuning: nic_emu::args::HostTuningArgs,
}

/// One CSV row per variant and size.
#[derive(Serialize)]
struct Row<'a> {
    pkt_size: usize,
    interface: &'a str,
    mode: Mode,
    mpps: f64,
    mpps_min: f64,
    mpps_max: f64,
    gbps: f64,
    goodput_gbps: f64,
    nic_ns_per_pkt: f64,
    app_ns_per_pkt: f64,
    nic_busy: f64,
    app_busy: f64,
    nic_capacity_mpps: f64,
    app_capacity_mpps: f64,
    bottleneck: &'a str,
    notifications_per_pkt: Option<f64>,
    pcie_up_per_pkt: Option<f64>,
    pcie_down_per_pkt: Option<f64>,
    pcie_metadata_fraction: Option<f64>,
    drops: u64,
    reference_mpps: Option<f64>,
    ratio_to_reference: Option<f64>,
    speedup: Option<f64>,
    app_capacity_speedup: Option<f64>,
    probe_rtt_ns: Option<f64>,
    contended_trials: usize,
    trials: usize,
}

impl<'a> From<&'a EchoSummary> for Row<'a> {
    fn from(s: &'a EchoSummary) -> Self {
        Row {
            pkt_size: s.pkt_size,
            interface: &s.interface,
            mode: s.mode,
            mpps: s.mpps,
            mpps_min: s.mpps_range[0],
            mpps_max: s.mpps_range[1],
            gbps: s.gbps,
            goodput_gbps: s.goodput_gbps,
            nic_ns_per_pkt: s.nic_ns_per_pkt,
            app_ns_per_pkt: s.app_ns_per_pkt,
            nic_busy: s.nic_busy,
            app_busy: s.app_busy,
            nic_capacity_mpps: s.nic_capacity_mpps,
            app_capacity_mpps: s.app_capacity_mpps,
            bottleneck: &s.bottleneck,
            notifications_per_pkt: s.notifications_per_pkt,
            pcie_up_per_pkt: s.pcie_up_per_pkt,
            pcie_down_per_pkt: s.pcie_down_per_pkt,
            pcie_metadata_fraction: s.pcie_metadata_fraction,
            drops: s.drops.values().sum(),
            reference_mpps: s.reference_mpps,
            ratio_to_reference: s.ratio_to_reference,
            speedup: s.speedup,
            app_capacity_speedup: s.app_capacity_speedup,
            probe_rtt_ns: s.probe_rtt_ns,
            contended_trials: s.contended_trials,
            trials: s.trials,
        }
    }
}

/// How the threads were placed, in words.
pub(crate) fn placement_line(p: &Placement, reference: bool) -> String {
    let c = |s: Side| p.core(s).map_or_else(|| "-".to_string(), |c| c.to_string());
    let mut s = format!(
        "threads: NIC engine and its built-in traffic generator on core {}, application on core {}",
        c(Side::A),
        c(Side::B)
    );
    if reference {
        s.push_str(&format!(
            "; reference ring: producer on core {}, consumer on core {}",
            c(Side::A),
            c(Side::B)
        ));
    }
    s
}

/// What a run measured.
pub(crate) struct Outcome {
    pub(crate) placement: Placement,
    pub(crate) runs: Vec<EchoRun>,
    pub(crate) sizes: Vec<usize>,
}

impl Outcome {
    fn all(&self) -> Vec<&EchoSummary> {
        self.runs.iter().flat_map(|r| r.summaries.iter()).collect()
    }

    /// The interfaces' summaries (the reference is in their fields).
    fn measured(&self) -> Vec<&EchoSummary> {
        self.all()
            .into_iter()
            .filter(|s| s.interface != REFERENCE)
            .collect()
    }

    /// Prints the interfaces' summaries: one object for one interface at
    /// one size, else an array (fields in declaration order).
    pub(crate) fn print_json(&self) -> Result<(), String> {
        match self.measured().as_slice() {
            [one] => print_json(one),
            many => print_json(&many),
        }
    }

    /// The same as a JSON value (for `bench all`).
    pub(crate) fn json(&self) -> serde_json::Value {
        match self.measured().as_slice() {
            [one] => serde_json::to_value(one),
            many => serde_json::to_value(many),
        }
        .unwrap_or_default()
    }

    /// Cores and the probes of every size's rounds, for figure titles.
    pub(crate) fn placement_short(&self) -> String {
        let medians: Vec<f64> = self
            .runs
            .iter()
            .filter_map(|r| r.report.probe_median_ns)
            .collect();
        let lo = self
            .runs
            .iter()
            .filter_map(|r| r.report.probe_range_ns.map(|x| x.0))
            .reduce(f64::min);
        let hi = self
            .runs
            .iter()
            .filter_map(|r| r.report.probe_range_ns.map(|x| x.1))
            .reduce(f64::max);
        super::placement_short(&self.placement, bench::stats::median(&medians), lo.zip(hi))
    }

    /// Trials that shared their cores, and trials in all.
    pub(crate) fn contention(&self) -> (usize, usize) {
        let all = self.all();
        (
            all.iter().map(|s| s.contended_trials).sum(),
            all.iter().map(|s| s.trials).sum(),
        )
    }
}

/// The sizes and one plan per size, every value checked.
fn plans(args: &EchoArgs) -> Result<(Vec<usize>, Vec<EchoPlan>), String> {
    let sizes = match &args.sizes {
        Some(s) => super::parse_sizes(s)?,
        None => super::parse_sizes(&args.size.to_string())?,
    };
    let interfaces = args.interface.interfaces();
    let variants = interfaces.len() as u64 + u64::from(!args.no_reference);
    super::check_trials_fit(args.trial_ms, args.duration_ms, variants)?;
    let plans: Vec<EchoPlan> = sizes
        .iter()
        .map(|&size| {
            let mut rig = RigConfig::new(Interface::Enso, args.mode, size);
            rig.pipes = args.pipes;
            rig.flows = args.flows;
            rig.window = Some(args.window);
            rig.burst = args.burst as usize;
            rig.tuning = args.tuning.tuning();
            EchoPlan {
                interfaces: interfaces.clone(),
                rig,
                reference_batch: args.ref_batch as usize,
                trial: Duration::from_millis(args.trial_ms),
                total: Duration::from_millis(args.duration_ms),
                reference: !args.no_reference,
            }
        })
        .collect();
    for p in &plans {
        p.rig.check()?;
    }
    Ok((sizes, plans))
}

/// Options of the emulated NIC's writes into RX pipes and reads from TX
/// pipes: the packetized interface has no pipes.
const PIPE_OPTIONS: [(&str, &str); 4] = [
    ("evict_ahead_lines", "--evict-ahead-lines"),
    ("evict_ahead_always", "--evict-ahead-always"),
    ("pipe_writes", "--pipe-writes"),
    ("keep_tx_lines", "--keep-tx-lines"),
];

/// Checks every value before anything runs, and refuses options given
/// (`given`) where they have no effect.
pub(crate) fn check(args: &EchoArgs, given: &Given) -> Result<(), String> {
    args.common.check()?;
    plans(args)?;
    if args.no_reference && given.has("ref_batch") {
        return Err(
            "--ref-batch sets the reference ring's batch, and --no-reference leaves the \
             reference ring out"
                .into(),
        );
    }
    if args.interface == Which::Packetized {
        if let Some((_, flag)) = PIPE_OPTIONS.iter().find(|(id, _)| given.has(id)) {
            return Err(format!(
                "{flag} applies only to the enso interface's pipes, and --interface selects \
                 packetized"
            ));
        }
    }
    if args.mode == Mode::Rx && given.has("window") {
        return Err(
            "--window applies only to --mode echo: in rx mode nothing comes back, and the \
             generator sends without a window"
                .into(),
        );
    }
    super::check_pipe_writes(
        given,
        args.tuning.evict_ahead_lines,
        args.tuning.evict_ahead_always,
        args.tuning.pipe_writes,
    )
}

pub(crate) fn measure(args: &EchoArgs) -> Result<Outcome, String> {
    let placement = args.common.placement()?;
    let (sizes, plans) = plans(args)?;
    let interfaces = args.interface.interfaces();
    let json = args.common.json;
    if !json {
        eprintln!(
            "echo: {} mode, sizes {:?} B (wire, with FCS), {} per size in {} ms trials, {} pipes, {} flows",
            args.mode, sizes, format_ms(args.duration_ms), args.trial_ms, args.pipes, args.flows
        );
        eprintln!("{}", placement_line(&placement, !args.no_reference));
    }
    let variants = interfaces.len() + usize::from(!args.no_reference);
    let per_size = Duration::from_millis(args.duration_ms);
    let expected = plans.first().map_or(1, |p| {
        bench::interleave::Interleave::new(p.trial)
            .total(per_size)
            .expected_rounds(variants)
    }) * plans.len();
    let mut progress = Progress::new("echo", expected as u64, json);
    let mut runs: Vec<EchoRun> = Vec::new();
    for plan in &plans {
        progress.note(&format!("{} B", plan.rig.wire_size));
        runs.push(echo::run(plan, &placement, &mut progress)?);
    }
    progress.finish();
    Ok(Outcome {
        placement,
        runs,
        sizes,
    })
}

pub(crate) fn print(args: &EchoArgs, o: &Outcome) {
    let owned: Vec<EchoSummary> = o.all().into_iter().cloned().collect();
    println!("{}", placement_line(&o.placement, !args.no_reference));
    for r in &o.runs {
        if let (Some(m), Some((lo, hi))) = (r.report.probe_median_ns, r.report.probe_range_ns) {
            let size = r.summaries.first().map_or(0, |s| s.pkt_size);
            println!(
                "probe at {size} B: cross-core round trip median {m:.0} ns ({lo:.0}..{hi:.0})"
            );
        }
    }
    print!("{}", text_table(&echo::table(&owned)));
    for line in echo::interpretation(&owned) {
        println!("{line}");
    }
    let (contended, trials) = o.contention();
    if contended > 0 {
        println!(
            "contended: {contended} of {trials} trials shared their cores with other work \
             (rates are low in those trials; ratios are per round)"
        );
    } else {
        println!("contended: no ({trials} trials had their cores to themselves)");
    }
}

pub(crate) fn run(args: &EchoArgs) -> Result<(), String> {
    let o = measure(args)?;
    if args.common.json {
        o.print_json()?;
    } else {
        print(args, &o);
    }
    if let Some(dir) = super::results_dir("echo", args.save, &args.out)? {
        save(&dir, args, &o).map_err(|e| e.to_string())?;
        if !args.common.json {
            eprintln!("results: {}", dir.path().display());
        }
    }
    Ok(())
}

fn format_ms(ms: u64) -> String {
    if ms >= 1000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

/// A table as aligned text.
pub(crate) fn text_table(t: &Table) -> String {
    let n = t.headers.len();
    let mut w: Vec<usize> = t.headers.iter().map(|h| h.chars().count()).collect();
    for r in &t.rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate().take(n) {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = w[i] - c.chars().count();
            if i == 0 || c.parse::<f64>().is_err() {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(&t.headers);
    for r in &t.rows {
        s.push_str(&line(r));
    }
    s
}

pub(crate) fn save(
    dir: &ResultsDir,
    args: &EchoArgs,
    o: &Outcome,
) -> Result<(), bench::results::ResultsError> {
    let (placement, runs, sizes) = (&o.placement, &o.runs, &o.sizes);
    dir.write_config(args)?;
    dir.write_json("echo.json", runs)?;
    let all: Vec<EchoSummary> = runs
        .iter()
        .flat_map(|r| r.summaries.iter().cloned())
        .collect();
    let rows: Vec<Row<'_>> = all.iter().map(Row::from).collect();
    dir.write_csv("echo.csv", &rows)?;
    // Every trial, with its size.
    let mut trials = Table::default();
    for (run, size) in runs.iter().zip(sizes) {
        let t = run.report.trial_table();
        if trials.headers.is_empty() {
            trials.headers = std::iter::once("pkt_size".to_string())
                .chain(t.headers.iter().cloned())
                .collect();
        }
        for r in t.rows {
            // Columns differ only if extras differ; align on the header.
            let mut row = vec![String::new(); trials.headers.len()];
            row[0] = size.to_string();
            for (h, c) in t.headers.iter().zip(r) {
                if let Some(i) = trials.headers.iter().position(|x| x == h) {
                    row[i] = c;
                }
            }
            trials.rows.push(row);
        }
    }
    dir.write_table("trials.csv", &trials)?;

    let mut md = format!(
        "# Echo on the emulated NIC ({} mode)\n\n{}.\nSizes are wire sizes with FCS; \
         frames in memory are 4 B shorter. Rates are medians over interleaved rounds; \
         ratios are medians of per-round ratios.\n\n",
        args.mode,
        placement_line(placement, !args.no_reference)
    );
    md.push_str(&echo::table(&all).markdown());
    md.push('\n');
    for line in echo::interpretation(&all) {
        md.push_str(&format!("- {line}\n"));
    }
    for r in runs {
        if let (Some(m), Some((lo, hi))) = (r.report.probe_median_ns, r.report.probe_range_ns) {
            let size = r.summaries.first().map_or(0, |s| s.pkt_size);
            md.push_str(&format!(
                "- Probe at {size} B: median {m:.0} ns ({lo:.0}..{hi:.0}).\n"
            ));
        }
    }
    let contended: usize = all.iter().map(|s| s.contended_trials).sum();
    let trials_n: usize = all.iter().map(|s| s.trials).sum();
    md.push_str(&format!(
        "- Contended trials (cores shared with other work): {contended} of {trials_n}.\n"
    ));
    md.push_str(
        "\nNIC ns/pkt is the engine's busy time per packet (it also runs the traffic \
         generator); app ns/pkt the application thread's. \"App capacity\" is 1e3 / app \
         ns/pkt: the rate the application could sustain if the emulated NIC kept up. When \
         the limit is `nic`, the emulated NIC, not the interface, set the rate.\n",
    );
    dir.write_summary(&md)?;

    let names: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for s in &all {
            if !v.contains(&s.interface) {
                v.push(s.interface.clone());
            }
        }
        v
    };
    let series = |f: &dyn Fn(&EchoSummary) -> f64, name: &str| -> Vec<(f64, f64)> {
        all.iter()
            .filter(|s| s.interface == name)
            .map(|s| (s.pkt_size as f64, f(s)))
            .collect()
    };
    if sizes.len() > 1 {
        let mut chart = LineChart::new(
            &format!(
                "{} on the emulated NIC: packet rate (Mpps) vs packet size (B)\n{}",
                args.mode,
                o.placement_short()
            ),
            "packet size on the wire (B), log axis",
            "Mpps (median)",
        )
        .log_x();
        for n in &names {
            chart = chart.series(n, series(&|s| s.mpps, n));
        }
        dir.line_chart("rate.svg", &chart)?;
        let mut cap = LineChart::new(
            &format!(
                "Application capacity (Mpps, 1e3 / app ns per packet) vs packet size (B)\n{}",
                o.placement_short()
            ),
            "packet size on the wire (B), log axis",
            "Mpps the application could handle",
        )
        .log_x();
        for n in names.iter().filter(|n| *n != REFERENCE) {
            cap = cap.series(n, series(&|s| s.app_capacity_mpps, n));
        }
        dir.line_chart("app_capacity.svg", &cap)?;
    } else {
        let cats = ["packet rate", "app capacity"];
        let mut chart = BarChart::new(
            &format!(
                "{} at {} B on the emulated NIC (Mpps)\n{}",
                args.mode,
                sizes[0],
                o.placement_short()
            ),
            "Mpps",
            cats,
        );
        for s in &all {
            chart = chart.series(&s.interface, vec![s.mpps, s.app_capacity_mpps]);
        }
        dir.bar_chart("rate.svg", &chart)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_words(w: &[&str]) -> Result<(), String> {
        let words: Vec<String> = w.iter().map(|s| s.to_string()).collect();
        let (a, given) = super::super::parse_words::<EchoArgs>(&words)?;
        check(&a, &given)
    }

    #[test]
    fn mode_help_describes_the_nic_and_the_application() {
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            echo: EchoArgs,
        }
        let help = Wrap::command().render_long_help().to_string();
        assert!(
            help.contains("sends every frame back to the generator"),
            "{help}"
        );
        assert!(!help.contains("Producer core"), "{help}");
        assert!(!help.contains("two rings"), "{help}");
    }

    #[test]
    fn options_with_an_effect_are_accepted() {
        for ok in [
            &[][..],
            &["--interface", "packetized", "--pipes", "4"],
            &["--interface", "both", "--evict-ahead-always"],
            &["--interface", "enso", "--pipe-writes", "non-temporal"],
            &["--evict-ahead-lines", "0"],
            &["--ref-batch", "4"],
            &["--no-reference"],
            &["--mode", "rx"],
            &["--window", "64"],
        ] {
            assert_eq!(check_words(ok), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn options_without_effect_are_refused() {
        assert_eq!(
            check_words(&[
                "--interface",
                "packetized",
                "--no-reference",
                "--evict-ahead-always"
            ]),
            Err(
                "--evict-ahead-always applies only to the enso interface's pipes, and \
                 --interface selects packetized"
                    .into()
            )
        );
        for flag in [
            &["--evict-ahead-lines", "8"][..],
            &["--pipe-writes", "plain"],
            &["--keep-tx-lines"],
        ] {
            let mut w = vec!["--interface", "packetized"];
            w.extend(flag);
            let e = check_words(&w).unwrap_err();
            assert!(e.starts_with(&format!("{} applies only", flag[0])), "{e}");
        }
        assert_eq!(
            check_words(&["--ref-batch", "4", "--no-reference"]),
            Err(
                "--ref-batch sets the reference ring's batch, and --no-reference leaves the \
                 reference ring out"
                    .into()
            )
        );
        // Given, even at its default value: it still does nothing.
        assert!(check_words(&["--ref-batch", "32", "--no-reference"]).is_err());
        assert_eq!(
            check_words(&["--mode", "rx", "--window", "64"]),
            Err(
                "--window applies only to --mode echo: in rx mode nothing comes back, and the \
                 generator sends without a window"
                    .into()
            )
        );
        assert!(check_words(&["--evict-ahead-always", "--evict-ahead-lines", "0"]).is_err());
    }

    #[test]
    fn the_host_tuning_group_reaches_every_plan() {
        let words: Vec<String> = [
            "--sizes",
            "64,128",
            "--register-poll-flits",
            "0",
            "--register-poll-ns",
            "7",
            "--keep-tx-lines",
            "--pipe-writes",
            "plain",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (a, _) = super::super::parse_words::<EchoArgs>(&words).unwrap();
        let (_, ps) = plans(&a).unwrap();
        assert_eq!(ps.len(), 2);
        for p in &ps {
            let t = p.rig.tuning;
            assert_eq!((t.register_poll_flits, t.register_poll_ns), (0, 7));
            assert!(!t.evict_tx_lines);
            assert_eq!(t.pipe_writes, Some(nic_emu::PipeWriteMode::Plain));
            // Not given: the defaults, as `nic-emu run` has them.
            assert_eq!(
                t.evict_ahead_lines,
                nic_emu::HostTuning::default().evict_ahead_lines
            );
        }
        let (a, _) = super::super::parse_words::<EchoArgs>(&[]).unwrap();
        assert_eq!(
            plans(&a).unwrap().1[0].rig.tuning,
            nic_emu::HostTuning::default()
        );
    }

    #[test]
    fn values_are_checked_before_anything_runs() {
        assert_eq!(
            check_words(&["--cores", "0,0"]),
            Err("--cores 0,0: both sides on core 0: give two distinct cores".into())
        );
        assert!(check_words(&["--sizes", "64,60"]).is_err());
        assert!(check_words(&["--trial-ms", "5000"])
            .unwrap_err()
            .starts_with("--trial-ms 5000 does not fit"));
    }
}
