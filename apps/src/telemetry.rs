//! NitroSketch telemetry (Liu et al., SIGCOMM'19): a Count-Min or Count
//! Sketch whose per-packet work is almost always a single decrement.
//!
//! # Design
//!
//! * A sketch of `depth` rows (5) by `width` counters (Count-Min 102,400,
//!   Count Sketch 204,800). Row `r` maps a flow key to a column with its own
//!   seeded hash; the Count Sketch takes a ±1 sign from another bit of the
//!   same hash.
//! * **Sampling.** Picture the stream of (packet, row) slots: packet 0 row 0,
//!   packet 0 row 1, ..., packet 1 row 0, ... Instead of updating every slot,
//!   NitroSketch updates a slot with probability `p` (0.01). The gap to the
//!   next sampled slot is geometric, drawn once per sampled slot as
//!   `floor(ln u / ln(1 - p)) + 1` with `u` uniform in (0, 1]. The gap is
//!   turned into "packets to skip" and "row in the packet after that", so a
//!   packet with no sampled slot costs one decrement and a compare; its
//!   bytes are not even read.
//! * A sampled slot adds `1/p` to its counter (Count Sketch: `±1/p`). Every
//!   update has the same magnitude, so counters store the number of sampled
//!   updates (`i32`, saturating) and are scaled by `1/p` when queried; with
//!   `p = 1` the counters are exactly those of the ordinary sketch.
//! * Estimates: Count-Min takes the minimum over rows, Count Sketch the
//!   median.
//! * **Heavy hitters.** The flow key is (source IP, destination IP). On each
//!   packet that had at least one sampled slot, the flow's estimate is
//!   offered to a top-k table (k = 100). A heavy hitter is a flow whose
//!   estimate is at least `threshold` (0.05%) of all packets seen. Reports
//!   ([`Report`]) list them, largest first, and are produced periodically by
//!   [`Telemetry::poll_report`].
//!
//! # Deviations from the paper's system
//!
//! * Counters hold sample counts rather than floating-point sums (exact and
//!   half the memory; identical estimates).
//! * The top-k table is a min-heap with a key index (see `topk`), touched
//!   only on sampled packets.
//! * NitroSketch's adaptive mode (sampling probability lowered as the
//!   packet rate grows) and its delayed-start "convergence" phase are not
//!   implemented; `p` is fixed.
//! * Only IPv4 frames have a flow key; a sampled non-IPv4 or malformed frame
//!   consumes its sampled slots without an update and is counted in
//!   [`NitroSketch::unkeyed`].

use std::fmt;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

mod topk;

use crate::hash::{hash_u64, mix64, reduce};
use crate::packet::{ethernet, EthernetFrame, Ipv4Packet};
use crate::Verdict;
use enso::app::PacketHandler;
use topk::TopK;

/// Rows of the paper's sketches.
pub const DEFAULT_DEPTH: usize = 5;
/// Most rows supported.
pub const MAX_DEPTH: usize = 16;
/// Counters per row of the paper's Count-Min sketch.
pub const COUNT_MIN_WIDTH: usize = 102_400;
/// Counters per row of the paper's Count Sketch.
pub const COUNT_SKETCH_WIDTH: usize = 204_800;
/// The paper's sampling probability.
pub const DEFAULT_PROBABILITY: f64 = 0.01;
/// Size of the heavy-hitter table.
pub const DEFAULT_TOP_K: usize = 100;
/// Most counters (`depth * width`) a sketch may have: 2^28 counters of 4
/// bytes (1 GiB), allocated up front.
pub const MAX_COUNTERS: usize = 1 << 28;
/// Largest heavy-hitter table: 2^24 entries (at most 512 MiB with its
/// index, allocated up front).
pub const MAX_TOP_K: usize = 1 << 24;
/// Share of all packets above which a flow is a heavy hitter (0.05%).
pub const DEFAULT_THRESHOLD: f64 = 0.0005;

