//! Every structure that the emulated NIC and software share, defined once.
//!
//! Shared memory holds offsets into an application's DMA region, never
//! pointers. Each type is `#[repr(C)]` with its size asserted at compile time.
//! Every field is an atomic, so a buggy or hostile peer writing the shared
//! bytes can make values wrong but never makes the other side's accesses
//! undefined.
//!
//! The files themselves are the device's: sealed `memfd` files
//! ([`crate::shm::SealedFile`]) that an application opens through
//! `/proc/<device pid>/fd` and can neither shrink nor grow, so no access of
//! the device's to an application's region can fault.
//!
//! # The protocol, field by field
//!
//! Each side's step is a method of the type it touches, written with the
//! atomics of [`crate::sync`]: both sides call these and nothing else, and
//! the loom models in `tests/loom.rs` run the same methods.
//!
//! **Posted register writes** ([`MmioQueue`]). Software never calls the NIC.
//! A register write is an entry pushed on the application's posted-write
//! queue (like a PCIe posted write): software stores the entry (Relaxed), then
//! `producer` with Release ([`MmioQueue::post`]); the NIC loads `producer`
//! with Acquire (SYNC POINT A), copies entries out strictly in order and
//! stores `consumer` with Release ([`MmioQueue::take`]); software loads
//! `consumer` with Acquire (SYNC POINT B, [`MmioQueue::acquire_consumer`])
//! before reusing slots.
//! A full queue makes software wait: a write is never lost (the real NIC
//! drops head updates when its 128-deep FIFO overflows).
//!
//! **RX notifications** ([`RxNotification`]). The NIC writes `pipe_id` and
//! `tail` (Relaxed), then `signal = 1` with Release
//! ([`RxNotification::publish`]); software loads `signal` with Acquire
//! (SYNC POINT C), reads the fields, clears `signal` (Relaxed; only software
//! reads it again; [`RxNotification::take`]) and after a batch posts one
//! write of the notification buffer's RX head register. The NIC only writes
//! a slot that the last head write handed back. While a pipe's notification
//! is outstanding (not answered by a head write) the NIC sends it no other
//! (the reactive rule, in the engine).
//!
//! **TX notifications** ([`TxNotification`]). Software fills a slot and sets
//! `signal` (Relaxed, [`TxNotification::fill_data`]), then posts the TX tail
//! register write; the posted-write Release/Acquire (SYNC POINT A) orders the
//! slot before the tail. The NIC reads the slot ([`TxNotification::read`]),
//! transmits, and completes it by storing `signal = 0` with Release
//! ([`TxNotification::complete`]); software loads `signal` with Acquire
//! (SYNC POINT D, [`TxNotification::completed`]) to reclaim completions in
//! order.
//!
//! **Pipe data.** The NIC writes frame bytes into the pipe, then (SYNC POINT C)
//! publishes the new tail in a notification; software reads the bytes only up
//! to a tail it has acquired. Software hands bytes back by posting a head
//! write; the NIC writes bytes only between tail and head - 1 flit
//! ([`ring_free`]).

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use std::mem::{offset_of, size_of};

/// Page size: register blocks and DMA buffers are page aligned.
pub const PAGE: usize = 4096;

/// Most pipes a device can have (the real NIC's limit).
pub const MAX_PIPES: u32 = 8192;
/// Most notification buffers (one per device handle) a device can have.
pub const MAX_NBUFS: u32 = 1024;
/// Most descriptor-ring queue pairs (the packetized baseline).
pub const MAX_DESC_QUEUES: u32 = 1024;

/// Register window: queue `q`'s 64 B register block sits at `q * PAGE`.
/// Pipes are queues `0..MAX_PIPES`, notification buffers follow, then
/// descriptor queues.
pub const NBUF_QUEUE_BASE: u32 = MAX_PIPES;
pub const DESC_QUEUE_BASE: u32 = MAX_PIPES + MAX_NBUFS;
pub const NUM_QUEUES: u32 = MAX_PIPES + MAX_NBUFS + MAX_DESC_QUEUES;

