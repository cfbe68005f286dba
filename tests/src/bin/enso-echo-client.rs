//! An echo application in its own process, for the multi-process test:
//! attaches to a standalone device through its control socket and echoes
//! frames until it has echoed `--frames` of them (or times out).

use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut dir, mut name, mut frames, mut pipes) =
        (PathBuf::from("/dev/shm"), String::from("enso0"), 0u64, 1u32);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_default();
        match a.as_str() {
            "--dir" => dir = v.into(),
            "--name" => name = v,
            "--frames" => frames = v.parse().expect("--frames N"),
            "--pipes" => pipes = v.parse().expect("--pipes N"),
            o => {
                eprintln!("enso-echo-client: unknown argument {o}");
                std::process::exit(2);
            }
        }
    }
    let mut dev = match enso::Device::open_in(&dir, &name, enso_tests::opts(pipes)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("enso-echo-client: {e}");
            std::process::exit(1);
        }
    };
    for _ in 0..pipes {
        dev.alloc_rxtx_pipe(true).expect("pipe");
    }
    let start = Instant::now();
    let mut done = 0u64;
    while done < frames {
        done += enso_tests::echo_ready(&mut dev) as u64;
        if start.elapsed() > Duration::from_secs(60) {
            eprintln!("enso-echo-client: timed out after {done} frames");
            std::process::exit(1);
        }
    }
    // Wait for the last sends to complete before detaching.
    while dev.tx_in_flight() > 0 && start.elapsed() < Duration::from_secs(60) {
        dev.reap_completions().expect("reap");
    }
    println!("{done}");
}
