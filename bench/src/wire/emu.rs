//! The emulated NIC as a traffic source or sink on a wired port, for
//! `bench wire`: one port wired to a backend, and an application (in this
//! process, through the `enso` library) that either sends frames out of the
//! port as fast as the TX pipe takes them or receives and frees everything
//! the port delivers.
//!
//! Two ways to run it:
//! - [`NicMode::Threaded`]: as users run it, the NIC's engine on its own
//!   thread and the application on another (two polling threads);
//! - [`NicMode::Stepped`]: the application steps the engine itself between
//!   its own passes, so NIC and application share one thread and one core,
//!   as a DPDK application and its driver do.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions};
use nic_emu::{DeviceConfig, Engine, Nic, RunOptions, Stats, WireConfig};
use serde::Serialize;

use crate::frames;
use crate::placement::{Placement, Side};
use rawsock::testnet::Netns;

/// How the NIC and the application share the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NicMode {
    /// Engine thread plus application thread.
    Threaded,
    /// One thread steps the engine and runs the application.
    Stepped,
}

impl NicMode {
    /// `threaded` or `stepped`.
    pub fn name(self) -> &'static str {
        match self {
            NicMode::Threaded => "threaded",
            NicMode::Stepped => "stepped",
        }
    }
}

/// What the application does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sends frames of this length (no FCS) out of the port.
    Source(usize),
    /// Receives and frees whatever arrives.
    Sink,
}

/// Frames per send.
const BATCH: usize = 32;

/// How long the NIC may take to set up the application's pipe.
const SETUP_LIMIT: Duration = Duration::from_secs(10);

/// What a stopped run reports.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Frames the application sent or received.
    pub frames: u64,
    /// The port's frames sent and received on the wire.
    pub port_tx: u64,
    /// See `port_tx`.
    pub port_rx: u64,
    /// The port's backend drops by cause.
    pub wire_drops: BTreeMap<String, u64>,
    /// Drops by the NIC's other causes (pipe full, no match...).
    pub nic_drops: u64,
}

/// A running NIC with its application.
#[derive(Debug)]
pub struct EmuRun {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    worker: Option<JoinHandle<Result<Outcome, String>>>,
}

enum Built {
    Threaded(Nic),
    Stepped(Box<Engine>),
}

static RUNS: AtomicU64 = AtomicU64::new(0);

impl EmuRun {
    /// Builds the NIC with port 0 on `wire` (inside network namespace
    /// `netns` if given, where the backend's socket or device must be
    /// made), starts the application, and returns once it is sending or
    /// ready to receive.
    pub fn start(
        wire: WireConfig,
        mode: NicMode,
        role: Role,
        placement: &Placement,
        netns: Option<&Netns>,
    ) -> Result<EmuRun, String> {
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let mut cfg = DeviceConfig::new(format!("bw{}.{n}", std::process::id()), wire);
        cfg.dir = if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm".into()
        } else {
            std::env::temp_dir()
        };
        if mode == NicMode::Stepped {
            // The engine's cache-line evictions help when the application
            // runs on another core (its next write then finds no copy in
            // the engine's core to invalidate); on the same core they only
            // cost, so the stepped NIC does none.
            cfg.tuning.evict_tx_lines = false;
            cfg.tuning.evict_ahead_lines = 0;
            cfg.tuning.evict_ahead_adaptive = false;
        }
        let engine_core = placement.core_a;
        let build = move || -> Result<Built, String> {
            Ok(match mode {
                NicMode::Threaded => Built::Threaded(Nic::start(
                    cfg,
                    RunOptions {
                        idle_sleep_after: None,
                        core: engine_core,
                        ..Default::default()
                    },
                )?),
                NicMode::Stepped => Built::Stepped(Box::new(Engine::new(cfg)?)),
            })
        };
        let built = match netns {
            Some(ns) => ns
                .enter(build)
                .map_err(|e| format!("cannot enter namespace {}: {e}", ns.name()))??,
            None => build()?,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let pin = Some(placement.clone());
        let worker = {
            let (stop, count, ready) = (stop.clone(), count.clone(), ready.clone());
            std::thread::Builder::new()
                .name("bench-wire-app".into())
                .spawn(move || {
                    if let Some(p) = pin {
                        p.pin_current(Side::A);
                    }
                    work(built, role, &stop, &count, &ready)
                })
                .map_err(|e| format!("cannot start the application thread: {e}"))?
        };
        let mut run = EmuRun {
            stop,
            count,
            worker: Some(worker),
        };
        let until = Instant::now() + SETUP_LIMIT + Duration::from_secs(5);
        while !ready.load(Ordering::Acquire) {
            if run.worker.as_ref().is_some_and(|w| w.is_finished()) || Instant::now() > until {
                return Err(run
                    .finish()
                    .err()
                    .unwrap_or_else(|| "the application did not start".into()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(run)
    }

    /// Frames the application has sent or received so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Stops the application and the NIC.
    pub fn finish(&mut self) -> Result<Outcome, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.worker.take() {
            Some(w) => w
                .join()
                .unwrap_or_else(|_| Err("the application thread panicked".into())),
            None => Err("already stopped".into()),
        }
    }
}

impl Drop for EmuRun {
    fn drop(&mut self) {
        if self.worker.is_some() {
            let _ = self.finish();
        }
    }
}

/// What the application loop needs of the NIC: a step (stepped mode) and
/// its counters.
trait Pump {
    fn pump(&mut self);
    /// Nothing to do this pass: the threaded NIC shares core A with the
    /// application, so the application gives the engine its turn.
    fn idle(&mut self);
    fn stats(&mut self) -> Result<Stats, String>;
}

struct Threaded<'a>(&'a Nic);

impl Pump for Threaded<'_> {
    #[inline]
    fn pump(&mut self) {}
    #[inline]
    fn idle(&mut self) {
        std::thread::yield_now();
    }
    fn stats(&mut self) -> Result<Stats, String> {
        self.0.try_stats().map_err(|e| e.to_string())
    }
}

struct Stepped<'a>(&'a mut Engine);

