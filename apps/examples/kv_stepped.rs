//! A single-threaded stepped KV run (engine step, client poll, server poll)
//! for instruction counts under valgrind:
//!
//! `valgrind --tool=callgrind target/release/examples/kv_stepped enso 1 20000`
//! (interface, requests per frame, request frames, keys). Request frames
//! include the preload (one SET of every key); to count the steady state,
//! take the difference of two runs that differ only in frames.

use enso::{Device, DeviceOptions};
use enso_apps::kv::{KvServer, ServerConfig, WorkloadConfig};
use enso_apps::load::{KvLoadClient, KvLoadConfig};
use enso_apps::nic::{AppDriver, EnsoReplyDriver, PacketizedReplyDriver};
use nic_emu::{DeviceConfig, Engine, WireConfig};

fn main() {
    const USAGE: &str = "usage: kv_stepped [enso|packetized] [REQUESTS_PER_FRAME 1..=32] [FRAMES >= 1] [KEYS >= 1] (default: enso 1 20000 65536)";
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return;
    }
    let bad = |what: &str| -> ! {
        eprintln!("kv_stepped: {what}; {USAGE}");
        std::process::exit(2)
    };
    if args.len() > 4 {
        bad("too many arguments");
    }
    let iface = args.first().cloned().unwrap_or_else(|| "enso".into());
    if iface != "enso" && iface != "packetized" {
        bad(&format!("unknown interface '{iface}'"));
    }
    let batch: usize = match args.get(1).map(|s| s.parse()) {
        None => 1,
        Some(Ok(n)) if (1..=enso_apps::kv::wire::MAX_BATCH).contains(&n) => n,
        Some(_) => bad(&format!("bad requests per frame '{}'", args[1])),
    };
    let frames: u64 = match args.get(2).map(|s| s.parse()) {
        None => 20_000,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => bad(&format!("bad frame count '{}'", args[2])),
    };
    let keys: u64 = match args.get(3).map(|s| s.parse()) {
        None => 1 << 16,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => bad(&format!("bad key count '{}'", args[3])),
    };
    let mut cfg = DeviceConfig::new(
        format!("kv-stepped-{}", std::process::id()),
        WireConfig::Cable {
            peer: 1,
            delay_ns: 0,
        },
    );
    cfg.ports.push(WireConfig::Cable {
        peer: 0,
        delay_ns: 0,
    });
    cfg.dir = std::env::temp_dir();
    let mut e = Engine::new(cfg).expect("engine");
    let client_opts = DeviceOptions {
        pipes: 1,
        tx_pipes: 1,
        ..Default::default()
    };
    let mut c = KvLoadClient::new(
        Device::attach_engine(&mut e, client_opts.clone()).expect("attach"),
        1,
        KvLoadConfig {
            workload: WorkloadConfig {
                keys,
                batch,
                ..Default::default()
            },
            window_frames: 512,
            loss_timeout: None,
            frames: Some(frames),
            ..Default::default()
        },
    )
    .expect("client");
    let mut server = KvServer::new(&ServerConfig::default()).expect("server");
    let mut d: Box<dyn AppDriver<KvServer>> = if iface == "enso" {
        let mut d =
            EnsoReplyDriver::new(Device::attach_engine(&mut e, client_opts).expect("attach"))
                .expect("driver");
        d.add_fallback_pipes_on(0, 1).expect("pipes");
        Box::new(d)
    } else {
        let mut d = PacketizedReplyDriver::new(
            Device::attach_engine(
                &mut e,
                DeviceOptions {
                    pipes: 0,
                    tx_pipes: 0,
                    queues: 1,
                    rx_ring: 4096,
                    tx_ring: 1024,
                    pool_buffers: 6144,
                    ..Default::default()
                },
            )
            .expect("attach"),
            32,
        );
        d.add_rss_queues_on(0, 1).expect("queues");
        Box::new(d)
    };
    while !c.finished() {
        e.step();
        c.poll().expect("client");
        d.poll(&mut server).expect("server");
    }
    let r = c.report();
    println!(
        "{iface}: {} frames, {} requests, {} responses, {} problems",
        r.frames_received, r.requests, r.responses, r.problems
    );
}
