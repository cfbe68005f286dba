//! What an endpoint counted.

/// Frame, drop and connection counters of one endpoint. They only grow
/// (over reconnects too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames handed to `rx_burst`'s callback, and their bytes.
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Frames put on a ring by `tx_burst`, and their bytes.
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Received frames made of more than one buffer, reassembled and
    /// delivered (included in `rx_frames`; not a drop).
    pub rx_chained: u64,
    /// Sent frames split over more than one buffer (included in
    /// `tx_frames`; not a drop).
    pub tx_chained: u64,

    /// Drop: a descriptor the peer wrote failed a check (region index,
    /// offset + length within the region, length within the buffer, zero
    /// capacity). The connection is then torn down.
    pub bad_descriptor: u64,
    /// Protocol error: the peer moved a ring index impossibly (head more
    /// than the ring size ahead, tail past head, a chain longer than the
    /// ring). The connection is then torn down.
    pub ring_errors: u64,
    /// Drop: frames `tx_burst` did not take because the ring had no room
    /// (every frame after the first that did not fit, in that call).
    pub ring_full: u64,
    /// Drop: frames longer than `Config::max_frame`, offered to `tx_burst`
    /// or received (a reassembled chain).
    pub oversize: u64,
    /// Drop: frames offered to `tx_burst` while not connected, or on a
    /// queue the connection does not have.
    pub link_down: u64,

    /// Connections that completed the handshake.
    pub connects: u64,
    /// Connections that ended after completing the handshake, for any
    /// reason (peer's DISCONNECT, peer gone, local error, bad descriptor).
    pub disconnects: u64,
    /// Handshakes that failed: malformed, short or unexpected messages,
    /// wrong version / id / secret, bad regions or rings, wrong cookie,
    /// timeouts, and connections refused because one is already active.
    pub handshake_errors: u64,
}
