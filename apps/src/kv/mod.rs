//! A MICA-like key-value store (Lim et al., NSDI'14).
//!
//! # Design
//!
//! * **Partitioning (EREW).** Keys are split into partitions by key hash
//!   ([`partition_of`]); each core owns one [`Partition`] exclusively, so the
//!   datapath takes no locks. Clients send a request batch only to the core
//!   that owns its keys: the partition number is added to the server's base
//!   UDP port, which the NIC's flow steering maps to that core's queue or
//!   pipe. A request that reaches the wrong core is answered with
//!   [`Status::WrongPartition`].
//! * **Storage.** A lossy index of 15-slot buckets over a circular log; see
//!   [`store`] for the layout, the GET/SET/DELETE semantics and the two
//!   documented ways an item can be lost (log wrap, bucket overflow).
//! * **Wire format.** Batches of requests in one UDP datagram; see [`wire`]
//!   for the exact byte layout.
//! * **Server.** [`KvServer::handle`] turns a request frame into a response
//!   frame written into the caller's buffer (up to
//!   [`MAX_FRAME_LEN`] bytes). Responses are addressed back to the sender
//!   (MACs, addresses and ports swapped).
//! * **Client.** [`KvClient`] generates the paper's workload (8-byte keys
//!   and values, Zipf 0.99 popularity, 95% or 50% GET) as request frames and
//!   checks every response against what it asked.
//!
//! # Malformed input
//!
//! Nothing in a frame can make the server panic or allocate. Problems with
//! the frame as a whole (not IPv4/UDP, bad magic, bad kind, zero or more than
//! [`wire::MAX_BATCH`] messages, an output buffer too small) drop it and are
//! counted in [`ServerStats`]. A problem with one message is answered with
//! an error status; if its lengths run past the datagram, it is answered
//! with [`Status::Malformed`] and the rest of the batch, which cannot be
//! framed any more, is ignored.
//!
//! # Deviations from MICA
//!
//! * One partition per core, always exclusive (MICA also offers CREW).
//! * Buckets never chain to extra buckets: as in MICA's lossy (cache)
//!   mode a full bucket evicts an item, here always the oldest.
//! * The log is an ordinary array and items never straddle its end (the
//!   head skips to the start), which wastes at most one item's worth of
//!   bytes per pass instead of wrapping items around.
//! * The server checks that the key hash in a request is the hash of its
//!   key, so a buggy client cannot corrupt the index.
//! * Steering follows MICA's scheme (the client picks the server core by
//!   UDP destination port); the NIC's flow table, not a flow director,
//!   delivers each port to its core.
//! * Responses carry no UDP checksum by default
//!   ([`ServerConfig::udp_checksum`]): the paper offloads checksums to the
//!   NIC on both interfaces.

pub mod client;
pub mod store;
pub mod wire;

pub use client::{
    ClientStats, KvClient, ResponseError, ResponseSummary, WorkloadConfig, WorkloadError,
};
pub use store::{Partition, SetError, SetOutcome, StoreConfig, StoreConfigError, StoreStats};
pub use wire::{
    BatchError, BatchKind, BatchReader, BatchWriter, Message, MessageError, Op, Status,
};

use crate::hash::hash_bytes;
use crate::packet::{
    self, ParseError, UdpChecksum, UdpDatagram, MAX_FRAME_LEN, UDP_PAYLOAD_OFFSET,
};
use wire::{BATCH_HEADER_LEN, MESSAGE_HEADER_LEN};

const KEY_SEED: u64 = 0x6d69_6361_6b76_0001;

/// The hash clients put in requests and the store indexes by.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    hash_bytes(key, KEY_SEED)
}

/// The partition (of `partitions`) that owns keys with this hash.
#[inline]
pub fn partition_of(key_hash: u64, partitions: u16) -> u16 {
    if partitions <= 1 {
        // The common single-partition case, without a division.
        return 0;
    }
    ((key_hash >> 48) % u64::from(partitions)) as u16
}

