//! One run's two workers: the TX loop that sends the stream at its rate
//! and the RX loop that receives and counts, on one thread or two.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_utils::CachePadded;
use enso::{Device, TxPipe};
use nic_emu::wire::FLIT;

use super::{
    Drain, FileCapture, Idle, RunError, RunPlan, ALIVE_CHECK, IDLE_NAP, IDLE_SLEEP, IDLE_YIELD,
    MAX_FRAME_FOOTPRINT, PARK_AFTER, PARK_SENDING, STALL_TIMEOUT, TX_AHEAD,
};
use crate::image::TxImage;
use crate::pcap::TX_CHUNK_BYTES;
use crate::stats::{Counters, CycleHistogram, LatencyHistogram};
use crate::stream::TxStream;

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
pub(super) struct Shared {
    tx: CachePadded<SideCounters>,
    rx: CachePadded<SideCounters>,
    /// Set by the sampling thread: stop sending (Ctrl-C).
    pub(super) stop_tx: AtomicBool,
    /// Set by a worker that failed: the other stops too.
    abort: AtomicBool,
    /// Set by a worker that found the device gone (with `abort`).
    pub(super) device_gone: AtomicBool,
    /// Samples taken so far (written by the sampling thread only).
    pub(super) samples: AtomicU64,
    /// Frames the NIC transmitted, final once `tx_done` is set.
    tx_final: AtomicU64,
    tx_done: AtomicBool,
}