impl Pump for Stepped<'_> {
    #[inline]
    fn pump(&mut self) {
        self.0.step();
    }
    #[inline]
    fn idle(&mut self) {}
    fn stats(&mut self) -> Result<Stats, String> {
        Ok(self.0.stats())
    }
}

fn work(
    built: Built,
    role: Role,
    stop: &AtomicBool,
    count: &AtomicU64,
    ready: &AtomicBool,
) -> Result<Outcome, String> {
    let opts = match role {
        Role::Source(_) => DeviceOptions {
            pipes: 0,
            tx_pipes: 1,
            ..Default::default()
        },
        Role::Sink => DeviceOptions {
            pipes: 1,
            tx_pipes: 0,
            ..Default::default()
        },
    };
    match built {
        Built::Threaded(nic) => {
            let mut dev = Device::attach_nic(&nic, opts).map_err(|e| e.to_string())?;
            let r = run_role(&mut dev, role, &mut Threaded(&nic), stop, count, ready);
            drop(dev);
            nic.try_stop()?;
            r
        }
        Built::Stepped(mut engine) => {
            let mut dev = Device::attach_engine(&mut *engine, opts).map_err(|e| e.to_string())?;
            let r = run_role(
                &mut dev,
                role,
                &mut Stepped(&mut engine),
                stop,
                count,
                ready,
            );
            drop(dev);
            engine.finish_ports();
            r
        }
    }
}

fn run_role(
    dev: &mut Device,
    role: Role,
    nic: &mut dyn Pump,
    stop: &AtomicBool,
    count: &AtomicU64,
    ready: &AtomicBool,
) -> Result<Outcome, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut frames_done = 0u64;
    match role {
        Role::Source(len) => {
            let tx = dev.alloc_tx_pipe().map_err(|x| e(&x))?;
            let slot = frames::slot_len(len);
            let span = slot * BATCH;
            let bytes = slot * (BATCH - 1) + len;
            // Only the headers are written, as DPDK's txonly does: the NIC
            // reads each frame's length from its IPv4 header, and the
            // payload bytes are whatever the pipe holds.
            let template = frames::udp_frame(len, 0);
            let hdr = &template[..len.min(frames::FLIT)];
            ready.store(true, Ordering::Release);
            while !stop.load(Ordering::Relaxed) {
                nic.pump();
                if dev.tx_space(tx).map_err(|x| e(&x))? < span {
                    nic.idle();
                    continue;
                }
                let buf = dev.tx_buf(tx, span).map_err(|x| e(&x))?;
                for i in 0..BATCH {
                    buf[i * slot..i * slot + hdr.len()].copy_from_slice(hdr);
                }
                dev.send(tx, bytes, 0).map_err(|x| e(&x))?;
                frames_done += BATCH as u64;
                count.store(frames_done, Ordering::Relaxed);
            }
        }
        Role::Sink => {
            let rx = dev.alloc_rx_pipe(true).map_err(|x| e(&x))?;
            let until = Instant::now() + SETUP_LIMIT;
            while nic.stats()?.fallback_pipes < 1 {
                if Instant::now() > until {
                    return Err("the NIC did not set up the receive pipe".into());
                }
                for _ in 0..100 {
                    nic.pump();
                }
                let _ = dev.reap_completions();
                std::thread::sleep(Duration::from_micros(100));
            }
            ready.store(true, Ordering::Release);
            while !stop.load(Ordering::Relaxed) {
                nic.pump();
                let batch = dev.recv(rx).map_err(|x| e(&x))?;
                let (n, bytes) = (batch.packet_count(), batch.len());
                if bytes > 0 {
                    dev.free(rx, bytes).map_err(|x| e(&x))?;
                    frames_done += n as u64;
                    count.store(frames_done, Ordering::Relaxed);
                } else {
                    nic.idle();
                }
            }
        }
    }
    let s = nic.stats()?;
    let port = &s.ports[0];
    let drops = s.drops();
    Ok(Outcome {
        frames: frames_done,
        port_tx: port.counters.tx_frames,
        port_rx: port.counters.rx_frames,
        wire_drops: port.wire_drops.clone(),
        nic_drops: drops
            .iter()
            .filter(|(k, _)| **k != "wire")
            .map(|(_, v)| v)
            .sum(),
    })
}
