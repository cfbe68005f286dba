//! A single-producer/single-consumer byte ring that carries Ethernet frames
//! back to back on 64 B (flit) boundaries, like an Ensō pipe.
//!
//! # Shared-memory protocol
//!
//! Positions are byte counts that only grow (wrapping `usize`); a position's
//! place in the buffer is `pos & (capacity - 1)`. Every frame starts on a
//! flit boundary and occupies `ceil(len / 64)` whole flits, so a frame's
//! first flit never wraps; a longer frame may wrap between two flits (there
//! is no mirrored mapping: a [`FrameView`] is then two slices). The whole
//! capacity is usable (no flit is kept free: positions never alias).
//!
//! | field    | written by | ordering | read by  | ordering |
//! |----------|------------|----------|----------|----------|
//! | bytes in `[tail, head + capacity)` | producer | plain, before its `tail` store | — | — |
//! | bytes in `[head, tail)` | — | — | consumer | plain, after its `tail` load |
//! | `tail`   | producer (`commit`) | Release | consumer (`peek` when its cached tail says empty) | Acquire |
//! | `head`   | consumer (`release`) | Release | producer (`push*` when its cached head says full) | Acquire |
//! | `closed` | producer (`close`/drop, after its last `tail` store) | Release | consumer (`is_finished`) | Acquire |
//!
//! Each side caches the other side's position and reloads it only when the
//! ring looks full (producer) or empty (consumer); each side publishes its
//! own position once per batch, not per frame. `head`, `tail` and `closed`
//! each sit on their own 128 B-padded line.
//!
//! A frame's length is not stored: the consumer reads it from the frame
//! header ([`frames::frame_len`]: IPv4 total length + 14, or IPv6 payload
//! length + 54), exactly as an Ensō application walks a pipe. The producer
//! only accepts frames whose header agrees with their length.

use std::alloc::{self, Layout};
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::frames::{self, FLIT};

/// One 64-byte unit of the ring.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Flit([u8; FLIT]);

const _: () = assert!(std::mem::size_of::<Flit>() == FLIT);

/// Alignment of the ring buffer: a page, so flits never straddle one.
const BUFFER_ALIGN: usize = 4096;

/// Why a ring cannot be created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The capacity is not a power of two of at least one flit.
    BadCapacity(usize),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::BadCapacity(c) => write!(
                f,
                "ring capacity {c} B must be a power of two of at least {FLIT} B"
            ),
        }
    }
}

impl std::error::Error for RingError {}

/// Why a frame cannot be pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushError {
    /// The ring has no room for the frame now; retry after the consumer
    /// releases space (and after committing, or it never will).
    Full,
    /// The frame's header gives no length (not IPv4/IPv6, or under 20 B).
    NoLength,
    /// The frame's header gives a length other than the frame's.
    LengthMismatch {
        /// Length according to the header.
        header: usize,
        /// Bytes given.
        actual: usize,
    },
    /// The frame occupies more flits than the whole ring holds.
    TooLarge {
        /// Bytes the frame occupies in the ring.
        slot: usize,
        /// Ring capacity in bytes.
        capacity: usize,
    },
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Full => write!(f, "ring full"),
            PushError::NoLength => write!(f, "frame header gives no length (not IPv4/IPv6)"),
            PushError::LengthMismatch { header, actual } => {
                write!(
                    f,
                    "frame header says {header} B but the frame has {actual} B"
                )
            }
            PushError::TooLarge { slot, capacity } => {
                write!(f, "frame needs {slot} B but the ring holds {capacity} B")
            }
        }
    }
}

impl std::error::Error for PushError {}

fn check_frame(frame: &[u8]) -> Result<usize, PushError> {
    let header = frames::frame_len(frame).ok_or(PushError::NoLength)?;
    if header != frame.len() {
        return Err(PushError::LengthMismatch {
            header,
            actual: frame.len(),
        });
    }
    Ok(frames::slot_len(header))
}

