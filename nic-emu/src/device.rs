//! Running a device: an engine thread (the hardware), a control endpoint
//! (a Unix socket in the device directory) through which applications in
//! other processes attach, and periodic stats in `stats.json`.
//!
//! The same [`Engine`] runs in-process (tests, single-binary experiments) and
//! in the standalone `nic-emu` process; only how attach requests reach it
//! differs.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use serde::{Deserialize, Serialize};

use crate::config::DeviceConfig;
use crate::counters::Stats;
use crate::engine::{AttachError, AttachInfo, AttachRequest, Engine, EngineError};

pub use enso_abi::control::{
    attach_remote, check_running, ControlRequest, ControlResponse, LocalNicError, CONTROL_SOCKET,
    STATS_FILE,
};

/// Why a running device did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum NicError {
    /// The device was stopped before the request reached it.
    #[error("device stopped")]
    DeviceStopped,
    /// The engine did not answer an attach in time (an attachment it makes
    /// later is undone).
    #[error("device did not answer within {0} ms")]
    AttachTimeout(u128),
    /// The engine refused the attach.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// The engine thread has stopped.
    #[error("the NIC engine has stopped")]
    EngineStopped,
    /// The engine thread did not answer in time.
    #[error("the NIC engine did not answer")]
    NoAnswer,
    /// The engine thread panicked.
    #[error("the NIC engine thread failed")]
    EngineFailed,
    /// The counters could not be written as JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

impl From<NicError> for String {
    fn from(e: NicError) -> Self {
        e.to_string()
    }
}

/// Why a device did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The control socket's path is too long for a Unix socket.
    #[error("{}: too long for a Unix socket path ({len} bytes; shorten the device name or its directory)", .path.display())]
    SocketPath {
        /// The socket's path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
    },
    /// Binding the control socket failed.
    #[error("{}: {source}", .path.display())]
    Bind {
        /// The socket's path.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// Setting up the control socket or starting a thread failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The engine was not made.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<StartError> for String {
    fn from(e: StartError) -> Self {
        e.to_string()
    }
}

/// Why a device's counters snapshot could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {what}", .path.display())]
pub struct StatsFileError {
    /// The snapshot file.
    pub path: PathBuf,
    /// What is wrong.
    pub what: String,
}

impl From<StatsFileError> for String {
    fn from(e: StatsFileError) -> Self {
        e.to_string()
    }
}

enum Cmd {
    Attach(AttachRequest, Sender<Result<AttachInfo, AttachError>>),
    Detach(u32, Sender<bool>),
    Stats(Sender<Stats>),
    /// Runs a closure on the engine (tests, experiments).
    With(Box<dyn FnOnce(&mut Engine) + Send>),
}

/// The sending end of the engine's command channel: every command also
/// wakes the engine if it is parked.
#[derive(Clone)]
struct CmdSender {
    tx: Sender<Cmd>,
    wake: Arc<crate::engine::WakeFile>,
}

impl CmdSender {
    fn send(&self, cmd: Cmd) -> Result<(), crossbeam_channel::SendError<Cmd>> {
        let r = self.tx.send(cmd);
        self.wake.kick();
        r
    }

    fn send_timeout(
        &self,
        cmd: Cmd,
        wait: Duration,
    ) -> Result<(), crossbeam_channel::SendTimeoutError<Cmd>> {
        self.wake.kick();
        let r = self.tx.send_timeout(cmd, wait);
        self.wake.kick();
        r
    }
}

/// How the engine thread runs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Core to pin the engine thread to.
    pub core: Option<usize>,
    /// Accept attaches from other processes on the control socket.
    pub listen: bool,
    /// When idle, sleep after this many empty steps (None: spin, yielding).
    pub idle_sleep_after: Option<u64>,
    /// Park (sleep until an application's register write, a command or
    /// the next timed event wakes the engine) after this long without
    /// work; `None`: never park.
    pub park_after: Option<Duration>,
    /// How often to write `stats.json`.
    pub stats_interval: Duration,
    /// What the control socket lets its clients hold.
    pub control: ControlLimits,
}

/// What the control socket lets its clients (local processes, any of
/// which may be broken or hostile) hold of the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlLimits {
    /// Connections served at once (each has a thread, and an attached
    /// application holds its connection for as long as it is attached);
    /// one more is answered with one error line and closed.
    pub max_connections: usize,
    /// How long a request may take to arrive whole: from the connection
    /// (or its last answer) for a client that holds no attachment, and from
    /// its first byte for one that does. An attached client that sends
    /// nothing is how an attachment lives, and is never cut off.
    pub request_timeout: Duration,
    /// How long the engine may take to answer an attach, and the client to
    /// take the answer. An attachment whose answer is not delivered (the
    /// client went, or did not read it in time) is undone, as is one the
    /// engine makes after the wait for it has ended.
    pub answer_timeout: Duration,
}

