//! The soak: the emulated NIC at saturation for a long run, with every
//! frame accounted for.
//!
//! One device (`nic_emu::Nic`, its engine thread on side A of the
//! placement) has two ports, each wired to the NIC's built-in generator:
//! frames of mixed sizes and kinds (IPv4/UDP, IPv6/UDP and non-IP frames),
//! each carrying its sequence number and a pattern of its own
//! (`nic_emu::testframe`), sent as fast as the engine can. Applications
//! attach to the device on both interfaces and on both ports, on two
//! threads on side B, one per port, each running these three on its port:
//!
//! - an Ensō application whose RX/TX pipes are fallback pipes;
//! - an Ensō application whose pipes are bound to IPv4/UDP flows by flow
//!   rules;
//! - a packetized application whose RSS queues take fallback traffic and
//!   a few flows bound to them.
//!
//! Each echoes every frame back out of the port it came from with the
//! frame's echo byte incremented ([`enso_apps::echo::TestFrameEcho`]), and the
//! generator checks every byte of what comes back, and that it comes back
//! once. Frames that match no rule (IPv6, non-IP, unbound flows) go to the
//! fallback pipes and queues of their port.
//!
//! While the generators send, each application thread replaces one of its
//! applications every `churn` interval: the old one detaches (the flow-bound
//! one gracefully: it removes its rules and drains its pipes first; the
//! others abruptly, with frames still in their pipes and rings) and a new
//! one attaches in its place, binding other flows.
//!
//! At the end the generators stop, the applications drain what is left,
//! and every frame sent is either verified back or counted under a named
//! cause: the NIC's drops (`nic_emu::Stats::drops`), frames the NIC had
//! delivered to an application that detached before reading them
//! ([`UNREAD_ON_DETACH`]: the NIC's count of frames delivered to that
//! application, read at the moment it detached, less the frames it
//! handled), and frames an application dropped ([`APP_TX_RING_FULL`]).
//! `unexplained_loss` is what is left, and must be 0.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use enso::app::DriverError;
use enso::{Device, DeviceOptions, EnsoDriver, FlowRule, PacketizedDriver, RxTxPipe};
use enso_apps::echo::TestFrameEcho;
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{
    DeviceConfig, GeneratorConfig, Nic, RunOptions, SizeSpec, Stats, VerifyLevel, WireConfig,
};
use serde::{Deserialize, Serialize};

use crate::placement::{Placement, Side};

mod control;
pub use control::*;

/// Drop cause: frames the NIC had delivered into an application's pipes or
/// RX rings that the application had not read when it detached.
pub const UNREAD_ON_DETACH: &str = "rx_unread_on_detach";
/// Drop cause: frames a packetized application dropped because its TX
/// ring was full (as DPDK applications do).
pub const APP_TX_RING_FULL: &str = "app_tx_ring_full";

/// Ports of the soak's device, each wired to a generator.
pub const PORTS: u32 = 2;
/// Application threads.
pub const HOSTS: usize = 2;
/// RX/TX pipes of each Ensō application.
const PIPES: u32 = 2;
/// Queue pairs of each packetized application.
const QUEUES: u32 = 2;
/// Entries of each packetized RX and TX descriptor ring.
const RING: u32 = 1024;
/// Flows an Ensō application binds at most.
const ENSO_BOUND: u32 = 8;
/// Flows a packetized application binds at most.
const QUEUE_BOUND: u32 = 4;
/// Frames per generator at most: the generator remembers which sequence
/// numbers came back (to count duplicates) when its count is bounded,
/// and it is at most 2^32. The bitmap's pages are touched only as
/// sequence numbers advance (an eighth of a byte per frame sent).
const GENERATOR_COUNT: u64 = 1 << 32;
/// Longest a graceful detach drains its pipes.
const GRACE_MAX: Duration = Duration::from_millis(50);
/// Empty polls in a row after which a graceful detach's pipes are drained.
const GRACE_EMPTY_POLLS: u32 = 64;
/// Unchanged counters for this long end the final drain.
const SETTLED: Duration = Duration::from_millis(300);
/// Longest the final drain waits.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest the applications take to attach and the NIC to install their
/// steering before the generators start.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// What a soak runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoakConfig {
    /// How long the generators send.
    pub duration: Duration,
    /// Frame lengths in memory (without the FCS).
    pub sizes: SizeSpec,
    /// Flows per generator (at least 4: half may be bound to Ensō pipes,
    /// half to packetized queues).
    pub flows: u32,
    /// How often each application thread replaces one of its
    /// applications (`None`: never).
    pub churn: Option<Duration>,
}

