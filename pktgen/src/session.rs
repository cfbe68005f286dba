//! The generator on a NIC: device handles and pipes ([`Session`]), and one
//! run of traffic through them ([`Session::run`]).
//!
//! A session holds two device handles, as EnsōGen has a transmit and a
//! receive thread: one with TX pipes, one with RX pipes that receive the
//! port's fallback traffic. A run sends the [`TxStream`] in chunks of whole
//! frames (one TX notification each, at most 128 KiB), counts frames as sent
//! when the NIC completes their notification, and counts what comes back on
//! the RX pipes, reading the NIC's RTT from each frame when timestamping is
//! on. Rates are enforced by the NIC's rate limiter, as on the real NIC; the
//! transmit loop only bounds how far ahead of the NIC it queues, so a run
//! ends close to its deadline even at low rates.
//!
//! Counters cross threads as plain atomic stores by their only writer (no
//! read-modify-write on the datapath) and are read by the sampling thread.

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_utils::CachePadded;
use enso::{AllocError, AttachError, Device, DeviceError, DeviceOptions, RxPipe, TxPipe};
use nic_emu::wire::{FrameError, FLIT, MAX_FRAME};

use crate::pcap::{CaptureError, CaptureWriter, TX_CHUNK_BYTES};
use crate::rate::RateLimit;
use crate::stats::{Counters, CycleHistogram, LatencyHistogram, TrafficSpan};
use crate::stream::TxStream;

/// Most TX pipes a session opens (`--queues` above this share them).
pub const MAX_TX_PIPES: u32 = 16;
/// Bytes per TX pipe.
pub const TX_PIPE_SIZE: usize = 2 << 20;
/// How far ahead of a rate-limited NIC the transmit loop queues: enough
/// that the NIC's limiter never runs dry while the thread is descheduled.
pub const TX_AHEAD: Duration = Duration::from_millis(20);
/// How long the NIC may take to apply settings or complete anything.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes the largest frame takes in a TX stream (marker flit included).
const MAX_FRAME_FOOTPRINT: usize = FLIT + MAX_FRAME.div_ceil(FLIT) * FLIT;
/// Idle polls between yields of the CPU.
const IDLE_YIELD: u32 = 64;
/// Idle polls after which a worker sleeps between polls.
const IDLE_SLEEP: u32 = 1024;
/// How long an idle worker sleeps.
const IDLE_NAP: Duration = Duration::from_micros(50);
/// How often each worker checks that its device is still there
/// ([`Device::check_alive`]: one non-blocking read of the control
/// connection), as the servers do: a device that is gone completes and
/// delivers nothing, and the run would otherwise wait out its stall timeouts.
pub const ALIVE_CHECK: Duration = Duration::from_millis(10);

/// A capture file.
pub type FileCapture = CaptureWriter<BufWriter<File>>;

