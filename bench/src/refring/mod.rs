//! The reference datapath: the physical limit of this machine for moving
//! frames from one core to the other the way an Ensō pipe does.
//!
//! Side A (the producer core) copies frames from a set of template frames,
//! cycled in order, into a [`ring`] of frames back to back on 64 B
//! boundaries, writing an 8-byte sequence number into each copy, and
//! commits in batches. Side B (the consumer core) walks the frames (length
//! from the frame header, see [`crate::frames::frame_len`]), touches each one
//! by reading and summing its sequence number, and frees space in batches.
//!
//! - [`Mode::Rx`]: producer → consumer only (what a NIC writing an RX pipe
//!   and an application reading it cost at best).
//! - [`Mode::Echo`]: the consumer also copies every frame into a *second*
//!   ring back to the producer core, which consumes it there (reads and sums
//!   its sequence number) between its own pushes. The echo reference
//!   therefore uses two rings, one per direction, and counts a packet when
//!   it is back on the producer core.
//!
//! Nothing is dropped: a side that finds the ring full (or empty) waits.
//! The time each side spends waiting is measured per waiting episode (two
//! clock reads per episode, none per packet) and the rest is its busy time;
//! the faster side is the one that waits, so the accounting costs the
//! bottleneck nothing.

// The ring is the one place in this crate that needs `unsafe`: it shares a
// raw buffer between two threads under the protocol documented there.
#[allow(unsafe_code)]
mod ring;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

pub use ring::{
    ring, Consumer, FrameView, Producer, PushError, RingError, TemplateError, Templates,
};

use crate::contention::{self, Preemption, PreemptionCounter, StealCounter};
use crate::frames;
use crate::interleave::{duration_ns, TrialResult, Variant};
use crate::placement::{Placement, Side};
use crate::wait::Spin;

/// Which way frames flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Producer core → consumer core.
    Rx,
    /// Producer core → consumer core → producer core, over two rings.
    Echo,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Rx => "rx",
            Mode::Echo => "echo",
        })
    }
}

/// How the reference runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefConfig {
    /// Direction(s).
    pub mode: Mode,
    /// Bytes per ring (a power of two). Default: 2 MiB, an Ensō pipe.
    pub ring_bytes: usize,
    /// Frames per commit (producer) and per release (consumer). Default 32,
    /// the batch Ensō and DPDK applications typically use.
    pub batch: usize,
}

impl Default for RefConfig {
    fn default() -> Self {
        RefConfig {
            mode: Mode::Rx,
            ring_bytes: 2 << 20,
            batch: 32,
        }
    }
}

impl RefConfig {
    /// Checks that this configuration can carry `templates`.
    pub fn check(&self, templates: &Templates) -> Result<(), RefError> {
        if self.batch == 0 {
            return Err(RefError::ZeroBatch);
        }
        if !self.ring_bytes.is_power_of_two() || self.ring_bytes < frames::FLIT {
            return Err(RefError::Ring(RingError::BadCapacity(self.ring_bytes)));
        }
        if templates.max_slot() > self.ring_bytes {
            return Err(RefError::FrameTooLarge {
                slot: templates.max_slot(),
                ring_bytes: self.ring_bytes,
            });
        }
        Ok(())
    }
}

/// Why the reference cannot run.
#[derive(Debug)]
pub enum RefError {
    /// The ring size is unusable.
    Ring(RingError),
    /// A template frame does not fit in the ring.
    FrameTooLarge {
        /// Bytes the largest template occupies in the ring.
        slot: usize,
        /// Ring capacity.
        ring_bytes: usize,
    },
    /// The batch is 0.
    ZeroBatch,
    /// A side's thread could not be started.
    Spawn(std::io::Error),
}

impl std::fmt::Display for RefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefError::Ring(e) => e.fmt(f),
            RefError::FrameTooLarge { slot, ring_bytes } => {
                write!(
                    f,
                    "a template frame needs {slot} B but the ring has {ring_bytes} B"
                )
            }
            RefError::ZeroBatch => write!(f, "batch must be at least 1"),
            RefError::Spawn(e) => write!(f, "cannot start a thread: {e}"),
        }
    }
}

impl std::error::Error for RefError {}

/// What one side did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideStats {
    /// Frames this side wrote or read (echo: both directions it handles).
    pub frames: u64,
    /// Time from the common start to this side's end.
    #[serde(rename = "elapsed_ns", with = "duration_ns")]
    pub elapsed: Duration,
    /// Time not spent waiting.
    pub busy_ns: u64,
    /// Time spent waiting for the other side.
    pub idle_ns: u64,
    /// Waiting episodes.
    pub waits: u64,
    /// Whether the thread was pinned to its core.
    pub pinned: bool,
    /// How much the thread was kept off its core during the run.
    pub preempted: Preemption,
    /// Sum of the sequence numbers this side read (0 if it reads none).
    pub seq_sum: u64,
}