impl Shared {
    /// Counters for a sample. Relaxed: statistics, each counter exact,
    /// counters of one sample possibly a batch apart.
    pub(super) fn read(&self) -> Counters {
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
pub(super) trait Worker {
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

pub(super) fn run_one(w: &mut impl Worker) -> Result<(), RunError> {
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

/// The receive loop on a thread of its own.
pub(super) fn run_rx(rx: &mut RxWorker<'_>, mode: Idle) -> Result<(), RunError> {
    let mut idle = Quiet::new(mode);
    while !rx.done() {
        match rx.step() {
            Ok(true) => idle.busy(),
            Ok(false) => {
                if let Err(e) = idle.wait(rx.dev, ALIVE_CHECK) {
                    return fail(rx, e.into());
                }
            }
            Err(e) => return fail(rx, e),
        }
    }
    Ok(())
}

/// Both loops on one thread. It parks on the receiving handle, whose
/// frames are what keeps coming while it sends, for at most
/// [`PARK_SENDING`] until the sending is done.
pub(super) fn run_both(
    tx: &mut TxWorker<'_>,
    rx: &mut RxWorker<'_>,
    mode: Idle,
) -> Result<(), RunError> {
    let mut idle = Quiet::new(mode);
    while !(tx.done() && rx.done()) {
        let a = if tx.done() { Ok(false) } else { tx.step() };
        let b = if rx.done() { Ok(false) } else { rx.step() };
        match (a, b) {
            (Err(e), _) => return fail(tx, e),
            (_, Err(e)) => return fail(rx, e),
            (Ok(false), Ok(false)) => {
                let most = if tx.done() { ALIVE_CHECK } else { PARK_SENDING };
                if let Err(e) = idle.wait(rx.dev, most) {
                    return fail(rx, e.into());
                }
            }
            _ => idle.busy(),
        }
    }
    Ok(())
}

/// What a receiving loop does after a poll that found nothing: polls
/// again (spinning, yielding now and then) and, with [`Idle::Park`], once
/// nothing came for [`PARK_AFTER`], sleeps in [`Device::wait`] until the
/// NIC has something for the handle, or at most a given time. At
/// saturation a poll finds frames at least every few microseconds, so the
/// receiver never parks then; idle, it costs nothing.
struct Quiet {
    mode: Idle,
    polls: u32,
    since: Option<Instant>,
}

impl Quiet {
    fn new(mode: Idle) -> Self {
        Self {
            mode,
            polls: 0,
            since: None,
        }
    }

    #[inline]
    fn busy(&mut self) {
        self.polls = 0;
        self.since = None;
    }

    #[inline]
    fn wait(&mut self, dev: &mut Device, most: Duration) -> Result<(), enso::DeviceError> {
        self.polls = self.polls.saturating_add(1);
        if self.mode == Idle::Park {
            let now = Instant::now();
            let since = *self.since.get_or_insert(now);
            if now - since >= PARK_AFTER {
                dev.wait(most)?;
                return Ok(());
            }
        }
        if self.polls.is_multiple_of(IDLE_YIELD) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

/// Waits a little after a step of the transmit thread that found nothing
/// to do: spins, then yields, then sleeps, so that an idle generator
/// leaves the CPU to the NIC and the device under test (which matters
/// when they share cores). The receiving loops park instead ([`Quiet`]).
/// A sleeping receiver costs no accuracy: the NIC writes the RTT when the
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
    /// Bytes of the pipe.
    size: usize,
    /// Bytes sent on the pipe since the start of the run (its tail, less
    /// where it stood then).
    tail: u64,
    pending: VecDeque<Pending>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxState {
    Sending,
    Draining,
    Done,
}

pub(super) struct TxWorker<'a> {
    dev: &'a mut Device,
    pipe: TxPipeState,
    stream: &'a TxStream,
    /// The frames laid out in the pipe, sent in place; `None`: copied from
    /// `stream` chunk by chunk.
    image: Option<&'a TxImage>,
    port: u32,
    /// Current chunk, and frames of it already queued (copying); the next
    /// frame of the image (in place).
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
    pub(super) finished_at: Option<Instant>,
    /// When the first frame was handed to the NIC.
    pub(super) first_sent: Option<Instant>,
    /// When a completion was last found.
    pub(super) last_completed: Option<Instant>,
    /// When the device was last checked to be there.
    alive_checked: Instant,
    shared: &'a Shared,
}

impl<'a> TxWorker<'a> {
    /// A worker that sends on `pipe` (and its size), from `image` if
    /// there is one.
    pub(super) fn new(
        dev: &'a mut Device,
        (pipe, capacity): (TxPipe, usize),
        image: Option<&'a TxImage>,
        port: u32,
        plan: &RunPlan<'a>,
        shared: &'a Shared,
    ) -> Self {
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
            pipe: TxPipeState {
                pipe,
                size: capacity,
                tail: 0,
                pending: VecDeque::new(),
            },
            stream: plan.stream,
            image,
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
        let p = &mut self.pipe;
        if !p.pending.is_empty() {
            let space = self.dev.tx_space(p.pipe)?;
            // The library's tail, less where it stood at the start, equals
            // ours: every send is whole flits.
            let done = p.tail - (p.size - space) as u64;
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

    /// Frames the next send may take at most, within the count.
    #[inline]
    fn count_left(&self, most: usize) -> usize {
        match self.count {
            Some(count) => most.min((count - self.queued) as usize),
            None => most,
        }
    }

    /// Bytes the next send may take: what the window and one notification
    /// allow.
    #[inline]
    fn budget(&self) -> usize {
        self.window.saturating_sub(self.inflight).min(self.max_send)
    }

    /// Queues the next run of frames if the window and the pipe have room.
    fn queue(&mut self) -> Result<bool, RunError> {
        match self.image {
            Some(img) => self.queue_in_place(img),
            None => self.queue_copy(),
        }
    }

    /// Sends the next run of frames of the image where they lie in the
    /// pipe: the image fills the pipe exactly, so the pipe's tail is at
    /// frame `in_chunk` of it, lap after lap.
    fn queue_in_place(&mut self, img: &TxImage) -> Result<bool, RunError> {
        let i = self.in_chunk;
        let most = self.count_left(img.frames() - i);
        let (n, len) = img.fit(i, most, self.budget());
        let p = &mut self.pipe;
        let pipe_inflight: u64 = p.pending.iter().map(|x| x.len).sum();
        if n == 0 || len as u64 > p.size as u64 - pipe_inflight {
            return Ok(false);
        }
        // Reserves the bytes the frames already lie in; nothing is written.
        self.dev.tx_buf(p.pipe, len)?;
        self.dev.send(p.pipe, len, self.port)?;
        self.first_sent.get_or_insert_with(Instant::now);
        p.tail += len as u64;
        p.pending.push_back(Pending {
            end: p.tail,
            len: len as u64,
            frames: n as u64,
            bytes: img.frame_bytes(i, n),
        });
        self.inflight += len;
        self.queued += n as u64;
        self.in_chunk = (i + n) % img.frames();
        self.last_progress = Instant::now();
        Ok(true)
    }

    /// Copies the next run of frames of the stream into the pipe and sends
    /// it.
    fn queue_copy(&mut self) -> Result<bool, RunError> {
        let s = self.stream.stream();
        let c = s.chunks()[self.chunk];
        let budget = self.budget();
        let start = s.prefix_len(&c, self.in_chunk);
        let most = self.count_left(c.frames - self.in_chunk);
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
        let p = &mut self.pipe;
        let pipe_inflight: u64 = p.pending.iter().map(|x| x.len).sum();
        if len as u64 > p.size as u64 - pipe_inflight {
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
pub(super) fn check_alive(dev: &Device, last: &mut Instant) -> Result<(), RunError> {
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

pub(super) struct RxWorker<'a> {
    dev: &'a mut Device,
    ts_offset: Option<usize>,
    capture: Option<&'a mut FileCapture>,
    pub(super) hist: Option<LatencyHistogram>,
    pub(super) cycles: Option<CycleHistogram>,
    packets: u64,
    bytes: u64,
    rtt_sum_ns: u64,
    rtt_samples: u64,
    drain: Drain,
    min_samples: u64,
    tx_done_at: Option<Instant>,
    last_rx: Instant,
    /// When the last frame was received.
    pub(super) last_frame: Option<Instant>,
    /// When the device was last checked to be there.
    alive_checked: Instant,
    done: bool,
    shared: &'a Shared,
}

impl<'a> RxWorker<'a> {
    pub(super) fn new(
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
