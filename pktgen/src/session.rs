//! The generator on a NIC: device handles and pipes ([`Session`]), and one
//! run of traffic through them ([`Session::run`]).
//!
//! A session holds two device handles, as EnsōGen has a transmit and a
//! receive thread: one with a TX pipe, one with RX pipes that receive the
//! port's fallback traffic. A run lays the [`TxStream`]'s frames out once
//! in the TX pipe ([`TxImage`]) and sends them in place, in runs of whole
//! frames (one TX notification each, at most 128 KiB), lap after lap of the
//! pipe, as EnsōGen sends from buffers it fills once; a set too large for
//! the pipe is copied into it chunk by chunk instead. It counts frames as
//! sent when the NIC completes their notification, and counts what comes
//! back on the RX pipes, reading the NIC's RTT from each frame when
//! timestamping is on. Rates are enforced by the NIC's rate limiter, as on
//! the real NIC; the transmit loop only bounds how far ahead of the NIC it
//! queues, so a run ends close to its deadline even at low rates.
//!
//! Counters cross threads as plain atomic stores by their only writer (no
//! read-modify-write on the datapath) and are read by the sampling thread.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use enso::{AllocError, AttachError, Device, DeviceError, DeviceOptions, RxPipe, TxPipe};
use nic_emu::wire::{FrameError, FLIT, MAX_FRAME};

use crate::image::TxImage;
use crate::pcap::{CaptureError, CaptureWriter};
use crate::rate::RateLimit;
use crate::stats::{Counters, CycleHistogram, LatencyHistogram, TrafficSpan};
use crate::stream::TxStream;

mod workers;

use workers::{run_both, run_one, run_rx, RxWorker, Shared, TxWorker};

/// Most queues that add to the TX pipe's size.
pub const MAX_TX_QUEUES: u32 = 16;
/// TX pipe bytes per queue.
pub const TX_BYTES_PER_QUEUE: usize = 2 << 20;
/// RX pipe bytes a session holds at least (more pipes than `--queues`
/// where the device's pipes are smaller), unless it receives on one pipe:
/// what the receiver may fall behind by while it is off its core. 32 MiB
/// hold 27 ms of 1518 B frames at 10 Gb/s, 8 MiB (four pipes) only 6.7 ms,
/// less than a thread sharing two cores with the NIC's engine and other
/// work can be descheduled for.
pub const RX_SPACE: usize = 32 << 20;
/// Most RX pipes a session opens to reach [`RX_SPACE`].
const MAX_SPACE_PIPES: u32 = 64;
/// How far ahead of a rate-limited NIC the transmit loop queues: enough
/// that the NIC's limiter never runs dry while the thread is descheduled.
pub const TX_AHEAD: Duration = Duration::from_millis(20);
/// How long the NIC may take to apply settings or complete anything.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes the largest frame takes in a TX stream (marker flit included).
const MAX_FRAME_FOOTPRINT: usize = FLIT + MAX_FRAME.div_ceil(FLIT) * FLIT;
/// How long the receiver polls without finding a frame before it parks
/// (`Idle::Park`): the library's threshold, as the servers use it.
pub use enso::PARK_AFTER;
/// Longest park of a receiver that is also the sender (one thread), while
/// it still sends: far below [`TX_AHEAD`], so the NIC's limiter never runs
/// out of queued frames while it sleeps.
const PARK_SENDING: Duration = Duration::from_millis(1);
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