/// Which sketch the counters form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SketchKind {
    /// Count-Min: counters only grow; the estimate is the row minimum.
    CountMin,
    /// Count Sketch: signed updates; the estimate is the row median.
    CountSketch,
}

/// Parameters of a [`NitroSketch`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NitroConfig {
    /// Count-Min or Count Sketch.
    pub kind: SketchKind,
    /// Rows (1..=MAX_DEPTH).
    pub depth: usize,
    /// Counters per row (`depth * width` at most [`MAX_COUNTERS`]).
    pub width: usize,
    /// Probability that a (packet, row) slot is updated, in (0, 1].
    pub probability: f64,
    /// Heavy-hitter table size (1..=MAX_TOP_K).
    pub top_k: usize,
    /// Heavy-hitter threshold as a share of all packets, in [0, 1].
    pub threshold: f64,
    /// Seed of the row hashes and of the sampling.
    pub seed: u64,
}

impl NitroConfig {
    /// The paper's Count-Min configuration.
    pub fn count_min() -> Self {
        NitroConfig {
            kind: SketchKind::CountMin,
            depth: DEFAULT_DEPTH,
            width: COUNT_MIN_WIDTH,
            probability: DEFAULT_PROBABILITY,
            top_k: DEFAULT_TOP_K,
            threshold: DEFAULT_THRESHOLD,
            seed: 1,
        }
    }

    /// The paper's Count Sketch configuration.
    pub fn count_sketch() -> Self {
        NitroConfig {
            kind: SketchKind::CountSketch,
            width: COUNT_SKETCH_WIDTH,
            ..Self::count_min()
        }
    }
}

/// Smallest sampling probability: below ~1e-16, `1 - p` rounds to 1, the
/// geometric gaps become infinite and every slot would be sampled.
pub const MIN_PROBABILITY: f64 = 1e-9;

/// The configuration is unusable.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum NitroConfigError {
    /// Depth outside 1..=MAX_DEPTH.
    #[error("depth {0} is outside 1..={MAX_DEPTH}")]
    BadDepth(usize),
    /// Zero width.
    #[error("width must be at least 1")]
    BadWidth,
    /// More than [`MAX_COUNTERS`] counters in all.
    #[error(
        "depth {depth} x width {width} is above the maximum of {MAX_COUNTERS} counters (1 GiB)"
    )]
    TooManyCounters {
        /// Rows asked for.
        depth: usize,
        /// Counters per row asked for.
        width: usize,
    },
    /// Probability outside [MIN_PROBABILITY, 1].
    #[error("sampling probability {0} is outside [{MIN_PROBABILITY:e}, 1]")]
    BadProbability(f64),
    /// Heavy-hitter table size outside 1..=MAX_TOP_K.
    #[error("top-k {0} is outside 1..={MAX_TOP_K}")]
    BadTopK(usize),
    /// Threshold outside [0, 1].
    #[error("threshold {0} is outside [0, 1]")]
    BadThreshold(f64),
}

/// A flow: (source IP, destination IP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
}

impl FlowKey {
    /// The key of an IPv4 frame.
    pub fn from_frame(frame: &[u8]) -> Option<FlowKey> {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        if eth.ethertype() != ethernet::ETHERTYPE_IPV4 {
            return None;
        }
        let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
        Some(FlowKey {
            src: ip.src_addr(),
            dst: ip.dst_addr(),
        })
    }

    /// The key packed into 64 bits (source high, destination low).
    #[inline]
    pub fn as_u64(&self) -> u64 {
        (u64::from(u32::from(self.src)) << 32) | u64::from(u32::from(self.dst))
    }

    /// The inverse of [`FlowKey::as_u64`].
    pub fn from_u64(v: u64) -> FlowKey {
        FlowKey {
            src: Ipv4Addr::from((v >> 32) as u32),
            dst: Ipv4Addr::from(v as u32),
        }
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.src, self.dst)
    }
}

/// A flow and its estimated packet count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeavyHitter {
    /// The flow.
    pub flow: FlowKey,
    /// Estimated packets.
    pub estimate: f64,
}