/// Why a set of template frames is unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateError {
    /// No frames were given.
    Empty,
    /// Frame `index` is not a frame whose header gives its length.
    Frame {
        /// Which template.
        index: usize,
        /// What is wrong with it.
        error: PushError,
    },
    /// Frame `index` has no room for the 8-byte sequence number.
    SeqOutside {
        /// Which template.
        index: usize,
        /// Its length.
        len: usize,
        /// The requested sequence-number offset.
        seq_offset: usize,
    },
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::Empty => write!(f, "no template frames"),
            TemplateError::Frame { index, error } => write!(f, "template frame {index}: {error}"),
            TemplateError::SeqOutside {
                index,
                len,
                seq_offset,
            } => write!(
                f,
                "template frame {index} has {len} B: no room for an 8-byte sequence number at offset {seq_offset}"
            ),
        }
    }
}

impl std::error::Error for TemplateError {}

#[derive(Clone, Copy, Debug)]
struct TemplateEntry {
    /// First flit of the padded copy in `Templates::flits`.
    first_flit: usize,
    len: usize,
    flits: usize,
}

/// Validated template frames, stored flit-padded so a push copies whole
/// flits, plus the offset at which each pushed copy carries its sequence
/// number (8 bytes, little-endian).
#[derive(Clone)]
pub struct Templates {
    flits: Vec<Flit>,
    entries: Vec<TemplateEntry>,
    seq_offset: usize,
    total_len: usize,
}

impl fmt::Debug for Templates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Templates")
            .field("frames", &self.entries.len())
            .field("seq_offset", &self.seq_offset)
            .field("mean_len", &self.mean_len())
            .finish()
    }
}

impl Templates {
    /// Checks every frame (its header must give its exact length, and
    /// `seq_offset + 8` must fit in it) and stores them padded to flits.
    pub fn new<F: AsRef<[u8]>>(frames: &[F], seq_offset: usize) -> Result<Self, TemplateError> {
        if frames.is_empty() {
            return Err(TemplateError::Empty);
        }
        let mut flits = Vec::new();
        let mut entries = Vec::with_capacity(frames.len());
        let mut total_len = 0;
        for (index, frame) in frames.iter().enumerate() {
            let frame = frame.as_ref();
            let slot = check_frame(frame).map_err(|error| TemplateError::Frame { index, error })?;
            if seq_offset
                .checked_add(8)
                .is_none_or(|end| end > frame.len())
            {
                return Err(TemplateError::SeqOutside {
                    index,
                    len: frame.len(),
                    seq_offset,
                });
            }
            let first_flit = flits.len();
            for chunk in frame.chunks(FLIT) {
                let mut flit = Flit([0; FLIT]);
                flit.0[..chunk.len()].copy_from_slice(chunk);
                flits.push(flit);
            }
            entries.push(TemplateEntry {
                first_flit,
                len: frame.len(),
                flits: slot / FLIT,
            });
            total_len += frame.len();
        }
        Ok(Templates {
            flits,
            entries,
            seq_offset,
            total_len,
        })
    }

    /// Number of template frames.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Always false: a template set has at least one frame.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where pushed copies carry their sequence number.
    pub fn seq_offset(&self) -> usize {
        self.seq_offset
    }

    /// Length of template `index` in bytes.
    pub fn frame_len(&self, index: usize) -> usize {
        self.entries[index].len
    }

    /// Mean frame length in bytes.
    pub fn mean_len(&self) -> f64 {
        self.total_len as f64 / self.entries.len() as f64
    }

    /// Bytes the largest template occupies in a ring.
    pub fn max_slot(&self) -> usize {
        self.entries
            .iter()
            .map(|e| e.flits * FLIT)
            .max()
            .unwrap_or(0)
    }
}

/// State shared by the two ends.
struct Shared {
    /// Consumer's position. Written only by the consumer (Release).
    head: CachePadded<AtomicUsize>,
    /// Producer's position. Written only by the producer (Release).
    tail: CachePadded<AtomicUsize>,
    /// Set by the producer after its last `tail` store.
    closed: CachePadded<AtomicBool>,
    buf: NonNull<Flit>,
    capacity: usize,
}