/// One queue's register block (emulated MMIO). Pipes use the four RX
/// registers; notification buffers and descriptor queues use all eight.
#[repr(C)]
#[derive(Debug, Default)]
pub struct QueueRegs {
    pub rx_tail: u32,
    pub rx_head: u32,
    pub rx_mem_low: u32,
    pub rx_mem_high: u32,
    pub tx_tail: u32,
    pub tx_head: u32,
    pub tx_mem_low: u32,
    pub tx_mem_high: u32,
    _reserved: [u32; 8],
}
const _: () = assert!(size_of::<QueueRegs>() == 64);

/// Register offsets within a block.
pub mod reg {
    use super::*;
    pub const RX_TAIL: u32 = offset_of!(QueueRegs, rx_tail) as u32;
    pub const RX_HEAD: u32 = offset_of!(QueueRegs, rx_head) as u32;
    pub const RX_MEM_LOW: u32 = offset_of!(QueueRegs, rx_mem_low) as u32;
    pub const RX_MEM_HIGH: u32 = offset_of!(QueueRegs, rx_mem_high) as u32;
    pub const TX_TAIL: u32 = offset_of!(QueueRegs, tx_tail) as u32;
    pub const TX_HEAD: u32 = offset_of!(QueueRegs, tx_head) as u32;
    pub const TX_MEM_LOW: u32 = offset_of!(QueueRegs, tx_mem_low) as u32;
    pub const TX_MEM_HIGH: u32 = offset_of!(QueueRegs, tx_mem_high) as u32;
}

/// Address of register `reg` of queue `queue` in the register window.
#[inline]
pub const fn reg_addr(queue: u32, reg: u32) -> u32 {
    queue * PAGE as u32 + reg
}

/// Splits a register address into (queue, register offset); `None` if it is
/// outside the window or not a register.
#[inline]
pub const fn split_reg_addr(addr: u32) -> Option<(u32, u32)> {
    let q = addr / PAGE as u32;
    let r = addr % PAGE as u32;
    if q >= NUM_QUEUES || r >= 32 || !r.is_multiple_of(4) {
        None
    } else {
        Some((q, r))
    }
}

/// Cache-line pair alignment (128 B: the spatial prefetcher pulls pairs), as a
/// `#[repr(C)]` type so its layout in shared memory is fixed; crossbeam's
/// `CachePadded` changes alignment by target and is not meant for shared
/// layouts.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct Padded<T>(pub T);

/// Entries in a posted-write queue.
pub const MMIO_QUEUE_LEN: usize = 4096;

/// One posted register write.
#[repr(C)]
#[derive(Debug, Default)]
pub struct MmioEntry {
    /// `addr << 32 | value`.
    pub word: AtomicU64,
    /// CLOCK_MONOTONIC ns when software issued it (0 unless the device
    /// emulates interconnect latency).
    pub issued_ns: AtomicU64,
}
#[cfg(not(loom))]
const _: () = assert!(size_of::<MmioEntry>() == 16);

/// An application's posted-write queue: single producer (software), single
/// consumer (the NIC). Indices run freely and wrap at 2^32; `producer` is at
/// most [`MMIO_QUEUE_LEN`] entries ahead of `consumer`. The NIC applies none
/// of the entries a producer beyond that claims: it counts the producer as a
/// bad register value and moves `consumer` to it (the queue is then empty).
///
/// `N` is [`MMIO_QUEUE_LEN`] in shared memory; the models of the protocol
/// use smaller queues.
#[repr(C)]
#[derive(Debug)]
pub struct MmioQueue<const N: usize = MMIO_QUEUE_LEN> {
    /// Next entry software will write. Release by software, Acquire by NIC
    /// (SYNC POINT A).
    pub producer: Padded<AtomicU32>,
    /// Next entry the NIC will apply. Release by NIC, Acquire by software
    /// (SYNC POINT B).
    pub consumer: Padded<AtomicU32>,
    pub entries: [MmioEntry; N],
}
#[cfg(not(loom))]
const _: () = assert!(size_of::<MmioQueue>() == 256 + 16 * MMIO_QUEUE_LEN);
const _: () = assert!(MMIO_QUEUE_LEN.is_power_of_two());

impl<const N: usize> Default for MmioQueue<N> {
    /// An empty queue (shared memory starts zeroed; this is for queues
    /// outside it).
    fn default() -> Self {
        Self {
            producer: Padded::default(),
            consumer: Padded::default(),
            entries: std::array::from_fn(|_| MmioEntry::default()),
        }
    }
}

