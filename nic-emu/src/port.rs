//! Ports and what is at the other end of their wire: nothing, a loopback, a
//! cable to another port, or the built-in traffic generator and sink.

use crate::config::{GeneratorConfig, SizeSpec, VerifyLevel, WireConfig};
use crate::counters::{GeneratorCounters, PortCounters};
use crate::steering::SteerMemo;
use crate::testframe::{FrameKind, TestFrames};
use crate::wire::{Classified, MAX_FRAME};

/// Frames a port's inbound FIFO holds (loopback and cables).
pub const WIRE_FIFO_FRAMES: usize = 4096;

/// A FIFO of frames in fixed slots, allocated once.
#[derive(Debug)]
pub struct FrameFifo {
    slots: Box<[u8]>,
    lens: Box<[u16]>,
    /// When each frame reaches the far end (delay lines).
    ready_at: Box<[u64]>,
    head: usize,
    len: usize,
}

impl FrameFifo {
    /// A FIFO holding at most `frames` frames.
    pub fn new(frames: usize) -> Self {
        Self {
            slots: vec![0u8; frames * MAX_FRAME].into_boxed_slice(),
            lens: vec![0u16; frames].into_boxed_slice(),
            ready_at: vec![0u64; frames].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }
    /// Frames it holds.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Appends a frame; false if full (or the frame is too large).
    pub fn push(&mut self, frame: &[u8]) -> bool {
        self.push_at(frame, 0)
    }

    /// Appends a frame that may leave at `ready_at` (ns) or later.
    pub fn push_at(&mut self, frame: &[u8], ready_at: u64) -> bool {
        let cap = self.lens.len();
        if self.len == cap || frame.len() > MAX_FRAME {
            return false;
        }
        let i = (self.head + self.len) % cap;
        self.slots[i * MAX_FRAME..i * MAX_FRAME + frame.len()].copy_from_slice(frame);
        self.lens[i] = frame.len() as u16;
        self.ready_at[i] = ready_at;
        self.len += 1;
        true
    }

    /// The oldest frame, if it may leave at `now`.
    #[inline]
    pub fn front_ready(&self, now: u64) -> Option<&[u8]> {
        if self.len > 0 && self.ready_at[self.head] > now {
            return None;
        }
        self.front()
    }
    /// When the oldest frame reaches the far end, if there is one.
    pub fn front_ready_at(&self) -> Option<u64> {
        (self.len > 0).then(|| self.ready_at[self.head])
    }
    /// The oldest frame.
    pub fn front(&self) -> Option<&[u8]> {
        if self.len == 0 {
            return None;
        }
        let i = self.head;
        Some(&self.slots[i * MAX_FRAME..i * MAX_FRAME + self.lens[i] as usize])
    }
    /// Removes the oldest frame.
    pub fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % self.lens.len();
            self.len -= 1;
        }
    }
}

/// The built-in traffic generator and sink.
#[derive(Debug)]
pub struct Generator {
    cfg: GeneratorConfig,
    frames: TestFrames,
    next_seq: u64,
    /// What it sent and received.
    pub counters: GeneratorCounters,
    /// One bit per sequence number, when the count is bounded.
    seen: Vec<u64>,
    /// Cached frames by (kind, size index, flow) when that space is small,
    /// with their classification (headers do not change with the sequence
    /// number, so neither does it).
    templates: Vec<Option<Template>>,
    cache_sizes: Vec<usize>,
    start_ns: Option<u64>,
    /// Round-trip times of returned frames (ns), when timestamping.
    rtt: Option<hdrhistogram::Histogram<u64>>,
    /// Flow of the next frame (round robin, kept as a counter: no division
    /// per frame).
    next_flow: u32,
    /// Whether sending is paused.
    pub paused: bool,
    /// Frames sent before the rate clock last (re)started.
    paced_base: u64,
    scratch: Box<[u8]>,
    verify_scratch: Box<[u8]>,
    /// Index of the next replayed frame.
    next_replay: usize,
    /// Each replayed frame's classification and steering memo, as a
    /// template keeps them: the frames never change.
    replay_pre: Vec<(Option<Classified>, SteerMemo)>,
}

