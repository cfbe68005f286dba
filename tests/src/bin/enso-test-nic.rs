//! A standalone device for the multi-process crash and churn tests: the
//! device `nic-emu run` runs (the same `Nic`, listening on its control
//! socket), in a process of its own that a test can kill, stop and
//! measure, driven by one-word commands on standard input:
//!
//! - `stats`: one line of JSON on stdout, the counters the engine thread
//!   snapshots at that moment (not the `stats.json` written every 200 ms);
//! - `go` / `pause`: release or hold the generators (they start held);
//!   answered `ok`;
//! - `quit`, or the end of standard input: stop the device (its directory
//!   removed) and exit 0.
//!
//! `ready` on stdout says that the device is listening. Any error is one
//! `enso-test-nic: ...` line on stderr and exit status 1.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

#[derive(Parser)]
#[command(
    name = "enso-test-nic",
    about = "A standalone device driven by commands on stdin"
)]
struct Args {
    /// Existing directory in which the device directory is made.
    #[arg(long)]
    dir: PathBuf,
    /// Device name.
    #[arg(long)]
    name: String,
    /// Port wiring, one per port (`nic-emu run --port` syntax).
    #[arg(long = "port", required = true)]
    ports: Vec<String>,
    /// Bytes per pipe (power of two).
    #[arg(long, default_value_t = 256 << 10)]
    pipe_size: usize,
    /// Entries per notification ring (power of two).
    #[arg(long, default_value_t = 4096)]
    notif_entries: u32,
}

fn main() -> ExitCode {
    match run(&nic_emu::args::parse_or_exit("enso-test-nic")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("enso-test-nic: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: &Args) -> Result<(), String> {
    let mut wires = Vec::new();
    for p in &a.ports {
        let mut w = nic_emu::spec::parse_wire(p)?;
        // Traffic starts on `go`, once the applications are in place.
        if let WireConfig::Generator(g) = &mut w {
            g.paused = true;
        }
        wires.push(w);
    }
    let mut cfg = DeviceConfig::new(a.name.clone(), wires[0].clone());
    cfg.ports = wires;
    cfg.dir = a.dir.clone();
    cfg.pipe_size = a.pipe_size;
    cfg.notif_ring_entries = a.notif_entries;
    let nic = Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )?;
    let mut out = std::io::stdout().lock();
    let mut say = |line: &str| -> Result<(), String> {
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("stdout: {e}"))
    };
    say("ready")?;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| format!("stdin: {e}"))?;
        match line.trim() {
            "stats" => {
                let s = serde_json::to_string(&nic.try_stats()?).map_err(|e| e.to_string())?;
                say(&s)?;
            }
            "go" | "pause" => {
                let paused = line.trim() == "pause";
                nic.try_with_engine(move |e| e.set_generators_paused(paused))?;
                say("ok")?;
            }
            "quit" => break,
            other => return Err(format!("unknown command '{other}'")),
        }
    }
    nic.try_stop().map(drop).map_err(|e| e.to_string())
}