/// The three kinds of application the soak runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Ensō RX/TX fallback pipes.
    #[default]
    EnsoFallback,
    /// Ensō RX/TX pipes bound to flows.
    EnsoFlows,
    /// Packetized RSS queues (fallback), a few flows bound to them.
    Packetized,
}

impl Role {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Role::EnsoFallback => "enso_fallback",
            Role::EnsoFlows => "enso_flows",
            Role::Packetized => "packetized",
        }
    }
}

/// Which applications each thread runs: every role on every port, one
/// thread per port, each with both interfaces.
pub fn roles_of(host: usize) -> Vec<(Role, u32)> {
    let all = [
        (Role::EnsoFallback, 0),
        (Role::EnsoFlows, 1),
        (Role::Packetized, 0),
        (Role::EnsoFallback, 1),
        (Role::EnsoFlows, 0),
        (Role::Packetized, 1),
    ];
    all.iter()
        .enumerate()
        .filter(|(i, _)| i % HOSTS == host)
        .map(|(_, r)| *r)
        .collect()
}

/// What one generator port counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortReport {
    /// The port.
    pub port: usize,
    /// Frames its generator sent.
    pub frames: u64,
    /// Frames that came back, every byte as expected, once.
    pub verified: u64,
    /// Frames that came back with wrong bytes.
    pub corrupt: u64,
    /// Frames that came back a second time.
    pub duplicates: u64,
    /// Frames that came back and were not its test frames.
    pub foreign: u64,
    /// Frames the NIC dropped as they arrived from it.
    pub dropped_on_arrival: u64,
}

/// What the applications of one role did over the run, all incarnations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleReport {
    /// The role.
    pub role: Role,
    /// Applications of this role that attached (initial ones included).
    pub attached: u64,
    /// Frames they handled (and echoed, unless dropped).
    pub handled: u64,
    /// Frames the NIC had delivered to them and they had not read when
    /// they detached.
    pub unread_on_detach: u64,
    /// Frames they dropped (TX ring full).
    pub app_dropped: u64,
}

/// What a soak measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SoakReport {
    /// The run asked for, in seconds.
    pub duration_s: f64,
    /// How long the generators sent, in seconds.
    pub elapsed_s: f64,
    /// Frames the generators sent.
    pub frames: u64,
    /// Frames that came back verified (every byte, once).
    pub verified: u64,
    /// Frames not verified, by cause: the NIC's drop counters and the
    /// soak's [`UNREAD_ON_DETACH`] and [`APP_TX_RING_FULL`].
    pub dropped: BTreeMap<String, u64>,
    /// Sum of `dropped`.
    pub dropped_total: u64,
    /// `frames - verified - dropped_total - corrupt - duplicates`: frames
    /// neither verified nor counted (negative: more came back than went).
    pub unexplained_loss: i64,
    /// Frames that came back with wrong bytes.
    pub corrupt: u64,
    /// Frames that came back more than once.
    pub duplicates: u64,
    /// Frames that came back and were not test frames.
    pub foreign: u64,
    /// Applications replaced during the run (one detached, one attached).
    pub attach_cycles: u64,
    /// Detaches that removed their flow rules and drained first.
    pub graceful_detaches: u64,
    /// Detaches with frames possibly still in pipes and rings.
    pub abrupt_detaches: u64,
    /// Applications attached at any time.
    pub applications: usize,
    /// Frames sent per second, millions.
    pub offered_mpps: f64,
    /// Frames verified per second, millions.
    pub verified_mpps: f64,
    /// Verified frames' bytes on the wire (FCS, preamble and gap
    /// included), Gb/s.
    pub verified_gbps: f64,
    /// Share of the frames sent that were verified.
    pub verified_fraction: f64,
    /// Per generator port.
    pub ports: Vec<PortReport>,
    /// Per application role.
    pub roles: Vec<RoleReport>,
    /// Configuration notifications the NIC refused (none expected).
    pub rejected_config: u64,
    /// Whether the final drain settled (counters stopped moving) before
    /// its timeout.
    pub drained: bool,
    /// How long the final drain took, ms.
    pub drain_ms: f64,
    /// Every check passed: no unexplained loss, nothing corrupt,
    /// duplicated or foreign, something verified, the drain settled.
    pub passed: bool,
    /// What did not pass, or is worth knowing.
    pub notes: Vec<String>,
}