/// Most (kind, size, flow) combinations the generator keeps a template of:
/// enough for Maglev's "SYN flood" workload (2^20 flows of one size).
/// Beyond it, or beyond [`TEMPLATE_CACHE_MAX_BYTES`], every frame is built
/// and classified whole. With 2^16 as the bound, Maglev at 2^20 flows was
/// held by the engine building frames: 23.5 Mpps on Ensō and 18.2-18.7
/// packetized, against 35.7-39.5 and 31.2-32.5 with templates (`app-trial
/// --app maglev --flows 1048576`, alternating, vCPUs as siblings).
const TEMPLATE_CACHE_MAX: usize = 1 << 20;

/// Most memory the templates may take (filled lazily, as flows come up):
/// 2^20 templates of 64 B frames take ~170 MiB.
const TEMPLATE_CACHE_MAX_BYTES: usize = 256 << 20;

/// Whether `combos` templates of frames of up to `largest` bytes are kept.
fn templates_fit(combos: usize, largest: usize) -> bool {
    // Each template: its slot, the frame's bytes and the allocator's
    // rounding and header (about 16 B).
    let each = std::mem::size_of::<Option<Template>>() + largest.next_multiple_of(16) + 16;
    combos > 0
        && combos <= TEMPLATE_CACHE_MAX
        && combos.saturating_mul(each) <= TEMPLATE_CACHE_MAX_BYTES
}

/// A cached frame: its bytes (the sequence number is patched in before
/// each send), its classification and the NIC's steering decision for it.
#[derive(Debug)]
struct Template {
    bytes: Box<[u8]>,
    class: Option<Classified>,
    steer: SteerMemo,
}

impl Template {
    /// The frame of `(kind, seq, flow, len)` and its classification.
    #[cold]
    fn new(frames: &TestFrames, kind: FrameKind, seq: u64, flow: u32, len: usize) -> Self {
        let mut b = vec![0u8; MAX_FRAME];
        let n = frames.build(kind, seq, flow, len, &mut b);
        b.truncate(n);
        let class = crate::wire::classify_full(&b).ok();
        Template {
            bytes: b.into_boxed_slice(),
            class,
            steer: SteerMemo::default(),
        }
    }
}

/// Where a generator's frames go: a closure, or the NIC's RX path (a type
/// whose method is always inlined into the generator's loops, which a
/// closure's body is not).
pub trait FrameSink {
    /// Hands one frame over (`pre`: what the generator already knows about it).
    fn frame(&mut self, frame: &[u8], pre: Option<Precomputed<'_>>);
}

impl<F: FnMut(&[u8], Option<Precomputed<'_>>)> FrameSink for F {
    #[inline(always)]
    fn frame(&mut self, frame: &[u8], pre: Option<Precomputed<'_>>) {
        self(frame, pre)
    }
}

/// What the NIC may reuse about a generated frame: its classification and
/// a place to remember where it was steered.
pub type Precomputed<'a> = (&'a Classified, &'a mut SteerMemo);

impl Generator {
    /// A generator with `cfg`.
    pub fn new(cfg: GeneratorConfig) -> Self {
        let frames = TestFrames::new(cfg.flows, cfg.stream);
        let seen = match cfg.count {
            Some(n) if n <= 1 << 32 => vec![0u64; n.div_ceil(64) as usize],
            _ => Vec::new(),
        };
        let cache_sizes = match &cfg.sizes {
            SizeSpec::Fixed(n) => vec![*n],
            SizeSpec::Mix(v) => v.clone(),
            SizeSpec::Range(..) => Vec::new(),
        };
        let combos = cfg.kinds.len() * cache_sizes.len() * cfg.flows.max(1) as usize;
        let largest = cache_sizes.iter().copied().max().unwrap_or(0);
        let templates = if templates_fit(combos, largest) {
            (0..combos).map(|_| None).collect()
        } else {
            Vec::new()
        };
        Self {
            frames,
            next_seq: 0,
            counters: GeneratorCounters::default(),
            seen,
            templates,
            cache_sizes,
            start_ns: None,
            rtt: cfg.timestamps.then(|| {
                hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 3)
                    .expect("valid histogram bounds")
            }),
            next_flow: 0,
            paused: cfg.paused,
            paced_base: 0,
            scratch: vec![0u8; MAX_FRAME].into_boxed_slice(),
            verify_scratch: vec![0u8; MAX_FRAME].into_boxed_slice(),
            next_replay: 0,
            replay_pre: cfg.replay.as_ref().map_or_else(Vec::new, |r| {
                r.frames()
                    .iter()
                    .map(|f| (crate::wire::classify_full(f).ok(), SteerMemo::default()))
                    .collect()
            }),
            cfg,
        }
    }

