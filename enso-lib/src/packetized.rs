//! The packetized (descriptor-ring) interface, DPDK-shaped: a pool of 2 KiB
//! packet buffers, RX/TX descriptor rings per queue, `rx_burst`/`tx_burst`.
//!
//! It follows DPDK's ixgbe/ice fast path so the comparison with pipes is
//! against a serious baseline: RX descriptors are refilled and the RX tail
//! doorbell rung once per `rx_free_thresh` (32) descriptors; TX descriptors
//! carry RS every `tx_rs_thresh` (32) and buffers are reclaimed 32 at a time
//! when the RS descriptor's DD bit is set; one TX tail doorbell per burst.
//! The buffer pool belongs to the device handle (one per thread), so it is
//! the per-thread cache DPDK's mempool keeps in front of its shared ring,
//! without the shared ring.

use enso_abi::layout::{self, desc, reg, reg_addr, Descriptor, DESC_SLOT};

use crate::device::Device;
use crate::error::{AllocError, DeviceError, RecvError, SendError};
pub use crate::shared::QueueStats;
use crate::shared::QueueSw;

/// A packet buffer handed out by the device (move-only: it is either owned
/// by the application, posted to the NIC, or free in the pool). Give it back
/// with [`Device::tx_burst`] or [`Device::free_mbufs`] on the device it came
/// from: dropping it loses the buffer to that device's pool.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an Mbuf dropped without tx_burst or free_mbufs is lost to its pool"]
pub struct Mbuf {
    idx: u32,
    len: u16,
    /// The owning handle's tag (its id's low 32 bits, never 0): a buffer
    /// of another handle is refused rather than posted or pooled here.
    tag: u32,
    /// The flow hash the NIC wrote back (0 for buffers not received).
    hash: u32,
}

impl Mbuf {
    /// Frame length.
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// Whether the frame length is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The flow (RSS) hash the NIC computed for a received frame, as
    /// DPDK's `mbuf.hash.rss`; 0 for a buffer from [`Device::alloc_mbuf`].
    pub fn rss_hash(&self) -> u32 {
        self.hash
    }
    /// Sets the frame length (at most the 2 KiB buffer). The wire carries
    /// frames of `enso_abi::wire::MIN_FRAME..=MAX_FRAME` bytes (14-1536):
    /// [`Device::tx_burst`] refuses others.
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(desc::BUF_SIZE) as u16;
    }
}

/// A descriptor queue pair of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueId {
    dev: u64,
    idx: u32,
}

/// Frame lengths the wire carries.
const SENDABLE: std::ops::RangeInclusive<usize> =
    enso_abi::wire::MIN_FRAME..=enso_abi::wire::MAX_FRAME;

/// RX descriptors refilled (and the RX tail doorbell rung) at a time:
/// DPDK's default `rx_free_thresh`.
pub const RX_FREE_THRESH: u32 = 32;
/// TX descriptors per report-status (RS) bit, and buffers reclaimed at a
/// time: DPDK's default `tx_rs_thresh`.
pub const TX_RS_THRESH: u32 = 32;

impl Device {
    fn desc_at(&self, off: usize) -> &Descriptor {
        // SAFETY: `off` is a descriptor slot inside a ring allocated in the
        // mapped region by `alloc_queue` (16 B aligned: rings are page
        // aligned); its fields are atomics.
        unsafe { &*(self.region_ptr().add(off) as *const Descriptor) }
    }

    fn ensure_pool(&mut self) -> Result<(), AllocError> {
        if self.pkt.pool_len > 0 {
            return Ok(());
        }
        let n = self.options().pool_buffers;
        if n == 0 {
            return Err(AllocError::NoPool);
        }
        let off = self.alloc_region_bytes(n as usize * desc::BUF_SIZE)?;
        self.pkt.pool_off = off;
        self.pkt.pool_len = n;
        self.pkt.free = (0..n).rev().collect();
        self.pkt.tag = (self.uid() as u32).max(1);
        Ok(())
    }

