//! The emulated NIC as a two-core experiment.
//!
//! A [`Rig`] is one device (`nic_emu::Nic`) whose port 0 is wired to the
//! NIC's built-in traffic generator, and one application attached to it
//! through either interface: Ensō pipes ([`enso::EnsoDriver`]) or the
//! packetized descriptor rings ([`enso::PacketizedDriver`]). The NIC engine
//! thread (which also runs the generator) is pinned to side A of the
//! placement, the application thread to side B: two busy threads on two
//! cores, nothing else.
//!
//! The device lives as long as the rig, so trials are short: a trial starts
//! the application thread, releases the generator, lets it run, pauses it,
//! waits until everything in flight has come back (or was dropped and
//! counted), stops the application thread and takes counter deltas. Between
//! trials both cores are idle: the application thread has exited and the
//! engine sleeps between empty steps.
//!
//! Sizes are wire sizes with the 4-byte FCS, as everywhere in this crate: a
//! 64 B packet is a 60-byte frame in memory (the generator's
//! `SizeSpec::Fixed(60)`), and `TrialResult::bytes` counts those 60.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use enso::app::{DriverError, PacketHandler, Verdict};
use enso::{Device, DeviceOptions, EnsoDriver, PacketizedDriver};
use enso_apps::echo::TestFrameEcho;
use nic_emu::{
    DeviceConfig, GeneratorConfig, HostTuning, Nic, NotificationMode, RunOptions, SizeSpec, Stats,
    VerifyLevel, WireConfig,
};
use serde::{Deserialize, Serialize};

use crate::contention::{self, Preemption, PreemptionCounter, StealCounter};
use crate::frames;
use crate::interleave::{TrialResult, Variant};
use crate::placement::{Placement, Side};
use crate::refring::Mode;

mod app;
pub use app::*;

/// Which application interface a rig uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Interface {
    /// Ensō pipes and notifications.
    Enso,
    /// Descriptor rings and a buffer pool (the DPDK-shaped baseline).
    Packetized,
}

impl Interface {
    /// Both, Ensō first.
    pub const BOTH: [Interface; 2] = [Interface::Enso, Interface::Packetized];

    /// The name used in results.
    pub fn name(self) -> &'static str {
        match self {
            Interface::Enso => "enso",
            Interface::Packetized => "packetized",
        }
    }
}

impl std::fmt::Display for Interface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Threads of the rig the engine's thread name is derived from; kept short
/// because the kernel keeps 15 bytes of a thread name.
const ENGINE_SUFFIX: &str = "-engine";

/// How a rig is built.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RigConfig {
    /// The application's interface.
    pub interface: Interface,
    /// `echo`: the application sends every frame back (the generator counts
    /// what returns); `rx`: it receives, touches and frees every frame.
    pub mode: Mode,
    /// Packet size on the wire with FCS (64..=1518); frames are 4 B shorter.
    pub wire_size: usize,
    /// Pipes (Ensō) or RSS queues (packetized) the application uses.
    pub pipes: u32,
    /// UDP flows the generator cycles through (spread over pipes by hash).
    pub flows: u32,
    /// Most frames sent but not back (echo); `None` for no limit.
    pub window: Option<u64>,
    /// Generator frames per engine step at most.
    pub burst: usize,
    /// Generator rate; `None` as fast as the engine goes.
    pub rate_pps: Option<f64>,
    /// Ensō notification mode (the packetized interface ignores it).
    pub notification_mode: NotificationMode,
    /// Emulated one-way interconnect latency, ns.
    pub interconnect_latency_ns: u64,
    /// How the emulation uses its CPU core ([`nic_emu::HostTuning`]),
    /// recorded flat beside the rig's other settings.
    #[serde(flatten)]
    pub tuning: HostTuning,
    /// Packetized: RX descriptor ring entries per queue.
    pub rx_ring: u32,
    /// Packetized: TX descriptor ring entries per queue.
    pub tx_ring: u32,
    /// Packetized: frames per `rx_burst`.
    pub app_burst: usize,
    /// Count the application thread's hardware cache events
    /// ([`crate::perf`]) during the measured window.
    #[serde(default)]
    pub perf_counters: bool,
    /// The generator stamps frames and records round-trip times.
    #[serde(default)]
    pub timestamps: bool,
    /// Ensō only: the application binds one flow rule per generator flow
    /// (UDP destination address and port, flow `f` to pipe `f % pipes`)
    /// and has no fallback pipes, so every frame is looked up in the NIC's
    /// flow table and one that no rule claims is dropped (`no_match`).
    #[serde(default)]
    pub flow_rules: bool,
    /// What the engine and the application do without work.
    #[serde(default)]
    pub idle: RigIdle,
}

