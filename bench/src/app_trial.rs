//! Short throughput trials of each application on one interface, for the
//! experiments (`bench apps`) and the binaries' self-contained mode.
//!
//! [`run_trial`] starts an emulated NIC in this process with its engine on
//! one thread ([`nic_emu::Nic::start`], pinned to
//! [`TrialOptions::nic_core`]) and runs the application on another (pinned
//! to [`TrialOptions::app_core`]), warms up, then measures for
//! [`TrialOptions::duration`]:
//!
//! | app | load | unit |
//! |---|---|---|
//! | Maglev | the NIC's built-in generator (closed loop, `generator_window` frames in flight); rewritten frames go back to it | packets |
//! | telemetry | the built-in generator, open loop (as fast as the engine makes frames; the surplus is dropped at the pipe or ring and counted in `nic_drops`) | packets |
//! | KV | by default the built-in generator replaying [`KV_REPLAY_FRAMES`] prepared request frames with `kv_window` frames in flight, the store preloaded directly ([`KvLoad::Generator`]); or [`KvLoadClient`] on a second port cabled to the server's (closed loop of `kv_window` request frames, after a preload of every key through the NIC; it also measures latency: [`KvLoad::Client`]) | requests |
//! | log monitor | a seeded log cut into `log_payload`-byte UDP payloads (lines split across packets, as [`LogSource`] cuts them): by default replayed by the built-in generator, open loop like telemetry ([`LogLoad::Generator`]); or sent by a [`LogSource`] client on a second port cabled to the monitor's, with a credit window ([`LogLoad::Client`]) | packets (and Gb/s of log text) |
//!
//! The KV and log clients, when chosen, need a thread of their
//! own to be out of the way; with [`TrialOptions::client_core`] unset (the default, for
//! 2-core machines) the client is polled on the application's thread
//! between application polls. The application's busy time excludes the
//! client's, so `app_busy_ns_per_unit` is the application's own cost, but
//! the rate is then a lower bound for the application alone (it shares its
//! core), and [`TrialResult::load`] says so.
//!
//! The result carries the rate, the application's busy time per unit
//! (time spent in polls that found work, divided by the units), the NIC
//! engine's, the drops by cause, and, for KV, round-trip latency
//! percentiles measured by the client.
//!
//! ```no_run
//! use bench::app_trial::{run_trial, AppKind, TrialOptions};
//! use enso_apps::nic::Interface;
//! let opts = TrialOptions::default();
//! for iface in Interface::ALL {
//!     let r = run_trial(AppKind::Maglev, iface, &opts)?;
//!     println!("{iface}: {:.2} Mpps, {:.1} ns/packet", r.rate / 1e6, r.app_busy_ns_per_unit);
//! }
//! # Ok::<(), bench::app_trial::TrialError>(())
//! ```

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use enso::app::{DriverError, EnsoDriver, PacketizedDriver};
use enso::{AttachError, Device, DeviceOptions};
use nic_emu::{
    DeviceConfig, GeneratorConfig, Nic, NotificationMode, RunOptions, SizeSpec, Stats, VerifyLevel,
    WireConfig,
};

use enso_apps::kv::{KvClient, KvServer, ServerConfig, StoreConfig, WorkloadConfig};
use enso_apps::load::{KvLoadClient, KvLoadConfig, LatencyStats, LoadError, LogSource, PipeClient};
use enso_apps::logmon::{builtin_for, LogGenerator, LogMonitor, LogPatterns, LogScanner};
use enso_apps::maglev::{Backend, Maglev, MaglevConfig};
use enso_apps::nic::{
    add_fallback_rx_pipes, AppDriver, EnsoReplyDriver, EnsoStreamDriver, Interface,
    PacketizedReplyDriver,
};
use enso_apps::packet::UDP_PAYLOAD_OFFSET;
use enso_apps::telemetry::{NitroConfig, Telemetry};

mod measure;
use measure::*;