/// The heavy hitters at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Packets seen so far.
    pub packets: u64,
    /// Packets a flow needs to be reported.
    pub threshold_packets: f64,
    /// Flows at or above the threshold, largest first.
    pub heavy_hitters: Vec<HeavyHitter>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} packets, {} heavy hitters (>= {:.0} packets)",
            self.packets,
            self.heavy_hitters.len(),
            self.threshold_packets
        )?;
        for h in &self.heavy_hitters {
            let share = if self.packets == 0 {
                0.0
            } else {
                100.0 * h.estimate / self.packets as f64
            };
            writeln!(
                f,
                "  {:<33} {:>12.0} {:>7.3}%",
                h.flow.to_string(),
                h.estimate,
                share
            )?;
        }
        Ok(())
    }
}

/// A NitroSketch: sampled sketch updates plus a heavy-hitter table.
#[derive(Clone)]
pub struct NitroSketch {
    kind: SketchKind,
    depth: usize,
    width: usize,
    counters: Vec<i32>,
    row_seeds: [u64; MAX_DEPTH],
    probability: f64,
    scale: f64,
    /// `1 / ln(1 - p)`; unused when `p = 1`.
    inv_ln_q: f64,
    rng: Xoshiro256PlusPlus,
    /// Packets still to skip before the next packet with a sampled slot.
    countdown: u64,
    /// Row of the first sampled slot in that packet.
    next_row: usize,
    /// The value `countdown` was set to.
    scheduled: u64,
    /// Packets up to and including the last packet with a sampled slot.
    packets_done: u64,
    samples: u64,
    unkeyed: u64,
    threshold: f64,
    top: TopK,
}

impl fmt::Debug for NitroSketch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NitroSketch")
            .field("kind", &self.kind)
            .field("depth", &self.depth)
            .field("width", &self.width)
            .field("probability", &self.probability)
            .field("packets", &self.packets())
            .field("samples", &self.samples)
            .finish()
    }
}

impl NitroSketch {
    /// Allocates the counters.
    pub fn new(config: &NitroConfig) -> Result<Self, NitroConfigError> {
        if config.depth == 0 || config.depth > MAX_DEPTH {
            return Err(NitroConfigError::BadDepth(config.depth));
        }
        if config.width == 0 {
            return Err(NitroConfigError::BadWidth);
        }
        // Checked, so an overflowing product cannot wrap to a small
        // allocation that later rows index beyond.
        if config
            .depth
            .checked_mul(config.width)
            .is_none_or(|n| n > MAX_COUNTERS)
        {
            return Err(NitroConfigError::TooManyCounters {
                depth: config.depth,
                width: config.width,
            });
        }
        let p = config.probability;
        if !(MIN_PROBABILITY..=1.0).contains(&p) {
            return Err(NitroConfigError::BadProbability(p));
        }
        if config.top_k == 0 || config.top_k > MAX_TOP_K {
            return Err(NitroConfigError::BadTopK(config.top_k));
        }
        if !(0.0..=1.0).contains(&config.threshold) {
            return Err(NitroConfigError::BadThreshold(config.threshold));
        }
        let mut row_seeds = [0u64; MAX_DEPTH];
        for (r, s) in row_seeds.iter_mut().enumerate() {
            *s = mix64(config.seed ^ mix64(r as u64 + 1));
        }
        let mut sketch = NitroSketch {
            kind: config.kind,
            depth: config.depth,
            width: config.width,
            counters: vec![0; config.depth * config.width],
            row_seeds,
            probability: p,
            scale: 1.0 / p,
            inv_ln_q: if p < 1.0 { 1.0 / (1.0 - p).ln() } else { 0.0 },
            rng: Xoshiro256PlusPlus::seed_from_u64(mix64(config.seed ^ 0x6e69_7472_6f00)),
            countdown: 0,
            next_row: 0,
            scheduled: 0,
            packets_done: 0,
            samples: 0,
            unkeyed: 0,
            threshold: config.threshold,
            top: TopK::new(config.top_k),
        };
        let first = sketch.draw_gap() - 1;
        sketch.schedule(first);
        Ok(sketch)
    }

