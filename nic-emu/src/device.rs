//! Running a device: an engine thread (the hardware), a control endpoint
//! (a Unix socket in the device directory) through which applications in
//! other processes attach, and periodic stats in `stats.json`.
//!
//! The same [`Engine`] runs in-process (tests, single-binary experiments) and
//! in the standalone `nic-emu` process; only how attach requests reach it
//! differs.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::config::DeviceConfig;
use crate::counters::Stats;
use crate::engine::{AttachInfo, AttachRequest, Engine};

pub use enso_abi::control::{
    attach_remote, check_running, ControlRequest, ControlResponse, CONTROL_SOCKET, STATS_FILE,
};

enum Cmd {
    Attach(AttachRequest, Sender<Result<AttachInfo, String>>),
    Detach(u32, Sender<bool>),
    Stats(Sender<Stats>),
    /// Runs a closure on the engine (tests, experiments).
    With(Box<dyn FnOnce(&mut Engine) + Send>),
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
    /// How often to write `stats.json`.
    pub stats_interval: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            core: None,
            listen: false,
            idle_sleep_after: Some(20_000),
            stats_interval: Duration::from_millis(200),
        }
    }
}

/// A running device.
pub struct Nic {
    tx: Sender<Cmd>,
    stop: Arc<AtomicBool>,
    engine: Option<JoinHandle<Engine>>,
    listener: Option<JoinHandle<()>>,
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
    tx: Sender<Cmd>,
    /// The device's stop flag (set once, when it is stopped or dropped).
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for NicControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NicControl")
    }
}

const CMD_TIMEOUT: Duration = Duration::from_secs(10);

impl NicControl {
    pub fn attach(&self, req: AttachRequest) -> Result<AttachInfo, String> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::Attach(req, tx))
            .map_err(|_| "device stopped".to_string())?;
        rx.recv_timeout(CMD_TIMEOUT)
            .map_err(|_| "device did not answer".to_string())?
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
fn check_socket_path(sock: &Path) -> Result<(), String> {
    std::os::unix::net::SocketAddr::from_pathname(sock)
        .map(drop)
        .map_err(|_| {
            format!(
                "{}: too long for a Unix socket path ({} bytes; shorten the device name or its directory)",
                sock.display(),
                sock.as_os_str().len()
            )
        })
}

impl Nic {
    /// Starts a device: creates its directory and runs its engine thread.
    pub fn start(cfg: DeviceConfig, opts: RunOptions) -> Result<Self, String> {
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
        let stop = Arc::new(AtomicBool::new(false));
        // A device that does not start leaves no directory behind.
        let undo = |e: String| {
            crate::devdir::remove(&dir);
            e
        };
        let listener = if opts.listen {
            let l =
                UnixListener::bind(&sock).map_err(|e| undo(format!("{}: {e}", sock.display())))?;
            l.set_nonblocking(true).map_err(|e| undo(e.to_string()))?;
            let ctl = NicControl {
                tx: tx.clone(),
                stop: stop.clone(),
            };
            let stop2 = stop.clone();
            Some(
                std::thread::Builder::new()
                    .name(format!("{name}-control"))
                    .spawn(move || serve(l, ctl, stop2))
                    .map_err(|e| undo(e.to_string()))?,
            )
        } else {
            None
        };
        let stop2 = stop.clone();
        let stats_path = dir.join(STATS_FILE);
        let handle = std::thread::Builder::new()
            .name(format!("{name}-engine"))
            .spawn(move || run_engine(engine, rx, stop2, opts, stats_path))
            .map_err(|e| e.to_string())?;
        Ok(Self {
            tx,
            stop,
            engine: Some(handle),
            listener,
            dir,
            name,
        })
    }

    pub fn control(&self) -> NicControl {
        NicControl {
            tx: self.tx.clone(),
            stop: self.stop.clone(),
        }
    }

