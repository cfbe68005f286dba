//! `app-trial`: short in-process throughput trials of the applications on
//! both interfaces (the NIC engine on one core, the application on
//! another), alternating interfaces round by round. Prints rates and the
//! application's busy time per packet or request; `--json` prints every
//! trial. The experiments call the same function
//! (`enso_apps::bench_api::run_trial`).

use clap::Parser;
use enso_apps::bench_api::{
    run_trial, AppKind, KvLoad, LoadArgs, LogLoad, TrialOptions, TrialResult,
};
use enso_apps::cli::{self, CliResult};
use enso_apps::load::MAX_WINDOW_FRAMES;
use enso_apps::nic::Interface;

#[derive(Parser)]
#[command(
    name = "app-trial",
    about = "Application throughput on Ensō and packetized, in process"
)]
struct Args {
    /// Applications to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    app: Vec<AppKind>,
    /// Interfaces to run (default: both).
    #[arg(long, value_enum, value_delimiter = ',')]
    interface: Vec<Interface>,
    /// Measured seconds per trial.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    duration_s: f64,
    /// Warm-up seconds per trial.
    #[arg(long, default_value_t = 0.3, allow_negative_numbers = true)]
    warmup_s: f64,
    /// Rounds (each runs every interface once).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Pipes or queues.
    #[arg(long, default_value_t = 1)]
    pipes: u32,
    /// Generator frame size (Maglev, telemetry).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Generator flows (Maglev, telemetry).
    #[arg(long, default_value_t = 16)]
    flows: u32,
    /// KV share of GETs.
    #[arg(long, default_value_t = 0.95)]
    get_ratio: f64,
    /// KV request frames in flight.
    #[arg(long, default_value_t = 512)]
    kv_window: usize,
    /// Log monitor on Ensō: read frames, not a stream pipe.
    #[arg(long)]
    log_packets: bool,
    /// Log monitor: services whose patterns are matched (sshd, nginx,
    /// postfix, apache; default: all).
    #[arg(long, value_delimiter = ',')]
    log_services: Vec<String>,
    /// Log monitor: share of the log's lines that are events the patterns
    /// detect (0..=1).
    #[arg(long, default_value_t = enso_apps::logmon::DEFAULT_EVENT_SHARE)]
    log_event_share: f64,
    #[command(flatten)]
    load: LoadArgs,
    /// Core of the KV / log client (default: polled on the application's core).
    #[arg(long)]
    client_core: Option<usize>,
    /// Print every trial as JSON.
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    nic_emu::cleanup::remove_devices_on_signal();
    cli::main_with("app-trial", || {
        run(nic_emu::args::parse_or_exit("app-trial"))
    })
}

impl Args {
    /// Checks the values clap cannot, whichever applications are chosen.
    fn check(&self) -> CliResult<()> {
        cli::seconds("--duration-s", self.duration_s, false)?;
        cli::seconds("--warmup-s", self.warmup_s, true)?;
        // A rate over less than a millisecond is a count of a few batches.
        if self.duration_s < 0.001 {
            return Err(format!(
                "--duration-s must be at least 0.001, not {}",
                self.duration_s
            )
            .into());
        }
        if !(60..=1536).contains(&self.size) {
            return Err(format!("--size must be in 60..=1536, not {}", self.size).into());
        }
        if self.rounds == 0 {
            return Err("--rounds must be at least 1".into());
        }
        if self.pipes == 0 {
            return Err("--pipes must be at least 1".into());
        }
        if self.flows == 0 {
            return Err("--flows must be at least 1".into());
        }
        cli::in_range("--get-ratio", self.get_ratio, 0.0..=1.0)?;
        cli::in_range("--log-event-share", self.log_event_share, 0.0..=1.0)?;
        cli::in_range("--kv-window", self.kv_window, 1..=MAX_WINDOW_FRAMES)?;
        if let Some(c) = self.client_core {
            cli::check_core("--client-core", c, &cli::usable_cores())?;
        }
        Ok(())
    }
}

