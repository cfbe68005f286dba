//! The engine thread's loop: steps, control commands, the counters file
//! and the idle wait.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::{Cmd, RunOptions};
use crate::engine::Engine;

pub(super) fn run_engine(
    e: Engine,
    rx: Receiver<Cmd>,
    stop: Arc<AtomicBool>,
    opts: RunOptions,
    stats_path: PathBuf,
) -> Engine {
    if let Some(c) = opts.core {
        if !crate::cores::pin_current(c) {
            eprintln!("nic-emu: could not pin the engine to core {c}; running unpinned");
        }
    }
    let mut l = EngineLoop::new(e, rx, None, stop, opts, Some(stats_path));
    while l.turn() {}
    l.into_engine()
}

/// The engine thread's loop, one turn at a time: what
/// [`Nic::start`](super::Nic::start)'s thread runs until the device stops,
/// and what an instruction-count check runs on its own thread
/// ([`EngineLoop::detached`]) so that the loop's own code is measured
/// deterministically, not only [`Engine::step`].
pub struct EngineLoop {
    engine: Engine,
    rx: Receiver<Cmd>,
    /// Keeps a detached loop's command channel open (no one sends on it).
    _tx: Option<Sender<Cmd>>,
    stop: Arc<AtomicBool>,
    opts: RunOptions,
    /// Where the periodic counters go; `None`: nowhere.
    stats_path: Option<PathBuf>,
    /// Turns in a row that found no work.
    idle: u64,
    /// When the current spell without work began (see `park_after`).
    idle_since: std::time::Instant,
    /// The last idle turn parked: the next one without work parks at once.
    rested: bool,
    turns: u64,
    last_stats: std::time::Instant,
}

impl std::fmt::Debug for EngineLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineLoop")
            .field("turns", &self.turns)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

impl EngineLoop {
    fn new(
        engine: Engine,
        rx: Receiver<Cmd>,
        tx: Option<Sender<Cmd>>,
        stop: Arc<AtomicBool>,
        opts: RunOptions,
        stats_path: Option<PathBuf>,
    ) -> Self {
        Self {
            engine,
            rx,
            _tx: tx,
            stop,
            opts,
            stats_path,
            idle: 0,
            idle_since: std::time::Instant::now(),
            rested: false,
            turns: 0,
            last_stats: std::time::Instant::now(),
        }
    }

    /// The loop of a device that no control thread feeds and that writes
    /// no counters file, run by the caller's thread.
    pub fn detached(engine: Engine, opts: RunOptions) -> Self {
        let (tx, rx) = bounded::<Cmd>(1);
        let stop = Arc::new(AtomicBool::new(false));
        Self::new(engine, rx, Some(tx), stop, opts, None)
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, to attach applications to or change (detached loops).
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Turns that found no work, in a row.
    pub fn idle_turns(&self) -> u64 {
        self.idle
    }

    /// Sleeps until an application's register write or a command wakes
    /// the engine, or until the next event it must be awake for
    /// ([`Engine::park_limit`]). The protocol is `enso_abi::wake`'s: after
    /// announcing the sleep, one more look for work, commands and the stop
    /// flag, so that nothing published before the announcement is slept
    /// through.
    /// Returns whether it slept (and found no work on the way in).
    fn park(&mut self) -> bool {
        let Some(limit) = self.engine.park_limit() else {
            return false;
        };
        let wake = self.engine.wake_file().clone();
        let s = wake.sleeper();
        let seq = s.prepare();
        if !self.rx.is_empty() || self.stop.load(Ordering::Relaxed) || self.engine.step() > 0 {
            s.done();
            self.idle = 0;
            self.engine.wake_waiters();
            return false;
        }
        enso_abi::wake::wait(s.word(), seq, limit);
        let woken = s.word().load(Ordering::Relaxed) != seq;
        s.done();
        self.engine.note_park(woken);
        // The next turn looks for work; if it finds none, the engine parks
        // again at once (a sleep that ran out is no reason to spin).
        true
    }

    /// One turn: one engine step; when it found no work, and every 64th
    /// turn, the control commands, the stop flag and the counters file;
    /// then, after a turn without work, the idle wait. Returns `false`
    /// once the device is to stop (its counters file written).
    #[inline]
    pub fn turn(&mut self) -> bool {
        let w = self.engine.step();
        self.turns += 1;
        if w == 0 {
            self.idle += 1;
        } else {
            self.idle = 0;
            self.rested = false;
            // Notifications and completions this turn wrote wake the
            // applications that wait for them.
            self.engine.wake_waiters();
        }
        if w == 0 || self.turns.is_multiple_of(64) {
            while let Ok(cmd) = self.rx.try_recv() {
                let e = &mut self.engine;
                match cmd {
                    Cmd::Attach(req, reply) => {
                        let _ = reply.send(e.attach(&req));
                    }
                    Cmd::Detach(id, reply) => {
                        let _ = reply.send(e.detach(id));
                    }
                    Cmd::Stats(reply) => {
                        let _ = reply.send(e.stats());
                    }
                    Cmd::With(f) => f(e),
                }
            }
            if self.stop.load(Ordering::Relaxed) {
                if let Some(p) = &self.stats_path {
                    write_stats(&self.engine, p);
                }
                return false;
            }
            if self.last_stats.elapsed() >= self.opts.stats_interval {
                if let Some(p) = &self.stats_path {
                    write_stats(&self.engine, p);
                }
                self.last_stats = std::time::Instant::now();
            }
        }
        if self.idle > 0 {
            if let Some(after) = self.opts.park_after {
                if self.idle == 1 && !self.rested {
                    self.idle_since = std::time::Instant::now();
                } else if self.rested
                    || (self.idle.is_multiple_of(64) && self.idle_since.elapsed() >= after)
                {
                    self.rested = self.park();
                    return true;
                }
            }
            match self.opts.idle_sleep_after {
                Some(k) if self.idle > k => std::thread::sleep(Duration::from_micros(50)),
                _ if self.idle.is_multiple_of(256) => std::thread::yield_now(),
                _ => std::hint::spin_loop(),
            }
        }
        true
    }

    /// The engine, once the loop is over.
    pub fn into_engine(self) -> Engine {
        self.engine
    }
}

fn write_stats(e: &Engine, path: &Path) {
    let tmp = path.with_extension("json.tmp");
    if let Ok(s) = serde_json::to_vec_pretty(&e.stats()) {
        if std::fs::write(&tmp, s).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}
