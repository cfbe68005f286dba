//! `app-trial`: short in-process throughput trials of the applications on
//! both interfaces (the NIC engine on one core, the application on
//! another), alternating interfaces round by round. Prints rates and the
//! application's busy time per packet or request, with the cross-core probe
//! before and after (where the host put the two cores); `--json` prints one
//! object: every trial (`trials`) and the two probes (`probe_before`,
//! `probe_after`). The experiments call the same function
//! (`bench::app_trial::run_trial`).

use bench::app_trial::{run_trial, AppKind, KvLoad, LoadArgs, LogLoad, TrialOptions, TrialResult};
use clap::Parser;
use enso_apps::cli::{self, CliResult};
use enso_apps::load::MAX_WINDOW_FRAMES;
use enso_apps::nic::Interface;
use hostcpu::placement::Placement;
use hostcpu::probe;

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
    /// Core of the KV / log client (default: polled on the application's core).
    #[arg(long)]
    client_core: Option<usize>,
    /// Print every trial as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    load: LoadArgs,
}

fn main() -> std::process::ExitCode {
    nic_emu::cleanup::remove_devices_on_signal();
    cli::main_with("app-trial", || {
        let (a, m) = nic_emu::args::parse_matches_or_exit::<Args>("app-trial");
        run(a, &nic_emu::args::given_on_command_line(&m))
    })
}

/// Options that only some applications use: (id, flag, the applications).
const APP_OPTIONS: [(&str, &str, &[AppKind]); 9] = [
    ("size", "--size", &[AppKind::Maglev, AppKind::Telemetry]),
    ("flows", "--flows", &[AppKind::Maglev, AppKind::Telemetry]),
    ("get_ratio", "--get-ratio", &[AppKind::Kv]),
    ("kv_window", "--kv-window", &[AppKind::Kv]),
    ("kv_load", "--kv-load", &[AppKind::Kv]),
    ("log_packets", "--log-packets", &[AppKind::Logmon]),
    ("log_services", "--log-services", &[AppKind::Logmon]),
    ("log_load", "--log-load", &[AppKind::Logmon]),
    ("log_event_share", "--log-event-share", &[AppKind::Logmon]),
];

impl Args {
    /// The applications chosen (all by default).
    fn apps(&self) -> Vec<AppKind> {
        if self.app.is_empty() {
            AppKind::ALL.to_vec()
        } else {
            self.app.clone()
        }
    }

    /// The interfaces chosen (both by default).
    fn interfaces(&self) -> Vec<Interface> {
        if self.interface.is_empty() {
            Interface::ALL.to_vec()
        } else {
            self.interface.clone()
        }
    }

    /// Checks the values clap cannot, then that every option given (the
    /// ids in `given`) is used by an application chosen: an option that
    /// nothing uses would be silently ignored.
    fn check(&self, given: &[String]) -> CliResult<()> {
        self.check_values()?;
        let apps = self.apps();
        let is_given = |id: &str| given.iter().any(|g| g == id);
        let names =
            |v: &[AppKind], sep: &str| v.iter().map(|a| a.name()).collect::<Vec<_>>().join(sep);
        for (id, flag, users) in APP_OPTIONS {
            if is_given(id) && !apps.iter().any(|a| users.contains(a)) {
                return Err(format!(
                    "{flag} applies only to {}, and --app selects {}",
                    names(users, " and "),
                    names(&apps, ", ")
                )
                .into());
            }
        }
        if is_given("log_packets") && !self.interfaces().contains(&Interface::Enso) {
            return Err(
                "--log-packets applies only to the enso interface, and --interface selects packetized"
                    .into(),
            );
        }
        let client = (apps.contains(&AppKind::Kv) && self.load.kv_load == KvLoad::Client)
            || (apps.contains(&AppKind::Logmon) && self.load.log_load == LogLoad::Client);
        if is_given("client_core") && !client {
            return Err(
                "--client-core applies only to a client: kv with --kv-load client, \
                        or logmon with --log-load client"
                    .into(),
            );
        }
        Ok(())
    }

