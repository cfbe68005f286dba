//! `echo`: the echo server, attached to a running `nic-emu` device.
//!
//! Receives fallback traffic on `--port` (Ensō pipes, or descriptor queues
//! with `--interface packetized`), increments the echo byte of every test
//! frame and sends it back in place; the same logic on both interfaces.
//! With `--reflect` it is a UDP echo server instead (addresses and ports
//! swapped, payload unchanged); with `--ip` it answers ARP, neighbour
//! solicitations and pings for its addresses and drops frames for others.

use clap::Parser;
use enso_apps::cli::{self, CliResult, EnsoPipes, HostArgs, ServeArgs};
use enso_apps::echo::Echo;
use enso_apps::net::host::HostStats;
use enso_apps::nic::{Hosted, Interface};

#[derive(Parser)]
#[command(
    name = "echo",
    about = "Echo server on the emulated NIC (Ensō pipes or descriptor queues)"
)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    #[command(flatten)]
    host: HostArgs,
    /// Answer as a UDP echo server: every UDP datagram (IPv4 or IPv6) back
    /// to its sender from the port's MAC, addresses and ports swapped,
    /// payload unchanged, checksums valid; other frames are dropped and
    /// counted. Without it, the echo byte of test frames is incremented.
    #[arg(long)]
    reflect: bool,
    /// Prefetch notifications: on or off (also true/false, yes/no, 1/0;
    /// default: the device's mode; Ensō only).
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    prefetch: Option<bool>,
}

fn main() -> std::process::ExitCode {
    cli::main_with("echo", || run(&cli::parse_or_exit("echo")))
}

impl Args {
    /// Checks the values clap cannot, before the device is attached.
    fn check(&self) -> CliResult<()> {
        self.serve.check()?;
        if self.prefetch.is_some() && self.serve.interface == Interface::Packetized {
            return Err("--prefetch applies to Ensō pipes, not to --interface packetized".into());
        }
        Ok(())
    }
}

fn run(a: &Args) -> CliResult<()> {
    a.check()?;
    let s = &a.serve;
    s.connect.pin("echo");
    let mut opts = s.device_options(0);
    opts.prefetch = a.prefetch;
    let dev = s.connect.open(opts)?;
    let port = s.connect.port;
    let mac = cli::port_mac(&dev, port);
    let echo = if a.reflect {
        Echo::reflecting(mac)
    } else {
        Echo::new()
    };
    let mut server = Hosted::new(a.host.host(&dev, port), echo);
    let extra = |h: &Hosted<Echo>| {
        let e = &h.app;
        if e.is_reflecting() {
            format!(", {} reflected", e.reflected)
        } else {
            format!(", {} echoed, {} other", e.echoed, e.other)
        }
    };
    let (served, driver, lib) =
        cli::serve_packets("echo", s, dev, EnsoPipes::RxTx, &mut server, extra, |_| {})?;
    let (echo, host) = (&server.app, server.host.stats());
    if s.connect.json {
        let out = serde_json::json!({
            "app": "echo",
            "interface": s.interface,
            "mode": if a.reflect { "reflect" } else { "test_frames" },
            "mac": mac.to_string(),
            "frames": served.frames,
            "mpps": served.mpps,
            "served": served,
            "echoed": echo.echoed,
            "other": echo.other,
            "reflected": echo.reflected,
            "not_udp": echo.not_udp,
            "bad_checksum": echo.bad_checksum,
            "host": host,
            "driver": driver,
            "library": lib,
        });
        println!("{out}");
    } else {
        println!(
            "{}",
            summary(s.interface, &served, echo, host, &driver, &lib)
        );
    }
    Ok(())
}

/// The final line: what was served, echoed, and sent back or dropped.
/// The handler echoes every frame; the packetized driver drops those its
/// full TX ring refuses, which `echoed` alone would pass off as sent.
fn summary(
    interface: Interface,
    served: &cli::Served,
    echo: &Echo,
    host: &HostStats,
    driver: &enso::app::DriverStats,
    lib: &enso::DeviceStats,
) -> String {
    let work = if echo.is_reflecting() {
        format!(
            "{} reflected, {} not UDP, {} bad checksums",
            echo.reflected, echo.not_udp, echo.bad_checksum
        )
    } else {
        format!("{} echoed, {} other", echo.echoed, echo.other)
    };
    // The driver also counts the frames the handler dropped.
    let own = echo.not_udp + echo.bad_checksum + host.dropped();
    let refused = driver.dropped.saturating_sub(own);
    format!(
        "echo ({interface}): {} frames in {:.1} s ({:.2} Mpps, {}), {work}, {} sent back, {refused} dropped (TX ring full), {} notifications, {} TX notifications{}",
        served.frames,
        served.seconds,
        served.mpps,
        served.busy_text(),
        driver.forwarded,
        lib.notifications,
        lib.tx_notifications,
        cli::host_text(host)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        let a = Args::try_parse_from(std::iter::once("echo").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())
    }

    #[test]
    fn prefetch_is_for_enso_only() {
        assert_eq!(check(&["--device", "d"]), Ok(()));
        assert_eq!(check(&["--device", "d", "--prefetch", "true"]), Ok(()));
        assert_eq!(
            check(&["--device", "d", "--interface", "packetized"]),
            Ok(())
        );
        assert_eq!(
            check(&[
                "--device",
                "d",
                "--interface",
                "packetized",
                "--prefetch",
                "true"
            ]),
            Err("--prefetch applies to Ensō pipes, not to --interface packetized".into())
        );
        assert!(check(&["--device", "d", "--queues", "0"]).is_err());
    }

    #[test]
    fn the_summary_counts_frames_the_tx_ring_refused() {
        let served = cli::Served {
            frames: 100,
            ..Default::default()
        };
        let mut echo = Echo::new();
        echo.echoed = 100;
        let driver = enso::app::DriverStats {
            frames: 100,
            forwarded: 90,
            dropped: 10,
            ..Default::default()
        };
        let line = summary(
            Interface::Packetized,
            &served,
            &echo,
            &Default::default(),
            &driver,
            &Default::default(),
        );
        assert!(
            line.contains("100 echoed, 0 other, 90 sent back, 10 dropped (TX ring full)"),
            "{line}"
        );
    }

    #[test]
    fn prefetch_takes_on_and_off_as_its_help_says() {
        let parse = |v: &str| {
            Args::try_parse_from(["echo", "--prefetch", v])
                .map(|a| a.prefetch)
                .map_err(|e| e.to_string())
        };
        for (v, want) in [
            ("on", true),
            ("off", false),
            ("true", true),
            ("false", false),
        ] {
            assert_eq!(parse(v), Ok(Some(want)), "{v}");
        }
        assert!(parse("maybe").is_err());
        assert_eq!(Args::try_parse_from(["echo"]).unwrap().prefetch, None);
    }

    #[test]
    fn ip_takes_both_families_repeated_or_comma_separated() {
        let a = Args::try_parse_from([
            "echo",
            "--reflect",
            "--ip",
            "10.0.0.2,fd00::2",
            "--ip",
            "10.0.0.3",
        ])
        .unwrap();
        assert!(a.reflect);
        let want: Vec<std::net::IpAddr> = ["10.0.0.2", "fd00::2", "10.0.0.3"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(a.host.ip, want);
        let e = Args::try_parse_from(["echo", "--ip", "10.0.0.300"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--ip"), "{e}");
        assert!(Args::try_parse_from(["echo"]).unwrap().host.ip.is_empty());
    }
}
