//! `bench`: the experiments. Each subcommand prints its result (as JSON
//! with `--json`: one object or array, as its `--json` help says) and can
//! write a results directory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use bench::frames;
use bench::placement::Placement;
use bench::probe::{self, Probe};
use bench::progress::Progress;
use bench::refring::{self, Mode, RefConfig, RefRun};
use bench::results::ResultsDir;

mod cli;

#[derive(Parser, Debug)]
#[command(
    name = "bench",
    version,
    about = "Experiments on the emulated Ensō NIC"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure the cross-core cache-line round trip (which placement the
    /// host gave the two cores right now).
    Probe(ProbeArgs),
    /// Run the reference datapath: an SPSC byte ring between the two cores,
    /// frames back to back on 64 B boundaries, the machine's limit.
    Reference(ReferenceArgs),
    /// Echo server (or rx loop) on the emulated NIC: Ensō vs packetized vs
    /// the reference ring, interleaved; packet rate and cost per packet.
    Echo(cli::echo::EchoArgs),
    /// PCIe bytes per packet (data vs metadata) per interface and size,
    /// measured on a deterministic stepped run and predicted by the model.
    Pcie(cli::pcie::PcieArgs),
    /// Application-side cache behaviour per interface: hardware counters
    /// where the machine has them, cachegrind on a stepped run otherwise.
    Cache(cli::cache::CacheArgs),
    /// Echo RTT (p50, p99) against offered load for per-packet, reactive and
    /// prefetching notifications and the packetized interface, with an
    /// emulated interconnect latency; zero-loss maximum of each.
    Latency(cli::latency::LatencyArgs),
    /// The applications (Maglev, telemetry, KV, log monitor) on both
    /// interfaces, alternating: throughput, app cost per unit, speedup.
    Apps(cli::apps::AppsArgs),
    /// The performance model's predictions for the paper's hardware (PCIe
    /// Gen3 x16, 100 GbE, one 3.1 GHz core) from counts measured here,
    /// against the paper's numbers.
    Predict(cli::predict::PredictArgs),
    /// Mpps through the NIC's real-wire backends (memif, afpacket) beside
    /// DPDK's own drivers on the same wire (testpmd), interleaved.
    Wire(cli::wire::WireArgs),
    /// Echo throughput with 1, 2, 32, 1024 pipes (Ensō) and RSS queues
    /// (packetized) for one application core, interleaved.
    Scaling(cli::scaling::ScalingArgs),
    /// Whether one application's flow rules slow another's lookups: A
    /// binds far past its quota (every refusal counted), then B's echo
    /// rate with A detached and with A holding its full quota, interleaved.
    Isolation(cli::isolation::IsolationArgs),
    /// Run the experiments behind each of the paper's claims and write one
    /// Markdown report (report.md) with figures as SVG and PNG: measured
    /// here, predicted for the paper's hardware, and the paper's number.
    Report(cli::report::ReportArgs),
    /// Every experiment, with quick settings (or --full), into one results
    /// directory: echo (sizes sweep), echo rx, pcie, cache, latency.
    All(cli::all::AllArgs),
    /// The NIC at saturation for a long run: mixed frames, applications on
    /// both interfaces and ports, attach/detach churn, and every frame
    /// verified back or counted under a drop cause.
    Soak(cli::soak::SoakArgs),
    /// The engine's instructions per echoed packet (cachegrind) against
    /// the baseline in the repository; fails when one grew by more than the
    /// tolerance (CI runs it).
    CostCheck(cli::costcheck::CostCheckArgs),
    /// The stepped echo run `bench cache` profiles under cachegrind.
    #[command(hide = true)]
    CacheWorker(cli::cache::WorkerArgs),
    /// Each application's instructions per request on each interface,
    /// split into receive, application, response and send (cachegrind on
    /// a stepped run), with the engine's and other code's apart.
    Breakdown(cli::breakdown::BreakdownArgs),
    /// The stepped application run `bench breakdown` profiles.
    #[command(hide = true)]
    BreakdownWorker(cli::breakdown::WorkerArgs),
}