/// What a rig's engine and application do without work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RigIdle {
    /// The engine parks as a device does by default (after
    /// [`nic_emu::device::DEFAULT_PARK_AFTER`]); the application spins.
    #[default]
    EngineParks,
    /// Neither parks: both poll all the time.
    Spin,
    /// Both park, as the servers' `--idle park`: the engine after
    /// [`enso::PARK_AFTER`] without work, the application waits for data
    /// ([`enso::Device::wait`]) after as long without any.
    Park,
}

impl RigConfig {
    /// Full-speed echo of `wire_size` packets over `interface` with the
    /// defaults of the throughput experiments: 2 pipes, 16 flows, a window
    /// of 1024 frames, generator bursts of 32, 4096-entry RX rings.
    pub fn new(interface: Interface, mode: Mode, wire_size: usize) -> Self {
        RigConfig {
            interface,
            mode,
            wire_size,
            pipes: 2,
            flows: 16,
            window: Some(1024),
            burst: 32,
            rate_pps: None,
            notification_mode: NotificationMode::Reactive,
            interconnect_latency_ns: 0,
            tuning: HostTuning::default(),
            rx_ring: 4096,
            tx_ring: 1024,
            app_burst: 32,
            perf_counters: false,
            timestamps: false,
            flow_rules: false,
            idle: RigIdle::EngineParks,
        }
    }

    /// Frame bytes in memory (no FCS).
    pub fn frame_len(&self) -> usize {
        frames::frame_len_for_wire_size(self.wire_size)
    }

    /// Checks sizes and counts.
    pub fn check(&self) -> Result<(), String> {
        frames::check_wire_size(self.wire_size)?;
        if self.pipes == 0 || self.flows == 0 || self.burst == 0 || self.app_burst == 0 {
            return Err("pipes, flows and bursts must be at least 1".into());
        }
        if self.window == Some(0) {
            return Err("a window of 0 frames sends nothing".into());
        }
        if self.rate_pps.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return Err("the rate must be positive".into());
        }
        if self.flow_rules {
            if self.interface != Interface::Enso {
                return Err(
                    "flow rules steer to Ensō pipes: the packetized interface has RSS queues"
                        .into(),
                );
            }
            if self.flows > enso::MAX_FLOW_RULES {
                return Err(format!(
                    "one rule per flow: at most {} flows (an application's quota of rules)",
                    enso::MAX_FLOW_RULES
                ));
            }
        }
        self.device("check").validate().map_err(|e| e.to_string())
    }

    /// The generator wired to port 0.
    pub fn generator(&self) -> GeneratorConfig {
        GeneratorConfig {
            sizes: SizeSpec::Fixed(self.frame_len()),
            flows: self.flows,
            rate_pps: self.rate_pps,
            max_in_flight: match self.mode {
                Mode::Echo => self.window,
                // Nothing comes back: a window would stop it at once.
                Mode::Rx => None,
            },
            verify: VerifyLevel::Sequence,
            burst: self.burst,
            paused: true,
            timestamps: self.timestamps,
            ..Default::default()
        }
    }

    /// The device: port 0 wired to [`RigConfig::generator`].
    pub fn device(&self, name: &str) -> DeviceConfig {
        let mut cfg = DeviceConfig::new(name, WireConfig::Generator(self.generator()));
        cfg.notification_mode = self.notification_mode;
        cfg.interconnect_latency_ns = self.interconnect_latency_ns;
        cfg.tuning = self.tuning;
        cfg
    }

    fn device_options(&self) -> DeviceOptions {
        match self.interface {
            Interface::Enso => DeviceOptions {
                pipes: self.pipes,
                ..Default::default()
            },
            Interface::Packetized => DeviceOptions {
                pipes: 0,
                tx_pipes: 0,
                queues: self.pipes,
                rx_ring: self.rx_ring,
                tx_ring: self.tx_ring,
                // Every RX ring full, plus what sits in TX rings.
                pool_buffers: self.pipes * (self.rx_ring + self.tx_ring),
                ..Default::default()
            },
        }
    }
}