/// What one run of the reference measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefRun {
    /// Configuration used.
    pub config: RefConfig,
    /// Packets delivered: consumed (rx) or back on the producer core (echo).
    pub packets: u64,
    /// Frame bytes delivered (no FCS).
    pub bytes: u64,
    /// From the common start until both sides finished.
    #[serde(rename = "elapsed_ns", with = "duration_ns")]
    pub elapsed: Duration,
    /// Side A.
    pub producer: SideStats,
    /// Side B.
    pub consumer: SideStats,
    /// Whether every delivered frame's sequence number was seen exactly
    /// once (the sums match `0 + 1 + … + packets-1`).
    pub verified: bool,
    /// `[producer core, consumer core]`.
    pub cores: [Option<usize>; 2],
    /// Host steal time during the run, summed over CPUs, ms.
    pub steal_ms: f64,
    /// Threads runnable on the machine just before the run, the caller
    /// included (1 on an otherwise idle machine).
    pub runnable_before: Option<u32>,
}

impl RefRun {
    /// Whether other work took a significant share of the run's time on
    /// the two cores: then the rate is below the machine's limit.
    pub fn contended(&self) -> bool {
        self.to_trial().contended()
    }
}

impl RefRun {
    /// The run as an interleave trial: busy time per side under the names
    /// "producer" and "consumer", plus per-side waits and preemptions and
    /// the verification (1 or 0) as extras.
    pub fn to_trial(&self) -> TrialResult {
        TrialResult {
            packets: self.packets,
            bytes: self.bytes,
            elapsed: self.elapsed,
            busy_ns: [
                ("producer".to_string(), self.producer.busy_ns),
                ("consumer".to_string(), self.consumer.busy_ns),
            ]
            .into(),
            extra: [
                ("producer_waits".to_string(), self.producer.waits as f64),
                ("consumer_waits".to_string(), self.consumer.waits as f64),
                ("verified".to_string(), f64::from(u8::from(self.verified))),
                (
                    "producer_preempted".to_string(),
                    self.producer.preempted.switches as f64,
                ),
                (
                    "consumer_preempted".to_string(),
                    self.consumer.preempted.switches as f64,
                ),
            ]
            .into(),
            preempted: self.producer.preempted.switches + self.consumer.preempted.switches,
            preempted_ns: self.producer.preempted.waited_ns + self.consumer.preempted.waited_ns,
            steal_ms: self.steal_ms,
        }
    }
}

/// Waiting time of one side, measured per episode.
#[derive(Default)]
struct IdleClock {
    idle: Duration,
    since: Option<Instant>,
    waits: u64,
    spin: Spin,
}

impl IdleClock {
    /// No progress this iteration.
    #[inline]
    fn wait(&mut self) {
        if self.since.is_none() {
            self.since = Some(Instant::now());
            self.waits += 1;
        }
        self.spin.poll();
    }

    /// Progress this iteration.
    #[inline]
    fn work(&mut self) {
        if let Some(t) = self.since.take() {
            self.idle += t.elapsed();
            self.spin.reset();
        }
    }

    fn finish(
        mut self,
        start: Instant,
        pinned: bool,
        preempted: &PreemptionCounter,
        frames: u64,
        seq_sum: u64,
    ) -> (SideStats, Instant) {
        self.work();
        let end = Instant::now();
        let elapsed = end - start;
        let idle_ns = self.idle.as_nanos() as u64;
        let stats = SideStats {
            frames,
            elapsed,
            busy_ns: (elapsed.as_nanos() as u64).saturating_sub(idle_ns),
            idle_ns,
            waits: self.waits,
            pinned,
            preempted: preempted.stop(),
            seq_sum,
        };
        (stats, end)
    }
}

/// Sum of 0..n, wrapping, as the sequence-number checks expect.
fn triangular(n: u64) -> u64 {
    let (a, b) = if n.is_multiple_of(2) {
        (n / 2, n.wrapping_sub(1))
    } else {
        (n, (n - 1) / 2)
    };
    a.wrapping_mul(b)
}

/// Runs the reference for about `duration` (plus the time to drain what is
/// in flight) with the producer on `placement`'s side A and the consumer on
/// side B. Both cores are idle again when it returns.
pub fn run(
    config: &RefConfig,
    templates: &Templates,
    placement: &Placement,
    duration: Duration,
) -> Result<RefRun, RefError> {
    run_ticking(
        config,
        templates,
        placement,
        duration,
        Duration::MAX,
        |_| {},
    )
}