/// The steps of the posted-write protocol. Software keeps its own copies
/// of `producer` (it is the only writer) and of the last `consumer` it
/// loaded; the NIC keeps its own copy of `consumer`.
impl<const N: usize> MmioQueue<N> {
    const MASK: usize = {
        assert!(N.is_power_of_two());
        N - 1
    };

    /// Software: whether an entry may be posted at `producer` while the NIC
    /// is known to have copied out everything before `consumer`.
    #[inline]
    pub const fn has_room(producer: u32, consumer: u32) -> bool {
        (producer.wrapping_sub(consumer) as usize) < N
    }

    /// Software: how far the NIC has copied entries out (and so which
    /// slots may be written again).
    #[inline]
    pub fn acquire_consumer(&self) -> u32 {
        // SYNC POINT B (Acquire): pairs with the NIC's Release store of
        // `consumer` in `take`, made after it copied the entries out.
        self.consumer.0.load(Ordering::Acquire)
    }

    /// Whether posted writes wait for the NIC (the producer is not where
    /// the NIC's consumer is): what the engine checks before it parks.
    #[inline]
    pub fn pending(&self) -> bool {
        self.producer.0.load(Ordering::Acquire) != self.consumer.0.load(Ordering::Relaxed)
    }

    /// Software: posts the write of `value` to register `addr` as entry
    /// `producer` (which [`MmioQueue::has_room`] allowed), issued at
    /// `issued_ns` (0 without an emulated interconnect). The caller then
    /// counts its producer one further.
    #[inline]
    pub fn post(&self, producer: u32, addr: u32, value: u32, issued_ns: u64) {
        let e = &self.entries[producer as usize & Self::MASK];
        e.word
            .store((addr as u64) << 32 | value as u64, Ordering::Relaxed);
        e.issued_ns.store(issued_ns, Ordering::Relaxed);
        // SYNC POINT A (Release): pairs with the NIC's Acquire load of
        // `producer` in `take`; the entry and any TX notification or
        // descriptor written before are visible to it.
        self.producer
            .0
            .store(producer.wrapping_add(1), Ordering::Release);
    }

    /// NIC: copies out, in order, the entries from `*consumer` on that have
    /// crossed the interconnect (issued `latency` ns before `now`; all of
    /// them when `latency` is 0), `max` at most, appending `(addr, value)`
    /// to `out`, and hands their slots back. Returns how many.
    ///
    /// A producer more than `N` entries ahead of the consumer (or behind
    /// it) claims entries the queue cannot hold, which only hostile software
    /// publishes: then nothing is copied, the consumer moves to the
    /// producer (the queue is empty) and the result is `None`.
    #[inline]
    pub fn take(
        &self,
        consumer: &mut u32,
        max: usize,
        latency: u64,
        now: u64,
        out: &mut Vec<(u32, u32)>,
    ) -> Option<usize> {
        // SYNC POINT A (Acquire): pairs with software's Release store of
        // `producer` in `post`; the entries and any TX notification slots
        // or descriptors written before it are visible after this load.
        let prod = self.producer.0.load(Ordering::Acquire);
        let mut cons = *consumer;
        if prod.wrapping_sub(cons) as usize > N {
            // SYNC POINT B (Release): pairs with software's Acquire load of
            // `consumer` in `acquire_consumer`; nothing was read from the
            // entries it frees.
            self.consumer.0.store(prod, Ordering::Release);
            *consumer = prod;
            return None;
        }
        let mut n = 0;
        while cons != prod && n < max {
            let e = &self.entries[cons as usize & Self::MASK];
            if latency > 0 && e.issued_ns.load(Ordering::Relaxed).saturating_add(latency) > now {
                break; // still on its way over the interconnect
            }
            let w = e.word.load(Ordering::Relaxed);
            out.push(((w >> 32) as u32, w as u32));
            cons = cons.wrapping_add(1);
            n += 1;
        }
        if n > 0 {
            // SYNC POINT B (Release): pairs with software's Acquire load of
            // `consumer` in `acquire_consumer` before it reuses these
            // entries (they are copied out).
            self.consumer.0.store(cons, Ordering::Release);
            *consumer = cons;
        }
        Some(n)
    }
}

/// Where in an application's register file its wake block lies (a
/// [`crate::wake::Sleeper`]: the application waits on it for its pipes,
/// the NIC wakes it), in a page of its own after the posted-write queue.
pub const APP_WAKE_OFFSET: usize = size_of::<MmioQueue>().next_multiple_of(PAGE);

