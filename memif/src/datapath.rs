//! The connected state and the per-frame path: `rx_burst` / `tx_burst`.
//!
//! Nothing here allocates, locks or makes a system call per frame. The only
//! system call is one eventfd write per `tx_burst` that sent something, and
//! only when the peer left interrupts unmasked on that ring (DPDK and this
//! crate mask them: both poll).
//!
//! Everything the peer can write is untrusted: indices are compared with
//! what is possible, each descriptor is read once into a local copy and
//! checked (region index, offset + length within the region, length within
//! the buffer) before any byte is touched. Our own indices are kept locally
//! and never read back from shared memory. A violation sets `fault`: the
//! data path stops at once and the next `poll_control` tears the
//! connection down.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use crate::counters::Counters;
use crate::ring::{Desc, Ring, DESC_FLAG_NEXT, RING_FLAG_MASK_INT};
use crate::shm::{buffer, kick, Region};
use crate::Role;

/// Where the client's own buffers for one ring are: slot `s` uses
/// `first + s * size` in region 0.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bufs {
    pub first: u32,
    pub size: u32,
}

impl Bufs {
    #[inline]
    fn offset(&self, slot: u16) -> u32 {
        // Cannot overflow: the region (at most 4 GiB) was sized for every
        // slot's buffer when it was made.
        self.first + u32::from(slot) * self.size
    }
}

/// One ring as one of our queues.
pub(crate) struct Queue {
    pub ring: Ring,
    /// The ring's eventfd (the peer's notification channel).
    pub eventfd: OwnedFd,
    /// Our own index: for rx, the next descriptor to consume; for tx, the
    /// next descriptor to fill (the client's head, the server's tail).
    pub next: u16,
    /// Client rx only: how far we have posted empty buffers (our head).
    pub posted: u16,
    /// Client only: our buffers for this ring.
    pub bufs: Option<Bufs>,
}

impl Queue {
    pub fn new(ring: Ring, eventfd: OwnedFd, bufs: Option<Bufs>) -> Queue {
        Queue {
            ring,
            eventfd,
            next: 0,
            posted: 0,
            bufs,
        }
    }
}

/// A connected session: the mapped regions and our queues.
pub(crate) struct Session {
    pub role: Role,
    /// Server: the client's regions; client: our one region.
    pub regions: Vec<Region>,
    pub rx: Vec<Queue>,
    pub tx: Vec<Queue>,
    /// Reassembly buffer for chained frames, `max_frame` bytes.
    pub scratch: Vec<u8>,
    pub max_frame: u32,
    /// Set by the data path when the peer broke the protocol.
    pub fault: Option<&'static str>,
}

enum Rx {
    /// A one-buffer frame of this length, delivered.
    Frame(usize),
    /// A chain of `n` descriptors, `len` bytes, reassembled in scratch.
    Chain {
        len: usize,
        n: u16,
    },
    /// A frame longer than max_frame, of `n` descriptors: skipped.
    Oversize {
        n: u16,
    },
    /// A chain whose end is not published yet.
    Incomplete,
    Bad,
    RingError,
}

impl Session {
    /// Client: post every rx buffer (after CONNECTED).
    pub fn start(&mut self) {
        if self.role == Role::Client {
            for q in &mut self.rx {
                refill(q);
            }
        }
    }