/// A point of the run's timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the generators started.
    pub t_s: f64,
    /// Frames sent so far.
    pub frames: u64,
    /// Frames verified so far.
    pub verified: u64,
    /// Frames the NIC dropped so far (all causes).
    pub nic_dropped: u64,
    /// Applications attached now.
    pub applications: usize,
    /// Applications replaced so far.
    pub attach_cycles: u64,
}

/// A soak's report, its timeline, and the NIC's final counters.
#[derive(Debug)]
pub struct SoakRun {
    /// The report.
    pub report: SoakReport,
    /// One sample a second or so.
    pub timeline: Vec<Sample>,
    /// The NIC's counters at the end.
    pub stats: Stats,
}

impl SoakConfig {
    /// Checks the settings before anything runs.
    pub fn check(&self) -> Result<(), String> {
        self.sizes.validate()?;
        if self.flows < 4 {
            return Err(format!(
                "{} flows: the soak needs at least 4 (half for Ensō pipes' rules, half \
                 for packetized queues')",
                self.flows
            ));
        }
        self.device("check").validate().map_err(|e| e.to_string())
    }

    /// The generator of port `port`.
    pub fn generator(&self, port: u32) -> GeneratorConfig {
        GeneratorConfig {
            sizes: self.sizes.clone(),
            kinds: vec![FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw],
            flows: self.flows,
            count: Some(GENERATOR_COUNT),
            verify: VerifyLevel::Full,
            echo_increment: 1,
            stream: port as u8,
            paused: true,
            ..Default::default()
        }
    }

    /// The device: [`PORTS`] ports, each wired to its generator.
    pub fn device(&self, name: &str) -> DeviceConfig {
        let mut cfg = DeviceConfig::new(name, WireConfig::Generator(self.generator(0)));
        for p in 1..PORTS {
            cfg.ports.push(WireConfig::Generator(self.generator(p)));
        }
        cfg
    }

    /// The flows incarnation `generation` of `role` binds.
    fn bound_flows(&self, role: Role, generation: u64) -> Vec<u32> {
        let half = self.flows / 2;
        let (base, span, n) = match role {
            Role::EnsoFallback => return Vec::new(),
            Role::EnsoFlows => (0, half, ENSO_BOUND.min(half)),
            Role::Packetized => (half, self.flows - half, QUEUE_BOUND.min(self.flows - half)),
        };
        let start = ((generation * u64::from(n)) % u64::from(span)) as u32;
        (0..n).map(|i| base + (start + i) % span).collect()
    }
}

/// The rule that steers test flow `flow` (IPv4/UDP) to a pipe or queue.
fn flow_rule(flow: u32) -> FlowRule {
    FlowRule {
        src_ip: 0,
        src_port: 0,
        ..TestFrames::flow_tuple(flow)
    }
}

enum Driver {
    Enso(EnsoDriver),
    Packetized(PacketizedDriver),
}

/// One attached application.
struct App {
    role: Role,
    id: u32,
    driver: Driver,
    echo: TestFrameEcho,
    /// The flow rules of its pipes (a graceful detach removes them; the
    /// NIC removes a packetized application's with it).
    rules: Vec<(RxTxPipe, FlowRule)>,
}