    /// Its settings.
    pub fn config(&self) -> &GeneratorConfig {
        &self.cfg
    }

    /// Summary of the round-trip times recorded since the last reset.
    pub fn latency(&self) -> Option<crate::counters::LatencySummary> {
        let h = self.rtt.as_ref()?;
        let q = |x: f64| h.value_at_quantile(x);
        Some(crate::counters::LatencySummary {
            count: h.len(),
            min_ns: if h.is_empty() { 0 } else { h.min() },
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: h.max(),
            mean_ns: h.mean() as u64,
        })
    }

    /// Forgets the round-trip times recorded so far.
    pub fn reset_latency(&mut self) {
        if let Some(h) = self.rtt.as_mut() {
            h.reset();
        }
    }

    /// Restarts rate pacing from the next emit.
    pub fn restart_clock(&mut self) {
        self.start_ns = None;
        self.paced_base = self.next_seq;
    }

    /// Whether every frame has been sent.
    pub fn finished(&self) -> bool {
        self.cfg.count.is_some_and(|c| self.next_seq >= c)
    }

    /// Frames that may be sent now.
    fn allowance(&mut self, now_ns: u64) -> u64 {
        if self.paused {
            return 0;
        }
        let mut n = self.cfg.burst as u64;
        if let Some(c) = self.cfg.count {
            n = n.min(c.saturating_sub(self.next_seq));
        }
        if let Some(w) = self.cfg.max_in_flight {
            n = n.min(w.saturating_sub(self.counters.in_flight()));
        }
        if let Some(rate) = self.cfg.rate_pps {
            let start = *self.start_ns.get_or_insert(now_ns);
            // Saturating: the float-to-integer cast already saturates, so a
            // huge rate means "no limit" rather than an overflow.
            let due = (now_ns.saturating_sub(start) as f64 * rate / 1e9) as u64;
            let due = due.saturating_add(1);
            n = n.min(due.saturating_sub(self.next_seq - self.paced_base));
        }
        n
    }

    /// When the generator next has a frame to send (ns of the engine's
    /// clock; `now_ns` or earlier: at once), or `None` while it waits for
    /// nothing the clock brings (paused, done, or its window full until
    /// frames come back).
    pub fn next_due_ns(&self, now_ns: u64) -> Option<u64> {
        if self.paused {
            return None;
        }
        if self.cfg.count.is_some_and(|c| self.next_seq >= c) {
            return None;
        }
        if self
            .cfg
            .max_in_flight
            .is_some_and(|w| self.counters.in_flight() >= w)
        {
            return None;
        }
        let Some(rate) = self.cfg.rate_pps else {
            return Some(now_ns);
        };
        let Some(start) = self.start_ns else {
            return Some(now_ns);
        };
        // `allowance` lets frame `sent` (counted from the pacing's start)
        // go once `(t - start) * rate / 1e9 >= sent`. The cast saturates.
        let sent = (self.next_seq - self.paced_base) as f64;
        let due = start as f64 + (sent * 1e9 / rate).ceil();
        Some(due as u64)
    }

