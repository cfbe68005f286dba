//! Echo by copy, as Ensō's `echo_copy` example: frames received on RX
//! pipes are copied, one by one while the batch is walked, into a TX pipe
//! and sent; the RX bytes are then freed. As there, every RX pipe has a
//! TX pipe of its own: the handle reserves one at attach and allocates
//! the others as they are asked for. [`Device::recv_and_tx`] lends
//! the batch and the TX pipe's sending side together, so the loop reads
//! as Ensō's does (`RecvPkts`, then `AllocateBuf`/`memcpy`/`SendAndFree`
//! per packet, then `Clear`).
//!
//! ```sh
//! cargo run --release -p enso --example echo_copy -- --in-process
//! # or: against a running device
//! nic-emu run --name dev0 --port generator:echo=0 &
//! cargo run --release -p enso --example echo_copy -- --device dev0
//! ```

use std::time::{Duration, Instant};

use clap::Parser;
use enso::{Device, DeviceOptions};
use nic_emu::{DeviceConfig, GeneratorConfig, Nic, RunOptions, WireConfig};

/// Copies every received frame into a TX pipe and sends it back.
#[derive(Parser, Debug)]
#[command(name = "echo_copy")]
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
    /// RX pipes, all fallback pipes: the NIC spreads flows over them. Each
    /// has its own TX pipe.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub pipes: u32,
    /// Stop after echoing this many frames.
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
    /// RX pipes, and TX pipes (one each).
    pub pipes: u32,
    pub tx_pipes: u32,
    /// Frames copied and sent, and the RX bytes they took.
    pub frames: u64,
    pub rx_bytes: u64,
    /// Batches received (one `recv_and_tx` and one `free` each).
    pub batches: u64,
    /// In process: frames the generator sent, got back intact, and got back
    /// altered.
    pub sent: Option<u64>,
    pub returned: Option<u64>,
    pub corrupt: Option<u64>,
}

/// Attaches, echoes until `--frames` or `--duration-s`, and sums up.
pub fn run(args: &Args) -> Result<Summary, Box<dyn std::error::Error>> {
    // One TX pipe sized for at attach; the others come on demand.
    let opts = DeviceOptions {
        pipes: args.pipes,
        tx_pipes: 1,
        ..Default::default()
    };
    // In process: a NIC whose port 0 is a generator, paused until the pipes exist.
    let generator = GeneratorConfig {
        count: Some(args.frames),
        max_in_flight: Some(256),
        flows: 16,
        echo_increment: 0, // it expects its frames back unchanged
        paused: true,
        ..Default::default()
    };
    // A name of its own for each run (tests run several in one process).
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("example-echo-copy-{}-{run}", std::process::id());
    let cfg = DeviceConfig::new(name, WireConfig::Generator(generator));
    let nic = args
        .in_process
        .then(|| Nic::start(cfg, RunOptions::default()))
        .transpose()?;
    let mut dev = match (&nic, &args.device) {
        (Some(nic), _) => Device::attach_nic(nic, opts)?,
        (None, Some(name)) => Device::open(name, opts)?,
        (None, None) => return Err("give --device NAME or --in-process".into()),
    };
    // Each RX pipe with its TX pipe, as Ensō's echo_copy allocates them.
    let mut pairs = Vec::new();
    for _ in 0..args.pipes {
        pairs.push((dev.alloc_rx_pipe(true)?, dev.alloc_tx_pipe()?));
    }
    if let Some(nic) = &nic {
        nic.with_engine(|e| e.set_generators_paused(false));
    }
    let deadline = Instant::now() + Duration::from_secs(args.duration_s);
    let mut s = Summary {
        pipes: args.pipes,
        tx_pipes: pairs.len() as u32,
        ..Default::default()
    };
    while s.frames < args.frames && Instant::now() < deadline {
        let Some(pipe) = dev.next_pipe_with_data()? else {
            dev.check_alive()?; // a device that is gone sends nothing more
            continue;
        };
        let tx = pairs
            .iter()
            .find(|(rx, _)| *rx == pipe)
            .map(|&(_, tx)| tx)
            .ok_or("a pipe this program did not allocate")?;
        let (frames, bytes) = {
            let (batch, mut out) = dev.recv_and_tx(pipe, tx)?;
            let mut frames = 0u64;
            for frame in batch.packets() {
                out.send_copy(frame, 0)?;
                frames += 1;
            }
            (frames, batch.len())
        };
        // The copies are in the TX pipe: the RX bytes go back to the NIC.
        dev.free(pipe, bytes)?;
        s.frames += frames;
        s.rx_bytes += bytes as u64;
        s.batches += 1;
    }
    // Let the NIC finish sending what was echoed.
    while dev.tx_in_flight() > 0 && Instant::now() < deadline {
        dev.reap_completions()?;
    }
    drop(dev);
    if let Some(g) = nic
        .map(|nic| nic.stop())
        .and_then(|st| st.generator(0).cloned())
    {
        (s.sent, s.returned, s.corrupt) = (Some(g.sent), Some(g.returned), Some(g.corrupt));
    }
    Ok(s)
}

#[allow(dead_code)] // the tests include this file and call `run`
fn main() {
    let args: Args = nic_emu::args::parse_or_exit("echo_copy");
    match run(&args) {
        Ok(s) if args.json => println!("{}", serde_json::to_string(&s).expect("summary")),
        Ok(s) => println!("echo_copy: {s:?}"),
        Err(e) => {
            eprintln!("echo_copy: {e}");
            std::process::exit(1);
        }
    }
}