    /// Allocates a descriptor queue pair on `port`; `rss` makes its RX side
    /// receive fallback traffic (spread over such queues by flow hash).
    /// Posts buffers in all but the last 32 (`RX_FREE_THRESH`) RX
    /// descriptors, as DPDK's ixgbe arms its rings: a ring of `rx_ring`
    /// entries holds up to `rx_ring - 32` frames the application has not
    /// received yet. Needs `DeviceOptions::queues` and `pool_buffers` set
    /// at attach time.
    pub fn alloc_queue(&mut self, port: u32, rss: bool) -> Result<QueueId, AllocError> {
        let o = self.options().clone();
        if port as usize >= self.info().ports {
            return Err(AllocError::NoPort(port));
        }
        let idx = self.pkt.queues.len() as u32;
        if idx >= self.info().desc_queue_count {
            return Err(AllocError::NoQueues(self.info().desc_queue_count));
        }
        self.ensure_pool()?;
        let (rx_n, tx_n) = (o.rx_ring, o.tx_ring);
        let rx_ring = self.alloc_region_bytes(rx_n as usize * DESC_SLOT)?;
        let tx_ring = self.alloc_region_bytes(tx_n as usize * DESC_SLOT)?;
        let id = self.info().desc_queue_base + idx;
        let q = layout::DESC_QUEUE_BASE + id;
        let mut qs = QueueSw {
            id,
            rx_ring,
            rx_mask: rx_n - 1,
            rx_next: 0,
            rx_tail: 0,
            rx_pending: 0,
            rx_bufs: vec![u32::MAX; rx_n as usize].into_boxed_slice(),
            tx_ring,
            tx_mask: tx_n - 1,
            tx_tail: 0,
            tx_free: tx_n - 1,
            tx_next_dd: TX_RS_THRESH - 1,
            tx_bufs: vec![u32::MAX; tx_n as usize].into_boxed_slice(),
            stats: QueueStats::default(),
        };
        // Post every RX descriptor but one block: refills then stay in
        // aligned blocks of RX_FREE_THRESH, as DPDK's ixgbe re-arms them,
        // so descriptor fetches stay aligned.
        for i in 0..rx_n - RX_FREE_THRESH {
            let Some(b) = self.pkt.free.pop() else {
                return Err(AllocError::NoMemory);
            };
            let d = self.desc_at(rx_ring + i as usize * DESC_SLOT);
            d.post_rx((self.pkt.pool_off + b as usize * desc::BUF_SIZE) as u64);
            qs.rx_bufs[i as usize] = b;
        }
        qs.rx_tail = rx_n - RX_FREE_THRESH;
        let bits = |n: u32| port | n.trailing_zeros() << desc::LOG2_SHIFT;
        self.mmio_write(reg_addr(q, reg::RX_MEM_LOW), rx_ring as u32 | bits(rx_n))?;
        self.mmio_write(reg_addr(q, reg::RX_MEM_HIGH), (rx_ring >> 32) as u32)?;
        self.mmio_write(reg_addr(q, reg::TX_MEM_LOW), tx_ring as u32 | bits(tx_n))?;
        self.mmio_write(reg_addr(q, reg::TX_MEM_HIGH), (tx_ring >> 32) as u32)?;
        self.mmio_write(reg_addr(q, reg::RX_TAIL), qs.rx_tail)?;
        self.pkt.queues.push(qs);
        if rss {
            let t = layout::DESC_TARGET_BASE + id;
            self.config_raw(
                layout::config::FALLBACK,
                [layout::config::FALLBACK_ADD, t as u64, 0, 0, 0],
            )?;
        }
        Ok(QueueId {
            dev: self.uid(),
            idx,
        })
    }

    /// The steering target id of a queue (for [`Device::bind_queue`]).
    fn queue_target(&self, q: QueueId) -> Option<u32> {
        (q.dev == self.uid())
            .then(|| self.pkt.queues.get(q.idx as usize))
            .flatten()
            .map(|s| layout::DESC_TARGET_BASE + s.id)
    }

