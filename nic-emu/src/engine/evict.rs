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
//! (`clflushopt`, which neither waits nor orders ordinary stores): when
//! the tail gets there the write is an ordinary miss, as a device's would
//! be. `bench echo` at 64 B: with the vCPUs in different complexes, rx went
//! from 8.1-10.5 to 36-37 Mpps and the echo engine from ~42-58 to ~39 ns per
//! packet; with them close, echo went from ~39-42 to ~35.5 ns and rx from
//! ~20.5 to ~25 ns per frame (the one case it costs).
//!
//! Only single-line frames: the stall did not appear with larger ones (rx
//! with the vCPUs apart, no eviction: 13.9 Mpps at 256 B, 4.5 at 1518 B),
//! whose consecutive lines' misses overlap, while evicting all their lines
//! cost a lot (echo with the vCPUs close: 18.4-18.9 -> 10.8 Mpps at 256 B,
//! 8.5 -> 1.7 at 1518 B; evicting only each frame's first line still 13.2
//! and 5.5). Stream pipes are not treated (their writes are not
//! line-aligned frames). Distances of 4..=1024 lines were tried at 64 B: 16
//! was best in both placements; 4 and 8 were much slower apart.
//!
//! The same holds for lines the engine reads: a TX pipe's data, read by
//! the engine and rewritten by the application a lap later, needs the
//! application to invalidate the engine's copy first. So once a TX
//! notification's data that lies outside the application's RX pipes is
//! transmitted, the engine evicts its lines (`DeviceConfig::evict_tx_lines`):
//! with the vCPUs apart, the KV server on Ensō went from 125-145 to 66-68 ns
//! per request; with them close nothing measurable changed. Evicting, in
//! the same way as single-line frames, the lines of two-line frames ahead
//! of the RX tail was tried: it helped the KV server at one request per
//! frame with the vCPUs apart (1.22 -> 1.50x), but with them close cost
//! 128 B echo 15% and 128 B rx 40% (47 -> 29 Mpps), so it is not done.
//!
//! The packetized interface's RX buffers are not treated so: evicting the
//! buffer 32 descriptors ahead made that side slightly slower with the
//! vCPUs apart (rx 5.5-5.8 vs 6.3 Mpps), and it never showed the stall.

use crate::wire::FLIT;

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
    // of the region (callers pass a line of a pipe), so it cannot fault.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a supported instruction on a mapped address (above).
    unsafe {
        std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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

    #[test]
    fn support_is_detected_without_faulting() {
        if supported() {
            let line = [0u8; 64];
            evict_line(line.as_ptr());
            assert_eq!(line, [0u8; 64], "eviction keeps contents");
        }
    }
}
