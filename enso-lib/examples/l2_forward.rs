//! Layer-2 forwarding, as Ensō's `l2_forward` examples: frames received on
//! port 0 leave on port 1 with their MAC addresses swapped, in place (zero
//! copy: the RX/TX pipe's bytes are sent where they were received).
//!
//! ```sh
//! cargo run --release -p enso --example l2_forward -- --in-process
//! # or: a device with two ports in another process
//! nic-emu run --name dev0 --port generator --port null &
//! cargo run --release -p enso --example l2_forward -- --device dev0
//! ```

use std::time::{Duration, Instant};

use clap::Parser;
use enso::{Device, DeviceOptions};
use nic_emu::{DeviceConfig, GeneratorConfig, Nic, RunOptions, WireConfig};

/// Forwards frames from port 0 to port 1, swapping MAC addresses.
#[derive(Parser, Debug)]
#[command(name = "l2_forward")]
pub struct Args {
    /// Device to attach to (with two ports, from `nic-emu run --name NAME`).
    #[arg(
        long,
        required_unless_present = "in_process",
        conflicts_with = "in_process"
    )]
    pub device: Option<String>,
    /// Start an emulated NIC in this process: port 0 a traffic generator,
    /// port 1 a sink that counts what it is sent.
    #[arg(long)]
    pub in_process: bool,
    /// Stop after forwarding this many frames.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub frames: u64,
    /// Stop after this many seconds at most.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub duration_s: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What the run did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Summary {
    /// Frames and bytes forwarded to port 1.
    pub frames: u64,
    pub bytes: u64,
    /// In process: frames the NIC sent out of port 1.
    pub port1_tx_frames: Option<u64>,
}

/// Swaps a frame's destination and source MAC addresses.
pub fn swap_macs(frame: &mut [u8]) {
    if frame.len() >= 12 {
        let (dst, src) = frame[..12].split_at_mut(6);
        dst.swap_with_slice(src);
    }
}

/// Attaches, forwards until `--frames` or `--duration-s`, and sums up.
pub fn run(args: &Args) -> Result<Summary, Box<dyn std::error::Error>> {
    // In process: a NIC whose port 0 is a generator, paused until the pipes exist.
    let generator = GeneratorConfig {
        count: Some(args.frames),
        rate_pps: Some(2e6), // nothing comes back to pace it
        paused: true,
        ..Default::default()
    };
    let name = format!("example-l2fwd-{}", std::process::id());
    let mut cfg = DeviceConfig::new(name, WireConfig::Generator(generator));
    cfg.ports.push(WireConfig::Null);
    let nic = args
        .in_process
        .then(|| Nic::start(cfg, RunOptions::default()))
        .transpose()?;
    let opts = DeviceOptions {
        pipes: 1,
        ..Default::default()
    };
    let mut dev = match (&nic, &args.device) {
        (Some(nic), _) => Device::attach_nic(nic, opts)?,
        (None, Some(name)) => Device::open(name, opts)?,
        (None, None) => return Err("give --device NAME or --in-process".into()),
    };
    if dev.info().ports < 2 {
        return Err(format!("{} has one port; forwarding needs two", dev.info().device).into());
    }
    // An RX/TX pipe receiving everything that arrives on port 0.
    let pipe = dev.alloc_rxtx_pipe_on(0, true)?;
    if let Some(nic) = &nic {
        nic.with_engine(|e| e.set_generators_paused(false));
    }
    let deadline = Instant::now() + Duration::from_secs(args.duration_s);
    let mut s = Summary::default();
    while s.frames < args.frames && Instant::now() < deadline {
        let (bytes, frames) = {
            let mut batch = dev.recv(pipe)?;
            let mut frames = 0;
            for frame in batch.packets_mut() {
                swap_macs(frame);
                frames += 1;
            }
            (batch.len(), frames)
        };
        if bytes == 0 {
            dev.check_alive()?;
            continue;
        }
        dev.send_and_free_on(pipe, bytes, 1)?;
        s.frames += frames;
        s.bytes += bytes as u64;
    }
    while dev.tx_in_flight() > 0 && Instant::now() < deadline {
        dev.reap_completions()?;
    }
    drop(dev);
    if let Some(nic) = nic {
        s.port1_tx_frames = nic.stop().ports.get(1).map(|p| p.counters.tx_frames);
    }
    Ok(s)
}

#[allow(dead_code)] // the tests include this file and call `run`
fn main() {
    let args: Args = nic_emu::args::parse_or_exit("l2_forward");
    match run(&args) {
        Ok(s) if args.json => println!("{}", serde_json::to_string(&s).expect("summary")),
        Ok(s) => println!("l2_forward: {s:?}"),
        Err(e) => {
            eprintln!("l2_forward: {e}");
            std::process::exit(1);
        }
    }
}