/// The applications of the paper's evaluation (echo has its own demo).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum AppKind {
    /// Maglev load balancer.
    Maglev,
    /// NitroSketch telemetry.
    Telemetry,
    /// MICA-like key-value store.
    Kv,
    /// Log monitor.
    Logmon,
}

impl AppKind {
    /// All of them, in the paper's table order.
    pub const ALL: [AppKind; 4] = [
        AppKind::Maglev,
        AppKind::Telemetry,
        AppKind::Kv,
        AppKind::Logmon,
    ];

    /// The name used on command lines and in results.
    pub fn name(self) -> &'static str {
        match self {
            AppKind::Maglev => "maglev",
            AppKind::Telemetry => "telemetry",
            AppKind::Kv => "kv",
            AppKind::Logmon => "logmon",
        }
    }
}

impl std::fmt::Display for AppKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Settings of a trial. The defaults are the paper's workloads scaled to a
/// short run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TrialOptions {
    /// Measured time.
    pub duration: Duration,
    /// Time run before measuring (after the KV preload).
    pub warmup: Duration,
    /// Core of the NIC engine thread.
    pub nic_core: Option<usize>,
    /// Core of the application thread.
    pub app_core: Option<usize>,
    /// Core of the KV / log-monitor client; `None` polls it on the
    /// application's thread.
    pub client_core: Option<usize>,
    /// Pipes (Ensō) or queues (packetized) the application serves.
    pub pipes: u32,
    /// Frames per `rx_burst` on the packetized interface.
    pub burst: usize,
    /// Ensō notification mode of the device.
    pub notification_mode: NotificationMode,
    /// Directory of the device (default `/dev/shm`).
    pub dir: Option<PathBuf>,
    /// Generator frame size (Maglev, telemetry), bytes without FCS.
    pub frame_size: usize,
    /// Generator flows (Maglev: 16 is the paper's "cached" workload).
    pub flows: u32,
    /// Maglev: frames in flight at most between generator and NIC (capped,
    /// on both interfaces alike, at what the packetized rings hold:
    /// `pipes` x 4032). The default is that cap for one pipe: a closed
    /// loop as close to the paper's open-loop load as the baseline's rings
    /// allow without dropping. With 2048 the window, not the NIC or the
    /// application, limited the Ensō side (68-73% busy app, 30 Mpps with
    /// the vCPUs close, 21-24 apart, against 35 and 30-33 at 4000); the
    /// packetized side did not change.
    pub generator_window: u64,
    /// Frames the NIC's built-in generator sends per engine step (every
    /// app whose load it makes; [`nic_emu::GeneratorConfig::burst`]).
    pub generator_burst: usize,
    /// Line rate the built-in generator paces its frames to, Gb/s on the
    /// wire (each frame plus 24 B of FCS, preamble and gap); 0 sends as
    /// fast as the engine makes frames.
    pub line_rate_gbps: f64,
    /// Maglev backends.
    pub maglev_backends: usize,
    /// Telemetry sketch.
    #[serde(skip)]
    pub sketch: NitroConfig,
    /// KV: distinct keys (all preloaded).
    pub kv_keys: u64,
    /// KV: share of GETs (the paper: 0.95 or 0.5).
    pub kv_get_ratio: f64,
    /// KV: requests per request frame.
    pub kv_batch: usize,
    /// KV: request frames in flight.
    pub kv_window: usize,
    /// Log monitor: UDP payload bytes per packet.
    pub log_payload: usize,
    /// Log monitor: bytes of log generated (then repeated).
    pub log_bytes: usize,
    /// Log monitor: packets sent and not yet handled at most (the client's
    /// credit window).
    pub log_window: u64,
    /// Log monitor on Ensō: read a stream pipe (the bytestream, no copy)
    /// instead of packets.
    pub log_stream: bool,
    /// Log monitor: the services whose built-in patterns are matched (see
    /// [`enso_apps::logmon::SERVICES`]); empty for all of them.
    pub log_services: Vec<String>,
    /// Log monitor: share of the generated log's lines that are events the
    /// built-in patterns detect (0..=1; [`LogGenerator::new`]'s 0.3 by
    /// default). Most lines of a real log are routine; the fewer events,
    /// the cheaper the matching and the larger the interface's share.
    pub log_event_share: f64,
    /// Log monitor: where the log comes from.
    pub log_load: LogLoad,
    /// KV: where the requests come from.
    pub kv_load: KvLoad,
    /// How the emulated NIC uses its CPU core ([`nic_emu::HostTuning`]),
    /// recorded flat beside the trial's other settings.
    #[serde(flatten)]
    pub tuning: nic_emu::HostTuning,
}

