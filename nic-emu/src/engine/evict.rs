//! Keeping the engine's own cache out of the way of its DMA writes.
//!
//! A device's DMA write never finds the line in the device: it invalidates
//! the CPU's copies and writes. The engine is a CPU core, and a pipe line it
//! wrote and the application then only read stays in the engine's cache in
//! a shared state. One ring cycle later the engine writes that line again,
//! and the store must first upgrade its copy by invalidating the
//! application's. On the development machine (AMD EPYC, two vCPUs) such
//! upgrades did not overlap when the vCPUs sat in different core complexes:
//! an RX-only application that read its pipe without writing it (telemetry,
//! `bench echo --mode rx`) held the Ensō engine at 120-150 ns per 64 B frame
//! instead of ~20 (7-8 Mpps), while an application that wrote each frame
//! (so the engine's next store was a plain miss, which overlaps) did not.
//!
//! So, for each single-line (64 B) frame it writes into a frame pipe, the
//! engine evicts the pipe line 16 lines (1 KiB) ahead from its own caches
//! (and for a two-line frame the two lines there; see below)
//! (`clflushopt`, which neither waits nor orders ordinary stores): when
//! the tail gets there the write is an ordinary miss, as a device's would
//! be. `bench echo` at 64 B: with the vCPUs in different complexes, rx went
//! from 8.1-10.5 to 36-37 Mpps and the echo engine from ~42-58 to ~39 ns per
//! packet; with them close, echo went from ~39-42 to ~35.5 ns and rx from
//! ~20.5 to ~25 ns per frame (the one case it costs).
//!
//! Which of the two is cheaper thus depends on the placement, and the host
//! moves the vCPUs during a run. So by default
//! (`HostTuning::evict_ahead_adaptive`) the engine measures, every 10 to
//! 160 ms, its busy time per frame with and without the eviction and keeps
//! the cheaper ([`AheadChooser`]). Telemetry's Ensō side (RX only, 64 B),
//! 40 interleaved trials with the vCPUs close: 47-56 Mpps adaptive, 33-56
//! never evicting, 26-40 always evicting; apart, adaptive kept evicting
//! (26-36 Mpps; 7-8 never evicting).
//!
//! Frames of one or two lines ([`MAX_FLITS`]) only. With larger ones the
//! stall did not appear (rx with the vCPUs apart, no eviction: 13.9 Mpps at
//! 256 B, 4.5 at 1518 B), their consecutive lines' misses overlapping,
//! while evicting all their lines cost a lot (echo with the vCPUs close:
//! 18.4-18.9 -> 10.8 Mpps at 256 B, 8.5 -> 1.7 at 1518 B; evicting only
//! each frame's first line still 13.2 and 5.5). Two-line frames were first
//! left out too, since always evicting ahead of them cost 128 B echo 15%
//! and 128 B rx 40% with the vCPUs close; under the chooser below, which
//! stops evicting where that is cheaper, they gained apart and lost little
//! close. Alternating the two builds in short runs, vCPUs apart (probes
//! before and after from 300 ns): the KV server at one request (a two-line
//! frame) per frame 11.2-13.8 Mrequests/s on Ensō against 7.1-10.1 (one
//! run 15.6), 1.55-2.04x the packetized side against 0.86-1.21x; 128 B rx
//! mostly 23-25 Mpps against 15-20; 128 B echo unchanged (13-23 against
//! 17-26). With them close: KV and 128 B echo unchanged, 128 B rx 64-66
//! against 68-69 Mpps. At 64 B, distances of 4..=1024 lines were tried:
//! 16 was best in both placements; 4 and 8 were much slower apart.
//!
//! Stream pipes are treated too, [`STREAM_AHEAD_FACTOR`] times further
//! ahead (64 lines by default), since one payload there may fill many
//! lines. The log monitor (1 KiB payloads, apache patterns, a log with 2%
//! events) with the vCPUs apart: 1.88-1.91 Mpps without, 1.42-1.54 at 16
//! lines ahead (the lines of the very next payload, whose stores then wait
//! on the evictions), 3.09-3.15 at 64 and 2.79-3.13 at 256, where the
//! monitor rather than the engine was the limit. With them close it
//! changed nothing (3.06-3.15 Mpps without, 3.13-3.19 with; app-limited).
//! The chooser times frames of up to [`MAX_FLITS`] lines only; stream pipes
//! follow its choice.
//!
//! The same holds for lines the engine reads: a TX pipe's data, read by
//! the engine and rewritten by the application a lap later, needs the
//! application to invalidate the engine's copy first. So once a TX
//! notification's data that lies outside the application's RX pipes is
//! transmitted, the engine evicts its lines (`HostTuning::evict_tx_lines`):
//! with the vCPUs apart, the KV server on Ensō went from 125-145 to 66-68 ns
//! per request; with them close nothing measurable changed.
//!
//! The packetized interface's RX buffers are not treated so: evicting the
//! buffer 32 descriptors ahead made that side slightly slower with the
//! vCPUs apart (rx 5.5-5.8 vs 6.3 Mpps), and it never showed the stall.
//!
//! # Non-temporal stores
//!
//! A third way to write a frame of up to [`MAX_FLITS`] lines is closer
//! still to a DMA write: non-temporal stores ([`stream_lines`]), which go
//! around the engine's caches and invalidate every cached copy of the
//! line, so there is no copy of the engine's own to upgrade and nothing to
//! evict. They are weakly ordered, so a run that made any is closed with a
//! store fence ([`store_fence`]) before the pipe's tail, which publishes
//! the frames, is set; frames that go the whole way (one per run) and
//! stream pipes keep to ordinary stores and eviction. The chooser picks
//! among the three ([`MODES`]), trying the other two in turn:
//! - vCPUs apart (probe ~400 ns), telemetry's Ensō side (RX only, 64 B):
//!   35-36 Mpps evicting ahead, 49-50 streaming (the engine 28 -> 20 ns a
//!   frame); the chooser streamed. Maglev (whose application writes every
//!   frame): 64-68 Mpps with plain stores, 44 streaming; it kept plain.
//! - vCPUs close: telemetry 114-122 Mpps with plain stores, 54-64
//!   streaming (the engine 8.5 -> 16-19 ns a frame); it kept plain.
//!
//! Descriptor buffers are never streamed. There each frame is published by
//! its own descriptor, so streaming needs a fence per frame, and the
//! application then reads every buffer from memory at a scattered address.
//! Tried with the vCPUs close, the packetized side fell from 52-63 to 5-7
//! Mpps (telemetry) and from 42-44 to 5 Mpps (Maglev), with the
//! application at 120-180 ns a frame.

