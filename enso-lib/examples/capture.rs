//! Packet capture, as Ensō's `capture` example: frames received on a
//! fallback RX pipe are written to a pcap file, then freed.
//!
//! ```sh
//! cargo run --release -p enso --example capture -- --in-process --out /tmp/rx.pcap
//! # or: a device in another process
//! nic-emu run --name dev0 --port generator:pps=100000 &
//! cargo run --release -p enso --example capture -- --device dev0 --out /tmp/rx.pcap
//! ```

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;
use enso::{Device, DeviceOptions};
use nic_emu::{DeviceConfig, GeneratorConfig, Nic, RunOptions, SizeSpec, WireConfig};
use pcap_file::pcap::{PcapPacket, PcapWriter};

/// Captures received frames into a pcap file.
#[derive(Parser, Debug)]
#[command(name = "capture")]
pub struct Args {
    /// Device to attach to (one started with `nic-emu run --name NAME`).
    #[arg(
        long,
        required_unless_present = "in_process",
        conflicts_with = "in_process"
    )]
    pub device: Option<String>,
    /// Start an emulated NIC in this process, its port 0 a traffic generator.
    #[arg(long)]
    pub in_process: bool,
    /// The pcap file to write (replaced if it exists).
    #[arg(long)]
    pub out: PathBuf,
    /// Stop after capturing this many frames.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
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
    /// Frames written to the file, and their bytes (without padding).
    pub frames: u64,
    pub bytes: u64,
    /// Frames the pipe held that were not frames (bad headers): not written.
    pub malformed_batches: u64,
    pub out: PathBuf,
}

/// Attaches, captures until `--frames` or `--duration-s`, and sums up.
pub fn run(args: &Args) -> Result<Summary, Box<dyn std::error::Error>> {
    // In process: a NIC whose port 0 is a generator, paused until the pipes exist.
    let generator = GeneratorConfig {
        count: Some(args.frames),
        sizes: SizeSpec::Range(64, 1514),
        rate_pps: Some(1e6), // nothing comes back to pace it
        paused: true,
        ..Default::default()
    };
    let name = format!("example-capture-{}", std::process::id());
    let cfg = DeviceConfig::new(name, WireConfig::Generator(generator));
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
    let pipe = dev.alloc_rx_pipe(true)?;
    if let Some(nic) = &nic {
        nic.with_engine(|e| e.set_generators_paused(false));
    }
    let mut pcap = PcapWriter::new(BufWriter::new(File::create(&args.out)?))?;
    let deadline = Instant::now() + Duration::from_secs(args.duration_s);
    let mut s = Summary {
        out: args.out.clone(),
        ..Default::default()
    };
    while s.frames < args.frames && Instant::now() < deadline {
        let batch = dev.recv(pipe)?;
        if batch.is_empty() {
            drop(batch);
            dev.check_alive()?;
            continue;
        }
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?;
        let mut frames = batch.packets();
        for frame in frames.by_ref() {
            pcap.write_packet(&PcapPacket::new(now, frame.len() as u32, frame))?;
            s.frames += 1;
            s.bytes += frame.len() as u64;
        }
        s.malformed_batches += frames.error().is_some() as u64;
        drop(batch);
        // Hands the batch's bytes back to the NIC (one head write).
        dev.free_all(pipe)?;
    }
    pcap.into_writer()
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    drop(dev);
    if let Some(nic) = nic {
        nic.stop();
    }
    Ok(s)
}

#[allow(dead_code)] // the tests include this file and call `run`
fn main() {
    let args: Args = nic_emu::args::parse_or_exit("capture");
    match run(&args) {
        Ok(s) if args.json => println!("{}", serde_json::to_string(&s).expect("summary")),
        Ok(s) => println!("capture: {s:?}"),
        Err(e) => {
            eprintln!("capture: {e}");
            std::process::exit(1);
        }
    }
}