/// Where the log monitor's traffic comes from.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum LogLoad {
    /// The NIC's built-in generator replays the log cut into packets, as
    /// for Maglev and telemetry: the application has its core to itself.
    /// Open loop: what the application cannot take is dropped at the pipe
    /// or ring and counted (`nic_drops`); the monitor then sees a log with
    /// whole packets missing, which changes match counts, not the rate.
    #[default]
    Generator,
    /// A client sends the log through a TX pipe on a second port cabled to
    /// the monitor's, with a credit window (nothing dropped). Without
    /// `client_core` it is polled on the application's core, so the rate is
    /// a lower bound for the application alone.
    #[value(
        help = "A client sends the log through a TX pipe on a second port cabled to the \
                monitor's, with a credit window (nothing dropped). Unless it has a core of its \
                own (app-trial --client-core), it is polled on the application's core, so the \
                rate is a lower bound for the application alone"
    )]
    Client,
}

/// Where the key-value store's requests come from.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum KvLoad {
    /// The NIC's built-in generator replays prepared request frames (the
    /// workload's key and operation sequence, [`KV_REPLAY_FRAMES`] frames,
    /// over and over) with `kv_window` frames in flight, and counts the
    /// responses that come back: the server has its core to itself, as
    /// Maglev and telemetry do. Every key is stored before the trial (the
    /// preload goes straight into the store). No latency is measured.
    #[default]
    #[value(
        help = "The NIC's built-in generator replays 16384 prepared request frames (the \
                workload's keys and operations) over and over, with a window of frames in \
                flight (512 by default), and counts the responses: the server has its core to itself, as Maglev \
                and telemetry do. Every key is stored before the trial. No latency is measured"
    )]
    Generator,
    /// [`KvLoadClient`] on a second port cabled to the server's: it
    /// preloads every key through the NIC, checks every response and
    /// measures round-trip latency. Without `client_core` it is polled on
    /// the server's core, so the rate is a lower bound for the server alone.
    #[value(
        help = "A client on a second port cabled to the server's preloads every key through \
                the NIC, checks every response and measures round-trip latency. Unless it has \
                a core of its own (app-trial --client-core), it is polled on the server's core, \
                so the rate is a lower bound for the server alone"
    )]
    Client,
}

/// The command-line knobs for where trial traffic comes from and how the
/// emulated NIC treats its caches, shared by `app-trial` and `bench apps`.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct LoadArgs {
    /// Log monitor: where the log comes from: the NIC's built-in generator
    /// replaying it (the monitor alone on its core, as Maglev and telemetry
    /// are) or a client on the monitor's core with a credit window.
    #[arg(long, value_enum, default_value = "generator")]
    pub log_load: LogLoad,
    /// KV: where the requests come from (the NIC's generator replaying a
    /// prepared request sequence, or a client through a cabled port, which
    /// also measures latency).
    #[arg(long, value_enum, default_value = "generator")]
    pub kv_load: KvLoad,
    /// Frames the NIC's built-in generator sends per engine step, on both
    /// interfaces alike (1..=4096).
    #[arg(long, default_value_t = DEFAULT_GENERATOR_BURST, value_parser = parse_generator_burst)]
    pub generator_burst: usize,
    /// Line rate the NIC's built-in generator paces its frames to, Gb/s on
    /// the wire (frames plus 24 B each of FCS, preamble and gap), on both
    /// interfaces alike; 0 sends as fast as the engine makes frames.
    #[arg(long, default_value_t = DEFAULT_LINE_RATE_GBPS, value_parser = parse_line_rate)]
    pub line_rate_gbps: f64,
    /// How the emulated NIC uses its CPU core (the same flags as `nic-emu
    /// run`'s host tuning).
    #[command(flatten)]
    #[serde(flatten)]
    pub tuning: nic_emu::args::HostTuningArgs,
}

