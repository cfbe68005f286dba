//! The transmit side: a TPACKET_V2 frame ring.
//!
//! The ring is `slots` fixed-size slots; the kernel lays them out
//! `per_block` to a block, blocks back to back in the mapping. Each slot
//! starts with a `tpacket2_hdr` whose `tp_status` word says who owns it:
//!
//! - `TP_STATUS_AVAILABLE` (0): free for user space to fill;
//! - `TP_STATUS_SEND_REQUEST`: filled, waiting for the kernel;
//! - `TP_STATUS_SENDING`: the kernel is transmitting it; it returns to
//!   `TP_STATUS_AVAILABLE` once the driver is done with the frame.
//!
//! We load `tp_status` with `Acquire` ordering and fill a slot only when it
//! reads `AVAILABLE`, so the kernel's last use of the slot happens before
//! our writes. We write the frame and `tp_len`, then store
//! `TP_STATUS_SEND_REQUEST` with `Release` ordering, so the kernel sees the
//! whole frame once it sees the status. The kernel walks the ring in the
//! same order from its own head, sending every consecutive
//! `SEND_REQUEST` slot when `sendto` is called.
//!
//! With `PACKET_LOSS` set, a frame the kernel refuses (for example longer
//! than the interface's MTU allows) is dropped and its slot freed, instead
//! of stopping the ring with `TP_STATUS_WRONG_FORMAT`.

use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{AfPacketConfig, Counters, ETH_HLEN};
use crate::sys::{self, RingMap};
use crate::Error;

/// Offset of the frame in a slot: the `tpacket2_hdr` rounded up to 16 bytes
/// (the kernel's `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`).
pub(super) const DATA_OFFSET: usize =
    (mem::size_of::<libc::tpacket2_hdr>() + libc::TPACKET_ALIGNMENT - 1)
        & !(libc::TPACKET_ALIGNMENT - 1);

pub(super) struct TxRing {
    // Declared before `fd`, so the mapping is removed before the socket closes.
    map: RingMap,
    fd: OwnedFd,
    slot_size: usize,
    per_block: usize,
    block_size: usize,
    slots: usize,
    /// Next slot to fill.
    head: usize,
    /// Frames may be waiting in the ring after a failed `sendto`.
    kick_pending: bool,
}

// SAFETY: the ring memory is reached only through `&mut self`, so moving the
// owner to another thread moves the only access path with it.
unsafe impl Send for TxRing {}

impl TxRing {
    /// Sets up the socket and ring and binds it to `ifindex` with protocol 0
    /// (it never receives).
    pub(super) fn open(ifindex: u32, cfg: &AfPacketConfig) -> Result<TxRing, Error> {
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        sys::set_packet_opt(&fd, libc::PACKET_VERSION, &version, "PACKET_VERSION V2")?;
        let one: libc::c_int = 1;
        sys::set_packet_opt(&fd, libc::PACKET_LOSS, &one, "PACKET_LOSS")?;
        if cfg.qdisc_bypass {
            sys::set_packet_opt(&fd, libc::PACKET_QDISC_BYPASS, &one, "PACKET_QDISC_BYPASS")?;
        }
        // Smallest page-multiple block that holds a slot; slots never
        // straddle blocks, so the slot count rounds up to whole blocks.
        let page = sys::page_size();
        let block_size = cfg.tx_frame_size.div_ceil(page) * page;
        let per_block = block_size / cfg.tx_frame_size;
        let blocks = cfg.tx_frames.div_ceil(per_block);
        let slots = blocks * per_block;
        let too_big = || Error::Config("the transmit ring is too large".to_owned());
        let req = libc::tpacket_req {
            tp_block_size: u32::try_from(block_size).map_err(|_| too_big())?,
            tp_block_nr: u32::try_from(blocks).map_err(|_| too_big())?,
            tp_frame_size: u32::try_from(cfg.tx_frame_size).map_err(|_| too_big())?,
            tp_frame_nr: u32::try_from(slots).map_err(|_| too_big())?,
        };
        sys::set_packet_opt(&fd, libc::PACKET_TX_RING, &req, "PACKET_TX_RING")?;
        let len = block_size.checked_mul(blocks).ok_or_else(too_big)?;
        let map = RingMap::new(&fd, len)?;
        sys::bind_packet(&fd, ifindex, 0)?;
        // Room for a full ring of frames in flight; SO_SNDBUFFORCE needs
        // CAP_NET_ADMIN, SO_SNDBUF is capped by net.core.wmem_max. Either way
        // a short buffer only shows up as `tx_would_block`.
        let sndbuf = libc::c_int::try_from(len * 2).unwrap_or(libc::c_int::MAX);
        if set_sock_opt(&fd, libc::SO_SNDBUFFORCE, sndbuf).is_err() {
            let _ = set_sock_opt(&fd, libc::SO_SNDBUF, sndbuf);
        }
        Ok(TxRing {
            map,
            fd,
            slot_size: cfg.tx_frame_size,
            per_block,
            block_size,
            slots,
            head: 0,
            kick_pending: false,
        })
    }

    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    pub(super) fn slots(&self) -> usize {
        self.slots
    }