/// Configuration of one server core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Sizes of this core's partition.
    pub store: StoreConfig,
    /// Which partition this core owns.
    pub partition: u16,
    /// How many partitions (cores) there are.
    pub partitions: u16,
    /// Whether responses carry a UDP checksum. Off by default: the paper
    /// offloads checksums to the NIC on both interfaces, and IPv4 allows
    /// a UDP checksum of 0.
    pub udp_checksum: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            store: StoreConfig::default(),
            partition: 0,
            partitions: 1,
            udp_checksum: false,
        }
    }
}

/// Why a request frame got no response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DropReason {
    /// Not an IPv4/UDP frame.
    #[error("not an IPv4/UDP frame: {0}")]
    NotUdp(ParseError),
    /// The batch header is unusable.
    #[error("bad batch: {0}")]
    BadBatch(BatchError),
    /// A batch of responses was sent to the server.
    #[error("batch holds responses, not requests")]
    NotRequests,
    /// The first message could not be framed, so there is nothing to
    /// answer.
    #[error("no message could be read")]
    NothingToAnswer,
    /// The caller's buffer cannot hold the response headers of this batch.
    #[error("response buffer too small")]
    OutputTooSmall,
}

/// Counters of one server core. Every request frame ends up either in
/// `responses` or in exactly one of the drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerStats {
    /// Request frames handled.
    pub frames: u64,
    /// Response frames produced.
    pub responses: u64,
    /// Requests answered (any status).
    pub requests: u64,
    /// GET requests.
    pub gets: u64,
    /// GETs that found their key.
    pub get_hits: u64,
    /// SET requests stored.
    pub sets: u64,
    /// DELETE requests.
    pub deletes: u64,
    /// DELETEs that found their key.
    pub delete_hits: u64,
    /// Requests answered with an error status (not Success or NotFound):
    /// the sum of the `error_*` counters.
    pub errors: u64,
    /// Requests answered [`Status::BadOp`].
    pub error_bad_op: u64,
    /// Requests answered [`Status::Malformed`].
    pub error_malformed: u64,
    /// Requests answered [`Status::WrongPartition`].
    pub error_wrong_partition: u64,
    /// Requests answered [`Status::TooLarge`].
    pub error_too_large: u64,
    /// Requests answered [`Status::NoRoom`].
    pub error_no_room: u64,
    /// Messages after a framing error, never answered.
    pub unframed_messages: u64,
    /// Frames dropped: not IPv4/UDP (fragments aside).
    pub drop_not_udp: u64,
    /// Frames dropped: IPv4 fragments (a client's datagram larger than the
    /// path's MTU arrives as several; the server does not reassemble).
    pub drop_fragment: u64,
    /// Frames dropped: bad batch header.
    pub drop_bad_batch: u64,
    /// Frames dropped: response batches.
    pub drop_not_requests: u64,
    /// Frames dropped: no message could be framed.
    pub drop_nothing_to_answer: u64,
    /// Frames dropped: response buffer too small.
    pub drop_output_too_small: u64,
}

impl ServerStats {
    /// All dropped frames.
    pub fn drops(&self) -> u64 {
        self.drop_not_udp
            + self.drop_fragment
            + self.drop_bad_batch
            + self.drop_not_requests
            + self.drop_nothing_to_answer
            + self.drop_output_too_small
    }

    fn count_drop(&mut self, reason: DropReason) {
        let c = match reason {
            DropReason::NotUdp(ParseError::Fragment) => &mut self.drop_fragment,
            DropReason::NotUdp(_) => &mut self.drop_not_udp,
            DropReason::BadBatch(_) => &mut self.drop_bad_batch,
            DropReason::NotRequests => &mut self.drop_not_requests,
            DropReason::NothingToAnswer => &mut self.drop_nothing_to_answer,
            DropReason::OutputTooSmall => &mut self.drop_output_too_small,
        };
        *c += 1;
    }
}

/// One server core: its partition and counters.
#[derive(Debug)]
pub struct KvServer {
    store: Partition,
    partition: u16,
    partitions: u16,
    udp_checksum: UdpChecksum,
    stats: ServerStats,
}

