//! Running a device: an engine thread (the hardware), a control endpoint
//! (a Unix socket in the device directory) through which applications in
//! other processes attach, and periodic stats in `stats.json`.
//!
//! The same [`Engine`] runs in-process (tests, single-binary experiments) and
//! in the standalone `nic-emu` process; only how attach requests reach it
//! differs.
//!
//! The engine thread's loop is [`EngineLoop`]; the control socket's server
//! lives in `control`, the counters snapshot read back in [`read_stats`],
//! and what running a device fails with in [`NicError`] and
//! [`StartError`].

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use serde::{Deserialize, Serialize};

use crate::config::DeviceConfig;
use crate::counters::Stats;
use crate::engine::{AttachError, AttachInfo, AttachRequest, Engine};

pub use enso_abi::control::{
    attach_remote, check_running, ControlRequest, ControlResponse, LocalNicError, CONTROL_SOCKET,
    STATS_FILE,
};

mod control;
mod engine_loop;
mod error;
mod snapshot;

pub use engine_loop::EngineLoop;
pub use error::{NicError, StartError};
pub use snapshot::{read_stats, StatsFileError};

use control::serve;
use engine_loop::run_engine;

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

    /// Detaches application `app_id`; false if the engine did not answer.
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

    /// A handle through which attach requests reach this device.
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

    /// Detaches application `app_id`; false if the engine did not answer.
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

    /// The device's directory.
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
    fn extend(&self, req: enso_abi::control::ExtendRequest) -> Result<AttachInfo, LocalNicError> {
        Ok(NicControl::extend(self, req)?)
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
    fn extend(&self, req: enso_abi::control::ExtendRequest) -> Result<AttachInfo, LocalNicError> {
        Ok(self.control().extend(req)?)
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
