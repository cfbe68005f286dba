//! A ring in shared memory: its header and descriptors.
//!
//! Layout (little-endian):
//!
//! | offset | field |
//! |---|---|
//! | 0 | cookie u32 = `0x3E31F20` |
//! | 4 | flags u16 (bit 0: the receiver masks interrupts; the sender then need not signal the ring's eventfd) |
//! | 6 | head u16 |
//! | 64 | tail u16 |
//! | 128 | descriptors, 16 bytes each, 2^n of them |
//!
//! A descriptor is: flags u16 (bit 0: the frame continues in the next
//! descriptor), region u16, length u32, offset u32, metadata u32.
//!
//! head and tail are free-running u16 counters; a slot is `index & (size-1)`.
//! Client-to-server ring: the client fills descriptors and advances head;
//! the server consumes them and advances tail. Server-to-client ring: the
//! client posts empty buffers by advancing head; the server fills them and
//! advances tail. Each side publishes its counter with a release store and
//! reads the other's with an acquire load, so the descriptor and buffer
//! contents written before a store are visible after the matching load.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

#[cfg(not(target_endian = "little"))]
compile_error!("memif rings are little-endian and this crate accesses them natively");

/// Ring cookie, checked when a server maps a client's ring.
pub const COOKIE: u32 = 0x3E31F20;
/// Ring flag: the receiver polls; do not signal its eventfd.
pub const RING_FLAG_MASK_INT: u16 = 1;
/// Descriptor flag: the frame continues in the next descriptor.
pub const DESC_FLAG_NEXT: u16 = 1;

const HDR_BYTES: u64 = 128;
const DESC_BYTES: u64 = 16;
const OFF_FLAGS: usize = 4;
const OFF_HEAD: usize = 6;
const OFF_TAIL: usize = 64;

/// Bytes a ring of 2^log2 descriptors occupies.
pub const fn ring_bytes(log2: u8) -> u64 {
    HDR_BYTES + DESC_BYTES * (1u64 << log2)
}

/// A descriptor, as laid out in shared memory.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub flags: u16,
    pub region: u16,
    pub length: u32,
    pub offset: u32,
    pub metadata: u32,
}

const _: () = assert!(std::mem::size_of::<Desc>() == 16);

/// A view of one ring. It holds a raw pointer into a region that the same
/// session owns; the session keeps the region mapped as long as the ring.
pub(crate) struct Ring {
    base: NonNull<u8>,
    mask: u16,
}

// SAFETY: a Ring is only a pointer into a mapping owned by the session that
// also owns the Ring; moving both to another thread together is fine.
unsafe impl Send for Ring {}

impl Ring {
    /// # Safety
    /// `base` must point at `ring_bytes(log2)` bytes that stay mapped,
    /// readable and writable for the Ring's whole life, aligned to 8 bytes,
    /// and `log2` must be at most 15.
    pub unsafe fn new(base: *mut u8, log2: u8) -> Ring {
        debug_assert!(log2 <= 15 && (base as usize).is_multiple_of(8));
        Ring {
            // SAFETY: the caller guarantees a valid mapped pointer.
            base: unsafe { NonNull::new_unchecked(base) },
            mask: ((1u32 << log2) - 1) as u16,
        }
    }

    /// Number of descriptors.
    #[inline]
    pub fn size(&self) -> u16 {
        self.mask.wrapping_add(1)
    }

    /// The size as u32 (a 2^16-entry ring would not fit a u16; rings here
    /// are at most 2^14).
    #[inline]
    pub fn size32(&self) -> u32 {
        u32::from(self.mask) + 1
    }

    #[inline]
    fn at<T>(&self, off: usize) -> *mut T {
        // SAFETY: every caller passes an offset inside the ring's bytes.
        unsafe { self.base.as_ptr().add(off).cast() }
    }