/// Options every experiment shares.
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct Common {
    /// Two distinct cores for the two sides, e.g. `0,1` (default: the first
    /// two this process may use).
    #[arg(long, value_name = "A,B")]
    cores: Option<String>,
    /// Print the results as JSON on stdout and nothing on stderr but
    /// errors (each experiment says what it prints).
    #[arg(long)]
    json: bool,
}

impl Common {
    /// Checks `--cores` before anything runs.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.parsed().map(|_| ())
    }

    fn parsed(&self) -> Result<Placement, String> {
        match &self.cores {
            Some(c) => Placement::parse(c).map_err(|e| format!("--cores {c}: {e}")),
            None => Ok(Placement::pick()),
        }
    }

    pub(crate) fn placement(&self) -> Result<Placement, String> {
        let p = self.parsed()?;
        if !self.json {
            for note in &p.notes {
                eprintln!("note: {note}");
            }
        }
        Ok(p)
    }
}

/// What `--json` prints.
const PROBE_JSON_HELP: &str = "Print the probe as one JSON object on stdout, and nothing on \
    stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(PROBE_JSON_HELP)))]
struct ProbeArgs {
    #[command(flatten)]
    common: Common,
    /// How long to probe.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    duration_ms: u64,
}

/// What `--json` prints.
const REFERENCE_JSON_HELP: &str = "Print the run's summary as one JSON object on stdout, and \
    nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(REFERENCE_JSON_HELP)))]