/// The counters of one trial: NIC deltas over the measured window (from
/// releasing the generator to pausing it) and over the whole trial
/// (drain included), and the application's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RigTrial {
    /// Measured window, ns.
    pub elapsed_ns: u64,
    /// Packets that count: echoed back to the generator (echo) or handled
    /// by the application (rx), in the window.
    pub packets: u64,
    /// Their frame bytes (no FCS).
    pub bytes: u64,
    /// Generator frames sent in the window.
    pub sent: u64,
    /// Engine busy time in the window.
    pub nic_busy_ns: u64,
    /// Application busy time in the window.
    pub app_busy_ns: u64,
    /// RX notifications the NIC wrote in the window.
    pub rx_notifications: u64,
    /// TX notifications the NIC read in the window.
    pub tx_notifications: u64,
    /// Frames the NIC put into pipes or RX queues in the window.
    pub delivered: u64,
    /// Drops by cause over the whole trial.
    pub drops: BTreeMap<String, u64>,
    /// Frames sent in the trial that never came back and were not counted
    /// as drops (echo; should be 0).
    pub unaccounted: i64,
    /// Whether everything in flight came back or was dropped before the
    /// application stopped.
    pub drained: bool,
    /// PCIe link bytes (up, down) in the window.
    pub pcie_up_bytes: u64,
    /// See `pcie_up_bytes`.
    pub pcie_down_bytes: u64,
    /// Metadata link bytes (both directions) in the window.
    pub pcie_metadata_bytes: u64,
    /// Preemptions of the engine and application threads.
    pub preempted: [Preemption; 2],
    /// Host steal during the trial, ms.
    pub steal_ms: f64,
    /// Whether the application thread was pinned.
    pub app_pinned: bool,
    /// The application thread's hardware counters over the window.
    pub app_perf: Option<crate::perf::Counts>,
    /// Round-trip times the generator measured for frames sent in the
    /// window (those that came back during the drain included).
    pub latency: Option<nic_emu::counters::LatencySummary>,
    /// The NIC's counters at the start and the end of the window, for
    /// experiments that need more than the deltas above.
    #[serde(skip)]
    pub stats: Option<Box<(Stats, Stats)>>,
}

impl RigTrial {
    /// Drops summed over causes.
    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum()
    }

    /// As an interleave trial: busy time as sides "nic" and "app", the rest
    /// as extras.
    pub fn to_trial(&self) -> TrialResult {
        let mut extra: BTreeMap<String, f64> = [
            ("sent", self.sent as f64),
            ("delivered", self.delivered as f64),
            ("rx_notifications", self.rx_notifications as f64),
            ("tx_notifications", self.tx_notifications as f64),
            ("drops", self.total_drops() as f64),
            ("unaccounted", self.unaccounted as f64),
            ("drained", f64::from(u8::from(self.drained))),
            ("pcie_up_bytes", self.pcie_up_bytes as f64),
            ("pcie_down_bytes", self.pcie_down_bytes as f64),
            ("pcie_metadata_bytes", self.pcie_metadata_bytes as f64),
            ("nic_preempted", self.preempted[0].switches as f64),
            ("app_preempted", self.preempted[1].switches as f64),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (cause, n) in &self.drops {
            extra.insert(format!("drop_{cause}"), *n as f64);
        }
        if let Some(p) = &self.app_perf {
            for (k, v) in [
                ("perf_instructions", p.instructions),
                ("perf_l1d_loads", p.l1d_loads),
                ("perf_l1d_misses", p.l1d_misses),
                ("perf_llc_loads", p.llc_loads),
                ("perf_llc_misses", p.llc_misses),
            ] {
                if let Some(v) = v {
                    extra.insert(k.to_string(), v as f64);
                }
            }
        }
        TrialResult {
            packets: self.packets,
            bytes: self.bytes,
            elapsed: Duration::from_nanos(self.elapsed_ns),
            busy_ns: [
                ("nic".to_string(), self.nic_busy_ns),
                ("app".to_string(), self.app_busy_ns),
            ]
            .into(),
            preempted: self.preempted[0].switches + self.preempted[1].switches,
            preempted_ns: self.preempted[0].waited_ns + self.preempted[1].waited_ns,
            steal_ms: self.steal_ms,
            extra,
        }
    }
}