    /// Steers traffic matching `rule` to queue `q`.
    pub fn bind_queue(
        &mut self,
        q: QueueId,
        rule: crate::FlowRule,
    ) -> Result<(), crate::ConfigError> {
        let t = self
            .queue_target(q)
            .ok_or(crate::ConfigError::ForeignPipe)?;
        self.config_raw(
            layout::config::FLOW_BIND,
            crate::shared::rule_args(&rule, t),
        )?;
        Ok(())
    }

    /// Whether one of this handle's descriptor queues has a received
    /// frame (or a refused one) at its next slot: only loads.
    pub(crate) fn pkt_rx_ready(&self) -> bool {
        let base = self.region_ptr();
        self.pkt.queues.iter().any(|qs| {
            qs.rx_next != qs.rx_tail && {
                // SAFETY: as `desc_at`: slot `rx_next` of this queue's RX ring,
                // inside the mapped region.
                let d = unsafe {
                    &*(base.add(qs.rx_ring + qs.rx_next as usize * DESC_SLOT) as *const Descriptor)
                };
                // SYNC POINT E (Acquire, in `rx_done`).
                d.rx_done().is_some()
            }
        })
    }

    /// Receives up to `max` frames of queue `q` into `out` (appended), then
    /// refills RX descriptors once `rx_free_thresh` are consumed. Returns
    /// the number received.
    #[inline]
    pub fn rx_burst(
        &mut self,
        q: QueueId,
        out: &mut Vec<Mbuf>,
        max: usize,
    ) -> Result<usize, RecvError> {
        let tag = self.pkt.tag;
        let base = self.region_ptr();
        let mine = q.dev == self.uid();
        let Some(qs) = self.pkt.queues.get_mut(q.idx as usize).filter(|_| mine) else {
            return Err(RecvError::ForeignPipe);
        };
        let mut n = 0;
        // Only slots posted to the NIC: consumed slots waiting for a refill
        // still carry their old DD bit.
        while n < max && qs.rx_next != qs.rx_tail {
            let i = qs.rx_next;
            // SAFETY: as `desc_at`: slot `i` of this queue's RX ring.
            let d =
                unsafe { &*(base.add(qs.rx_ring + i as usize * DESC_SLOT) as *const Descriptor) };
            // SYNC POINT E (Acquire, in `rx_done`): the frame in the buffer
            // is visible once DD is set.
            let Some(qw1) = d.rx_done() else {
                break;
            };
            let b = qs.rx_bufs[i as usize];
            qs.rx_next = (i + 1) & qs.rx_mask;
            qs.rx_pending += 1;
            let len = (qw1 >> 32) & desc::LEN_MASK;
            if qw1 & desc::RX_ERR != 0 || len > desc::BUF_SIZE as u64 {
                // Refused by the NIC, or a length no buffer holds (a buggy or
                // hostile NIC): no frame to hand out; the buffer goes back.
                qs.stats.errors += 1;
                self.pkt.free.push(b);
                continue;
            }
            let len = len as u16;
            qs.stats.rx_packets += 1;
            qs.stats.rx_bytes += len as u64;
            let hash = d.rx_hash();
            out.push(Mbuf {
                idx: b,
                len,
                tag,
                hash,
            });
            n += 1;
        }
        if qs.rx_pending >= RX_FREE_THRESH {
            self.refill(q.idx as usize)?;
        }
        Ok(n)
    }

