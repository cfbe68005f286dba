//! The engine itself: [`Engine`], its construction, the step loop that
//! runs one bounded slice of work per [`Engine::step`], and the controls and
//! counters it shows its owner.

use pcie_model::PcieCounters;

use super::evict;
use super::mmio::MMIO_BUDGET;
use super::rx::RxSink;
use super::state::{Core, DescQueue, LinkShifts, PipeState, Run, TraceEvent, RUN_SLOTS};
use crate::clock::Clock;
use crate::config::DeviceConfig;
use crate::counters::*;
use crate::layout;
use crate::port::{self, Port, Wire};
use crate::steering::{Fallback, FlowTable};
use crate::wire::FLIT;

// A generator's burst is sent inside one step into its port's wire FIFO:
// the configuration's limit is what the FIFO holds.
const _: () = assert!(crate::config::MAX_GENERATOR_BURST == port::WIRE_FIFO_FRAMES);

/// Frames moved per port per step at most.
const RX_BUDGET: usize = 64;

/// A step that did at least this much work means the engine is saturated:
/// only then does it defer looking at posted register writes.
const SATURATED_STEP_WORK: usize = 32;

/// Evicting ahead, and whether it pays at the moment.
#[derive(Debug)]
struct Ahead {
    /// The configured distance (bytes).
    bytes: usize,
    /// Decides whether to evict at all; `None`: always.
    chooser: Option<evict::AheadChooser>,
}

/// The emulated NIC.
#[derive(Debug)]
pub struct Engine {
    pub(super) cfg: DeviceConfig,
    pub(super) core: Core,
    pub(super) ports: Vec<Port>,
    pub(super) counters: EngineCounters,
    last_step_ns: u64,
    /// Work (frames, register writes) done by the last step; 0: it was idle.
    last_step_work: usize,
    /// `Core::flits_in` and the time when the engine last looked at posted
    /// register writes (see [`crate::HostTuning::register_poll_flits`]), and how
    /// many flits it may write before it looks again.
    flits_at_poll: u64,
    last_poll_ns: u64,
    poll_flits: u64,
    pub(super) pipe_used: Vec<bool>,
    pub(super) nbuf_used: Vec<bool>,
    pub(super) desc_used: Vec<bool>,
    pub(super) next_app_id: u32,
    /// `None` when the engine never evicts ahead (configured so, or the
    /// CPU cannot).
    ahead: Option<Ahead>,
    /// The device's wake file (see `park`).
    pub(super) wake: std::sync::Arc<super::park::WakeFile>,
}

