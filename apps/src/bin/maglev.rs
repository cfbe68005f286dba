//! `maglev`: the Maglev load balancer, attached to a running `nic-emu`
//! device. Every TCP/UDP IPv4 frame received on `--port` is rewritten toward
//! its backend (destination MAC and address) and sent back out of the port;
//! the same logic runs on Ensō pipes or on descriptor queues. With `--ip`
//! (the virtual address) it answers ARP, neighbour solicitations and pings
//! for it and drops frames for other hosts.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use enso_apps::cli::{self, CliResult, EnsoPipes, HostArgs, ServeArgs};
use enso_apps::maglev::{self, Backend, BackendPool, Maglev, MaglevStats};
use enso_apps::net::host::HostStats;
use enso_apps::nic::{Hosted, Interface};

#[derive(Parser)]
#[command(name = "maglev", about = "Maglev load balancer on the emulated NIC")]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// The virtual address(es) the balancer serves (see the flag's help).
    #[command(flatten)]
    vip: HostArgs,
    /// Backend list: one `name ipv4 [mac]` per line.
    #[arg(long)]
    backends: Option<PathBuf>,
    /// Without --backends: this many backends, 192.168.0.1 and up.
    #[arg(long, default_value_t = 1000, conflicts_with = "backends")]
    backend_count: usize,
    /// Lookup table size (a prime, at least the number of backends;
    /// Maglev spreads flows evenly when it is much larger).
    #[arg(long, default_value_t = maglev::DEFAULT_TABLE_SIZE)]
    table_size: usize,
    /// Connection-table entries.
    #[arg(long, default_value_t = maglev::DEFAULT_CONNECTION_CAPACITY)]
    connections: usize,
}

fn main() -> std::process::ExitCode {
    cli::main_with("maglev", || run(cli::parse_or_exit("maglev")))
}

impl Args {
    /// Checks the values clap cannot, before the backends are read and the
    /// (possibly large) tables built.
    fn check(&self) -> CliResult<()> {
        self.serve.check()?;
        if self.connections == 0 || self.connections > maglev::MAX_CONNECTION_CAPACITY {
            return Err(format!(
                "--connections must be in 1..={} (1.25 GiB), not {}",
                maglev::MAX_CONNECTION_CAPACITY,
                self.connections
            )
            .into());
        }
        if self.backends.is_none() && !(1..=1 << 24).contains(&self.backend_count) {
            return Err("--backend-count must be in 1..=16777216".into());
        }
        Ok(())
    }
}

/// Checks that a table of `table_size` slots can give every one of
/// `backends` backends a slot: with fewer slots than backends some would
/// never be chosen.
fn check_table_size(table_size: usize, backends: usize) -> CliResult<()> {
    if table_size < backends {
        return Err(format!(
            "--table-size {table_size} is below the {backends} backends: every backend needs \
             at least one slot (Maglev wants a prime much larger than the backend count)"
        )
        .into());
    }
    Ok(())
}