    pub fn cookie(&self) -> u32 {
        // SAFETY: offset 0..4 is inside the ring, 4-aligned (base is
        // 8-aligned); volatile because the peer may write it.
        unsafe { std::ptr::read_volatile(self.at::<u32>(0)) }
    }

    pub fn set_cookie(&self, v: u32) {
        // SAFETY: as in cookie().
        unsafe { std::ptr::write_volatile(self.at::<u32>(0), v) }
    }

    #[inline]
    fn atomic(&self, off: usize) -> &AtomicU16 {
        // SAFETY: off is 4, 6 or 64: inside the ring and 2-aligned; the
        // memory is valid for the Ring's life; it is only ever accessed
        // atomically by this process (the peer's accesses are in another
        // address space and, for a conforming peer, atomic too).
        unsafe { AtomicU16::from_ptr(self.at::<u16>(off)) }
    }

    #[inline]
    pub fn flags(&self) -> &AtomicU16 {
        self.atomic(OFF_FLAGS)
    }

    #[inline]
    pub fn head(&self) -> &AtomicU16 {
        self.atomic(OFF_HEAD)
    }

    #[inline]
    pub fn tail(&self) -> &AtomicU16 {
        self.atomic(OFF_TAIL)
    }

    #[inline]
    fn desc_ptr(&self, index: u16) -> *mut Desc {
        let slot = usize::from(index & self.mask);
        self.at::<Desc>(HDR_BYTES as usize + slot * DESC_BYTES as usize)
    }

    /// Reads the descriptor for `index` (masked to a slot) once, into a
    /// local copy: what is checked is what is used, whatever the peer
    /// writes meanwhile.
    #[inline]
    pub fn read_desc(&self, index: u16) -> Desc {
        // SAFETY: slot < size, so the 16 bytes lie inside the ring; 4-aligned
        // since base is 8-aligned and the offset a multiple of 16.
        unsafe { std::ptr::read_volatile(self.desc_ptr(index)) }
    }

    #[inline]
    pub fn write_desc(&self, index: u16, d: Desc) {
        // SAFETY: as in read_desc.
        unsafe { std::ptr::write_volatile(self.desc_ptr(index), d) }
    }

    /// Puts a ring in its initial state: cookie, no flags, head = tail = 0.
    /// Relaxed stores: the peer reads the ring only after a control message
    /// that follows them (the send and receive system calls order them).
    pub fn reset(&self, flags: u16) {
        self.set_cookie(COOKIE);
        self.flags().store(flags, Ordering::Relaxed);
        self.head().store(0, Ordering::Relaxed);
        self.tail().store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::Region;

    #[test]
    fn header_fields_sit_at_the_wire_offsets() {
        let r = Region::create(4096).unwrap();
        let base = r.range(0, ring_bytes(2)).unwrap();
        // SAFETY: the region is page-aligned and larger than the ring, and
        // outlives `ring`.
        let ring = unsafe { Ring::new(base, 2) };
        ring.reset(RING_FLAG_MASK_INT);
        ring.head().store(0x0102, Ordering::Release);
        ring.tail().store(0x0304, Ordering::Release);
        ring.write_desc(
            5,
            Desc {
                flags: 1,
                region: 2,
                length: 3,
                offset: 4,
                metadata: 5,
            },
        );
        // SAFETY: reading back bytes inside the live mapping.
        let bytes = unsafe { std::slice::from_raw_parts(base, ring_bytes(2) as usize) };
        assert_eq!(&bytes[0..8], &[0x20, 0x1F, 0xE3, 0x03, 1, 0, 2, 1]);
        assert_eq!(&bytes[64..66], &[4, 3]);
        // Index 5 is slot 1 of a 4-entry ring.
        assert_eq!(
            &bytes[144..160],
            &[1, 0, 2, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0]
        );
        assert_eq!(ring.read_desc(1).length, 3);
        assert_eq!((ring.size(), ring.cookie()), (4, COOKIE));
        assert_eq!(ring_bytes(10), 128 + 16 * 1024);
    }
}