fn delta_drops(a: &Stats, b: &Stats) -> BTreeMap<String, u64> {
    let before = a.drops();
    b.drops()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                v.saturating_sub(*before.get(k).unwrap_or(&0)),
            )
        })
        .collect()
}

/// The flow rule of generator flow `f` (with [`RigConfig::flow_rules`]):
/// its UDP destination address and port, as the NIC matches UDP.
pub fn flow_rule(f: u32) -> enso::FlowRule {
    let t = nic_emu::testframe::TestFrames::flow_tuple(f);
    enso::FlowRule {
        src_ip: 0,
        src_port: 0,
        ..t
    }
}

/// Frames the NIC has put into the application's pipes or RX queues.
fn delivered(s: &Stats) -> u64 {
    s.pipe_sum(|c| c.rx_frames) + s.queue_sum(|c| c.rx_frames)
}

fn returned(s: &Stats) -> (u64, u64, u64) {
    s.generator(0)
        .map_or((0, 0, 0), |g| (g.sent, g.returned, g.returned_bytes))
}

/// A device with a generator and an attached application, reused across
/// trials. See the module documentation.
#[derive(Debug)]
pub struct Rig {
    device: String,
    label: String,
    config: RigConfig,
    placement: Placement,
    nic: Option<Arc<Nic>>,
    /// While the rig is between trials: the engine thread is blocked in a
    /// closure until this sender is dropped (see [`Rig::park`]).
    parked: Option<(std::sync::mpsc::Sender<()>, thread::JoinHandle<()>)>,
    driver: Option<Driver>,
    handler: Option<Handler>,
    engine_tid: Option<u32>,
    error: Option<String>,
    drain_timeout: Duration,
}

/// Devices made by this process so far (names must differ while alive).
static RIGS: AtomicU64 = AtomicU64::new(0);

