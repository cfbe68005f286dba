//! Flow steering, as Ensō's flow-binding examples: one UDP flow (by its
//! destination address and port, as the NIC matches UDP) is bound to one
//! pipe, and a fallback pipe receives everything else. The summary says,
//! per pipe, how many frames belonged to the flow and how many did not.
//!
//! ```sh
//! cargo run --release -p enso --example flow_and_fallback -- --in-process
//! # or: a device in another process (its generator's flow 0 is the default rule)
//! nic-emu run --name dev0 --port generator:flows=4,pps=100000 &
//! cargo run --release -p enso --example flow_and_fallback -- --device dev0
//! ```

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use clap::Parser;
use enso::{Device, DeviceOptions, FlowRule};
use nic_emu::testframe::TestFrames;
use nic_emu::{DeviceConfig, GeneratorConfig, Nic, RunOptions, WireConfig};

/// Binds one flow to a pipe and catches the rest on a fallback pipe.
#[derive(Parser, Debug)]
#[command(name = "flow_and_fallback")]
pub struct Args {
    /// Device to attach to (one started with `nic-emu run --name NAME`).
    #[arg(
        long,
        required_unless_present = "in_process",
        conflicts_with = "in_process"
    )]
    pub device: Option<String>,
    /// Start an emulated NIC in this process, its port 0 a generator of 4 flows.
    #[arg(long)]
    pub in_process: bool,
    /// Destination IPv4 address of the bound flow (default: the test frames' flow 0).
    #[arg(long, default_value_t = Ipv4Addr::from(TestFrames::flow_tuple(0).dst_ip))]
    pub dst_ip: Ipv4Addr,
    /// Destination UDP port of the bound flow (default: the test frames' flow 0).
    #[arg(long, default_value_t = TestFrames::flow_tuple(0).dst_port)]
    pub dst_port: u16,
    /// Stop after receiving this many frames on both pipes together.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub frames: u64,
    /// Stop after this many seconds at most.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub duration_s: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Frames one pipe received: of the bound flow, and others.
#[derive(Debug, Default, serde::Serialize)]
pub struct PipeCount {
    pub flow: u64,
    pub other: u64,
}

/// What the run did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Summary {
    pub bound: PipeCount,
    pub fallback: PipeCount,
}

/// Destination address and port of an IPv4/UDP frame.
pub fn udp_destination(f: &[u8]) -> Option<(Ipv4Addr, u16)> {
    let ihl = (*f.get(14)? & 0x0f) as usize * 4;
    let ip = <[u8; 4]>::try_from(f.get(30..34)?).ok()?;
    let port = f.get(14 + ihl + 2..14 + ihl + 4)?;
    (f[12..14] == [0x08, 0x00] && f[23] == 17)
        .then(|| (ip.into(), u16::from_be_bytes([port[0], port[1]])))
}

/// Attaches, binds, receives until `--frames` or `--duration-s`, and sums up.
pub fn run(args: &Args) -> Result<Summary, Box<dyn std::error::Error>> {
    // In process: a NIC whose port 0 is a generator, paused until the pipes exist.
    let generator = GeneratorConfig {
        count: Some(args.frames),
        flows: 4,            // one frame of each flow in turn
        rate_pps: Some(1e6), // nothing comes back to pace it
        paused: true,
        ..Default::default()
    };
    let name = format!("example-flow-{}", std::process::id());
    let cfg = DeviceConfig::new(name, WireConfig::Generator(generator));
    let nic = args
        .in_process
        .then(|| Nic::start(cfg, RunOptions::default()))
        .transpose()?;
    let opts = DeviceOptions {
        pipes: 2,
        ..Default::default()
    };
    let mut dev = match (&nic, &args.device) {
        (Some(nic), _) => Device::attach_nic(nic, opts)?,
        (None, Some(name)) => Device::open(name, opts)?,
        (None, None) => return Err("give --device NAME or --in-process".into()),
    };
    let bound = dev.alloc_rx_pipe(false)?;
    let rule = FlowRule {
        dst_ip: args.dst_ip.into(),
        dst_port: args.dst_port,
        protocol: 17, // UDP: the NIC matches destination address and port
        ..Default::default()
    };
    dev.bind(bound, rule)?;
    let _fallback = dev.alloc_rx_pipe(true)?;
    if let Some(nic) = &nic {
        nic.with_engine(|e| e.set_generators_paused(false));
    }
    let want = (args.dst_ip, args.dst_port);
    let deadline = Instant::now() + Duration::from_secs(args.duration_s);
    let mut s = Summary::default();
    while s.bound.flow + s.bound.other + s.fallback.flow + s.fallback.other < args.frames
        && Instant::now() < deadline
    {
        // The pipes with data, in the order the NIC said so.
        let Some(pipe) = dev.next_pipe_with_data()? else {
            dev.check_alive()?;
            continue;
        };
        let count = if pipe == bound {
            &mut s.bound
        } else {
            &mut s.fallback
        };
        for frame in dev.recv(pipe)?.packets() {
            match udp_destination(frame) == Some(want) {
                true => count.flow += 1,
                false => count.other += 1,
            }
        }
        dev.free_all(pipe)?;
    }
    drop(dev);
    if let Some(nic) = nic {
        nic.stop();
    }
    Ok(s)
}

#[allow(dead_code)] // the tests include this file and call `run`
fn main() {
    let args: Args = nic_emu::args::parse_or_exit("flow_and_fallback");
    match run(&args) {
        Ok(s) if args.json => println!("{}", serde_json::to_string(&s).expect("summary")),
        Ok(s) => println!("flow_and_fallback: {s:?}"),
        Err(e) => {
            eprintln!("flow_and_fallback: {e}");
            std::process::exit(1);
        }
    }
}