    /// Count-Min or Count Sketch.
    pub fn kind(&self) -> SketchKind {
        self.kind
    }

    /// Rows.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Counters per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Sampling probability.
    pub fn probability(&self) -> f64 {
        self.probability
    }

    /// Packets seen.
    pub fn packets(&self) -> u64 {
        self.packets_done + (self.scheduled - self.countdown)
    }

    /// Sampled slots so far (counter updates, including those skipped on
    /// unkeyed frames).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Sampled frames that had no flow key (not IPv4 or malformed).
    pub fn unkeyed(&self) -> u64 {
        self.unkeyed
    }

    /// The raw counters, row after row (sample counts, not scaled).
    pub fn counters(&self) -> &[i32] {
        &self.counters
    }

    /// The column of `key` in row `row`.
    #[inline]
    pub fn row_index(&self, row: usize, key: FlowKey) -> usize {
        reduce(hash_u64(key.as_u64(), self.row_seeds[row]), self.width)
    }

    /// The Count Sketch sign (+1 or -1) of `key` in row `row`.
    #[inline]
    pub fn row_sign(&self, row: usize, key: FlowKey) -> i32 {
        if hash_u64(key.as_u64(), self.row_seeds[row]) & 1 == 0 {
            1
        } else {
            -1
        }
    }