impl Default for ControlLimits {
    fn default() -> Self {
        Self {
            max_connections: 256,
            request_timeout: Duration::from_secs(5),
            // Below the library's wait (`enso_abi::control::ATTACH_TIMEOUT`),
            // so that a slow engine is an error line rather than silence.
            answer_timeout: Duration::from_secs(5),
        }
    }
}

/// What the control socket refused or undid.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlCounters {
    /// Connections served.
    pub connections: u64,
    /// Connections refused because [`ControlLimits::max_connections`] were
    /// open.
    pub refused_busy: u64,
    /// Connections closed because a request did not arrive whole within
    /// [`ControlLimits::request_timeout`].
    pub request_timeouts: u64,
    /// Attachments undone because their answer could not be delivered.
    pub undelivered: u64,
    /// Attachments the engine made after the wait for its answer had ended
    /// (the client was told it did not answer), undone.
    pub late_undone: u64,
}

/// The counters behind [`ControlCounters`], shared by the control threads.
#[derive(Debug, Default)]
struct ControlCells {
    connections: AtomicU64,
    refused_busy: AtomicU64,
    request_timeouts: AtomicU64,
    undelivered: AtomicU64,
    late_undone: AtomicU64,
    /// Connections open now.
    open: AtomicUsize,
}

impl ControlCells {
    /// Counts one (statistics only: Relaxed, nothing is read because of
    /// it).
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ControlCounters {
        ControlCounters {
            connections: self.connections.load(Ordering::Relaxed),
            refused_busy: self.refused_busy.load(Ordering::Relaxed),
            request_timeouts: self.request_timeouts.load(Ordering::Relaxed),
            undelivered: self.undelivered.load(Ordering::Relaxed),
            late_undone: self.late_undone.load(Ordering::Relaxed),
        }
    }
}

/// How long an engine spins without work before it parks, by default:
/// long against the gaps between batches at any load that keeps it busy,
/// short against a person's idea of idle.
pub const DEFAULT_PARK_AFTER: Duration = Duration::from_micros(500);

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            core: None,
            listen: false,
            idle_sleep_after: Some(20_000),
            park_after: Some(DEFAULT_PARK_AFTER),
            stats_interval: Duration::from_millis(200),
            control: ControlLimits::default(),
        }
    }
}

/// A running device.
pub struct Nic {
    tx: CmdSender,
    stop: Arc<AtomicBool>,
    engine: Option<JoinHandle<Engine>>,
    listener: Option<JoinHandle<()>>,
    control: Arc<ControlCells>,
    dir: PathBuf,
    name: String,
}

impl std::fmt::Debug for Nic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nic")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .finish()
    }
}

/// A handle through which attach requests reach a running device.
#[derive(Clone)]
pub struct NicControl {
    tx: CmdSender,
    /// The device's stop flag (set once, when it is stopped or dropped).
    stop: Arc<AtomicBool>,
    /// The control socket's counters.
    cells: Arc<ControlCells>,
}

impl std::fmt::Debug for NicControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NicControl")
    }
}

const CMD_TIMEOUT: Duration = Duration::from_secs(10);

impl NicControl {
    /// Attaches an application.
    pub fn attach(&self, req: AttachRequest) -> Result<AttachInfo, NicError> {
        self.attach_within(req, CMD_TIMEOUT)
    }

