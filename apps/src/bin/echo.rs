//! `echo`: the echo server, attached to a running `nic-emu` device.
//!
//! Receives fallback traffic on `--port` (Ensō pipes, or descriptor queues
//! with `--interface packetized`), increments the echo byte of every test
//! frame and sends it back in place; the same logic on both interfaces.

use clap::Parser;
use enso_apps::cli::{self, CliResult, EnsoPipes, ServeArgs};
use enso_apps::echo::Echo;
use enso_apps::nic::Interface;

#[derive(Parser)]
#[command(
    name = "echo",
    about = "Echo server on the emulated NIC (Ensō pipes or descriptor queues)"
)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// Prefetch notifications: on or off (also true/false, yes/no, 1/0;
    /// default: the device's mode; Ensō only).
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    prefetch: Option<bool>,
}

fn main() -> std::process::ExitCode {
    cli::main_with("echo", || run(&nic_emu::args::parse_or_exit("echo")))
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
    let mut echo = Echo::new();
    let extra = |e: &Echo| format!(", {} echoed, {} other", e.echoed, e.other);
    let (served, driver, lib) =
        cli::serve_packets("echo", s, dev, EnsoPipes::RxTx, &mut echo, extra, |_| {})?;
    if s.connect.json {
        let out = serde_json::json!({
            "app": "echo",
            "interface": s.interface,
            "frames": served.frames,
            "mpps": served.mpps,
            "served": served,
            "echoed": echo.echoed,
            "other": echo.other,
            "driver": driver,
            "library": lib,
        });
        println!("{out}");
    } else {
        println!("{}", summary(s.interface, &served, &echo, &driver, &lib));
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
    driver: &enso::app::DriverStats,
    lib: &enso::DeviceStats,
) -> String {
    format!(
        "echo ({interface}): {} frames in {:.1} s ({:.2} Mpps, {}), {} echoed, {} other, {} sent back, {} dropped (TX ring full), {} notifications, {} TX notifications",
        served.frames,
        served.seconds,
        served.mpps,
        served.busy_text(),
        echo.echoed,
        echo.other,
        driver.forwarded,
        driver.dropped,
        lib.notifications,
        lib.tx_notifications
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
}