    /// Sends up to one burst: calls `deliver` with each frame (and its
    /// classification when the frame comes from a cached template). Taking
    /// the closure type here, rather than `impl FrameSink`, is what lets a
    /// closure's argument types be inferred (they are higher-ranked).
    #[inline]
    pub fn emit(
        &mut self,
        now_ns: u64,
        clock: &crate::engine::Clock,
        deliver: impl FnMut(&[u8], Option<Precomputed<'_>>),
    ) -> usize {
        self.emit_to(now_ns, clock, deliver)
    }

    /// [`Generator::emit`] into any [`FrameSink`].
    #[inline]
    pub fn emit_to(
        &mut self,
        now_ns: u64,
        clock: &crate::engine::Clock,
        mut deliver: impl FrameSink,
    ) -> usize {
        let n = self.allowance(now_ns);
        if n == 0 {
            return 0;
        }
        if let Some(r) = &self.cfg.replay {
            let frames = r.frames();
            let mut i = self.next_replay;
            let mut bytes = 0u64;
            for _ in 0..n {
                let f = &frames[i];
                bytes += f.len() as u64;
                let (class, memo) = &mut self.replay_pre[i];
                deliver.frame(f, class.as_ref().map(|c| (c, memo)));
                i += 1;
                if i == frames.len() {
                    i = 0;
                }
            }
            self.next_replay = i;
            self.next_seq += n;
            self.counters.sent += n;
            self.counters.sent_bytes += bytes;
            return n as usize;
        }
        if self.cfg.kinds.len() == 1
            && self.cache_sizes.len() == 1
            && self.templates.len() == self.cfg.flows.max(1) as usize
            && self.rtt.is_none()
        {
            self.emit_templates(n, &mut deliver);
            return n as usize;
        }
        for _ in 0..n {
            let seq = self.next_seq;
            self.next_seq += 1;
            let flow = self.next_flow;
            self.next_flow += 1;
            if self.next_flow >= self.cfg.flows {
                self.next_flow = 0;
            }
            let nk = self.cfg.kinds.len();
            let ki = if nk == 1 {
                0
            } else {
                (netview::mix64(seq ^ 0x5555) % nk as u64) as usize
            };
            let kind = self.cfg.kinds[ki];
            let (frame, pre): (&mut [u8], Option<Precomputed<'_>>) = if self.templates.is_empty() {
                let len = self.cfg.sizes.size_for(seq);
                let n = self.frames.build(kind, seq, flow, len, &mut self.scratch);
                (&mut self.scratch[..n], None)
            } else {
                let si = match self.cache_sizes.len() {
                    1 => 0,
                    k => (netview::mix64(seq) % k as u64) as usize,
                };
                let idx = (ki * self.cache_sizes.len() + si) * self.cfg.flows.max(1) as usize
                    + flow as usize;
                let slot = &mut self.templates[idx];
                if slot.is_none() {
                    *slot = Some(Template::new(
                        &self.frames,
                        kind,
                        seq,
                        flow,
                        self.cache_sizes[si],
                    ));
                }
                let t = slot.as_mut().expect("template just filled");
                patch_seq(&mut t.bytes, kind, seq);
                let pre = t.class.as_ref().map(|c| (c, &mut t.steer));
                (&mut t.bytes[..], pre)
            };
            if self.rtt.is_some() && kind == FrameKind::Ipv4Udp {
                // The send time of this frame (not of the engine step).
                let t = clock.now_ns() as u32;
                frame[TS_OFFSET..TS_OFFSET + 4].copy_from_slice(&t.to_le_bytes());
            }
            self.counters.sent += 1;
            self.counters.sent_bytes += frame.len() as u64;
            deliver.frame(frame, pre);
        }
        n as usize
    }

    /// [`Generator::emit`] for `n > 0` frames when every frame comes from a
    /// cached template chosen by its flow alone (one kind, one size) and no
    /// send time is stamped: the same frames, sequence numbers, flows and
    /// counts, with the per-frame choice of kind, size and slot left out.
    #[inline(always)]
    fn emit_templates(&mut self, n: u64, deliver: &mut impl FrameSink) {
        let kind = self.cfg.kinds[0];
        let size = self.cache_sizes[0];
        let flows = self.cfg.flows;
        let p = kind.payload_offset();
        let mut seq = self.next_seq;
        let mut flow = self.next_flow;
        let mut bytes = 0u64;
        for _ in 0..n {
            // The slot of (kind 0, size 0, flow): `flow` itself, and
            // `flow < flows.max(1)` = the number of templates.
            let slot = &mut self.templates[flow as usize];
            let t = match slot {
                Some(t) => t,
                None => slot.insert(Template::new(&self.frames, kind, seq, flow, size)),
            };
            let pay: &mut [u8; 17] = (&mut t.bytes[p..p + 17]).try_into().expect("17 bytes");
            pay[4..12].copy_from_slice(&seq.to_le_bytes());
            pay[16] = seq as u8;
            bytes += t.bytes.len() as u64;
            seq += 1;
            flow += 1;
            if flow >= flows {
                flow = 0;
            }
            let pre = t.class.as_ref().map(|c| (c, &mut t.steer));
            deliver.frame(&t.bytes, pre);
        }
        self.next_seq = seq;
        self.next_flow = flow;
        self.counters.sent += n;
        self.counters.sent_bytes += bytes;
    }

    /// A checker for a batch of frames the NIC sends back in one pass
    /// (the generator sends nothing meanwhile): see [`Returns`].
    #[inline(always)]
    pub fn returns(&mut self) -> Returns<'_> {
        let plain = self.cfg.replay.is_none()
            && self.cfg.verify == VerifyLevel::Sequence
            && self.seen.is_empty()
            && self.rtt.is_none();
        Returns {
            next_seq: self.next_seq,
            g: self,
            plain,
            returned: 0,
            bytes: 0,
        }
    }

