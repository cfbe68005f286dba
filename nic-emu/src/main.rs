//! `nic-emu`: run an emulated NIC as a standalone process, or read the
//! counters of a running one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
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

/// What the engine does without work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Idle {
    Spin,
    Park,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a device until interrupted (or for --duration-s).
    Run {
        /// Device name; applications attach to it by this name.
        #[arg(long, default_value = "enso0")]
        name: String,
        /// Existing directory in which the device directory is made.
        #[arg(long, default_value = "/dev/shm")]
        dir: PathBuf,
        /// Port wiring, one per port: null, loopback, cable:N[:delay=NS]
        /// (N: another port's index; delay in whole ns, 0..=1000000000),
        /// generator[:size=64|64-1518|64/128,flows=N,pps=R,count=N,inflight=N,burst=1..4096,kinds=ipv4/ipv6/raw,echo=N,verify=full|seq]
        /// (each option at most once; flows, count and
        /// inflight at least 1, pps finite and above 0);
        /// pcap:rx=FILE[,tx=FILE][,loop=N|inf][,rate=max|original|original*K|5Mpps|10Gbps]
        /// (capture files; replay starts once the port has a receiver);
        /// tap:NAME (a TAP device: the kernel's stack; root);
        /// afpacket:IFACE (an existing interface, AF_PACKET rings; root);
        /// memif:socket=PATH|@NAME[,role=server|client,id=N,rings=N,ring-size=N,buffer-size=N,secret=S,uid=N/N...]
        /// (DPDK's or VPP's shared-memory interface).
        #[arg(long = "port", default_value = "loopback")]
        ports: Vec<String>,
        /// Bytes per pipe (power of two).
        #[arg(long, default_value_t = 2 << 20)]
        pipe_size: usize,
        /// Entries per notification ring (power of two; the rings and one pipe
        /// must fit in the largest DMA region the device accepts).
        #[arg(long, default_value_t = 16384)]
        notif_entries: u32,
        /// reactive, per-packet or reactive-prefetch.
        #[arg(long, default_value = "reactive")]
        mode: NotificationMode,
        /// Emulated one-way interconnect latency (whole ns, 0..=1000000000).
        #[arg(long, default_value_t = 0)]
        latency_ns: u64,
        #[command(flatten)]
        tuning: nic_emu::args::HostTuningArgs,
        /// Pin the engine thread to this core.
        #[arg(long)]
        core: Option<usize>,
        /// What the engine does without work: `park` sleeps after 500 us
        /// until an application's register write, a command or the next
        /// timed event (a generator's frame, a polled wire) wakes it;
        /// `spin` keeps polling (a core busy even when idle).
        #[arg(long, value_enum, default_value_t = Idle::Park)]
        idle: Idle,
        /// Stop after this many seconds (above 0, at most 1e9; default: run
        /// until SIGINT, SIGTERM or SIGHUP).
        #[arg(long)]
        duration_s: Option<f64>,
        /// Print the final counters as JSON.
        #[arg(long)]
        json: bool,
        /// Seconds between progress lines on stderr (0: none; at most 1e9).
        #[arg(long, default_value_t = 1.0)]
        progress_s: f64,
    },
    /// Print the counters of a running device (an error if it is not
    /// running, or stopped: no snapshot for 2 s): the snapshot it writes
    /// every 200 ms, so what happened in the last 200 ms may not show yet.
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

