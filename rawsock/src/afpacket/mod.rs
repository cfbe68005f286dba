//! An existing Ethernet interface driven through `AF_PACKET` sockets with
//! memory-mapped rings.
//!
//! Two sockets, both bound to the interface by index:
//!
//! - receive: TPACKET_V3 block ring ([`rx`]). The kernel fills a block with
//!   frames and hands it over when it is full or when
//!   [`AfPacketConfig::rx_block_timeout_ms`] has passed since the block's
//!   first frame, so at low rates a frame may wait up to that timeout.
//!   `PACKET_IGNORE_OUTGOING` keeps the interface's own transmissions out.
//! - transmit: TPACKET_V2 frame ring ([`tx`]) with `PACKET_LOSS` (a
//!   malformed frame is skipped instead of stalling the ring) and, if asked,
//!   `PACKET_QDISC_BYPASS`; one `sendto(MSG_DONTWAIT)` per burst.
//!
//! The receive socket is bound with `ETH_P_ALL` only after its ring exists,
//! so it never queues frames outside the ring, and only to the named
//! interface.

mod rx;
mod tx;

use std::os::fd::{AsRawFd, RawFd};

use crate::{sys, Error};
use rx::RxRing;
use tx::TxRing;

/// Bytes the receive ring needs around each frame: block descriptor (48),
/// frame header and `sockaddr_ll` (68) and the alignment padding before the
/// MAC header, rounded up generously.
const RX_FRAME_OVERHEAD: usize = 256;

/// Shortest frame accepted: an Ethernet header.
const ETH_HLEN: usize = 14;

/// How to open an [`AfPacket`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Name of an existing Ethernet interface in the calling thread's network
    /// namespace. Nothing else is opened or changed.
    pub iface: String,
    /// Bytes per receive block; a multiple of the page size and at least
    /// `max_frame + 256`.
    pub rx_block_size: usize,
    /// Number of receive blocks (at least 2).
    pub rx_blocks: usize,
    /// Milliseconds after which the kernel hands over a block that is not
    /// full: the longest a received frame waits at low rates. 0 lets the
    /// kernel choose (several milliseconds, from the link speed).
    pub rx_block_timeout_ms: u32,
    /// Bytes per transmit slot: a multiple of 16 and at least
    /// `max_frame + 32` (the slot starts with a 32-byte header).
    pub tx_frame_size: usize,
    /// Number of transmit slots (rounded up to fill whole pages).
    pub tx_frames: usize,
    /// Largest frame, in bytes without FCS and with any VLAN tag, that is
    /// delivered or sent. Larger received frames are counted in
    /// [`Counters::oversize`] and not delivered; larger frames given to
    /// [`AfPacket::tx_burst`] are counted in [`Counters::tx_oversize`].
    pub max_frame: usize,
    /// Transmit straight to the driver, skipping the interface's queueing
    /// discipline (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
    /// Receive frames addressed to any MAC, as an emulated NIC with its own
    /// address needs on a physical interface (a veth passes every frame
    /// anyway). Done with a packet-socket membership
    /// (`PACKET_MR_PROMISC`), which the kernel counts per socket and drops
    /// when the socket closes: the interface's own flags are not changed.
    pub promiscuous: bool,
}

impl AfPacketConfig {
    /// Defaults for interface `iface`: 32 receive blocks of 128 KiB handed
    /// over after 1 ms, 512 transmit slots of 2 KiB, frames up to 1518 bytes
    /// (1500-byte MTU plus Ethernet header and one VLAN tag), qdisc bypass,
    /// not promiscuous.
    pub fn new(iface: &str) -> AfPacketConfig {
        AfPacketConfig {
            iface: iface.to_owned(),
            rx_block_size: 128 * 1024,
            rx_blocks: 32,
            rx_block_timeout_ms: 1,
            tx_frame_size: 2048,
            tx_frames: 512,
            max_frame: 1518,
            qdisc_bypass: true,
            promiscuous: false,
        }
    }

