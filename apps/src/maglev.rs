//! Maglev load balancing (Eisenbud et al., NSDI'16).
//!
//! # Design
//!
//! * [`MaglevTable`] is the lookup table of the paper. Its size `M` is prime
//!   ([`DEFAULT_TABLE_SIZE`] = 65537). Backend `i` prefers the slots
//!   `(offset_i + j * skip_i) mod M` for `j = 0, 1, ...`, with
//!   `offset_i = h1(name_i) mod M` and `skip_i = h2(name_i) mod (M - 1) + 1`,
//!   where `h1` and `h2` are two differently seeded hashes of the backend's
//!   name. Because `M` is prime and `1 <= skip < M`, each preference list is
//!   a permutation of all slots. Backends take turns claiming their next
//!   unclaimed preferred slot until all `M` slots are claimed, so every
//!   backend owns `floor(M/N)` or `ceil(M/N)` slots. Preferences are
//!   computed on the fly, so building needs `O(N)` memory besides the table.
//! * A packet's backend is `table[hash(5-tuple) mod M]` (the 64-bit hash
//!   folded to 32 bits, so that the remainder is computed with a multiply
//!   instead of a division).
//! * [`ConnectionTable`] is the per-core connection cache: fixed capacity,
//!   4-way set associative, no allocation after construction. A flow that
//!   is in it keeps its backend when the backend set changes (as long as
//!   that backend is still in the set).
//! * [`BackendPool`] (backends + table) is immutable and can be shared by
//!   all cores through an [`Arc`]; each core runs its own [`Maglev`] with its
//!   own connection table, so the datapath shares nothing writable.
//! * [`Maglev::process`] rewrites the frame toward the chosen backend (the
//!   destination MAC and IPv4 address, checksums patched) and asks for it to
//!   be forwarded.
//!
//! # Deviations from the paper's system
//!
//! * Forwarding rewrites the destination address in place instead of
//!   encapsulating the packet in GRE toward the backend: the frame keeps its
//!   size, as in the Ensō evaluation's 64 B experiments.
//! * No weights, health checking or control plane; backends come from a list
//!   ([`parse_backends`], [`load_backends`]).
//! * When the backend set changes, cached flows whose backend was removed are
//!   forgotten (they are hashed again through the new table); the paper keeps
//!   them only while the backend stays healthy, which amounts to the same.
//! * A full connection-table set evicts entries round-robin rather than by
//!   age or connection state (a SYN flood simply cycles the table, as it
//!   does in the paper's design).
//! * Only IPv4 TCP/UDP non-fragments are balanced; everything else is
//!   dropped and counted.

use std::collections::HashMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use crate::hash::{hash_bytes, mix64};
use crate::packet::{self, tcp_flags, EmitError, Endpoints, FiveTuple, MacAddr, ParseError};
use crate::Verdict;
use enso::app::PacketHandler;

/// The paper's table size (a prime).
pub const DEFAULT_TABLE_SIZE: usize = 65_537;
/// Default number of connection-table entries per core.
pub const DEFAULT_CONNECTION_CAPACITY: usize = 1 << 16;
/// Largest lookup table accepted: 2^28 slots of 4 bytes (1 GiB), built
/// slot by slot.
pub const MAX_TABLE_SIZE: usize = 1 << 28;
/// Most connection-table entries accepted per core: 2^26 entries of 20
/// bytes (1.25 GiB), allocated up front.
pub const MAX_CONNECTION_CAPACITY: usize = 1 << 26;

const OFFSET_SEED: u64 = 0x6d61_676c_6576_0001;
const SKIP_SEED: u64 = 0x6d61_676c_6576_0002;
const TUPLE_SEED: u64 = 0x6d61_676c_6576_0003;

/// One backend server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Backend {
    /// Name; it alone decides the backend's preferences in the table.
    pub name: String,
    /// Address the traffic is rewritten to.
    pub ip: Ipv4Addr,
    /// MAC address the traffic is sent to.
    pub mac: MacAddr,
}