    /// Posts fresh buffers in the RX slots the NIC has filled; one doorbell.
    fn refill(&mut self, qi: usize) -> Result<(), DeviceError> {
        let base = self.region_ptr();
        let pool_off = self.pkt.pool_off;
        let qs = &mut self.pkt.queues[qi];
        let mut posted = 0;
        // Whole blocks only, so the tail stays block aligned.
        let mut budget = qs.rx_pending / RX_FREE_THRESH * RX_FREE_THRESH;
        while budget > 0 {
            budget -= 1;
            let Some(b) = self.pkt.free.pop() else {
                qs.stats.rx_nombuf += budget as u64 + 1;
                break;
            };
            let i = qs.rx_tail;
            // SAFETY: as `desc_at`: slot `i` of this queue's RX ring.
            let d =
                unsafe { &*(base.add(qs.rx_ring + i as usize * DESC_SLOT) as *const Descriptor) };
            d.post_rx((pool_off + b as usize * desc::BUF_SIZE) as u64);
            qs.rx_bufs[i as usize] = b;
            qs.rx_tail = (i + 1) & qs.rx_mask;
            qs.rx_pending -= 1;
            posted += 1;
        }
        if posted > 0 {
            let (id, tail) = (qs.id, qs.rx_tail);
            self.mmio_write(reg_addr(layout::DESC_QUEUE_BASE + id, reg::RX_TAIL), tail)?;
        }
        Ok(())
    }

    /// Reclaims TX buffers 32 at a time, as their RS descriptor completes.
    #[inline]
    fn tx_reclaim(&mut self, qi: usize) {
        let base = self.region_ptr();
        let qs = &mut self.pkt.queues[qi];
        loop {
            if qs.tx_free + TX_RS_THRESH > qs.tx_mask {
                return; // nothing outstanding to reclaim
            }
            let i = qs.tx_next_dd;
            // SAFETY: as `desc_at`: slot `i` of this queue's TX ring.
            let d =
                unsafe { &*(base.add(qs.tx_ring + i as usize * DESC_SLOT) as *const Descriptor) };
            // SYNC POINT F (Acquire, in `tx_done`): the NIC has read every
            // buffer up to slot `i`.
            if !d.tx_done() {
                return;
            }
            let first = (i + 1).wrapping_sub(TX_RS_THRESH) & qs.tx_mask;
            for k in 0..TX_RS_THRESH {
                let s = ((first + k) & qs.tx_mask) as usize;
                let b = std::mem::replace(&mut qs.tx_bufs[s], u32::MAX);
                if b != u32::MAX {
                    self.pkt.free.push(b);
                }
            }
            qs.tx_free += TX_RS_THRESH;
            qs.tx_next_dd = (i + TX_RS_THRESH) & qs.tx_mask;
        }
    }

    /// Queues frames from the front of `pkts` for transmission on queue `q`
    /// (one TX doorbell); sent buffers go back to the pool once the NIC is
    /// done with them. Returns the number sent; the others stay in `pkts`:
    /// those that did not fit in the ring, and, counted in
    /// [`QueueStats::errors`], a buffer that cannot be sent (another
    /// device's, or a length the wire does not carry, see [`Mbuf::set_len`])
    /// with every one after it.
    #[inline]
    pub fn tx_burst(&mut self, q: QueueId, pkts: &mut Vec<Mbuf>) -> Result<usize, SendError> {
        if q.dev != self.uid() || q.idx as usize >= self.pkt.queues.len() {
            return Err(SendError::ForeignPipe);
        }
        let qi = q.idx as usize;
        if (self.pkt.queues[qi].tx_free as usize) < pkts.len() {
            self.tx_reclaim(qi);
        }
        let base = self.region_ptr();
        let pool_off = self.pkt.pool_off;
        let (tag, pool_len) = (self.pkt.tag, self.pkt.pool_len);
        let qs = &mut self.pkt.queues[qi];
        let n = pkts.len().min(qs.tx_free as usize);
        let mut sent = 0;
        for m in &pkts[..n] {
            // Tags repeat only after 2^32 handles; even then, a buffer whose
            // index lies past this pool, over the descriptor rings, is
            // refused.
            if m.tag != tag || m.idx >= pool_len || !SENDABLE.contains(&(m.len as usize)) {
                qs.stats.errors += 1;
                break;
            }
            let i = qs.tx_tail;
            // SAFETY: as `desc_at`: slot `i` of this queue's TX ring.
            let d =
                unsafe { &*(base.add(qs.tx_ring + i as usize * DESC_SLOT) as *const Descriptor) };
            let mut cmd = desc::TX_EOP;
            if (i + 1).is_multiple_of(TX_RS_THRESH) {
                cmd |= desc::TX_RS;
            }
            d.post_tx(
                (pool_off + m.idx as usize * desc::BUF_SIZE) as u64,
                m.len as u64 | cmd,
            );
            qs.tx_bufs[i as usize] = m.idx;
            qs.tx_tail = (i + 1) & qs.tx_mask;
            qs.tx_free -= 1;
            qs.stats.tx_packets += 1;
            qs.stats.tx_bytes += m.len as u64;
            sent += 1;
        }
        if sent == n {
            qs.stats.tx_full += (pkts.len() - n) as u64;
        }
        pkts.drain(..sent);
        if sent > 0 {
            let (id, tail) = (qs.id, qs.tx_tail);
            // SYNC POINT A (the posted write's Release) publishes the
            // descriptors written above.
            self.mmio_write(reg_addr(layout::DESC_QUEUE_BASE + id, reg::TX_TAIL), tail)?;
        }
        Ok(sent)
    }

