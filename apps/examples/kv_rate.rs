//! The key-value server's request handling alone, without a NIC: the
//! workload's request frames (as the NIC's generator would replay them) are
//! handled over and over, a burst at a time with the burst's buckets
//! prefetched first, as the drivers do. The rate shows what the store and
//! the wire format cost per request, the part both interfaces share.
//!
//! `cargo run --release -p enso-apps --example kv_rate -- --batch 4`
//! (`--json` for one JSON object). Under valgrind,
//! `--toggle-collect='*KvServer::handle*'` counts the handling only.

use std::time::Instant;

use clap::Parser;
use enso_apps::kv::{KvClient, KvServer, ServerConfig, WorkloadConfig};

#[derive(Parser)]
struct Args {
    /// Distinct keys (all stored before the measurement).
    #[arg(long, default_value_t = 1 << 16)]
    keys: u64,
    /// Requests per frame.
    #[arg(long, default_value_t = 4)]
    batch: usize,
    /// Share of GETs (0..=1).
    #[arg(long, default_value_t = 0.95)]
    get_ratio: f64,
    /// Distinct request frames, replayed in order.
    #[arg(long, default_value_t = 8192)]
    frames: usize,
    /// Frames handled per burst (prefetched together).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=4096))]
    burst: u16,
    /// Skip the second prefetch pass (the log items), to compare.
    #[arg(long)]
    no_item_prefetch: bool,
    /// Measured seconds.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2);
}

fn main() {
    let a: Args = nic_emu::args::parse_or_exit("kv_rate");
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        fail("--seconds must be within (0, 3600]");
    }
    if a.frames == 0 || a.frames > 1 << 20 {
        fail("--frames must be within 1..=1048576");
    }
    let workload = WorkloadConfig {
        keys: a.keys,
        get_ratio: a.get_ratio,
        batch: a.batch,
        ..Default::default()
    };
    let mut client = KvClient::new(workload).unwrap_or_else(|e| fail(e));
    let mut server = KvServer::new(&ServerConfig::default()).unwrap_or_else(|e| fail(e));
    let mut buf = vec![0u8; enso_apps::packet::MAX_FRAME_LEN];
    let mut resp = vec![0u8; enso_apps::packet::MAX_FRAME_LEN];
    while let Some(n) = client
        .next_preload_frame(&mut buf)
        .unwrap_or_else(|e| fail(e))
    {
        if let Err(e) = server.handle(&buf[..n], &mut resp) {
            fail(format!("preload refused: {e:?}"));
        }
    }
    let mut frames: Vec<Vec<u8>> = Vec::with_capacity(a.frames);
    for _ in 0..a.frames {
        let n = client.next_frame(&mut buf).unwrap_or_else(|e| fail(e));
        frames.push(buf[..n].to_vec());
    }
    let burst = usize::from(a.burst);
    let mut out = vec![vec![0u8; enso_apps::packet::MAX_FRAME_LEN]; burst];
    let mut run = |server: &mut KvServer, rounds: usize| {
        for _ in 0..rounds {
            for chunk in frames.chunks(burst) {
                for f in chunk {
                    server.prefetch(f);
                }
                if !a.no_item_prefetch {
                    for f in chunk {
                        server.prefetch_items(f);
                    }
                }
                for (f, o) in chunk.iter().zip(out.iter_mut()) {
                    // Drops are counted in the server's statistics.
                    let _ = server.handle(f, o);
                }
            }
        }
    };
    // Warm up (the store's caches, the branch predictors), then run whole
    // rounds of the frames until --seconds have passed. (Sizing the run
    // from the warm-up's rate ended it well short of --seconds.)
    run(&mut server, 1);
    let before = *server.stats();
    let t = Instant::now();
    while t.elapsed().as_secs_f64() < a.seconds {
        run(&mut server, 1);
    }
    let secs = t.elapsed().as_secs_f64();
    let after = server.stats();
    let requests = after.requests - before.requests;
    let drops = after.drops() - before.drops();
    let ns = secs * 1e9 / requests.max(1) as f64;
    if a.json {
        let o = serde_json::json!({
            "requests": requests, "seconds": secs, "ns_per_request": ns,
            "mops": requests as f64 / secs / 1e6, "batch": a.batch,
            "get_hits": after.get_hits - before.get_hits, "drops": drops,
        });
        println!("{o}");
    } else {
        println!(
            "{requests} requests in {secs:.2} s: {ns:.1} ns/request, {:.2} Mops ({} per frame, {drops} dropped frames)",
            requests as f64 / secs / 1e6,
            a.batch
        );
    }
    if drops > 0 {
        eprintln!("error: {drops} frames were dropped");
        std::process::exit(1);
    }
}