    /// Start of slot `index`.
    fn slot(&self, index: usize) -> *mut u8 {
        debug_assert!(index < self.slots);
        let offset =
            (index / self.per_block) * self.block_size + (index % self.per_block) * self.slot_size;
        debug_assert!(offset + self.slot_size <= self.map.len());
        // SAFETY: `index < slots` and slots lie within whole blocks of the
        // mapping, so the offset is inside it.
        unsafe { self.map.base().add(offset) }
    }

    /// The status word of slot `index`, shared with the kernel.
    fn status(&self, index: usize) -> &AtomicU32 {
        let hdr = self.slot(index).cast::<libc::tpacket2_hdr>();
        // SAFETY: each slot starts with a `tpacket2_hdr`, 16-byte aligned (the
        // slot size is a multiple of 16 within page-aligned blocks), whose
        // first field is the u32 `tp_status`. The mapping lives as long as
        // `self`, and the kernel accesses the word only with aligned 32-bit
        // loads and stores.
        unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*hdr).tp_status)) }
    }

    pub(super) fn burst<'a>(
        &mut self,
        frames: impl IntoIterator<Item = &'a [u8]>,
        max_frame: usize,
        counters: &mut Counters,
    ) -> usize {
        let mut frames = frames.into_iter();
        let capacity = max_frame.min(self.slot_size - DATA_OFFSET);
        let mut taken = 0;
        let mut queued = 0;
        loop {
            // Acquire: pairs with the kernel's barrier before it frees the
            // slot, so its last reads of the slot are done.
            if self.status(self.head).load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
                // The slot is not taken, so an iterator that knows it is empty
                // did not hit a full ring.
                if frames.size_hint().1 != Some(0) {
                    counters.tx_ring_full += 1;
                }
                break;
            }
            let Some(frame) = frames.next() else { break };
            taken += 1;
            if frame.len() > capacity {
                counters.tx_oversize += 1;
                continue;
            }
            if frame.len() < ETH_HLEN {
                counters.tx_runt += 1;
                continue;
            }
            let slot = self.slot(self.head);
            let hdr = slot.cast::<libc::tpacket2_hdr>();
            // SAFETY: the slot is user-owned (status read AVAILABLE above);
            // the frame fits, as `DATA_OFFSET + len <= slot_size`; source and
            // slot cannot overlap (the slot is kernel-shared ring memory the
            // caller has no slice of).
            unsafe {
                ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(DATA_OFFSET), frame.len());
                ptr::addr_of_mut!((*hdr).tp_len).write(frame.len() as u32);
            }
            // Release: the frame and length are written before the kernel can
            // see the slot as ready.
            self.status(self.head)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.head = (self.head + 1) % self.slots;
            queued += 1;
            counters.tx_frames += 1;
            counters.tx_bytes += frame.len() as u64;
        }
        if queued > 0 || self.kick_pending {
            self.kick(counters);
        }
        taken
    }

    /// One `sendto` asking the kernel to send every waiting slot.
    fn kick(&mut self, counters: &mut Counters) {
        // SAFETY: a null buffer of length 0 with no address is how a packet
        // socket with a transmit ring is told to flush; nothing is read.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            self.kick_pending = false;
            return;
        }
        self.kick_pending = true;
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOBUFS) | Some(libc::EAGAIN) => counters.tx_would_block += 1,
            _ => counters.tx_errors += 1,
        }
    }
}

fn set_sock_opt(fd: &OwnedFd, opt: libc::c_int, value: libc::c_int) -> Result<(), Error> {
    // SAFETY: `value` is a live c_int and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(Error::os("setsockopt SOL_SOCKET"));
    }
    Ok(())
}
