//! The load generator and response checker for the KV store.
//!
//! Keys are 8 bytes (the little-endian key id, `0..keys`), values are 8
//! bytes: the first four are a checksum of the key id, the last four a
//! sequence number of the SET. A GET hit is therefore checkable without
//! knowing which SET it observed: the value must belong to the key.
//!
//! Key ids are drawn from a Zipf distribution (rank = key id), so the most
//! popular keys are the low ids; their hashes spread them over partitions
//! and buckets. Each request is a GET with probability `get_ratio`, else a
//! SET. Requests are grouped per partition and a batch is sent when it
//! holds `batch` requests, to the server's base port plus the partition.
//!
//! Every request carries a sequence number as its opaque tag; the client
//! remembers the last `window` requests in a ring, so each response is
//! matched to its request (op, key hash, value) without allocating.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::wire::{
    self, BatchKind, BatchReader, BatchWriter, Message, Op, Status, MESSAGE_HEADER_LEN,
};
use super::{key_hash, partition_of};
use crate::hash::mix64;
use crate::packet::{
    self, EmitError, Endpoints, MacAddr, ParseError, UdpChecksum, UdpDatagram, MAX_FRAME_LEN,
    UDP_PAYLOAD_OFFSET,
};
use crate::zipf::{Zipf, ZipfError};

/// Key and value length of the workload.
pub const ITEM_BYTES: usize = 8;

/// Parameters of the workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkloadConfig {
    /// Number of distinct keys.
    pub keys: u64,
    /// Share of GETs (the paper: 0.95 or 0.5); the rest are SETs.
    pub get_ratio: f64,
    /// Zipf exponent of key popularity (the paper: 0.99).
    pub zipf_theta: f64,
    /// Requests per batch (1..=MAX_BATCH).
    pub batch: usize,
    /// Number of server partitions (cores).
    pub partitions: u16,
    /// Seed of the request sequence.
    pub seed: u64,
    /// Addresses: client to server; partition `p` is sent to
    /// `server.dst_port + p`.
    pub endpoints: Endpoints,
    /// Requests remembered for matching responses (rounded up to a power
    /// of two).
    pub window: usize,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            keys: 1 << 20,
            get_ratio: 0.95,
            zipf_theta: 0.99,
            batch: 4,
            partitions: 1,
            seed: 1,
            endpoints: Endpoints {
                src_mac: MacAddr([0x02, 0, 0, 0, 0x01, 0x01]),
                dst_mac: MacAddr([0x02, 0, 0, 0, 0x02, 0x01]),
                src_ip: std::net::Ipv4Addr::new(10, 0, 1, 1),
                dst_ip: std::net::Ipv4Addr::new(10, 0, 2, 1),
                src_port: 40_000,
                dst_port: 9_000,
            },
            window: 1 << 16,
        }
    }
}

/// The workload parameters are unusable.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    /// Bad key count or skew.
    #[error(transparent)]
    Zipf(#[from] ZipfError),
    /// `get_ratio` outside `0..=1`.
    #[error("GET ratio {0} is outside 0..=1")]
    BadGetRatio(f64),
    /// `batch` outside `1..=MAX_BATCH`.
    #[error("batch size {0} is outside 1..={max}", max = wire::MAX_BATCH)]
    BadBatch(usize),
    /// Zero partitions.
    #[error("at least one partition is needed")]
    NoPartitions,
    /// Zero-sized window.
    #[error("the response window must hold at least one request")]
    NoWindow,
    /// The partitions' UDP ports (base port + partition) run past 65535.
    #[error("{partitions} partitions from UDP port {base} need ports up to {last}, past 65535")]
    PortsPastEnd {
        /// The destination port of partition 0.
        base: u16,
        /// Partitions.
        partitions: u16,
        /// The last partition's port.
        last: u32,
    },
}

/// A response could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    /// Not an IPv4/UDP frame.
    #[error("not an IPv4/UDP frame: {0}")]
    NotUdp(ParseError),
    /// The batch header is unusable.
    #[error("bad batch: {0}")]
    BadBatch(wire::BatchError),
    /// The batch holds requests.
    #[error("batch holds requests, not responses")]
    NotResponses,
    /// A message could not be framed.
    #[error("bad message: {0}")]
    BadMessage(wire::MessageError),
}

/// What one response frame contained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseSummary {
    /// Responses matched to an outstanding request.
    pub matched: usize,
    /// GETs that returned a correct value.
    pub hits: usize,
    /// GETs that found nothing.
    pub misses: usize,
    /// Anything wrong: error statuses, unknown or mismatched responses,
    /// wrong values.
    pub problems: usize,
}

