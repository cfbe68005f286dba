//! A deterministic, single-threaded echo datapath: the NIC engine is stepped
//! by the caller, then the application polls, alternately.
//!
//! Nothing depends on timing, so the counters (PCIe bytes, notifications)
//! are the same on every run and every machine, and the run can be
//! analysed under a cache simulator. The schedule is explicit: each round
//! the engine takes `steps_per_poll` steps (the generator offers up to
//! `burst` frames per step, within its in-flight window), then the
//! application handles everything it finds.
//!
//! [`Stepped::engine_phase`] and [`Stepped::app_phase`] are never inlined,
//! so a profile attributes the two sides to separate functions.
//!
//! With [`SteppedConfig::engine_loop`] the engine is driven through the
//! engine thread's own loop ([`EngineLoop::turn`]: its command and stop
//! checks, its idle handling) until a turn finds no work, as a threaded
//! engine catches up between the application's passes; the schedule stays
//! explicit, so that loop's instructions are counted deterministically too.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use enso::{Device, DeviceOptions, EnsoDriver, PacketizedDriver};
use enso_apps::echo::TestFrameEcho;
use nic_emu::{
    DeviceConfig, Engine, EngineLoop, GeneratorConfig, NotificationMode, RunOptions, SizeSpec,
    Stats, VerifyLevel, WireConfig,
};
use serde::{Deserialize, Serialize};

use crate::emu::{Driver, Interface};
use crate::frames;

/// How a stepped run is built and scheduled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteppedConfig {
    /// The application's interface.
    pub interface: Interface,
    /// Packet size on the wire with FCS; frames are 4 B shorter.
    pub wire_size: usize,
    /// Pipes or RSS queues.
    pub pipes: u32,
    /// Generator flows.
    pub flows: u32,
    /// Generator frames per engine step at most.
    pub burst: usize,
    /// Most frames in flight.
    pub window: u64,
    /// Engine steps before each application pass.
    pub steps_per_poll: u32,
    /// Drive the engine through the engine thread's loop, turning until a
    /// turn finds no work (at most [`MAX_LOOP_TURNS`]), instead of
    /// `steps_per_poll` steps; register writes are then looked at as a
    /// threaded engine does (deferred while saturated, by flits written).
    #[serde(default)]
    pub engine_loop: bool,
    /// Ensō notification mode.
    pub notification_mode: NotificationMode,
    /// Bytes per pipe.
    pub pipe_size: usize,
    /// Entries per notification ring (RX and TX).
    pub notif_ring_entries: u32,
    /// Packetized: RX and TX ring entries.
    pub rx_ring: u32,
    /// See `rx_ring`.
    pub tx_ring: u32,
    /// Packetized: frames per rx_burst.
    pub app_burst: usize,
    /// Packetized: descriptors the NIC fetches per read.
    pub desc_fetch: u32,
    /// Packetized: RX descriptor write-backs per TLP.
    pub desc_writeback: u32,
}

impl SteppedConfig {
    /// One pipe or queue, 16 flows, bursts of 32, window 256, one step per
    /// poll, the real NIC's 2 MiB pipes and 16384-entry notification rings,
    /// 1024-entry descriptor rings, and the device's default descriptor
    /// fetch (4) and write-back (1).
    pub fn new(interface: Interface, wire_size: usize) -> Self {
        let d = DeviceConfig::new("x", WireConfig::Null);
        SteppedConfig {
            interface,
            wire_size,
            pipes: 1,
            flows: 16,
            burst: 32,
            window: 256,
            steps_per_poll: 1,
            engine_loop: false,
            notification_mode: NotificationMode::Reactive,
            pipe_size: 2 << 20,
            notif_ring_entries: d.notif_ring_entries,
            rx_ring: 1024,
            tx_ring: 1024,
            app_burst: 32,
            desc_fetch: d.desc_fetch,
            desc_writeback: d.desc_writeback,
        }
    }

    fn generator(&self) -> GeneratorConfig {
        GeneratorConfig {
            sizes: SizeSpec::Fixed(frames::frame_len_for_wire_size(self.wire_size)),
            flows: self.flows,
            max_in_flight: Some(self.window),
            verify: VerifyLevel::Sequence,
            burst: self.burst,
            paused: true,
            ..Default::default()
        }
    }
}

