//! `kv`: the MICA-like key-value server, attached to a running `nic-emu`
//! device. Request batches arrive on `--port`; responses go back out of it.
//! On Ensō, requests are read from RX pipes and responses written into a TX
//! pipe (one send per batch); on the packetized interface each response
//! replaces its request in the request's buffer. The same `KvServer` logic
//! answers on both. Drive it with `kv-client` on a port cabled to this one,
//! or, with `--ip`, from any UDP client on the port's link (the wire format
//! is in `apps/README.md`; `apps/examples/kv_client.py` is such a client):
//! the server then answers ARP, neighbour solicitations and pings for its
//! addresses and drops frames for other hosts.

use clap::Parser;
use enso_apps::cli::{self, CliResult, HostArgs, ServeArgs};
use enso_apps::kv::store::{MAX_BUCKETS, MAX_LOG_BYTES};
use enso_apps::kv::{KvServer, ServerConfig, ServerStats, StoreConfig};
use enso_apps::net::host::HostStats;
use enso_apps::nic::{EnsoReplyDriver, Hosted, Interface, PacketizedReplyDriver};

#[derive(Parser)]
#[command(name = "kv", about = "MICA-like key-value server on the emulated NIC")]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    #[command(flatten)]
    host: HostArgs,
    /// MiB of log in this partition (a power of two).
    #[arg(long, default_value_t = 64)]
    log_mb: usize,
    /// Index buckets of 15 slots (rounded up to a power of two).
    #[arg(long, default_value_t = 1 << 18)]
    buckets: usize,
    /// The partition this server owns.
    #[arg(long, default_value_t = 0)]
    partition: u16,
    /// Partitions in all (clients send partition p to base port + p).
    #[arg(long, default_value_t = 1)]
    partitions: u16,
    /// Compute UDP checksums of responses (off: offloaded, as in the paper).
    #[arg(long)]
    udp_checksum: bool,
}

fn main() -> std::process::ExitCode {
    cli::main_with("kv", || run(cli::parse_or_exit("kv")))
}

impl Args {
    /// Checks the values clap cannot, before the store is allocated.
    fn check(&self) -> CliResult<()> {
        self.serve.check()?;
        if self.partitions == 0 || self.partition >= self.partitions {
            return Err(format!(
                "--partition {} must be below --partitions {}",
                self.partition, self.partitions
            )
            .into());
        }
        let max_log_mb = MAX_LOG_BYTES >> 20;
        // The store rounds a log size down to a power of two.
        if !self.log_mb.is_power_of_two() || self.log_mb > max_log_mb {
            return Err(format!(
                "--log-mb must be a power of two in 1..={max_log_mb}, not {}",
                self.log_mb
            )
            .into());
        }
        if self.buckets == 0 || self.buckets > MAX_BUCKETS {
            return Err(format!(
                "--buckets must be in 1..={MAX_BUCKETS} (2 GiB of index), not {}",
                self.buckets
            )
            .into());
        }
        Ok(())
    }
}

fn run(a: Args) -> CliResult<()> {
    a.check()?;
    let server = KvServer::new(&ServerConfig {
        store: StoreConfig {
            log_bytes: a.log_mb << 20,
            buckets: a.buckets,
        },
        partition: a.partition,
        partitions: a.partitions,
        udp_checksum: a.udp_checksum,
    })?;
    let s = &a.serve;
    s.connect.pin("kv");
    let dev = s.connect.open(s.device_options(1))?;
    let port = s.connect.port;
    let mut server = Hosted::new(a.host.host(&dev, port), server);
    let extra = |k: &Hosted<KvServer>| {
        let st = k.app.stats();
        format!(
            ", {} requests, {} GET hits of {}",
            st.requests, st.get_hits, st.gets
        )
    };
    // Ensō: responses sent in place from the RX/TX pipe and through the
    // TX pipe.
    let (served, driver, sent) = match s.interface {
        Interface::Enso => {
            let mut d = EnsoReplyDriver::new(dev)?;
            d.add_fallback_pipes_on(port, s.pipes)?;
            let r = cli::serve("kv", &s.connect, &mut d, &mut server, extra, |_| {})?;
            (r, d.stats.clone(), Some((d.sent_in_place, d.sent_via_tx)))
        }
        Interface::Packetized => {
            let mut d = PacketizedReplyDriver::new(dev, s.burst());
            d.add_rss_queues_on(port, s.pipes)?;
            let r = cli::serve("kv", &s.connect, &mut d, &mut server, extra, |_| {})?;
            (r, d.stats.clone(), None)
        }
    };
    let (st, host) = (server.app.stats(), server.host.stats());
    if s.connect.json {
        let out = serde_json::json!({
            "app": "kv",
            "interface": s.interface,
            "mac": server.host.mac().to_string(),
            "served": served,
            "mops": st.requests as f64 / served.seconds / 1e6,
            "server": st,
            "store": server.app.store().stats(),
            "host": host,
            "driver": driver,
            "responses_in_place": sent.map(|s| s.0),
            "responses_via_tx_pipe": sent.map(|s| s.1),
        });
        println!("{out}");
    } else {
        println!("{}", summary(s.interface, &served, st, host, &driver));
    }
    Ok(())
}

/// The final line. Frames dropped are the driver's: the server's own
/// count misses the responses a driver could not send (the packetized
/// driver's when its TX ring is full).
fn summary(
    interface: Interface,
    served: &cli::Served,
    st: &ServerStats,
    host: &HostStats,
    driver: &enso::app::DriverStats,
) -> String {
    // The host's drops are the driver's too; its answers are sent as
    // responses are.
    let own = st.drops() + host.dropped();
    format!(
        "kv ({interface}): {} request frames in {:.1} s, {} requests ({:.3} Mops), {} GETs ({} hits), {} SETs, {} errors, {} frames dropped ({} not answerable, {} answered but not sent){}",
        st.frames,
        served.seconds,
        st.requests,
        st.requests as f64 / served.seconds / 1e6,
        st.gets,
        st.get_hits,
        st.sets,
        st.errors,
        driver.dropped,
        own,
        driver.dropped.saturating_sub(own),
        cli::host_text(host)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        let a = Args::try_parse_from(std::iter::once("kv").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())
    }

    #[test]
    fn the_summary_counts_responses_the_tx_ring_refused() {
        let st = ServerStats {
            frames: 50,
            drop_not_udp: 3,
            ..Default::default()
        };
        let driver = enso::app::DriverStats {
            frames: 50,
            forwarded: 40,
            dropped: 10,
            ..Default::default()
        };
        let served = cli::Served {
            seconds: 1.0,
            ..Default::default()
        };
        let line = summary(
            Interface::Packetized,
            &served,
            &st,
            &Default::default(),
            &driver,
        );
        assert!(
            line.ends_with("10 frames dropped (3 not answerable, 7 answered but not sent)"),
            "{line}"
        );
    }

    #[test]
    fn the_log_size_is_a_power_of_two() {
        let max = MAX_LOG_BYTES >> 20;
        for mb in [1, 2, 64, max] {
            assert_eq!(check(&["--log-mb", &mb.to_string()]), Ok(()), "{mb}");
        }
        for mb in [0, 3, 100, max - 1, max * 2] {
            assert_eq!(
                check(&["--log-mb", &mb.to_string()]),
                Err(format!(
                    "--log-mb must be a power of two in 1..={max}, not {mb}"
                ))
            );
        }
    }
}
