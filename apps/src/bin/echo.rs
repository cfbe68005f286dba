//! `echo`: the echo server, attached to a running `nic-emu` device.
//!
//! Allocates RX/TX pipes that receive fallback traffic, increments the echo
//! byte of every frame and sends it back in place.

use std::time::Instant;

use clap::Parser;
use enso::{DeviceOptions, EnsoDriver};
use enso_apps::cli::{self, CliResult, ConnectArgs};
use enso_apps::echo::Echo;

#[derive(Parser)]
#[command(name = "echo", about = "Echo server over Ensō pipes")]
struct Args {
    #[command(flatten)]
    connect: ConnectArgs,
    /// RX/TX pipes to serve.
    #[arg(long, default_value_t = 1)]
    pipes: u32,
    /// Prefetch notifications (on/off; default: the device's mode).
    #[arg(long)]
    prefetch: Option<bool>,
}

fn main() -> std::process::ExitCode {
    cli::main_with("echo", || run(&nic_emu::args::parse_or_exit("echo")))
}

fn run(a: &Args) -> CliResult<()> {
    // Every value is checked before the device is attached.
    a.connect.check()?;
    cli::check_pipes(enso_apps::nic::Interface::Enso, a.pipes)?;
    let c = &a.connect;
    let stop = c
        .duration_s
        .map(|s| cli::seconds("--duration-s", s, false))
        .transpose()?;
    let every = cli::seconds("--progress-s", c.progress_s, true)?;
    c.pin("echo");
    let dev = c.open(DeviceOptions {
        pipes: a.pipes,
        prefetch: a.prefetch,
        ..Default::default()
    })?;
    let mut d = EnsoDriver::new(dev);
    d.add_fallback_pipes_on(c.port, a.pipes)?;
    let mut echo = Echo::new();
    let start = Instant::now();
    let mut last = Instant::now();
    let mut last_frames = 0;
    let mut last_check = Instant::now();
    loop {
        for _ in 0..256 {
            d.poll(&mut echo)?;
        }
        // A device that is gone delivers nothing: without this the loop
        // would wait forever, or end as if all was well.
        if last_check.elapsed() >= cli::ALIVE_CHECK {
            d.dev.check_alive()?;
            last_check = Instant::now();
        }
        if stop.is_some_and(|s| start.elapsed() >= s) {
            break;
        }
        if !every.is_zero() && last.elapsed() >= every {
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
    if c.json {
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