/// Bytes of an application's register file: its posted-write queue, then
/// its wake block ([`APP_WAKE_OFFSET`]).
pub const MMIO_FILE_LEN: usize = APP_WAKE_OFFSET + PAGE;

/// Bytes of a device's wake file: the engine's [`crate::wake::Sleeper`] at
/// its start, which every application maps to wake a parked engine.
pub const WAKE_FILE_LEN: usize = PAGE;

/// `signal` values of notifications.
pub mod signal {
    /// RX: slot empty / consumed. TX: completed (or never used).
    pub const EMPTY: u32 = 0;
    /// RX: a notification. TX: data to send.
    pub const DATA: u32 = 1;
    /// TX: a configuration notification.
    pub const CONFIG: u32 = 2;
}

/// An RX notification: "pipe `pipe_id` now ends at `tail`" (flits).
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct RxNotification {
    pub signal: AtomicU32,
    pub pipe_id: AtomicU32,
    pub tail: AtomicU32,
    // The unused fields are atomics too: the peer may write any byte of a
    // slot, and a `&RxNotification` over bytes another process writes is
    // sound only if every field is.
    _reserved: AtomicU32,
    /// CLOCK_MONOTONIC ns at which the notification reaches software (0
    /// unless the device emulates interconnect latency; software treats a
    /// notification from the future as not yet arrived).
    pub visible_ns: AtomicU64,
    _pad: [AtomicU64; 5],
}
#[cfg(not(loom))]
const _: () = assert!(size_of::<RxNotification>() == 64);

impl RxNotification {
    /// NIC: tells software that pipe `pipe_id` now ends at `tail`, visible
    /// to it at `visible_ns` (0: at once). The slot must be one software
    /// handed back with its last write of the ring's head register.
    #[inline]
    pub fn publish(&self, pipe_id: u32, tail: u32, visible_ns: u64) {
        self.pipe_id.store(pipe_id, Ordering::Relaxed);
        self.tail.store(tail, Ordering::Relaxed);
        self.visible_ns.store(visible_ns, Ordering::Relaxed);
        // SYNC POINT C (Release): pairs with software's Acquire load of
        // `signal` in `take`; the frame bytes up to `tail` and the fields
        // above are visible to it.
        self.signal.store(signal::DATA, Ordering::Release);
    }

    /// Software: takes the notification in this slot, `(pipe_id, tail)`,
    /// and empties the slot; `None` if there is none, or (with `now`, the
    /// current CLOCK_MONOTONIC ns, under an emulated interconnect) if it
    /// has not arrived yet. The slot goes back to the NIC with the next
    /// write of the ring's head register (SYNC POINT A orders this
    /// Relaxed clear before it).
    #[inline]
    pub fn take(&self, now: Option<u64>) -> Option<(u32, u32)> {
        // SYNC POINT C (Acquire): pairs with the NIC's Release store of
        // `signal` in `publish`; the pipe bytes up to `tail` are visible
        // after it.
        if self.signal.load(Ordering::Acquire) != signal::DATA {
            return None;
        }
        if let Some(now) = now {
            if self.visible_ns.load(Ordering::Relaxed) > now {
                return None; // still crossing the emulated interconnect
            }
        }
        let pid = self.pipe_id.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        self.signal.store(signal::EMPTY, Ordering::Relaxed);
        Some((pid, tail))
    }
}

/// A TX notification: data to send (`signal = DATA`), or a configuration
/// request (`signal = CONFIG`, `config_id` and `args`). The NIC completes it
/// by storing `signal = EMPTY`; with emulated interconnect latency it first
/// stores in `args[4]` the time (CLOCK_MONOTONIC ns) at which software may see
/// the completion.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct TxNotification {
    pub signal: AtomicU32,
    pub config_id: AtomicU32,
    /// Offset of the data in the application's DMA region.
    pub address: AtomicU64,
    /// Bytes to send (at most [`MAX_TX_LEN`]).
    pub length: AtomicU32,
    /// Port to transmit on.
    pub port: AtomicU32,
    pub args: [AtomicU64; 5],
}
#[cfg(not(loom))]
const _: () = assert!(size_of::<TxNotification>() == 64);