struct ReferenceArgs {
    #[command(flatten)]
    common: Common,
    /// rx: producer core to consumer core; echo: and back, over a second ring.
    #[arg(long, value_enum, default_value_t = Mode::Rx)]
    mode: Mode,
    /// Packet size on the wire, with FCS (the ring holds size - 4 bytes).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(frames::MIN_WIRE_SIZE as u64..=frames::MAX_WIRE_SIZE as u64))]
    size: u64,
    /// Length of the measured run.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    duration_ms: u64,
    /// Unmeasured run first, to settle caches and clocks.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    warmup_ms: u64,
    /// Ring size in KiB (a power of two, at most 262144 = 256 MiB; 2048 is
    /// an Ensō pipe).
    #[arg(long, default_value_t = 2048, value_parser = ring_kib)]
    ring_kib: usize,
    /// Frames per commit and per release.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    batch: u64,
    /// Distinct UDP flows among the template frames (cycled in order).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    flows: u32,
    /// Write a results directory under results/.
    #[arg(long)]
    save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Largest `reference --ring-kib`: 256 MiB, far beyond any cache (an Ensō
/// pipe is 2 MiB); echo mode allocates (and touches) two rings.
const MAX_RING_KIB: usize = 256 << 10;

/// Parses `--ring-kib`: a power of two up to [`MAX_RING_KIB`].
fn ring_kib(s: &str) -> Result<usize, String> {
    let range = format!("a power of two in 1..={MAX_RING_KIB} (256 MiB)");
    match s.parse::<usize>() {
        Ok(n) if n.is_power_of_two() && n <= MAX_RING_KIB => Ok(n),
        _ => Err(format!("must be {range}")),
    }
}

impl Command {
    /// Checks the arguments before anything runs (`given`: the options
    /// given on the command line): every value the run would check, and
    /// options given where they have no effect.
    fn check(&self, given: &cli::Given) -> Result<(), String> {
        match self {
            Command::Probe(a) => a.common.check(),
            Command::Reference(a) => {
                a.common.check()?;
                reference_config(a)?;
                cli::check_out(&a.out)
            }
            Command::Echo(a) => {
                cli::echo::check(a, given)?;
                cli::check_out(&a.out)
            }
            Command::Pcie(a) => {
                cli::pcie::check(a)?;
                cli::check_out(&a.out)
            }
            Command::Cache(a) => {
                cli::cache::check(a, given)?;
                cli::check_out(&a.out)
            }
            Command::Latency(a) => {
                cli::latency::check(a)?;
                cli::check_out(&a.out)
            }
            Command::Apps(a) => {
                cli::apps::check(a, given)?;
                cli::check_out(&a.out)
            }
            Command::Predict(a) => cli::predict::check(a),
            Command::Wire(a) => cli::wire::check(a),
            Command::Scaling(a) => cli::scaling::check(a),
            Command::Isolation(a) => cli::isolation::check(a),
            Command::Report(a) => cli::report::check(a),
            Command::All(a) => cli::all::check(a),
            Command::Soak(a) => cli::soak::check(a),
            Command::CostCheck(a) => cli::costcheck::check(a),
            Command::CacheWorker(_) => Ok(()),
            Command::Breakdown(_) | Command::BreakdownWorker(_) => Ok(()),
        }
    }
}

fn main() -> ExitCode {
    let (cli, matches): (Cli, _) = nic_emu::args::parse_matches_or_exit("bench");
    let given = matches
        .subcommand()
        .map_or_else(Default::default, |(_, m)| cli::Given::of(m));
    // Wrong arguments are a usage error, as clap's own are: one line and
    // status 2, before anything runs.
    if let Err(e) = cli.command.check(&given) {
        eprintln!("bench: {e}");
        return ExitCode::from(2);
    }
    nic_emu::cleanup::remove_devices_on_signal();
    let outcome = match cli.command {
        Command::Probe(args) => cmd_probe(&args),
        Command::Reference(args) => cmd_reference(&args),
        Command::Echo(args) => cli::echo::run(&args),
        Command::Pcie(args) => cli::pcie::run(&args),
        Command::Cache(args) => cli::cache::run(&args, &given),
        Command::CacheWorker(args) => cli::cache::worker(&args),
        Command::Breakdown(args) => cli::breakdown::run(&args),
        Command::BreakdownWorker(args) => cli::breakdown::worker(&args),
        Command::Latency(args) => cli::latency::run(&args),
        Command::Apps(args) => cli::apps::run(&args),
        Command::Predict(args) => cli::predict::run(&args),
        Command::Wire(args) => cli::wire::run(&args),
        Command::Scaling(args) => cli::scaling::run(&args),
        Command::Isolation(args) => cli::isolation::run(&args),
        Command::Report(args) => cli::report::run(&args),
        Command::All(args) => cli::all::run(&args),
        Command::Soak(args) => cli::soak::run(&args),
        Command::CostCheck(args) => cli::costcheck::run(&args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn print_json<T: Serialize>(value: &T) -> Result<(), String> {
    let s = serde_json::to_string(value).map_err(|e| e.to_string())?;
    println!("{s}");
    Ok(())
}

fn cmd_probe(args: &ProbeArgs) -> Result<(), String> {
    let placement = args.common.placement()?;
    let p = probe::measure(&placement, Duration::from_millis(args.duration_ms));
    if args.common.json {
        print_json(&p)
    } else {
        println!("{p}");
        Ok(())
    }
}

/// The one-object summary `reference --json` prints.
#[derive(Serialize)]
struct ReferenceSummary {
    mode: Mode,
    /// Wire size with FCS.
    pkt_size: u64,
    mpps: f64,
    /// Ethernet line rate filled (frame + FCS + preamble + gap).
    gbps: f64,
    /// Frame bytes only.
    goodput_gbps: f64,
    probe_rtt_ns: f64,
    probe_rtt_ns_after: f64,
    cores: [Option<usize>; 2],
    two_cores: bool,
    producer_ns_per_pkt: f64,
    consumer_ns_per_pkt: f64,
    producer_busy: f64,
    consumer_busy: f64,
    packets: u64,
    elapsed_ms: f64,
    verified: bool,
    ring_bytes: usize,
    batch: usize,
    flows: u32,
    /// Preemptions of the producer and consumer threads during the run.
    preempted: [u64; 2],
    /// Time the producer and consumer threads waited for their cores, ms.
    preempted_ms: [f64; 2],
    /// Host steal time during the run, ms.
    steal_ms: f64,
    /// Whether the run shared its cores with other work (its threads lost
    /// a significant share of their time, or the host stole it).
    contended: bool,
    notes: Vec<String>,
}

/// How often `reference` reports progress while a run is under way: each
/// report wakes the controlling thread, which may briefly take a measured
/// core, so only every few seconds.
const REFERENCE_TICK: Duration = Duration::from_secs(5);

/// The reference ring's configuration and frames, checked.
fn reference_config(args: &ReferenceArgs) -> Result<(RefConfig, refring::Templates), String> {
    // At most MAX_RING_KIB (the parser's bound): no overflow.
    let ring_bytes = args.ring_kib * 1024;
    let config = RefConfig {
        mode: args.mode,
        ring_bytes,
        batch: args.batch as usize,
    };
    let templates = refring::udp_templates(args.size as usize, args.flows);
    config.check(&templates).map_err(|e| e.to_string())?;
    Ok((config, templates))
}

fn cmd_reference(args: &ReferenceArgs) -> Result<(), String> {
    let placement = args.common.placement()?;
    let (config, templates) = reference_config(args)?;

    // Progress in milliseconds of warm-up and measured run (up to 11
    // minutes), on stderr unless --json.
    let mut progress = Progress::new(
        "reference",
        args.warmup_ms + args.duration_ms,
        args.common.json,
    );
    let before = probe::measure(&placement, probe::DEFAULT_DURATION);
    let phase = |progress: &mut Progress, what: &str, base: u64, ms: u64| {
        progress.note(&format!("reference: {what}, {:.1} s", ms as f64 / 1e3));
        let run = refring::run_ticking(
            &config,
            &templates,
            &placement,
            Duration::from_millis(ms),
            REFERENCE_TICK,
            |t| {
                let at = base + (t.as_millis() as u64).min(ms);
                let message = format!("{what}, {:.0} of {:.0} s", t.as_secs_f64(), ms as f64 / 1e3);
                progress.step(at.saturating_sub(progress.done()), &message);
            },
        )
        .map_err(|e| e.to_string())?;
        let message = format!("{what} done");
        progress.step((base + ms).saturating_sub(progress.done()), &message);
        Ok::<_, String>(run)
    };
    if args.warmup_ms > 0 {
        phase(&mut progress, "warm-up", 0, args.warmup_ms)?;
    }
    let run = phase(&mut progress, "measuring", args.warmup_ms, args.duration_ms)?;
    let after = probe::measure(&placement, probe::DEFAULT_DURATION);
    progress.finish();

    let summary = summarise(args, &placement, &run, &before, &after);
    if args.common.json {
        print_json(&summary)?;
    } else {
        println!("{before}");
        println!(
            "reference {} {} B: {:.2} Mpps, {:.2} Gb/s on the wire ({:.2} Gb/s goodput); \
             producer {:.2} ns/pkt busy ({:.0}%), consumer {:.2} ns/pkt busy ({:.0}%); {}",
            summary.mode,
            summary.pkt_size,
            summary.mpps,
            summary.gbps,
            summary.goodput_gbps,
            summary.producer_ns_per_pkt,
            summary.producer_busy * 100.0,
            summary.consumer_ns_per_pkt,
            summary.consumer_busy * 100.0,
            if run.verified {
                "every frame verified"
            } else {
                "FRAMES LOST OR DUPLICATED"
            },
        );
        println!("{after} (after)");
        for note in summary.notes.iter().skip(placement.notes.len()) {
            eprintln!("note: {note}");
        }
    }
    if args.save || args.out.is_some() {
        let dir = match &args.out {
            Some(p) => ResultsDir::at("reference", p.clone()),
            None => ResultsDir::create("reference", None),
        }
        .map_err(|e| e.to_string())?;
        dir.write_config(args).map_err(|e| e.to_string())?;
        #[derive(Serialize)]
        struct Full<'a> {
            summary: &'a ReferenceSummary,
            run: &'a RefRun,
            probe_before: &'a Probe,
            probe_after: &'a Probe,
        }
        dir.write_json(
            "reference.json",
            &Full {
                summary: &summary,
                run: &run,
                probe_before: &before,
                probe_after: &after,
            },
        )
        .map_err(|e| e.to_string())?;
        dir.write_csv(
            "reference.csv",
            std::slice::from_ref(&CsvRow::from(&summary)),
        )
        .map_err(|e| e.to_string())?;
        dir.write_summary(&summary_md(&summary, &placement.label()))
            .map_err(|e| e.to_string())?;
        if !args.common.json {
            eprintln!("results: {}", dir.path().display());
        }
    }
    if run.verified {
        Ok(())
    } else {
        Err("the reference ring lost or duplicated frames".to_string())
    }
}

/// The run's summary.md: the rate, where the cores were, and whether they
/// were the run's own.
fn summary_md(s: &ReferenceSummary, cores: &str) -> String {
    let mut md = format!(
        "# Reference datapath\n\n{} mode, {} B packets, cores {cores}: **{:.2} Mpps** \
         ({:.2} Gb/s on the wire); probe round trip {:.0} ns before, {:.0} ns after.\n",
        s.mode, s.pkt_size, s.mpps, s.gbps, s.probe_rtt_ns, s.probe_rtt_ns_after
    );
    md.push_str(&if s.contended {
        format!(
            "\nContended: the cores were shared with other work (producer and consumer \
             preempted {} and {} times, {:.1} and {:.1} ms; host steal {:.0} ms): the rate is \
             below the machine's limit.\n",
            s.preempted[0], s.preempted[1], s.preempted_ms[0], s.preempted_ms[1], s.steal_ms
        )
    } else {
        "\nContended: no (the run had its cores to itself).\n".to_string()
    });
    md
}

fn summarise(
    args: &ReferenceArgs,
    placement: &Placement,
    run: &RefRun,
    before: &Probe,
    after: &Probe,
) -> ReferenceSummary {
    let trial = run.to_trial();
    let mut notes = placement.notes.clone();
    if run.contended() {
        notes.push(format!(
            "the cores were shared during the run (producer lost {:.1} ms in {} preemptions, \
             consumer {:.1} ms in {}, host steal {:.0} ms, {} threads runnable before): \
             the rate is below the machine's limit",
            run.producer.preempted.waited_ns as f64 / 1e6,
            run.producer.preempted.switches,
            run.consumer.preempted.waited_ns as f64 / 1e6,
            run.consumer.preempted.switches,
            run.steal_ms,
            run.runnable_before
                .map_or_else(|| "?".to_string(), |n| n.to_string()),
        ));
    }
    ReferenceSummary {
        mode: args.mode,
        pkt_size: args.size,
        mpps: trial.mpps(),
        gbps: trial.wire_gbps(),
        goodput_gbps: trial.goodput_gbps(),
        probe_rtt_ns: before.rtt_ns,
        probe_rtt_ns_after: after.rtt_ns,
        cores: placement.cores(),
        two_cores: before.two_cores && run.producer.pinned && run.consumer.pinned,
        producer_ns_per_pkt: trial.ns_per_packet("producer").unwrap_or(f64::NAN),
        consumer_ns_per_pkt: trial.ns_per_packet("consumer").unwrap_or(f64::NAN),
        producer_busy: trial.busy_fraction("producer").unwrap_or(f64::NAN),
        consumer_busy: trial.busy_fraction("consumer").unwrap_or(f64::NAN),
        packets: run.packets,
        elapsed_ms: run.elapsed.as_secs_f64() * 1e3,
        verified: run.verified,
        ring_bytes: run.config.ring_bytes,
        batch: run.config.batch,
        flows: args.flows,
        preempted: [
            run.producer.preempted.switches,
            run.consumer.preempted.switches,
        ],
        preempted_ms: [
            run.producer.preempted.waited_ns as f64 / 1e6,
            run.consumer.preempted.waited_ns as f64 / 1e6,
        ],
        steal_ms: run.steal_ms,
        contended: run.contended(),
        notes,
    }
}

/// The CSV form of the summary (no lists).
#[derive(Serialize)]
struct CsvRow {
    mode: Mode,
    pkt_size: u64,
    mpps: f64,
    gbps: f64,
    goodput_gbps: f64,
    probe_rtt_ns: f64,
    probe_rtt_ns_after: f64,
    producer_ns_per_pkt: f64,
    consumer_ns_per_pkt: f64,
    packets: u64,
    elapsed_ms: f64,
    verified: bool,
    contended: bool,
}

impl From<&ReferenceSummary> for CsvRow {
    fn from(s: &ReferenceSummary) -> Self {
        CsvRow {
            mode: s.mode,
            pkt_size: s.pkt_size,
            mpps: s.mpps,
            gbps: s.gbps,
            goodput_gbps: s.goodput_gbps,
            probe_rtt_ns: s.probe_rtt_ns,
            probe_rtt_ns_after: s.probe_rtt_ns_after,
            producer_ns_per_pkt: s.producer_ns_per_pkt,
            consumer_ns_per_pkt: s.consumer_ns_per_pkt,
            packets: s.packets,
            elapsed_ms: s.elapsed_ms,
            verified: s.verified,
            contended: s.contended,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_json_help_says_what_is_printed() {
        let cmd = Cli::command();
        let help = |name: &str| {
            let sub = cmd.find_subcommand(name).unwrap();
            let json = sub.get_arguments().find(|a| a.get_id() == "json");
            json.and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        for (name, says) in [
            ("probe", "one JSON object"),
            ("reference", "one JSON object"),
            (
                "echo",
                "one object for one interface at one size, else one array",
            ),
            (
                "pcie",
                "one JSON array on stdout, one object per interface and size",
            ),
            ("cache", "one JSON object"),
            (
                "latency",
                "one JSON array on stdout, one object per strategy",
            ),
            ("apps", "one JSON array on stdout, one object per row"),
            ("all", "one JSON object"),
        ] {
            let h = help(name);
            assert!(h.contains(says), "{name}: {h:?}");
            assert!(
                h.ends_with("and nothing on stderr but errors"),
                "{name}: {h:?}"
            );
        }
        // None is left with the shared text, which says neither.
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let h = help(sub.get_name());
            assert!(
                h.contains("object") || h.contains("array"),
                "{}: {h:?}",
                sub.get_name()
            );
        }
    }

    #[test]
    fn reference_results_say_whether_the_run_was_contended() {
        let args = match Cli::try_parse_from(["bench", "reference", "--ring-kib", "64"])
            .unwrap()
            .command
        {
            Command::Reference(a) => a,
            _ => panic!("not reference"),
        };
        let placement = Placement::pick();
        let (config, templates) = reference_config(&args).unwrap();
        let run = refring::run(&config, &templates, &placement, Duration::from_millis(5)).unwrap();
        let p = probe::measure(&placement, Duration::from_millis(1));
        let s = summarise(&args, &placement, &run, &p, &p);
        assert_eq!(s.contended, run.contended());
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["contended"], run.contended());
        let md = summary_md(&s, "0,1");
        assert!(md.contains("\nContended: "), "{md}");
        let mut quiet = s;
        quiet.contended = false;
        assert!(summary_md(&quiet, "0,1").contains("Contended: no"));
        quiet.contended = true;
        assert!(summary_md(&quiet, "0,1").contains("below the machine's limit"));
    }

    #[test]
    fn every_out_option_says_the_same() {
        let cmd = Cli::command();
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let Some(out) = sub.get_arguments().find(|a| a.get_id() == "out") else {
                continue;
            };
            let name = sub.get_name();
            let names: Vec<String> = out
                .get_value_names()
                .unwrap_or_default()
                .iter()
                .map(|v| v.to_string())
                .collect();
            assert_eq!(names, ["DIR"], "{name}");
            if name != "all" {
                assert_eq!(
                    out.get_help().map(|h| h.to_string()).as_deref(),
                    Some("Write the results directory here instead (implies --save)"),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn reference_rings_are_bounded_powers_of_two() {
        let parse = |kib: &str| Cli::try_parse_from(["bench", "reference", "--ring-kib", kib]);
        for ok in ["1", "2048", "262144"] {
            match parse(ok).unwrap().command {
                Command::Reference(a) => assert_eq!(a.ring_kib.to_string(), ok),
                _ => panic!("not reference"),
            }
        }
        for bad in ["0", "3", "3072", "262145", "524288", "1099511627776", "x"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(
                nic_emu::args::usage_line(&e),
                format!(
                    "invalid value '{bad}' for '--ring-kib <RING_KIB>': \
                     must be a power of two in 1..=262144 (256 MiB)"
                )
            );
        }
    }
}
