//! An attached application as the engine sees it: its shared memory (the
//! DMA region and the posted-write queue) and the accessors every engine
//! access to that memory goes through, checked against the region (the
//! emulated IOMMU), plus the state the NIC keeps per application.

use memmap2::MmapRaw;

use super::evict;
use crate::counters::AppCounters;
use crate::layout::{self, MmioQueue, RxNotification, TxNotification};
use crate::shm;
use crate::wire::{FLIT, MAX_FRAME};

/// A notification slot's size as the byte count of a DMA access.
pub(super) const NOTIF_BYTES: u64 = layout::NOTIF_SLOT as u64;

#[derive(Debug, Default)]
pub(super) struct Nbuf {
    pub(super) rx_ring: usize,
    pub(super) rx_low: u32,
    pub(super) rx_head: u32,
    pub(super) rx_tail: u32,
    pub(super) tx_ring: usize,
    pub(super) tx_low: u32,
    /// Next TX notification the NIC will read.
    pub(super) tx_head: u32,
    /// Software's tail.
    pub(super) tx_tail: u32,
    /// TX notifications already fetched (accounted) by the NIC.
    pub(super) tx_fetched: u32,
}

/// A TX notification being transmitted.
#[derive(Debug, Clone, Copy)]
pub(super) struct TxCursor {
    pub(super) addr: usize,
    pub(super) len: usize,
    pub(super) off: usize,
    pub(super) port: usize,
    /// Evict the data's lines once it is all read (see `Core::evict_tx`).
    pub(super) evict: bool,
}

/// Reassembles frames from the TX byte stream; a frame may continue in the
/// next notification (a batch split at the end of a ring).
#[derive(Debug)]
pub(super) struct TxAssembler {
    pub(super) buf: Box<[u8]>,
    pub(super) fill: usize,
    /// Bytes of the current frame incl. marker once known (0: unknown).
    pub(super) need: usize,
    pub(super) start: usize,
    /// Padding bytes still to skip in the current notification.
    pub(super) pad: usize,
}

impl TxAssembler {
    pub(super) fn new() -> Self {
        Self {
            buf: vec![0u8; FLIT + MAX_FRAME + FLIT].into_boxed_slice(),
            fill: 0,
            need: 0,
            start: 0,
            pad: 0,
        }
    }
    pub(super) fn reset(&mut self) {
        self.fill = 0;
        self.need = 0;
        self.start = 0;
        self.pad = 0;
    }
}

/// One attached application.
#[derive(Debug)]
pub(super) struct App {
    pub(super) id: u32,
    pub(super) region: MmapRaw,
    pub(super) region_len: usize,
    pub(super) mmio: MmapRaw,
    pub(super) mmio_consumer: u32,
    /// Step in which the engine last looked at this application's posted
    /// writes because a frame was about to be dropped.
    pub(super) looked_step: u64,
    pub(super) pipe_base: u32,
    pub(super) pipe_count: u32,
    pub(super) desc_base: u32,
    pub(super) desc_count: u32,
    pub(super) nbuf_id: u32,
    pub(super) nb: Nbuf,
    pub(super) tx: Option<TxCursor>,
    pub(super) asm: TxAssembler,
    /// Region spans (start, end) of its enabled RX pipes, sorted by start.
    pub(super) rx_spans: Vec<(usize, usize)>,
    /// Pipes owed a notification: software wrote their head while data was
    /// pending and the notification ring was full. Announced as soon as
    /// software frees ring slots, so no data waits unannounced.
    pub(super) owed: Vec<u32>,
    pub(super) counters: AppCounters,
    /// Flow rules it holds (at most `MAX_RULES_PER_APP`).
    pub(super) rules: u32,
    /// The shared files, kept open (and so reachable by their paths) while
    /// the application is attached.
    pub(super) _files: [shm::SealedFile; 2],
}