/// Default of [`TrialOptions::line_rate_gbps`]: unpaced. Pacing at 100
/// GbE (the paper's link) left telemetry's rates as they were (the engine
/// makes fewer 64 B frames than that) but made the packetized log monitor
/// slower: postfix patterns over the 2% log, vCPUs close, 5.5-5.9 Mpps
/// paced against 6.6-6.8 unpaced in two of three alternations (4.7 in the
/// third), its cost per packet up from ~150 to ~175 ns, while Ensō stayed
/// at 6.5-7.0. The baseline gets the load it runs fastest with.
pub const DEFAULT_LINE_RATE_GBPS: f64 = 0.0;

fn parse_line_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(g) if g.is_finite() && g >= 0.0 => Ok(g),
        _ => Err(format!(
            "{s}: must be a number of Gb/s, at least 0 (0: unpaced)"
        )),
    }
}

/// The generator's frame rate at `gbps` on the wire for frames of
/// `mean_len` bytes in memory on average; `None` (unpaced) for 0.
fn line_rate_pps(gbps: f64, mean_len: f64) -> Option<f64> {
    let wire = mean_len + f64::from(pcie_model::model::ETH_OVERHEAD_BYTES);
    (gbps > 0.0).then(|| gbps * 1e9 / (wire * 8.0))
}

/// Mean length of replayed frames.
fn mean_len(frames: &nic_emu::ReplayFrames) -> f64 {
    let f = frames.frames();
    f.iter().map(|x| x.len()).sum::<usize>() as f64 / f.len().max(1) as f64
}

/// Default of [`TrialOptions::generator_burst`]: the burst at which both
/// interfaces ran fastest. Each engine step has costs of its own (the
/// clock, register and TX polls, closing runs) that a real NIC does not
/// have, so a larger burst leaves less of the emulator in the numbers, up
/// to where a burst no longer fits the caches. With the vCPUs as sibling
/// hyperthreads (`app-trial --generator-burst B`, Mpps, packetized and
/// Ensō): Maglev 40 and 68 at 32, 43 and 66 at 64, 47 and 66 at 128, 44
/// and 63 at 256, 15 and 65 at 512; telemetry 51 and 110 at 32, 55 and
/// 122 at 64, 57 and 130 at 128, 59 and 96 at 256, 20 and 72 at 512.
/// Apart, over three alternations of 32 and 128: telemetry 21.3-21.7 and
/// 58-66 at 32, 22.2-23.8 and 78-87 at 128; Maglev 16.4-17.5 and 65-66 at
/// 32, 15.4-16.8 and 64-66 at 128 (the one case a little slower at 128).
pub const DEFAULT_GENERATOR_BURST: usize = 128;

fn parse_generator_burst(s: &str) -> Result<usize, String> {
    let b: usize = s.parse().map_err(|e| format!("{s}: {e}"))?;
    nic_emu::config::check_burst(b).map_err(|e| e.to_string())
}

impl LoadArgs {
    /// `opts` with these settings.
    pub fn apply(&self, opts: TrialOptions) -> TrialOptions {
        TrialOptions {
            log_load: self.log_load,
            kv_load: self.kv_load,
            tuning: self.tuning.tuning(),
            generator_burst: self.generator_burst,
            line_rate_gbps: self.line_rate_gbps,
            ..opts
        }
    }
}