/// Why a session could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Attaching to the device failed.
    #[error("{0}")]
    Attach(#[from] AttachError),
    /// The port does not exist.
    #[error("the device has {ports} port(s); there is no port {port}")]
    NoPort {
        /// Port asked for.
        port: u32,
        /// Ports the device has.
        ports: usize,
    },
    /// `--queues 0`.
    #[error("at least one queue is needed")]
    NoQueues,
    /// Allocating pipes failed.
    #[error("allocating pipes: {0}")]
    Alloc(#[from] AllocError),
    /// The device stopped answering.
    #[error("{0}")]
    Device(#[from] DeviceError),
    /// The device refused a setting.
    #[error("configuring the device: {0}")]
    Config(#[from] enso::ConfigError),
    /// Settings were not applied.
    #[error("{0}")]
    Settle(#[from] SettleError),
}

/// The NIC did not apply settings.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    /// The device stopped answering.
    #[error("{0}")]
    Device(#[from] DeviceError),
    /// Settings were not applied in time.
    #[error("the device did not apply the generator's settings within {0:?}")]
    Timeout(Duration),
}

/// Why a run stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The device stopped answering.
    #[error("{0}")]
    Device(#[from] DeviceError),
    /// Sending failed.
    #[error("sending: {0}")]
    Send(#[from] enso::SendError),
    /// Receiving failed.
    #[error("receiving: {0}")]
    Recv(#[from] enso::RecvError),
    /// Handing received bytes back failed.
    #[error("freeing received bytes: {0}")]
    Free(#[from] enso::FreeError),
    /// The device refused a setting.
    #[error("configuring the device: {0}")]
    Config(#[from] enso::ConfigError),
    /// Writing the capture failed.
    #[error("{0}")]
    Capture(#[from] CaptureError),
    /// A pipe held bytes that are not frames. The generator refuses to
    /// stamp frames where the timestamp would make them so
    /// ([`TxStream::check_stamp`]); what is left is a device under test
    /// that changed a frame's headers.
    #[error(
        "received bytes that are not frames: {0} (a frame came back whose headers no longer \
         state where it ends: the device under test changed them)"
    )]
    Frame(FrameError),
    /// The NIC stopped completing transmissions.
    #[error("the device stopped transmitting: nothing completed for {0:?}")]
    TxStalled(Duration),
    /// Settings were not applied.
    #[error("{0}")]
    Settle(#[from] SettleError),
    /// A worker thread panicked (a bug).
    #[error("a generator thread failed unexpectedly")]
    Panicked,
}

/// How a session uses the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    /// RX pipes; TX pipes are `min(queues, MAX_TX_PIPES)`.
    pub queues: u32,
    /// The port to send and receive on.
    pub port: u32,
}

/// When the receive side of a run gives up waiting for frames in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drain {
    /// Stop after this long without a frame (once transmission ended).
    pub quiet: Duration,
    /// Stop after this long in any case (RFC 2544's drain is 2 s).
    pub max: Duration,
}

impl Drain {
    /// For a measured run.
    pub const RUN: Drain = Drain {
        quiet: Duration::from_millis(100),
        max: Duration::from_secs(2),
    };
    /// For a zero-loss trial.
    pub const TRIAL: Drain = Drain {
        quiet: Duration::from_millis(50),
        max: Duration::from_secs(2),
    };
}

/// What one run does.
#[derive(Clone, Copy, Debug)]
pub struct RunPlan<'a> {
    /// The frames, sent in a loop.
    pub stream: &'a TxStream,
    /// The NIC rate limiter for the port; `None` removes it.
    pub limit: Option<RateLimit>,
    /// Frames to send at most.
    pub count: Option<u64>,
    /// How long to send at most.
    pub duration: Option<Duration>,
    /// NIC timestamping at this offset (RTT measured); `None` turns it off.
    pub timestamp_offset: Option<u8>,
    /// With timestamping, also count RTTs in EnsōGen's histogram whose
    /// array covers `offset..offset + len` cycles of 5 ns.
    pub rtt_hist_window: Option<(u32, u32)>,
    /// One thread sends and receives.
    pub single_core: bool,
    /// Pin the receive thread to this core and the transmit thread to the
    /// next one, as EnsōGen places them ([`ThreadCores`]); both to it with
    /// `single_core`.
    pub core: Option<usize>,
    /// Time between samples.
    pub stats_delay: Duration,
    /// How long to wait for frames in flight at the end.
    pub drain: Drain,
    /// Set from outside (Ctrl-C) to end the run early.
    pub stop: Option<&'a AtomicBool>,
    /// The run lasts at least this many samples: the receive side keeps
    /// receiving (and counting late frames) until they were taken, unless
    /// the run is stopped from outside or its device goes away.
    pub min_samples: u64,
}

impl<'a> RunPlan<'a> {
    /// A plan that sends `stream` with no limits, on two threads, sampling
    /// once a second.
    pub fn new(stream: &'a TxStream) -> Self {
        Self {
            stream,
            limit: None,
            count: None,
            duration: None,
            timestamp_offset: None,
            rtt_hist_window: None,
            single_core: false,
            core: None,
            stats_delay: Duration::from_secs(1),
            drain: Drain::RUN,
            stop: None,
            min_samples: 0,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// Final counters: frames the NIC transmitted, frames received.
    pub counters: Counters,
    /// From the start to the end of the drain.
    pub elapsed: Duration,
    /// From the start to the last transmission completed.
    pub tx_elapsed: Duration,
    /// When the first frame was handed to the NIC, the NIC completed the
    /// last one, and the last frame came back: the times the summary's
    /// rates are over.
    pub span: TrafficSpan,
    /// RTTs, when timestamping was on.
    pub rtt: Option<LatencyHistogram>,
    /// RTTs in EnsōGen's histogram, when the plan asked for it.
    pub rtt_cycles: Option<CycleHistogram>,
    /// The run was ended from outside.
    pub interrupted: bool,
    /// The device went away during the run (it was stopped or its process
    /// exited): the counters are those until the generator noticed, within
    /// [`ALIVE_CHECK`] or so.
    pub device_gone: bool,
}

/// Device handles and pipes of the generator.
#[derive(Debug)]
pub struct Session {
    tx_dev: Device,
    rx_dev: Device,
    tx_pipes: Vec<TxPipe>,
    rx_pipes: Vec<RxPipe>,
    port: u32,
}

impl Session {
    /// Attaches to the standalone device `name` in `dir`.
    pub fn open(dir: &Path, name: &str, o: SessionOptions) -> Result<Self, SessionError> {
        Self::with(o, |opts| Device::open_in(dir, name, opts))
    }

    /// Attaches to a device running in this process.
    pub fn attach_nic(nic: &nic_emu::Nic, o: SessionOptions) -> Result<Self, SessionError> {
        Self::with(o, |opts| Device::attach_nic(nic, opts))
    }

    fn with(
        o: SessionOptions,
        attach: impl Fn(DeviceOptions) -> Result<Device, AttachError>,
    ) -> Result<Self, SessionError> {
        if o.queues == 0 {
            return Err(SessionError::NoQueues);
        }
        let n_tx = o.queues.min(MAX_TX_PIPES);
        let mut tx_dev = attach(DeviceOptions {
            pipes: 0,
            tx_pipes: n_tx,
            tx_pipe_size: TX_PIPE_SIZE,
            ..DeviceOptions::default()
        })?;
        let ports = tx_dev.info().ports;
        if o.port as usize >= ports {
            return Err(SessionError::NoPort {
                port: o.port,
                ports,
            });
        }
        let mut rx_dev = attach(DeviceOptions {
            pipes: o.queues,
            tx_pipes: 0,
            ..DeviceOptions::default()
        })?;
        let tx_pipes = (0..n_tx)
            .map(|_| tx_dev.alloc_tx_pipe())
            .collect::<Result<Vec<_>, _>>()?;
        let rx_pipes = (0..o.queues)
            .map(|_| rx_dev.alloc_rx_pipe_on(o.port, true))
            .collect::<Result<Vec<_>, _>>()?;
        // Traffic may only start once the NIC steers to the RX pipes.
        settle(&mut rx_dev)?;
        Ok(Self {
            tx_dev,
            rx_dev,
            tx_pipes,
            rx_pipes,
            port: o.port,
        })
    }

    /// The port.
    pub fn port(&self) -> u32 {
        self.port
    }

    /// RX pipes.
    pub fn rx_pipes(&self) -> usize {
        self.rx_pipes.len()
    }

    /// TX pipes.
    pub fn tx_pipes(&self) -> usize {
        self.tx_pipes.len()
    }

    /// Ports of the device.
    pub fn device_ports(&self) -> usize {
        self.tx_dev.info().ports
    }

    /// The device's id of the application that owns the RX pipes.
    pub fn rx_app_id(&self) -> u32 {
        self.rx_dev.info().app_id
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.tx_dev.info().device
    }

    /// Sends `plan.stream` until its count or duration is reached (or
    /// `plan.stop` is set), waits for frames in flight, and returns the
    /// counts. `on_sample` is called every `plan.stats_delay` with the
    /// counters so far and the time since the start; received frames go to
    /// `capture` if given.
    pub fn run(
        &mut self,
        plan: &RunPlan<'_>,
        capture: Option<&mut FileCapture>,
        on_sample: &mut dyn FnMut(&Counters, Duration),
    ) -> Result<RunOutcome, RunError> {
        let port = self.port;
        self.tx_dev
            .set_rate_limit(port, plan.limit.map(|l| (l.num, l.den)))?;
        // Timestamping is each attachment's own: the sending one stamps,
        // the receiving one turns the stamps into round trips.
        self.tx_dev.set_timestamping(port, plan.timestamp_offset)?;
        self.rx_dev.set_timestamping(port, plan.timestamp_offset)?;
        settle(&mut self.tx_dev)?;
        flush_rx(&mut self.rx_dev)?;

        let result = self.run_threads(plan, capture, on_sample);
        if matches!(&result, Ok(out) if out.device_gone) {
            // Nothing to restore on a device that is gone.
            return result;
        }

        // Leave the port as it was found by the next user of the device.
        let restore = (|| -> Result<(), RunError> {
            if plan.limit.is_some() {
                self.tx_dev.set_rate_limit(port, None)?;
            }
            if plan.timestamp_offset.is_some() {
                self.tx_dev.set_timestamping(port, None)?;
                self.rx_dev.set_timestamping(port, None)?;
            }
            settle(&mut self.tx_dev)?;
            Ok(())
        })();
        let out = result?;
        restore?;
        Ok(out)
    }

    fn run_threads(
        &mut self,
        plan: &RunPlan<'_>,
        capture: Option<&mut FileCapture>,
        on_sample: &mut dyn FnMut(&Counters, Duration),
    ) -> Result<RunOutcome, RunError> {
        let shared = Shared::default();
        let start = Instant::now();
        let mut tx = TxWorker::new(&mut self.tx_dev, &self.tx_pipes, self.port, plan, &shared);
        let mut rx = RxWorker::new(&mut self.rx_dev, plan, capture, &shared);
        let delay = plan.stats_delay.max(Duration::from_millis(1));
        let cores = ThreadCores::of(plan.core);
        let (txr, rxr) = std::thread::scope(|s| {
            let (tx_h, rx_h) = if plan.single_core {
                let h = s.spawn(|| {
                    pin(plan.core);
                    let r = run_both(&mut tx, &mut rx);
                    (r, Ok(()))
                });
                (h, None)
            } else {
                let tx_h = s.spawn(|| {
                    pin(cores.tx);
                    (run_one(&mut tx), Ok(()))
                });
                let rx_h = s.spawn(|| {
                    pin(cores.rx);
                    run_one(&mut rx)
                });
                (tx_h, Some(rx_h))
            };
            let mut next = start + delay;
            let mut asked_stop = false;
            loop {
                let finished = tx_h.is_finished() && rx_h.as_ref().is_none_or(|h| h.is_finished());
                if finished {
                    break;
                }
                if !asked_stop && plan.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                    asked_stop = true;
                    shared.stop_tx.store(true, Ordering::Relaxed);
                }
                let now = Instant::now();
                if now >= next {
                    on_sample(&shared.read(), now - start);
                    shared.samples.store(
                        shared.samples.load(Ordering::Relaxed) + 1,
                        Ordering::Relaxed,
                    );
                    next += delay;
                    if next <= now {
                        next = now + delay;
                    }
                }
                let wait = next.saturating_duration_since(Instant::now());
                std::thread::sleep(wait.min(Duration::from_millis(5)));
            }
            let (txr, both_rx) = tx_h.join().unwrap_or((Err(RunError::Panicked), Ok(())));
            let rxr = match rx_h {
                Some(h) => h.join().unwrap_or(Err(RunError::Panicked)),
                None => both_rx,
            };
            (txr, rxr)
        });
        txr?;
        rxr?;
        let end = Instant::now();
        let since = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(start));
        Ok(RunOutcome {
            counters: shared.read(),
            elapsed: end - start,
            tx_elapsed: tx.finished_at.unwrap_or(end) - start,
            span: TrafficSpan {
                first_sent: since(tx.first_sent),
                last_sent: since(tx.last_completed),
                last_received: since(rx.last_frame),
            },
            rtt: rx.hist.take(),
            rtt_cycles: rx.cycles.take(),
            interrupted: shared.stop_tx.load(Ordering::Relaxed),
            device_gone: shared.device_gone.load(Ordering::Relaxed),
        })
    }
}

/// Waits until the NIC has completed every TX notification of `dev`
/// (configuration notifications complete once applied).
fn settle(dev: &mut Device) -> Result<(), SettleError> {
    let start = Instant::now();
    loop {
        dev.reap_completions()?;
        if dev.tx_in_flight() == 0 {
            return Ok(());
        }
        dev.check_alive()?;
        if start.elapsed() > STALL_TIMEOUT {
            return Err(SettleError::Timeout(STALL_TIMEOUT));
        }
        std::thread::yield_now();
    }
}

/// Receives and drops whatever is still arriving (late frames of an
/// earlier run), until nothing came for 10 ms (1 s at most).
fn flush_rx(dev: &mut Device) -> Result<(), RunError> {
    let start = Instant::now();
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_millis(10) && start.elapsed() < Duration::from_secs(1) {
        match dev.next_pipe_with_data()? {
            Some(p) => {
                let len = dev.recv(p)?.len();
                dev.free(p, len)?;
                last = Instant::now();
            }
            None => std::thread::yield_now(),
        }
    }
    Ok(())
}

/// Where the receive and transmit threads of a run go when they are two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadCores {
    /// The receive thread's core.
    pub rx: Option<usize>,
    /// The transmit thread's core.
    pub tx: Option<usize>,
}

impl ThreadCores {
    /// EnsōGen's placement for `--core C`: receive on C, transmit on C+1.
    pub fn of(core: Option<usize>) -> Self {
        Self {
            rx: core,
            tx: core.and_then(|c| c.checked_add(1)),
        }
    }
}

fn pin(core: Option<usize>) {
    if let Some(id) = core {
        if !nic_emu::cores::pin_current(id) {
            eprintln!("pktgen: could not pin a thread to core {id}; running unpinned");
        }
    }
}

/// One side's counters, each written by one thread only.
#[derive(Debug, Default)]
struct SideCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    rtt_sum_ns: AtomicU64,
    rtt_samples: AtomicU64,
}

/// What the workers and the sampling thread share.
#[derive(Debug, Default)]
struct Shared {
    tx: CachePadded<SideCounters>,
    rx: CachePadded<SideCounters>,
    /// Set by the sampling thread: stop sending (Ctrl-C).
    stop_tx: AtomicBool,
    /// Set by a worker that failed: the other stops too.
    abort: AtomicBool,
    /// Set by a worker that found the device gone (with `abort`).
    device_gone: AtomicBool,
    /// Samples taken so far (written by the sampling thread only).
    samples: AtomicU64,
    /// Frames the NIC transmitted, final once `tx_done` is set.
    tx_final: AtomicU64,
    tx_done: AtomicBool,
}

impl Shared {
    /// Counters for a sample. Relaxed: statistics, each counter exact,
    /// counters of one sample possibly a batch apart.
    fn read(&self) -> Counters {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Counters {
            rx_bytes: r(&self.rx.bytes),
            rx_packets: r(&self.rx.packets),
            tx_bytes: r(&self.tx.bytes),
            tx_packets: r(&self.tx.packets),
            rtt_sum_ns: r(&self.rx.rtt_sum_ns),
            rtt_samples: r(&self.rx.rtt_samples),
        }
    }
}

/// A loop that runs until done, one step at a time.
trait Worker {
    /// Does a bounded amount of work; true if there was any.
    fn step(&mut self) -> Result<bool, RunError>;
    /// Nothing left to do.
    fn done(&self) -> bool;
    /// Tells the other side to stop.
    fn shared(&self) -> &Shared;
    /// The worker's device handle.
    fn device(&self) -> &Device;
}

/// Ends a worker that failed with `e`: the other one stops too. A failure
/// of a device that is gone (whatever call noticed it first: a send, a
/// receive, a stalled completion, the periodic check) is not an error of
/// the run but its end: the run then returns what it counted, marked
/// [`RunOutcome::device_gone`].
fn fail(w: &impl Worker, e: RunError) -> Result<(), RunError> {
    let shared = w.shared();
    shared.abort.store(true, Ordering::Relaxed);
    if w.device().check_alive().is_err() {
        shared.device_gone.store(true, Ordering::Relaxed);
        return Ok(());
    }
    Err(e)
}

fn run_one(w: &mut impl Worker) -> Result<(), RunError> {
    let mut idle = 0u32;
    while !w.done() {
        match w.step() {
            Ok(true) => idle = 0,
            Ok(false) => backoff(&mut idle),
            Err(e) => return fail(w, e),
        }
    }
    Ok(())
}

fn run_both(tx: &mut TxWorker<'_>, rx: &mut RxWorker<'_>) -> Result<(), RunError> {
    let mut idle = 0u32;
    while !(tx.done() && rx.done()) {
        let a = if tx.done() { Ok(false) } else { tx.step() };
        let b = if rx.done() { Ok(false) } else { rx.step() };
        match (a, b) {
            (Err(e), _) => return fail(tx, e),
            (_, Err(e)) => return fail(rx, e),
            (Ok(false), Ok(false)) => backoff(&mut idle),
            _ => idle = 0,
        }
    }
    Ok(())
}

/// Waits a little after a step that found nothing to do: spins, then
/// yields, then sleeps, so that an idle generator leaves the CPU to the NIC
/// and the device under test (which matters when they share cores). A
/// sleeping receiver costs no accuracy: the NIC writes the RTT when the
/// frame reaches the pipe, and a pipe holds milliseconds of frames.
#[inline]
fn backoff(idle: &mut u32) {
    *idle = idle.saturating_add(1);
    if *idle >= IDLE_SLEEP {
        std::thread::sleep(IDLE_NAP);
    } else if (*idle).is_multiple_of(IDLE_YIELD) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// A run of frames handed to the NIC and not yet completed.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// The TX pipe's byte tail after it.
    end: u64,
    len: u64,
    frames: u64,
    bytes: u64,
}

#[derive(Debug)]
struct TxPipeState {
    pipe: TxPipe,
    /// Bytes sent on the pipe since the start (its tail).
    tail: u64,
    pending: VecDeque<Pending>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxState {
    Sending,
    Draining,
    Done,
}

struct TxWorker<'a> {
    dev: &'a mut Device,
    pipes: Vec<TxPipeState>,
    next_pipe: usize,
    stream: &'a TxStream,
    port: u32,
    /// Current chunk, and frames of it already queued.
    chunk: usize,
    in_chunk: usize,
    queued: u64,
    inflight: usize,
    done_frames: u64,
    done_bytes: u64,
    /// Most bytes queued at once, and per TX notification.
    window: usize,
    max_send: usize,
    count: Option<u64>,
    deadline: Option<Instant>,
    state: TxState,
    last_progress: Instant,
    /// How long without a completion means the NIC stopped.
    stall: Duration,
    finished_at: Option<Instant>,
    /// When the first frame was handed to the NIC.
    first_sent: Option<Instant>,
    /// When a completion was last found.
    last_completed: Option<Instant>,
    /// When the device was last checked to be there.
    alive_checked: Instant,
    shared: &'a Shared,
}

impl<'a> TxWorker<'a> {
    fn new(
        dev: &'a mut Device,
        pipes: &[TxPipe],
        port: u32,
        plan: &RunPlan<'a>,
        shared: &'a Shared,
    ) -> Self {
        let capacity = pipes.len() * TX_PIPE_SIZE;
        let window = match plan.limit {
            Some(l) => {
                let per_sec = l.flits_per_sec() * FLIT as f64;
                ((per_sec * TX_AHEAD.as_secs_f64()) as usize).clamp(MAX_FRAME_FOOTPRINT, capacity)
            }
            None => capacity,
        };
        // Several notifications in flight keep the NIC busy between
        // completions.
        let max_send = (window / 4).clamp(MAX_FRAME_FOOTPRINT, TX_CHUNK_BYTES);
        // At a very low rate one notification takes long to complete.
        let stall = match plan.limit {
            Some(l) => {
                let secs = 4.0 * max_send as f64 / (l.flits_per_sec() * FLIT as f64);
                STALL_TIMEOUT.max(Duration::from_secs_f64(secs.min(1e6)))
            }
            None => STALL_TIMEOUT,
        };
        let now = Instant::now();
        Self {
            dev,
            pipes: pipes
                .iter()
                .map(|&pipe| TxPipeState {
                    pipe,
                    tail: 0,
                    pending: VecDeque::new(),
                })
                .collect(),
            next_pipe: 0,
            stream: plan.stream,
            port,
            chunk: 0,
            in_chunk: 0,
            queued: 0,
            inflight: 0,
            done_frames: 0,
            done_bytes: 0,
            window,
            max_send,
            count: plan.count,
            deadline: plan.duration.map(|d| now + d),
            state: TxState::Sending,
            last_progress: now,
            stall,
            finished_at: None,
            first_sent: None,
            last_completed: None,
            alive_checked: now,
            shared,
        }
    }

    /// Counts what the NIC completed.
    fn reap(&mut self) -> Result<bool, RunError> {
        let mut any = false;
        for p in &mut self.pipes {
            if p.pending.is_empty() {
                continue;
            }
            let space = self.dev.tx_space(p.pipe)?;
            // The library's tail equals ours: every send is whole flits.
            let done = p.tail - (TX_PIPE_SIZE - space) as u64;
            while let Some(front) = p.pending.front() {
                if front.end > done {
                    break;
                }
                self.done_frames += front.frames;
                self.done_bytes += front.bytes;
                self.inflight -= front.len as usize;
                p.pending.pop_front();
                any = true;
            }
        }
        if any {
            self.last_progress = Instant::now();
            self.last_completed = Some(self.last_progress);
            self.shared
                .tx
                .packets
                .store(self.done_frames, Ordering::Relaxed);
            self.shared
                .tx
                .bytes
                .store(self.done_bytes, Ordering::Relaxed);
        }
        Ok(any)
    }

    fn should_stop(&self) -> bool {
        self.count.is_some_and(|c| self.queued >= c)
            || self.shared.stop_tx.load(Ordering::Relaxed)
            || self.shared.abort.load(Ordering::Relaxed)
            || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Queues the next run of frames if the window and a pipe have room.
    fn queue(&mut self) -> Result<bool, RunError> {
        let s = self.stream.stream();
        let c = s.chunks()[self.chunk];
        let budget = self.window.saturating_sub(self.inflight).min(self.max_send);
        let start = s.prefix_len(&c, self.in_chunk);
        let mut most = c.frames - self.in_chunk;
        if let Some(count) = self.count {
            most = most.min((count - self.queued) as usize);
        }
        let fits = |n: usize| s.prefix_len(&c, self.in_chunk + n) - start <= budget;
        if most == 0 || !fits(1) {
            return Ok(false);
        }
        // The most frames that fit: fits(lo) holds, fits(hi + 1) does not.
        let (mut lo, mut hi) = (1usize, most);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let n = lo;
        let len = s.prefix_len(&c, self.in_chunk + n) - start;
        let p = &mut self.pipes[self.next_pipe];
        let pipe_inflight: u64 = p.pending.iter().map(|x| x.len).sum();
        if len as u64 > TX_PIPE_SIZE as u64 - pipe_inflight {
            return Ok(false);
        }
        let src = &s.chunk_data(&c)[start..start + len];
        self.dev.tx_buf(p.pipe, len)?.copy_from_slice(src);
        self.dev.send(p.pipe, len, self.port)?;
        self.first_sent.get_or_insert_with(Instant::now);
        let first = (c.first_frame + self.in_chunk) as u64;
        p.tail += len as u64;
        p.pending.push_back(Pending {
            end: p.tail,
            len: len as u64,
            frames: n as u64,
            bytes: self.stream.frame_bytes(first, n as u64),
        });
        self.inflight += len;
        self.queued += n as u64;
        self.in_chunk += n;
        if self.in_chunk == c.frames {
            self.in_chunk = 0;
            self.chunk = (self.chunk + 1) % s.chunks().len();
        }
        self.next_pipe = (self.next_pipe + 1) % self.pipes.len();
        self.last_progress = Instant::now();
        Ok(true)
    }

    fn finish(&mut self) {
        self.state = TxState::Done;
        self.finished_at = Some(Instant::now());
        // SYNC POINT (Release): pairs with the receive side's Acquire load
        // of `tx_done`; `tx_final` is visible once `tx_done` is.
        self.shared
            .tx_final
            .store(self.done_frames, Ordering::Relaxed);
        self.shared.tx_done.store(true, Ordering::Release);
    }
}

/// Checks that `dev` is still there if [`ALIVE_CHECK`] passed since `last`.
fn check_alive(dev: &Device, last: &mut Instant) -> Result<(), RunError> {
    let now = Instant::now();
    if now - *last >= ALIVE_CHECK {
        *last = now;
        dev.check_alive()?;
    }
    Ok(())
}

impl Worker for TxWorker<'_> {
    fn step(&mut self) -> Result<bool, RunError> {
        check_alive(self.dev, &mut self.alive_checked)?;
        let mut work = self.reap()?;
        match self.state {
            TxState::Sending => {
                if self.should_stop() {
                    self.state = TxState::Draining;
                    work = true;
                } else {
                    work |= self.queue()?;
                }
            }
            TxState::Draining => {
                if self.inflight == 0 {
                    self.finish();
                    work = true;
                }
            }
            TxState::Done => {}
        }
        if self.inflight > 0 && self.last_progress.elapsed() > self.stall {
            return Err(RunError::TxStalled(self.stall));
        }
        Ok(work)
    }

    fn done(&self) -> bool {
        self.state == TxState::Done
    }

    fn shared(&self) -> &Shared {
        self.shared
    }

    fn device(&self) -> &Device {
        self.dev
    }
}

struct RxWorker<'a> {
    dev: &'a mut Device,
    ts_offset: Option<usize>,
    capture: Option<&'a mut FileCapture>,
    hist: Option<LatencyHistogram>,
    cycles: Option<CycleHistogram>,
    packets: u64,
    bytes: u64,
    rtt_sum_ns: u64,
    rtt_samples: u64,
    drain: Drain,
    min_samples: u64,
    tx_done_at: Option<Instant>,
    last_rx: Instant,
    /// When the last frame was received.
    last_frame: Option<Instant>,
    /// When the device was last checked to be there.
    alive_checked: Instant,
    done: bool,
    shared: &'a Shared,
}

impl<'a> RxWorker<'a> {
    fn new(
        dev: &'a mut Device,
        plan: &RunPlan<'_>,
        capture: Option<&'a mut FileCapture>,
        shared: &'a Shared,
    ) -> Self {
        Self {
            dev,
            ts_offset: plan.timestamp_offset.map(usize::from),
            capture,
            hist: plan.timestamp_offset.map(|_| LatencyHistogram::new()),
            cycles: plan
                .timestamp_offset
                .and(plan.rtt_hist_window)
                .map(|(offset, len)| CycleHistogram::new(offset, len)),
            packets: 0,
            bytes: 0,
            rtt_sum_ns: 0,
            rtt_samples: 0,
            drain: plan.drain,
            min_samples: plan.min_samples,
            tx_done_at: None,
            last_rx: Instant::now(),
            last_frame: None,
            alive_checked: Instant::now(),
            done: false,
            shared,
        }
    }

    /// Receives one pipe's batch; returns the frames in it.
    fn receive(&mut self) -> Result<u64, RunError> {
        let Some(p) = self.dev.next_pipe_with_data()? else {
            return Ok(0);
        };
        let stamp = self.capture.as_ref().map(|_| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or(Duration::ZERO)
        });
        let (mut frames, mut bytes, mut rtt_sum, mut rtt_n) = (0u64, 0u64, 0u64, 0u64);
        let mut failed = None;
        let batch = self.dev.recv(p)?;
        let len = batch.len();
        let mut it = batch.packets();
        for f in it.by_ref() {
            frames += 1;
            bytes += f.len() as u64;
            if let (Some(off), Some(h)) = (self.ts_offset, self.hist.as_mut()) {
                if let Some(b) = f.get(off..off + 4) {
                    let rtt = u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                    h.record(rtt);
                    if let Some(c) = self.cycles.as_mut() {
                        c.record(rtt);
                    }
                    rtt_sum += rtt;
                    rtt_n += 1;
                }
            }
            if let (Some(w), Some(t)) = (self.capture.as_mut(), stamp) {
                if let Err(e) = w.write(t, f) {
                    failed = Some(RunError::Capture(e));
                    break;
                }
            }
        }
        let bad = it.error();
        self.dev.free(p, len)?;
        if let Some(e) = failed {
            return Err(e);
        }
        if let Some(e) = bad {
            return Err(RunError::Frame(e));
        }
        self.packets += frames;
        self.bytes += bytes;
        self.rtt_sum_ns += rtt_sum;
        self.rtt_samples += rtt_n;
        let c = &self.shared.rx;
        c.packets.store(self.packets, Ordering::Relaxed);
        c.bytes.store(self.bytes, Ordering::Relaxed);
        c.rtt_sum_ns.store(self.rtt_sum_ns, Ordering::Relaxed);
        c.rtt_samples.store(self.rtt_samples, Ordering::Relaxed);
        Ok(frames)
    }
}

impl Worker for RxWorker<'_> {
    fn step(&mut self) -> Result<bool, RunError> {
        check_alive(self.dev, &mut self.alive_checked)?;
        let got = self.receive()?;
        let now = Instant::now();
        if got > 0 {
            self.last_rx = now;
            self.last_frame = Some(now);
        }
        if self.shared.abort.load(Ordering::Relaxed) {
            self.done = true;
        } else if self.tx_done_at.is_none() {
            // SYNC POINT (Acquire): pairs with the transmit side's Release
            // store of `tx_done`.
            if self.shared.tx_done.load(Ordering::Acquire) {
                self.tx_done_at = Some(now);
            }
        }
        if let Some(t) = self.tx_done_at {
            let sent = self.shared.tx_final.load(Ordering::Relaxed);
            let quiet_since = t.max(self.last_rx);
            let drained = self.packets >= sent
                || now - quiet_since >= self.drain.quiet
                || now - t >= self.drain.max;
            let sampled = self.shared.samples.load(Ordering::Relaxed) >= self.min_samples
                || self.shared.stop_tx.load(Ordering::Relaxed);
            if drained && sampled {
                self.done = true;
            }
        }
        Ok(got > 0)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn shared(&self) -> &Shared {
        self.shared
    }

    fn device(&self) -> &Device {
        self.dev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_c_receives_and_c_plus_1_transmits_as_in_ensogen() {
        assert_eq!(
            ThreadCores::of(Some(4)),
            ThreadCores {
                rx: Some(4),
                tx: Some(5)
            }
        );
        assert_eq!(ThreadCores::of(None), ThreadCores { rx: None, tx: None });
        // Never wraps to core 0.
        assert_eq!(ThreadCores::of(Some(usize::MAX)).tx, None);
    }
}