/// What a TX notification asks for, as the NIC reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxRequest {
    /// Send `length` bytes at `address` of the DMA region on `port`.
    Data {
        address: u64,
        length: u32,
        port: u32,
    },
    /// Configuration `id` with its arguments, about `port` where that
    /// matters.
    Config { id: u32, args: [u64; 5], port: u32 },
    /// A slot whose signal is neither (the value).
    Bad(u32),
}

impl TxNotification {
    /// Software: fills this slot with data to send. Relaxed: the write of
    /// the ring's TX tail register that follows publishes it (SYNC POINT
    /// A).
    #[inline]
    pub fn fill_data(&self, address: u64, length: u32, port: u32) {
        self.address.store(address, Ordering::Relaxed);
        self.length.store(length, Ordering::Relaxed);
        self.port.store(port, Ordering::Relaxed);
        self.signal.store(signal::DATA, Ordering::Relaxed);
    }

    /// Software: fills this slot with configuration `id` (its arguments
    /// in `args[..TX_STATUS_ARG]`; the status is set to
    /// [`config::status::PENDING`]); published as
    /// [`TxNotification::fill_data`].
    #[inline]
    pub fn fill_config(&self, id: u32, args: [u64; 5], port: u32) {
        self.config_id.store(id, Ordering::Relaxed);
        self.port.store(port, Ordering::Relaxed);
        for (a, v) in self.args.iter().zip(args) {
            a.store(v, Ordering::Relaxed);
        }
        self.args[TX_STATUS_ARG].store(config::status::PENDING, Ordering::Relaxed);
        self.signal.store(signal::CONFIG, Ordering::Relaxed);
    }

    /// NIC: completes a configuration notification with its answer
    /// (`config::status`), visible to software at `visible_ns`.
    #[inline]
    pub fn complete_config(&self, status: u64, visible_ns: Option<u64>) {
        // Published by the Release store of `signal` in `complete` (SYNC
        // POINT D).
        self.args[TX_STATUS_ARG].store(status, Ordering::Relaxed);
        self.complete(visible_ns);
    }

    /// Software: the NIC's answer to the configuration in this slot, once
    /// [`TxNotification::completed`] (SYNC POINT D, Acquire) said so.
    #[inline]
    pub fn config_status(&self) -> u64 {
        self.args[TX_STATUS_ARG].load(Ordering::Relaxed)
    }

    /// NIC: reads a slot between its TX head and the last TX tail software
    /// wrote (Relaxed: the tail's posted write, SYNC POINT A, made the slot
    /// visible before the NIC applied it).
    #[inline]
    pub fn read(&self) -> TxRequest {
        match self.signal.load(Ordering::Relaxed) {
            signal::DATA => TxRequest::Data {
                address: self.address.load(Ordering::Relaxed),
                length: self.length.load(Ordering::Relaxed),
                port: self.port.load(Ordering::Relaxed),
            },
            signal::CONFIG => TxRequest::Config {
                id: self.config_id.load(Ordering::Relaxed),
                args: std::array::from_fn(|i| self.args[i].load(Ordering::Relaxed)),
                port: self.port.load(Ordering::Relaxed),
            },
            other => TxRequest::Bad(other),
        }
    }

    /// NIC: completes the notification (it no longer reads its data),
    /// visible to software at `visible_ns` (`None`: at once).
    #[inline]
    pub fn complete(&self, visible_ns: Option<u64>) {
        if let Some(vis) = visible_ns {
            self.args[TX_VISIBLE_ARG].store(vis, Ordering::Relaxed);
        }
        // SYNC POINT D (Release): pairs with software's Acquire load of
        // `signal` in `completed`; the NIC no longer reads the data once
        // software sees EMPTY.
        self.signal.store(signal::EMPTY, Ordering::Release);
    }

    /// Software: whether the NIC has completed this slot (and, with `now`
    /// under an emulated interconnect, the completion has arrived); its
    /// data may then be reused.
    #[inline]
    pub fn completed(&self, now: Option<u64>) -> bool {
        // SYNC POINT D (Acquire): pairs with the NIC's Release store of
        // `signal = EMPTY` in `complete`; it has finished reading the data.
        if self.signal.load(Ordering::Acquire) != signal::EMPTY {
            return false;
        }
        match now {
            Some(now) => self.args[TX_VISIBLE_ARG].load(Ordering::Relaxed) <= now,
            None => true,
        }
    }
}

