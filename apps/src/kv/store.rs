//! One partition of the store: a lossy bucketed index over a circular log.
//!
//! # Layout
//!
//! * The **log** is a fixed byte array (a power of two) written as a ring. Every SET appends
//!   an item at the *head*, a logical byte offset that only grows (the
//!   physical position is `head mod capacity`). An item never straddles the
//!   end of the array: if it does not fit, the head skips to the start.
//!   Appending overwrites the oldest bytes, so the log keeps exactly the items
//!   whose logical offset `o` satisfies `head - o <= capacity`; older ones
//!   are gone (FIFO eviction).
//! * An **item** is `[u64 logical offset][u64 key hash][u16 key len]
//!   [u16 value len][u32 reserved]` (24 bytes, little-endian), then the key,
//!   then the value, padded to 8 bytes. Storing the item's own offset lets a
//!   reader detect that an index entry points at bytes that were reused.
//! * The **index** has a power-of-two number of buckets of
//!   [`BUCKET_SLOTS`] = 15 slots (128 bytes, two cache lines). A slot is a
//!   `u64`: a 16-bit tag taken from the key hash in the high bits (0 means
//!   empty) and the low 48 bits of the item's logical offset.
//!
//! Key-hash bits: the bucket is chosen by the low bits, the tag is bits
//! 32..48, and the partition ([`crate::kv::partition_of`]) uses bits 48..64,
//! so the three are independent.
//!
//! # Semantics
//!
//! * **GET** returns the value of the newest SET of the key unless the key
//!   was deleted or its item was lost. It never returns a value that was not
//!   the latest one written for that key.
//! * **SET** always succeeds for an item that fits ([`item_len`] at most the
//!   log capacity). It replaces the key's slot if the key is indexed, else
//!   takes an empty slot or one whose item already left the log.
//! * **DELETE** unindexes the key (its bytes stay in the log until
//!   overwritten) and reports whether it was there.
//!
//! An item may be **lost** (GET then says "not found") in exactly two ways:
//! 1. *log wrap*: more than `capacity` bytes were appended after it;
//! 2. *bucket overflow*: a SET of a new key finds all 15 slots of its bucket
//!    holding live items and evicts the oldest of them;
//!    [`SetOutcome::evicted`] names its key hash.
//!
//! Logical offsets are 64-bit in items and 48-bit in slots; a slot's full
//! offset is rebuilt relative to the head, which is exact for every item
//! still in the log (the log is far smaller than 2^48 bytes).
//!
//! Everything is allocated up front; no operation allocates. Like MICA's,
//! the index and the log ask for huge pages ([`enso::hint::zeroed_on_huge_pages`]):
//! every request reads a random bucket and item, which over 4 KiB pages
//! nearly always also missed the TLB.

use super::wire;
use std::fmt;

/// Slots per index bucket.
pub const BUCKET_SLOTS: usize = 15;
/// Bytes of the item header in the log.
pub const ITEM_HEADER_LEN: usize = 24;
/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 256;
/// Smallest log accepted.
pub const MIN_LOG_BYTES: usize = 1024;
/// Largest log accepted (4 GiB): the log is allocated whole, up front.
pub const MAX_LOG_BYTES: usize = 4 << 30;
/// Most index buckets accepted (2^24 buckets of 128 bytes: 2 GiB of
/// index, allocated up front).
pub const MAX_BUCKETS: usize = 1 << 24;

const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// Bytes an item with these key and value lengths takes in the log.
pub fn item_len(key_len: usize, value_len: usize) -> usize {
    (ITEM_HEADER_LEN + key_len + value_len).next_multiple_of(8)
}

/// Sizes of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Bytes of log (rounded down to a power of two).
    pub log_bytes: usize,
    /// Index buckets (rounded up to a power of two).
    pub buckets: usize,
}

impl Default for StoreConfig {
    /// 64 MiB of log and 2^18 buckets (32 MiB, 3.9 M slots): room for
    /// about 1.6 M items of 8-byte keys and values.
    fn default() -> Self {
        StoreConfig {
            log_bytes: 64 << 20,
            buckets: 1 << 18,
        }
    }
}