    /// Attaches, waiting at most `wait` for the engine. An attachment the
    /// engine makes after that is undone: nobody would know it was made.
    fn attach_within(&self, req: AttachRequest, wait: Duration) -> Result<AttachInfo, NicError> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::Attach(req, tx))
            .map_err(|_| NicError::DeviceStopped)?;
        match rx.recv_timeout(wait) {
            Ok(answer) => Ok(answer?),
            Err(_) => {
                self.undo_late_attach(rx);
                Err(NicError::AttachTimeout(wait.as_millis()))
            }
        }
    }

    /// Undoes the attachment the engine makes, after all, for an attach
    /// whose wait ended. The engine takes commands in the order they were
    /// sent, so this one runs after that attach's: the answer, if any, is
    /// in `rx` by then. Were the engine's queue still full after a whole
    /// command wait, a thread waits for the answer instead.
    fn undo_late_attach(&self, rx: Receiver<Result<AttachInfo, AttachError>>) {
        let cells = self.cells.clone();
        let undo = Cmd::With(Box::new(move |e: &mut Engine| {
            if let Ok(Ok(info)) = rx.try_recv() {
                e.detach(info.app_id);
                ControlCells::bump(&cells.late_undone);
            }
        }));
        if let Err(crossbeam_channel::SendTimeoutError::Timeout(undo)) =
            self.tx.send_timeout(undo, CMD_TIMEOUT)
        {
            // Only when the engine is wedged: a thread waits for room.
            let tx = self.tx.clone();
            let _ = std::thread::Builder::new()
                .name("nic-emu-undo".into())
                .spawn(move || tx.send(undo));
        }
    }

    pub fn detach(&self, app_id: u32) -> bool {
        let (tx, rx) = bounded(1);
        if self.tx.send(Cmd::Detach(app_id, tx)).is_err() {
            return false;
        }
        rx.recv_timeout(CMD_TIMEOUT).unwrap_or(false)
    }

    /// Whether the device still runs: false once [`Nic::stop`] (or its
    /// drop) began stopping it. A status flag, not a synchronisation point:
    /// nothing is read because of it.
    pub fn is_running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }
}

/// Checks that `sock` is a path a Unix socket can be bound to (at most 107
/// bytes on Linux), before anything is made: binding fails only after the
/// device directory exists.
fn check_socket_path(sock: &Path) -> Result<(), StartError> {
    std::os::unix::net::SocketAddr::from_pathname(sock)
        .map(drop)
        .map_err(|_| StartError::SocketPath {
            path: sock.to_path_buf(),
            len: sock.as_os_str().len(),
        })
}

impl Nic {
    /// Starts a device: creates its directory and runs its engine thread.
    pub fn start(cfg: DeviceConfig, opts: RunOptions) -> Result<Self, StartError> {
        let dir = cfg.device_dir();
        let sock = dir.join(CONTROL_SOCKET);
        if opts.listen {
            check_socket_path(&sock)?;
        }
        // The engine makes the directory (`devdir::create`): it refuses a
        // running device's, and anything that is not a dead device's.
        let name = cfg.name.clone();
        let engine = Engine::new(cfg)?;
        let (tx, rx) = bounded::<Cmd>(64);
        let tx = CmdSender {
            tx,
            wake: engine.wake_file().clone(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let cells = Arc::new(ControlCells::default());
        // A device that does not start leaves no directory behind.
        let undo = |e: StartError| {
            crate::devdir::remove(&dir);
            e
        };
        let listener = if opts.listen {
            let l = UnixListener::bind(&sock).map_err(|source| {
                undo(StartError::Bind {
                    path: sock.clone(),
                    source,
                })
            })?;
            l.set_nonblocking(true).map_err(|e| undo(e.into()))?;
            let ctl = NicControl {
                tx: tx.clone(),
                stop: stop.clone(),
                cells: cells.clone(),
            };
            let stop2 = stop.clone();
            let limits = opts.control.clone();
            Some(
                std::thread::Builder::new()
                    .name(format!("{name}-control"))
                    .spawn(move || serve(l, ctl, stop2, limits))
                    .map_err(|e| undo(e.into()))?,
            )
        } else {
            None
        };
        let stop2 = stop.clone();
        let stats_path = dir.join(STATS_FILE);
        let handle = std::thread::Builder::new()
            .name(format!("{name}-engine"))
            .spawn(move || run_engine(engine, rx, stop2, opts, stats_path))?;
        Ok(Self {
            tx,
            stop,
            engine: Some(handle),
            listener,
            control: cells,
            dir,
            name,
        })
    }

    pub fn control(&self) -> NicControl {
        NicControl {
            tx: self.tx.clone(),
            stop: self.stop.clone(),
            cells: self.control.clone(),
        }
    }

    /// What the control socket refused or undid so far.
    pub fn control_counters(&self) -> ControlCounters {
        self.control.snapshot()
    }

    /// Attaches an application.
    pub fn attach(&self, req: AttachRequest) -> Result<AttachInfo, NicError> {
        self.control().attach(req)
    }

    pub fn detach(&self, app_id: u32) -> bool {
        self.control().detach(app_id)
    }

    /// A snapshot of the counters, taken by the engine thread.
    ///
    /// # Panics
    /// If the engine thread has stopped; see [`Nic::try_stats`].
    pub fn stats(&self) -> Stats {
        self.try_stats().expect("engine thread alive")
    }

    /// A snapshot of the counters, or why the engine could not give one.
    pub fn try_stats(&self) -> Result<Stats, NicError> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::Stats(tx))
            .map_err(|_| NicError::EngineStopped)?;
        rx.recv_timeout(CMD_TIMEOUT).map_err(|_| NicError::NoAnswer)
    }