/// Bytes of one notification slot: RX and TX rings are arrays of
/// [`RxNotification`] and [`TxNotification`], both this size.
pub const NOTIF_SLOT: usize = size_of::<RxNotification>();
#[cfg(not(loom))]
const _: () = assert!(size_of::<TxNotification>() == NOTIF_SLOT);

/// Index in `TxNotification::args` of the completion's visibility time.
pub const TX_VISIBLE_ARG: usize = 4;

/// The argument of a configuration notification in which the NIC answers
/// ([`config::status`]).
pub const TX_STATUS_ARG: usize = 3;

/// A pipe's buffer offset is page aligned; the low 12 bits of the
/// `rx_mem_low` register carry the port the pipe receives from (bits 0..8)
/// and flags.
pub const PIPE_PORT_MASK: u32 = 0xff;
/// Flag in `rx_mem_low`: a *stream pipe*. The NIC appends only the UDP
/// payload of each frame, back to back with byte granularity, so a message
/// stream split over many frames is contiguous text in the pipe. Its head,
/// tail and notifications count bytes instead of flits.
pub const PIPE_STREAM: u32 = 0x100;
/// All the low bits of `rx_mem_low` that are not address.
pub const PIPE_LOW_BITS: u32 = 0xfff;

/// Largest TX notification length (1 MiB, as on the real NIC).
pub const MAX_TX_LEN: u32 = 1 << 20;

/// Configuration notification ids and their arguments.
pub mod config {
    /// Bind a flow to a pipe: `args[0] = dst_ip << 32 | src_ip`,
    /// `args[1] = dst_port << 32 | src_port << 16 | protocol`, `args[2]` = pipe id.
    pub const FLOW_BIND: u32 = 1;
    /// Timestamping of the notification's `port`: `args[0]` = enable,
    /// `args[1]` = byte offset (0..=60). Frames sent on the port carry the
    /// 32-bit send time (ns) there; frames received on it get the round-trip
    /// time (ns) written there instead.
    pub const TIMESTAMP: u32 = 2;
    /// Rate limit of the notification's `port`: `args[0]` = num flits every
    /// `args[1]` = den cycles of the 200 MHz clock (0/0: no limit).
    pub const RATE_LIMIT: u32 = 3;
    /// Fallback pipes of a port: `args[0]` = op, `args[1]` = one of the
    /// application's pipes (or queues), which names the port. Op 1 adds it
    /// to the port's fallback set, 2 removes it; 3 sets the port's policy
    /// to `args[2]` (0 hash, 1 round robin), which adds and removes leave
    /// alone.
    pub const FALLBACK: u32 = 4;
    /// Remove a flow binding: arguments as FLOW_BIND.
    pub const FLOW_UNBIND: u32 = 5;

    /// The NIC's answer to a configuration notification, which it stores
    /// in the slot's `args[TX_STATUS_ARG]` before completing it (the
    /// completion's Release store publishes it, SYNC POINT D). Software
    /// fills the slot with [`status::PENDING`] there; a data notification
    /// carries no status, so the data path pays nothing.
    ///
    /// [`TX_STATUS_ARG`]: super::TX_STATUS_ARG
    pub mod status {
        /// Not answered (what software writes; a NIC never completes a
        /// configuration with it).
        pub const PENDING: u64 = u64::MAX;
        /// Done.
        pub const APPLIED: u64 = 0;
        /// An argument out of range, an unknown configuration, or a pipe
        /// or queue that is not the application's own or not enabled.
        pub const BAD_ARGUMENT: u64 = 1;
        /// The flow table has no free slot for the rule's flow.
        pub const TABLE_FULL: u64 = 2;
        /// The application holds as many flow rules as one may.
        pub const QUOTA: u64 = 3;
        /// The rule belongs to another application.
        pub const NOT_OWNER: u64 = 4;
        /// No such rule to remove.
        pub const NOT_BOUND: u64 = 5;
    }

    pub const FALLBACK_ADD: u64 = 1;
    pub const FALLBACK_REMOVE: u64 = 2;
    pub const FALLBACK_POLICY: u64 = 3;
}

/// Steering targets: a pipe id, or `DESC_TARGET_BASE + queue` for a
/// descriptor queue of the packetized interface.
pub const DESC_TARGET_BASE: u32 = MAX_PIPES;