impl Rig {
    /// Starts the device (engine pinned to side A), attaches the
    /// application and sets up its pipes or queues. The generator stays
    /// paused until a trial.
    pub fn start(label: &str, config: RigConfig, placement: &Placement) -> Result<Rig, String> {
        config.check()?;
        let n = RIGS.fetch_add(1, Ordering::Relaxed);
        // "b<pid>.<n>" plus "-engine" fits the kernel's 15 bytes for a
        // while; beyond that the thread is found by its prefix anyway.
        let name = format!("b{}.{}", std::process::id() % 100_000, n % 100);
        let nic = Nic::start(
            config.device(&name),
            RunOptions {
                core: placement.core(Side::A),
                park_after: match config.idle {
                    RigIdle::EngineParks => RunOptions::default().park_after,
                    RigIdle::Spin => None,
                    RigIdle::Park => Some(enso::PARK_AFTER),
                },
                idle_sleep_after: match config.idle {
                    RigIdle::Spin => None,
                    _ => Some(20_000),
                },
                ..Default::default()
            },
        )?;
        let engine_tid = contention::threads_named(&format!("{name}{ENGINE_SUFFIX}"))
            .first()
            .copied();
        let dev = Device::attach_nic(&nic, config.device_options()).map_err(|e| e.to_string())?;
        let mut driver = match config.interface {
            Interface::Enso if config.flow_rules => {
                let mut d = EnsoDriver::new(dev);
                let mut pipes = Vec::new();
                for _ in 0..config.pipes {
                    let p = match config.mode {
                        Mode::Echo => {
                            let p = d.dev.alloc_rxtx_pipe(false).map_err(|e| e.to_string())?;
                            d.set_port(p, 0);
                            p.rx()
                        }
                        Mode::Rx => d.dev.alloc_rx_pipe(false).map_err(|e| e.to_string())?,
                    };
                    pipes.push(p);
                }
                for f in 0..config.flows {
                    let p = pipes[(f % config.pipes) as usize];
                    d.dev
                        .bind(p, flow_rule(f))
                        .map_err(|e| format!("flow rule of flow {f}: {e}"))?;
                }
                Driver::Enso(d)
            }
            Interface::Enso => {
                let mut d = EnsoDriver::new(dev);
                match config.mode {
                    Mode::Echo => {
                        d.add_fallback_pipes(config.pipes)
                            .map_err(|e| e.to_string())?;
                    }
                    Mode::Rx => {
                        for _ in 0..config.pipes {
                            d.dev.alloc_rx_pipe(true).map_err(|e| e.to_string())?;
                        }
                    }
                }
                Driver::Enso(d)
            }
            Interface::Packetized => {
                let mut d = PacketizedDriver::new(dev, config.app_burst);
                d.add_rss_queues_on(0, config.pipes)
                    .map_err(|e| e.to_string())?;
                Driver::Packetized(d)
            }
        };
        // The configuration travels as TX notifications (Ensō) or register
        // writes: poll until the NIC has installed every fallback target.
        let fallback = if config.flow_rules { 0 } else { config.pipes };
        let t0 = Instant::now();
        while nic.stats().fallback_pipes < fallback as usize {
            let _ = driver.poll(&mut Touch::default());
            if t0.elapsed() > Duration::from_secs(5) {
                return Err("the NIC did not set up the application's pipes".into());
            }
            thread::sleep(Duration::from_micros(200));
        }
        let handler = match config.mode {
            Mode::Echo => Handler::Echo(TestFrameEcho::default()),
            Mode::Rx => Handler::Touch(Touch::default()),
        };
        let mut rig = Rig {
            device: name,
            label: label.to_string(),
            config,
            placement: placement.clone(),
            nic: Some(Arc::new(nic)),
            parked: None,
            driver: Some(driver),
            handler: Some(handler),
            engine_tid,
            error: None,
            drain_timeout: Duration::from_secs(2),
        };
        rig.park();
        Ok(rig)
    }

    /// Blocks the engine thread until the next trial, so it leaves its
    /// core idle: on its own, an idle engine wakes every 50 µs, which
    /// preempts whatever else runs there (the probe, another variant).
    /// The engine runs a closure that waits for a channel to close; a
    /// helper thread carries the (blocking) call. The wait ends by itself
    /// after [`PARK_LIMIT`], before the device's command timeout.
    fn park(&mut self) {
        let Some(nic) = self.nic.as_ref().map(Arc::clone) else {
            return;
        };
        if self.parked.is_some() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let helper = thread::Builder::new()
            .name("rig-park".into())
            .spawn(move || {
                nic.with_engine(move |_| {
                    let _ = rx.recv_timeout(PARK_LIMIT);
                });
            });
        if let Ok(h) = helper {
            self.parked = Some((tx, h));
        }
    }