impl Backend {
    /// A backend whose MAC is derived from its address
    /// ([`MacAddr::from_ipv4`]).
    pub fn new(name: impl Into<String>, ip: Ipv4Addr) -> Self {
        Backend {
            name: name.into(),
            ip,
            mac: MacAddr::from_ipv4(ip),
        }
    }
}

/// Why a backend list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BackendsError {
    /// The file could not be read.
    #[error("cannot read backend list: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not `name ip [mac]`.
    #[error("line {line}: {why} (expected `name ipv4 [mac]`), got {text:?}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        why: &'static str,
        /// The offending line.
        text: String,
    },
    /// Two lines give the same name (they would get the same preferences).
    #[error("line {line}: duplicate backend name {name:?}")]
    DuplicateName {
        /// 1-based line number of the second occurrence.
        line: usize,
        /// The repeated name.
        name: String,
    },
}

/// Parses a backend list: one backend per line, `name ip` or `name ip mac`,
/// separated by whitespace. Blank lines and `#` comments are ignored.
pub fn parse_backends(text: &str) -> Result<Vec<Backend>, BackendsError> {
    let mut out = Vec::new();
    let mut seen = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why| BackendsError::BadLine {
            line: i + 1,
            why,
            text: raw.to_string(),
        };
        let mut fields = line.split_whitespace();
        let (Some(name), Some(ip)) = (fields.next(), fields.next()) else {
            return Err(bad("no address"));
        };
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad("not an IPv4 address"))?;
        let mut backend = Backend::new(name, ip);
        if let Some(mac) = fields.next() {
            backend.mac = mac.parse().map_err(|_| bad("not a MAC address"))?;
        }
        if fields.next().is_some() {
            return Err(bad("more than three fields"));
        }
        if seen.insert(name.to_string(), ()).is_some() {
            return Err(BackendsError::DuplicateName {
                line: i + 1,
                name: name.to_string(),
            });
        }
        out.push(backend);
    }
    Ok(out)
}

/// Reads a backend list from a file (format of [`parse_backends`]).
pub fn load_backends(path: &Path) -> Result<Vec<Backend>, BackendsError> {
    parse_backends(&std::fs::read_to_string(path)?)
}

/// Why a lookup table or a connection table could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The table size must be a prime (so every skip visits every slot).
    #[error("table size {0} is not a prime")]
    SizeNotPrime(usize),
    /// The table size is above [`MAX_TABLE_SIZE`].
    #[error("table size {0} is above the maximum of {MAX_TABLE_SIZE} (1 GiB of slots)")]
    SizeTooLarge(usize),
    /// There must be at least one backend.
    #[error("no backends")]
    NoBackends,
    /// The connection table would have more than
    /// [`MAX_CONNECTION_CAPACITY`] entries.
    #[error(
        "connection table of {0} entries is above the maximum of {MAX_CONNECTION_CAPACITY} (1.25 GiB)"
    )]
    TooManyConnections(usize),
}

/// The Maglev lookup table: slot -> backend index.
#[derive(Clone)]
pub struct MaglevTable {
    slots: Vec<u32>,
    backends: usize,
    /// `ceil(2^64 / M)`, for computing `x mod M` without a division.
    fastmod: u64,
}

impl fmt::Debug for MaglevTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaglevTable")
            .field("size", &self.slots.len())
            .field("backends", &self.backends)
            .finish()
    }
}

