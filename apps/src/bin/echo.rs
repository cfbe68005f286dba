//! `echo`: the echo server, attached to a running `nic-emu` device.
//!
//! Allocates RX/TX pipes that receive fallback traffic, increments the echo
//! byte of every frame and sends it back in place.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use enso::{Device, DeviceOptions, EnsoDriver};
use enso_apps::echo::Echo;

#[derive(Parser)]
#[command(name = "echo", about = "Echo server over Ensō pipes")]
struct Args {
    /// Device to attach to.
    #[arg(long, default_value = "enso0")]
    device: String,
    /// Directory holding the device directory.
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// RX/TX pipes to serve.
    #[arg(long, default_value_t = 1)]
    pipes: u32,
    /// Port to receive from and send on.
    #[arg(long, default_value_t = 0)]
    port: u32,
    /// Core to pin the server to.
    #[arg(long)]
    core: Option<usize>,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    duration_s: Option<f64>,
    /// Prefetch notifications (on/off; default: the device's mode).
    #[arg(long)]
    prefetch: Option<bool>,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 1.0)]
    progress_s: f64,
    /// Print the final counters as JSON.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let a = Args::parse();
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if a.pipes == 0 {
        return Err("--pipes must be at least 1".into());
    }
    if let Some(c) = a.core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
            eprintln!("echo: could not pin to core {c}; running unpinned");
        }
    }
    let opts = DeviceOptions {
        pipes: a.pipes,
        prefetch: a.prefetch,
        ..Default::default()
    };
    let dev = Device::open_in(&a.dir, &a.device, opts)?;
    let mut d = EnsoDriver::new(dev);
    d.add_fallback_pipes_on(a.port, a.pipes)?;
    let mut echo = Echo::new();
    let start = Instant::now();
    let mut last = Instant::now();
    let mut last_frames = 0;
    loop {
        for _ in 0..256 {
            d.poll(&mut echo)?;
        }
        if a.duration_s
            .is_some_and(|s| start.elapsed() >= Duration::from_secs_f64(s))
        {
            break;
        }
        if a.progress_s > 0.0 && last.elapsed().as_secs_f64() >= a.progress_s {
            let dt = last.elapsed().as_secs_f64();
            eprintln!(
                "echo: {:.2} Mpps, {} frames",
                (d.stats.frames - last_frames) as f64 / dt / 1e6,
                d.stats.frames
            );
            last_frames = d.stats.frames;
            last = Instant::now();
        }
    }
    let el = start.elapsed().as_secs_f64();
    if a.json {
        let out = serde_json::json!({
            "frames": d.stats.frames,
            "mpps": d.stats.frames as f64 / el / 1e6,
            "driver": d.stats,
            "library": d.dev.stats(),
        });
        println!("{out}");
    } else {
        println!(
            "echo: {} frames in {:.1} s ({:.2} Mpps), {} notifications, {} TX notifications",
            d.stats.frames,
            el,
            d.stats.frames as f64 / el / 1e6,
            d.dev.stats().notifications,
            d.dev.stats().tx_notifications
        );
    }
    Ok(())
}