    /// Lets the engine thread run again (and waits until it does).
    fn unpark(&mut self) {
        if let Some((tx, h)) = self.parked.take() {
            drop(tx);
            let _ = h.join();
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RigConfig {
        &self.config
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.device
    }

    /// The first error a trial ran into (the rig is unusable after it).
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The NIC's counters now.
    pub fn stats(&mut self) -> Option<Stats> {
        self.unpark();
        let s = self.nic.as_ref().map(|n| n.stats());
        self.park();
        s
    }

    /// Runs `f` with the device, its engine running (not parked): to
    /// attach another application beside this one, say, and configure it.
    /// `None` once the device has stopped.
    pub fn with_nic<R>(&mut self, f: impl FnOnce(&Nic) -> R) -> Option<R> {
        self.unpark();
        let r = self.nic.as_deref().map(f);
        self.park();
        r
    }

    /// Runs `f` on the engine thread.
    pub fn with_engine<R: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut nic_emu::Engine) -> R + Send + 'static,
    ) -> Option<R> {
        self.unpark();
        let r = self.nic.as_ref().map(|n| n.with_engine(f));
        self.park();
        r
    }

    /// Runs one trial of about `window`. See the module documentation.
    pub fn trial(&mut self, window: Duration) -> Result<RigTrial, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.unpark();
        let r = self.trial_inner(window);
        self.park();
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }

    fn trial_inner(&mut self, window: Duration) -> Result<RigTrial, String> {
        let nic = self.nic.as_ref().ok_or("the device has stopped")?;
        let mut driver = self.driver.take().ok_or("the application is gone")?;
        let mut handler = self.handler.take().ok_or("the application is gone")?;
        let ctl = Arc::new(Control {
            phase: CachePadded::new(AtomicU8::new(RUN)),
            frames: CachePadded::new(AtomicU64::new(0)),
            dropped: CachePadded::new(AtomicU64::new(0)),
            started: CachePadded::new(AtomicU8::new(0)),
            perf: self.config.perf_counters,
            park: self.config.idle == RigIdle::Park,
        });
        let steal = StealCounter::start();
        let nic_preempted = self
            .engine_tid
            .map(contention::ThreadPreemptionCounter::start);
        let ctl2 = Arc::clone(&ctl);
        let app = self
            .placement
            .spawn(Side::B, &format!("app-{}", self.label), move |pinned| {
                let report = match &mut handler {
                    Handler::Echo(h) => app_loop(&mut driver, h, &ctl2, pinned),
                    Handler::Touch(h) => app_loop(&mut driver, h, &ctl2, pinned),
                };
                (driver, handler, report)
            })
            .map_err(|e| format!("cannot start the application thread: {e}"))?;
        let t0 = Instant::now();
        // SYNC POINT: Acquire pairs with `app_loop`'s Release store of
        // `started`.
        while ctl.started.load(Ordering::Acquire) == 0 && t0.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_micros(100));
        }
        // Release, and read the counters, in one go on the engine thread.
        let (s0, start) = nic.with_engine(|e| {
            e.reset_generator_latency();
            e.set_generators_paused(false);
            (e.stats(), Instant::now())
        });
        thread::sleep(window);
        let (s1, end) = nic.with_engine(|e| {
            e.set_generators_paused(true);
            (e.stats(), Instant::now())
        });
        // SYNC POINT: Release pairs with `app_loop`'s Acquire load of
        // `phase`: the window closed (generator paused) before it snapshots.
        ctl.phase.store(END, Ordering::Release);
        // Drain: every frame the NIC delivered has been handled, and (echo)
        // every frame sent has come back or was dropped.
        let echo = self.config.mode == Mode::Echo;
        let t_drain = Instant::now();
        let mut drained = false;
        let mut s2 = s1.clone();
        // Progress seen last, and when: a drain that stops moving is over
        // (what is missing then is lost).
        let mut last = (u64::MAX, u64::MAX);
        let mut last_change = Instant::now();
        while t_drain.elapsed() < self.drain_timeout {
            thread::sleep(Duration::from_micros(500));
            s2 = nic.stats();
            let handled = ctl.frames.load(Ordering::Relaxed);
            let app_dropped = ctl.dropped.load(Ordering::Relaxed);
            let in_pipes = delivered(&s2) - delivered(&s0);
            let in_flight = s2.generator(0).map_or(0, |g| g.in_flight());
            if handled >= in_pipes && (!echo || in_flight <= s2.total_drops() + app_dropped) {
                drained = true;
                break;
            }
            if app.is_finished() {
                break;
            }
            let now = (handled, returned(&s2).1);
            if now != last {
                last = now;
                last_change = Instant::now();
            } else if last_change.elapsed() >= SETTLED {
                break;
            }
        }
        // SYNC POINT: Release pairs with `app_loop`'s Acquire load of
        // `phase`; the drain is over.
        ctl.phase.store(EXIT, Ordering::Release);
        let (driver, handler, report) = app
            .join()
            .map_err(|_| "the application thread panicked".to_string())?;
        self.driver = Some(driver);
        self.handler = Some(handler);
        if let Some(e) = report.error {
            return Err(format!("the application failed: {e}"));
        }
        // Counters after the drain (drops, TX completions).
        let s2 = if drained { s2 } else { nic.stats() };
        let (sent0, back0, bytes0) = returned(&s0);
        let (sent1, back1, bytes1) = returned(&s1);
        let (sent2, back2, _) = returned(&s2);
        let mut drops = delta_drops(&s0, &s2);
        if report.dropped > 0 {
            drops.insert(APP_DROPPED.to_string(), report.dropped);
        }
        let total_drops: u64 = drops.values().sum();
        let (packets, bytes) = if echo {
            (back1 - back0, bytes1 - bytes0)
        } else {
            (report.frames, report.bytes)
        };
        let unaccounted = if echo {
            (sent2 - sent0) as i64 - (back2 - back0) as i64 - total_drops as i64
        } else {
            (sent2 - sent0) as i64 - (delivered(&s2) - delivered(&s0)) as i64 - total_drops as i64
        };
        let pcie = |s: &Stats| {
            (
                s.pcie.up.total().link_bytes,
                s.pcie.down.total().link_bytes,
                s.pcie.metadata_bytes(),
            )
        };
        let (u0, d0, m0) = pcie(&s0);
        let (u1, d1, m1) = pcie(&s1);
        let notif = |s: &Stats| s.pipe_sum(|c| c.notifications);
        let tx_notif = |s: &Stats| s.app_sum(|c| c.tx_notifications);
        let nic_pre = nic_preempted.map(|c| c.stop()).unwrap_or_default();
        Ok(RigTrial {
            elapsed_ns: (end - start).as_nanos() as u64,
            packets,
            bytes,
            sent: sent1 - sent0,
            nic_busy_ns: s1.engine.busy_ns - s0.engine.busy_ns,
            app_busy_ns: report.busy_ns,
            rx_notifications: notif(&s1) - notif(&s0),
            tx_notifications: tx_notif(&s1) - tx_notif(&s0),
            delivered: delivered(&s1) - delivered(&s0),
            drops,
            unaccounted,
            drained,
            pcie_up_bytes: u1 - u0,
            pcie_down_bytes: d1 - d0,
            pcie_metadata_bytes: m1 - m0,
            preempted: [nic_pre, report.preempted],
            steal_ms: steal.stop(),
            app_pinned: report.pinned,
            app_perf: report.perf,
            latency: s2.generator(0).and_then(|g| g.latency.clone()),
            stats: Some(Box::new((s0, s1))),
        })
    }

    /// Stops the device and returns its final counters.
    pub fn stop(mut self) -> Option<Stats> {
        self.unpark();
        self.driver = None;
        let nic = self.nic.take()?;
        Arc::try_unwrap(nic).ok().map(Nic::stop)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.unpark();
        // The application detaches before the device goes.
        self.driver = None;
    }
}

/// Longest the engine stays parked between two trials (the device
/// answers commands within 10 s).
const PARK_LIMIT: Duration = Duration::from_secs(8);

impl Variant for Rig {
    fn name(&self) -> &str {
        &self.label
    }

    fn run_trial(&mut self, duration: Duration) -> TrialResult {
        match self.trial(duration) {
            Ok(t) => t.to_trial(),
            // The error is kept (see `Rig::error`); the trial reports nothing.
            Err(_) => TrialResult {
                elapsed: duration,
                ..Default::default()
            },
        }
    }
}

#[cfg(test)]
mod tests;