impl App {
    pub(super) fn owns_pipe(&self, pipe: u32) -> bool {
        pipe.wrapping_sub(self.pipe_base) < self.pipe_count
    }
    pub(super) fn owns_queue(&self, q: u32) -> bool {
        q.wrapping_sub(self.desc_base) < self.desc_count
    }
    /// Whether a steering target (pipe or descriptor queue) is its own.
    pub(super) fn owns_target(&self, t: u32) -> bool {
        if t < layout::DESC_TARGET_BASE {
            self.owns_pipe(t)
        } else {
            self.owns_queue(t - layout::DESC_TARGET_BASE)
        }
    }
    #[inline]
    pub(super) fn mmio_queue(&self) -> &MmioQueue {
        // SAFETY: the mapping is MMIO_FILE_LEN >= size_of::<MmioQueue>() bytes,
        // page aligned, lives as long as `self`, and every field of MmioQueue
        // is an atomic, so shared access from both sides is sound.
        unsafe { &*(self.mmio.as_ptr() as *const MmioQueue) }
    }
    /// `len` bytes at `off` lie inside the region.
    #[inline]
    pub(super) fn in_region(&self, off: usize, len: usize) -> bool {
        off >= layout::DMA_RESERVED && off.checked_add(len).is_some_and(|e| e <= self.region_len)
    }
    #[inline]
    pub(super) fn rx_notif(&self, ring: usize, i: u32) -> &RxNotification {
        let off = ring + i as usize * layout::NOTIF_SLOT;
        debug_assert!(self.in_region(off, layout::NOTIF_SLOT));
        // SAFETY: `ring` was checked to hold the whole ring inside the region when enabled
        // and `i` is masked to it: the 64 B slot is in bounds and 64 B aligned (the ring
        // is page aligned). All fields are atomics.
        unsafe { &*(self.region.as_ptr().add(off) as *const RxNotification) }
    }
    #[inline]
    pub(super) fn tx_notif(&self, ring: usize, i: u32) -> &TxNotification {
        let off = ring + i as usize * layout::NOTIF_SLOT;
        debug_assert!(self.in_region(off, layout::NOTIF_SLOT));
        // SAFETY: as for `rx_notif`: checked ring, masked index, atomics only.
        unsafe { &*(self.region.as_ptr().add(off) as *const TxNotification) }
    }
    /// Copies `src` into the region at `off`.
    #[inline]
    pub(super) fn write(&self, off: usize, src: &[u8]) {
        // Callers pass ranges inside a pipe or buffer checked to lie in the
        // region; this backstop (two compares) keeps a slip in that from
        // writing outside it.
        if !self.in_region(off, src.len()) {
            debug_assert!(false, "write outside the region: {off}+{}", src.len());
            return;
        }
        // SAFETY: the range was just checked to lie in the region. The
        // application may read it concurrently; the bytes are plain data
        // published by the notification's (or descriptor's) Release store.
        unsafe { copy_bytes(src.as_ptr(), self.region.as_mut_ptr().add(off), src.len()) };
    }
    /// Evicts from the engine's caches the lines of the ring of `size` bytes
    /// (a power of two) at `base` that start at ring positions in
    /// `[from + ahead, to + ahead)` (bytes, wrapping; `to` may have wrapped
    /// past `from`): called as the tail moves from `from` to `to`, it evicts
    /// every line once per lap, `ahead` bytes before the tail reaches it.
    /// `op` says whether to evict them or prefetch them for writing. See
    /// [`evict`].
    #[inline(always)]
    pub(super) fn ahead_ring(
        &self,
        base: usize,
        size: usize,
        from: usize,
        to: usize,
        ahead: usize,
        op: LinesAhead,
    ) {
        lines_ahead_of(
            self.region.as_ptr() as usize + base,
            size,
            from,
            to,
            ahead,
            op,
        );
    }
    /// Whether `len` bytes at `off` start in or overlap one of its RX
    /// pipes (frames sent back in place). Only a performance hint rides on
    /// it: a hostile layout of overlapping pipes can make it answer wrong,
    /// which costs time, never correctness.
    pub(super) fn in_rx_pipes(&self, off: usize, len: usize) -> bool {
        overlaps_sorted(&self.rx_spans, off, len)
    }
    /// Evicts the lines of `len` bytes at `off` from this core's caches.
    pub(super) fn evict_span(&self, off: usize, len: usize) {
        let mut a = off & !(FLIT - 1);
        while a < off + len {
            evict::evict_line(self.region.as_ptr().wrapping_add(a));
            a += FLIT;
        }
    }
    /// Copies `dst.len()` bytes from the region at `off`.
    #[inline]
    pub(super) fn read(&self, off: usize, dst: &mut [u8]) {
        // As in `write`: the callers checked the range; this is a backstop.
        if !self.in_region(off, dst.len()) {
            debug_assert!(false, "read outside the region: {off}+{}", dst.len());
            dst.fill(0);
            return;
        }
        read_region(&self.region, off, dst);
    }
}

/// Whether `len > 0` bytes at `off` overlap one of `spans` ((start, end),
/// sorted by start, not overlapping each other).
fn overlaps_sorted(spans: &[(usize, usize)], off: usize, len: usize) -> bool {
    let i = spans.partition_point(|&(s, _)| s < off + len);
    i > 0 && spans[i - 1].1 > off
}

/// What [`App::ahead_ring`] does to the pipe lines ahead of the tail.
#[derive(Clone, Copy, Debug)]
pub(super) enum LinesAhead {
    /// Evicts them from the engine's caches.
    Evict,
    /// Prefetches them for writing, but only when the pipe has `free`
    /// bytes of room after the tail that reach past them: taking a line
    /// the application is still to read would slow it, and a full pipe
    /// would keep it so.
    Prefetch { free: usize },
}

