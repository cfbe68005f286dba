//! `nic-emu`: run an emulated NIC as a standalone process, or read the
//! counters of a running one.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use nic_emu::{device, spec, DeviceConfig, Nic, NotificationMode, RunOptions, Stats};

#[derive(Parser)]
#[command(
    name = "nic-emu",
    version,
    about = "An emulated Ensō NIC over shared memory"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a device until interrupted (or for --duration-s).
    Run {
        /// Device name; applications attach to it by this name.
        #[arg(long, default_value = "enso0")]
        name: String,
        /// Directory holding the device directory.
        #[arg(long, default_value = "/dev/shm")]
        dir: PathBuf,
        /// Port wiring, one per port: null, loopback, cable:N,
        /// generator[:size=64,flows=N,pps=R,count=N,kinds=ipv4/ipv6/raw,inflight=N].
        #[arg(long = "port", default_value = "loopback")]
        ports: Vec<String>,
        /// Bytes per pipe (power of two).
        #[arg(long, default_value_t = 2 << 20)]
        pipe_size: usize,
        /// Entries per notification ring (power of two).
        #[arg(long, default_value_t = 16384)]
        notif_entries: u32,
        /// reactive, per-packet or reactive-prefetch.
        #[arg(long, default_value = "reactive")]
        mode: NotificationMode,
        /// Emulated one-way interconnect latency (ns).
        #[arg(long, default_value_t = 0)]
        latency_ns: u64,
        /// While saturated, apply posted register writes after this many
        /// flits of received frames (0: every step, as when not saturated).
        #[arg(long, default_value_t = nic_emu::config::DEFAULT_REGISTER_POLL_FLITS)]
        register_poll_flits: u32,
        /// ... or after this many ns, whichever comes first (0: every step).
        #[arg(long, default_value_t = nic_emu::config::DEFAULT_REGISTER_POLL_NS)]
        register_poll_ns: u64,
        /// Pin the engine thread to this core.
        #[arg(long)]
        core: Option<usize>,
        /// Stop after this many seconds.
        #[arg(long)]
        duration_s: Option<f64>,
        /// Print the final counters as JSON.
        #[arg(long)]
        json: bool,
        /// Seconds between progress lines on stderr (0: none).
        #[arg(long, default_value_t = 1.0)]
        progress_s: f64,
    },
    /// Print the counters of a running device.
    Stats {
        #[arg(long, default_value = "enso0")]
        name: String,
        #[arg(long, default_value = "/dev/shm")]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nic-emu: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Run {
            name,
            dir,
            ports,
            pipe_size,
            notif_entries,
            mode,
            latency_ns,
            register_poll_flits,
            register_poll_ns,
            core,
            duration_s,
            json,
            progress_s,
        } => {
            let wires = ports
                .iter()
                .map(|p| spec::parse_wire(p))
                .collect::<Result<Vec<_>, _>>()?;
            let mut cfg = DeviceConfig::new(name, wires[0].clone());
            cfg.ports = wires;
            cfg.dir = dir;
            cfg.pipe_size = pipe_size;
            cfg.notif_ring_entries = notif_entries;
            cfg.notification_mode = mode;
            cfg.interconnect_latency_ns = latency_ns;
            cfg.register_poll_flits = register_poll_flits;
            cfg.register_poll_ns = register_poll_ns;
            cfg.validate()?;
            // SAFETY: `on_signal` only stores to an atomic, which is
            // async-signal-safe.
            unsafe {
                libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
                libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
            }
            let opts = RunOptions {
                core,
                listen: true,
                idle_sleep_after: None,
                ..Default::default()
            };
            let nic = Nic::start(cfg, opts)?;
            eprintln!("nic-emu: device ready at {}", nic.dir().display());
            let start = Instant::now();
            let mut last = Instant::now();
            let mut last_frames = 0u64;
            while !STOP.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                if duration_s.is_some_and(|d| start.elapsed().as_secs_f64() >= d) {
                    break;
                }
                if progress_s > 0.0 && last.elapsed().as_secs_f64() >= progress_s {
                    let s = nic.stats();
                    let dt = last.elapsed().as_secs_f64();
                    eprintln!(
                        "nic-emu: {:.2} Mfps, {} apps, {} frames, {} drops",
                        (s.engine.frames - last_frames) as f64 / dt / 1e6,
                        s.apps.len(),
                        s.engine.frames,
                        s.total_drops()
                    );
                    last_frames = s.engine.frames;
                    last = Instant::now();
                }
            }
            let s = nic.stop();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?
                );
            } else {
                print_stats(&s);
            }
            Ok(())
        }
        Cmd::Stats { name, dir, json } => {
            let s = device::read_stats(&dir.join(format!("enso-{name}")))?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?
                );
            } else {
                print_stats(&s);
            }
            Ok(())
        }
    }
}

fn print_stats(s: &Stats) {
    println!(
        "device {}: {} frames moved, {} busy steps of {}",
        s.device, s.engine.frames, s.engine.busy_steps, s.engine.steps
    );
    for p in &s.ports {
        let c = &p.counters;
        println!(
            "  port {} ({}): rx {} frames / {} B, tx {} frames / {} B",
            p.port, p.wire, c.rx_frames, c.rx_bytes, c.tx_frames, c.tx_bytes
        );
        if let Some(g) = &p.generator {
            println!(
                "    generator: sent {}, returned {}, corrupt {}, duplicate {}, foreign {}",
                g.sent, g.returned, g.corrupt, g.duplicate, g.foreign
            );
        }
    }
    for a in &s.apps {
        let c = &a.counters;
        println!(
            "  app {}: {} pipes, {} notifications, {} tx notifications, {} tx frames, rejected: {} foreign reg, {} bad reg, {} bad tx notif, {} bad tx frame, {} bad config",
            a.app_id,
            a.pipes.len(),
            c.rx_notifications,
            c.tx_notifications,
            c.tx_frames,
            c.reject_foreign_register,
            c.reject_bad_register_value,
            c.reject_bad_tx_notification,
            c.reject_bad_tx_frame,
            c.reject_bad_config
        );
    }
    println!("  drops:");
    for (k, v) in s.drops() {
        println!("    {k}: {v}");
    }
    println!(
        "  pcie: up {} B ({:.1}% metadata), down {} B ({:.1}% metadata)",
        s.pcie.up.total().link_bytes,
        100.0 * s.pcie.up.metadata_fraction(),
        s.pcie.down.total().link_bytes,
        100.0 * s.pcie.down.metadata_fraction()
    );
}