    /// Checks a frame the NIC sent back (at `now`, ns).
    #[inline(always)]
    pub fn on_return(&mut self, frame: &[u8], now: u64) {
        if self.cfg.replay.is_some() {
            // Replayed frames carry no sequence number to check.
            self.counters.returned += 1;
            self.counters.returned_bytes += frame.len() as u64;
            return;
        }
        let v = match self.cfg.verify {
            VerifyLevel::Full => {
                let skip = self.rtt.is_some().then_some(TS_OFFSET..TS_OFFSET + 4);
                match self.frames.verify(
                    frame,
                    self.cfg.echo_increment,
                    skip,
                    &mut self.verify_scratch,
                ) {
                    Ok(v) => v,
                    Err(crate::testframe::VerifyError::Foreign) => {
                        self.counters.foreign += 1;
                        return;
                    }
                    Err(_) => {
                        self.counters.corrupt += 1;
                        return;
                    }
                }
            }
            VerifyLevel::Sequence => match TestFrames::peek(frame) {
                Some(v) => v,
                None => {
                    self.counters.foreign += 1;
                    return;
                }
            },
        };
        if v.seq >= self.next_seq {
            self.counters.corrupt += 1;
            return;
        }
        if !self.seen.is_empty() {
            let (w, b) = ((v.seq / 64) as usize, v.seq % 64);
            if self.seen[w] & (1 << b) != 0 {
                self.counters.duplicate += 1;
                return;
            }
            self.seen[w] |= 1 << b;
        }
        self.counters.returned += 1;
        self.counters.returned_bytes += frame.len() as u64;
        if let Some(h) = self.rtt.as_mut() {
            if v.kind == FrameKind::Ipv4Udp {
                let b = &frame[TS_OFFSET..TS_OFFSET + 4];
                let sent = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let rtt = (now as u32).wrapping_sub(sent) as u64;
                h.saturating_record(rtt.max(1));
            }
        }
    }
}

/// [`Generator::on_return`] for a batch of returned frames: in the
/// commonest setting (sequence checks only: no replay, no duplicate map,
/// no round trips) a frame costs its peek and one compare, and the counts
/// of good frames are added to the generator's when the batch is dropped;
/// in every other setting each frame goes through `on_return`.
pub struct Returns<'a> {
    g: &'a mut Generator,
    plain: bool,
    next_seq: u64,
    returned: u64,
    bytes: u64,
}

impl Returns<'_> {
    /// Checks a frame the NIC sent back (at `now`, ns).
    #[inline(always)]
    pub fn on_return(&mut self, frame: &[u8], now: u64) {
        if !self.plain {
            return self.g.on_return(frame, now);
        }
        // What `on_return` does at `VerifyLevel::Sequence` with no
        // duplicate map and no round trips.
        match TestFrames::peek(frame) {
            Some(v) if v.seq < self.next_seq => {
                self.returned += 1;
                self.bytes += frame.len() as u64;
            }
            Some(_) => self.g.counters.corrupt += 1,
            None => self.g.counters.foreign += 1,
        }
    }
}

impl Drop for Returns<'_> {
    fn drop(&mut self) {
        self.g.counters.returned += self.returned;
        self.g.counters.returned_bytes += self.bytes;
    }
}

/// Where the generator's timestamp goes in an IPv4 frame.
const TS_OFFSET: usize = 18;

#[inline]
fn patch_seq(frame: &mut [u8], kind: FrameKind, seq: u64) {
    let p = kind.payload_offset();
    frame[p + 4..p + 12].copy_from_slice(&seq.to_le_bytes());
    frame[p + 16] = seq as u8;
}

/// What is at the other end of a port's wire.
#[derive(Debug)]
pub enum Wire {
    /// Frames sent are discarded; nothing arrives.
    Null,
    /// Frames sent come back in on the same port.
    Loopback,
    /// Peer port and propagation delay (ns).
    Cable(usize, u64),
    /// The built-in traffic generator and sink.
    Generator(Box<Generator>),
    /// Anything else: a backend of [`crate::backend`].
    Backend(Box<dyn crate::backend::Backend>),
}

/// A port of the device.
#[derive(Debug)]
pub struct Port {
    /// How the port is wired.
    pub wire: Wire,
    /// Frames on their way into this port (from a loopback or cable).
    pub inbound: Option<FrameFifo>,
    /// Its counters.
    pub counters: PortCounters,
}