    pub fn rx_burst(
        &mut self,
        c: &mut Counters,
        queue: u16,
        max: usize,
        mut f: impl FnMut(&[u8]),
    ) -> usize {
        if self.fault.is_some() {
            return 0;
        }
        let Session {
            role,
            regions,
            rx,
            scratch,
            max_frame,
            fault,
            ..
        } = self;
        let Some(q) = rx.get_mut(usize::from(queue)) else {
            return 0;
        };
        let start = q.next;
        let (produced, limit, per_desc) = match role {
            // SYNC POINT: Acquire load of head; pairs with the client's
            // Release store of head after it wrote the descriptors and
            // buffers (tx, client side).
            Role::Server => (
                q.ring.head().load(Ordering::Acquire),
                q.ring.size32(),
                u32::MAX,
            ),
            // SYNC POINT: Acquire load of tail; pairs with the server's
            // Release store of tail after it filled the buffers (tx, server
            // side). The server may only fill what we posted.
            Role::Client => (
                q.ring.tail().load(Ordering::Acquire),
                u32::from(q.posted.wrapping_sub(start)),
                q.bufs.map_or(0, |b| b.size),
            ),
        };
        let avail = u32::from(produced.wrapping_sub(start));
        if avail > limit {
            c.ring_errors += 1;
            *fault = Some("peer moved its ring index beyond the ring");
            return 0;
        }
        let mut cur = start;
        let mut delivered = 0;
        while delivered < max && cur != produced {
            let d = q.ring.read_desc(cur);
            let step = if d.flags & DESC_FLAG_NEXT == 0 {
                match check(regions, &d, per_desc) {
                    None => Rx::Bad,
                    Some(_) if d.length > *max_frame => Rx::Oversize { n: 1 },
                    Some(p) => {
                        // SAFETY: check() proved [p, p + length) lies inside
                        // a region that stays mapped while `self` is
                        // borrowed. Only a misbehaving peer writes these
                        // bytes before we publish the slot as consumed; that
                        // can change their values, never their bounds.
                        let frame = unsafe { std::slice::from_raw_parts(p, d.length as usize) };
                        f(frame);
                        Rx::Frame(frame.len())
                    }
                }
            } else {
                gather(&q.ring, regions, scratch, cur, produced, per_desc)
            };
            match step {
                Rx::Frame(len) => {
                    cur = cur.wrapping_add(1);
                    delivered += 1;
                    c.rx_frames += 1;
                    c.rx_bytes += len as u64;
                }
                Rx::Chain { len, n } => {
                    f(&scratch[..len]);
                    cur = cur.wrapping_add(n);
                    delivered += 1;
                    c.rx_frames += 1;
                    c.rx_bytes += len as u64;
                    c.rx_chained += 1;
                }
                Rx::Oversize { n } => {
                    // A frame longer than max_frame: skip all its buffers.
                    cur = cur.wrapping_add(n);
                    c.oversize += 1;
                }
                Rx::Incomplete => break,
                Rx::Bad => {
                    c.bad_descriptor += 1;
                    *fault = Some("peer wrote a descriptor outside its buffers");
                    return delivered;
                }
                Rx::RingError => {
                    c.ring_errors += 1;
                    *fault = Some("peer wrote a chain longer than the ring");
                    return delivered;
                }
            }
        }
        if cur == start {
            return delivered;
        }
        q.next = cur;
        match role {
            // SYNC POINT: Release store of tail; pairs with the client's
            // Acquire load of tail in its tx: our reads of those buffers
            // happen before it reuses them.
            Role::Server => q.ring.tail().store(cur, Ordering::Release),
            Role::Client => refill(q),
        }
        delivered
    }

