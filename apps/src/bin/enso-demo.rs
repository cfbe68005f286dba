//! `enso-demo`: the emulated NIC, its built-in traffic generator and the echo
//! server in one process, the NIC engine and the server on different cores.
//! Prints the packet rate and everything the NIC counted.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use enso::{Device, DeviceOptions, EnsoDriver};
use enso_apps::echo::Echo;
use nic_emu::{
    DeviceConfig, GeneratorConfig, Nic, NotificationMode, RunOptions, SizeSpec, VerifyLevel,
    WireConfig,
};

#[derive(Parser)]
#[command(
    name = "enso-demo",
    about = "Emulated Ensō NIC + traffic generator + echo server"
)]
struct Args {
    /// Frame size in bytes (without FCS), or a range like 64-1518.
    #[arg(long, default_value = "64")]
    size: String,
    /// Seconds to run.
    #[arg(long, default_value_t = 3.0)]
    duration_s: f64,
    /// RX/TX pipes the echo server uses.
    #[arg(long, default_value_t = 4)]
    pipes: u32,
    /// Flows the generator sends (spread over the pipes by hash).
    #[arg(long, default_value_t = 64)]
    flows: u32,
    /// reactive, per-packet or reactive-prefetch.
    #[arg(long, default_value = "reactive")]
    mode: NotificationMode,
    /// Print the final counters as JSON.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("enso-demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let sizes = nic_emu::spec::parse_sizes(&a.size)?;
    let avg = match &sizes {
        SizeSpec::Fixed(n) => *n as f64,
        SizeSpec::Range(lo, hi) => (lo + hi) as f64 / 2.0,
        SizeSpec::Mix(v) => v.iter().sum::<usize>() as f64 / v.len() as f64,
    };
    let g = GeneratorConfig {
        sizes,
        flows: a.flows.max(1),
        verify: VerifyLevel::Full,
        paused: true,
        // Keep the server's pipes from overflowing: frames in flight at most.
        max_in_flight: Some(4096),
        ..Default::default()
    };
    let mut cfg = DeviceConfig::new(
        format!("demo-{}", std::process::id()),
        WireConfig::Generator(g),
    );
    cfg.notification_mode = a.mode;
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let (nic_core, app_core) = match cores.as_slice() {
        [a, b, ..] => (Some(a.id), Some(*b)),
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
    let dev = Device::attach_nic(
        &nic,
        DeviceOptions {
            pipes: a.pipes,
            ..Default::default()
        },
    )?;
    let mut d = EnsoDriver::new(dev);
    d.add_fallback_pipes(a.pipes)?;
    if let Some(c) = app_core {
        core_affinity::set_for_current(c);
    }
    // Traffic starts once the NIC has applied the pipes' fallback settings.
    let t0 = Instant::now();
    while nic.stats().fallback_pipes < a.pipes as usize {
        d.dev.reap_completions()?;
        if t0.elapsed() > Duration::from_secs(5) {
            return Err("the NIC did not set up the pipes".into());
        }
    }
    nic.with_engine(|e| e.set_generators_paused(false));
    eprintln!(
        "enso-demo: NIC engine on core {:?}, echo server on core {:?}, {} pipes, {} B frames, {:?} notifications",
        nic_core,
        app_core.map(|c| c.id),
        a.pipes,
        a.size,
        a.mode
    );
    let mut echo = Echo::new();
    let start = Instant::now();
    let mut last = Instant::now();
    let mut last_frames = 0;
    while start.elapsed() < Duration::from_secs_f64(a.duration_s) {
        for _ in 0..256 {
            d.poll(&mut echo)?;
        }
        if last.elapsed() >= Duration::from_secs(1) && !a.json {
            let dt = last.elapsed().as_secs_f64();
            let mpps = (d.stats.frames - last_frames) as f64 / dt / 1e6;
            eprintln!(
                "  {:>5.1} s  {:>7.2} Mpps  {:>7.2} Gb/s",
                start.elapsed().as_secs_f64(),
                mpps,
                mpps * avg * 8e-3
            );
            last_frames = d.stats.frames;
            last = Instant::now();
        }
    }
    let el = start.elapsed().as_secs_f64();
    // Stop the traffic and let what is in flight come back.
    nic.with_engine(|e| e.set_generators_paused(true));
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_millis(200) {
        d.poll(&mut echo)?;
    }
    let lib = d.dev.stats().clone();
    drop(d);
    let s = nic.stop();
    let gen = s.generator(0).cloned().unwrap_or_default();
    let pkts = gen.returned.max(1);
    let bpp = s.pcie.per_packet(pkts);
    if a.json {
        let out = serde_json::json!({
            "interface": "enso",
            "mode": "echo",
            "size": a.size,
            "seconds": el,
            "mpps": echo.echoed as f64 / el / 1e6,
            "generator": gen,
            "drops": s.drops(),
            "notifications_per_pkt": s.pipe_sum(|c| c.notifications) as f64 / pkts as f64,
            "library": lib,
            "pcie_bytes_per_pkt": { "up": bpp.up, "down": bpp.down },
            "pcie_metadata_fraction": s.pcie.metadata_fraction(),
            "nic": s,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("\nEnsō echo, {} B frames, {:.1} s", a.size, el);
    println!(
        "  echo server:   {:.2} Mpps ({} frames echoed)",
        echo.echoed as f64 / el / 1e6,
        echo.echoed
    );
    println!(
        "  generator:     sent {}, came back verified {}, corrupt {}, duplicate {}, foreign {}",
        gen.sent, gen.returned, gen.corrupt, gen.duplicate, gen.foreign
    );
    let lost = gen.sent - gen.returned - gen.corrupt - gen.duplicate;
    println!(
        "  NIC drops:     {} ({} frames not back)",
        s.total_drops(),
        lost
    );
    for (k, v) in s.drops() {
        if v > 0 {
            println!("    {k}: {v}");
        }
    }
    println!(
        "  notifications: {:.4} per frame ({} RX notifications, {} TX notifications, {} head writes)",
        s.pipe_sum(|c| c.notifications) as f64 / pkts as f64,
        s.pipe_sum(|c| c.notifications),
        s.app_sum(|c| c.tx_notifications),
        s.pipe_sum(|c| c.head_writes)
    );
    println!(
        "  PCIe (Gen3 x16 model): {:.1} B up + {:.1} B down per frame, {:.1}% metadata",
        bpp.up,
        bpp.down,
        100.0 * s.pcie.metadata_fraction()
    );
    println!(
        "  NIC engine busy {:.0}% of the run, {:.1} ns per echoed frame (receive + transmit)",
        100.0 * s.engine.busy_ns as f64 / 1e9 / el,
        s.engine.busy_ns as f64 / pkts as f64
    );
    Ok(())
}