/// A 16 B descriptor of the packetized interface (ixgbe/E810-like), in one
/// of two formats.
///
/// RX, read format (software): `qw0` = buffer address (offset in the DMA
/// region), `qw1` = 0. RX, write-back format (NIC): `qw0` = the frame's
/// flow hash (`wire::hash_tuple` for IPv4, what RSS spreads queues by),
/// `qw1` = status bits (`RX_DD`, `RX_EOP`, `RX_ERR`) | length << 32.
/// Software posts a descriptor by writing `qw0`, then `qw1 = 0`, then rings
/// the RX tail doorbell (a posted register write: SYNC POINT A). The NIC
/// writes `qw0`, then `qw1` with Release (SYNC POINT E); software loads
/// `qw1` with Acquire and owns the buffer once it sees `RX_DD`.
///
/// TX (software): `qw0` = buffer address, `qw1` = length | command bits
/// (`TX_EOP`, `TX_RS`); the TX tail doorbell publishes it. The NIC writes
/// back `qw1 | TX_DD` with Release on descriptors with `TX_RS` only
/// (SYNC POINT F); software loads it with Acquire and then reclaims the
/// buffers of every descriptor up to that one.
#[repr(C, align(16))]
#[derive(Debug, Default)]
pub struct Descriptor {
    pub qw0: AtomicU64,
    pub qw1: AtomicU64,
}
#[cfg(not(loom))]
const _: () = assert!(size_of::<Descriptor>() == 16);

/// The steps of the descriptor rings' protocol (see [`Descriptor`]).
impl Descriptor {
    /// Software: posts this RX descriptor with the buffer at `buf`.
    /// Relaxed: the RX tail doorbell that follows publishes it (SYNC POINT
    /// A).
    #[inline]
    pub fn post_rx(&self, buf: u64) {
        self.qw0.store(buf, Ordering::Relaxed);
        self.qw1.store(0, Ordering::Relaxed);
    }

    /// NIC: the buffer of an RX descriptor the tail doorbell handed it.
    #[inline]
    pub fn rx_buffer(&self) -> u64 {
        self.qw0.load(Ordering::Relaxed)
    }

    /// NIC: hands the descriptor back holding a frame of `len` bytes
    /// (written into its buffer before) with the frame's flow hash.
    #[inline(always)]
    pub fn hand_back_rx(&self, len: usize, hash: u32) {
        self.qw0.store(u64::from(hash), Ordering::Relaxed);
        // SYNC POINT E (Release): pairs with software's Acquire load of
        // `qw1` in `rx_done`; the frame bytes and `qw0` are visible once DD
        // is.
        self.qw1.store(
            desc::RX_DD | desc::RX_EOP | (len as u64) << 32,
            Ordering::Release,
        );
    }

    /// NIC: hands the descriptor back refused (a bad buffer address).
    #[inline]
    pub fn refuse_rx(&self) {
        // SYNC POINT E (Release): pairs with software's Acquire load of
        // `qw1` in `rx_done`; it sees RX_ERR with DD and takes its buffer
        // back unread.
        self.qw1
            .store(desc::RX_DD | desc::RX_ERR, Ordering::Release);
    }

    /// Software: the write-back word of an RX descriptor the NIC has
    /// handed back (DD set), else `None`.
    #[inline]
    pub fn rx_done(&self) -> Option<u64> {
        // SYNC POINT E (Acquire): pairs with the NIC's Release store of
        // `qw1` in `hand_back_rx` / `refuse_rx`; the frame in the buffer is
        // visible once DD is set.
        let qw1 = self.qw1.load(Ordering::Acquire);
        (qw1 & desc::RX_DD != 0).then_some(qw1)
    }

    /// Software: the flow hash of an RX descriptor `rx_done` returned.
    #[inline]
    pub fn rx_hash(&self) -> u32 {
        self.qw0.load(Ordering::Relaxed) as u32
    }

    /// Software: posts this TX descriptor: the buffer at `buf`, `qw1` its
    /// length and command bits. Relaxed: the TX tail doorbell that follows
    /// publishes it (SYNC POINT A).
    #[inline]
    pub fn post_tx(&self, buf: u64, qw1: u64) {
        self.qw0.store(buf, Ordering::Relaxed);
        self.qw1.store(qw1, Ordering::Relaxed);
    }