impl MaglevTable {
    /// Populates a table of prime `size` for backends with these names
    /// (backend `i` is `names[i]`).
    pub fn build<S: AsRef<str>>(names: &[S], size: usize) -> Result<Self, TableError> {
        // Bounded first: a primality test of a huge size would take long.
        // The bound also keeps slots and backend indices within 32 bits.
        if size > MAX_TABLE_SIZE {
            return Err(TableError::SizeTooLarge(size));
        }
        if !is_prime(size) {
            return Err(TableError::SizeNotPrime(size));
        }
        if names.is_empty() {
            return Err(TableError::NoBackends);
        }
        let m = size as u64;
        // (offset, skip, next preference index) of each backend.
        let mut cursors: Vec<(u64, u64, u64)> = names
            .iter()
            .map(|n| {
                let name = n.as_ref().as_bytes();
                let offset = hash_bytes(name, OFFSET_SEED) % m;
                let skip = hash_bytes(name, SKIP_SEED) % (m - 1) + 1;
                (offset, skip, 0)
            })
            .collect();
        const EMPTY: u32 = u32::MAX;
        let mut slots = vec![EMPTY; size];
        let mut filled = 0usize;
        'fill: loop {
            for (i, (offset, skip, next)) in cursors.iter_mut().enumerate() {
                // The next unclaimed slot in this backend's preference order;
                // one exists because the table is not full yet.
                let mut slot = ((*offset + *next * *skip) % m) as usize;
                while slots[slot] != EMPTY {
                    *next += 1;
                    slot = ((*offset + *next * *skip) % m) as usize;
                }
                slots[slot] = i as u32;
                *next += 1;
                filled += 1;
                if filled == size {
                    break 'fill;
                }
            }
        }
        Ok(MaglevTable {
            slots,
            backends: names.len(),
            fastmod: (u64::MAX / m).wrapping_add(1),
        })
    }

    /// Number of slots (`M`).
    pub fn size(&self) -> usize {
        self.slots.len()
    }

    /// Number of backends the table was built for.
    pub fn backend_count(&self) -> usize {
        self.backends
    }

    /// The slot of a flow hash: the hash folded to 32 bits, mod `M`.
    #[inline]
    pub fn slot_of(&self, hash: u64) -> usize {
        let folded = u64::from((hash ^ (hash >> 32)) as u32);
        // Lemire's fastmod: exact `folded % M` for 32-bit `folded` and `M`.
        let low = self.fastmod.wrapping_mul(folded);
        ((u128::from(low) * self.slots.len() as u128) >> 64) as usize
    }

    /// The backend index for a flow hash.
    #[inline]
    pub fn lookup(&self, hash: u64) -> u32 {
        self.slots[self.slot_of(hash)]
    }

    /// Every slot's backend index.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// How many slots each backend owns.
    pub fn slots_per_backend(&self) -> Vec<usize> {
        let mut counts = vec![0usize; self.backends];
        for &b in &self.slots {
            counts[b as usize] += 1;
        }
        counts
    }
}

/// True if `n` is prime (trial division; tables are built rarely).
pub fn is_prime(n: usize) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2usize;
    // `d <= n / d` rather than `d * d <= n`, which overflows near usize::MAX.
    while d <= n / d {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

/// A backend set and its lookup table, immutable once built; share it
/// between cores with an [`Arc`].
#[derive(Clone, Debug)]
pub struct BackendPool {
    backends: Vec<Backend>,
    table: MaglevTable,
}

impl BackendPool {
    /// Builds the table of prime `table_size` for `backends`.
    pub fn new(backends: Vec<Backend>, table_size: usize) -> Result<Self, TableError> {
        let names: Vec<&str> = backends.iter().map(|b| b.name.as_str()).collect();
        let table = MaglevTable::build(&names, table_size)?;
        Ok(BackendPool { backends, table })
    }

    /// The backends, in table-index order.
    pub fn backends(&self) -> &[Backend] {
        &self.backends
    }

    /// The lookup table.
    pub fn table(&self) -> &MaglevTable {
        &self.table
    }
}

const WAYS: usize = 4;
const NO_BACKEND: u32 = u32::MAX;

/// One cached flow. Compact (20 bytes) so a 4-way set spans little more
/// than one cache line.
#[derive(Clone, Copy, Debug)]
struct ConnEntry {
    src: u32,
    dst: u32,
    ports: u32,
    backend: u32,
    protocol: u8,
}

impl ConnEntry {
    const EMPTY: ConnEntry = ConnEntry {
        src: 0,
        dst: 0,
        ports: 0,
        backend: NO_BACKEND,
        protocol: 0,
    };

    fn matches(&self, t: &FiveTuple) -> bool {
        self.backend != NO_BACKEND
            && self.src == u32::from(t.src_ip)
            && self.dst == u32::from(t.dst_ip)
            && self.ports == ports(t)
            && self.protocol == t.protocol
    }
}

fn ports(t: &FiveTuple) -> u32 {
    (u32::from(t.src_port) << 16) | u32::from(t.dst_port)
}

/// A per-core connection cache: flow -> backend index, fixed capacity,
/// 4-way set associative with round-robin replacement within a set.
#[derive(Clone)]
pub struct ConnectionTable {
    entries: Vec<ConnEntry>,
    set_mask: usize,
    victim: usize,
    len: usize,
}

impl fmt::Debug for ConnectionTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionTable")
            .field("capacity", &self.entries.len())
            .field("len", &self.len)
            .finish()
    }
}