    /// Checks the numbers against each other and the kernel's rules.
    fn validate(&self) -> Result<(), Error> {
        let page = sys::page_size();
        let fail = |msg: String| Err(Error::Config(msg));
        if self.max_frame < ETH_HLEN {
            return fail(format!("max_frame {} is below 14 bytes", self.max_frame));
        }
        if self.rx_block_size == 0 || !self.rx_block_size.is_multiple_of(page) {
            return fail(format!(
                "rx_block_size {} is not a positive multiple of the page size {page}",
                self.rx_block_size
            ));
        }
        if self.rx_block_size < self.max_frame + RX_FRAME_OVERHEAD {
            return fail(format!(
                "rx_block_size {} cannot hold a max_frame of {} plus {RX_FRAME_OVERHEAD} bytes of headers",
                self.rx_block_size, self.max_frame
            ));
        }
        if self.rx_blocks < 2 {
            return fail(format!("rx_blocks {} is below 2", self.rx_blocks));
        }
        if u32::try_from(self.rx_block_size).is_err()
            || self.rx_block_size.checked_mul(self.rx_blocks).is_none()
            || u32::try_from(self.rx_blocks).is_err()
        {
            return fail("the receive ring is too large".to_owned());
        }
        if !self.tx_frame_size.is_multiple_of(16)
            || self.tx_frame_size < self.max_frame + tx::DATA_OFFSET
        {
            return fail(format!(
                "tx_frame_size {} must be a multiple of 16 and at least max_frame + {} = {}",
                self.tx_frame_size,
                tx::DATA_OFFSET,
                self.max_frame + tx::DATA_OFFSET
            ));
        }
        if self.tx_frames == 0 || u32::try_from(self.tx_frames).is_err() {
            return fail(format!("tx_frames {} is out of range", self.tx_frames));
        }
        if u32::try_from(self.tx_frame_size).is_err()
            || self.tx_frame_size.checked_mul(self.tx_frames).is_none()
        {
            return fail("the transmit ring is too large".to_owned());
        }
        Ok(())
    }
}

/// Frame and error counts of one [`AfPacket`], all cumulative since it was
/// opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames handed to the [`AfPacket::rx_burst`] callback.
    pub rx_frames: u64,
    /// Bytes of those frames (as delivered, VLAN tags included).
    pub rx_bytes: u64,
    /// Received frames longer than `max_frame` (or cut short by the ring),
    /// not delivered.
    pub oversize: u64,
    /// Delivered frames whose 802.1Q/802.1ad tag the kernel had stripped and
    /// that got it back.
    pub vlan_restored: u64,
    /// Delivered frames the kernel flagged `TP_STATUS_CSUMNOTREADY`: sent by
    /// the local stack with a checksum left to offload, so their L4
    /// checksum is not final.
    pub csum_not_ready: u64,
    /// Ring entries whose offsets did not fit their block (never expected;
    /// the rest of that block is skipped).
    pub rx_malformed: u64,
    /// Frames the kernel dropped because the receive ring was full
    /// (`PACKET_STATISTICS`, accumulated by [`AfPacket::counters`]).
    pub kernel_drops: u64,
    /// Times the kernel found every receive block in user space.
    pub kernel_ring_freezes: u64,
    /// Frames placed in the transmit ring and handed to the kernel.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// [`AfPacket::tx_burst`] calls that stopped at a slot the kernel still
    /// owned while frames remained; the frames not taken are the caller's.
    pub tx_ring_full: u64,
    /// Frames given to `tx_burst` longer than `max_frame`, dropped.
    pub tx_oversize: u64,
    /// Frames given to `tx_burst` shorter than an Ethernet header, dropped.
    pub tx_runt: u64,
    /// `sendto` calls answered `ENOBUFS` or `EAGAIN`: the frames stay queued
    /// and the next `tx_burst` retries them.
    pub tx_would_block: u64,
    /// `sendto` calls that failed otherwise (for example the interface is
    /// down); the frames stay queued as for `tx_would_block`.
    pub tx_errors: u64,
}

/// An existing Ethernet interface, opened for raw frame receive and
/// transmit through memory-mapped `AF_PACKET` rings.
///
/// The sockets belong to the network namespace of the thread that called
/// [`AfPacket::open`]; the value can then be moved to and used from any
/// thread.
pub struct AfPacket {
    rx: RxRing,
    tx: TxRing,
    iface: String,
    ifindex: u32,
    mac: [u8; 6],
    max_frame: usize,
    counters: Counters,
}

impl AfPacket {
    /// Opens interface `cfg.iface` (which must exist, in the calling thread's
    /// network namespace, and be Ethernet). The interface's state (up/down,
    /// MTU, offloads, flags) is left as it is; `promiscuous` adds a
    /// membership that ends with the socket.
    pub fn open(cfg: &AfPacketConfig) -> Result<AfPacket, Error> {
        cfg.validate()?;
        let ifindex = sys::ifindex(&cfg.iface)?;
        // The transmit socket is bound first, with protocol 0 so it receives
        // nothing; its address tells whether the interface is Ethernet before
        // the receive socket starts capturing.
        let tx = TxRing::open(ifindex, cfg)?;
        let addr = sys::packet_sockname(tx.fd())?;
        if addr.sll_hatype != libc::ARPHRD_ETHER || addr.sll_halen != 6 {
            return Err(Error::Interface {
                name: cfg.iface.clone(),
                reason: "not an Ethernet interface",
            });
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&addr.sll_addr[..6]);
        let rx = RxRing::open(ifindex, cfg)?;
        Ok(AfPacket {
            rx,
            tx,
            iface: cfg.iface.clone(),
            ifindex,
            mac,
            max_frame: cfg.max_frame,
            counters: Counters::default(),
        })
    }