/// Request frames the generator replays for [`KvLoad::Generator`].
/// (The `--kv-load generator` help text gives this number too.)
pub const KV_REPLAY_FRAMES: usize = 16_384;

impl Default for TrialOptions {
    fn default() -> Self {
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let (nic_core, app_core) = match cores.as_slice() {
            [a, b, ..] => (Some(a.id), Some(b.id)),
            _ => (None, None),
        };
        Self {
            duration: Duration::from_secs(1),
            warmup: Duration::from_millis(300),
            nic_core,
            app_core,
            client_core: None,
            pipes: 1,
            burst: 32,
            notification_mode: NotificationMode::Reactive,
            dir: None,
            frame_size: 64,
            flows: 16,
            generator_window: 4032,
            generator_burst: DEFAULT_GENERATOR_BURST,
            line_rate_gbps: DEFAULT_LINE_RATE_GBPS,
            maglev_backends: 1000,
            sketch: NitroConfig::count_min(),
            kv_keys: 1 << 16,
            kv_get_ratio: 0.95,
            kv_batch: 4,
            kv_window: 512,
            log_payload: 1024,
            log_bytes: 4 << 20,
            log_event_share: enso_apps::logmon::DEFAULT_EVENT_SHARE,
            log_window: 512,
            log_stream: true,
            log_services: Vec::new(),
            log_load: LogLoad::Generator,
            kv_load: KvLoad::Generator,
            tuning: nic_emu::HostTuning::default(),
        }
    }
}

/// What a trial measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TrialResult {
    /// The application.
    pub app: AppKind,
    /// The interface.
    pub interface: Interface,
    /// Ensō only: whether the log monitor read a stream pipe.
    pub stream: bool,
    /// Measured seconds.
    pub seconds: f64,
    /// What `units` counts: "packets" or "requests" (KV).
    pub unit: &'static str,
    /// Units the application handled while measuring.
    pub units: u64,
    /// Units per second.
    pub rate: f64,
    /// Packets the application received while measuring.
    pub packets: u64,
    /// Gb/s of what the application received: frame bytes, or for the log
    /// monitor the log text.
    pub gbps: f64,
    /// Application thread: time in polls that found work, per unit.
    pub app_busy_ns_per_unit: f64,
    /// Application thread: busy share of the measured time.
    pub app_busy_fraction: f64,
    /// NIC engine: time in steps that found work, per unit.
    pub nic_busy_ns_per_unit: f64,
    /// RX notifications the NIC wrote while measuring, per unit (Ensō:
    /// one per batch the application is told of; every attached
    /// application counted).
    pub rx_notifications_per_unit: f64,
    /// Register writes the NIC applied while measuring, per unit (head
    /// updates, doorbells, TX notifications' tails).
    pub register_writes_per_unit: f64,
    /// Frames the application dropped or could not answer.
    pub app_dropped: u64,
    /// Frames the NIC dropped while measuring, by cause (only causes seen).
    pub nic_drops: BTreeMap<String, u64>,
    /// KV: round-trip latency measured by the client while measuring.
    pub latency: Option<LatencyStats>,
    /// Where the load came from and which threads were busy.
    pub load: String,
    /// Busy threads the trial needed (the NIC engine included).
    pub busy_threads: u32,
    /// The NIC's counters at the end (PCIe accounting included).
    #[serde(skip)]
    pub nic: Stats,
}