/// What [`ConnectionTable::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The flow took a free entry.
    Inserted,
    /// The flow was already cached; its backend was replaced.
    Updated,
    /// The set was full; another flow was evicted.
    Evicted,
}

impl ConnectionTable {
    /// A table with room for at least `capacity` flows (rounded up to a
    /// power of two, at least one set of 4), at most
    /// [`MAX_CONNECTION_CAPACITY`].
    pub fn new(capacity: usize) -> Result<Self, TableError> {
        // MAX_CONNECTION_CAPACITY is a power of two (and a multiple of
        // WAYS), so rounding up stays within it.
        if capacity > MAX_CONNECTION_CAPACITY {
            return Err(TableError::TooManyConnections(capacity));
        }
        let sets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        Ok(ConnectionTable {
            entries: vec![ConnEntry::EMPTY; sets * WAYS],
            set_mask: sets - 1,
            victim: 0,
            len: 0,
        })
    }

    /// Number of entries.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Number of cached flows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no flow is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn set(&self, hash: u64) -> usize {
        // The high bits: the low bits of the same hash pick Maglev slots.
        ((hash >> 32) as usize & self.set_mask) * WAYS
    }

    /// The cached backend of flow `t` whose hash is `hash`.
    #[inline]
    pub fn get(&self, t: &FiveTuple, hash: u64) -> Option<u32> {
        let base = self.set(hash);
        self.entries[base..base + WAYS]
            .iter()
            .find(|e| e.matches(t))
            .map(|e| e.backend)
    }

    /// Caches `backend` for flow `t` whose hash is `hash`.
    pub fn insert(&mut self, t: &FiveTuple, hash: u64, backend: u32) -> InsertOutcome {
        let base = self.set(hash);
        let set = &mut self.entries[base..base + WAYS];
        let new = ConnEntry {
            src: u32::from(t.src_ip),
            dst: u32::from(t.dst_ip),
            ports: ports(t),
            backend,
            protocol: t.protocol,
        };
        if let Some(e) = set.iter_mut().find(|e| e.matches(t)) {
            e.backend = backend;
            return InsertOutcome::Updated;
        }
        if let Some(e) = set.iter_mut().find(|e| e.backend == NO_BACKEND) {
            *e = new;
            self.len += 1;
            return InsertOutcome::Inserted;
        }
        self.victim = (self.victim + 1) % WAYS;
        set[self.victim] = new;
        InsertOutcome::Evicted
    }

    /// Rewrites every cached backend index with `remap`; entries for which
    /// it returns `None` are dropped. Used when the backend set changes.
    pub fn remap(&mut self, mut remap: impl FnMut(u32) -> Option<u32>) {
        for e in &mut self.entries {
            if e.backend == NO_BACKEND {
                continue;
            }
            match remap(e.backend) {
                Some(b) => e.backend = b,
                None => {
                    *e = ConnEntry::EMPTY;
                    self.len -= 1;
                }
            }
        }
    }

    /// Forgets every flow.
    pub fn clear(&mut self) {
        self.entries.fill(ConnEntry::EMPTY);
        self.len = 0;
    }
}

/// Counters of one [`Maglev`] instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MaglevStats {
    /// Frames rewritten and forwarded.
    pub forwarded: u64,
    /// Frames dropped because they were not IPv4 TCP/UDP non-fragments, or
    /// were malformed.
    pub dropped: u64,
    /// Flows found in the connection table.
    pub connection_hits: u64,
    /// Flows looked up in the Maglev table (and then cached).
    pub connection_misses: u64,
    /// Cached flows evicted to make room for new ones.
    pub connection_evictions: u64,
}

