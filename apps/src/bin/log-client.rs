//! `log-client`: sends a log as consecutive UDP payloads through an Ensō TX
//! pipe out of `--port` of a running `nic-emu` device (cable it to the
//! port `logmon` serves). The log is a file, or a seeded synthetic one;
//! lines are cut wherever a payload ends. A sink sends nothing back, so
//! the rate is set with the NIC's rate limiter (`--gbps`); without it the
//! client sends as fast as its TX pipe drains and the monitor's pipe or
//! ring may overflow (the NIC counts those drops).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use enso::DeviceOptions;
use enso_apps::cli::{self, CliResult, ConnectArgs};
use enso_apps::load::{LogSource, PipeClient};
use enso_apps::logmon::generate_log;

#[derive(Parser)]
#[command(
    name = "log-client",
    about = "Sends a log over UDP through an Ensō TX pipe"
)]
struct Args {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Log file to send (default: a synthetic log).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Bytes of synthetic log.
    #[arg(long, default_value_t = 16 << 20)]
    bytes: usize,
    /// Seed of the synthetic log.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// UDP payload bytes per packet.
    #[arg(long, default_value_t = 1024)]
    payload: usize,
    /// Send the log this many times (0: until stopped).
    #[arg(long, default_value_t = 1)]
    passes: u64,
    /// Rate limit on the port, Gb/s of frames (the NIC's limiter).
    #[arg(long)]
    gbps: Option<f64>,
}

fn main() -> std::process::ExitCode {
    cli::main_with("log-client", || run(Args::parse()))
}

fn run(a: Args) -> CliResult<()> {
    a.connect.check()?;
    if a.payload == 0 {
        return Err("--payload must be at least 1".into());
    }
    let text = match &a.file {
        Some(p) => std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?,
        None => generate_log(a.seed, a.bytes.max(1)),
    };
    if text.is_empty() {
        return Err("the log is empty".into());
    }
    a.connect.pin("log-client");
    let mut dev = a.connect.open(DeviceOptions {
        pipes: 0,
        tx_pipes: 1,
        ..Default::default()
    })?;
    let port = a.connect.port;
    if let Some(g) = a.gbps {
        if !(g.is_finite() && g > 0.0 && g <= 400.0) {
            return Err(format!("--gbps must be in (0, 400], not {g}").into());
        }
        // Bursts of `num` flits every `den` cycles of 200 MHz: 64 B x 8 x
        // 200e6 x num / den = 102.4 Gb/s x num / den.
        let den = 10_000u32;
        let num = ((g / 102.4) * f64::from(den)).round().max(1.0) as u32;
        dev.set_rate_limit(port, Some((num, den)))?;
    }
    let mut c = PipeClient::new(dev, port, false)?;
    let len = text.len() as u64;
    let mut src = LogSource::new(text, a.payload, a.passes != 1);
    let stop = a.connect.duration_s.map(Duration::from_secs_f64);
    let every = (a.connect.progress_s > 0.0).then(|| Duration::from_secs_f64(a.connect.progress_s));
    let start = Instant::now();
    let (mut last, mut last_bytes) = (Instant::now(), 0u64);
    loop {
        if a.passes > 1 && src.passes >= a.passes {
            break;
        }
        let sent = c.send_with(64, |b| src.next_frame(b))?;
        if sent == 0 && src.finished() && c.dev.tx_in_flight() == 0 {
            break;
        }
        let now = Instant::now();
        if stop.is_some_and(|s| now - start >= s) {
            break;
        }
        if every.is_some_and(|e| now - last >= e) {
            eprintln!(
                "log-client: {:.3} Gb/s of log, {} packets, {} passes",
                (src.bytes - last_bytes) as f64 * 8.0 / (now - last).as_secs_f64() / 1e9,
                c.sent_frames,
                src.passes
            );
            (last, last_bytes) = (now, src.bytes);
        }
    }
    // Let the last sends complete before detaching.
    let t = Instant::now();
    while c.dev.tx_in_flight() > 0 && t.elapsed() < Duration::from_secs(2) {
        c.dev.reap_completions()?;
    }
    let secs = start.elapsed().as_secs_f64();
    if a.connect.json {
        let out = serde_json::json!({
            "app": "log-client",
            "seconds": secs,
            "packets": c.sent_frames,
            "log_bytes": src.bytes,
            "passes": src.passes,
            "log_gbps": src.bytes as f64 * 8.0 / secs / 1e9,
        });
        println!("{out}");
    } else {
        println!(
            "log-client: {} packets, {} bytes of log ({} passes of {len} B) in {:.2} s, {:.3} Gb/s",
            c.sent_frames,
            src.bytes,
            src.passes,
            secs,
            src.bytes as f64 * 8.0 / secs / 1e9
        );
    }
    Ok(())
}
