//! A single-threaded stepped run (engine step, then application poll) for
//! instruction and cache analysis under valgrind:
//!
//! `valgrind --tool=callgrind target/release/examples/stepped rx 64 200000`

use enso::{Device, DeviceOptions};
use nic_emu::{DeviceConfig, Engine, GeneratorConfig, SizeSpec, VerifyLevel, WireConfig};

fn main() {
    const USAGE: &str =
        "usage: stepped [rx|echo] [SIZE 60..=1536] [COUNT >= 1] (default: rx 64 200000)";
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return;
    }
    let bad = |what: &str| -> ! {
        eprintln!("stepped: {what}; {USAGE}");
        std::process::exit(2)
    };
    if args.len() > 3 {
        bad("too many arguments");
    }
    let mode = args.first().cloned().unwrap_or_else(|| "rx".into());
    if mode != "rx" && mode != "echo" {
        bad(&format!("unknown mode '{mode}'"));
    }
    let size: usize = match args.get(1).map(|s| s.parse()) {
        None => 64,
        Some(Ok(n)) if (60..=nic_emu::wire::MAX_FRAME).contains(&n) => n,
        Some(_) => bad(&format!("bad size '{}'", args[1])),
    };
    let count: u64 = match args.get(2).map(|s| s.parse()) {
        None => 200_000,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => bad(&format!("bad count '{}'", args[2])),
    };
    let g = GeneratorConfig {
        sizes: SizeSpec::Fixed(size),
        verify: VerifyLevel::Sequence,
        count: Some(count),
        // In rx mode nothing comes back, so no in-flight window.
        max_in_flight: None,
        ..Default::default()
    };
    let dir = std::env::temp_dir();
    let mut cfg = DeviceConfig::new(
        format!("stepped-{}", std::process::id()),
        WireConfig::Generator(g),
    );
    cfg.dir = dir;
    cfg.notif_ring_entries = 4096;
    cfg.pipe_size = 256 << 10;
    let mut e = Engine::new(cfg).expect("engine");
    let mut dev = Device::attach_engine(
        &mut e,
        DeviceOptions {
            pipes: 1,
            ..Default::default()
        },
    )
    .expect("attach");
    let p = dev.alloc_rxtx_pipe(true).expect("pipe");
    let mut pkts = 0u64;
    while pkts < count {
        e.step();
        let n = {
            let mut b = dev.recv(p).expect("recv");
            for pkt in b.packets_mut() {
                pkt[58] = pkt[58].wrapping_add(1);
                pkts += 1;
            }
            b.len()
        };
        if n > 0 {
            if mode == "echo" {
                dev.send_and_free(p, n).expect("send");
            } else {
                dev.free(p, n).expect("free");
            }
        }
    }
    e.run_until_idle(100);
    let s = e.stats();
    println!(
        "{mode}: {pkts} packets, {} drops, {} notifications",
        s.total_drops(),
        s.pipe_sum(|c| c.notifications)
    );
}