/// Configuration of a [`Maglev`] instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaglevConfig {
    /// Prime lookup-table size `M`.
    pub table_size: usize,
    /// Connection-table entries per core.
    pub connection_capacity: usize,
}

impl Default for MaglevConfig {
    fn default() -> Self {
        MaglevConfig {
            table_size: DEFAULT_TABLE_SIZE,
            connection_capacity: DEFAULT_CONNECTION_CAPACITY,
        }
    }
}

/// One core's load balancer: a shared [`BackendPool`] and a private
/// [`ConnectionTable`].
#[derive(Clone, Debug)]
pub struct Maglev {
    pool: Arc<BackendPool>,
    connections: ConnectionTable,
    stats: MaglevStats,
}

impl Maglev {
    /// A balancer over `backends` with its own table.
    pub fn new(backends: Vec<Backend>, config: &MaglevConfig) -> Result<Self, TableError> {
        // The cheap check first: no table is built for a balancer whose
        // connection table would be refused.
        if config.connection_capacity > MAX_CONNECTION_CAPACITY {
            return Err(TableError::TooManyConnections(config.connection_capacity));
        }
        let pool = Arc::new(BackendPool::new(backends, config.table_size)?);
        Self::with_pool(pool, config.connection_capacity)
    }

    /// A balancer sharing `pool` with other cores; `connection_capacity` as
    /// in [`ConnectionTable::new`].
    pub fn with_pool(
        pool: Arc<BackendPool>,
        connection_capacity: usize,
    ) -> Result<Self, TableError> {
        Ok(Maglev {
            pool,
            connections: ConnectionTable::new(connection_capacity)?,
            stats: MaglevStats::default(),
        })
    }

    /// The current backend set and table.
    pub fn pool(&self) -> &Arc<BackendPool> {
        &self.pool
    }

    /// Switches to a new backend set. Cached flows keep their backend if it
    /// is still in the new set (matched by name) and are forgotten if not.
    pub fn set_pool(&mut self, pool: Arc<BackendPool>) {
        let by_name: HashMap<&str, u32> = pool
            .backends()
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.as_str(), i as u32))
            .collect();
        let old = &self.pool;
        self.connections.remap(|b| {
            by_name
                .get(old.backends()[b as usize].name.as_str())
                .copied()
        });
        self.pool = pool;
    }

    /// The connection table.
    pub fn connections(&self) -> &ConnectionTable {
        &self.connections
    }

    /// Counters so far.
    pub fn stats(&self) -> &MaglevStats {
        &self.stats
    }

    /// The hash Maglev uses for a flow.
    #[inline]
    pub fn flow_hash(t: &FiveTuple) -> u64 {
        t.hash(TUPLE_SEED)
    }

    /// The backend index for flow `t`: the cached one if any, otherwise the
    /// table's choice, which is then cached.
    #[inline]
    pub fn pick(&mut self, t: &FiveTuple) -> u32 {
        let hash = Self::flow_hash(t);
        if let Some(b) = self.connections.get(t, hash) {
            self.stats.connection_hits += 1;
            return b;
        }
        self.stats.connection_misses += 1;
        let b = self.pool.table.lookup(hash);
        if self.connections.insert(t, hash, b) == InsertOutcome::Evicted {
            self.stats.connection_evictions += 1;
        }
        b
    }

    /// Balances one received frame: picks its backend and rewrites the
    /// frame toward it ([`Verdict::Forward`]), or drops it
    /// ([`Verdict::Drop`]) if it is not an IPv4 TCP/UDP non-fragment.
    #[inline]
    pub fn process(&mut self, frame: &mut [u8]) -> Verdict {
        match self.try_process(frame) {
            Ok(()) => {
                self.stats.forwarded += 1;
                Verdict::Forward
            }
            Err(_) => {
                self.stats.dropped += 1;
                Verdict::Drop
            }
        }
    }

    #[inline]
    fn try_process(&mut self, frame: &mut [u8]) -> Result<(), ParseError> {
        packet::forward_by_tuple(frame, |t| {
            let b = self.pick(t) as usize;
            let backend = &self.pool.backends[b];
            (backend.mac, backend.ip)
        })
    }
}