//!
//! # Prefetching ahead for writing
//!
//! A fourth way, and the one the engine keeps throughout where the CPU has
//! `prefetchw` ([`prefetch_for_write`]): plain stores, with the line 16
//! lines ahead of the tail prefetched for writing, so that taking it from
//! the application's caches is under way long before the store (only
//! lines the application is done with: with less free room than that the
//! prefetch is skipped, since taking a line it is still to read slowed it,
//! and a full pipe kept it so). Forced ways (`--pipe-writes`),
//! `app-trial --app telemetry,maglev --interface enso`:
//! - vCPUs apart (probe ~400 ns): telemetry 62-77 Mpps prefetching ahead,
//!   58-61 streaming, 32-35 evicting ahead, 32-34 plain; Maglev 62-65
//!   prefetching ahead, 63-66 plain, 41-44 streaming, 27-30 evicting.
//! - vCPUs as siblings (~45-60 ns): telemetry 102-108 prefetching ahead,
//!   114-117 plain, 62 streaming, 35 evicting; Maglev 66-68 prefetching
//!   ahead, 64-66 plain.
//!
//! It was never far from the cheapest, where each of the others cost at
//! least twice the cheapest in some placement. The chooser, run over the
//! four ways, did worse than keeping it: its first comparison came while
//! the pipes were still being touched for the first time, made plain
//! stores look cheaper, and then it stayed there (telemetry apart 30 Mpps
//! against 74-77 prefetching ahead throughout; Maglev close 57 against
//! 67). Where the CPU has no `prefetchw`, the chooser picks among the other
//! three ([`MODES`]) as described above.

use crate::counters::PipeWriteMode;
use crate::wire::FLIT;

/// Frames of at most this many lines have the pipe lines ahead of them
/// evicted (see the module's documentation).
pub(super) const MAX_FLITS: usize = 2;

/// How many times further ahead than in frame pipes the lines of stream
/// pipes are evicted.
pub(super) const STREAM_AHEAD_FACTOR: usize = 4;

