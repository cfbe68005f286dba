//! An echo application in its own process, for the multi-process test:
//! attaches to a standalone device through its control socket and echoes
//! frames until it has echoed `--frames` of them (or times out). Prints the
//! frames echoed (or, with `--json`, the whole result) on stdout; a
//! progress line on stderr every `--progress-s` seconds; any error as one
//! `enso-echo-client: ...` line on stderr with exit status 1.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "enso-echo-client",
    about = "Echo application in its own process, attached to a standalone device"
)]
struct Args {
    /// Directory holding the device directory.
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Device to attach to (`nic-emu run --name NAME`).
    #[arg(long, default_value = "enso0")]
    name: String,
    /// Frames to echo before exiting (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    frames: u64,
    /// Fallback RX/TX pipes to serve.
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(nic_emu::layout::MAX_PIPES)))]
    pipes: u32,
    /// Seconds to wait for all the frames before giving up.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    timeout_s: u64,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=3600))]
    progress_s: u64,
    /// Print the result as JSON on stdout (instead of the frame count).
    #[arg(long)]
    json: bool,
}

/// What a run did.
#[derive(serde::Serialize)]
struct Outcome {
    /// Frames echoed.
    frames: u64,
    /// Seconds from the pipes being set up to the last frame echoed.
    seconds: f64,
    /// Echoed frames per second, in millions.
    mpps: f64,
    /// Sends still in flight when the client detached (0 unless they did
    /// not complete within the timeout).
    tx_in_flight: u32,
}

fn main() -> ExitCode {
    match run(&nic_emu::args::parse_or_exit("enso-echo-client")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("enso-echo-client: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: &Args) -> Result<(), String> {
    let timeout = Duration::from_secs(a.timeout_s);
    let every = Duration::from_secs(a.progress_s);
    let mut dev = enso::Device::open_in(&a.dir, &a.name, enso_tests::opts(a.pipes))
        .map_err(|e| e.to_string())?;
    for i in 0..a.pipes {
        dev.alloc_rxtx_pipe(true)
            .map_err(|e| format!("cannot allocate pipe {} of {}: {e}", i + 1, a.pipes))?;
    }
    let start = Instant::now();
    let (mut last, mut last_done) = (start, 0u64);
    let mut done = 0u64;
    while done < a.frames {
        done += enso_tests::try_echo_ready(&mut dev)? as u64;
        let now = Instant::now();
        if now - start > timeout {
            return Err(format!(
                "timed out after {} s with {done} of {} frames echoed",
                a.timeout_s, a.frames
            ));
        }
        if !every.is_zero() && now - last >= every {
            let dt = (now - last).as_secs_f64();
            eprintln!(
                "enso-echo-client: {done} of {} frames echoed, {:.3} Mpps, {:.0} s",
                a.frames,
                (done - last_done) as f64 / dt / 1e6,
                (now - start).as_secs_f64()
            );
            (last, last_done) = (now, done);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // Wait (within the timeout) for the last sends to complete before
    // detaching.
    while dev.tx_in_flight() > 0 && start.elapsed() < timeout {
        dev.reap_completions()
            .map_err(|e| format!("reaping send completions: {e}"))?;
    }
    let outcome = Outcome {
        frames: done,
        seconds,
        mpps: if seconds > 0.0 {
            done as f64 / seconds / 1e6
        } else {
            0.0
        },
        tx_in_flight: dev.tx_in_flight(),
    };
    if a.json {
        let s = serde_json::to_string(&outcome).map_err(|e| e.to_string())?;
        println!("{s}");
    } else {
        println!("{done}");
    }
    Ok(())
}