    /// Delivers up to `max` received frames to `f`, in arrival order, and
    /// returns how many it delivered. Makes no system call: it reads blocks
    /// the kernel has already handed over, and gives each block back as soon
    /// as all its frames are consumed. A frame whose VLAN tag the kernel
    /// stripped is delivered with the tag back in place. Oversize frames are
    /// counted and skipped without counting toward `max`.
    pub fn rx_burst(&mut self, max: usize, f: impl FnMut(&[u8])) -> usize {
        self.rx.burst(max, self.max_frame, &mut self.counters, f)
    }

    /// Whether a received frame is ready, without waiting or a system call.
    pub fn rx_ready(&self) -> bool {
        self.rx.ready()
    }

    /// Waits up to `timeout_ms` milliseconds (-1: no limit) for a received
    /// frame. Returns at once, without a system call, when one is ready.
    pub fn wait_rx(&self, timeout_ms: i32) -> Result<bool, Error> {
        if self.rx.ready() {
            return Ok(true);
        }
        sys::poll_readable(self.rx.fd().as_raw_fd(), timeout_ms)
    }

    /// Places frames from `frames` into free transmit slots, then asks the
    /// kernel to send them with one `sendto(MSG_DONTWAIT)`. Returns how many
    /// frames it took from the iterator: sent, or dropped as oversize/runt.
    /// It stops before taking a frame when the next slot is still in use, so
    /// the frames not taken are the caller's to retry or count.
    ///
    /// Frames the kernel could not take at once (`ENOBUFS`/`EAGAIN`) stay in
    /// the ring; the next call retries them even with no new frames.
    pub fn tx_burst<'a>(&mut self, frames: impl IntoIterator<Item = &'a [u8]>) -> usize {
        self.tx.burst(frames, self.max_frame, &mut self.counters)
    }

    /// The counters, after adding the kernel's drop counts. Reading the
    /// kernel's counts (`PACKET_STATISTICS`) is a system call that resets
    /// them, so this accumulates; call it at reporting intervals, not per
    /// burst. If the kernel cannot be asked, the last values are returned.
    pub fn counters(&mut self) -> Counters {
        if let Ok(stats) = self.rx.kernel_stats() {
            self.counters.kernel_drops += u64::from(stats.tp_drops);
            self.counters.kernel_ring_freezes += u64::from(stats.tp_freeze_q_cnt);
        }
        self.counters
    }

    /// The interface's MAC address, as read when it was opened.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The interface's name.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The interface's index in its network namespace.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The receive socket, for an event loop (readable when a block is
    /// ready).
    pub fn rx_raw_fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }

    /// Number of transmit slots in the ring (after rounding up).
    pub fn tx_slots(&self) -> usize {
        self.tx.slots()
    }
}

impl std::fmt::Debug for AfPacket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacket")
            .field("iface", &self.iface)
            .field("ifindex", &self.ifindex)
            .field("max_frame", &self.max_frame)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_valid() {
        AfPacketConfig::new("eth0").validate().unwrap();
    }

    #[test]
    fn config_errors_are_reported() {
        let base = AfPacketConfig::new("x");
        let cases = [
            AfPacketConfig {
                rx_block_size: 1000,
                ..base.clone()
            },
            AfPacketConfig {
                rx_blocks: 1,
                ..base.clone()
            },
            AfPacketConfig {
                max_frame: 9018,
                ..base.clone()
            },
            AfPacketConfig {
                tx_frame_size: 2040,
                ..base.clone()
            },
            AfPacketConfig {
                tx_frames: 0,
                ..base.clone()
            },
            AfPacketConfig {
                max_frame: 10,
                ..base.clone()
            },
        ];
        for cfg in cases {
            assert!(
                matches!(cfg.validate(), Err(Error::Config(_))),
                "{cfg:?} accepted"
            );
        }
    }

    #[test]
    fn bad_interface_names_are_one_clear_error() {
        for name in [
            "",
            "a/b",
            "sixteen-chars-xx",
            "has space",
            "rsk-no-such-if0",
        ] {
            match AfPacket::open(&AfPacketConfig::new(name)) {
                Err(Error::Interface { name: n, reason }) => {
                    assert_eq!(n, name);
                    assert!(!reason.is_empty());
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
    }
}