    pub fn tx_burst<'a>(
        &mut self,
        c: &mut Counters,
        queue: u16,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) -> usize {
        let mut frames = frames.into_iter();
        let sent = if self.fault.is_some() || usize::from(queue) >= self.tx.len() {
            0
        } else {
            match self.role {
                Role::Client => self.tx_client(c, queue, &mut frames),
                Role::Server => self.tx_server(c, queue, &mut frames),
            }
        };
        // Whatever was not looked at: the ring filled up (counted there) or
        // there is no link.
        let rest = frames.count() as u64;
        if self.fault.is_some() || usize::from(queue) >= self.tx.len() {
            c.link_down += rest;
        } else {
            c.ring_full += rest;
        }
        sent
    }

    /// Client to server: fill our own buffers, advance head.
    fn tx_client<'a>(
        &mut self,
        c: &mut Counters,
        queue: u16,
        frames: &mut impl Iterator<Item = &'a [u8]>,
    ) -> usize {
        let q = &mut self.tx[usize::from(queue)];
        let Some(bufs) = q.bufs else { return 0 };
        // SYNC POINT: Acquire load of tail; pairs with the server's Release
        // store of tail after it consumed the buffers (rx, server side), so
        // we may overwrite them.
        let tail = q.ring.tail().load(Ordering::Acquire);
        let mut head = q.next;
        let in_flight = u32::from(head.wrapping_sub(tail));
        if in_flight > q.ring.size32() {
            c.ring_errors += 1;
            self.fault = Some("peer moved tail beyond head");
            return 0;
        }
        let mut free = q.ring.size32() - in_flight;
        let mut sent = 0;
        for frame in frames.by_ref() {
            let len = frame.len();
            if len > self.max_frame as usize {
                c.oversize += 1;
                continue;
            }
            let segs = len.div_ceil(bufs.size as usize).max(1) as u32;
            if segs > free {
                c.ring_full += 1;
                break;
            }
            let mut off = 0;
            for s in 0..segs {
                let idx = head.wrapping_add(s as u16);
                let chunk = (len - off).min(bufs.size as usize);
                let offset = bufs.offset(idx & q.ring.size().wrapping_sub(1));
                let Some(dst) = buffer(&self.regions, 0, offset, chunk as u32) else {
                    // Our own layout: cannot happen; stop rather than write.
                    self.fault = Some("internal: buffer outside our region");
                    return sent;
                };
                // SAFETY: dst..dst+chunk is inside our mapped region (checked
                // by buffer()), frame[off..off+chunk] is in bounds, and the
                // two cannot overlap (the frame is caller memory, or another
                // slot's buffer if the caller passes rx bytes back in).
                unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr().add(off), dst, chunk) };
                let flags = if s + 1 < segs { DESC_FLAG_NEXT } else { 0 };
                q.ring.write_desc(
                    idx,
                    Desc {
                        flags,
                        region: 0,
                        length: chunk as u32,
                        offset,
                        metadata: 0,
                    },
                );
                off += chunk;
            }
            head = head.wrapping_add(segs as u16);
            free -= segs;
            sent += 1;
            c.tx_frames += 1;
            c.tx_bytes += len as u64;
            c.tx_chained += u64::from(segs > 1);
        }
        if sent > 0 {
            q.next = head;
            // SYNC POINT: Release store of head; pairs with the server's
            // Acquire load of head in its rx, making the descriptors and
            // buffers written above visible to it.
            q.ring.head().store(head, Ordering::Release);
            notify(q);
        }
        sent
    }

    /// Server to client: fill the buffers the client posted, advance tail.
    fn tx_server<'a>(
        &mut self,
        c: &mut Counters,
        queue: u16,
        frames: &mut impl Iterator<Item = &'a [u8]>,
    ) -> usize {
        let q = &mut self.tx[usize::from(queue)];
        // SYNC POINT: Acquire load of head; pairs with the client's Release
        // store of head after it posted empty buffers (rx refill, client
        // side), making their descriptors visible.
        let head = q.ring.head().load(Ordering::Acquire);
        let mut tail = q.next;
        let posted = u32::from(head.wrapping_sub(tail));
        if posted > q.ring.size32() {
            c.ring_errors += 1;
            self.fault = Some("peer moved head more than the ring size ahead");
            return 0;
        }
        let mut left = posted;
        let mut sent = 0;
        for frame in frames.by_ref() {
            let len = frame.len();
            if len > self.max_frame as usize {
                c.oversize += 1;
                continue;
            }
            let mut off = 0;
            let mut used = 0u32;
            let mut bad = false;
            let complete = loop {
                if used == left {
                    break false;
                }
                let idx = tail.wrapping_add(used as u16);
                let d = q.ring.read_desc(idx);
                // The posted length is the buffer's capacity; all of it must
                // lie in a region, and it must hold at least one byte.
                let dst = match buffer(&self.regions, d.region, d.offset, d.length) {
                    Some(p) if d.length > 0 => p,
                    _ => {
                        bad = true;
                        break false;
                    }
                };
                let chunk = (len - off).min(d.length as usize);
                // SAFETY: dst..dst+chunk is within the checked buffer of a
                // mapped region; frame[off..off+chunk] is in bounds; caller
                // memory and the mapping do not overlap unless the caller
                // passes rx bytes, which are another slot's buffer.
                unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr().add(off), dst, chunk) };
                off += chunk;
                used += 1;
                let more = off < len;
                q.ring.write_desc(
                    idx,
                    Desc {
                        flags: if more { DESC_FLAG_NEXT } else { 0 },
                        region: d.region,
                        length: chunk as u32,
                        offset: d.offset,
                        metadata: 0,
                    },
                );
                if !more {
                    break true;
                }
            };
            if bad {
                c.bad_descriptor += 1;
                self.fault = Some("peer posted a buffer outside its regions");
                break;
            }
            if !complete {
                // Every buffer written for this frame had its full capacity
                // used, so the posted lengths are intact for the next try.
                c.ring_full += 1;
                break;
            }
            tail = tail.wrapping_add(used as u16);
            left -= used;
            sent += 1;
            c.tx_frames += 1;
            c.tx_bytes += len as u64;
            c.tx_chained += u64::from(used > 1);
        }
        if sent > 0 {
            q.next = tail;
            // SYNC POINT: Release store of tail; pairs with the client's
            // Acquire load of tail in its rx, making the buffers and
            // descriptors written above visible to it.
            q.ring.tail().store(tail, Ordering::Release);
            notify(q);
        }
        sent
    }

    /// Descriptors `tx_burst` could fill on `queue` now (0 without one):
    /// free slots of our ring (client), buffers the peer posted that we
    /// have not filled (server). Relaxed loads: a count only; tx_burst
    /// reads and checks the indices again.
    pub fn tx_room(&self, queue: u16) -> usize {
        let Some(q) = self.tx.get(usize::from(queue)) else {
            return 0;
        };
        if self.fault.is_some() {
            return 0;
        }
        let size = q.ring.size32();
        let free = match self.role {
            Role::Client => {
                let tail = q.ring.tail().load(Ordering::Relaxed);
                size.checked_sub(u32::from(q.next.wrapping_sub(tail)))
            }
            Role::Server => {
                let head = q.ring.head().load(Ordering::Relaxed);
                Some(u32::from(head.wrapping_sub(q.next))).filter(|&p| p <= size)
            }
        };
        free.unwrap_or(0) as usize
    }

    /// Whether every rx ring is empty (all the peer published was
    /// received), or the data path stopped on a fault.
    pub fn rx_empty(&self) -> bool {
        self.fault.is_some()
            || self.rx.iter().all(|q| {
                // Relaxed: only compared, never used to read a descriptor.
                let produced = match self.role {
                    Role::Server => q.ring.head().load(Ordering::Relaxed),
                    Role::Client => q.ring.tail().load(Ordering::Relaxed),
                };
                produced == q.next
            })
    }

    /// Rx/tx queues in use.
    pub fn queues(&self) -> (u16, u16) {
        (self.rx.len() as u16, self.tx.len() as u16)
    }
}

