//! What the pipe side ([`crate::device`]) and the queue side
//! ([`crate::packetized`]) both need, so that neither imports the other's
//! internals: the arguments of a flow rule's configuration notification, and
//! the packetized interface's state, which the device handle holds.

use enso_abi::wire::FiveTuple as FlowRule;

/// The configuration arguments that bind (or unbind) `r` to pipe or queue
/// `pipe`.
pub(crate) fn rule_args(r: &FlowRule, pipe: u32) -> [u64; 5] {
    [
        (r.dst_ip as u64) << 32 | r.src_ip as u64,
        (r.dst_port as u64) << 32 | (r.src_port as u64) << 16 | r.protocol as u64,
        pipe as u64,
        0,
        0,
    ]
}

/// Per-queue counters (software's view).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueStats {
    /// Frames received ([`crate::Device::rx_burst`]).
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames queued for sending ([`crate::Device::tx_burst`]).
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// RX descriptors not refilled for want of a free buffer.
    pub rx_nombuf: u64,
    /// Frames `tx_burst` could not queue (ring full).
    pub tx_full: u64,
    /// Descriptors the NIC marked as refused or wrote back with a length
    /// no buffer holds (RX), and buffers of another device (TX).
    pub errors: u64,
}

#[derive(Debug)]
pub(crate) struct QueueSw {
    pub(crate) id: u32,
    pub(crate) rx_ring: usize,
    pub(crate) rx_mask: u32,
    pub(crate) rx_next: u32,
    pub(crate) rx_tail: u32,
    pub(crate) rx_pending: u32,
    pub(crate) rx_bufs: Box<[u32]>,
    pub(crate) tx_ring: usize,
    pub(crate) tx_mask: u32,
    pub(crate) tx_tail: u32,
    pub(crate) tx_free: u32,
    pub(crate) tx_next_dd: u32,
    pub(crate) tx_bufs: Box<[u32]>,
    pub(crate) stats: QueueStats,
}

/// The buffer pool and queues of a device handle.
#[derive(Debug, Default)]
pub(crate) struct PktState {
    pub(crate) pool_off: usize,
    pub(crate) pool_len: u32,
    pub(crate) free: Vec<u32>,
    pub(crate) queues: Vec<QueueSw>,
    pub(crate) tag: u32,
}