    /// Checks the values clap cannot, whichever applications are chosen.
    fn check_values(&self) -> CliResult<()> {
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
        for iface in self.interfaces() {
            cli::check_pipes(iface, self.pipes)?;
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

fn run(a: Args, given: &[String]) -> CliResult<()> {
    a.check(given)?;
    let duration = cli::seconds("--duration-s", a.duration_s, false)?;
    let warmup = cli::seconds("--warmup-s", a.warmup_s, true)?;
    let apps = a.apps();
    let ifaces = a.interfaces();
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
    let placement = match (opts.nic_core, opts.app_core) {
        (Some(x), Some(y)) => Placement::with_cores(x, y).unwrap_or_else(|_| Placement::pick()),
        _ => Placement::pick(),
    };
    let probe_before = probe::measure(&placement, probe::DEFAULT_DURATION);
    let mut all: Vec<TrialResult> = Vec::new();
    for app in &apps {
        for round in 0..a.rounds {
            for iface in &ifaces {
                let r =
                    run_trial(*app, *iface, &opts).map_err(|e| format!("{app} on {iface}: {e}"))?;
                if !a.json {
                    eprintln!(
                        "  {app:<9} {:<10} round {}: {:>8.3} M{}/s {:>8.2} Gb/s, app {:>7.1} ns/{} ({:.0}% busy), NIC {:>6.1} ns, {:.3} notifications and {:.3} register writes per {}, drops {:?}{}{}",
                        iface.name(),
                        round + 1,
                        r.rate / 1e6,
                        r.unit,
                        r.gbps,
                        r.app_busy_ns_per_unit,
                        r.unit.trim_end_matches('s'),
                        100.0 * r.app_busy_fraction,
                        r.nic_busy_ns_per_unit,
                        r.rx_notifications_per_unit,
                        r.register_writes_per_unit,
                        r.unit.trim_end_matches('s'),
                        r.nic_drops,
                        r.latency
                            .map(|l| format!(", RTT p50 {} ns p99 {} ns", l.p50_ns, l.p99_ns))
                            .unwrap_or_default(),
                        evict_note(*iface, &r.nic.engine),
                    );
                }
                all.push(r);
            }
        }
    }
    let probe_after = probe::measure(&placement, probe::DEFAULT_DURATION);
    if a.json {
        let out = serde_json::json!({
            "trials": all,
            "probe_before": probe_before,
            "probe_after": probe_after,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
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
    for (when, p) in [("before", &probe_before), ("after ", &probe_after)] {
        println!("{when}: {p} ({})", p.class().name());
    }
    Ok(())
}

/// Whether the NIC ended the trial evicting pipe lines ahead, and how often
/// it changed its mind (Ensō pipes only: see `nic-emu run --help`).
fn evict_note(iface: Interface, e: &nic_emu::counters::EngineCounters) -> String {
    if iface != Interface::Enso {
        return String::new();
    }
    format!(", pipe writes {}", e.pipe_writes_summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        use clap::{CommandFactory, FromArgMatches};
        let m = Args::command()
            .try_get_matches_from(std::iter::once("app-trial").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let a = Args::from_arg_matches(&m).map_err(|e| e.to_string())?;
        a.check(&nic_emu::args::given_on_command_line(&m))
            .map_err(|e| e.to_string())
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
        assert_eq!(check(&["--get-ratio", "0", "--app", "kv"]), Ok(()));
        for (flag, v, want) in [
            (
                "--pipes",
                "0",
                "--pipes must be in 1..=8192 on the enso interface (the device's pipe ids), not 0",
            ),
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
        // Queues are fewer than pipes.
        let e = check(&["--pipes", "2000"]).unwrap_err();
        assert_eq!(
            e,
            "--pipes must be in 1..=1024 on the packetized interface (the device's \
             descriptor queues), not 2000"
        );
        assert_eq!(check(&["--pipes", "2000", "--interface", "enso"]), Ok(()));
    }

    #[test]
    fn options_no_chosen_application_uses_are_refused() {
        for (args, want) in [
            (
                &["--log-services", "sshd", "--app", "maglev"][..],
                "--log-services applies only to logmon, and --app selects maglev",
            ),
            (
                &["--get-ratio", "0.5", "--app", "maglev,logmon"],
                "--get-ratio applies only to kv, and --app selects maglev, logmon",
            ),
            (
                &["--size", "128", "--app", "kv"],
                "--size applies only to maglev and telemetry, and --app selects kv",
            ),
            (
                &["--log-event-share", "0.5", "--app", "kv"],
                "--log-event-share applies only to logmon, and --app selects kv",
            ),
            (
                &["--kv-load", "client", "--app", "telemetry"],
                "--kv-load applies only to kv, and --app selects telemetry",
            ),
            (
                &["--log-packets", "--app", "logmon", "--interface", "packetized"],
                "--log-packets applies only to the enso interface, and --interface selects packetized",
            ),
            (
                &["--client-core", "0", "--app", "kv"],
                "--client-core applies only to a client: kv with --kv-load client, \
                 or logmon with --log-load client",
            ),
        ] {
            assert_eq!(check(args), Err(want.to_string()), "{args:?}");
        }
        for ok in [
            &["--log-services", "sshd"][..],
            &["--log-services", "sshd", "--app", "maglev,logmon"],
            &["--size", "128", "--flows", "4", "--app", "telemetry"],
            &["--get-ratio", "0.5", "--kv-window", "64", "--app", "kv"],
            &["--log-packets", "--app", "logmon", "--interface", "enso"],
            &["--client-core", "0", "--app", "kv", "--kv-load", "client"],
            // A default value given explicitly is still given.
            &["--size", "64", "--app", "maglev"],
        ] {
            assert_eq!(check(ok), Ok(()), "{ok:?}");
        }
    }
}