/// Checks one descriptor the peer wrote: region index, offset + length
/// inside the region, length within `per_desc` (the client's buffer size
/// for frames it receives).
#[inline]
fn check(regions: &[Region], d: &Desc, per_desc: u32) -> Option<*mut u8> {
    if d.length > per_desc {
        return None;
    }
    buffer(regions, d.region, d.offset, d.length)
}

/// Reassembles the chain starting at `start` into `scratch`, in one pass,
/// each descriptor read once and checked.
fn gather(
    ring: &Ring,
    regions: &[Region],
    scratch: &mut [u8],
    start: u16,
    end: u16,
    per_desc: u32,
) -> Rx {
    let mut k = start;
    let mut total = 0usize;
    let mut fits = true;
    loop {
        if k == end {
            // The producer publishes whole chains; one that fills the whole
            // ring can never be completed.
            return if u32::from(end.wrapping_sub(start)) >= ring.size32() {
                Rx::RingError
            } else {
                Rx::Incomplete
            };
        }
        let d = ring.read_desc(k);
        let Some(p) = check(regions, &d, per_desc) else {
            return Rx::Bad;
        };
        let len = d.length as usize;
        if fits && total + len <= scratch.len() {
            // SAFETY: p..p+len was checked to lie inside a mapped region;
            // scratch[total..total+len] is in bounds; they do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(p, scratch.as_mut_ptr().add(total), len) };
        } else {
            fits = false;
        }
        total = total.saturating_add(len);
        k = k.wrapping_add(1);
        if d.flags & DESC_FLAG_NEXT == 0 {
            break;
        }
    }
    let n = k.wrapping_sub(start);
    if fits {
        Rx::Chain { len: total, n }
    } else {
        Rx::Oversize { n }
    }
}

/// Client: post every free slot of an rx ring as an empty buffer.
fn refill(q: &mut Queue) {
    let Some(bufs) = q.bufs else { return };
    // Posts until `size` buffers are outstanding beyond `next`.
    let count = q.ring.size32() - u32::from(q.posted.wrapping_sub(q.next));
    if count == 0 {
        return;
    }
    let mask = q.ring.size().wrapping_sub(1);
    let mut idx = q.posted;
    for _ in 0..count {
        q.ring.write_desc(
            idx,
            Desc {
                flags: 0,
                region: 0,
                length: bufs.size,
                offset: bufs.offset(idx & mask),
                metadata: 0,
            },
        );
        idx = idx.wrapping_add(1);
    }
    q.posted = idx;
    // SYNC POINT: Release store of head; pairs with the server's Acquire
    // load of head in its tx, making the posted descriptors visible.
    q.ring.head().store(idx, Ordering::Release);
}

/// Signals the ring's eventfd unless the receiver masked interrupts.
#[inline]
fn notify(q: &Queue) {
    if q.ring.flags().load(Ordering::Relaxed) & RING_FLAG_MASK_INT == 0 {
        kick(q.eventfd.as_raw_fd());
    }
}