    /// A geometric gap >= 1 between sampled slots.
    #[inline]
    fn draw_gap(&mut self) -> u64 {
        if self.probability >= 1.0 {
            return 1;
        }
        // Uniform in (0, 1]: 53 random bits, plus one.
        let u = ((self.rng.gen::<u64>() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64);
        ((u.ln() * self.inv_ln_q) as u64).saturating_add(1)
    }

    /// Sets the next sampled slot `ahead` slots after the current packet.
    #[inline]
    fn schedule(&mut self, ahead: u64) {
        let d = self.depth as u64;
        self.countdown = ahead / d;
        self.next_row = (ahead % d) as usize;
        self.scheduled = self.countdown;
    }

    /// Accounts one packet whose flow key is `key` (computed only if the
    /// packet has a sampled slot).
    #[inline(always)]
    fn on_packet(&mut self, key: impl FnOnce() -> Option<FlowKey>) {
        if self.countdown > 0 {
            self.countdown -= 1;
            return;
        }
        self.sampled_packet(key());
    }

    #[inline(never)]
    fn sampled_packet(&mut self, key: Option<FlowKey>) {
        self.packets_done += self.scheduled + 1;
        let d = self.depth as u64;
        let mut row = self.next_row as u64;
        loop {
            self.samples += 1;
            if let Some(k) = key {
                let r = row as usize;
                let i = r * self.width + self.row_index(r, k);
                let delta = match self.kind {
                    SketchKind::CountMin => 1,
                    SketchKind::CountSketch => self.row_sign(r, k),
                };
                self.counters[i] = self.counters[i].saturating_add(delta);
            }
            row = row.saturating_add(self.draw_gap());
            if row >= d {
                self.schedule(row - d);
                break;
            }
        }
        match key {
            Some(k) => {
                let estimate = self.estimate(k);
                self.top.offer(k.as_u64(), estimate);
            }
            None => self.unkeyed += 1,
        }
    }

    /// Accounts one packet of flow `key`.
    #[inline]
    pub fn observe(&mut self, key: FlowKey) {
        self.on_packet(|| Some(key));
    }

    /// Accounts one Ethernet frame; its bytes are read only if one of its
    /// slots is sampled.
    #[inline]
    pub fn observe_frame(&mut self, frame: &[u8]) {
        self.on_packet(|| FlowKey::from_frame(frame));
    }

    /// The estimated packet count of `key`.
    pub fn estimate(&self, key: FlowKey) -> f64 {
        let mut rows = [0i64; MAX_DEPTH];
        for (r, v) in rows.iter_mut().enumerate().take(self.depth) {
            let c = i64::from(self.counters[r * self.width + self.row_index(r, key)]);
            *v = match self.kind {
                SketchKind::CountMin => c,
                SketchKind::CountSketch => c * i64::from(self.row_sign(r, key)),
            };
        }
        let rows = &mut rows[..self.depth];
        let samples = match self.kind {
            SketchKind::CountMin => *rows.iter().min().expect("depth >= 1") as f64,
            SketchKind::CountSketch => {
                rows.sort_unstable();
                let mid = self.depth / 2;
                if self.depth % 2 == 1 {
                    rows[mid] as f64
                } else {
                    (rows[mid - 1] + rows[mid]) as f64 / 2.0
                }
            }
        };
        samples * self.scale
    }

    /// Packets a flow needs to count as a heavy hitter now.
    pub fn threshold_packets(&self) -> f64 {
        self.threshold * self.packets() as f64
    }

    /// Flows in the top-k table with their current estimates, largest
    /// first.
    pub fn top_flows(&self) -> Vec<HeavyHitter> {
        let mut out: Vec<HeavyHitter> = self
            .top
            .entries()
            .map(|(k, _)| {
                let flow = FlowKey::from_u64(k);
                HeavyHitter {
                    flow,
                    estimate: self.estimate(flow),
                }
            })
            .collect();
        out.sort_by(|a, b| b.estimate.total_cmp(&a.estimate).then(a.flow.cmp(&b.flow)));
        out
    }

    /// The current report: top-k flows at or above the threshold.
    pub fn report(&self) -> Report {
        let threshold_packets = self.threshold_packets();
        let mut heavy_hitters = self.top_flows();
        heavy_hitters.retain(|h| h.estimate >= threshold_packets && h.estimate > 0.0);
        Report {
            packets: self.packets(),
            threshold_packets,
            heavy_hitters,
        }
    }

    /// Forgets all counts (a new measurement epoch); the sampling sequence
    /// continues.
    pub fn reset(&mut self) {
        self.counters.fill(0);
        self.top.clear();
        self.packets_done = 0;
        self.scheduled = self.countdown;
        self.samples = 0;
        self.unkeyed = 0;
    }
}

/// The telemetry application: feeds every received frame to a
/// [`NitroSketch`] and produces a [`Report`] every `interval`.
#[derive(Debug)]
pub struct Telemetry {
    sketch: NitroSketch,
    interval: Duration,
    last_report: Option<Instant>,
}

impl Telemetry {
    /// A monitor reporting every `interval` (cumulative counts).
    pub fn new(config: &NitroConfig, interval: Duration) -> Result<Self, NitroConfigError> {
        Ok(Telemetry {
            sketch: NitroSketch::new(config)?,
            interval,
            last_report: None,
        })
    }

    /// Accounts one frame. The monitor is a sink: the frame is consumed.
    #[inline]
    pub fn process(&mut self, frame: &[u8]) -> Verdict {
        self.sketch.observe_frame(frame);
        Verdict::Consume
    }

    /// A report if `interval` has passed since the last one (the first call
    /// starts the clock and reports nothing).
    pub fn poll_report(&mut self, now: Instant) -> Option<Report> {
        match self.last_report {
            None => {
                self.last_report = Some(now);
                None
            }
            Some(last) if now.saturating_duration_since(last) >= self.interval => {
                self.last_report = Some(now);
                Some(self.sketch.report())
            }
            Some(_) => None,
        }
    }

    /// The sketch.
    pub fn sketch(&self) -> &NitroSketch {
        &self.sketch
    }

    /// The sketch, mutable (to reset it between epochs).
    pub fn sketch_mut(&mut self) -> &mut NitroSketch {
        &mut self.sketch
    }
}

/// The monitor on either interface: every frame is consumed (handed back to
/// the NIC without being sent).
impl PacketHandler for Telemetry {
    #[inline]
    fn handle(&mut self, frame: &mut [u8]) -> Verdict {
        self.process(frame)
    }
}

#[cfg(test)]
mod tests;