/// [`run`], calling `tick` with the time since the start every `every`
/// while the sides run (for progress output). The calling thread only
/// sleeps meanwhile; each wake-up may briefly take a measured core from its
/// side, so `every` should be seconds, not milliseconds.
pub fn run_ticking(
    config: &RefConfig,
    templates: &Templates,
    placement: &Placement,
    duration: Duration,
    every: Duration,
    mut tick: impl FnMut(Duration),
) -> Result<RefRun, RefError> {
    config.check(templates)?;
    let (tx, rx) = ring(config.ring_bytes).map_err(RefError::Ring)?;
    let back = match config.mode {
        Mode::Rx => None,
        Mode::Echo => Some(ring(config.ring_bytes).map_err(RefError::Ring)?),
    };
    let (back_tx, back_rx) = match back {
        Some((p, c)) => (Some(p), Some(c)),
        None => (None, None),
    };
    // Carries no data: the producer stops pushing once it sees it. On its
    // own line, so the producer's polling shares it with nothing.
    let stop = CachePadded::new(AtomicBool::new(false));
    let batch = config.batch;
    let seq_offset = templates.seq_offset();
    // Each side pins itself, then waits for "go"; if the other side cannot
    // be started, the sender is dropped and the side returns at once.
    let (go_a, wait_a) = mpsc::channel::<()>();
    let (go_b, wait_b) = mpsc::channel::<()>();

    let (a, b, steal_ms, runnable_before) = thread::scope(|s| -> Result<_, RefError> {
        // Owned here, so an early return drops them and releases the sides.
        let (go_a, go_b) = (go_a, go_b);
        let stop = &stop;
        let producer = thread::Builder::new()
            .name("ref-producer".into())
            .spawn_scoped(s, move || {
                let pinned = placement.pin_current(Side::A);
                wait_a.recv().ok()?;
                Some(producer_side(tx, back_rx, templates, batch, stop, pinned))
            })
            .map_err(RefError::Spawn)?;
        let consumer = thread::Builder::new()
            .name("ref-consumer".into())
            .spawn_scoped(s, move || {
                let pinned = placement.pin_current(Side::B);
                wait_b.recv().ok()?;
                Some(consumer_side(rx, back_tx, seq_offset, batch, pinned))
            })
            .map_err(RefError::Spawn)?;
        let runnable_before = contention::runnable_threads();
        let steal = StealCounter::start();
        // The receivers live until their thread has received, so these
        // sends cannot fail.
        let _ = go_b.send(());
        let _ = go_a.send(());
        let began = Instant::now();
        loop {
            let left = duration.saturating_sub(began.elapsed());
            if left.is_zero() {
                break;
            }
            thread::sleep(left.min(every.max(Duration::from_millis(1))));
            let elapsed = began.elapsed();
            if elapsed < duration {
                tick(elapsed);
            }
        }
        stop.store(true, Ordering::Relaxed);
        let a = producer.join().expect("reference producer panicked");
        let b = consumer.join().expect("reference consumer panicked");
        Ok((a, b, steal.stop(), runnable_before))
    })?;
    let a = a.expect("producer was started");
    let b = b.expect("consumer was started");

    let t0 = a.start.min(b.start);
    let elapsed = a.end.max(b.end) - t0;
    let sent = a.sent;
    let (packets, bytes, verified) = match config.mode {
        Mode::Rx => (
            b.frames,
            b.bytes,
            b.frames == sent && b.stats.seq_sum == triangular(sent),
        ),
        // Echo: a packet counts once it is back on the producer core; the
        // consumer forwarded (and summed) every one on the way.
        Mode::Echo => (
            a.returned,
            a.returned_bytes,
            b.frames == sent
                && a.returned == sent
                && b.stats.seq_sum == triangular(sent)
                && a.stats.seq_sum == triangular(sent),
        ),
    };
    Ok(RefRun {
        config: config.clone(),
        packets,
        bytes,
        elapsed,
        producer: a.stats,
        consumer: b.stats,
        verified,
        cores: placement.cores(),
        steal_ms,
        runnable_before,
    })
}

/// What the producer side reports back.
struct ProducerOutcome {
    stats: SideStats,
    /// Frames pushed.
    sent: u64,
    /// Frames read back from the return ring (echo).
    returned: u64,
    /// Their bytes.
    returned_bytes: u64,
    start: Instant,
    end: Instant,
}

/// What the consumer side reports back.
struct ConsumerOutcome {
    stats: SideStats,
    /// Frames read (and, in echo mode, forwarded).
    frames: u64,
    /// Their bytes.
    bytes: u64,
    start: Instant,
    end: Instant,
}