/// Why a trial could not run.
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    /// The emulated NIC did not start.
    #[error("starting the NIC: {0}")]
    Nic(String),
    /// Attaching to it failed.
    #[error("attaching: {0}")]
    Attach(#[from] AttachError),
    /// A pipe or queue could not be allocated.
    #[error("allocating: {0}")]
    Alloc(#[from] enso::AllocError),
    /// The application's driver failed.
    #[error("application: {0}")]
    Driver(#[from] DriverError),
    /// The client failed.
    #[error("client: {0}")]
    Load(#[from] LoadError),
    /// The application could not be built.
    #[error("configuration: {0}")]
    Config(String),
    /// The NIC did not set up the pipes or queues in time.
    #[error("the NIC did not set up the pipes or queues")]
    SetupTimeout,
}

static TRIALS: AtomicU64 = AtomicU64::new(0);

/// Runs one trial of `app` on `iface`.
pub fn run_trial(
    app: AppKind,
    iface: Interface,
    opts: &TrialOptions,
) -> Result<TrialResult, TrialError> {
    let pipes = opts.pipes.max(1);
    if app == AppKind::Kv && opts.kv_window > enso_apps::load::MAX_WINDOW_FRAMES {
        return Err(LoadError::Window(opts.kv_window).into());
    }
    let cfg = device_config(app, iface, opts)?;
    let nic = Nic::start(
        cfg,
        RunOptions {
            core: opts.nic_core,
            idle_sleep_after: None,
            ..Default::default()
        },
    )
    .map_err(|e| TrialError::Nic(e.to_string()))?;
    let nic = &nic;
    let result = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name(format!("{app}-{iface}"))
            .spawn_scoped(s, move || {
                if let Some(c) = opts.app_core {
                    enso_apps::cli::pin_current(c);
                }
                app_thread(nic, app, iface, pipes, opts)
            })
            .expect("spawn the application thread")
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    });
    let mut r = result?;
    r.nic = nic.stats();
    Ok(r)
}

pub(crate) fn device_config(
    app: AppKind,
    iface: Interface,
    opts: &TrialOptions,
) -> Result<DeviceConfig, TrialError> {
    let name = format!(
        "apps-{app}-{iface}-{}-{}",
        std::process::id(),
        TRIALS.fetch_add(1, Ordering::Relaxed)
    );
    let wire = match app {
        AppKind::Maglev | AppKind::Telemetry => WireConfig::Generator(GeneratorConfig {
            sizes: SizeSpec::Fixed(opts.frame_size),
            flows: opts.flows.max(1),
            verify: VerifyLevel::Sequence,
            paused: true,
            max_in_flight: (app == AppKind::Maglev).then_some(generator_window(opts)),
            burst: opts.generator_burst,
            rate_pps: line_rate_pps(opts.line_rate_gbps, opts.frame_size as f64),
            ..Default::default()
        }),
        AppKind::Logmon if opts.log_load == LogLoad::Generator => {
            let frames = log_frames(opts)?;
            WireConfig::Generator(GeneratorConfig {
                verify: VerifyLevel::Sequence,
                paused: true,
                rate_pps: line_rate_pps(opts.line_rate_gbps, mean_len(&frames)),
                replay: Some(frames),
                burst: opts.generator_burst,
                ..Default::default()
            })
        }
        AppKind::Kv if opts.kv_load == KvLoad::Generator => {
            let frames = kv_frames(opts)?;
            WireConfig::Generator(GeneratorConfig {
                verify: VerifyLevel::Sequence,
                paused: true,
                rate_pps: line_rate_pps(opts.line_rate_gbps, mean_len(&frames)),
                replay: Some(frames),
                max_in_flight: Some(kv_generator_window(opts)),
                burst: opts.generator_burst,
                ..Default::default()
            })
        }
        AppKind::Kv | AppKind::Logmon => WireConfig::Cable {
            peer: 1,
            delay_ns: 0,
        },
    };
    let cabled = matches!(wire, WireConfig::Cable { .. });
    let mut cfg = DeviceConfig::new(name, wire);
    if cabled {
        cfg.ports.push(WireConfig::Cable {
            peer: 0,
            delay_ns: 0,
        });
    }
    if let Some(d) = &opts.dir {
        cfg.dir = d.clone();
    }
    cfg.notification_mode = opts.notification_mode;
    cfg.tuning = opts.tuning;
    let _ = iface;
    Ok(cfg)
}

/// The log monitor's log (seed 1) of a trial.
pub(crate) fn trial_log(opts: &TrialOptions) -> Vec<u8> {
    LogGenerator::with_match_share(1, opts.log_event_share).generate(opts.log_bytes.max(1))
}

/// The log monitor's log, cut into the frames the log client would send
/// (one pass; the generator repeats them).
fn log_frames(opts: &TrialOptions) -> Result<nic_emu::ReplayFrames, TrialError> {
    let mut src = LogSource::new(trial_log(opts), opts.log_payload, false);
    let mut buf = vec![0u8; enso_apps::packet::MAX_FRAME_LEN];
    let mut frames = Vec::new();
    while let Some(n) = src
        .next_frame(&mut buf)
        .map_err(|e| TrialError::Config(e.to_string()))?
    {
        frames.push(buf[..n].into());
    }
    nic_emu::ReplayFrames::new(frames).map_err(|e| TrialError::Config(e.to_string()))
}

/// The KV workload of a trial.
fn kv_workload(opts: &TrialOptions) -> WorkloadConfig {
    WorkloadConfig {
        keys: opts.kv_keys.max(1),
        get_ratio: opts.kv_get_ratio,
        batch: opts.kv_batch,
        ..Default::default()
    }
}

/// The request frames the KV client would send after its preload, for the
/// generator to replay.
fn kv_frames(opts: &TrialOptions) -> Result<nic_emu::ReplayFrames, TrialError> {
    let cfg = |e: &dyn std::fmt::Display| TrialError::Config(e.to_string());
    let mut client = KvClient::new(kv_workload(opts)).map_err(|e| cfg(&e))?;
    let mut buf = vec![0u8; enso_apps::packet::MAX_FRAME_LEN];
    let mut frames = Vec::with_capacity(KV_REPLAY_FRAMES);
    for _ in 0..KV_REPLAY_FRAMES {
        let n = client.next_frame(&mut buf).map_err(|e| cfg(&e))?;
        frames.push(buf[..n].into());
    }
    nic_emu::ReplayFrames::new(frames).map_err(|e| TrialError::Config(e.to_string()))
}

/// The KV generator's in-flight window: `kv_window`, at most what the
/// packetized rings hold (as for Maglev), on both interfaces alike.
fn kv_generator_window(opts: &TrialOptions) -> u64 {
    generator_window(&TrialOptions {
        generator_window: opts.kv_window as u64,
        ..opts.clone()
    })
}

/// Stores every key of the workload in `server` (the client's preload,
/// handed to the server directly); fails if the server refused any.
pub(crate) fn kv_preload(server: &mut KvServer, opts: &TrialOptions) -> Result<(), TrialError> {
    let cfg = |e: &dyn std::fmt::Display| TrialError::Config(e.to_string());
    let mut client = KvClient::new(kv_workload(opts)).map_err(|e| cfg(&e))?;
    let mut req = vec![0u8; enso_apps::packet::MAX_FRAME_LEN];
    let mut resp = vec![0u8; enso_apps::packet::MAX_FRAME_LEN];
    while let Some(n) = client.next_preload_frame(&mut req).map_err(|e| cfg(&e))? {
        server
            .handle(&req[..n], &mut resp)
            .map_err(|e| TrialError::Config(format!("KV preload refused: {e:?}")))?;
    }
    Ok(())
}

/// RX descriptor ring entries of the packetized trials (the paper's DPDK
/// baseline used 8192; `bench echo` uses 4096).
const RX_RING: u32 = 4096;
/// TX descriptor ring entries of the packetized trials: as many as RX, so
/// that Maglev's in-flight window, which both rings hold, never finds the TX
/// ring full (the driver drops what does not fit, as DPDK applications do;
/// with 1024 it dropped dozens of frames per trial). The paper's was 1024,
/// with an open-loop load.
const TX_RING: u32 = 4096;

/// Maglev's in-flight window, the same on both interfaces: at most what the
/// packetized RX rings can hold posted (a ring keeps one refill block of 32
/// unposted), so neither interface drops for want of room.
fn generator_window(opts: &TrialOptions) -> u64 {
    // The packetized RX ring keeps one block unposted and re-arms in blocks,
    // so up to a block more may be waiting for a refill: leave both out. The
    // TX ring is reclaimed in blocks too.
    use enso::packetized::{RX_FREE_THRESH, TX_RS_THRESH};
    let per_queue = (RX_RING - 2 * RX_FREE_THRESH).min(TX_RING - 2 * TX_RS_THRESH);
    let posted = u64::from(opts.pipes.max(1)) * u64::from(per_queue);
    opts.generator_window.clamp(1, posted)
}

pub(crate) fn app_options(iface: Interface, pipes: u32, tx_pipe: bool) -> DeviceOptions {
    match iface {
        Interface::Enso => DeviceOptions {
            pipes,
            tx_pipes: u32::from(tx_pipe),
            ..Default::default()
        },
        Interface::Packetized => DeviceOptions {
            pipes: 0,
            tx_pipes: 0,
            queues: pipes,
            rx_ring: RX_RING,
            tx_ring: TX_RING,
            // Every ring full, and as much again of TX in the pool's caches.
            pool_buffers: pipes * (RX_RING + 2 * TX_RING),
            ..Default::default()
        },
    }
}

fn client_options() -> DeviceOptions {
    DeviceOptions {
        pipes: 1,
        tx_pipes: 1,
        ..Default::default()
    }
}

/// Waits until the NIC has installed `n` fallback targets.
fn wait_for_setup(nic: &Nic, n: usize) -> Result<(), TrialError> {
    let t0 = Instant::now();
    while nic.stats().fallback_pipes < n {
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(TrialError::SetupTimeout);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

pub(crate) fn backends(n: usize) -> Vec<Backend> {
    (0..n.max(1))
        .map(|i| {
            Backend::new(
                format!("backend-{i}"),
                Ipv4Addr::from(0xC0A8_0000 + i as u32 + 1),
            )
        })
        .collect()
}

#[cfg(test)]
mod help_tests {
    use clap::ValueEnum;

    use super::*;

    /// The load choices' help, as `--kv-load` and `--log-load` show it.
    fn helps<E: ValueEnum>() -> Vec<String> {
        E::value_variants()
            .iter()
            .map(|v| {
                v.to_possible_value()
                    .and_then(|p| p.get_help().map(|h| h.to_string()))
                    .unwrap_or_default()
            })
            .collect()
    }

    #[test]
    fn load_help_speaks_of_options_not_of_the_code() {
        let all: Vec<String> = [helps::<KvLoad>(), helps::<LogLoad>()].concat();
        assert_eq!(all.len(), 4);
        for h in &all {
            assert!(!h.is_empty());
            for code in ["[`", "client_core", "kv_window", "KvLoadClient"] {
                assert!(!h.contains(code), "{code} in {h:?}");
            }
        }
        assert!(all[0].contains(&KV_REPLAY_FRAMES.to_string()), "{}", all[0]);
        assert!(all[0].contains(&TrialOptions::default().kv_window.to_string()));
    }

    #[test]
    fn the_host_tuning_group_reaches_the_trial() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            load: LoadArgs,
        }
        let cli = Cli::try_parse_from(["x", "--register-poll-ns", "9", "--keep-tx-lines"]).unwrap();
        let t = cli.load.apply(TrialOptions::default()).tuning;
        assert_eq!(t.register_poll_ns, 9);
        assert!(!t.evict_tx_lines);
        let rest = nic_emu::HostTuning {
            register_poll_ns: 9,
            evict_tx_lines: false,
            ..nic_emu::HostTuning::default()
        };
        assert_eq!(t, rest);
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(
            cli.load.apply(TrialOptions::default()).tuning,
            nic_emu::HostTuning::default()
        );
    }
}