/// Turns of the engine loop per application pass at most
/// ([`SteppedConfig::engine_loop`]).
pub const MAX_LOOP_TURNS: u32 = 10_000;

static RUNS: AtomicU64 = AtomicU64::new(0);

/// A stepped engine with an echo application attached.
#[derive(Debug)]
pub struct Stepped {
    // Dropped in this order: the application, then the engine (which
    // removes the application's files), then the directory.
    driver: Driver,
    echo: TestFrameEcho,
    nic: EngineLoop,
    cfg: SteppedConfig,
    dir: PathBuf,
}

impl Stepped {
    /// Builds the device (under /dev/shm), attaches the application, sets
    /// up its pipes or queues and releases the generator.
    pub fn new(cfg: SteppedConfig) -> Result<Stepped, String> {
        if !(frames::MIN_WIRE_SIZE..=frames::MAX_WIRE_SIZE).contains(&cfg.wire_size) {
            return Err(format!("packet size {} outside 64..=1518", cfg.wire_size));
        }
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let name = format!("bs{}.{n}", std::process::id());
        let mut dc = DeviceConfig::new(name, WireConfig::Generator(cfg.generator()));
        dc.notification_mode = cfg.notification_mode;
        dc.pipe_size = cfg.pipe_size;
        dc.notif_ring_entries = cfg.notif_ring_entries;
        dc.desc_fetch = cfg.desc_fetch;
        dc.desc_writeback = cfg.desc_writeback;
        // The rounds decide how far the NIC runs ahead of the application:
        // it applies register writes in every step (or, driven through its
        // loop, after so many flits as a threaded engine does), and nothing
        // depends on the clock, so runs are deterministic.
        if cfg.engine_loop {
            dc.tuning.register_poll_ns = u64::MAX;
        } else {
            dc.tuning.register_poll_flits = 0;
        }
        // Nor on the time each choice takes.
        dc.tuning.evict_ahead_adaptive = false;
        let dir = dc.device_dir();
        let mut engine = Engine::new(dc)?;
        let opts = match cfg.interface {
            Interface::Enso => DeviceOptions {
                pipes: cfg.pipes,
                tx_pipes: 0,
                ..Default::default()
            },
            Interface::Packetized => DeviceOptions {
                pipes: 0,
                tx_pipes: 0,
                queues: cfg.pipes,
                rx_ring: cfg.rx_ring,
                tx_ring: cfg.tx_ring,
                pool_buffers: cfg.pipes * (cfg.rx_ring + cfg.tx_ring),
                ..Default::default()
            },
        };
        let dev = Device::attach_engine(&mut engine, opts).map_err(|e| e.to_string())?;
        let driver = match cfg.interface {
            Interface::Enso => {
                let mut d = EnsoDriver::new(dev);
                d.add_fallback_pipes(cfg.pipes).map_err(|e| e.to_string())?;
                Driver::Enso(d)
            }
            Interface::Packetized => {
                let mut d = PacketizedDriver::new(dev, cfg.app_burst);
                d.add_rss_queues_on(0, cfg.pipes)
                    .map_err(|e| e.to_string())?;
                Driver::Packetized(d)
            }
        };
        let mut s = Stepped {
            driver,
            echo: TestFrameEcho::default(),
            nic: EngineLoop::detached(
                engine,
                RunOptions {
                    // Spin when idle and never park (a count must not depend
                    // on the clock), and never look at the clock for the
                    // counters file.
                    idle_sleep_after: None,
                    park_after: None,
                    stats_interval: std::time::Duration::MAX,
                    ..Default::default()
                },
            ),
            cfg,
            dir,
        };
        for _ in 0..1000 {
            if s.nic.engine().stats().fallback_pipes >= s.cfg.pipes as usize {
                break;
            }
            s.nic.engine_mut().run_until_idle(100);
            s.app_phase()?;
        }
        if s.nic.engine().stats().fallback_pipes < s.cfg.pipes as usize {
            return Err("the NIC did not set up the application's pipes".into());
        }
        s.nic.engine_mut().set_generators_paused(false);
        Ok(s)
    }