// SAFETY: the buffer behind `buf` is only touched through the one Producer
// and the one Consumer, each in its own region as the protocol above
// assigns; the positions and flag are atomics.
unsafe impl Send for Shared {}
// SAFETY: as for Send: concurrent access is confined to disjoint regions
// handed over with Release/Acquire on `tail` and `head`.
unsafe impl Sync for Shared {}

impl Shared {
    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity, BUFFER_ALIGN).expect("ring layout")
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: `buf` was allocated in `ring` with this same layout and is
        // freed once, here, when the last end is gone.
        unsafe { alloc::dealloc(self.buf.as_ptr().cast(), Self::layout(self.capacity)) };
    }
}

/// Creates a ring of `capacity` bytes (a power of two, at least 64) and
/// returns its two ends. The buffer is written once here so that its pages
/// are present before any measurement.
pub fn ring(capacity: usize) -> Result<(Producer, Consumer), RingError> {
    if !capacity.is_power_of_two() || capacity < FLIT {
        return Err(RingError::BadCapacity(capacity));
    }
    let layout = Shared::layout(capacity);
    // SAFETY: the layout has a non-zero size (at least one flit).
    let raw = unsafe { alloc::alloc(layout) };
    let Some(buf) = NonNull::new(raw.cast::<Flit>()) else {
        alloc::handle_alloc_error(layout);
    };
    // SAFETY: `raw` points to `capacity` freshly allocated bytes. Writing
    // them all makes every byte initialised (reads of padding are then
    // defined) and faults the pages in.
    unsafe { ptr::write_bytes(raw, 0xee, capacity) };
    let shared = Arc::new(Shared {
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        closed: CachePadded::new(AtomicBool::new(false)),
        buf,
        capacity,
    });
    let producer = Producer {
        shared: Arc::clone(&shared),
        buf,
        mask: capacity - 1,
        tail: 0,
        published: 0,
        head_cache: 0,
        closed: false,
    };
    let consumer = Consumer {
        shared,
        buf,
        mask: capacity - 1,
        head: 0,
        released: 0,
        tail_cache: 0,
        peeked_slot: 0,
    };
    Ok((producer, consumer))
}

/// The writing end of a ring.
pub struct Producer {
    shared: Arc<Shared>,
    buf: NonNull<Flit>,
    mask: usize,
    /// Position after the last frame written (published or not).
    tail: usize,
    /// Last position stored to `shared.tail`.
    published: usize,
    /// Last `head` loaded from the consumer.
    head_cache: usize,
    closed: bool,
}

// SAFETY: the Producer is the ring's only writer; moving it to another
// thread moves that role with it. `buf` stays valid while `shared` lives.
unsafe impl Send for Producer {}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("tail", &self.tail)
            .field("published", &self.published)
            .finish()
    }
}

impl Producer {
    /// Ring capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Whether `bytes` more fit, reloading the consumer's head only when the
    /// cached one says they do not.
    #[inline]
    fn has_room(&mut self, bytes: usize) -> bool {
        let capacity = self.mask + 1;
        if capacity - self.tail.wrapping_sub(self.head_cache) >= bytes {
            return true;
        }
        // SYNC POINT: Acquire pairs with the consumer's Release store of
        // `head` in `Consumer::release`: it has finished reading everything
        // before that position, which is ours to overwrite now.
        self.head_cache = self.shared.head.load(Ordering::Acquire);
        capacity - self.tail.wrapping_sub(self.head_cache) >= bytes
    }

    /// Copies `n` flits from `src` to the ring at flit index `dst` (wrapping
    /// at the ring end).
    ///
    /// # Safety
    /// `src` must point to `n` readable flits outside the producer's free
    /// region, and the `n` flits from position `self.tail` must be in the
    /// producer's free region (`has_room(n * FLIT)` returned true).
    #[inline]
    unsafe fn copy_flits(&mut self, src: *const Flit, n: usize) {
        let flit_mask = self.mask / FLIT;
        let start = (self.tail & self.mask) / FLIT;
        for k in 0..n {
            // SAFETY: by the contract, flit k of `src` is readable and flit
            // `(start + k) & flit_mask` lies inside the buffer and in the
            // producer's free region, which nobody else touches.
            unsafe {
                let flit = ptr::read(src.add(k));
                ptr::write(self.buf.as_ptr().add((start + k) & flit_mask), flit);
            }
        }
    }