impl App {
    fn attach(
        nic: &Nic,
        cfg: &SoakConfig,
        role: Role,
        port: u32,
        generation: u64,
    ) -> Result<App, String> {
        let err =
            |e: &dyn std::fmt::Display| format!("{} application on port {port}: {e}", role.name());
        let flows = cfg.bound_flows(role, generation);
        let mut rules = Vec::new();
        let driver = match role {
            Role::EnsoFallback | Role::EnsoFlows => {
                let opts = DeviceOptions {
                    pipes: PIPES,
                    tx_pipes: 0,
                    ..Default::default()
                };
                let dev = Device::attach_nic(nic, opts).map_err(|e| err(&e))?;
                let mut d = EnsoDriver::new(dev);
                if role == Role::EnsoFallback {
                    d.add_fallback_pipes_on(port, PIPES).map_err(|e| err(&e))?;
                } else {
                    let mut pipes = Vec::new();
                    for _ in 0..PIPES {
                        let p = d.dev.alloc_rxtx_pipe_on(port, false).map_err(|e| err(&e))?;
                        d.set_port(p, port);
                        pipes.push(p);
                    }
                    for (i, &f) in flows.iter().enumerate() {
                        let p = pipes[i % pipes.len()];
                        d.dev.bind(p, flow_rule(f)).map_err(|e| err(&e))?;
                        rules.push((p, flow_rule(f)));
                    }
                }
                Driver::Enso(d)
            }
            Role::Packetized => {
                let opts = DeviceOptions {
                    pipes: 0,
                    tx_pipes: 0,
                    queues: QUEUES,
                    rx_ring: RING,
                    tx_ring: RING,
                    // Every RX ring full, plus what sits in TX rings.
                    pool_buffers: QUEUES * 2 * RING,
                    ..Default::default()
                };
                let dev = Device::attach_nic(nic, opts).map_err(|e| err(&e))?;
                let mut d = PacketizedDriver::new(dev, 32);
                let qs = d.add_rss_queues_on(port, QUEUES).map_err(|e| err(&e))?;
                for (i, &f) in flows.iter().enumerate() {
                    let q = qs[i % qs.len()];
                    d.dev.bind_queue(q, flow_rule(f)).map_err(|e| err(&e))?;
                }
                Driver::Packetized(d)
            }
        };
        let id = match &driver {
            Driver::Enso(d) => d.dev.info().app_id,
            Driver::Packetized(d) => d.dev.info().app_id,
        };
        Ok(App {
            role,
            id,
            driver,
            echo: TestFrameEcho::default(),
            rules,
        })
    }

    /// Fallback targets (pipes and RSS queues) the application installs.
    fn fallback_targets(role: Role) -> usize {
        match role {
            Role::EnsoFallback => PIPES as usize,
            Role::EnsoFlows => 0,
            Role::Packetized => QUEUES as usize,
        }
    }

    #[inline]
    fn poll(&mut self) -> Result<usize, DriverError> {
        match &mut self.driver {
            Driver::Enso(d) => d.poll(&mut self.echo),
            Driver::Packetized(d) => d.poll(&mut self.echo),
        }
    }

    /// Frames handled so far, and frames dropped.
    fn handled(&self) -> (u64, u64) {
        let s = match &self.driver {
            Driver::Enso(d) => &d.stats,
            Driver::Packetized(d) => &d.stats,
        };
        (s.frames, s.dropped)
    }

    /// Whether every TX notification (sends and configuration) completed.
    fn tx_idle(&mut self) -> Result<bool, DriverError> {
        match &mut self.driver {
            Driver::Enso(d) => {
                d.dev.reap_completions()?;
                Ok(d.dev.tx_in_flight() == 0)
            }
            Driver::Packetized(_) => Ok(true),
        }
    }

    /// Detaches the application; `graceful` first removes its pipes' flow
    /// rules and drains them. Returns what it handled and what the NIC
    /// had delivered to it, read on the engine thread at the moment it
    /// detached.
    fn retire(mut self, nic: &Nic, graceful: bool) -> Result<Retired, String> {
        let role = self.role;
        let what =
            |e: &dyn std::fmt::Display| format!("detaching a {} application: {e}", role.name());
        if graceful {
            if let Driver::Enso(d) = &mut self.driver {
                for (p, rule) in &self.rules {
                    d.dev.unbind(*p, *rule).map_err(|e| what(&e))?;
                }
            }
            // The rules are gone once their notifications completed; then
            // nothing more arrives, and what did is handled.
            let t0 = Instant::now();
            let mut empty = 0;
            while t0.elapsed() < GRACE_MAX && empty < GRACE_EMPTY_POLLS {
                let n = self.poll().map_err(|e| what(&e))?;
                if n == 0 && self.tx_idle().map_err(|e| what(&e))? {
                    empty += 1;
                } else {
                    empty = 0;
                }
            }
        }
        let id = self.id;
        let delivered = nic.try_with_engine(move |e| {
            let rx = delivered_to(&e.stats(), id);
            e.detach(id);
            rx
        })?;
        let delivered = delivered.ok_or_else(|| format!("application {id} was not attached"))?;
        let (handled, app_dropped) = self.handled();
        // Dropping the handle detaches it too: the NIC has already done so.
        drop(self);
        Ok(Retired {
            delivered,
            handled,
            app_dropped,
        })
    }
}

