//! What the engine holds, below every room that works on it: [`Core`]
//! (everything but the ports) and the state it keeps per pipe, per run and
//! per descriptor queue. Each room adds its behaviour to `Core` in an
//! `impl Core` block of its own module.

use enso_abi::timestamp::Timestamping;
use pcie_model::PcieCounters;

use super::limiter::TokenBucket;
use super::shared::App;
use crate::clock::Clock;
use crate::counters::{AppCounters, PipeCounters, PipeWriteMode, QueueCounters};
use crate::steering::{Fallback, FlowTable};

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct PipeState {
    /// Offset of the buffer in the owner's region; 0 = disabled.
    pub(super) base: usize,
    pub(super) owner: u32,
    /// The port it receives from.
    pub(super) port: u16,
    /// A stream pipe (positions in bytes).
    pub(super) stream: bool,
    pub(super) head: u32,
    pub(super) tail: u32,
    pub(super) outstanding: bool,
    pub(super) pending_low: u32,
}

/// What had no room for a frame.
#[derive(Clone, Copy, Debug)]
pub(super) enum Full {
    Pipe,
    NotificationRing,
}

/// An event of the notification protocol, recorded when tracing is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A frame was written to a pipe.
    Frame {
        /// The pipe.
        pipe: u32,
    },
    /// The NIC wrote an RX notification.
    Notify {
        /// The pipe.
        pipe: u32,
        /// The tail it announced.
        tail: u32,
    },
    /// Software's head write reached the NIC.
    HeadWrite {
        /// The pipe.
        pipe: u32,
        /// The head written.
        head: u32,
    },
}

/// Everything but the ports, so the RX path can borrow it while a port's wire
/// produces frames.
#[derive(Debug)]
pub(super) struct Core {
    pub(super) pipes: Vec<PipeState>,
    pub(super) pipe_counters: Vec<PipeCounters>,
    pub(super) apps: Vec<Option<App>>,
    pub(super) flows: FlowTable,
    /// Fallback pipes of each port.
    pub(super) fallback: Vec<Fallback>,
    /// Timestamping, each application's own on each port, at
    /// [`Core::port_cfg`]`(slot, port)`: applied to the frames that
    /// application sends on the port and to the frames the port writes
    /// into its pipes and queues, never to another application's.
    pub(super) ts_offset: Vec<Option<Timestamping>>,
    /// TX rate limiters, each application's own on each port, indexed as
    /// `ts_offset`: they pace what that application sends.
    pub(super) limiter: Vec<Option<TokenBucket>>,
    /// Ports of the device (the stride of `ts_offset` and `limiter`).
    pub(super) nports: usize,
    pub(super) clock: Clock,
    pub(super) latency: u64,
    pub(super) per_packet: bool,
    /// Bytes ahead of a frame pipe's tail whose lines are evicted from this
    /// core's caches before a frame of at most [`evict::MAX_FLITS`] lines
    /// is written (0: off, or off for now: see [`Engine::ahead`]). See
    /// [`evict`].
    pub(super) evict_ahead: usize,
    /// Whether runs write frames of at most [`evict::MAX_FLITS`] lines into
    /// frame pipes with non-temporal stores (and so skip evicting ahead).
    pub(super) non_temporal: bool,
    /// Whether the lines ahead of short frames are prefetched for writing
    /// rather than evicted (with `evict_ahead` their distance).
    pub(super) prefetch_ahead: bool,
    /// The way short frames are written now (what the three above say).
    pub(super) pipe_writes: PipeWriteMode,
    /// Whether non-temporal stores were made since the last store fence.
    pub(super) unfenced: bool,
    /// Frames of at most [`evict::MAX_FLITS`] lines written into frame
    /// pipes, ever (the frames `evict_ahead` is for).
    pub(super) short_frames: u64,
    /// Whether the lines of TX data outside the application's RX pipes are
    /// evicted from this core's caches once transmitted. The engine reads
    /// them as a device's DMA read would, but unlike a device it keeps a
    /// shared copy, and the application's next write to the line (a TX
    /// pipe's, one lap later) must invalidate it first: with the vCPUs in
    /// different core complexes that held the KV server on Ensō at 125 ns
    /// per request against 68 with eviction (`bench apps --apps kv`: 0.77x
    /// the packetized side instead of 1.32-1.39x; no change with them
    /// close). Frames sent back in place from an RX pipe are left alone: the
    /// engine itself writes those lines next (see `evict_ahead`).
    pub(super) evict_tx: bool,
    pub(super) pipe_flits: u32,
    pub(super) pipe_size: usize,
    pub(super) ring_mask: u32,
    pub(super) detached_pipes: PipeCounters,
    pub(super) detached_apps: AppCounters,
    pub(super) dqs: Vec<DescQueue>,
    pub(super) dq_counters: Vec<QueueCounters>,
    pub(super) detached_queues: QueueCounters,
    pub(super) desc_fetch: u32,
    pub(super) desc_writeback: u32,
    /// The NIC's buffer for a frame read from a TX descriptor.
    pub(super) txbuf: Box<[u8]>,
    /// Posted writes copied out of a queue before they are applied (kept
    /// here, not on the stack, so no step pays for zeroing it).
    pub(super) mmio_batch: Vec<(u32, u32)>,
    pub(super) pcie: PcieCounters,
    /// log2 of the link's MPS, MRRS and RCB (powers of two on a validated
    /// link): the hot paths count TLPs with shifts.
    pub(super) shifts: LinkShifts,
    pub(super) frames: u64,
    /// Of `frames`, those written by runs (see [`Run`]).
    pub(super) run_frames: u64,
    /// The generator's open runs, and whether any may be open.
    pub(super) runs: [Run; RUN_SLOTS],
    pub(super) runs_open: bool,
    pub(super) trace: Option<Vec<TraceEvent>>,
    /// The current step's time and number (see [`Core::look_before_drop`]).
    pub(super) now: u64,
    pub(super) step_no: u64,
    /// Flits written into pipes and packet buffers, ever.
    pub(super) flits_in: u64,
}