    /// Writes `bytes` at byte offset `offset` past `self.tail`, wrapping.
    ///
    /// # Safety
    /// `offset + bytes.len()` bytes from `self.tail` must be in the
    /// producer's free region, and `bytes` must not lie in it.
    #[inline]
    unsafe fn write_bytes_at(&mut self, offset: usize, bytes: &[u8]) {
        let capacity = self.mask + 1;
        let at = (self.tail.wrapping_add(offset)) & self.mask;
        let first = bytes.len().min(capacity - at);
        let base = self.buf.as_ptr().cast::<u8>();
        // SAFETY: `at + first <= capacity` and the remainder starts at 0 and
        // is shorter than the region; both lie in the producer's free region
        // by the contract, and `bytes` does not overlap it.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(at), first);
            ptr::copy_nonoverlapping(bytes.as_ptr().add(first), base, bytes.len() - first);
        }
    }

    /// Writes a copy of template `index` carrying sequence number `seq`.
    /// Returns false if the ring has no room now. Nothing is visible to the
    /// consumer until [`Producer::commit`].
    #[inline]
    pub fn push_template(&mut self, templates: &Templates, index: usize, seq: u64) -> bool {
        let e = templates.entries[index];
        let slot = e.flits * FLIT;
        if !self.has_room(slot) {
            return false;
        }
        let src = templates.flits[e.first_flit..e.first_flit + e.flits].as_ptr();
        // SAFETY: `has_room(slot)` holds, `src` holds `e.flits` flits of the
        // template store (not the ring), and the sequence number lies inside
        // the frame (checked when the templates were built).
        unsafe {
            self.copy_flits(src, e.flits);
            let at = self.tail & self.mask;
            if at + templates.seq_offset + 8 <= self.mask + 1 {
                let dst = self
                    .buf
                    .as_ptr()
                    .cast::<u8>()
                    .add(at + templates.seq_offset);
                ptr::write_unaligned(dst.cast::<[u8; 8]>(), seq.to_le_bytes());
            } else {
                self.write_bytes_at(templates.seq_offset, &seq.to_le_bytes());
            }
        }
        self.tail = self.tail.wrapping_add(slot);
        true
    }

    /// Writes a copy of a frame read from another ring (whole flits, so the
    /// copy is as cheap as the hardware allows). Returns false if the ring
    /// has no room now.
    #[inline]
    pub fn push_view(&mut self, frame: &FrameView<'_>) -> bool {
        let slot = frame.slot_len();
        if !self.has_room(slot) {
            return false;
        }
        let [a, b] = frame.flits;
        // SAFETY: `has_room(slot)` holds and covers `a.len() + b.len()`
        // flits. The view's flits are in the consumer-owned region of a ring
        // (this one or another), which is disjoint from our free region.
        unsafe {
            self.copy_flits(a.as_ptr(), a.len());
            self.tail = self.tail.wrapping_add(a.len() * FLIT);
            self.copy_flits(b.as_ptr(), b.len());
            self.tail = self.tail.wrapping_add(b.len() * FLIT);
        }
        true
    }

    /// Writes an arbitrary frame, after checking that its header gives its
    /// length. Nothing is visible to the consumer until [`Producer::commit`].
    pub fn push(&mut self, frame: &[u8]) -> Result<(), PushError> {
        let slot = check_frame(frame)?;
        if slot > self.capacity() {
            return Err(PushError::TooLarge {
                slot,
                capacity: self.capacity(),
            });
        }
        if !self.has_room(slot) {
            return Err(PushError::Full);
        }
        // SAFETY: `has_room(slot)` holds and `frame.len() <= slot`; `frame`
        // is a caller's slice: it may lie in a ring's consumer-owned region
        // but never in our free region, which only we may touch.
        unsafe { self.write_bytes_at(0, frame) };
        self.tail = self.tail.wrapping_add(slot);
        Ok(())
    }

    /// Bytes written but not yet committed.
    pub fn pending(&self) -> usize {
        self.tail.wrapping_sub(self.published)
    }

    /// Publishes every frame written so far to the consumer.
    #[inline]
    pub fn commit(&mut self) {
        if self.tail != self.published {
            // SYNC POINT: Release pairs with the consumer's Acquire load of
            // `tail` in `Consumer::peek`: the frame bytes written above are
            // visible before the position that covers them.
            self.shared.tail.store(self.tail, Ordering::Release);
            self.published = self.tail;
        }
    }

    /// Commits and tells the consumer no more frames will come.
    pub fn close(mut self) {
        self.close_inner();
    }

    fn close_inner(&mut self) {
        if !self.closed {
            self.commit();
            // SYNC POINT: Release pairs with the consumer's Acquire load of
            // `closed` in `Consumer::is_finished`; our last `tail` store
            // happens before it.
            self.shared.closed.store(true, Ordering::Release);
            self.closed = true;
        }
    }
}