    pub fn attach(&self, req: AttachRequest) -> Result<AttachInfo, String> {
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
    pub fn try_stats(&self) -> Result<Stats, String> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::Stats(tx))
            .map_err(|_| "the NIC engine has stopped".to_string())?;
        rx.recv_timeout(CMD_TIMEOUT)
            .map_err(|_| "the NIC engine did not answer".to_string())
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
    ) -> Result<R, String> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::With(Box::new(move |e| {
                let _ = tx.send(f(e));
            })))
            .map_err(|_| "the NIC engine has stopped".to_string())?;
        rx.recv_timeout(CMD_TIMEOUT)
            .map_err(|_| "the NIC engine did not answer".to_string())
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
    pub fn try_stop(mut self) -> Result<Stats, String> {
        self.shutdown()
            .ok_or_else(|| "the NIC engine thread failed".to_string())
    }

    fn shutdown(&mut self) -> Option<Stats> {
        self.stop.store(true, Ordering::Relaxed);
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
        }
        if w == 0 || self.turns.is_multiple_of(64) {
            while let Ok(cmd) = self.rx.try_recv() {
                let e = &mut self.engine;
                match cmd {
                    Cmd::Attach(req, reply) => {
                        let _ = reply.send(e.attach(&req).map_err(|x| x.to_string()));
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

fn serve(l: UnixListener, ctl: NicControl, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                let ctl = ctl.clone();
                let _ = std::thread::Builder::new()
                    .name("nic-emu-client".into())
                    .spawn(move || client(s, ctl));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Longest control request accepted (bytes, newline included).
const MAX_REQUEST: u64 = 64 << 10;

/// One client connection: attach, then hold the attachment until the client
/// closes the connection (or its process exits), then detach.
fn client(s: UnixStream, ctl: NicControl) {
    let _ = s.set_nonblocking(false);
    let mut w = match s.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut r = BufReader::new(s);
    let mut line = Vec::new();
    let mut attached = Vec::new();
    loop {
        line.clear();
        // A request is one short JSON line; a client that sends more without
        // a newline gets an error and is cut off, rather than growing this
        // buffer without bound. The line is read as bytes: one that is not
        // UTF-8 is a bad request like any other, not a broken connection.
        let n = match (&mut r).take(MAX_REQUEST + 1).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if n as u64 > MAX_REQUEST {
            let resp = ControlResponse::Error(format!("request longer than {MAX_REQUEST} bytes"));
            let mut out = serde_json::to_string(&resp).unwrap_or_default();
            out.push('\n');
            let _ = w.write_all(out.as_bytes());
            break;
        }
        let request = std::str::from_utf8(&line)
            .map_err(|e| format!("bad request: not UTF-8: {e}"))
            .and_then(|l| {
                serde_json::from_str::<ControlRequest>(l.trim())
                    .map_err(|e| format!("bad request: {e}"))
            });
        let resp = match request {
            Ok(ControlRequest::Attach(req)) => match ctl.attach(req) {
                Ok(info) => {
                    attached.push(info.app_id);
                    ControlResponse::Attached(info)
                }
                Err(e) => ControlResponse::Error(e),
            },
            Err(e) => ControlResponse::Error(e),
        };
        let mut out = serde_json::to_string(&resp).unwrap_or_default();
        out.push('\n');
        if w.write_all(out.as_bytes()).is_err() {
            break;
        }
    }
    for id in attached {
        ctl.detach(id);
    }
}

/// Reads the stats snapshot of the device in `dir`. The snapshot outlives
/// a device whose process was killed: see [`check_running`].
pub fn read_stats(dir: &Path) -> Result<Stats, String> {
    let p = dir.join(STATS_FILE);
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
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
    fn ring_sizes(&self) -> Result<(usize, u32), String> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::With(Box::new(move |e| {
                let _ = tx.send((e.config().pipe_size, e.config().notif_ring_entries));
            })))
            .map_err(|_| "the NIC engine has stopped".to_string())?;
        rx.recv_timeout(CMD_TIMEOUT)
            .map_err(|_| "the NIC engine did not answer".to_string())
    }
    fn attach(&self, req: AttachRequest) -> Result<AttachInfo, String> {
        NicControl::attach(self, req)
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
}

impl enso_abi::control::LocalNic for Nic {
    fn ring_sizes(&self) -> Result<(usize, u32), String> {
        self.control().ring_sizes()
    }
    fn attach(&self, req: AttachRequest) -> Result<AttachInfo, String> {
        Nic::attach(self, req)
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
}