/// Counters of the client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClientStats {
    /// Request frames built.
    pub frames: u64,
    /// Requests sent.
    pub requests: u64,
    /// GET requests sent.
    pub gets: u64,
    /// SET requests sent.
    pub sets: u64,
    /// Responses matched to their request.
    pub responses: u64,
    /// GETs answered with the key's value.
    pub hits: u64,
    /// GETs answered "not found".
    pub misses: u64,
    /// SETs acknowledged.
    pub sets_acked: u64,
    /// Responses with an error status.
    pub error_statuses: u64,
    /// Responses matching no outstanding request (late, duplicate, forged).
    pub unknown: u64,
    /// Responses whose op or key hash differs from the request's.
    pub mismatched: u64,
    /// GET hits whose value does not belong to the key.
    pub wrong_values: u64,
    /// Requests whose window slot was reused before a response came.
    pub abandoned: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    key: u64,
    op: u8,
}

#[derive(Clone, Copy, Debug, Default)]
struct Outstanding {
    opaque: u32,
    key: u64,
    op: u8,
    live: bool,
}

/// Generates request frames and checks response frames.
#[derive(Debug)]
pub struct KvClient {
    cfg: WorkloadConfig,
    zipf: Zipf,
    rng: Xoshiro256PlusPlus,
    /// Requests waiting for their partition's batch to fill.
    pending: Vec<Vec<Pending>>,
    /// The last `window` requests (rounded up to a power of two), by
    /// opaque mod that size.
    outstanding: Vec<Outstanding>,
    /// `outstanding.len() - 1`.
    window_mask: usize,
    next_opaque: u32,
    next_set_seq: u32,
    preload_next: u64,
    stats: ClientStats,
}

/// The 8-byte key of key id `id`.
pub fn key_bytes(id: u64) -> [u8; ITEM_BYTES] {
    id.to_le_bytes()
}

/// The value a client writes for key `id` in its `seq`-th SET.
pub fn value_bytes(id: u64, seq: u32) -> [u8; ITEM_BYTES] {
    let mut v = [0u8; ITEM_BYTES];
    v[..4].copy_from_slice(&key_check(id).to_le_bytes());
    v[4..].copy_from_slice(&seq.to_le_bytes());
    v
}

fn key_check(id: u64) -> u32 {
    (mix64(id ^ 0x5EED_1234) >> 32) as u32
}

/// True if `value` is one a client could have written for key `id`.
pub fn value_belongs_to(id: u64, value: &[u8]) -> bool {
    value.len() == ITEM_BYTES && value[..4] == key_check(id).to_le_bytes()
}