impl Engine {
    /// A device with `cfg`; creates its directory (owner-only) inside
    /// `cfg.dir`, which must exist.
    pub fn new(cfg: DeviceConfig) -> Result<Self, super::EngineError> {
        cfg.validate()?;
        // Only the device's own directory is made (a mistyped `dir` is an
        // error, not a new directory tree), and never through a link.
        crate::devdir::create(&cfg.dir, &cfg.name)?;
        let ports = cfg
            .ports
            .iter()
            .enumerate()
            .map(|(i, w)| Port::new(w, &cfg.ports, i, &cfg.name))
            .collect::<Result<Vec<_>, _>>()
            .inspect_err(|_| crate::devdir::remove(&cfg.device_dir()))?;
        let pipe_flits = (cfg.pipe_size / FLIT) as u32;
        let core = Core {
            pipes: vec![PipeState::default(); layout::MAX_PIPES as usize],
            pipe_counters: vec![PipeCounters::default(); layout::MAX_PIPES as usize],
            apps: Vec::new(),
            flows: FlowTable::default(),
            fallback: (0..cfg.ports.len()).map(|_| Fallback::default()).collect(),
            ts_offset: Vec::new(),
            limiter: Vec::new(),
            nports: cfg.ports.len(),
            clock: Clock::Monotonic,
            latency: cfg.interconnect_latency_ns,
            per_packet: cfg.notification_mode.per_packet(),
            evict_ahead: if evict::supported() {
                cfg.tuning.evict_ahead_lines as usize * FLIT
            } else {
                0
            },
            non_temporal: false,
            prefetch_ahead: false,
            pipe_writes: PipeWriteMode::Plain,
            unfenced: false,
            short_frames: 0,
            evict_tx: cfg.tuning.evict_tx_lines && evict::supported(),
            pipe_flits,
            pipe_size: cfg.pipe_size,
            ring_mask: cfg.notif_ring_entries - 1,
            detached_pipes: PipeCounters::default(),
            detached_apps: AppCounters::default(),
            dqs: vec![DescQueue::default(); layout::MAX_DESC_QUEUES as usize],
            dq_counters: vec![QueueCounters::default(); layout::MAX_DESC_QUEUES as usize],
            detached_queues: QueueCounters::default(),
            desc_fetch: cfg.desc_fetch,
            desc_writeback: cfg.desc_writeback,
            txbuf: vec![0u8; layout::desc::BUF_SIZE].into_boxed_slice(),
            mmio_batch: Vec::with_capacity(MMIO_BUDGET as usize),
            pcie: PcieCounters::new(cfg.pcie),
            shifts: LinkShifts::of(&cfg.pcie),
            frames: 0,
            run_frames: 0,
            runs: [Run::CLOSED; RUN_SLOTS],
            runs_open: false,
            trace: None,
            now: 0,
            step_no: 0,
            flits_in: 0,
        };
        let ahead = (core.evict_ahead != 0).then(|| Ahead {
            bytes: core.evict_ahead,
            // Where the CPU prefetches for writing, that is the way
            // throughout (see `evict`); elsewhere the engine chooses.
            chooser: (cfg.tuning.evict_ahead_adaptive && !evict::prefetch_for_write_supported())
                .then(|| {
                    let modes = if evict::non_temporal_supported() {
                        evict::MODES
                    } else {
                        evict::MODES_CACHED
                    };
                    evict::AheadChooser::new(crate::monotonic_ns(), modes)
                }),
        });
        let fixed = cfg.tuning.pipe_writes;
        let wake = super::park::WakeFile::create(&cfg.name).map_err(|e| {
            crate::devdir::remove(&cfg.device_dir());
            super::EngineError::WakeFile(e)
        })?;
        let mut engine = Self {
            wake,
            ahead,
            core,
            ports,
            counters: EngineCounters::default(),
            last_step_ns: crate::monotonic_ns(),
            last_step_work: 0,
            flits_at_poll: 0,
            last_poll_ns: 0,
            poll_flits: poll_flits(&cfg),
            pipe_used: vec![false; layout::MAX_PIPES as usize],
            nbuf_used: vec![false; layout::MAX_NBUFS as usize],
            desc_used: vec![false; layout::MAX_DESC_QUEUES as usize],
            next_app_id: 1,
            cfg,
        };
        match (fixed, &engine.ahead) {
            (Some(m), _) => engine.set_pipe_writes(m),
            (None, Some(a)) => {
                let mode = match &a.chooser {
                    Some(c) => c.mode(),
                    None if engine.cfg.tuning.evict_ahead_adaptive => PipeWriteMode::PrefetchAhead,
                    None => PipeWriteMode::EvictAhead,
                };
                engine.core.set_pipe_writes(mode, a.bytes);
            }
            (None, None) => {}
        }
        Ok(engine)
    }

    /// The device's settings.
    pub fn config(&self) -> &DeviceConfig {
        &self.cfg
    }

    /// Sets the clock the engine reads (stepped tests use a manual one).
    pub fn set_clock(&mut self, clock: Clock) {
        self.core.clock = clock;
    }