impl Drop for Producer {
    /// Dropping the producer commits what it wrote and closes the ring.
    fn drop(&mut self) {
        self.close_inner();
    }
}

/// The reading end of a ring.
pub struct Consumer {
    shared: Arc<Shared>,
    buf: NonNull<Flit>,
    mask: usize,
    /// Position after the last frame consumed (released or not).
    head: usize,
    /// Last position stored to `shared.head`.
    released: usize,
    /// Last `tail` loaded from the producer.
    tail_cache: usize,
    /// Slot of the frame returned by the last `peek`, for `advance`.
    peeked_slot: usize,
}

// SAFETY: the Consumer is the ring's only reader; moving it to another
// thread moves that role with it. `buf` stays valid while `shared` lives.
unsafe impl Send for Consumer {}

impl fmt::Debug for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &(self.mask + 1))
            .field("head", &self.head)
            .field("released", &self.released)
            .finish()
    }
}

impl Consumer {
    /// Finds the next committed frame: `(buffer offset, length, slot)`.
    #[inline]
    fn locate(&mut self) -> Option<(usize, usize, usize)> {
        if self.head == self.tail_cache {
            // SYNC POINT: Acquire pairs with the producer's Release store of
            // `tail` in `Producer::commit`: the frames before it are written.
            self.tail_cache = self.shared.tail.load(Ordering::Acquire);
            if self.head == self.tail_cache {
                return None;
            }
        }
        let available = self.tail_cache.wrapping_sub(self.head);
        let at = self.head & self.mask;
        // SAFETY: at least one whole flit is available at `at` (positions
        // move by whole flits), it is in the consumer-owned region, and the
        // buffer is fully initialised.
        let first_flit: &[u8; FLIT] = unsafe { &(*self.buf.as_ptr().add(at / FLIT)).0 };
        match frames::frame_len(first_flit) {
            Some(len) if frames::slot_len(len) <= available => {
                Some((at, len, frames::slot_len(len)))
            }
            other => panic!(
                "reference ring corrupted: frame header gives length {other:?} with {available} B committed"
            ),
        }
    }