/// Side A: push frames until told to stop; in echo mode also drain the
/// return ring until every frame sent has come back.
fn producer_side(
    mut tx: Producer,
    mut back: Option<Consumer>,
    templates: &Templates,
    batch: usize,
    stop: &AtomicBool,
    pinned: bool,
) -> ProducerOutcome {
    let n_templates = templates.len();
    let seq_offset = templates.seq_offset();
    let mut next = 0usize;
    let mut seq = 0u64;
    let mut returned = 0u64;
    let mut returned_bytes = 0u64;
    let mut returned_sum = 0u64;
    let mut stopping = false;
    let mut clock = IdleClock::default();
    let preempted = PreemptionCounter::start();
    let t0 = Instant::now();
    loop {
        let mut pushed = 0;
        if !stopping {
            while pushed < batch && tx.push_template(templates, next, seq) {
                next += 1;
                if next == n_templates {
                    next = 0;
                }
                seq += 1;
                pushed += 1;
            }
            if pushed > 0 {
                tx.commit();
            }
            if stop.load(Ordering::Relaxed) {
                stopping = true;
                tx.commit();
            }
        }
        let mut drained = 0;
        if let Some(back) = back.as_mut() {
            while drained < batch {
                let Some(f) = back.next_frame() else { break };
                returned_sum = returned_sum.wrapping_add(f.read_u64_le(seq_offset).unwrap_or(0));
                returned_bytes += f.len() as u64;
                drained += 1;
            }
            if drained > 0 {
                back.release();
                returned += drained as u64;
            }
        }
        if pushed + drained > 0 {
            clock.work();
        } else if stopping && (returned == seq || back.as_mut().is_none_or(Consumer::is_finished)) {
            // Everything came back, or the consumer side is gone (it closes
            // the return ring when it ends, even by panicking): stop
            // waiting for frames that will never return.
            break;
        } else {
            clock.wait();
        }
    }
    tx.close();
    let (stats, end) = clock.finish(t0, pinned, &preempted, seq + returned, returned_sum);
    ProducerOutcome {
        stats,
        sent: seq,
        returned,
        returned_bytes,
        start: t0,
        end,
    }
}

/// Side B: walk frames, sum their sequence numbers, release in batches; in
/// echo mode copy each one into the return ring first.
fn consumer_side(
    mut rx: Consumer,
    mut back: Option<Producer>,
    seq_offset: usize,
    batch: usize,
    pinned: bool,
) -> ConsumerOutcome {
    let mut frames = 0u64;
    let mut bytes = 0u64;
    let mut sum = 0u64;
    let mut clock = IdleClock::default();
    let preempted = PreemptionCounter::start();
    let t0 = Instant::now();
    loop {
        let mut got = 0;
        match back.as_mut() {
            None => {
                while got < batch {
                    let Some(f) = rx.next_frame() else { break };
                    sum = sum.wrapping_add(f.read_u64_le(seq_offset).unwrap_or(0));
                    bytes += f.len() as u64;
                    got += 1;
                }
            }
            Some(back) => {
                while got < batch {
                    let Some(f) = rx.peek() else { break };
                    if !back.push_view(&f) {
                        break;
                    }
                    sum = sum.wrapping_add(f.read_u64_le(seq_offset).unwrap_or(0));
                    bytes += f.len() as u64;
                    rx.advance();
                    got += 1;
                }
                if got > 0 {
                    back.commit();
                }
            }
        }
        if got > 0 {
            rx.release();
            frames += got as u64;
            clock.work();
        } else if rx.is_finished() {
            break;
        } else {
            clock.wait();
        }
    }
    drop(back);
    let (stats, end) = clock.finish(t0, pinned, &preempted, frames, sum);
    ConsumerOutcome {
        stats,
        frames,
        bytes,
        start: t0,
        end,
    }
}

/// The reference as an interleave [`Variant`].
#[derive(Debug)]
pub struct RefVariant {
    name: String,
    config: RefConfig,
    templates: Templates,
    placement: Placement,
}

impl RefVariant {
    /// A variant called `name` running `config` over `templates`.
    pub fn new(
        name: &str,
        config: RefConfig,
        templates: Templates,
        placement: Placement,
    ) -> Result<Self, RefError> {
        config.check(&templates)?;
        Ok(RefVariant {
            name: name.to_string(),
            config,
            templates,
            placement,
        })
    }
}

impl Variant for RefVariant {
    fn name(&self) -> &str {
        &self.name
    }

    fn run_trial(&mut self, duration: Duration) -> TrialResult {
        run(&self.config, &self.templates, &self.placement, duration)
            .expect("reference configuration was checked when the variant was built")
            .to_trial()
    }
}

/// Templates of one wire size (64..=1518 B with FCS) over `flows` UDP flows,
/// sequence number at [`frames::SEQ_OFFSET`].
pub fn udp_templates(wire_size: usize, flows: u32) -> Templates {
    Templates::new(&frames::udp_templates(wire_size, flows), frames::SEQ_OFFSET)
        .expect("generated UDP frames are valid templates")
}

#[cfg(test)]
mod tests;