/// The configuration is unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreConfigError {
    /// The log is smaller than [`MIN_LOG_BYTES`].
    #[error("log of {0} bytes is below the {MIN_LOG_BYTES}-byte minimum")]
    LogTooSmall(usize),
    /// The log is larger than [`MAX_LOG_BYTES`].
    #[error("log of {0} bytes is above the {MAX_LOG_BYTES}-byte (4 GiB) maximum")]
    LogTooLarge(usize),
    /// No buckets.
    #[error("the index needs at least one bucket")]
    NoBuckets,
    /// More buckets than [`MAX_BUCKETS`].
    #[error("{0} index buckets are above the maximum of {MAX_BUCKETS} (2 GiB of index)")]
    TooManyBuckets(usize),
}

/// Why a SET was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// Empty key or longer than [`MAX_KEY_LEN`].
    #[error("key length must be 1..={MAX_KEY_LEN}")]
    BadKey,
    /// The item is larger than the log (or a length exceeds 16 bits).
    #[error("item does not fit in the log")]
    TooLarge,
}

/// What a successful SET did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetOutcome {
    /// Logical log offset of the new item.
    pub offset: u64,
    /// Key hash of a live item evicted because the bucket was full.
    pub evicted: Option<u64>,
}

/// Counters of one partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Items appended.
    pub sets: u64,
    /// Live items dropped from a full bucket.
    pub bucket_evictions: u64,
    /// Slots found pointing at overwritten log bytes and reused.
    pub stale_slots_reused: u64,
    /// Bytes skipped at the end of the log to keep items contiguous.
    pub wrap_padding: u64,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket {
    slots: [u64; BUCKET_SLOTS],
    _spare: u64,
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 128);

/// One partition (one core's share) of the key-value store.
pub struct Partition {
    buckets: Vec<Bucket>,
    bucket_mask: u64,
    log: Vec<u8>,
    log_mask: u64,
    head: u64,
    stats: StoreStats,
}

impl fmt::Debug for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Partition")
            .field("buckets", &self.buckets.len())
            .field("log_bytes", &self.log.len())
            .field("head", &self.head)
            .field("stats", &self.stats)
            .finish()
    }
}

#[inline]
fn tag_of(hash: u64) -> u64 {
    let t = (hash >> 32) & 0xFFFF;
    if t == 0 {
        1
    } else {
        t
    }
}

impl Partition {
    /// Allocates the log and the index.
    pub fn new(config: &StoreConfig) -> Result<Self, StoreConfigError> {
        if config.log_bytes < MIN_LOG_BYTES {
            return Err(StoreConfigError::LogTooSmall(config.log_bytes));
        }
        if config.log_bytes > MAX_LOG_BYTES {
            return Err(StoreConfigError::LogTooLarge(config.log_bytes));
        }
        if config.buckets == 0 {
            return Err(StoreConfigError::NoBuckets);
        }
        // MAX_BUCKETS is a power of two, so rounding up stays within it.
        if config.buckets > MAX_BUCKETS {
            return Err(StoreConfigError::TooManyBuckets(config.buckets));
        }
        // Powers of two, so positions are masks rather than divisions.
        let log_bytes = 1usize << (usize::BITS - 1 - config.log_bytes.leading_zeros());
        let n = config.buckets.next_power_of_two();
        Ok(Partition {
            buckets: enso::hint::zeroed_on_huge_pages(
                n,
                Bucket {
                    slots: [0; BUCKET_SLOTS],
                    _spare: 0,
                },
            ),
            bucket_mask: n as u64 - 1,
            log: enso::hint::zeroed_on_huge_pages(log_bytes, 0u8),
            log_mask: log_bytes as u64 - 1,
            head: 0,
            stats: StoreStats::default(),
        })
    }