    /// Whether `m` is a buffer of this handle's pool.
    #[inline]
    fn owns(&self, m: &Mbuf) -> bool {
        m.tag == self.pkt.tag && m.idx < self.pkt.pool_len
    }

    /// The frame bytes of a buffer.
    #[inline]
    pub fn mbuf_data(&self, m: &Mbuf) -> &[u8] {
        // Another device's buffer: its index may name one of this pool's
        // buffers, owned by someone else (the NIC, say).
        assert!(self.owns(m), "an Mbuf of another device");
        debug_assert!(m.len as usize <= desc::BUF_SIZE);
        let off = self.pkt.pool_off + m.idx as usize * desc::BUF_SIZE;
        // The index is below this pool's size (checked above) and the
        // length at most the buffer size (only this module makes an Mbuf:
        // `alloc_mbuf` and `set_len` clamp it, `rx_burst` refuses longer
        // write-backs).
        // SAFETY: by the above the bytes lie inside the region; the
        // application owns the buffer while it holds `m`.
        unsafe { std::slice::from_raw_parts(self.region_ptr().add(off), m.len as usize) }
    }

    /// The frame bytes of a buffer, writable (up to the 2 KiB data room
    /// after [`Mbuf::set_len`]).
    #[inline]
    pub fn mbuf_data_mut(&mut self, m: &mut Mbuf) -> &mut [u8] {
        assert!(self.owns(m), "an Mbuf of another device");
        debug_assert!(m.len as usize <= desc::BUF_SIZE);
        let off = self.pkt.pool_off + m.idx as usize * desc::BUF_SIZE;
        // SAFETY: as `mbuf_data`; `&mut Mbuf` is the only handle to it.
        unsafe { std::slice::from_raw_parts_mut(self.region_ptr().add(off), m.len as usize) }
    }

    /// A free buffer of `len` bytes, if the pool has one.
    pub fn alloc_mbuf(&mut self, len: usize) -> Option<Mbuf> {
        let idx = self.pkt.free.pop()?;
        Some(Mbuf {
            idx,
            len: len.min(desc::BUF_SIZE) as u16,
            tag: self.pkt.tag,
            hash: 0,
        })
    }

    /// Returns buffers to the pool.
    ///
    /// # Panics
    /// On a buffer of another device (it cannot go back to its own pool
    /// from here), as [`Device::mbuf_data`] does.
    pub fn free_mbufs(&mut self, ms: impl IntoIterator<Item = Mbuf>) {
        for m in ms {
            assert!(self.owns(&m), "free_mbufs: an Mbuf of another device");
            self.pkt.free.push(m.idx);
        }
    }