fn run(a: Args) -> CliResult<()> {
    a.check()?;
    let list = match &a.backends {
        Some(p) => {
            let list = maglev::load_backends(p).map_err(|e| format!("{}: {e}", p.display()))?;
            // Said here, with the file's name: the table would only say
            // that it has no backends.
            if list.is_empty() {
                return Err(format!(
                    "{}: no backends (one `name ipv4 [mac]` per line; blank lines and # comments are skipped)",
                    p.display()
                )
                .into());
            }
            list
        }
        None => (0..a.backend_count)
            .map(|i| {
                Backend::new(
                    format!("backend-{i}"),
                    std::net::Ipv4Addr::from(0xC0A8_0000 + i as u32 + 1),
                )
            })
            .collect(),
    };
    let n = list.len();
    check_table_size(a.table_size, n)?;
    let pool =
        Arc::new(BackendPool::new(list, a.table_size).map_err(|e| format!("--table-size: {e}"))?);
    let lb = Maglev::with_pool(pool, a.connections)?;
    let s = &a.serve;
    s.connect.pin("maglev");
    let dev = s.connect.open(s.device_options(0))?;
    let mut lb = Hosted::new(a.vip.host(&dev, s.connect.port), lb);
    let extra = |lb: &Hosted<Maglev>| {
        let st = lb.app.stats();
        format!(
            ", {} connection hits, {} misses",
            st.connection_hits, st.connection_misses
        )
    };
    let (served, driver, lib) =
        cli::serve_packets("maglev", s, dev, EnsoPipes::RxTx, &mut lb, extra, |_| {})?;
    let (st, host) = (lb.app.stats(), lb.host.stats());
    if s.connect.json {
        let out = serde_json::json!({
            "app": "maglev",
            "interface": s.interface,
            "backends": n,
            "served": served,
            "maglev": st,
            "mac": lb.host.mac().to_string(),
            "host": host,
            "driver": driver,
            "library": lib,
        });
        println!("{out}");
    } else {
        println!("{}", summary(s.interface, n, &served, st, host, &driver));
    }
    Ok(())
}

/// The final line. Forwarded and dropped are the driver's: Maglev's own
/// counts miss the frames the packetized driver drops when its TX ring is
/// full (those Maglev rewrote, and counted as forwarded).
fn summary(
    interface: Interface,
    backends: usize,
    served: &cli::Served,
    st: &MaglevStats,
    host: &HostStats,
    driver: &enso::app::DriverStats,
) -> String {
    let own = st.dropped + host.dropped();
    format!(
        "maglev ({interface}, {backends} backends): {} frames in {:.1} s ({:.3} Mpps, {}), {} forwarded, {} dropped ({} not IPv4 TCP/UDP, {} not for the balancer, {} TX ring full), {} connection hits, {} misses, {} evictions{}",
        served.frames,
        served.seconds,
        served.mpps,
        served.busy_text(),
        driver.forwarded,
        driver.dropped,
        st.dropped,
        host.dropped(),
        driver.dropped.saturating_sub(own),
        st.connection_hits,
        st.connection_misses,
        st.connection_evictions,
        cli::host_text(host)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        let a = Args::try_parse_from(std::iter::once("maglev").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())
    }

    #[test]
    fn connections_and_backend_count_are_checked() {
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(check(&["--connections", "1"]), Ok(()));
        for c in ["0", "67108865", "18446744073709551615"] {
            assert_eq!(
                check(&["--connections", c]),
                Err(format!(
                    "--connections must be in 1..=67108864 (1.25 GiB), not {c}"
                ))
            );
        }
        assert_eq!(
            check(&["--backend-count", "0"]),
            Err("--backend-count must be in 1..=16777216".into())
        );
        // A list, or a count: not both.
        let e = check(&["--backends", "b.txt", "--backend-count", "5"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
        assert_eq!(check(&["--backends", "b.txt"]), Ok(()));
    }

    #[test]
    fn the_summary_counts_frames_the_tx_ring_refused() {
        let st = MaglevStats {
            forwarded: 100,
            dropped: 2,
            ..Default::default()
        };
        let driver = enso::app::DriverStats {
            frames: 102,
            forwarded: 90,
            dropped: 12,
            ..Default::default()
        };
        let line = summary(
            Interface::Packetized,
            4,
            &Default::default(),
            &st,
            &Default::default(),
            &driver,
        );
        assert!(
            line.contains(
                "90 forwarded, 12 dropped (2 not IPv4 TCP/UDP, 0 not for the balancer, 10 TX ring full)"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_table_has_a_slot_for_every_backend() {
        assert!(check_table_size(65_537, 1000).is_ok());
        assert!(check_table_size(13, 13).is_ok());
        let e = check_table_size(2, 1000).unwrap_err().to_string();
        assert!(
            e.starts_with("--table-size 2 is below the 1000 backends"),
            "{e}"
        );
    }
}