/// Frames the NIC delivered into application `app_id`'s pipes and RX
/// rings, if it is attached.
pub fn delivered_to(s: &Stats, app_id: u32) -> Option<u64> {
    let a = s.apps.iter().find(|a| a.app_id == app_id)?;
    Some(
        a.pipes.iter().map(|p| p.counters.rx_frames).sum::<u64>()
            + a.queues.iter().map(|q| q.counters.rx_frames).sum::<u64>(),
    )
}

/// What a detached application left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retired {
    /// Frames the NIC had delivered to it.
    pub delivered: u64,
    /// Frames it handled.
    pub handled: u64,
    /// Frames it dropped.
    pub app_dropped: u64,
}

/// What one application thread reports.
#[derive(Debug, Default)]
struct HostReport {
    roles: BTreeMap<Role, RoleReport>,
    cycles: u64,
    graceful: u64,
    abrupt: u64,
    /// Applications that handled more frames than the NIC delivered to
    /// them (never expected).
    overcounts: Vec<String>,
}

impl HostReport {
    fn attached(&mut self, role: Role) {
        let r = self.roles.entry(role).or_insert_with(|| RoleReport {
            role,
            ..Default::default()
        });
        r.attached += 1;
    }

    fn retired(&mut self, role: Role, id: u32, t: Retired) {
        let r = self.roles.entry(role).or_insert_with(|| RoleReport {
            role,
            ..Default::default()
        });
        r.handled += t.handled;
        r.app_dropped += t.app_dropped;
        match t.delivered.checked_sub(t.handled) {
            Some(n) => r.unread_on_detach += n,
            None => self.overcounts.push(format!(
                "application {id} ({}) handled {} frames, the NIC delivered {}",
                role.name(),
                t.handled,
                t.delivered
            )),
        }
    }
}

const RUN: u8 = 0;
const DRAIN: u8 = 1;
const EXIT: u8 = 2;

/// What the controlling thread and the application threads share.
struct Shared {
    phase: CachePadded<AtomicU8>,
    /// Frames each thread handled so far (for the drain and progress).
    handled: [CachePadded<AtomicU64>; HOSTS],
    cycles: AtomicU64,
    ready: AtomicUsize,
    failed: AtomicBool,
}

/// One application thread: attaches its applications, polls them in turn,
/// replaces one every `churn` while the phase is RUN, and detaches them
/// all at EXIT.
fn host(nic: &Nic, cfg: &SoakConfig, me: usize, shared: &Shared) -> Result<HostReport, String> {
    let mut report = HostReport::default();
    let roles = roles_of(me);
    let mut generation = 0u64;
    let mut apps = Vec::with_capacity(roles.len());
    for &(role, port) in &roles {
        apps.push((App::attach(nic, cfg, role, port, generation)?, port));
        report.attached(role);
    }
    shared.ready.fetch_add(1, Ordering::Relaxed);
    let mut next_churn = cfg.churn.map(|c| Instant::now() + c);
    let mut victim = 0usize;
    let mut handled = 0u64;
    let mut round = 0u64;
    loop {
        // SYNC POINT: Acquire pairs with the Release stores of `phase` in
        // `run`: the generators' pause happened before DRAIN is seen.
        let phase = shared.phase.load(Ordering::Acquire);
        if phase == EXIT {
            break;
        }
        for (a, _) in &mut apps {
            handled += a
                .poll()
                .map_err(|e| format!("{} application: {e}", a.role.name()))?
                as u64;
        }
        shared.handled[me].store(handled, Ordering::Relaxed);
        round += 1;
        let (Some(due), Some(churn), RUN) = (next_churn, cfg.churn, phase) else {
            continue;
        };
        if !round.is_multiple_of(16) || Instant::now() < due {
            continue;
        }
        // Replace one application: the old one goes first, so that the
        // new one can bind flows the old one held.
        generation += 1;
        let (old, port) = apps.swap_remove(victim);
        let (role, id) = (old.role, old.id);
        let graceful = role == Role::EnsoFlows;
        let t = old.retire(nic, graceful)?;
        report.retired(role, id, t);
        if graceful {
            report.graceful += 1;
        } else {
            report.abrupt += 1;
        }
        let new = App::attach(nic, cfg, role, port, generation)?;
        report.attached(role);
        apps.push((new, port));
        // swap_remove moved the last one into `victim`; the new one is
        // last. Walk on so each application is replaced in turn.
        victim = (victim + 1) % apps.len();
        report.cycles += 1;
        shared.cycles.fetch_add(1, Ordering::Relaxed);
        next_churn = Some(Instant::now() + churn);
    }
    for (a, _) in apps {
        let (role, id) = (a.role, a.id);
        let t = a.retire(nic, false)?;
        report.retired(role, id, t);
    }
    Ok(report)
}