/// A port whose backend could not be opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("port {port}: {error}")]
pub struct PortError {
    /// The port.
    pub port: usize,
    /// Why its backend was refused.
    pub error: crate::backend::BackendError,
}

impl Port {
    /// Port `me` of device `device`, wired as `cfg` (`all`: every port's
    /// wiring). A backend that cannot be opened (a missing file, an
    /// interface that does not exist) is an error naming it.
    pub fn new(
        cfg: &WireConfig,
        all: &[WireConfig],
        me: usize,
        device: &str,
    ) -> Result<Self, PortError> {
        let fed = all.iter().enumerate().any(|(i, w)| match w {
            WireConfig::Loopback => i == me,
            WireConfig::Cable { peer, .. } => *peer == me,
            _ => false,
        });
        let wire = match cfg {
            WireConfig::Null => Wire::Null,
            WireConfig::Loopback => Wire::Loopback,
            WireConfig::Cable { peer, delay_ns } => Wire::Cable(*peer, *delay_ns),
            WireConfig::Generator(g) => Wire::Generator(Box::new(Generator::new(g.clone()))),
            other => Wire::Backend(
                crate::backend::open(other, device, me)
                    .map_err(|error| PortError { port: me, error })?
                    .expect("every wiring but the built-in ones has a backend"),
            ),
        };
        Ok(Self {
            wire,
            inbound: fed.then(|| FrameFifo::new(WIRE_FIFO_FRAMES)),
            counters: PortCounters::default(),
        })
    }

    /// The wiring, as its text form.
    pub fn describe(&self) -> String {
        match &self.wire {
            Wire::Null => "null".into(),
            Wire::Loopback => "loopback".into(),
            Wire::Cable(p, 0) => format!("cable:{p}"),
            Wire::Cable(p, d) => format!("cable:{p}:delay={d}"),
            Wire::Generator(_) => "generator".into(),
            Wire::Backend(b) => b.describe(),
        }
    }

    /// The generator, when the port is wired to one.
    pub fn generator(&self) -> Option<&Generator> {
        match &self.wire {
            Wire::Generator(g) => Some(g),
            _ => None,
        }
    }
}

impl Port {
    /// A step's end for a backend port: sends what it gathered, and does
    /// its control-plane work when due.
    #[inline]
    pub fn end_step(&mut self, now: u64) {
        if let Wire::Backend(b) = &mut self.wire {
            b.flush(now);
            b.maintain(now);
        }
    }

    /// A backend port's counters that are not drops, and its drops.
    pub fn wire_counters(&self) -> (crate::backend::Named, crate::backend::Named) {
        match &self.wire {
            Wire::Backend(b) => (b.stats(), b.drops()),
            _ => (Vec::new(), Vec::new()),
        }
    }

    /// Flushes files and stops a backend's threads (the device stops).
    pub fn finish(&mut self) {
        if let Wire::Backend(b) = &mut self.wire {
            b.flush(u64::MAX);
            b.finish();
        }
    }
}

/// Sends `frame` out of port `from` at time `now` (ns).
#[inline(always)]
pub fn transmit(ports: &mut [Port], from: usize, frame: &[u8], now: u64) {
    let p = &mut ports[from];
    p.counters.tx_frames += 1;
    p.counters.tx_bytes += frame.len() as u64;
    transmit_uncounted(ports, from, frame, now);
}

/// [`transmit`] without counting the frame in the port's `tx_frames` and
/// `tx_bytes` (the caller counts them).
#[inline(always)]
pub fn transmit_uncounted(ports: &mut [Port], from: usize, frame: &[u8], now: u64) {
    let p = &mut ports[from];
    let dst = match &mut p.wire {
        Wire::Null => {
            p.counters.tx_discarded += 1;
            return;
        }
        Wire::Generator(g) => {
            g.on_return(frame, now);
            return;
        }
        Wire::Backend(b) => {
            b.transmit(frame, now);
            return;
        }
        Wire::Loopback => (from, 0),
        Wire::Cable(peer, delay) => (*peer, *delay),
    };
    let d = &mut ports[dst.0];
    let ok = d
        .inbound
        .as_mut()
        .is_some_and(|f| f.push_at(frame, now + dst.1));
    if !ok {
        d.counters.drop_wire_fifo_full += 1;
    }
}

#[cfg(test)]
mod tests;