    /// NIC: `(qw0, qw1)` of a TX descriptor the tail doorbell handed it.
    #[inline]
    pub fn read_tx(&self) -> (u64, u64) {
        (
            self.qw0.load(Ordering::Relaxed),
            self.qw1.load(Ordering::Relaxed),
        )
    }

    /// NIC: writes back a TX descriptor's `qw1` with `TX_DD` (and
    /// `TX_ERR` if refused) set: it has read every buffer up to this one.
    #[inline]
    pub fn write_back_tx(&self, qw1: u64) {
        // SYNC POINT F (Release): pairs with software's Acquire load of
        // `qw1` in `tx_done` before it reclaims buffers up to here.
        self.qw1.store(qw1, Ordering::Release);
    }

    /// Software: whether the NIC has written this TX descriptor back.
    #[inline]
    pub fn tx_done(&self) -> bool {
        // SYNC POINT F (Acquire): pairs with the NIC's Release store of
        // the write-back in `write_back_tx`; the NIC has read every buffer
        // up to this descriptor.
        self.qw1.load(Ordering::Acquire) & desc::TX_DD != 0
    }
}

/// Bytes of one descriptor slot of a descriptor ring.
pub const DESC_SLOT: usize = size_of::<Descriptor>();

/// Descriptor bits and sizes.
pub mod desc {
    /// RX write-back: descriptor done.
    pub const RX_DD: u64 = 1 << 0;
    /// RX write-back: end of packet.
    pub const RX_EOP: u64 = 1 << 1;
    /// RX write-back: the NIC refused the descriptor (bad buffer address);
    /// the buffer holds no frame.
    pub const RX_ERR: u64 = 1 << 7;
    /// TX: end of packet (frames must fit one descriptor).
    pub const TX_EOP: u64 = 1 << 24;
    /// TX: report status (write back `TX_DD`).
    pub const TX_RS: u64 = 1 << 27;
    /// TX write-back: descriptor done.
    pub const TX_DD: u64 = 1 << 32;
    /// TX write-back: the NIC refused the descriptor.
    pub const TX_ERR: u64 = 1 << 33;
    /// Length field mask (TX: bits 0..16; RX write-back: bits 32..48).
    pub const LEN_MASK: u64 = 0xffff;
    /// Packet buffer size (DPDK's mbuf data room).
    pub const BUF_SIZE: usize = 2048;
    /// Low bits of a descriptor ring's `*_mem_low` register: the port
    /// (bits 0..4) and log2 of the ring's entries (bits 4..9); ring addresses
    /// are page aligned.
    pub const PORT_BITS: u32 = 0xf;
    pub const LOG2_SHIFT: u32 = 4;
    pub const LOG2_MASK: u32 = 0x1f;
}

/// The first page of every DMA region is never a valid buffer, so address 0
/// means "disabled".
pub const DMA_RESERVED: usize = PAGE;

/// Bytes of a notification ring of `entries` slots.
#[inline]
pub const fn notif_ring_bytes(entries: u32) -> usize {
    entries as usize * NOTIF_SLOT
}

/// Where software places the notification rings of a handle whose rings
/// have `entries` slots: the RX ring right after the reserved page, the TX
/// ring right after it. Returns `(rx_ring, tx_ring)`; the rings end at
/// `tx_ring + notif_ring_bytes(entries)`.
#[inline]
pub const fn notif_rings(entries: u32) -> (usize, usize) {
    let rx_ring = DMA_RESERVED;
    (rx_ring, rx_ring + notif_ring_bytes(entries))
}

/// Entries of a ring from `head` up to `tail`: written by its producer and
/// not yet handed back. `mask` is the ring's size (a power of two) less
/// one; pipes count flits (stream pipes bytes), the other rings slots.
#[inline]
pub const fn ring_used(head: u32, tail: u32, mask: u32) -> u32 {
    tail.wrapping_sub(head) & mask
}

/// Entries of a ring its producer may still write at `tail`: one is always
/// kept free, so that a full ring is told from an empty one, and the tail
/// never reaches the head from behind.
#[inline]
pub const fn ring_free(head: u32, tail: u32, mask: u32) -> u32 {
    head.wrapping_sub(tail).wrapping_sub(1) & mask
}