impl KvServer {
    /// Allocates this core's partition.
    pub fn new(config: &ServerConfig) -> Result<Self, StoreConfigError> {
        Ok(KvServer {
            store: Partition::new(&config.store)?,
            partition: config.partition,
            partitions: config.partitions.max(1),
            udp_checksum: if config.udp_checksum {
                UdpChecksum::Compute
            } else {
                UdpChecksum::Omit
            },
            stats: ServerStats::default(),
        })
    }

    /// This core's partition.
    pub fn store(&self) -> &Partition {
        &self.store
    }

    /// Counters so far.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Prefetches the index buckets of the requests in `request` (an
    /// Ethernet frame), to be handled soon: a driver calls this for a whole
    /// burst before handling its frames, as MICA does. It reads only the
    /// key hashes, where a well-formed IPv4/UDP request has them; on any
    /// other frame it prefetches harmless addresses or stops.
    #[inline]
    pub fn prefetch(&self, request: &[u8]) {
        for_each_key_hash(request, |h| self.store.prefetch(h));
    }

    /// Prefetches the log items the requests in `request` name, by their
    /// buckets: the second pass over a burst, after [`KvServer::prefetch`]
    /// of all of it (as MICA does), so that the buckets' loads have been
    /// overlapped and the items' loads are too.
    #[inline]
    pub fn prefetch_items(&self, request: &[u8]) {
        for_each_key_hash(request, |h| self.store.prefetch_item(h));
    }

    /// Executes the requests in `request` (an Ethernet frame) and writes the
    /// response frame into `response`, returning its length. Drops are
    /// counted in [`ServerStats`] and returned.
    pub fn handle(&mut self, request: &[u8], response: &mut [u8]) -> Result<usize, DropReason> {
        self.stats.frames += 1;
        let result = self.try_handle(request, response);
        match result {
            Ok(_) => self.stats.responses += 1,
            Err(reason) => self.stats.count_drop(reason),
        }
        result
    }

    fn try_handle(&mut self, request: &[u8], response: &mut [u8]) -> Result<usize, DropReason> {
        let datagram = UdpDatagram::parse(request).map_err(DropReason::NotUdp)?;
        let reader = BatchReader::new(datagram.payload).map_err(DropReason::BadBatch)?;
        if reader.kind() != BatchKind::Request {
            return Err(DropReason::NotRequests);
        }
        let total = reader.announced();
        let out_len = response.len().min(MAX_FRAME_LEN);
        if out_len < UDP_PAYLOAD_OFFSET + BATCH_HEADER_LEN + total * MESSAGE_HEADER_LEN {
            return Err(DropReason::OutputTooSmall);
        }
        let body = &mut response[UDP_PAYLOAD_OFFSET..out_len];
        let mut out =
            BatchWriter::new(body, BatchKind::Response).map_err(|_| DropReason::OutputTooSmall)?;
        for (i, item) in reader.enumerate() {
            // Keep room for a header for every request still to answer.
            let reserve = (total - i - 1) * MESSAGE_HEADER_LEN;
            match item {
                Ok(m) => self.execute(&m, &mut out, reserve),
                Err(e) => {
                    if let wire::MessageError::Overrun {
                        op,
                        key_hash,
                        opaque,
                    } = e
                    {
                        let reply = Reply {
                            op,
                            key_hash,
                            opaque,
                        };
                        answer(&mut self.stats, &mut out, reply, Status::Malformed, &[]);
                        self.stats.unframed_messages += (total - i - 1) as u64;
                    } else {
                        self.stats.unframed_messages += (total - i) as u64;
                    }
                    break;
                }
            }
        }
        if out.is_empty() {
            return Err(DropReason::NothingToAnswer);
        }
        let payload_len = out.len();
        packet::finish_udp_frame(
            response,
            &datagram.endpoints.reversed(),
            payload_len,
            self.udp_checksum,
        )
        .map_err(|_| DropReason::OutputTooSmall)
    }

