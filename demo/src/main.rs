//! `enso-demo`: the emulated NIC with its built-in traffic generator and the
//! echo server, on the Ensō interface and on the packetized (descriptor-ring)
//! baseline, in short alternating trials (the two vCPUs of these machines
//! move between physical placements, so only interleaved comparisons hold).
//! The NIC engine and the echo server run on different cores. Prints the
//! rates, everything the NIC counted, and PCIe bytes per packet.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use enso::{Device, DeviceOptions, EnsoDriver, PacketizedDriver};
use enso_apps::cli;
use enso_apps::echo::Echo;
use hostcpu::placement::Placement;
use hostcpu::probe;
use nic_emu::{
    DeviceConfig, GeneratorConfig, Nic, NotificationMode, RunOptions, Stats, VerifyLevel,
    WireConfig,
};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
enum Interface {
    Enso,
    Packetized,
    Both,
}

#[derive(Parser)]
#[command(
    name = "enso-demo",
    about = "Emulated NIC + traffic generator + echo server, Ensō vs packetized"
)]
struct Args {
    /// Frame size in bytes (without FCS), or a range like 64-1518.
    #[arg(long, default_value = "64")]
    size: String,
    /// Which interface(s) to run.
    #[arg(long, value_enum, default_value = "both")]
    interface: Interface,
    /// Seconds per trial.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    trial_s: f64,
    /// Trials per interface (alternating).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Pipes (Ensō) or queues (packetized) the echo server uses.
    #[arg(long, default_value_t = 2)]
    pipes: u32,
    /// Flows the generator sends (spread over pipes/queues by hash).
    #[arg(long, default_value_t = 64)]
    flows: u32,
    /// Ensō notification mode: reactive, per-packet or reactive-prefetch
    /// [default: reactive].
    #[arg(long)]
    mode: Option<NotificationMode>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Trial {
    interface: Interface,
    seconds: f64,
    echoed: u64,
    mpps: f64,
    gbps: f64,
    sent: u64,
    returned: u64,
    corrupt: u64,
    drops: std::collections::BTreeMap<&'static str, u64>,
    notifications_per_pkt: f64,
    pcie_up_per_pkt: f64,
    pcie_down_per_pkt: f64,
    pcie_metadata_fraction: f64,
    nic_busy_fraction: f64,
    nic_ns_per_pkt: f64,
    app_ns_per_pkt: f64,
}

fn main() -> ExitCode {
    nic_emu::cleanup::remove_devices_on_signal();
    match run(nic_emu::args::parse_or_exit("enso-demo")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("enso-demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// RX descriptors per packetized queue.
const RX_RING: u32 = 1024;

fn trial(
    a: &Args,
    iface: Interface,
    sizes: &nic_emu::SizeSpec,
    cores: &[core_affinity::CoreId],
) -> Result<Trial, Box<dyn std::error::Error>> {
    let g = GeneratorConfig {
        sizes: sizes.clone(),
        flows: a.flows,
        verify: VerifyLevel::Full,
        paused: true,
        // At most what one RX ring holds, so the packetized side never runs
        // out of descriptors however the flows hash onto its queues.
        max_in_flight: Some(RX_RING as u64),
        ..Default::default()
    };
    let name = format!("demo-{}-{:?}", std::process::id(), iface).to_lowercase();
    let mut cfg = DeviceConfig::new(name, WireConfig::Generator(g));
    cfg.notification_mode = a.mode.unwrap_or(NotificationMode::Reactive);
    let (nic_core, app_core) = match cores {
        [x, y, ..] => (Some(x.id), Some(*y)),
        _ => (None, None),
    };
    let nic = Nic::start(
        cfg,
        RunOptions {
            core: nic_core,
            idle_sleep_after: None,
            ..Default::default()
        },
    )?;
    if let Some(c) = app_core {
        core_affinity::set_for_current(c);
    }
    let mut echo = Echo::new();
    let dur = Duration::from_secs_f64(a.trial_s);
    let mut app_busy = Duration::ZERO;
    let (el, lib_notifs);
    // Runs the server until `dur` has passed; traffic starts once the NIC has
    // set up the server's fallback pipes or queues.
    macro_rules! serve {
        ($d:expr) => {{
            let t0 = Instant::now();
            while nic.stats().fallback_pipes < a.pipes as usize {
                if t0.elapsed() > Duration::from_secs(5) {
                    return Err("the NIC did not set up the pipes".into());
                }
            }
            nic.with_engine(|e| e.set_generators_paused(false));
            let start = Instant::now();
            while start.elapsed() < dur {
                let t = Instant::now();
                let mut n = 0;
                for _ in 0..64 {
                    n += $d.poll(&mut echo)?;
                }
                if n > 0 {
                    app_busy += t.elapsed();
                }
            }
            let el = start.elapsed().as_secs_f64();
            nic.with_engine(|e| e.set_generators_paused(true));
            let t1 = Instant::now();
            while t1.elapsed() < Duration::from_millis(50) {
                $d.poll(&mut echo)?;
            }
            el
        }};
    }
    match iface {
        Interface::Packetized => {
            let o = DeviceOptions {
                pipes: 0,
                tx_pipes: 0,
                queues: a.pipes,
                rx_ring: RX_RING,
                tx_ring: 1024,
                pool_buffers: a.pipes * 4096,
                ..Default::default()
            };
            let mut d = PacketizedDriver::new(Device::attach_nic(&nic, o)?, 32);
            d.add_rss_queues_on(0, a.pipes)?;
            el = serve!(d);
            lib_notifs = 0;
        }
        _ => {
            let o = DeviceOptions {
                pipes: a.pipes,
                ..Default::default()
            };
            let mut d = EnsoDriver::new(Device::attach_nic(&nic, o)?);
            d.add_fallback_pipes(a.pipes)?;
            el = serve!(d);
            lib_notifs = d.dev.stats().notifications;
        }
    }
    let s: Stats = nic.stop();
    let g = s.generator(0).cloned().unwrap_or_default();
    let pkts = g.returned.max(1);
    let bpp = s.pcie.per_packet(pkts);
    let bytes = g.returned_bytes as f64;
    let _ = lib_notifs;
    Ok(Trial {
        interface: iface,
        seconds: el,
        echoed: echo.echoed,
        mpps: g.returned as f64 / el / 1e6,
        gbps: bytes * 8.0 / el / 1e9,
        sent: g.sent,
        returned: g.returned,
        corrupt: g.corrupt + g.duplicate,
        drops: s.drops(),
        notifications_per_pkt: s.pipe_sum(|c| c.notifications) as f64 / pkts as f64,
        pcie_up_per_pkt: bpp.up,
        pcie_down_per_pkt: bpp.down,
        pcie_metadata_fraction: s.pcie.metadata_fraction(),
        nic_busy_fraction: s.engine.busy_ns as f64 / 1e9 / el,
        nic_ns_per_pkt: s.engine.busy_ns as f64 / pkts as f64,
        app_ns_per_pkt: app_busy.as_nanos() as f64 / pkts as f64,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

impl Args {
    /// Checks the values clap cannot, before any device starts.
    fn check(&self) -> cli::CliResult<()> {
        // trial() turns --trial-s into a Duration, which panics on a
        // negative, NaN or huge value.
        cli::seconds("--trial-s", self.trial_s, false)?;
        if self.mode.is_some() && self.interface == Interface::Packetized {
            return Err(
                "--mode sets how Ensō pipes notify; it does not apply to --interface packetized"
                    .into(),
            );
        }
        // The frames still in flight when a trial ends are echoed after it
        // and counted with it: negligible over 0.1 s, not over microseconds.
        if self.trial_s < 0.1 {
            return Err(format!("--trial-s must be at least 0.1, not {}", self.trial_s).into());
        }
        if self.rounds == 0 {
            return Err("--rounds must be at least 1".into());
        }
        // At most the NIC's descriptor queues (the packetized trial uses one
        // queue per pipe, with a 4096-buffer share of the pool each).
        if self.pipes == 0 || self.pipes > nic_emu::layout::MAX_DESC_QUEUES {
            return Err(format!(
                "--pipes must be in 1..={}, not {}",
                nic_emu::layout::MAX_DESC_QUEUES,
                self.pipes
            )
            .into());
        }
        if self.flows == 0 {
            return Err("--flows must be at least 1".into());
        }
        Ok(())
    }
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    a.check()?;
    let sizes = nic_emu::spec::parse_sizes(&a.size)?;
    let ifaces: Vec<Interface> = match a.interface {
        Interface::Both => vec![Interface::Enso, Interface::Packetized],
        i => vec![i],
    };
    if !a.json {
        eprintln!(
            "enso-demo: {} B frames, {} rounds of {:.1} s per interface, {} pipes/queues, {} flows",
            a.size, a.rounds, a.trial_s, a.pipes, a.flows
        );
    }
    // The cores this process may use, read once: after the first trial this
    // thread is pinned to the application's core, and asking again would
    // list that core alone (leaving the NIC engine on the application's
    // core in every later trial).
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    // Where the host has put the two cores right now moves absolute rates
    // by up to 4x: a cache-line round trip between them, before and after.
    let placement = match cores.as_slice() {
        [x, y, ..] => Placement::with_cores(x.id, y.id).unwrap_or_else(|_| Placement::pick()),
        _ => Placement::pick(),
    };
    let probe_before = probe::measure(&placement, probe::DEFAULT_DURATION);
    let mut trials: Vec<Trial> = Vec::new();
    for r in 0..a.rounds {
        for &i in &ifaces {
            let t = trial(&a, i, &sizes, &cores)?;
            if !a.json {
                eprintln!(
                    "  round {} {:<10} {:>6.2} Mpps  {:>6.2} Gb/s  {} drops, {} corrupt",
                    r + 1,
                    format!("{:?}", i).to_lowercase(),
                    t.mpps,
                    t.gbps,
                    t.drops.values().sum::<u64>(),
                    t.corrupt
                );
            }
            trials.push(t);
        }
    }
    let probe_after = probe::measure(&placement, probe::DEFAULT_DURATION);
    let med = |i: Interface, f: &dyn Fn(&Trial) -> f64| {
        median(trials.iter().filter(|t| t.interface == i).map(f).collect())
    };
    // Per-round ratio Ensō / packetized, then the median.
    let speedup = (ifaces.len() == 2).then(|| {
        median(
            trials
                .chunks(2)
                .map(|c| c[0].mpps / c[1].mpps.max(1e-9))
                .collect(),
        )
    });
    if a.json {
        let out = serde_json::json!({
            "size": a.size,
            "trials": trials,
            "speedup": speedup,
            "probe_before": probe_before,
            "probe_after": probe_after,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "\nEcho over the emulated NIC, {} B frames (median of {} trials each)",
        a.size, a.rounds
    );
    println!(
        "{:<11} {:>7} {:>7} {:>10} {:>9} {:>12} {:>12} {:>9} {:>9} {:>9}",
        "interface",
        "Mpps",
        "Gb/s",
        "notif/pkt",
        "NIC busy",
        "PCIe up B/p",
        "down B/p",
        "metadata",
        "NIC ns/p",
        "app ns/p"
    );
    for &i in &ifaces {
        println!(
            "{:<11} {:>7.2} {:>7.2} {:>10.4} {:>8.0}% {:>12.1} {:>12.1} {:>8.1}% {:>9.1} {:>9.1}",
            format!("{:?}", i).to_lowercase(),
            med(i, &|t| t.mpps),
            med(i, &|t| t.gbps),
            med(i, &|t| t.notifications_per_pkt),
            100.0 * med(i, &|t| t.nic_busy_fraction),
            med(i, &|t| t.pcie_up_per_pkt),
            med(i, &|t| t.pcie_down_per_pkt),
            100.0 * med(i, &|t| t.pcie_metadata_fraction),
            med(i, &|t| t.nic_ns_per_pkt),
            med(i, &|t| t.app_ns_per_pkt),
        );
    }
    if let Some(s) = speedup {
        println!("speedup (Ensō / packetized, median of per-round ratios): {s:.2}x");
    }
    let lost: u64 = trials.iter().map(|t| t.sent - t.returned).sum();
    let drops: u64 = trials.iter().map(|t| t.drops.values().sum::<u64>()).sum();
    let corrupt: u64 = trials.iter().map(|t| t.corrupt).sum();
    println!(
        "verified: every returned frame checked byte for byte; {corrupt} corrupt, {drops} NIC drops (all counted by cause), {lost} not returned"
    );
    println!("PCIe: Gen3 x16 TLP model of what the NIC's DMA and register traffic would cost on a real link.");
    println!("NIC busy near 100% means the emulated NIC, not the interface, limited the rate.");
    println!("before: {probe_before} ({})", probe_before.class().name());
    println!("after:  {probe_after} ({})", probe_after.class().name());
    println!(
        "The probe tells where the host put the two cores: sibling hyperthreads of one core (under {:.0} ns), one core complex (close), or different complexes (apart, from {:.0} ns); rates and speedups differ several times over between them.",
        probe::SIBLINGS_BELOW_NS,
        probe::APART_FROM_NS
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        let a = Args::try_parse_from(std::iter::once("enso-demo").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())
    }

    #[test]
    fn zeros_are_refused_not_replaced() {
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(
            check(&["--flows", "1", "--rounds", "1", "--pipes", "1"]),
            Ok(())
        );
        assert_eq!(
            check(&["--flows", "0"]),
            Err("--flows must be at least 1".into())
        );
        assert_eq!(
            check(&["--rounds", "0"]),
            Err("--rounds must be at least 1".into())
        );
        assert!(check(&["--pipes", "0"])
            .unwrap_err()
            .starts_with("--pipes must be in 1..="));
        assert!(check(&["--trial-s", "0"])
            .unwrap_err()
            .starts_with("--trial-s must be above 0"));
    }

    #[test]
    fn the_notification_mode_is_for_enso() {
        assert_eq!(check(&["--mode", "per-packet"]), Ok(()));
        assert_eq!(
            check(&["--mode", "per-packet", "--interface", "enso"]),
            Ok(())
        );
        assert_eq!(check(&["--interface", "packetized"]), Ok(()));
        assert_eq!(
            check(&["--mode", "reactive", "--interface", "packetized"]),
            Err(
                "--mode sets how Ensō pipes notify; it does not apply to --interface packetized"
                    .into()
            )
        );
    }
}