    /// The configuration.
    pub fn config(&self) -> &SteppedConfig {
        &self.cfg
    }

    /// The NIC's side of a round: `steps_per_poll` engine steps, or the
    /// engine loop's turns until one finds no work. Returns the work the
    /// steps did, or the turns taken.
    #[inline(never)]
    pub fn engine_phase(&mut self) -> usize {
        if self.cfg.engine_loop {
            let mut turns = 0;
            while turns < MAX_LOOP_TURNS {
                self.nic.turn();
                turns += 1;
                if self.nic.idle_turns() > 0 {
                    break;
                }
            }
            return turns as usize;
        }
        let mut w = 0;
        for _ in 0..self.cfg.steps_per_poll {
            w += self.nic.engine_mut().step();
        }
        w
    }

    /// The application's side of a round: poll until there is nothing
    /// left. Returns the frames handled.
    #[inline(never)]
    pub fn app_phase(&mut self) -> Result<usize, String> {
        // The packetized driver polls one queue per call: stop after a
        // whole cycle of empty queues.
        let idle_polls = match self.cfg.interface {
            Interface::Enso => 1,
            Interface::Packetized => self.cfg.pipes.max(1),
        };
        let mut total = 0;
        let mut zeros = 0;
        while zeros < idle_polls {
            let n = self
                .driver
                .poll(&mut self.echo)
                .map_err(|e| e.to_string())?;
            total += n;
            zeros = if n == 0 { zeros + 1 } else { 0 };
        }
        Ok(total)
    }

    /// One round: the engine's steps, then the application's pass.
    pub fn round(&mut self) -> Result<usize, String> {
        self.engine_phase();
        self.app_phase()
    }

    /// Frames returned to the generator so far.
    pub fn returned(&self) -> u64 {
        self.nic
            .engine()
            .stats()
            .generator(0)
            .map_or(0, |g| g.returned)
    }

    /// Runs rounds until `packets` more frames have come back to the
    /// generator. Fails if a round makes no progress 1000 times in a row.
    pub fn run_packets(&mut self, packets: u64) -> Result<u64, String> {
        let start = self.returned();
        let mut stalled = 0;
        let mut last = start;
        let mut rounds = 0u64;
        loop {
            self.round()?;
            rounds += 1;
            // Reading the counters costs a snapshot: not every round.
            if rounds.is_multiple_of(16) {
                let now = self.returned();
                if now - start >= packets {
                    return Ok(now - start);
                }
                if now == last {
                    stalled += 1;
                    if stalled > 64 {
                        return Err(format!(
                            "the echo datapath stalled: {:?}",
                            self.nic.engine().stats().drops()
                        ));
                    }
                } else {
                    stalled = 0;
                }
                last = now;
            }
        }
    }

    /// The NIC's counters.
    pub fn stats(&self) -> Stats {
        self.nic.engine().stats()
    }

    /// Clears the NIC's PCIe counters.
    pub fn reset_pcie(&mut self) {
        self.nic.engine_mut().reset_pcie();
    }

    /// The application's device handle.
    pub fn device(&self) -> &Device {
        self.driver.device()
    }
}

impl Drop for Stepped {
    fn drop(&mut self) {
        self.nic.engine_mut().cleanup();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_interfaces_echo_deterministically() {
        for i in Interface::BOTH {
            let mut cfg = SteppedConfig::new(i, 64);
            cfg.pipe_size = 64 << 10;
            cfg.rx_ring = 256;
            cfg.tx_ring = 256;
            let run = |cfg: &SteppedConfig| {
                let mut s = Stepped::new(cfg.clone()).unwrap();
                let n = s.run_packets(2000).unwrap();
                let st = s.stats();
                (n, st.pcie.total().link_bytes, st.total_drops())
            };
            let a = run(&cfg);
            let b = run(&cfg);
            assert!(a.0 >= 2000);
            assert_eq!(a.2, 0, "{i}: no drops");
            assert_eq!(a, b, "{i}: the same on every run");
        }
    }
}