    fn execute(&mut self, m: &Message<'_>, out: &mut BatchWriter<'_>, reserve: usize) {
        let reply = Reply {
            op: m.op,
            key_hash: m.key_hash,
            opaque: m.opaque,
        };
        let Some(op) = m.op() else {
            return answer(&mut self.stats, out, reply, Status::BadOp, &[]);
        };
        let malformed = m.key.is_empty()
            || m.key.len() > store::MAX_KEY_LEN
            || (op != Op::Set && !m.value.is_empty())
            || key_hash(m.key) != m.key_hash;
        if malformed {
            return answer(&mut self.stats, out, reply, Status::Malformed, &[]);
        }
        if partition_of(m.key_hash, self.partitions) != self.partition {
            return answer(&mut self.stats, out, reply, Status::WrongPartition, &[]);
        }
        let status = match op {
            Op::Get => {
                self.stats.gets += 1;
                let Some(value) = self.store.get(m.key, m.key_hash) else {
                    return answer(&mut self.stats, out, reply, Status::NotFound, &[]);
                };
                self.stats.get_hits += 1;
                if out.remaining() >= MESSAGE_HEADER_LEN + value.len() + reserve {
                    return answer(&mut self.stats, out, reply, Status::Success, value);
                }
                Status::NoRoom
            }
            Op::Set => match self.store.set(m.key, m.key_hash, m.value) {
                Ok(_) => {
                    self.stats.sets += 1;
                    Status::Success
                }
                Err(SetError::BadKey) => Status::Malformed,
                Err(SetError::TooLarge) => Status::TooLarge,
            },
            Op::Delete => {
                self.stats.deletes += 1;
                if self.store.delete(m.key, m.key_hash) {
                    self.stats.delete_hits += 1;
                    Status::Success
                } else {
                    Status::NotFound
                }
            }
        };
        answer(&mut self.stats, out, reply, status, &[]);
    }
}

/// The fields a response copies from its request.
#[derive(Clone, Copy)]
struct Reply {
    op: u8,
    key_hash: u64,
    opaque: u32,
}

/// Appends one response and counts it. Inlined: as a call, saving and
/// restoring registers cost about a third of it.
#[inline(always)]
fn answer(
    stats: &mut ServerStats,
    out: &mut BatchWriter<'_>,
    reply: Reply,
    status: Status,
    value: &[u8],
) {
    let pushed = out.push_reply(reply.op, status as u8, reply.key_hash, reply.opaque, value);
    // Room for every response header was checked before the batch was read
    // and is reserved while values are added, so this cannot fail.
    debug_assert!(pushed.is_ok());
    stats.requests += 1;
    let by_cause = match status {
        Status::Success | Status::NotFound => return,
        Status::BadOp => &mut stats.error_bad_op,
        Status::Malformed => &mut stats.error_malformed,
        Status::WrongPartition => &mut stats.error_wrong_partition,
        Status::TooLarge => &mut stats.error_too_large,
        Status::NoRoom => &mut stats.error_no_room,
    };
    *by_cause += 1;
    stats.errors += 1;
}

/// Calls `f` with the key hash of each request in `request` (an Ethernet
/// frame), where a well-formed IPv4/UDP request has them: the walk both
/// prefetch passes take. On any other frame it reads harmless hashes or
/// stops.
#[inline(always)]
fn for_each_key_hash(request: &[u8], mut f: impl FnMut(u64)) {
    let Some(&count) = request.get(UDP_PAYLOAD_OFFSET + 3) else {
        return;
    };
    let mut at = UDP_PAYLOAD_OFFSET + BATCH_HEADER_LEN;
    for _ in 0..usize::from(count).min(wire::MAX_BATCH) {
        let Some(h) = request.get(at..at + MESSAGE_HEADER_LEN) else {
            return;
        };
        let (key_hash, len) = wire::header_fields(h);
        f(key_hash);
        at += len;
    }
}

#[cfg(test)]
mod tests;