/// Frames the generator sends to a target (a frame pipe or a descriptor
/// queue) it sent a frame to before in the same step, written without
/// deciding again for each what [`Core::deliver`] decided for the first:
/// the steering (a remembered decision still current), that the target is
/// enabled and its owner attached, and for a pipe that no notification is
/// due (one is outstanding and notifications are not per packet) and the
/// room left. The bytes, the tail or descriptor, and the PCIe cut stay per
/// frame; counters are added when the run closes. What the NIC does is
/// unchanged: the same bytes at the same places, the same counts and
/// notifications; the emulator saves the repeated decisions, on the
/// engine's core, which limits trials of cheap applications. Both
/// interfaces get runs, a few targets at a time (`RUN_SLOTS`, by target),
/// so frames spread over a few pipes or queues keep theirs.
///
/// A pipe's run holds its tail: the run must close before anything else
/// looks at the pipe. [`RxSink::frame`] closes a target's run before
/// delivering to it the whole way, [`Core::look_before_drop`] closes every
/// run before applying register writes, and the caller closes them all at
/// the end of the generator's turn.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    /// The steering target (`NONE`: no run open).
    pub(super) target: u32,
    /// Versions of the flow table and of the port's fallback the run was
    /// opened under (a frame's remembered steering must be for them).
    pub(super) flows_version: u64,
    pub(super) fallback_version: u64,
    /// A pipe's ring: its first byte in the engine's mapping of the
    /// owner's region (an address, so that `Core` stays `Send`; valid
    /// while the run is open: runs close before anything that could unmap
    /// or move it) and its offset in that region (the DMA address the
    /// PCIe model cuts into TLPs). Both 0 for a descriptor queue's run.
    pub(super) ring: usize,
    pub(super) base: usize,
    /// A pipe's tail, in flits.
    pub(super) tail: u32,
    /// Flits a pipe's run may still write before the end of the ring or the
    /// pipe's head, whichever comes first.
    pub(super) room: u32,
    pub(super) counts: RunCounts,
}