    /// Free buffers in the pool, and its size.
    pub fn pool_usage(&self) -> (usize, usize) {
        (self.pkt.free.len(), self.pkt.pool_len as usize)
    }

    /// Buffers posted to RX rings or held by TX rings (not free, not the
    /// application's), for leak checks.
    pub fn buffers_in_rings(&self) -> usize {
        self.pkt
            .queues
            .iter()
            .map(|q| {
                let rx = (q.rx_tail.wrapping_sub(q.rx_next) & q.rx_mask) as usize;
                let tx = q.tx_bufs.iter().filter(|&&b| b != u32::MAX).count();
                rx + tx
            })
            .sum()
    }

    /// Counters of queue `q`.
    pub fn queue_stats(&self, q: QueueId) -> Option<&QueueStats> {
        (q.dev == self.uid()).then(|| self.pkt.queues.get(q.idx as usize).map(|s| &s.stats))?
    }

    /// Reclaims every completed TX buffer of every queue.
    pub fn tx_reclaim_all(&mut self) {
        for qi in 0..self.pkt.queues.len() {
            self.tx_reclaim(qi);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceOptions;
    use nic_emu::{DeviceConfig, Engine, WireConfig};
    use std::sync::atomic::Ordering;

    /// A handle with one descriptor queue (64-entry rings) on a stepped
    /// engine with one unwired port; the engine and directory must outlive it.
    fn queue_device() -> (Device, QueueId, Engine, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = DeviceConfig::new("pkt-unit", WireConfig::Null);
        cfg.dir = dir.path().to_path_buf();
        cfg.pipe_size = 64 << 10;
        cfg.notif_ring_entries = 256;
        let mut e = Engine::new(cfg).expect("engine");
        let (dev, q) = queue_handle(&mut e);
        (dev, q, e, dir)
    }

    /// A handle with one descriptor queue (64-entry rings) and its own pool
    /// of 256 buffers, on `e`.
    fn queue_handle(e: &mut Engine) -> (Device, QueueId) {
        let opts = DeviceOptions {
            pipes: 0,
            tx_pipes: 0,
            queues: 1,
            rx_ring: 64,
            tx_ring: 64,
            pool_buffers: 256,
            ..Default::default()
        };
        let mut dev = Device::attach_engine(e, opts).expect("attach");
        let q = dev.alloc_queue(0, false).expect("queue");
        (dev, q)
    }

    #[test]
    fn rx_burst_refuses_write_backs_longer_than_a_buffer() {
        let (mut dev, q, _engine, _dir) = queue_device();
        let ring = dev.pkt.queues[0].rx_ring;
        let (free_before, _) = dev.pool_usage();
        // Write-backs of a hostile NIC (the engine never steps here): the
        // largest length the field holds, one byte more than a buffer, then
        // a full buffer and a small frame, which are valid.
        let lens = [
            0xffff,
            desc::BUF_SIZE as u64 + 1,
            desc::BUF_SIZE as u64,
            100,
        ];
        for (i, len) in lens.into_iter().enumerate() {
            let d = dev.desc_at(ring + i * DESC_SLOT);
            d.qw0.store(0, Ordering::Relaxed);
            // Stands for the NIC's SYNC POINT E (Release); its Acquire
            // partner is the load of `qw1` in `rx_burst`.
            d.qw1
                .store(desc::RX_DD | desc::RX_EOP | len << 32, Ordering::Release);
        }
        let mut out = Vec::new();
        assert_eq!(dev.rx_burst(q, &mut out, 32), Ok(2));
        let lens: Vec<usize> = out.iter().map(|m| m.len()).collect();
        assert_eq!(lens, [desc::BUF_SIZE, 100]);
        for m in &out {
            assert_eq!(dev.mbuf_data(m).len(), m.len());
        }
        let st = dev.queue_stats(q).expect("own queue");
        assert_eq!(st.errors, 2);
        assert_eq!(st.rx_packets, 2);
        assert_eq!(st.rx_bytes, desc::BUF_SIZE as u64 + 100);
        // The refused buffers went back to the pool; the accepted ones are
        // the application's until it frees them.
        assert_eq!(dev.pool_usage().0, free_before + 2);
        dev.free_mbufs(out);
        assert_eq!(dev.pool_usage().0, free_before + 4);
    }

    #[test]
    #[should_panic(expected = "an Mbuf of another device")]
    fn mbuf_data_refuses_another_devices_buffer() {
        let (mut a, _qa, mut e, _dir) = queue_device();
        let (b, _qb) = queue_handle(&mut e);
        // Index 0 exists in both pools; in `b`'s it is posted to the NIC.
        let m = a.alloc_mbuf(64).expect("buffer");
        let _ = b.mbuf_data(&m);
    }

    #[test]
    #[should_panic(expected = "free_mbufs: an Mbuf of another device")]
    fn free_mbufs_refuses_another_devices_buffer() {
        let (mut a, _qa, mut e, _dir) = queue_device();
        let (mut b, _qb) = queue_handle(&mut e);
        let m = a.alloc_mbuf(64).expect("buffer");
        b.free_mbufs([m]);
    }

    #[test]
    fn tx_burst_leaves_unsendable_buffers_with_the_caller() {
        let (mut a, qa, mut e, _dir) = queue_device();
        let (mut b, _qb) = queue_handle(&mut e);
        let mine = |d: &mut Device, len| d.alloc_mbuf(len).expect("buffer");
        let (a_free, _) = a.pool_usage();
        // A good frame, another device's, then a good one after it.
        let foreign = mine(&mut b, 64);
        let mut pkts = vec![mine(&mut a, 64), foreign, mine(&mut a, 64)];
        assert_eq!(a.tx_burst(qa, &mut pkts), Ok(1));
        assert_eq!(
            pkts.len(),
            2,
            "the foreign buffer and the one after it stay"
        );
        assert_eq!(a.queue_stats(qa).unwrap().errors, 1);
        assert_eq!(a.queue_stats(qa).unwrap().tx_full, 0);
        let foreign = pkts.remove(0);
        b.free_mbufs([foreign]);
        assert_eq!(b.pool_usage().0, b.pool_usage().1 - 32, "b lost nothing");
        // Lengths the wire does not carry: longer than MAX_FRAME, or shorter
        // than an Ethernet header.
        for len in [enso_abi::wire::MAX_FRAME + 1, desc::BUF_SIZE, 0, 13] {
            let mut m = mine(&mut a, 64);
            m.set_len(len);
            pkts.insert(0, m);
            assert_eq!(a.tx_burst(qa, &mut pkts), Ok(0), "len {len}");
            let m = pkts.remove(0);
            a.free_mbufs([m]);
        }
        assert_eq!(a.queue_stats(qa).unwrap().errors, 5);
        assert_eq!(a.tx_burst(qa, &mut pkts), Ok(1), "the good one left");
        assert!(pkts.is_empty());
        assert_eq!(a.queue_stats(qa).unwrap().tx_packets, 2);
        // Two in the TX ring until the NIC completes them; nothing lost.
        assert_eq!(a.pool_usage().0, a_free - 2);
    }

    #[test]
    fn a_queue_needs_queue_slots_reserved_at_attach() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = DeviceConfig::new("pkt-opts", WireConfig::Null);
        cfg.dir = dir.path().to_path_buf();
        cfg.pipe_size = 64 << 10;
        cfg.notif_ring_entries = 256;
        let mut e = Engine::new(cfg).expect("engine");
        let mut no_queues = Device::attach_engine(&mut e, DeviceOptions::default()).unwrap();
        let err = no_queues.alloc_queue(0, true).unwrap_err();
        assert_eq!(err, AllocError::NoQueues(0));
        assert!(err.to_string().contains("DeviceOptions::queues"), "{err}");
    }
}
