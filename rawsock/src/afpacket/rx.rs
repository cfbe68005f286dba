//! The receive side: a TPACKET_V3 block ring.
//!
//! The ring is `blocks` blocks of `block_size` bytes, mapped into this
//! process. Each block starts with a `tpacket_block_desc` whose
//! `block_status` word says who owns it:
//!
//! - `TP_STATUS_KERNEL` (0): the kernel may write frames into it;
//! - `TP_STATUS_USER` bit set: the kernel has finished the block (full, or
//!   retired after the block timeout) and user space may read it.
//!
//! The kernel writes the frames and `num_pkts`, then sets `block_status`
//! after a write barrier. We load `block_status` with `Acquire` ordering
//! before reading anything else in the block, so the frames it covers are
//! visible. When every frame of the block is consumed we store
//! `TP_STATUS_KERNEL` with `Release` ordering, so all our reads (and the
//! in-place VLAN rewrite below) happen before the kernel can reuse the
//! block. Blocks are used strictly in ring order, as the kernel fills them.
//!
//! Inside a block, frame `i` starts at `offset_to_first_pkt` and each
//! `tpacket3_hdr` gives `tp_next_offset` to the next; the frame bytes are at
//! `tp_mac` from the header, `tp_snaplen` long (`tp_len` on the wire).
//!
//! The kernel removes an 802.1Q/802.1ad tag from a received frame before
//! packet sockets see it and reports it in `hv1.tp_vlan_tci` with
//! `TP_STATUS_VLAN_VALID` (and the tag protocol in `hv1.tp_vlan_tpid` with
//! `TP_STATUS_VLAN_TPID_VALID`). We put it back: the 12 address bytes move 4
//! bytes toward the header, into the padding between the `tpacket3_hdr` and
//! the frame (at least 14 bytes for Ethernet), and the tag fills the gap.
//! That rewrites ring memory we own, so no copy of the frame is needed.

use std::mem;
use std::os::fd::OwnedFd;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{AfPacketConfig, Counters};
use crate::sys::{self, RingMap};
use crate::Error;

/// Size of the header the kernel writes before each frame.
const HDR_LEN: usize = mem::size_of::<libc::tpacket3_hdr>();
/// Bytes of an 802.1Q tag.
const VLAN_HLEN: usize = 4;
/// Destination and source MAC addresses.
const ADDRS_LEN: usize = 12;

/// Where the reader is inside the block it currently holds.
#[derive(Clone, Copy)]
struct Cursor {
    /// Frames of the block not yet consumed.
    left: u32,
    /// Offset of the next frame header from the block start.
    offset: usize,
}

pub(super) struct RxRing {
    // Declared before `fd`, so the mapping is removed before the socket closes.
    map: RingMap,
    fd: OwnedFd,
    block_size: usize,
    blocks: usize,
    /// Index of the block being read or waited for.
    current: usize,
    /// `Some` while `current` is held (its status was seen as user-owned).
    cursor: Option<Cursor>,
}