/// The balancer on either interface: `enso::EnsoDriver` forwards the
/// rewritten frame in place out of the port it came from,
/// `enso::PacketizedDriver` sends the same buffer back on its queue.
impl PacketHandler for Maglev {
    #[inline]
    fn handle(&mut self, frame: &mut [u8]) -> Verdict {
        self.process(frame)
    }
}

/// A synthetic TCP workload for the load balancer: a fixed set of flows,
/// visited in a fixed scrambled order, one 60-byte frame per call.
///
/// Flow `i` comes from `10.x.y.z` (the low 24 bits of `i`) and a port
/// derived from the seed, and goes to the virtual IP 192.0.2.1 port 80, so
/// all flows are distinct (up to 2^24 of them).
#[derive(Clone, Debug)]
pub struct FlowWorkload {
    flows: u32,
    syn: bool,
    seed: u64,
    stride: u64,
    next: u64,
    template: Endpoints,
}

impl FlowWorkload {
    /// Flows in the paper's "cached" workload.
    pub const CACHED_FLOWS: u32 = 16;
    /// Flows in the paper's "SYN flood" workload.
    pub const SYN_FLOOD_FLOWS: u32 = 1 << 20;
    /// Largest supported flow count.
    pub const MAX_FLOWS: u32 = 1 << 24;

    /// The "cached" workload: 16 established flows (ACK segments), all of
    /// which fit in any connection table.
    pub fn cached(seed: u64) -> Self {
        Self::new(Self::CACHED_FLOWS, false, seed)
    }

    /// The "SYN flood" workload: 1,048,576 flows of SYN segments, far more
    /// than a connection table holds.
    pub fn syn_flood(seed: u64) -> Self {
        Self::new(Self::SYN_FLOOD_FLOWS, true, seed)
    }

    /// `flows` flows (clamped to `1..=MAX_FLOWS`), SYN or ACK segments.
    pub fn new(flows: u32, syn: bool, seed: u64) -> Self {
        let flows = flows.clamp(1, Self::MAX_FLOWS);
        // A stride coprime with the flow count visits every flow once per
        // cycle in a scrambled order.
        let mut stride = (mix64(seed) % u64::from(flows)) | 1;
        while gcd(stride, u64::from(flows)) != 1 {
            stride += 2;
        }
        FlowWorkload {
            flows,
            syn,
            seed,
            stride,
            next: 0,
            template: Endpoints {
                src_mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
                dst_mac: MacAddr([0x02, 0, 0, 0, 0, 0xFE]),
                src_ip: Ipv4Addr::UNSPECIFIED,
                dst_ip: Ipv4Addr::new(192, 0, 2, 1),
                src_port: 0,
                dst_port: 80,
            },
        }
    }

    /// Number of distinct flows.
    pub fn flow_count(&self) -> u32 {
        self.flows
    }

    /// The 5-tuple of flow `i`.
    pub fn flow(&self, i: u32) -> FiveTuple {
        let ep = self.endpoints(i);
        FiveTuple {
            src_ip: ep.src_ip,
            dst_ip: ep.dst_ip,
            src_port: ep.src_port,
            dst_port: ep.dst_port,
            protocol: packet::PROTO_TCP,
        }
    }

    fn endpoints(&self, i: u32) -> Endpoints {
        let mut ep = self.template;
        ep.src_ip = Ipv4Addr::from(0x0A00_0000 | (i & 0x00FF_FFFF));
        ep.src_port = 1024 + (mix64(self.seed ^ u64::from(i)) % 64_000) as u16;
        ep
    }

    /// Index of the flow the next frame belongs to.
    pub fn peek_flow(&self) -> u32 {
        ((self.next * self.stride) % u64::from(self.flows)) as u32
    }

    /// Writes the next frame into `buf` and returns its length.
    pub fn next_frame(&mut self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let i = self.peek_flow();
        let ep = self.endpoints(i);
        let flags = if self.syn {
            tcp_flags::SYN
        } else {
            tcp_flags::ACK
        };
        let len = packet::emit_tcp_frame(buf, &ep, flags, self.next as u32, &[])?;
        self.next = (self.next + 1) % u64::from(self.flows);
        Ok(len)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests;