/// How long a stop may take before the device directory is removed without
/// the engine's final counters (a step takes microseconds).
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Checks `--duration-s`: a number of seconds above 0 (see
/// [`nic_emu::args::seconds`]).
fn check_duration_s(s: f64) -> Result<Duration, nic_emu::args::SecondsError> {
    nic_emu::args::seconds("--duration-s", s, false)
}

/// Checks `--progress-s`: 0 (no progress lines) or a number of seconds
/// above 0.
fn check_progress_s(s: f64) -> Result<Option<Duration>, nic_emu::args::SecondsError> {
    let d = nic_emu::args::seconds("--progress-s", s, true)?;
    Ok((!d.is_zero()).then_some(d))
}

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    match run(nic_emu::args::parse_or_exit::<Cli>("nic-emu")) {
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
            tuning,
            core,
            idle,
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
            cfg.tuning = tuning.tuning();
            cfg.validate()?;
            if let Some(c) = core {
                let usable = nic_emu::cores::usable_cores();
                if !nic_emu::cores::can_pin(c, &usable) {
                    return Err(format!(
                        "--core {c} is not a core this process may run on ({})",
                        nic_emu::cores::pinnable_list(&usable)
                    ));
                }
            }
            let duration = duration_s.map(check_duration_s).transpose()?;
            let progress = check_progress_s(progress_s)?;
            // SIGHUP too: a device started from a terminal that is closed
            // would otherwise die and leave its directory behind.
            // SAFETY: `on_signal` only stores to an atomic, which is
            // async-signal-safe.
            unsafe {
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(sig, on_signal as *const () as libc::sighandler_t);
                }
            }
            let opts = RunOptions {
                core,
                listen: true,
                idle_sleep_after: None,
                park_after: match idle {
                    Idle::Park => Some(nic_emu::device::DEFAULT_PARK_AFTER),
                    Idle::Spin => None,
                },
                ..Default::default()
            };
            let nic = Nic::start(cfg, opts)?;
            eprintln!("nic-emu: device ready at {}", nic.dir().display());
            let start = Instant::now();
            let mut last = Instant::now();
            let mut last_frames = 0u64;
            while !STOP.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                if duration.is_some_and(|d| start.elapsed() >= d) {
                    break;
                }
                if progress.is_some_and(|p| last.elapsed() >= p) {
                    // An engine that stopped answering ends the run; the
                    // stop below says why.
                    let Ok(s) = nic.try_stats() else { break };
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
            // What the control socket refused or undid: kept beside the
            // engine's counters, which do not see the socket.
            let control = nic.control_counters();
            let s = stop(nic)?;
            if json {
                let mut v = serde_json::to_value(&s).map_err(|e| e.to_string())?;
                if let Some(m) = v.as_object_mut() {
                    let c = serde_json::to_value(&control).map_err(|e| e.to_string())?;
                    m.insert("control".into(), c);
                }
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
                );
            } else {
                print_stats(&s);
                println!(
                    "  control socket: {} connections, {} refused (busy), {} cut off (no complete request), {} attachments undone ({} answers undelivered, {} answered too late)",
                    control.connections,
                    control.refused_busy,
                    control.request_timeouts,
                    control.undelivered + control.late_undone,
                    control.undelivered,
                    control.late_undone
                );
            }
            Ok(())
        }
        Cmd::Stats { name, dir, json } => {
            let devdir = nic_emu::devdir::path(&dir, &name)?;
            // A killed device leaves its last snapshot behind: printing it
            // as if the device ran would pass stale counters off as live.
            if let Err(e) = device::check_running(&devdir) {
                return Err(not_running(&name, &devdir, &e));
            }
            // A stopped (SIGSTOP) or stuck device still has its socket
            // accept connections, but writes no snapshot.
            check_fresh(&name, &devdir)?;
            let s = device::read_stats(&devdir)?;
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

/// Why `nic-emu stats` has no counters to show for device `name` in
/// `devdir`, whose control socket did not answer with `e`; names the
/// snapshot a killed device left behind, if there is one.
fn not_running(name: &str, devdir: &Path, e: &std::io::Error) -> String {
    let sock = devdir.join(device::CONTROL_SOCKET);
    let what = match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            format!("device '{name}' is not running ({}: {e})", sock.display())
        }
        _ => format!("cannot reach device '{name}' at {}: {e}", sock.display()),
    };
    let snapshot = devdir.join(device::STATS_FILE);
    if snapshot.is_file() {
        format!(
            "{what}; the counters it last wrote are in {}",
            snapshot.display()
        )
    } else {
        what
    }
}

/// A snapshot older than this many stats intervals is not the counters of
/// a device that runs.
const STALE_INTERVALS: u32 = 10;

/// Refuses the snapshot of device `name` in `devdir` if the device has not
/// rewritten it for [`STALE_INTERVALS`] intervals: its process is stopped
/// or its engine stuck, and the counters would be passed off as live.
fn check_fresh(name: &str, devdir: &Path) -> Result<(), String> {
    let snapshot = devdir.join(device::STATS_FILE);
    let age = std::fs::metadata(&snapshot)
        .and_then(|m| m.modified())
        .map_err(|e| format!("{}: {e}", snapshot.display()))?
        .elapsed()
        .unwrap_or_default();
    let limit = RunOptions::default().stats_interval * STALE_INTERVALS;
    if age > limit {
        return Err(format!(
            "device '{name}' answers but has not written its counters for {:.1} s (it writes them every {} ms): its process is stopped or stuck; the counters it last wrote are in {}",
            age.as_secs_f64(),
            RunOptions::default().stats_interval.as_millis(),
            snapshot.display()
        ));
    }
    Ok(())
}

/// Stops the device and returns its final counters. The device directory
/// is removed even if the engine thread failed or does not stop within
/// [`STOP_TIMEOUT`].
fn stop(nic: Nic) -> Result<Stats, String> {
    let dir = nic.dir().to_path_buf();
    stop_within(&dir, STOP_TIMEOUT, move || {
        nic.try_stop().map_err(String::from)
    })
}