fn run(a: Args) -> CliResult<()> {
    a.check()?;
    let duration = cli::seconds("--duration-s", a.duration_s, false)?;
    let warmup = cli::seconds("--warmup-s", a.warmup_s, true)?;
    let apps = if a.app.is_empty() {
        AppKind::ALL.to_vec()
    } else {
        a.app.clone()
    };
    let ifaces = if a.interface.is_empty() {
        Interface::ALL.to_vec()
    } else {
        a.interface.clone()
    };
    let opts = a.load.apply(TrialOptions {
        duration,
        warmup,
        pipes: a.pipes,
        frame_size: a.size,
        flows: a.flows,
        kv_get_ratio: a.get_ratio,
        kv_window: a.kv_window,
        log_stream: !a.log_packets,
        log_services: a.log_services.clone(),
        log_event_share: a.log_event_share,
        client_core: a.client_core,
        ..Default::default()
    });
    let mut all: Vec<TrialResult> = Vec::new();
    for app in &apps {
        for round in 0..a.rounds {
            for iface in &ifaces {
                let r =
                    run_trial(*app, *iface, &opts).map_err(|e| format!("{app} on {iface}: {e}"))?;
                if !a.json {
                    eprintln!(
                        "  {app:<9} {:<10} round {}: {:>8.3} M{}/s {:>8.2} Gb/s, app {:>7.1} ns/{} ({:.0}% busy), NIC {:>6.1} ns, drops {:?}{}",
                        iface.name(),
                        round + 1,
                        r.rate / 1e6,
                        r.unit,
                        r.gbps,
                        r.app_busy_ns_per_unit,
                        r.unit.trim_end_matches('s'),
                        100.0 * r.app_busy_fraction,
                        r.nic_busy_ns_per_unit,
                        r.nic_drops,
                        r.latency
                            .map(|l| format!(", RTT p50 {} ns p99 {} ns", l.p50_ns, l.p99_ns))
                            .unwrap_or_default()
                    );
                }
                all.push(r);
            }
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    println!(
        "{:<10} {:<11} {:>10} {:>9} {:>14} {:>12}",
        "app", "interface", "rate (M/s)", "Gb/s", "app ns/unit", "unit"
    );
    for app in &apps {
        for iface in &ifaces {
            let mut v: Vec<&TrialResult> = all
                .iter()
                .filter(|r| r.app == *app && r.interface == *iface)
                .collect();
            v.sort_by(|x, y| x.rate.total_cmp(&y.rate));
            let m = v[v.len() / 2];
            println!(
                "{:<10} {:<11} {:>10.3} {:>9.2} {:>14.1} {:>12}",
                app.name(),
                iface.name(),
                m.rate / 1e6,
                m.gbps,
                m.app_busy_ns_per_unit,
                m.unit
            );
        }
    }
    if a.client_core.is_none()
        && apps.iter().any(|x| {
            (*x == AppKind::Kv && a.load.kv_load == KvLoad::Client)
                || (*x == AppKind::Logmon && a.load.log_load == LogLoad::Client)
        })
    {
        println!("KV and log monitor behind a client: the client shares the application's core (rates are lower bounds); --client-core moves it.");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        let a = Args::try_parse_from(std::iter::once("app-trial").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())
    }

    #[test]
    fn zeros_and_out_of_range_values_are_refused() {
        assert_eq!(check(&[]), Ok(()));
        let ok = [
            "--pipes",
            "2",
            "--flows",
            "1",
            "--rounds",
            "1",
            "--kv-window",
            "16384",
        ];
        assert_eq!(check(&ok), Ok(()));
        assert_eq!(check(&["--get-ratio", "0", "--app", "maglev"]), Ok(()));
        for (flag, v, want) in [
            ("--pipes", "0", "--pipes must be at least 1"),
            ("--flows", "0", "--flows must be at least 1"),
            ("--rounds", "0", "--rounds must be at least 1"),
            (
                "--kv-window",
                "0",
                "--kv-window must be in 1..=16384, not 0",
            ),
            (
                "--kv-window",
                "100000000000",
                "--kv-window must be in 1..=16384, not 100000000000",
            ),
            ("--get-ratio", "5", "--get-ratio must be in 0..=1, not 5"),
            (
                "--get-ratio",
                "NaN",
                "--get-ratio must be in 0..=1, not NaN",
            ),
            ("--size", "59", "--size must be in 60..=1536, not 59"),
        ] {
            // Checked whichever applications run.
            for app in ["kv", "maglev"] {
                let e = check(&["--app", app, flag, v]).unwrap_err();
                assert!(e.starts_with(want), "{flag} {v}: {e}");
            }
        }
        let e = check(&["--client-core", "99999"]).unwrap_err();
        assert!(e.starts_with("--client-core 99999 is not a core"), "{e}");
    }
}