    /// The view of a frame that `locate` found.
    #[inline]
    fn view_at(&self, at: usize, len: usize, slot: usize) -> FrameView<'_> {
        let first = slot.min(self.mask + 1 - at);
        let base = self.buf.as_ptr();
        // SAFETY: flits `[at, at + first)` and `[0, slot - first)` lie in the buffer and in
        // `[released, tail_cache)`, untouched by the producer until released; `release`
        // needs `&mut self`, which the returned view keeps borrowed.
        let flits = unsafe {
            [
                std::slice::from_raw_parts(base.add(at / FLIT), first / FLIT),
                std::slice::from_raw_parts(base, (slot - first) / FLIT),
            ]
        };
        FrameView { flits, len }
    }

    /// The next frame, without consuming it; `None` if the ring holds no
    /// committed frame now. [`Consumer::advance`] consumes it.
    #[inline]
    pub fn peek(&mut self) -> Option<FrameView<'_>> {
        let (at, len, slot) = self.locate()?;
        self.peeked_slot = slot;
        Some(self.view_at(at, len, slot))
    }

    /// Consumes the frame returned by the last [`Consumer::peek`]. Its space
    /// goes back to the producer at the next [`Consumer::release`].
    #[inline]
    pub fn advance(&mut self) {
        self.head = self.head.wrapping_add(self.peeked_slot);
        self.peeked_slot = 0;
    }

    /// The next frame, consumed; `None` if the ring holds none now.
    #[inline]
    pub fn next_frame(&mut self) -> Option<FrameView<'_>> {
        let (at, len, slot) = self.locate()?;
        self.head = self.head.wrapping_add(slot);
        self.peeked_slot = 0;
        Some(self.view_at(at, len, slot))
    }

    /// Hands the space of every consumed frame back to the producer.
    #[inline]
    pub fn release(&mut self) {
        if self.head != self.released {
            // SYNC POINT: Release pairs with the producer's Acquire load of
            // `head` in `Producer::has_room`: our reads of the released frames
            // are done before the producer may overwrite them.
            self.shared.head.store(self.head, Ordering::Release);
            self.released = self.head;
        }
    }

    /// Bytes consumed but not yet released.
    pub fn unreleased(&self) -> usize {
        self.head.wrapping_sub(self.released)
    }

    /// Whether the producer has closed the ring and every frame it committed
    /// has been consumed.
    pub fn is_finished(&mut self) -> bool {
        // SYNC POINT: Acquire pairs with the producer's Release store of
        // `closed` in `Producer::close`: its final `tail` is visible below.
        if !self.shared.closed.load(Ordering::Acquire) {
            return false;
        }
        // SYNC POINT: Acquire pairs with the producer's last Release store
        // of `tail`.
        self.tail_cache = self.shared.tail.load(Ordering::Acquire);
        self.head == self.tail_cache
    }
}

/// One frame in a ring, borrowed from its [`Consumer`]: two slices when the
/// frame wraps at the ring end (no mirrored mapping here).
#[derive(Clone, Copy)]
pub struct FrameView<'a> {
    /// The frame's whole flits: up to the ring end, then from its start.
    flits: [&'a [Flit]; 2],
    len: usize,
}

impl fmt::Debug for FrameView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameView")
            .field("len", &self.len)
            .field("wrapped", &!self.flits[1].is_empty())
            .finish()
    }
}

fn flit_bytes(flits: &[Flit]) -> &[u8] {
    // SAFETY: `Flit` is `repr(C)` around `[u8; 64]` with no padding (size
    // asserted above), so `n` flits are `64 * n` initialised bytes.
    unsafe { std::slice::from_raw_parts(flits.as_ptr().cast::<u8>(), flits.len() * FLIT) }
}

impl<'a> FrameView<'a> {
    /// Frame length in bytes (from its header).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a frame has a header.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the frame occupies in the ring (whole flits).
    #[inline]
    pub fn slot_len(&self) -> usize {
        (self.flits[0].len() + self.flits[1].len()) * FLIT
    }

    /// The frame's bytes: the part up to the ring end, then the rest
    /// (empty unless the frame wraps).
    #[inline]
    pub fn parts(&self) -> (&'a [u8], &'a [u8]) {
        let a = flit_bytes(self.flits[0]);
        if a.len() >= self.len {
            (&a[..self.len], &[])
        } else {
            (a, &flit_bytes(self.flits[1])[..self.len - a.len()])
        }
    }

    /// The little-endian u64 at `offset`, or `None` past the frame end.
    #[inline]
    pub fn read_u64_le(&self, offset: usize) -> Option<u64> {
        let end = offset.checked_add(8)?;
        if end > self.len {
            return None;
        }
        let (a, b) = self.parts();
        if end <= a.len() {
            return Some(u64::from_le_bytes(a[offset..end].try_into().ok()?));
        }
        let mut bytes = [0u8; 8];
        for (i, byte) in bytes.iter_mut().enumerate() {
            let at = offset + i;
            *byte = if at < a.len() { a[at] } else { b[at - a.len()] };
        }
        Some(u64::from_le_bytes(bytes))
    }

    /// The frame copied out.
    pub fn to_vec(&self) -> Vec<u8> {
        let (a, b) = self.parts();
        let mut v = Vec::with_capacity(self.len);
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        v
    }
}