    /// Log capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.log.len()
    }

    /// Logical offset where the next item will be appended.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Number of index buckets.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Counters so far.
    pub fn stats(&self) -> &StoreStats {
        &self.stats
    }

    /// True if an item at logical `offset` is still entirely in the log.
    pub fn is_live(&self, offset: u64) -> bool {
        offset <= self.head && self.head - offset <= self.log.len() as u64
    }

    #[inline]
    fn bucket_index(&self, hash: u64) -> usize {
        (hash & self.bucket_mask) as usize
    }

    /// The full logical offset a slot points to, if that offset is still
    /// within the log (arithmetic only, no memory read).
    #[inline]
    fn slot_offset(&self, slot: u64) -> Option<u64> {
        let distance = self.head.wrapping_sub(slot & OFFSET_MASK) & OFFSET_MASK;
        (distance <= self.log.len() as u64).then(|| self.head - distance)
    }

    /// [`Partition::slot_offset`], confirmed by the item header: the item
    /// there was written at that very offset. (A slot left untouched while
    /// 2^48 bytes were appended could otherwise alias a newer position.)
    #[inline(always)]
    fn live_offset(&self, slot: u64) -> Option<u64> {
        let offset = self.slot_offset(slot)?;
        let p = (offset & self.log_mask) as usize;
        (p + ITEM_HEADER_LEN <= self.log.len() && read_u64(&self.log[p..]) == offset)
            .then_some(offset)
    }

    /// Key hash, key and value of the live item at `offset`.
    #[inline(always)]
    fn item(&self, offset: u64) -> (u64, &[u8], &[u8]) {
        let p = (offset & self.log_mask) as usize;
        let h = &self.log[p..p + ITEM_HEADER_LEN];
        let hash = read_u64(&h[8..]);
        let key_len = usize::from(u16::from_le_bytes([h[16], h[17]]));
        let value_len = usize::from(u16::from_le_bytes([h[18], h[19]]));
        let key_start = p + ITEM_HEADER_LEN;
        let value_start = key_start + key_len;
        // Items are written whole and contiguous, and live_offset checked the
        // header; clamp anyway so corrupt bytes cannot cause a panic.
        let end = (value_start + value_len).min(self.log.len());
        let key = &self.log[key_start.min(end)..value_start.min(end)];
        let value = &self.log[value_start.min(end)..end];
        (hash, key, value)
    }

    /// Slot index and offset of `key` in its bucket.
    #[inline(always)]
    fn find(&self, key: &[u8], hash: u64) -> Option<(usize, u64)> {
        let tag = tag_of(hash);
        let bucket = &self.buckets[self.bucket_index(hash)];
        // Slot by slot with an early exit: buckets are mostly sparse, and a
        // branch-free compare of all 15 tags cost more than this on the
        // standard workload (see the `kv_rate` example).
        for (i, &slot) in bucket.slots.iter().enumerate() {
            if slot >> OFFSET_BITS != tag {
                continue;
            }
            if let Some(offset) = self.live_offset(slot) {
                let (h, k, _) = self.item(offset);
                if h == hash && wire::eq_short(k, key) {
                    return Some((i, offset));
                }
            }
        }
        None
    }

    /// Asks the CPU to start loading the index bucket of `hash`, so that a
    /// later operation on the key finds it in cache (MICA prefetches the
    /// buckets of a whole batch of requests before executing them, which
    /// overlaps their cache misses). A hint: it never faults and changes
    /// nothing.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let bucket = &self.buckets[self.bucket_index(hash)];
        enso::hint::prefetch_read(bucket);
        // The bucket's second cache line.
        enso::hint::prefetch_read_at(bucket, 64);
    }

    /// Asks the CPU to start loading the log item that the index bucket of
    /// `hash` names for it (the first slot with its tag), so that a later
    /// operation on the key finds the item in cache. Call it after
    /// [`Partition::prefetch`] of a whole burst, when the buckets have had
    /// time to arrive (MICA's second prefetch pass). A hint: it reads the
    /// bucket, never faults and changes nothing.
    #[inline]
    pub fn prefetch_item(&self, hash: u64) {
        let tag = tag_of(hash);
        let bucket = &self.buckets[self.bucket_index(hash)];
        let Some(&slot) = bucket.slots.iter().find(|&&s| s >> OFFSET_BITS == tag) else {
            return;
        };
        if let Some(offset) = self.slot_offset(slot) {
            let p = (offset & self.log_mask) as usize;
            enso::hint::prefetch_read(&self.log[p]);
        }
    }

    /// The value stored under `key` (whose hash is `hash`).
    #[inline]
    pub fn get(&self, key: &[u8], hash: u64) -> Option<&[u8]> {
        self.find(key, hash).map(|(_, offset)| self.item(offset).2)
    }

    /// Stores `value` under `key` (whose hash is `hash`).
    pub fn set(&mut self, key: &[u8], hash: u64, value: &[u8]) -> Result<SetOutcome, SetError> {
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            return Err(SetError::BadKey);
        }
        let len = item_len(key.len(), value.len());
        if len > self.log.len() || value.len() > usize::from(u16::MAX) {
            return Err(SetError::TooLarge);
        }
        let offset = self.append(key, hash, value, len);
        let new_slot = (tag_of(hash) << OFFSET_BITS) | (offset & OFFSET_MASK);
        let b = self.bucket_index(hash);

        if let Some((i, _)) = self.find(key, hash) {
            self.buckets[b].slots[i] = new_slot;
            return Ok(SetOutcome {
                offset,
                evicted: None,
            });
        }
        // A free slot, or one whose item has left the log. Liveness here is
        // judged from the offset alone, to avoid reading 15 item headers.
        let mut oldest: Option<(usize, u64)> = None;
        for i in 0..BUCKET_SLOTS {
            let slot = self.buckets[b].slots[i];
            if slot == 0 {
                self.buckets[b].slots[i] = new_slot;
                return Ok(SetOutcome {
                    offset,
                    evicted: None,
                });
            }
            match self.slot_offset(slot) {
                None => {
                    self.stats.stale_slots_reused += 1;
                    self.buckets[b].slots[i] = new_slot;
                    return Ok(SetOutcome {
                        offset,
                        evicted: None,
                    });
                }
                Some(o) => match oldest {
                    Some((_, best)) if best <= o => {}
                    _ => oldest = Some((i, o)),
                },
            }
        }
        // Full: evict the oldest (the next to leave the log anyway).
        let (i, o) = oldest.expect("a full bucket has a slot with an offset");
        let evicted = match self.live_offset(self.buckets[b].slots[i]) {
            Some(_) => {
                self.stats.bucket_evictions += 1;
                Some(self.item(o).0)
            }
            None => {
                self.stats.stale_slots_reused += 1;
                None
            }
        };
        self.buckets[b].slots[i] = new_slot;
        Ok(SetOutcome { offset, evicted })
    }

    /// Removes `key` (whose hash is `hash`); true if it was stored.
    pub fn delete(&mut self, key: &[u8], hash: u64) -> bool {
        match self.find(key, hash) {
            Some((i, _)) => {
                let b = self.bucket_index(hash);
                self.buckets[b].slots[i] = 0;
                true
            }
            None => false,
        }
    }

    fn append(&mut self, key: &[u8], hash: u64, value: &[u8], len: usize) -> u64 {
        let cap = self.log.len() as u64;
        let p = self.head & self.log_mask;
        if p + len as u64 > cap {
            self.stats.wrap_padding += cap - p;
            self.head += cap - p;
        }
        let offset = self.head;
        let p = (offset & self.log_mask) as usize;
        let item = &mut self.log[p..p + len];
        // Header built in registers and stored at once; short keys and
        // values copied without library calls (as in `BatchWriter::push`).
        let mut h = [0u8; ITEM_HEADER_LEN];
        h[0..8].copy_from_slice(&offset.to_le_bytes());
        h[8..16].copy_from_slice(&hash.to_le_bytes());
        h[16..18].copy_from_slice(&(key.len() as u16).to_le_bytes());
        h[18..20].copy_from_slice(&(value.len() as u16).to_le_bytes());
        let (head, body) = item.split_at_mut(ITEM_HEADER_LEN);
        head.copy_from_slice(&h);
        let (k, rest) = body.split_at_mut(key.len());
        wire::copy_short(k, key);
        let (v, pad) = rest.split_at_mut(value.len());
        wire::copy_short(v, value);
        // At most 7 bytes of padding up to the next multiple of 8.
        for b in pad {
            *b = 0;
        }
        self.head += len as u64;
        self.stats.sets += 1;
        offset
    }
}