/// Runs `stop` on a thread of its own and waits at most `timeout` for it;
/// removes `dir` if `stop` fails to answer in time.
fn stop_within(
    dir: &Path,
    timeout: Duration,
    stop: impl FnOnce() -> Result<Stats, String> + Send + 'static,
) -> Result<Stats, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let stopper = std::thread::Builder::new()
        .name("nic-emu-stop".into())
        .spawn(move || {
            let _ = tx.send(stop());
        })
        .map_err(|e| format!("cannot stop the device: {e}"))?;
    match rx.recv_timeout(timeout) {
        Ok(r) => {
            let _ = stopper.join();
            r
        }
        Err(RecvTimeoutError::Disconnected) => {
            nic_emu::devdir::remove(dir);
            Err("the NIC engine thread failed".into())
        }
        Err(RecvTimeoutError::Timeout) => {
            nic_emu::devdir::remove(dir);
            Err(format!(
                "the NIC engine did not stop within {} ms; removed {}",
                timeout.as_millis(),
                dir.display()
            ))
        }
    }
}

fn print_stats(s: &Stats) {
    println!(
        "device {}: {} frames moved, {} busy steps of {}; pipe writes: {}",
        s.device,
        s.engine.frames,
        s.engine.busy_steps,
        s.engine.steps,
        s.engine.pipe_writes_summary()
    );
    for p in &s.ports {
        let c = &p.counters;
        println!(
            "  port {} ({}): rx {} frames / {} B, tx {} frames / {} B",
            p.port, p.wire, c.rx_frames, c.rx_bytes, c.tx_frames, c.tx_bytes
        );
        if let Some(g) = &p.generator {
            println!(
                "    generator: sent {}, returned {}, corrupt {}, duplicate {}, foreign {}, dropped on arrival {}",
                g.sent, g.returned, g.corrupt, g.duplicate, g.foreign, g.dropped_on_arrival
            );
        }
    }
    for a in &s.apps {
        let c = &a.counters;
        println!(
            "  app {}: {} pipes, {} notifications, {} tx notifications, {} tx frames, rejected: {} foreign reg, {} bad reg, {} bad tx notif, {} bad tx frame ({} B discarded), {} bad config",
            a.app_id,
            a.pipes.len(),
            c.rx_notifications,
            c.tx_notifications,
            c.tx_frames,
            c.reject_foreign_register,
            c.reject_bad_register_value,
            c.reject_bad_tx_notification,
            c.reject_bad_tx_frame,
            c.tx_bytes_discarded,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_positive_finite_and_bounded() {
        assert_eq!(check_duration_s(0.3), Ok(Duration::from_millis(300)));
        assert_eq!(
            check_duration_s(1e9),
            Ok(Duration::from_secs(1_000_000_000))
        );
        for bad in [0.0, -0.0, -1.0, f64::NAN, f64::INFINITY, 1e30, 1e9 + 1.0] {
            let e = check_duration_s(bad)
                .expect_err("bad duration accepted")
                .to_string();
            assert!(e.starts_with("--duration-s"), "{e}");
        }
    }

    #[test]
    fn a_stop_that_hangs_still_removes_the_device_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = tmp.path().join("enso-x");
        std::fs::create_dir(&dev).unwrap();
        let e = stop_within(&dev, Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_secs(3600));
            Err("unreachable".into())
        })
        .expect_err("a hung stop succeeded");
        assert!(e.contains("did not stop within 50 ms"), "{e}");
        assert!(!dev.exists());
        // A stop that fails says why.
        std::fs::create_dir(&dev).unwrap();
        let e = stop_within(&dev, Duration::from_secs(5), || Err("engine failed".into()))
            .expect_err("a failed stop succeeded");
        assert_eq!(e, "engine failed");
    }

    #[test]
    fn the_stats_help_gives_the_snapshot_interval() {
        use clap::CommandFactory;
        let every = RunOptions::default().stats_interval.as_millis();
        let cmd = Cli::command();
        let stats = cmd.find_subcommand("stats").unwrap();
        let about = stats.get_about().unwrap().to_string();
        assert!(about.contains(&format!("every {every} ms")), "{about}");
    }

    #[test]
    fn progress_is_off_at_zero_and_otherwise_positive_and_bounded() {
        assert_eq!(check_progress_s(0.0), Ok(None));
        assert_eq!(check_progress_s(1.0), Ok(Some(Duration::from_secs(1))));
        for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e30] {
            let e = check_progress_s(bad)
                .expect_err("bad progress accepted")
                .to_string();
            assert!(e.starts_with("--progress-s"), "{e}");
        }
    }
}