/// What the receiver does while no frame comes.
#[derive(
    clap::ValueEnum,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Idle {
    /// Keep polling (yielding the CPU now and then): a core busy even
    /// without traffic.
    Spin,
    /// After [`PARK_AFTER`] without a frame, sleep until the NIC has
    /// something ([`Device::wait`]).
    #[default]
    Park,
}

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
    /// RX pipes (raised to hold [`RX_SPACE`] unless 1, see
    /// [`rx_pipe_count`]); the TX pipe's size is [`tx_pipe_size`] of it.
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
    /// What the receiver does while no frame comes.
    pub idle: Idle,
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
            idle: Idle::Park,
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
    /// The frames were laid out once in the TX pipe and sent in place
    /// ([`TxImage`]); false: copied into it per send (a set too large for
    /// the pipe).
    pub in_place: bool,
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
    tx_pipe: TxPipe,
    tx_size: usize,
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
        let tx_size = tx_pipe_size(o.queues);
        let mut tx_dev = attach(DeviceOptions {
            pipes: 0,
            tx_pipes: 1,
            tx_pipe_size: tx_size,
            ..DeviceOptions::default()
        })?;
        let ports = tx_dev.info().ports;
        if o.port as usize >= ports {
            return Err(SessionError::NoPort {
                port: o.port,
                ports,
            });
        }
        let n_rx = rx_pipe_count(o.queues, tx_dev.info().pipe_size);
        let mut rx_dev = attach(DeviceOptions {
            pipes: n_rx,
            tx_pipes: 0,
            ..DeviceOptions::default()
        })?;
        let tx_pipe = tx_dev.alloc_tx_pipe()?;
        let rx_pipes = (0..n_rx)
            .map(|_| rx_dev.alloc_rx_pipe_on(o.port, true))
            .collect::<Result<Vec<_>, _>>()?;
        // Frames of one flow (a synthetic stream without ranges has one)
        // would all land in one RX pipe under the NIC's flow hash, and a
        // burst of the NIC's limiter (up to 10 ms of frames) would overflow
        // its 2 MiB while the others stay empty: round robin spreads every
        // burst over all of them.
        if rx_pipes.len() > 1 {
            rx_dev.set_fallback_round_robin(rx_pipes[0], true)?;
        }
        // Traffic may only start once the NIC steers to the RX pipes.
        settle(&mut rx_dev)?;
        Ok(Self {
            tx_dev,
            rx_dev,
            tx_pipe,
            tx_size,
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

    /// Bytes per RX pipe (the device's pipe size).
    pub fn rx_pipe_size(&self) -> usize {
        self.rx_dev.info().pipe_size
    }

    /// Bytes of the TX pipe.
    pub fn tx_pipe_size(&self) -> usize {
        self.tx_size
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
        // Nothing is in flight: the whole pipe, from where the next send
        // starts, takes the frames of this run.
        let buf = self.tx_dev.tx_buf(self.tx_pipe, self.tx_size)?;
        let image = TxImage::write(plan.stream, buf);

        let result = self.run_threads(plan, image.as_ref(), capture, on_sample);
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
        image: Option<&TxImage>,
        capture: Option<&mut FileCapture>,
        on_sample: &mut dyn FnMut(&Counters, Duration),
    ) -> Result<RunOutcome, RunError> {
        let shared = Shared::default();
        let start = Instant::now();
        let mut tx = TxWorker::new(
            &mut self.tx_dev,
            (self.tx_pipe, self.tx_size),
            image,
            self.port,
            plan,
            &shared,
        );
        let mut rx = RxWorker::new(&mut self.rx_dev, plan, capture, &shared);
        let delay = plan.stats_delay.max(Duration::from_millis(1));
        let cores = ThreadCores::of(plan.core);
        let (txr, rxr) = std::thread::scope(|s| {
            let (tx_h, rx_h) = if plan.single_core {
                let h = s.spawn(|| {
                    pin(plan.core);
                    let r = run_both(&mut tx, &mut rx, plan.idle);
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
                    run_rx(&mut rx, plan.idle)
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
            in_place: image.is_some(),
            device_gone: shared.device_gone.load(Ordering::Relaxed),
        })
    }
}

impl Drop for Session {
    /// Gives the port back with the NIC's default fallback policy, flow
    /// hash, as the limiter and timestamping are given back after a run.
    fn drop(&mut self) {
        if self.rx_pipes.len() > 1 && self.rx_dev.check_alive().is_ok() {
            let _ = self
                .rx_dev
                .set_fallback_round_robin(self.rx_pipes[0], false)
                .map_err(RunError::from)
                .and_then(|()| Ok(settle(&mut self.rx_dev)?));
        }
    }
}

/// Bytes of the TX pipe of a session asked for `queues`: 2 MiB for each
/// queue up to 16, rounded up to a power of two (a TX pipe's size is one).
pub fn tx_pipe_size(queues: u32) -> usize {
    (queues.clamp(1, MAX_TX_QUEUES) as usize * TX_BYTES_PER_QUEUE).next_power_of_two()
}

/// RX pipes of a session asked for `queues` on a device with pipes of
/// `pipe_size` bytes: `queues`, or more where they would hold less than
/// [`RX_SPACE`] (at most 64 pipes). One queue stays one pipe: the NIC then
/// keeps the frames' order, which round robin over several pipes does not.
pub fn rx_pipe_count(queues: u32, pipe_size: usize) -> u32 {
    if queues <= 1 {
        return queues;
    }
    let want = RX_SPACE
        .div_ceil(pipe_size.max(1))
        .min(MAX_SPACE_PIPES as usize) as u32;
    queues.max(want)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tx_pipe_grows_with_queues_up_to_16() {
        assert_eq!(tx_pipe_size(1), 2 << 20);
        assert_eq!(tx_pipe_size(3), 8 << 20);
        assert_eq!(tx_pipe_size(4), 8 << 20);
        assert_eq!(tx_pipe_size(16), 32 << 20);
        assert_eq!(tx_pipe_size(8192), 32 << 20);
    }

    #[test]
    fn rx_pipes_hold_rx_space_unless_one_queue() {
        // The default 2 MiB pipes: 16 of them, whatever fewer queues ask.
        assert_eq!(rx_pipe_count(4, 2 << 20), 16);
        assert_eq!(rx_pipe_count(2, 2 << 20), 16);
        assert_eq!(rx_pipe_count(16, 2 << 20), 16);
        assert_eq!(rx_pipe_count(100, 2 << 20), 100);
        // Larger pipes need fewer; the asked number is the least.
        assert_eq!(rx_pipe_count(4, 16 << 20), 4);
        assert_eq!(rx_pipe_count(2, 16 << 20), 2);
        assert_eq!(rx_pipe_count(4, 8 << 20), 4);
        // Small pipes: at most 64 to reach the space.
        assert_eq!(rx_pipe_count(4, 64 << 10), 64);
        assert_eq!(rx_pipe_count(4, 1 << 20), 32);
        // One queue keeps the order.
        assert_eq!(rx_pipe_count(1, 4096), 1);
        assert_eq!(rx_pipe_count(0, 2 << 20), 0);
    }

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