    /// Runs one bounded slice of work; returns how much was done (0: idle).
    pub fn step(&mut self) -> usize {
        let t = crate::monotonic_ns();
        if self.last_step_work > 0 {
            self.counters.busy_ns += t.saturating_sub(self.last_step_ns);
        }
        self.last_step_ns = t;
        let now = match &self.core.clock {
            Clock::Monotonic => t,
            c => c.now_ns(),
        };
        let mut work = 0;
        self.core.now = now;
        self.core.step_no = self.counters.steps;
        // Posted register writes are looked at every step while the engine
        // keeps up (its last step did less than SATURATED_STEP_WORK), and
        // after `register_poll_flits` flits of frames (or `register_poll_ns`)
        // while it is saturated. Looking at them, and the notification a
        // head update triggers, cost this core cross-core misses; with an
        // application that keeps up, batches stayed at ~16 frames and that
        // per-batch cost dominated (64 B rx: 54 ns per frame at 16 frames
        // per notification, 25 ns at 500). A step that finds no other work
        // always looks, and so does a frame about to be dropped for lack of
        // room, so deferring never costs a frame.
        let poll = self.last_step_work < SATURATED_STEP_WORK
            || self.core.flits_in - self.flits_at_poll >= self.poll_flits
            || now.saturating_sub(self.last_poll_ns) >= self.cfg.tuning.register_poll_ns;
        if poll {
            work += self.poll_registers(now);
        }
        let Self { core, ports, .. } = self;
        for slot in 0..core.apps.len() {
            if core.apps[slot].is_some() {
                work += core.process_tx(slot, ports, now);
                work += core.process_desc_tx(slot, ports, now);
            }
        }
        for (i, p) in ports.iter_mut().enumerate() {
            if let Some(fifo) = p.inbound.as_mut() {
                let mut n = 0;
                while n < RX_BUDGET {
                    let Some(f) = fifo.front_ready(now) else {
                        break;
                    };
                    p.counters.rx_frames += 1;
                    p.counters.rx_bytes += f.len() as u64;
                    let _ = core.deliver(i, &mut p.counters, f, None);
                    fifo.pop();
                    n += 1;
                }
                work += n;
            }
            if let Wire::Generator(g) = &mut p.wire {
                let clock = core.clock.clone();
                let mut sink = RxSink {
                    core: &mut *core,
                    port: i,
                    counters: &mut p.counters,
                    dropped: 0,
                };
                let (sent, sent_bytes) = (g.counters.sent, g.counters.sent_bytes);
                work += g.emit_to(now, &clock, &mut sink);
                g.counters.dropped_on_arrival += sink.dropped;
                core.close_runs();
                // Every frame the generator sent arrived at the port.
                p.counters.rx_frames += g.counters.sent - sent;
                p.counters.rx_bytes += g.counters.sent_bytes - sent_bytes;
            }
            if let Wire::Backend(b) = &mut p.wire {
                if !core.fallback[i].is_empty() || !core.flows.is_empty() {
                    b.receivers_ready(now);
                }
                let counters = &mut p.counters;
                work += b.receive(now, RX_BUDGET, &mut |f: &[u8]| {
                    counters.rx_frames += 1;
                    counters.rx_bytes += f.len() as u64;
                    let _ = core.deliver(i, counters, f, None);
                });
                core.close_runs();
            }
            p.end_step(now);
        }
        for slot in 0..core.apps.len() {
            core.flush_desc_writebacks(slot);
        }
        if work == 0 && !poll {
            work += self.poll_registers(now);
        }
        if let Some(Ahead {
            bytes,
            chooser: Some(c),
        }) = &mut self.ahead
        {
            let core = &self.core;
            c.update(t, self.counters.busy_ns, core.short_frames, || {
                core.frame_pipe_flits()
            });
            let (mode, bytes) = (c.mode(), *bytes);
            self.core.set_pipe_writes(mode, bytes);
        }
        for tb in self.core.limiter.iter_mut().flatten() {
            tb.end_step(now);
        }
        self.counters.steps += 1;
        self.last_step_work = work;
        if work > 0 {
            self.counters.busy_steps += 1;
        }
        work
    }

    /// Applies every application's posted register writes that have
    /// arrived by `now`.
    fn poll_registers(&mut self, now: u64) -> usize {
        self.flits_at_poll = self.core.flits_in;
        self.last_poll_ns = now;
        let mut n = 0;
        for slot in 0..self.core.apps.len() {
            if self.core.apps[slot].is_some() {
                n += self.core.drain_mmio(slot, now);
            }
        }
        n
    }