/// Ring positions (bytes, each a line start, in `0..size`) of the lines to
/// evict as a ring's tail moves from `from` to `to` (positions in a ring of
/// `size` bytes, a power of two; `to` may have wrapped past `from`): those
/// starting in `[from + ahead, to + ahead)`, so that over a lap every line
/// comes up once, `ahead` bytes before the tail reaches it.
#[inline(always)]
pub(super) fn lines_ahead(
    size: usize,
    from: usize,
    to: usize,
    ahead: usize,
) -> impl Iterator<Item = usize> {
    let end = if to >= from { to } else { to + size } + ahead;
    let start = (from + ahead).next_multiple_of(FLIT);
    (start..end).step_by(FLIT).map(move |p| p & (size - 1))
}

/// Whether this CPU can evict lines without waiting (`clflushopt`).
pub(super) fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // CPUID leaf 7, subleaf 0: EBX bit 23 is CLFLUSHOPT (std's feature
        // detection does not name it). Leaf 7 exists when leaf 0 says so.
        use std::arch::x86_64::{__cpuid, __cpuid_count};
        __cpuid(0).eax >= 7 && __cpuid_count(7, 0).ebx & (1 << 23) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Evicts the cache line holding `p` from every cache (writing it back if
/// it is dirty) without waiting for it. Only called when [`supported`].
#[inline(always)]
pub(super) fn evict_line(p: *const u8) {
    // `clflushopt` is available (callers check `supported` once); it neither
    // reads nor changes memory contents, and `p` points into a live mapping
    // of the region (callers pass a line of a pipe, or of TX data inside the
    // application's region), so it cannot fault.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a supported instruction on a mapped address (above).
    unsafe {
        std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Whether this CPU has the non-temporal stores [`stream_lines`] uses
/// (x86_64: SSE2, part of the base instruction set).
pub(super) fn non_temporal_supported() -> bool {
    cfg!(target_arch = "x86_64")
}

/// Writes `src` (at most [`MAX_FLITS`] lines of bytes) to the line at `dst`
/// and the one after with non-temporal stores, which go around the caches
/// (and invalidate every cached copy of the lines), as a device's DMA write
/// does; the rest of the last line is zero-filled, so that each line is
/// written whole. The stores are weakly ordered: [`store_fence`] must come
/// before anything that publishes them.
///
/// # Safety
/// `dst` must be line-aligned and valid for writes of `src`'s length
/// rounded up to whole lines; only called when [`non_temporal_supported`].
#[inline(always)]
pub(super) unsafe fn stream_lines(dst: *mut u8, src: &[u8]) {
    debug_assert!(src.len() <= MAX_FLITS * FLIT && (dst as usize).is_multiple_of(FLIT));
    let lines = src.len().div_ceil(FLIT).min(MAX_FLITS);
    let mut buf = [0u8; MAX_FLITS * FLIT];
    buf[..src.len()].copy_from_slice(src);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let d = dst.cast::<__m128i>();
        let s = buf.as_ptr().cast::<__m128i>();
        for i in 0..lines * FLIT / 16 {
            // SAFETY: `i * 16 + 16 <= lines * FLIT`, inside both `buf` and
            // the caller's lines at `dst`, which is 16-byte aligned (a line
            // start), as `_mm_stream_si128` requires; the load is unaligned.
            unsafe { _mm_stream_si128(d.add(i), _mm_loadu_si128(s.add(i))) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract (not reached: not supported here).
    unsafe {
        std::ptr::copy_nonoverlapping(buf.as_ptr(), dst, lines * FLIT)
    }
}

/// Orders every earlier store, non-temporal ones included, before every
/// later one (`sfence`).
#[inline(always)]
pub(super) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no operands and no preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    // Elsewhere there are no non-temporal stores to order; the fence only
    // keeps the frames before the tail store, whose own Release (SYNC POINT
    // C, Acquire partner: the library's load of `signal` in `poll`) then
    // publishes them.
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
}

/// Whether this CPU prefetches for writing (`prefetchw`: CPUID
/// 0x8000_0001, ECX bit 8, "3DNowPrefetch" on AMD, "PRFCHW" on Intel).
pub(super) fn prefetch_for_write_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Starts taking the line holding `p` into this core's cache for writing
/// (invalidating other cores' copies) without waiting for it. Only called
/// when [`prefetch_for_write_supported`].
#[inline(always)]
pub(super) fn prefetch_for_write(p: *const u8) {
    // A prefetch neither faults nor changes memory contents, and `p`
    // points into a live mapping of the region (a line of a pipe).
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a supported instruction on a mapped address (above).
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The ways the chooser picks from on CPUs without `prefetchw` (where the
/// CPU has it, the engine prefetches ahead throughout and does not choose:
/// see the module's documentation): evicting ahead first (the safe start:
/// its worst case costs far less than not evicting's).
pub(super) const MODES: &[PipeWriteMode] = &[
    PipeWriteMode::EvictAhead,
    PipeWriteMode::Plain,
    PipeWriteMode::NonTemporal,
];
/// [`MODES`] on CPUs without non-temporal stores either.
pub(super) const MODES_CACHED: &[PipeWriteMode] =
    &[PipeWriteMode::EvictAhead, PipeWriteMode::Plain];

/// Frames in each of the two measured windows of a comparison.
pub(super) const CHOOSE_WINDOW_FRAMES: u64 = 16_384;
/// A comparison that takes longer than this (a light load, or many pipes
/// to go round) is abandoned, and the current choice kept.
pub(super) const CHOOSE_MAX_NS: u64 = 50_000_000;
/// Shortest and longest time between comparisons: the gap doubles each
/// time the other choice loses, and is back to the shortest after a switch.
pub(super) const CHOOSE_GAP_MIN_NS: u64 = 10_000_000;
pub(super) const CHOOSE_GAP_MAX_NS: u64 = 160_000_000;
/// The other choice must cost at most this share of the current one
/// (in percent) to be taken.
pub(super) const CHOOSE_SWITCH_PERCENT: u64 = 85;

/// Decides, while the engine runs, how to write frames of up to
/// [`MAX_FLITS`] lines into frame pipes: whether evicting ahead pays, and
/// (where the CPU has them) whether non-temporal stores pay more. The
/// description below speaks of two ways; with three, each comparison
/// tries one of the other two, in turn.
///
/// Which is cheaper depends on where the host places the two vCPUs, and
/// the host moves them while a run goes on: with the engine's and the
/// application's vCPUs in different core complexes, an RX-only load
/// without the eviction ran at 6.5-7 Mpps and with it at 24-38; with them
/// close it was the other way round (~47 without, 24-38 with), while
/// Maglev's echo-like load came out within ~10% either way. Rather than
/// guess, the engine measures: every so often it times [`CHOOSE_WINDOW_FRAMES`]
/// frames of up to [`MAX_FLITS`] lines with its current choice and as many with the other
/// (busy time per frame), and keeps the other if it was cheaper by enough.
///
/// Before timing the other choice it lets the pipes go round once: what
/// not evicting costs is the engine's own copies of lines it wrote a lap
/// earlier, and for a lap after evicting stops there are none, which would
/// make not evicting look free.
///
/// What a frame, a pipe or a counter holds is the same either way; only
/// the engine's speed differs.
#[derive(Clone, Debug)]
pub(super) struct AheadChooser {
    /// The current way (or, while another is tried, the one being tried).
    mode: PipeWriteMode,
    /// The ways to choose from.
    modes: &'static [PipeWriteMode],
    /// Which of the other ways the next comparison tries (in turn).
    turn: usize,
    phase: Phase,
    gap_ns: u64,
    switches: u64,
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Until a comparison starts at `at` (ns).
    Steady { at: u64 },
    /// Timing the current choice from `start`; the comparison began at
    /// `began` (ns).
    Current { began: u64, start: Mark },
    /// Trying the other choice: it is timed from the frame count `from`
    /// on; the current one cost `current` (busy ns per 1024 frames).
    Other {
        began: u64,
        from: u64,
        start: Option<Mark>,
        current: u64,
        /// The current way, taken back unless the other wins.
        prev: PipeWriteMode,
    },
}

/// Where a window started: busy time and frames of up to [`MAX_FLITS`] lines.
#[derive(Clone, Copy, Debug)]
struct Mark {
    busy: u64,
    frames: u64,
}

impl AheadChooser {
    /// Chooses among `modes` (at least two), starting out with the first,
    /// with a first comparison after the shortest gap.
    pub(super) fn new(now: u64, modes: &'static [PipeWriteMode]) -> Self {
        assert!(modes.len() >= 2, "a choice needs two ways");
        AheadChooser {
            mode: modes[0],
            modes,
            turn: 0,
            phase: Phase::Steady {
                at: now + CHOOSE_GAP_MIN_NS,
            },
            gap_ns: CHOOSE_GAP_MIN_NS,
            switches: 0,
        }
    }

    /// How to write frames now.
    pub(super) fn mode(&self) -> PipeWriteMode {
        self.mode
    }

    /// The way the next comparison tries: the others in turn.
    fn next_other(&mut self) -> PipeWriteMode {
        let others = self.modes.len() - 1;
        let k = self.turn % others;
        self.turn += 1;
        *self
            .modes
            .iter()
            .filter(|&&m| m != self.mode)
            .nth(k)
            .expect("k < the number of other ways")
    }

    /// Times the current choice was given up for the other.
    pub(super) fn switches(&self) -> u64 {
        self.switches
    }

    /// Called after each engine step with the time, the engine's busy time
    /// so far and the frames of up to [`MAX_FLITS`] lines it has written so far; `lap` gives
    /// the frames that take every frame pipe once round (asked when the
    /// other choice is about to be tried).
    pub(super) fn update(&mut self, now: u64, busy: u64, frames: u64, lap: impl FnOnce() -> u64) {
        let here = Mark { busy, frames };
        match self.phase {
            Phase::Steady { at } => {
                if now >= at {
                    self.phase = Phase::Current {
                        began: now,
                        start: here,
                    };
                }
                return;
            }
            Phase::Current { began, start } => {
                if let Some(cost) = window_cost(start, here) {
                    let prev = self.mode;
                    self.mode = self.next_other();
                    self.phase = Phase::Other {
                        began,
                        from: frames.saturating_add(lap()),
                        start: None,
                        current: cost,
                        prev,
                    };
                    return;
                }
            }
            Phase::Other {
                began,
                from,
                start,
                current,
                prev,
            } => match start {
                None if frames >= from => {
                    self.phase = Phase::Other {
                        began,
                        from,
                        start: Some(here),
                        current,
                        prev,
                    };
                }
                Some(start) => {
                    if let Some(cost) = window_cost(start, here) {
                        let better = cost * 100 < current * CHOOSE_SWITCH_PERCENT;
                        self.settle(now, Some(better));
                        return;
                    }
                }
                None => {}
            },
        }
        // A comparison the load is too light (or the pipes too many) to
        // finish in time is abandoned; the gap stays as it was.
        let (Phase::Current { began, .. } | Phase::Other { began, .. }) = self.phase else {
            return;
        };
        if now - began > CHOOSE_MAX_NS {
            self.settle(now, None);
        }
    }

    /// Ends a comparison: `Some(true)` the other choice won, `Some(false)`
    /// it lost, `None` abandoned. Unless it won, the other choice, if it
    /// was being tried, is given up.
    fn settle(&mut self, now: u64, won: Option<bool>) {
        if let Phase::Other { prev, .. } = self.phase {
            if won != Some(true) {
                self.mode = prev;
            }
        }
        match won {
            Some(true) => {
                self.switches += 1;
                self.gap_ns = CHOOSE_GAP_MIN_NS;
            }
            Some(false) => self.gap_ns = (self.gap_ns * 2).min(CHOOSE_GAP_MAX_NS),
            None => {}
        }
        self.phase = Phase::Steady {
            at: now + self.gap_ns,
        };
    }
}

/// Busy ns per 1024 frames from `start` to `end`, once the window holds
/// [`CHOOSE_WINDOW_FRAMES`] frames.
fn window_cost(start: Mark, end: Mark) -> Option<u64> {
    let frames = end.frames - start.frames;
    (frames >= CHOOSE_WINDOW_FRAMES).then(|| (end.busy - start.busy) * 1024 / frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_comes_up_once_a_lap_ahead_of_the_tail() {
        let size = 4096;
        for ahead in [0, 64, 1024, 2048] {
            for step in [1, 7, 60, 64, 100, 1500] {
                let mut seen = vec![0u32; size / FLIT];
                let mut tail = 0;
                // Two laps from 0, in steps that wrap at every offset.
                for _ in 0..(2 * size).div_ceil(step) {
                    let to = (tail + step) % size;
                    for p in lines_ahead(size, tail, to, ahead) {
                        assert_eq!(p % FLIT, 0);
                        // Within `ahead` bytes past the part the tail just
                        // covered.
                        let dist = (p + size - tail) % size;
                        assert!(dist <= ahead + step, "{p} {tail} {ahead} {step}");
                        seen[p / FLIT] += 1;
                    }
                    tail = to;
                }
                // The intervals tile [ahead, moved + ahead) of the unwound
                // ring: line `l` comes up once per copy of it in there.
                let moved = (2 * size).div_ceil(step) * step;
                for (l, &n) in seen.iter().enumerate() {
                    let want = (0..4)
                        .map(|k| l * FLIT + k * size)
                        .filter(|&q| q >= ahead && q < moved + ahead)
                        .count() as u32;
                    assert_eq!(n, want, "line {l}, ahead {ahead}, step {step}");
                }
            }
        }
    }

    /// Frames of a lap of the pipes in these tests.
    const LAP: u64 = 32_768;

    /// A load on the engine: its busy cost per frame while evicting
    /// (`on_ns`) and while not (`off_ns`). For a lap after evicting stops
    /// a frame costs `fresh_ns`: the lines were evicted ahead of it.
    struct Load {
        rate_per_ms: u64,
        on_ns: u64,
        off_ns: u64,
        fresh_ns: u64,
    }

    /// Whether the chooser evicts ahead.
    fn on(c: &AheadChooser) -> bool {
        c.mode() == PipeWriteMode::EvictAhead
    }

    struct Run {
        c: AheadChooser,
        t: u64,
        busy: u64,
        frames: u64,
        off_since: Option<u64>,
    }

    impl Run {
        fn new() -> Self {
            let t = 1_000_000;
            Run {
                c: AheadChooser::new(t, MODES_CACHED),
                t,
                busy: 0,
                frames: 0,
                off_since: None,
            }
        }

        /// `ms` milliseconds of `load`, in steps of 10 us.
        fn drive(&mut self, ms: u64, load: &Load) {
            for _ in 0..ms * 100 {
                self.t += 10_000;
                let n = load.rate_per_ms / 100;
                let cost = if on(&self.c) {
                    self.off_since = None;
                    load.on_ns
                } else {
                    let since = *self.off_since.get_or_insert(self.frames);
                    if self.frames - since < LAP {
                        load.fresh_ns
                    } else {
                        load.off_ns
                    }
                };
                self.frames += n;
                self.busy += n * cost;
                self.c.update(self.t, self.busy, self.frames, || LAP);
            }
        }
    }

    #[test]
    fn the_chooser_keeps_the_cheaper_choice_and_follows_a_change() {
        // vCPUs apart: evicting is 4x cheaper, and not evicting looks
        // cheaper still for the first lap.
        let apart = Load {
            rate_per_ms: 30_000,
            on_ns: 30,
            off_ns: 120,
            fresh_ns: 20,
        };
        let close = Load {
            rate_per_ms: 45_000,
            on_ns: 28,
            off_ns: 21,
            fresh_ns: 21,
        };
        let mut r = Run::new();
        assert!(on(&r.c), "starts out evicting");
        r.drive(1000, &apart);
        assert!(on(&r.c), "fooled by the first lap without eviction");
        assert_eq!(r.c.switches(), 0);
        assert_eq!(r.c.gap_ns, CHOOSE_GAP_MAX_NS);
        // The host moves the vCPUs: within the longest gap and one
        // comparison, the engine stops evicting, once.
        r.drive(200, &close);
        assert!(!on(&r.c));
        assert_eq!(r.c.switches(), 1);
        r.drive(1000, &close);
        assert!(!on(&r.c));
        assert_eq!(r.c.switches(), 1);
        // And back.
        r.drive(400, &apart);
        assert!(on(&r.c));
        assert_eq!(r.c.switches(), 2);
    }

    #[test]
    fn the_chooser_needs_a_clear_gain_and_a_real_load() {
        // 10% cheaper is within the noise: no switch.
        let mut r = Run::new();
        let slight = Load {
            rate_per_ms: 30_000,
            on_ns: 30,
            off_ns: 27,
            fresh_ns: 27,
        };
        r.drive(1000, &slight);
        assert!(on(&r.c));
        assert_eq!(r.c.switches(), 0);
        // A trickle never finishes a comparison: each is abandoned, the
        // current choice stays whatever the trickle costs, and the gap
        // does not grow, so a real load is looked at soon.
        let mut r = Run::new();
        let trickle = Load {
            rate_per_ms: 100,
            on_ns: 300,
            off_ns: 1,
            fresh_ns: 1,
        };
        r.drive(1000, &trickle);
        assert!(on(&r.c));
        assert_eq!(r.c.switches(), 0);
        assert_eq!(r.c.gap_ns, CHOOSE_GAP_MIN_NS);
        let cheaper_off = Load {
            rate_per_ms: 30_000,
            on_ns: 30,
            off_ns: 20,
            fresh_ns: 20,
        };
        r.drive(100, &cheaper_off);
        assert!(!on(&r.c));
        assert_eq!(r.c.switches(), 1);
    }

    /// Drives `c` for `ms` milliseconds at 30 000 frames a millisecond,
    /// each frame costing `cost(mode)`; the state is (time, busy, frames).
    fn drive3(
        c: &mut AheadChooser,
        state: &mut (u64, u64, u64),
        ms: u64,
        cost: impl Fn(PipeWriteMode) -> u64,
    ) {
        for _ in 0..ms * 100 {
            state.0 += 10_000;
            state.2 += 300;
            state.1 += 300 * cost(c.mode());
            c.update(state.0, state.1, state.2, || LAP);
        }
    }

    #[test]
    fn the_chooser_tries_each_other_way_and_keeps_the_cheapest() {
        use PipeWriteMode::*;
        let mut state = (1_000_000, 0, 0);
        let mut c = AheadChooser::new(state.0, MODES);
        assert_eq!(c.mode(), EvictAhead);
        // vCPUs apart: streaming cheapest, plain stores far dearer.
        let apart = |m| match m {
            EvictAhead => 30,
            Plain => 120,
            NonTemporal => 20,
            PrefetchAhead => unreachable!("not among the ways"),
        };
        drive3(&mut c, &mut state, 1000, apart);
        assert_eq!(c.mode(), NonTemporal);
        assert_eq!(c.switches(), 1);
        // Close: plain stores cheapest; streaming second.
        let close = |m| match m {
            EvictAhead => 28,
            Plain => 10,
            NonTemporal => 20,
            PrefetchAhead => unreachable!("not among the ways"),
        };
        drive3(&mut c, &mut state, 1000, close);
        assert_eq!(c.mode(), Plain);
        assert_eq!(c.switches(), 2);
        drive3(&mut c, &mut state, 1000, close);
        assert_eq!(c.mode(), Plain, "both others were tried and lost");
        assert_eq!(c.switches(), 2);
        assert_eq!(c.gap_ns, CHOOSE_GAP_MAX_NS);
    }

    #[test]
    fn the_chooser_goes_through_four_ways() {
        use PipeWriteMode::*;
        let mut state = (1_000_000, 0, 0);
        const FOUR: &[PipeWriteMode] = &[PrefetchAhead, NonTemporal, Plain, EvictAhead];
        let mut c = AheadChooser::new(state.0, FOUR);
        assert_eq!(c.mode(), PrefetchAhead);
        let cost = |cheapest| {
            move |m| {
                if m == cheapest {
                    10
                } else {
                    40
                }
            }
        };
        // Each way in turn the cheapest: the chooser finds it, once each.
        for (k, m) in [Plain, EvictAhead, NonTemporal, PrefetchAhead]
            .into_iter()
            .enumerate()
        {
            drive3(&mut c, &mut state, 2000, cost(m));
            assert_eq!(c.mode(), m);
            assert_eq!(c.switches(), k as u64 + 1);
        }
    }

    #[test]
    fn support_is_detected_without_faulting() {
        // An instruction the CPU lacks would kill the test (SIGILL), so a
        // detection that says yes wrongly fails here. Each runs on a line
        // just written (dirty in this core's cache) through a pointer the
        // compiler must assume it may write through, and the line is read
        // back from memory: neither may change what the line holds.
        #[repr(C, align(64))]
        struct Line([u8; FLIT]);
        let pattern: [u8; FLIT] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5a);
        let mut line = Box::new(Line([0; FLIT]));
        let p = line.0.as_mut_ptr();
        let check = |what: &str| {
            for (i, &want) in pattern.iter().enumerate() {
                // SAFETY: `i < FLIT`, inside the live line `p` points to.
                let got = unsafe { std::ptr::read_volatile(p.add(i)) };
                assert_eq!(got, want, "{what} changed byte {i}");
            }
        };
        if supported() {
            // SAFETY: `p` points to the line's `FLIT` bytes.
            unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), p, FLIT) };
            evict_line(p);
            check("eviction");
        }
        if prefetch_for_write_supported() {
            // SAFETY: as above.
            unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), p, FLIT) };
            prefetch_for_write(p);
            check("a prefetch for writing");
        }
        drop(line);
    }
}