impl KvClient {
    /// Checks the parameters and precomputes the key distribution (`O(keys)`).
    pub fn new(cfg: WorkloadConfig) -> Result<Self, WorkloadError> {
        let zipf = Zipf::new(cfg.keys, cfg.zipf_theta)?;
        if !(0.0..=1.0).contains(&cfg.get_ratio) {
            return Err(WorkloadError::BadGetRatio(cfg.get_ratio));
        }
        if cfg.batch == 0 || cfg.batch > wire::MAX_BATCH {
            return Err(WorkloadError::BadBatch(cfg.batch));
        }
        if cfg.partitions == 0 {
            return Err(WorkloadError::NoPartitions);
        }
        if cfg.window == 0 {
            return Err(WorkloadError::NoWindow);
        }
        let last = u32::from(cfg.endpoints.dst_port) + u32::from(cfg.partitions) - 1;
        if last > u32::from(u16::MAX) {
            return Err(WorkloadError::PortsPastEnd {
                base: cfg.endpoints.dst_port,
                partitions: cfg.partitions,
                last,
            });
        }
        Ok(KvClient {
            zipf,
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            pending: (0..cfg.partitions)
                .map(|_| Vec::with_capacity(cfg.batch))
                .collect(),
            outstanding: vec![Outstanding::default(); cfg.window.next_power_of_two()],
            window_mask: cfg.window.next_power_of_two() - 1,
            next_opaque: 0,
            next_set_seq: 0,
            preload_next: 0,
            stats: ClientStats::default(),
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &WorkloadConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// Requests sent and not yet answered (within the window).
    pub fn in_flight(&self) -> usize {
        self.outstanding.iter().filter(|o| o.live).count()
    }

    /// Writes the next frame of the preload phase (a SET of every key, in
    /// batches) into `buf`; `None` once every key was sent.
    pub fn next_preload_frame(&mut self, buf: &mut [u8]) -> Result<Option<usize>, EmitError> {
        while self.preload_next < self.cfg.keys {
            let id = self.preload_next;
            self.preload_next += 1;
            if let Some(p) = self.enqueue(id, Op::Set) {
                return self.emit(p, buf).map(Some);
            }
        }
        // Flush partial batches.
        match self.pending.iter().position(|p| !p.is_empty()) {
            Some(p) => self.emit(p as u16, buf).map(Some),
            None => Ok(None),
        }
    }

    /// Writes the next request frame of the workload into `buf` and returns
    /// its length.
    pub fn next_frame(&mut self, buf: &mut [u8]) -> Result<usize, EmitError> {
        loop {
            let id = self.zipf.sample(&mut self.rng);
            let op = if self.rng.gen::<f64>() < self.cfg.get_ratio {
                Op::Get
            } else {
                Op::Set
            };
            if let Some(p) = self.enqueue(id, op) {
                return self.emit(p, buf);
            }
        }
    }

    /// Queues a request; returns its partition if that batch is now full.
    fn enqueue(&mut self, id: u64, op: Op) -> Option<u16> {
        let p = partition_of(key_hash(&key_bytes(id)), self.cfg.partitions);
        let q = &mut self.pending[usize::from(p)];
        q.push(Pending {
            key: id,
            op: op as u8,
        });
        (q.len() == self.cfg.batch).then_some(p)
    }

    /// Builds the frame of partition `p`'s pending batch.
    fn emit(&mut self, p: u16, buf: &mut [u8]) -> Result<usize, EmitError> {
        let n = self.pending[usize::from(p)].len();
        let need =
            UDP_PAYLOAD_OFFSET + wire::BATCH_HEADER_LEN + n * (MESSAGE_HEADER_LEN + 2 * ITEM_BYTES);
        let limit = buf.len().min(MAX_FRAME_LEN);
        if need > limit {
            return Err(EmitError::BufferTooSmall {
                needed: need,
                available: buf.len(),
            });
        }
        let mut w = BatchWriter::new(&mut buf[UDP_PAYLOAD_OFFSET..limit], BatchKind::Request)
            .expect("room checked above");
        for i in 0..n {
            let Pending { key: id, op } = self.pending[usize::from(p)][i];
            let key = key_bytes(id);
            let value;
            let value_slice: &[u8] = if op == Op::Set as u8 {
                value = value_bytes(id, self.next_set_seq);
                self.next_set_seq = self.next_set_seq.wrapping_add(1);
                self.stats.sets += 1;
                &value
            } else {
                self.stats.gets += 1;
                &[]
            };
            let opaque = self.next_opaque;
            self.next_opaque = self.next_opaque.wrapping_add(1);
            let slot = &mut self.outstanding[opaque as usize & self.window_mask];
            if slot.live {
                self.stats.abandoned += 1;
            }
            *slot = Outstanding {
                opaque,
                key: id,
                op,
                live: true,
            };
            w.push(&Message {
                op,
                status: 0,
                key_hash: key_hash(&key),
                opaque,
                key: &key,
                value: value_slice,
            })
            .expect("room checked above");
        }
        self.pending[usize::from(p)].clear();
        let payload_len = w.len();
        let mut ep = self.cfg.endpoints;
        // Within u16: checked in `new`.
        ep.dst_port += p;
        // No UDP checksum, as on the server's responses: the paper offloads
        // checksums to the NIC on both interfaces.
        let len = packet::finish_udp_frame(buf, &ep, payload_len, UdpChecksum::Omit)?;
        self.stats.frames += 1;
        self.stats.requests += n as u64;
        Ok(len)
    }

    /// Matches the responses in `frame` to their requests and checks them.
    pub fn check_response(&mut self, frame: &[u8]) -> Result<ResponseSummary, ResponseError> {
        let datagram = UdpDatagram::parse(frame).map_err(ResponseError::NotUdp)?;
        let reader = BatchReader::new(datagram.payload).map_err(ResponseError::BadBatch)?;
        if reader.kind() != BatchKind::Response {
            return Err(ResponseError::NotResponses);
        }
        let mut summary = ResponseSummary::default();
        for m in reader {
            let m = m.map_err(ResponseError::BadMessage)?;
            let slot = &mut self.outstanding[m.opaque as usize & self.window_mask];
            if !slot.live || slot.opaque != m.opaque {
                self.stats.unknown += 1;
                summary.problems += 1;
                continue;
            }
            slot.live = false;
            let (id, op) = (slot.key, slot.op);
            summary.matched += 1;
            self.stats.responses += 1;
            if m.op != op || m.key_hash != key_hash(&key_bytes(id)) {
                self.stats.mismatched += 1;
                summary.problems += 1;
                continue;
            }
            match (m.op(), m.status()) {
                (Some(Op::Get), Some(Status::Success)) => {
                    if value_belongs_to(id, m.value) {
                        self.stats.hits += 1;
                        summary.hits += 1;
                    } else {
                        self.stats.wrong_values += 1;
                        summary.problems += 1;
                    }
                }
                (Some(Op::Get), Some(Status::NotFound)) => {
                    self.stats.misses += 1;
                    summary.misses += 1;
                }
                (Some(Op::Set), Some(Status::Success)) => self.stats.sets_acked += 1,
                _ => {
                    self.stats.error_statuses += 1;
                    summary.problems += 1;
                }
            }
        }
        Ok(summary)
    }
}