    /// Runs steps until one finds nothing to do (at most `max` steps).
    pub fn run_until_idle(&mut self, max: usize) -> usize {
        let mut total = 0;
        for _ in 0..max {
            let w = self.step();
            total += w;
            if w == 0 {
                break;
            }
        }
        total
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> Stats {
        let mut engine = self.counters.clone();
        engine.frames = self.core.frames;
        engine.run_frames = self.core.run_frames;
        engine.evict_ahead_on = self.core.evict_ahead != 0;
        engine.pipe_writes = self.core.pipe_writes;
        engine.evict_ahead_switches = self
            .ahead
            .as_ref()
            .and_then(|a| a.chooser.as_ref())
            .map_or(0, evict::AheadChooser::switches);
        Stats {
            device: self.cfg.name.clone(),
            engine,
            ports: self
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (wire_stats, wire_drops) = p.wire_counters();
                    PortStats {
                        port: i,
                        wire: p.describe(),
                        counters: p.counters.clone(),
                        generator: p.generator().map(|g| {
                            let mut c = g.counters.clone();
                            c.latency = g.latency();
                            c
                        }),
                        wire_stats: named(wire_stats),
                        wire_drops: named(wire_drops),
                    }
                })
                .collect(),
            apps: self
                .core
                .apps
                .iter()
                .flatten()
                .map(|a| AppStats {
                    app_id: a.id,
                    counters: a.counters.clone(),
                    pipes: (a.pipe_base..a.pipe_base + a.pipe_count)
                        .filter(|&p| {
                            self.core.pipes[p as usize].base != 0
                                || self.core.pipe_counters[p as usize] != PipeCounters::default()
                        })
                        .map(|p| PipeStats {
                            pipe_id: p,
                            counters: self.core.pipe_counters[p as usize].clone(),
                        })
                        .collect(),
                    queues: (a.desc_base..a.desc_base + a.desc_count)
                        .map(|q| QueueStats {
                            queue_id: q,
                            counters: self.core.queue_counters(q as usize).clone(),
                        })
                        .collect(),
                })
                .collect(),
            detached_pipes: self.core.detached_pipes.clone(),
            detached_apps: self.core.detached_apps.clone(),
            detached_queues: self.core.detached_queues.clone(),
            pcie: self.core.pcie.clone(),
            flow_rules: self.core.flows.len(),
            fallback_pipes: self.core.fallback.iter().map(Fallback::len).sum(),
        }
    }

    /// Pauses or releases every generator port (a paused generator sends
    /// nothing; its rate clock restarts when released).
    pub fn set_generators_paused(&mut self, paused: bool) {
        for p in &mut self.ports {
            if let Wire::Generator(g) = &mut p.wire {
                g.paused = paused;
                g.restart_clock();
            }
        }
    }

    /// Forgets the round-trip times the generators recorded so far.
    pub fn reset_generator_latency(&mut self) {
        for p in &mut self.ports {
            if let Wire::Generator(g) = &mut p.wire {
                g.reset_latency();
            }
        }
    }

    /// Whether every generator port has sent all it was asked to.
    pub fn generators_finished(&self) -> bool {
        self.ports
            .iter()
            .all(|p| p.generator().is_none_or(|g| g.finished()))
    }

    /// Fixes how frames of one or two lines are written into frame pipes
    /// (see [`PipeWriteMode`]) and stops the engine choosing it as it runs:
    /// for experiments and tests that need the same way throughout
    /// ([`crate::HostTuning::pipe_writes`] calls it at the start).
    /// `EvictAhead` and `PrefetchAhead` do nothing ahead where the device
    /// evicts nothing (`evict_ahead_lines` 0, or no `clflushopt`);
    /// `NonTemporal` writes with ordinary stores on CPUs without
    /// non-temporal ones, and `PrefetchAhead` evicts on CPUs without
    /// `prefetchw`.
    pub fn set_pipe_writes(&mut self, mode: PipeWriteMode) {
        let bytes = self.ahead.as_ref().map_or(0, |a| a.bytes);
        self.ahead = Some(Ahead {
            bytes,
            chooser: None,
        });
        self.core.set_pipe_writes(mode, bytes);
    }

    /// Starts recording [`TraceEvent`]s (tests; costs memory per event).
    pub fn enable_trace(&mut self) {
        self.core.trace = Some(Vec::new());
    }

    /// Takes the events recorded so far.
    pub fn take_trace(&mut self) -> Vec<TraceEvent> {
        self.core
            .trace
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Clears the PCIe counters (to measure a steady state).
    pub fn reset_pcie(&mut self) {
        self.core.pcie.reset();
    }
}

/// Flits a saturated engine writes between looks at posted register writes:
/// the configured limit, but at most an eighth of a pipe (far from filling
/// one before head updates are applied) and a quarter of any generator's
/// in-flight window (a closed loop that waits on register writes for its
/// window to reopen would otherwise be paced by the looks, not the NIC).
fn poll_flits(cfg: &DeviceConfig) -> u64 {
    let mut n = u64::from(cfg.tuning.register_poll_flits).min((cfg.pipe_size / FLIT / 8) as u64);
    for w in &cfg.ports {
        if let crate::config::WireConfig::Generator(g) = w {
            if let Some(window) = g.max_in_flight {
                n = n.min(window / 4);
            }
        }
    }
    n
}

/// Counters by name, for the stats.
fn named(v: crate::backend::Named) -> std::collections::BTreeMap<String, u64> {
    v.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::poll_flits;
    use crate::config::{DeviceConfig, GeneratorConfig, WireConfig};

    #[test]
    fn a_saturated_engine_looks_at_registers_within_an_eighth_of_a_pipe() {
        let mut cfg = DeviceConfig::new("t", WireConfig::Null);
        cfg.pipe_size = 1 << 20; // 16384 flits: an eighth is 2048
        cfg.tuning.register_poll_flits = 1024;
        assert_eq!(poll_flits(&cfg), 1024);
        cfg.tuning.register_poll_flits = 100_000;
        assert_eq!(poll_flits(&cfg), 2048);
    }

    #[test]
    fn and_within_a_quarter_of_any_generators_window() {
        let mut cfg = DeviceConfig::new("t", WireConfig::Null);
        cfg.pipe_size = 1 << 20;
        cfg.tuning.register_poll_flits = 1024;
        let window = |w| {
            WireConfig::Generator(GeneratorConfig {
                max_in_flight: w,
                ..GeneratorConfig::default()
            })
        };
        cfg.ports = vec![window(None), window(Some(400)), window(Some(2_000))];
        assert_eq!(poll_flits(&cfg), 100);
        cfg.ports = vec![WireConfig::Loopback, window(None)];
        assert_eq!(poll_flits(&cfg), 1024);
    }
}