/// log2 of a validated link's boundaries (see [`pcie_model::tlp::split_count_shift`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct LinkShifts {
    pub(super) mps: u32,
    pub(super) mrrs: u32,
    pub(super) rcb: u32,
}

impl LinkShifts {
    pub(super) fn of(link: &pcie_model::LinkConfig) -> Self {
        debug_assert!(link.validate().is_ok(), "an unvalidated link: {link:?}");
        LinkShifts {
            mps: link.mps.trailing_zeros(),
            mrrs: link.mrrs.trailing_zeros(),
            rcb: link.rcb.trailing_zeros(),
        }
    }
}

/// Runs open at once, one per slot (`target % RUN_SLOTS`); a power of two.
pub(super) const RUN_SLOTS: usize = 4;

/// What a run wrote, added to the counters when it closes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RunCounts {
    pub(super) frames: u64,
    /// Of `frames`, those of at most [`evict::MAX_FLITS`] lines (see
    /// `evict_ahead`).
    pub(super) short: u64,
    pub(super) bytes: u64,
    /// Flits of the frames, and the bytes and TLPs of their DMA writes.
    pub(super) flits: u64,
    pub(super) dma_bytes: u64,
    pub(super) tlps: u64,
    /// A queue's coalesced RX descriptor write-backs: DMA writes, their
    /// bytes and TLPs.
    pub(super) wb_writes: u64,
    pub(super) wb_bytes: u64,
    pub(super) wb_tlps: u64,
}

impl Run {
    pub(super) const NONE: u32 = u32::MAX;
    pub(super) const CLOSED: Run = Run {
        target: Run::NONE,
        flows_version: 0,
        fallback_version: 0,
        ring: 0,
        base: 0,
        tail: 0,
        room: 0,
        counts: RunCounts {
            frames: 0,
            short: 0,
            bytes: 0,
            flits: 0,
            dma_bytes: 0,
            tlps: 0,
            wb_writes: 0,
            wb_bytes: 0,
            wb_tlps: 0,
        },
    };
}

/// NIC-side state of one descriptor queue pair.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct DescQueue {
    pub(super) owner: u32,
    pub(super) port: u16,
    /// Ring offsets in the owner's region (0: disabled) and index masks.
    pub(super) rx_ring: usize,
    pub(super) rx_mask: u32,
    pub(super) rx_head: u32,
    pub(super) rx_tail: u32,
    pub(super) rx_low: u32,
    pub(super) rx_wb_pending: u32,
    pub(super) rx_wb_first: u32,
    pub(super) tx_ring: usize,
    pub(super) tx_mask: u32,
    pub(super) tx_head: u32,
    pub(super) tx_tail: u32,
    pub(super) tx_low: u32,
}

impl DescQueue {
    /// TX descriptors software has published that are not yet transmitted.
    pub(super) fn tx_pending(&self) -> u32 {
        if self.tx_ring == 0 {
            0
        } else {
            self.tx_tail.wrapping_sub(self.tx_head) & self.tx_mask
        }
    }
}

impl Core {
    /// Where application `slot`'s timestamping and rate limit on `port`
    /// are kept in `ts_offset` and `limiter`.
    #[inline(always)]
    pub(super) fn port_cfg(&self, slot: usize, port: usize) -> usize {
        slot * self.nports + port
    }

    /// Clears application `slot`'s timestamping and rate limits (it
    /// attached or detached), making room for them first.
    pub(super) fn reset_port_cfg(&mut self, slot: usize) {
        let (from, to) = (slot * self.nports, (slot + 1) * self.nports);
        if self.ts_offset.len() < to {
            self.ts_offset.resize(to, None);
            self.limiter.resize(to, None);
        }
        self.ts_offset[from..to].fill(None);
        self.limiter[from..to].fill(None);
    }
}