fn read_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::key_hash;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn small(log_bytes: usize, buckets: usize) -> Partition {
        Partition::new(&StoreConfig { log_bytes, buckets }).unwrap()
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            Partition::new(&StoreConfig {
                log_bytes: 1000,
                buckets: 1
            })
            .unwrap_err(),
            StoreConfigError::LogTooSmall(1000)
        );
        assert_eq!(
            Partition::new(&StoreConfig {
                log_bytes: 4096,
                buckets: 0
            })
            .unwrap_err(),
            StoreConfigError::NoBuckets
        );
        assert_eq!(small(4096, 3).bucket_count(), 4);
        assert_eq!(small(6000, 1).capacity(), 4096);
    }

    #[test]
    fn sizes_are_bounded_before_anything_is_allocated() {
        // usize::MAX buckets used to overflow next_power_of_two; values
        // just above the limits would have allocated tens of GiB.
        for buckets in [MAX_BUCKETS + 1, usize::MAX] {
            let e = Partition::new(&StoreConfig {
                log_bytes: 4096,
                buckets,
            })
            .unwrap_err();
            assert_eq!(e, StoreConfigError::TooManyBuckets(buckets));
            assert!(e.to_string().contains(&MAX_BUCKETS.to_string()), "{e}");
        }
        for log_bytes in [MAX_LOG_BYTES + 1, usize::MAX] {
            let e = Partition::new(&StoreConfig {
                log_bytes,
                buckets: 1,
            })
            .unwrap_err();
            assert_eq!(e, StoreConfigError::LogTooLarge(log_bytes));
            assert!(e.to_string().contains("4 GiB"), "{e}");
        }
        // The default sizes are well inside the limits.
        let p = Partition::new(&StoreConfig::default()).unwrap();
        assert_eq!(p.bucket_count(), StoreConfig::default().buckets);
        assert_eq!(p.capacity(), StoreConfig::default().log_bytes);
        // A bucket count just below a power of two rounds up to it.
        assert_eq!(small(4096, (1 << 20) - 1).bucket_count(), 1 << 20);
    }

    #[test]
    fn basic_operations() {
        let mut p = small(1 << 16, 64);
        let (k, h) = (b"alpha".as_slice(), key_hash(b"alpha"));
        assert_eq!(p.get(k, h), None);
        p.set(k, h, b"one").unwrap();
        assert_eq!(p.get(k, h), Some(&b"one"[..]));
        p.set(k, h, b"two!").unwrap();
        assert_eq!(p.get(k, h), Some(&b"two!"[..]));
        assert!(p.delete(k, h));
        assert!(!p.delete(k, h));
        assert_eq!(p.get(k, h), None);
        assert_eq!(p.set(b"", 0, b"x"), Err(SetError::BadKey));
        assert_eq!(p.set(&[1; MAX_KEY_LEN + 1], 0, b"x"), Err(SetError::BadKey));
        assert_eq!(p.set(b"k", 0, &vec![0; 1 << 16]), Err(SetError::TooLarge));
        // Same hash, different key: both coexist.
        p.set(b"x", 77, b"X").unwrap();
        p.set(b"y", 77, b"Y").unwrap();
        assert_eq!(p.get(b"x", 77), Some(&b"X"[..]));
        assert_eq!(p.get(b"y", 77), Some(&b"Y"[..]));
    }

    #[test]
    fn log_wrap_evicts_oldest_and_never_returns_stale_bytes() {
        let mut p = small(1024, 64);
        let per_item = item_len(8, 8) as u64; // 40 bytes
        for i in 0u64..100 {
            let k = i.to_le_bytes();
            p.set(&k, key_hash(&k), &(i * 3).to_le_bytes()).unwrap();
        }
        // Only items within the last 1024 bytes (minus wrap padding) remain.
        let live: Vec<u64> = (0..100u64)
            .filter(|i| {
                let k = i.to_le_bytes();
                match p.get(&k, key_hash(&k)) {
                    Some(v) => {
                        assert_eq!(v, (i * 3).to_le_bytes());
                        true
                    }
                    None => false,
                }
            })
            .collect();
        assert!(live.len() as u64 >= 1024 / per_item - 1, "{live:?}");
        assert!(live.len() as u64 <= 1024 / per_item);
        assert_eq!(*live.last().unwrap(), 99);
        assert!(
            live.windows(2).all(|w| w[1] == w[0] + 1),
            "the newest items survive"
        );
        assert!(p.stats().wrap_padding > 0);
    }

    #[test]
    fn bucket_overflow_evicts_the_oldest_and_names_it() {
        let mut p = small(1 << 20, 1);
        let mut hashes = Vec::new();
        for i in 0u64..16 {
            let k = i.to_le_bytes();
            let h = key_hash(&k);
            hashes.push(h);
            let out = p.set(&k, h, b"v").unwrap();
            if i < 15 {
                assert_eq!(out.evicted, None);
            } else {
                assert_eq!(out.evicted, Some(hashes[0]));
            }
        }
        assert_eq!(p.get(&0u64.to_le_bytes(), hashes[0]), None);
        assert_eq!(p.stats().bucket_evictions, 1);
        // Updating an indexed key never evicts.
        let k = 5u64.to_le_bytes();
        assert_eq!(p.set(&k, hashes[5], b"w").unwrap().evicted, None);
    }

    #[derive(Clone, Debug)]
    enum ModelOp {
        Get(u8),
        Set(u8, u16),
        Delete(u8),
    }

    fn op_strategy() -> impl Strategy<Value = ModelOp> {
        prop_oneof![
            4 => any::<u8>().prop_map(ModelOp::Get),
            4 => (any::<u8>(), 0u16..200).prop_map(|(k, v)| ModelOp::Set(k, v)),
            1 => any::<u8>().prop_map(ModelOp::Delete),
        ]
    }

    /// Runs `ops` against the store and a HashMap. The store may only
    /// differ by having lost a key through a documented eviction: log wrap
    /// (its item's offset fell out of the log) or bucket overflow (named by
    /// SetOutcome::evicted). It must never return a wrong value.
    fn check_against_model(log_bytes: usize, buckets: usize, ops: &[ModelOp]) {
        let mut p = small(log_bytes, buckets);
        let mut model: HashMap<Vec<u8>, (Vec<u8>, u64)> = HashMap::new();
        let key = |k: u8| format!("key-{k}").into_bytes();
        let by_hash: HashMap<u64, Vec<u8>> =
            (0..=255u8).map(|k| (key_hash(&key(k)), key(k))).collect();
        assert_eq!(by_hash.len(), 256, "test keys need distinct hashes");
        for op in ops {
            match *op {
                ModelOp::Get(k) => {
                    let kb = key(k);
                    let got = p.get(&kb, key_hash(&kb));
                    match (got, model.get(&kb)) {
                        (Some(v), Some((mv, _))) => assert_eq!(v, &mv[..]),
                        (Some(v), None) => panic!("resurrected {kb:?} = {v:?}"),
                        (None, Some((_, offset))) => {
                            assert!(!p.is_live(*offset), "lost {kb:?} while its item is live");
                            model.remove(&kb);
                        }
                        (None, None) => {}
                    }
                }
                ModelOp::Set(k, vlen) => {
                    let kb = key(k);
                    let value: Vec<u8> = (0..vlen).map(|i| (i as u8) ^ k).collect();
                    let out = p.set(&kb, key_hash(&kb), &value).unwrap();
                    if let Some(h) = out.evicted {
                        model.remove(&by_hash[&h]);
                    }
                    model.insert(kb, (value, out.offset));
                }
                ModelOp::Delete(k) => {
                    let kb = key(k);
                    let had = p.delete(&kb, key_hash(&kb));
                    let modelled = model.remove(&kb);
                    if had {
                        assert!(modelled.is_some(), "deleted a key the model lost");
                    } else if let Some((_, offset)) = modelled {
                        assert!(!p.is_live(offset), "delete missed a live key");
                    }
                }
            }
            // Keys whose item left the log must read as missing.
            model.retain(|kb, (_, offset)| {
                let live = p.is_live(*offset);
                if !live {
                    assert_eq!(p.get(kb, key_hash(kb)), None);
                }
                live
            });
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Tight log and a 4-bucket index: both kinds of loss happen often.
        #[test]
        fn matches_a_hashmap_under_pressure(ops in proptest::collection::vec(op_strategy(), 1..600)) {
            check_against_model(4096, 4, &ops);
        }

        /// Roomy store: no loss may happen at all.
        #[test]
        fn matches_a_hashmap_exactly_when_roomy(ops in proptest::collection::vec(op_strategy(), 1..600)) {
            let mut p = small(1 << 20, 1024);
            let mut model: HashMap<u8, Vec<u8>> = HashMap::new();
            for op in &ops {
                match *op {
                    ModelOp::Get(k) => {
                        let kb = [k];
                        prop_assert_eq!(p.get(&kb, key_hash(&kb)), model.get(&k).map(|v| &v[..]));
                    }
                    ModelOp::Set(k, vlen) => {
                        let kb = [k];
                        let value = vec![k; usize::from(vlen)];
                        prop_assert_eq!(p.set(&kb, key_hash(&kb), &value).unwrap().evicted, None);
                        model.insert(k, value);
                    }
                    ModelOp::Delete(k) => {
                        let kb = [k];
                        prop_assert_eq!(p.delete(&kb, key_hash(&kb)), model.remove(&k).is_some());
                    }
                }
            }
        }
    }

    #[test]
    fn long_seeded_run_against_the_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let ops: Vec<ModelOp> = (0..200_000)
            .map(|_| match rng.gen_range(0..9) {
                0..=3 => ModelOp::Get(rng.gen()),
                4..=7 => ModelOp::Set(rng.gen(), rng.gen_range(0..64)),
                _ => ModelOp::Delete(rng.gen()),
            })
            .collect();
        check_against_model(8192, 8, &ops);
    }
}