    /// Runs `f` on the engine thread and returns its result.
    ///
    /// # Panics
    /// If the engine thread has stopped; see [`Nic::try_with_engine`].
    pub fn with_engine<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> R {
        self.try_with_engine(f).expect("engine thread alive")
    }

    /// Runs `f` on the engine thread, or says why it could not.
    pub fn try_with_engine<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> Result<R, NicError> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::With(Box::new(move |e| {
                let _ = tx.send(f(e));
            })))
            .map_err(|_| NicError::EngineStopped)?;
        rx.recv_timeout(CMD_TIMEOUT).map_err(|_| NicError::NoAnswer)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops the engine and returns its final counters.
    ///
    /// # Panics
    /// If the engine thread panicked; see [`Nic::try_stop`].
    pub fn stop(self) -> Stats {
        self.try_stop().expect("engine thread joined")
    }

    /// Stops the engine and returns its final counters, or an error if the
    /// engine thread panicked. The device directory is removed either way.
    pub fn try_stop(mut self) -> Result<Stats, NicError> {
        self.shutdown().ok_or(NicError::EngineFailed)
    }

    fn shutdown(&mut self) -> Option<Stats> {
        self.stop.store(true, Ordering::Relaxed);
        self.tx.wake.kick();
        let stats = self.engine.take().and_then(|h| h.join().ok()).map(|mut e| {
            // The final counters include what the backends' I/O threads
            // still had queued (a pcap port's writer, a TAP device).
            e.finish_ports();
            let s = e.stats();
            e.cleanup();
            s
        });
        if let Some(l) = self.listener.take() {
            let _ = l.join();
        }
        crate::devdir::remove(&self.dir);
        stats
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run_engine(
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

/// The engine thread's loop, one turn at a time: what [`Nic::start`]'s
/// thread runs until the device stops, and what an instruction-count
/// check runs on its own thread ([`EngineLoop::detached`]) so that the
/// loop's own code is measured deterministically, not only
/// [`Engine::step`].
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

fn serve(l: UnixListener, ctl: NicControl, stop: Arc<AtomicBool>, limits: ControlLimits) {
    let cells = ctl.cells.clone();
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                // Only this thread adds to `open`; a client's guard takes
                // away. A count, nothing is read because of it: Relaxed.
                if cells.open.load(Ordering::Relaxed) >= limits.max_connections {
                    ControlCells::bump(&cells.refused_busy);
                    refuse(
                        &s,
                        &format!(
                            "device busy: {} control connections open, the most it serves",
                            limits.max_connections
                        ),
                    );
                    continue;
                }
                cells.open.fetch_add(1, Ordering::Relaxed);
                let guard = OpenConnection(cells.clone());
                let (ctl, limits) = (ctl.clone(), limits.clone());
                let spawned = std::thread::Builder::new()
                    .name("nic-emu-client".into())
                    .stack_size(CLIENT_STACK)
                    .spawn(move || {
                        let _guard = guard;
                        ControlCells::bump(&ctl.cells.connections);
                        client(&s, &ctl, &limits);
                    });
                if spawned.is_err() {
                    // The closure (and its guard and socket) was dropped.
                    ControlCells::bump(&cells.refused_busy);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => wait_readable(&l, ACCEPT_POLL),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// How often the control thread looks at the stop flag while no one
/// connects: the longest a stop waits for it.
const ACCEPT_POLL: Duration = Duration::from_millis(50);

/// Sleeps until `l` has a connection to accept or `timeout` passes
/// (an idle device's control thread sleeps instead of polling).
fn wait_readable(l: &UnixListener, timeout: Duration) {
    use std::os::fd::AsRawFd;
    let mut fds = libc::pollfd {
        fd: l.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call; the listener
    // outlives it. Errors (EINTR) only end the wait early.
    unsafe {
        libc::poll(&mut fds, 1, timeout.as_millis() as libc::c_int);
    }
}

/// Stack of a control connection's thread (it parses one short line and
/// waits).
const CLIENT_STACK: usize = 256 << 10;

/// One open control connection; dropping it (the thread ended, or never
/// started) frees its place.
struct OpenConnection(Arc<ControlCells>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Answers a connection that is not served with one error line, without
/// waiting: a new connection's send buffer is empty.
fn refuse(s: &UnixStream, why: &str) {
    let line = answer_line(&ControlResponse::Error(why.to_string()));
    // SAFETY: `s` is an open socket and `line` a live buffer of the length
    // given; MSG_DONTWAIT keeps it from blocking, MSG_NOSIGNAL from raising
    // SIGPIPE if the client has gone.
    let _ = unsafe {
        libc::send(
            s.as_raw_fd(),
            line.as_ptr().cast(),
            line.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
}

fn answer_line(resp: &ControlResponse) -> Vec<u8> {
    let mut out = serde_json::to_vec(resp).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Sends `line` whole, within the socket's send timeout; false if the
/// client has gone or did not take it in time. Never raises SIGPIPE (an
/// application may embed the device and not ignore it).
fn send_line(s: &UnixStream, mut line: &[u8]) -> bool {
    while !line.is_empty() {
        // SAFETY: as in `refuse`; the send blocks at most for the socket's
        // send timeout.
        let n = unsafe {
            libc::send(
                s.as_raw_fd(),
                line.as_ptr().cast(),
                line.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        line = &line[n as usize..];
    }
    true
}

/// Longest control request accepted (bytes, newline included).
const MAX_REQUEST: usize = 64 << 10;

/// What reading a request came to.
enum Request {
    /// A whole line, its newline included.
    Line(Vec<u8>),
    /// The client closed the connection (or it failed).
    Closed,
    /// More than [`MAX_REQUEST`] bytes without a newline.
    TooLong,
    /// No whole request within the request timeout.
    TimedOut,
}

/// Reads the next request line from `s`. Bytes read past it stay in
/// `pending` for the next call. `idle_ok`: the client holds an attachment,
/// so it may send nothing for as long as it likes; the timeout starts at
/// its first byte. Otherwise it starts now.
fn read_request(
    s: &UnixStream,
    pending: &mut Vec<u8>,
    idle_ok: bool,
    timeout: Duration,
) -> Request {
    let mut deadline = (!idle_ok || !pending.is_empty()).then(|| Instant::now() + timeout);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = pending.iter().position(|&b| b == b'\n') {
            if i >= MAX_REQUEST {
                return Request::TooLong;
            }
            let rest = pending.split_off(i + 1);
            return Request::Line(std::mem::replace(pending, rest));
        }
        if pending.len() >= MAX_REQUEST {
            return Request::TooLong;
        }
        let wait = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Request::TimedOut,
            },
        };
        if s.set_read_timeout(wait).is_err() {
            return Request::Closed;
        }
        match (&mut &*s).read(&mut chunk) {
            Ok(0) => return Request::Closed,
            Ok(n) => {
                pending.extend_from_slice(&chunk[..n]);
                deadline.get_or_insert_with(|| Instant::now() + timeout);
            }
            // The receive timeout ran out (the loop checks the deadline).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Request::Closed,
        }
    }
}

/// One client connection: attach, then hold the attachment until the client
/// closes the connection (or its process exits), then detach. A client
/// that does not complete a request in time is told so and cut off; an
/// attachment whose answer it does not take is undone.
fn client(s: &UnixStream, ctl: &NicControl, limits: &ControlLimits) {
    let _ = s.set_nonblocking(false);
    if s.set_write_timeout(Some(limits.answer_timeout)).is_err() {
        return;
    }
    let mut pending = Vec::new();
    let mut attached = Vec::new();
    loop {
        // A request is one short JSON line; a client that sends more without
        // a newline gets an error and is cut off, rather than growing this
        // buffer without bound. The line is read as bytes: one that is not
        // UTF-8 is a bad request like any other, not a broken connection.
        let line = match read_request(
            s,
            &mut pending,
            !attached.is_empty(),
            limits.request_timeout,
        ) {
            Request::Line(l) => l,
            Request::Closed => break,
            Request::TooLong => {
                let why = format!("request longer than {MAX_REQUEST} bytes");
                send_line(s, &answer_line(&ControlResponse::Error(why)));
                break;
            }
            Request::TimedOut => {
                ControlCells::bump(&ctl.cells.request_timeouts);
                let why = format!(
                    "no complete request within {} ms; closing the connection",
                    limits.request_timeout.as_millis()
                );
                send_line(s, &answer_line(&ControlResponse::Error(why)));
                break;
            }
        };
        let request = std::str::from_utf8(&line)
            .map_err(|e| format!("bad request: not UTF-8: {e}"))
            .and_then(|l| {
                serde_json::from_str::<ControlRequest>(l.trim())
                    .map_err(|e| format!("bad request: {e}"))
            });
        let resp = match request {
            Ok(ControlRequest::Attach(req)) => {
                match ctl.attach_within(req, limits.answer_timeout) {
                    Ok(info) => {
                        attached.push(info.app_id);
                        ControlResponse::Attached(info)
                    }
                    Err(e) => ControlResponse::Error(e.to_string()),
                }
            }
            Err(e) => ControlResponse::Error(e),
        };
        if !send_line(s, &answer_line(&resp)) {
            // Nobody knows of the attachment it announced: undone below.
            if matches!(resp, ControlResponse::Attached(_)) {
                ControlCells::bump(&ctl.cells.undelivered);
            }
            break;
        }
    }
    for id in attached {
        ctl.detach(id);
    }
}

/// Reads the stats snapshot of the device in `dir`. The snapshot outlives
/// a device whose process was killed: see [`check_running`].
pub fn read_stats(dir: &Path) -> Result<Stats, StatsFileError> {
    let p = dir.join(STATS_FILE);
    let err = |e: &dyn std::fmt::Display| StatsFileError {
        path: p.clone(),
        what: e.to_string(),
    };
    // The NIC writes a regular file; anything else (a FIFO would block the
    // read forever) is refused, as is a file far larger than any snapshot.
    let meta = std::fs::metadata(&p).map_err(|e| err(&e))?;
    if !meta.is_file() {
        return Err(err(&"not a regular file"));
    }
    if meta.len() > MAX_STATS_FILE {
        return Err(err(&format!("larger than {MAX_STATS_FILE} bytes")));
    }
    let s = std::fs::read(&p).map_err(|e| err(&e))?;
    serde_json::from_slice(&s).map_err(|e| {
        // serde quotes the offending value whole: keep the line short.
        let mut m = e.to_string();
        if m.len() > 200 {
            let cut = (0..=200)
                .rev()
                .find(|&i| m.is_char_boundary(i))
                .unwrap_or(0);
            m.truncate(cut);
            m.push_str("...");
        }
        err(&m)
    })
}

/// Largest `stats.json` read (a snapshot of thousands of pipes is far
/// smaller).
const MAX_STATS_FILE: u64 = 64 << 20;

impl enso_abi::control::LocalNic for NicControl {
    fn ring_sizes(&self) -> Result<(usize, u32), LocalNicError> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::With(Box::new(move |e| {
                let _ = tx.send((e.config().pipe_size, e.config().notif_ring_entries));
            })))
            .map_err(|_| NicError::EngineStopped)?;
        Ok(rx
            .recv_timeout(CMD_TIMEOUT)
            .map_err(|_| NicError::NoAnswer)?)
    }
    fn attach(&self, req: AttachRequest) -> Result<AttachInfo, LocalNicError> {
        Ok(NicControl::attach(self, req)?)
    }
    fn detach(&self, app_id: u32) -> bool {
        NicControl::detach(self, app_id)
    }
    fn is_running(&self) -> bool {
        NicControl::is_running(self)
    }
    fn handle(&self) -> Box<dyn enso_abi::control::LocalNic + Send> {
        Box::new(self.clone())
    }
    fn stats_json(&self) -> Result<String, LocalNicError> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::Stats(tx))
            .map_err(|_| NicError::EngineStopped)?;
        let stats = rx
            .recv_timeout(CMD_TIMEOUT)
            .map_err(|_| NicError::NoAnswer)?;
        Ok(serde_json::to_string(&stats).map_err(NicError::Json)?)
    }
}

impl enso_abi::control::LocalNic for Nic {
    fn ring_sizes(&self) -> Result<(usize, u32), LocalNicError> {
        self.control().ring_sizes()
    }
    fn attach(&self, req: AttachRequest) -> Result<AttachInfo, LocalNicError> {
        Ok(Nic::attach(self, req)?)
    }
    fn detach(&self, app_id: u32) -> bool {
        Nic::detach(self, app_id)
    }
    fn is_running(&self) -> bool {
        self.control().is_running()
    }
    fn handle(&self) -> Box<dyn enso_abi::control::LocalNic + Send> {
        Box::new(self.control())
    }
    fn stats_json(&self) -> Result<String, LocalNicError> {
        self.control().stats_json()
    }
}
