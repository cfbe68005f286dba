//! `maglev`: the Maglev load balancer, attached to a running `nic-emu`
//! device. Every TCP/UDP IPv4 frame received on `--port` is rewritten toward
//! its backend (destination MAC and address) and sent back out of the port;
//! the same logic runs on Ensō pipes or on descriptor queues.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use enso::{EnsoDriver, PacketizedDriver};
use enso_apps::cli::{self, CliResult, ServeArgs};
use enso_apps::maglev::{self, Backend, BackendPool, Maglev};
use enso_apps::nic::Interface;

#[derive(Parser)]
#[command(name = "maglev", about = "Maglev load balancer on the emulated NIC")]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// Backend list: one `name ipv4 [mac]` per line.
    #[arg(long)]
    backends: Option<PathBuf>,
    /// Without --backends: this many backends, 192.168.0.1 and up.
    #[arg(long, default_value_t = 1000)]
    backend_count: usize,
    /// Lookup table size (a prime).
    #[arg(long, default_value_t = maglev::DEFAULT_TABLE_SIZE)]
    table_size: usize,
    /// Connection-table entries.
    #[arg(long, default_value_t = maglev::DEFAULT_CONNECTION_CAPACITY)]
    connections: usize,
}

fn main() -> std::process::ExitCode {
    cli::main_with("maglev", || run(Args::parse()))
}

fn run(a: Args) -> CliResult<()> {
    a.serve.check()?;
    // Before the (possibly large) lookup table is built.
    if a.connections > maglev::MAX_CONNECTION_CAPACITY {
        return Err(format!(
            "--connections must be at most {} (1.25 GiB), not {}",
            maglev::MAX_CONNECTION_CAPACITY,
            a.connections
        )
        .into());
    }
    let list = match &a.backends {
        Some(p) => maglev::load_backends(p).map_err(|e| format!("{}: {e}", p.display()))?,
        None => {
            if a.backend_count == 0 || a.backend_count > 1 << 24 {
                return Err("--backend-count must be in 1..=16777216".into());
            }
            (0..a.backend_count)
                .map(|i| {
                    Backend::new(
                        format!("backend-{i}"),
                        std::net::Ipv4Addr::from(0xC0A8_0000 + i as u32 + 1),
                    )
                })
                .collect()
        }
    };
    let n = list.len();
    let pool = Arc::new(BackendPool::new(list, a.table_size)?);
    let mut lb = Maglev::with_pool(pool, a.connections.max(1))?;
    let s = &a.serve;
    s.connect.pin("maglev");
    let dev = s.connect.open(s.device_options(0))?;
    let port = s.connect.port;
    let extra = |lb: &Maglev| {
        let st = lb.stats();
        format!(
            ", {} connection hits, {} misses",
            st.connection_hits, st.connection_misses
        )
    };
    let (served, driver, lib) = match s.interface {
        Interface::Enso => {
            let mut d = EnsoDriver::new(dev);
            d.add_fallback_pipes_on(port, s.pipes)?;
            let r = cli::serve("maglev", &s.connect, &mut d, &mut lb, extra, |_| {})?;
            (r, d.stats.clone(), d.dev.stats().clone())
        }
        Interface::Packetized => {
            let mut d = PacketizedDriver::new(dev, s.burst);
            d.add_rss_queues_on(port, s.pipes)?;
            let r = cli::serve("maglev", &s.connect, &mut d, &mut lb, extra, |_| {})?;
            (r, d.stats.clone(), d.dev.stats().clone())
        }
    };
    let st = lb.stats();
    if s.connect.json {
        let out = serde_json::json!({
            "app": "maglev",
            "interface": s.interface,
            "backends": n,
            "served": served,
            "maglev": st,
            "driver": driver,
            "library": lib,
        });
        println!("{out}");
    } else {
        println!(
            "maglev ({}, {n} backends): {} frames in {:.1} s ({:.3} Mpps, {:.1} ns/frame busy), {} forwarded, {} dropped, {} connection hits, {} misses, {} evictions",
            s.interface,
            served.frames,
            served.seconds,
            served.mpps,
            served.busy_ns_per_frame,
            st.forwarded,
            st.dropped,
            st.connection_hits,
            st.connection_misses,
            st.connection_evictions
        );
    }
    Ok(())
}