/// [`App::ahead_ring`] for the ring whose first byte is at address `ring`
/// in the engine's mapping. Cache hints only: they neither read nor write
/// the lines.
#[inline(always)]
pub(super) fn lines_ahead_of(
    ring: usize,
    size: usize,
    from: usize,
    to: usize,
    ahead: usize,
    op: LinesAhead,
) {
    let prefetch = match op {
        LinesAhead::Evict => false,
        LinesAhead::Prefetch { free } if free >= ahead + FLIT => true,
        LinesAhead::Prefetch { .. } => return,
    };
    for p in evict::lines_ahead(size, from, to, ahead) {
        let line = (ring as *const u8).wrapping_add(p);
        if prefetch {
            evict::prefetch_for_write(line);
        } else {
            evict::evict_line(line);
        }
    }
}

#[inline(always)]
pub(super) fn read_region<B: AsMut<[u8]> + ?Sized>(region: &MmapRaw, off: usize, dst: &mut B) {
    let dst = dst.as_mut();
    // SAFETY: callers pass ranges checked against the region: inside a TX
    // notification's `address..address + length` or a TX descriptor's buffer
    // (`desc.rs`, `in_region`), or through `App::read`, which checks again.
    // Bytes are untrusted plain data (see `App::read`).
    unsafe { copy_bytes(region.as_ptr().add(off), dst.as_mut_ptr(), dst.len()) };
}

/// Copies `n` bytes from `src` to `dst`: `copy_nonoverlapping`, with the
/// 32..=64-byte copies of minimum-size frames done inline as two
/// overlapping 32-byte moves. A copy whose length is not a constant is a
/// call to the C library's `memcpy`, which for a 60-byte frame cost as
/// many instructions again as the move itself, plus the register spills
/// around the call, on every frame the engine receives or sends.
///
/// # Safety
/// As for `std::ptr::copy_nonoverlapping(src, dst, n)`.
#[inline(always)]
pub(super) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    if (32..=64).contains(&n) {
        // On x86-64 the moves are four 16-byte SSE2 loads and stores (part
        // of the baseline target): as byte arrays the compiler bounced the
        // tail through the stack, four more instructions a frame.
        // SAFETY: both 32-byte moves lie inside the caller's `n` bytes at
        // `src` and `dst` (`n - 32 + 32 = n`); unaligned reads and writes
        // are what `copy_nonoverlapping` allows too.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
            let (s, d) = (src.cast::<__m128i>(), dst.cast::<__m128i>());
            let (st, dt) = (
                src.add(n - 32).cast::<__m128i>(),
                dst.add(n - 32).cast::<__m128i>(),
            );
            let (h0, h1) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
            let (t0, t1) = (_mm_loadu_si128(st), _mm_loadu_si128(st.add(1)));
            _mm_storeu_si128(d, h0);
            _mm_storeu_si128(d.add(1), h1);
            _mm_storeu_si128(dt, t0);
            _mm_storeu_si128(dt.add(1), t1);
        }
        // SAFETY: as above.
        #[cfg(not(target_arch = "x86_64"))]
        unsafe {
            let head = std::ptr::read_unaligned(src.cast::<[u8; 32]>());
            let tail = std::ptr::read_unaligned(src.add(n - 32).cast::<[u8; 32]>());
            std::ptr::write_unaligned(dst.cast::<[u8; 32]>(), head);
            std::ptr::write_unaligned(dst.add(n - 32).cast::<[u8; 32]>(), tail);
        }
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
}

#[cfg(test)]
mod tests {
    use super::{copy_bytes, overlaps_sorted};

    #[test]
    fn tx_data_is_placed_against_rx_pipe_spans() {
        let spans = [(4096, 8192), (16384, 20480)];
        // Inside, straddling either edge, or covering a pipe: overlaps.
        for (off, len) in [
            (4096, 64),
            (8128, 64),
            (4032, 128),
            (8000, 9000),
            (0, 30000),
        ] {
            assert!(overlaps_sorted(&spans, off, len), "{off}+{len}");
        }
        // Before, between (touching the ends) and after: apart.
        for (off, len) in [
            (0, 4096),
            (8192, 64),
            (12288, 4096),
            (20480, 64),
            (1 << 30, 64),
        ] {
            assert!(!overlaps_sorted(&spans, off, len), "{off}+{len}");
        }
        assert!(!overlaps_sorted(&[], 0, 64));
    }

    #[test]
    fn copy_bytes_copies_exactly_n_bytes_at_every_length() {
        let src: Vec<u8> = (0..130u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        // Lengths around the inline 32..=64 window and a few beyond.
        for n in 0..=130 {
            let mut dst = vec![0xccu8; n + 2];
            // SAFETY: `src` holds 130 >= n bytes and `dst[1..]` n + 1; the
            // two are separate allocations.
            unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr().add(1), n) };
            assert_eq!(&dst[1..1 + n], &src[..n], "n = {n}");
            assert_eq!((dst[0], dst[n + 1]), (0xcc, 0xcc), "n = {n}: wrote outside");
        }
    }
}