// SAFETY: the ring memory is reached only through `&mut self` (or, for
// `ready`, an atomic load), so moving the owner to another thread moves the
// only access path with it; the kernel side is thread-independent.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Sets up the socket and ring, then binds it to `ifindex` for every
    /// protocol.
    pub(super) fn open(ifindex: u32, cfg: &AfPacketConfig) -> Result<RxRing, Error> {
        // Protocol 0: nothing is queued until the bind below.
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        sys::set_packet_opt(&fd, libc::PACKET_VERSION, &version, "PACKET_VERSION V3")?;
        let one: libc::c_int = 1;
        sys::set_packet_opt(
            &fd,
            libc::PACKET_IGNORE_OUTGOING,
            &one,
            "PACKET_IGNORE_OUTGOING",
        )?;
        // Lengths were checked to fit u32 by `AfPacketConfig::validate`.
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.rx_block_size as u32,
            tp_block_nr: cfg.rx_blocks as u32,
            // The frame size only has to divide the block for V3, which
            // places frames back to back; one "frame" per block.
            tp_frame_size: cfg.rx_block_size as u32,
            tp_frame_nr: cfg.rx_blocks as u32,
            tp_retire_blk_tov: cfg.rx_block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::set_packet_opt(&fd, libc::PACKET_RX_RING, &req, "PACKET_RX_RING")?;
        let map = RingMap::new(&fd, cfg.rx_block_size * cfg.rx_blocks)?;
        sys::bind_packet(&fd, ifindex, libc::ETH_P_ALL as u16)?;
        if cfg.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as libc::c_int,
                mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            sys::set_packet_opt(
                &fd,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq,
                "PACKET_ADD_MEMBERSHIP promiscuous",
            )?;
        }
        Ok(RxRing {
            map,
            fd,
            block_size: cfg.rx_block_size,
            blocks: cfg.rx_blocks,
            current: 0,
            cursor: None,
        })
    }

    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Start of block `index`.
    fn block(&self, index: usize) -> *mut u8 {
        debug_assert!(index < self.blocks);
        // SAFETY: `index < blocks`, so the offset stays inside the mapping of
        // `blocks * block_size` bytes.
        unsafe { self.map.base().add(index * self.block_size) }
    }

    /// The status word of block `index`, shared with the kernel.
    fn status(&self, index: usize) -> &AtomicU32 {
        let desc = self.block(index).cast::<libc::tpacket_block_desc>();
        // SAFETY: every block starts with a `tpacket_block_desc`; blocks are
        // page aligned, so `block_status` (a u32 at offset 8) is aligned for
        // `AtomicU32`. The mapping lives as long as `self`, and the kernel
        // only ever accesses the word with single aligned 32-bit stores and
        // loads, so treating it as an atomic is sound.
        unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*desc).hdr.bh1.block_status)) }
    }

    /// Whether a frame can be read now (an atomic load, no system call).
    pub(super) fn ready(&self) -> bool {
        match self.cursor {
            Some(c) if c.left > 0 => true,
            _ => self.status(self.current).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0,
        }
    }

    /// Claims `current` if the kernel has handed it over, returning the
    /// cursor at its first frame.
    fn claim(&self) -> Option<Cursor> {
        // Acquire: pairs with the kernel's barrier before it sets the status,
        // so the block's frames and descriptor are visible below.
        if self.status(self.current).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let desc = self.block(self.current).cast::<libc::tpacket_block_desc>();
        // SAFETY: the block is user-owned now (status seen above), so the
        // kernel does not write its descriptor; it is in bounds and aligned.
        let (num, first) = unsafe {
            let bh1 = ptr::addr_of!((*desc).hdr.bh1);
            (
                ptr::read(ptr::addr_of!((*bh1).num_pkts)),
                ptr::read(ptr::addr_of!((*bh1).offset_to_first_pkt)),
            )
        };
        Some(Cursor {
            left: num,
            offset: first as usize,
        })
    }

    /// Gives `current` back to the kernel and moves to the next block.
    fn release(&mut self) {
        // Release: every read of the block (and the VLAN rewrite) happens
        // before the kernel can see the block as its own again.
        self.status(self.current)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.cursor = None;
        self.current = (self.current + 1) % self.blocks;
    }

    pub(super) fn burst(
        &mut self,
        max: usize,
        max_frame: usize,
        counters: &mut Counters,
        mut f: impl FnMut(&[u8]),
    ) -> usize {
        let mut delivered = 0;
        while delivered < max {
            let Some(mut cursor) = self.cursor.or_else(|| self.claim()) else {
                break;
            };
            let block = self.block(self.current);
            while cursor.left > 0 && delivered < max {
                cursor.left -= 1;
                let Some(hdr_offset) = self.header_in_bounds(cursor.offset) else {
                    counters.rx_malformed += 1;
                    cursor.left = 0;
                    break;
                };
                // SAFETY: `header_in_bounds` checked that a whole header lies
                // inside the block, which we own (status seen user-owned);
                // headers are 16-byte aligned by the kernel, and read_unaligned
                // does not rely on it anyway.
                let hdr = unsafe {
                    ptr::read_unaligned(block.add(hdr_offset).cast::<libc::tpacket3_hdr>())
                };
                cursor.offset = hdr_offset + hdr.tp_next_offset as usize;
                if hdr.tp_next_offset == 0 && cursor.left > 0 {
                    // A zero link before the last frame would loop on one
                    // frame; stop reading this block.
                    counters.rx_malformed += 1;
                    cursor.left = 0;
                }
                // Saved before the callback runs: if it panics, this frame
                // (whose VLAN tag may already be restored in place) is not
                // delivered a second time.
                self.cursor = Some(cursor);
                // SAFETY: we own the block; `deliver` checks the frame's
                // extent against the block before touching it.
                let outcome =
                    unsafe { self.deliver(block, hdr_offset, &hdr, max_frame, counters, &mut f) };
                if outcome {
                    delivered += 1;
                }
            }
            self.cursor = Some(cursor);
            if cursor.left == 0 {
                self.release();
            }
        }
        delivered
    }

    /// `offset` if a whole frame header fits in the block there.
    fn header_in_bounds(&self, offset: usize) -> Option<usize> {
        (offset >= mem::size_of::<libc::tpacket_block_desc>()
            && offset.checked_add(HDR_LEN)? <= self.block_size)
            .then_some(offset)
    }

    /// Hands one frame to `f` (restoring its VLAN tag) or counts why not.
    /// Returns whether it was delivered.
    ///
    /// # Safety
    /// `block` is the start of a block this ring currently owns (status seen
    /// user-owned, not yet released) and `hdr` was read at `hdr_offset`.
    unsafe fn deliver(
        &self,
        block: *mut u8,
        hdr_offset: usize,
        hdr: &libc::tpacket3_hdr,
        max_frame: usize,
        counters: &mut Counters,
        f: &mut impl FnMut(&[u8]),
    ) -> bool {
        let mac = hdr.tp_mac as usize;
        let snap = hdr.tp_snaplen as usize;
        let in_block = hdr_offset
            .checked_add(mac)
            .and_then(|start| start.checked_add(snap))
            .is_some_and(|end| end <= self.block_size);
        if !in_block || mac < HDR_LEN + VLAN_HLEN || snap < ADDRS_LEN {
            counters.rx_malformed += 1;
            return false;
        }
        let vlan = hdr.tp_status & libc::TP_STATUS_VLAN_VALID != 0;
        let len = snap + if vlan { VLAN_HLEN } else { 0 };
        if hdr.tp_len as usize != snap || len > max_frame {
            counters.oversize += 1;
            return false;
        }
        // SAFETY: `hdr_offset + mac + snap <= block_size` (checked above), so
        // the frame lies inside the block, which the caller guarantees we own.
        let frame = unsafe { block.add(hdr_offset + mac) };
        let start = if vlan {
            let tpid = if hdr.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0
                && hdr.hv1.tp_vlan_tpid != 0
            {
                hdr.hv1.tp_vlan_tpid
            } else {
                libc::ETH_P_8021Q as u16
            };
            let tci = hdr.hv1.tp_vlan_tci as u16;
            // SAFETY: `mac >= HDR_LEN + 4`, so the 4 bytes before the frame
            // lie after the header we already copied out, inside the owned
            // block; `ptr::copy` allows the overlapping move of the 12
            // address bytes, and the tag goes into bytes 12..16 of the new
            // start, which were address bytes 8..12 before the move.
            unsafe {
                let start = frame.sub(VLAN_HLEN);
                ptr::copy(frame, start, ADDRS_LEN);
                let (t, c) = (tpid.to_be_bytes(), tci.to_be_bytes());
                let tag = [t[0], t[1], c[0], c[1]];
                ptr::copy_nonoverlapping(tag.as_ptr(), start.add(ADDRS_LEN), VLAN_HLEN);
                start
            }
        } else {
            frame
        };
        if vlan {
            counters.vlan_restored += 1;
        }
        if hdr.tp_status & libc::TP_STATUS_CSUMNOTREADY != 0 {
            counters.csum_not_ready += 1;
        }
        // SAFETY: `start..start + len` is the frame (with the tag when
        // restored), inside the owned block; the slice lives only for the
        // call, and nothing writes the block until `release`.
        let bytes = unsafe { std::slice::from_raw_parts(start, len) };
        f(bytes);
        counters.rx_frames += 1;
        counters.rx_bytes += len as u64;
        true
    }

    /// Reads and resets the kernel's counts for this socket.
    pub(super) fn kernel_stats(&self) -> Result<libc::tpacket_stats_v3, Error> {
        use std::os::fd::AsRawFd;
        let mut stats = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `stats` and `len` are valid for writes and `len` holds the
        // size of `stats`, so the kernel writes at most that many bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(Error::os("PACKET_STATISTICS"));
        }
        Ok(stats)
    }
}
