//! `telemetry`: NitroSketch telemetry, attached to a running `nic-emu`
//! device. Every frame received on `--port` is accounted in the sketch and
//! consumed; heavy hitters are reported periodically and at the end. The
//! same logic runs on Ensō pipes or on descriptor queues.

use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use enso_apps::cli::{self, CliResult, EnsoPipes, ServeArgs};
use enso_apps::telemetry::{NitroConfig, Report, Telemetry};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Sketch {
    CountMin,
    CountSketch,
}

#[derive(Parser)]
#[command(
    name = "telemetry",
    about = "NitroSketch telemetry on the emulated NIC"
)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// Sketch kind.
    #[arg(long, value_enum, default_value = "count-min")]
    sketch: Sketch,
    /// Counters per row (default: the paper's, 102400 or 204800).
    #[arg(long)]
    width: Option<usize>,
    /// Rows.
    #[arg(long, default_value_t = 5)]
    depth: usize,
    /// Probability that a (packet, row) slot is updated.
    // Negative values reach the sketch's check, which says what is wrong.
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true)]
    probability: f64,
    /// Heavy-hitter table size.
    #[arg(long, default_value_t = 100)]
    top_k: usize,
    /// Heavy-hitter threshold, as a share of all packets.
    #[arg(long, default_value_t = 0.0005, allow_negative_numbers = true)]
    threshold: f64,
    /// Seconds between heavy-hitter reports on stderr (0: only at the end).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    report_s: f64,
    /// Seed of the row hashes and the sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> std::process::ExitCode {
    cli::main_with("telemetry", || run(cli::parse_or_exit("telemetry")))
}

fn report_json(r: &Report) -> serde_json::Value {
    serde_json::json!({
        "packets": r.packets,
        "threshold_packets": r.threshold_packets,
        "heavy_hitters": r.heavy_hitters.iter().map(|h| serde_json::json!({
            "src": h.flow.src.to_string(),
            "dst": h.flow.dst.to_string(),
            "estimate": h.estimate,
        })).collect::<Vec<_>>(),
    })
}

fn run(a: Args) -> CliResult<()> {
    a.serve.check()?;
    cli::seconds("--report-s", a.report_s, true)?;
    let base = match a.sketch {
        Sketch::CountMin => NitroConfig::count_min(),
        Sketch::CountSketch => NitroConfig::count_sketch(),
    };
    let cfg = NitroConfig {
        width: a.width.unwrap_or(base.width),
        depth: a.depth,
        probability: a.probability,
        top_k: a.top_k,
        threshold: a.threshold,
        seed: a.seed,
        ..base
    };
    let interval = Duration::from_secs_f64(if a.report_s > 0.0 { a.report_s } else { 1e9 });
    let mut t = Telemetry::new(&cfg, interval)?;
    let s = &a.serve;
    s.connect.pin("telemetry");
    let dev = s.connect.open(s.device_options(0))?;
    let extra = |t: &Telemetry| format!(", {} sampled slots", t.sketch().samples());
    let tick = |t: &mut Telemetry| {
        if let Some(r) = t.poll_report(Instant::now()) {
            eprint!("telemetry: {r}");
        }
    };
    let (served, driver, _) =
        cli::serve_packets("telemetry", s, dev, EnsoPipes::Rx, &mut t, extra, tick)?;
    let sk = t.sketch();
    let report = sk.report();
    if s.connect.json {
        let out = serde_json::json!({
            "app": "telemetry",
            "interface": s.interface,
            "served": served,
            "packets": sk.packets(),
            "samples": sk.samples(),
            "unkeyed": sk.unkeyed(),
            "report": report_json(&report),
            "driver": driver,
        });
        println!("{out}");
    } else {
        println!(
            "telemetry ({}): {} frames in {:.1} s ({:.3} Mpps, {}), {} sampled slots, {} without a flow key",
            s.interface,
            served.frames,
            served.seconds,
            served.mpps,
            served.busy_text(),
            sk.samples(),
            sk.unkeyed()
        );
        print!("{report}");
    }
    Ok(())
}