/// Progress of a running soak, for display.
#[derive(Clone, Debug, Default)]
pub struct Tick {
    /// Seconds the generators have sent.
    pub elapsed_s: f64,
    /// The latest sample.
    pub sample: Sample,
}

/// Device names made by this process so far.
static SOAKS: AtomicU64 = AtomicU64::new(0);

/// Runs a soak; `tick` is called about once a second while the
/// generators send.
pub fn run(
    cfg: &SoakConfig,
    placement: &Placement,
    mut tick: impl FnMut(&Tick),
) -> Result<SoakRun, String> {
    cfg.check()?;
    let n = SOAKS.fetch_add(1, Ordering::Relaxed);
    let name = format!("s{}.{}", std::process::id() % 100_000, n % 100);
    let nic = Nic::start(
        cfg.device(&name),
        RunOptions {
            core: placement.core(Side::A),
            idle_sleep_after: Some(20_000),
            ..Default::default()
        },
    )?;
    let shared = Shared {
        phase: CachePadded::new(AtomicU8::new(RUN)),
        handled: std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
        cycles: AtomicU64::new(0),
        ready: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
    };
    let expected_fallback: usize = (0..HOSTS)
        .flat_map(roles_of)
        .map(|(r, _)| App::fallback_targets(r))
        .sum();
    let expected_rules: usize = (0..HOSTS)
        .flat_map(roles_of)
        .map(|(r, _)| cfg.bound_flows(r, 0).len())
        .sum();
    let applications: usize = (0..HOSTS).map(|h| roles_of(h).len()).sum();

    let outcome = thread::scope(|s| {
        let hosts: Vec<_> = (0..HOSTS)
            .map(|h| {
                let (nic, shared) = (&nic, &shared);
                thread::Builder::new()
                    .name(format!("soak-app{h}"))
                    .spawn_scoped(s, move || {
                        placement.pin_current(Side::B);
                        let r = host(nic, cfg, h, shared);
                        if r.is_err() {
                            shared.failed.store(true, Ordering::Relaxed);
                        }
                        r
                    })
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cannot start an application thread: {e}"))?;
        let result = control(
            &nic,
            cfg,
            &shared,
            expected_fallback,
            expected_rules,
            &mut tick,
        );
        // SYNC POINT: Release pairs with the Acquire load of `phase` in
        // `host`: everything the controller did happened before EXIT.
        shared.phase.store(EXIT, Ordering::Release);
        let mut reports = Vec::new();
        let mut first_error = None;
        for h in hosts {
            match h.join() {
                Ok(Ok(r)) => reports.push(r),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert("an application thread panicked".to_string());
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        result.map(|c| (c, reports))
    });
    let (control, reports) = match outcome {
        Ok(x) => x,
        Err(e) => {
            drop(nic);
            return Err(e);
        }
    };
    let stats = nic.try_stop()?;
    let report = account(cfg, &stats, &control, &reports, applications);
    Ok(SoakRun {
        report,
        timeline: control.timeline,
        stats,
    })
}

#[cfg(test)]
mod tests;
