//! The packetized (descriptor-ring) interface on the same engine: an
//! E810/ixgbe-like NIC with 16 B descriptors, DD write-back, RS-driven TX
//! completion, tail doorbells, and the same ports and steering as pipes.
//!
//! PCIe accounting follows how such a NIC batches its metadata traffic:
//! descriptors are fetched `desc_fetch` at a time when a doorbell makes them
//! available; RX write-backs are coalesced `desc_writeback` to a TLP (a
//! partial batch is flushed at the end of each engine step, so at low load
//! every descriptor costs its own TLP).

use pcie_model::tlp::split_count_shift;
use pcie_model::TrafficClass;

use super::shared::App;
use super::state::{Core, DescQueue};
use crate::counters::{PortCounters, QueueCounters};
use crate::layout::{self, desc, reg, Descriptor};
use crate::port::{self, Port};

/// Descriptors transmitted per queue per step at most.
const TX_BUDGET: usize = 64;
/// A descriptor's size as the byte count of a DMA access.
const DESC_BYTES: u64 = layout::DESC_SLOT as u64;

impl App {
    #[inline]
    fn desc(&self, ring: usize, i: u32) -> &Descriptor {
        let off = ring + i as usize * layout::DESC_SLOT;
        debug_assert!(self.in_region(off, layout::DESC_SLOT));
        // SAFETY: the ring was checked to lie inside the region when enabled and `i` is
        // masked to its size: the 16 B descriptor is in bounds and 16 B aligned (the ring
        // is page aligned); its fields are atomics.
        unsafe { &*(self.region.as_ptr().add(off) as *const Descriptor) }
    }
}

impl Core {
    /// A register write to descriptor queue `q` (global id) by app `slot`.
    pub(super) fn desc_register(&mut self, slot: usize, q: usize, r: u32, value: u32) {
        let app = self.apps[slot].as_mut().expect("caller checked");
        let dq = &mut self.dqs[q];
        match r {
            reg::RX_MEM_LOW => dq.rx_low = value,
            reg::TX_MEM_LOW => dq.tx_low = value,
            reg::RX_MEM_HIGH | reg::TX_MEM_HIGH => {
                let low = if r == reg::RX_MEM_HIGH {
                    dq.rx_low
                } else {
                    dq.tx_low
                };
                let port = (low & desc::PORT_BITS) as usize;
                let log2 = (low >> desc::LOG2_SHIFT) & desc::LOG2_MASK;
                let off = (value as usize) << 32 | (low & !(layout::PAGE as u32 - 1)) as usize;
                let entries = 1usize << log2;
                if off == 0 {
                    if r == reg::RX_MEM_HIGH {
                        dq.rx_ring = 0;
                        let t = layout::DESC_TARGET_BASE + q as u32;
                        let n = self.flows.retain(|x| x == t);
                        if let Some(a) = self.apps[slot].as_mut() {
                            a.rules -= n;
                        }
                        for f in &mut self.fallback {
                            f.remove(t);
                        }
                    } else {
                        dq.tx_ring = 0;
                    }
                    return;
                }
                if !(8..=(1 << 16)).contains(&entries)
                    || port >= self.fallback.len()
                    || !app.in_region(off, entries * layout::DESC_SLOT)
                {
                    app.counters.reject_bad_register_value += 1;
                    return;
                }
                dq.port = port as u16;
                let mask = entries as u32 - 1;
                if r == reg::RX_MEM_HIGH {
                    (dq.rx_ring, dq.rx_mask, dq.rx_head, dq.rx_tail) = (off, mask, 0, 0);
                    dq.rx_wb_pending = 0;
                } else {
                    (dq.tx_ring, dq.tx_mask, dq.tx_head, dq.tx_tail) = (off, mask, 0, 0);
                }
            }
            reg::RX_TAIL if dq.rx_ring != 0 && value <= dq.rx_mask => {
                // Descriptors [tail, value) become the NIC's; it may never
                // run past its own head.
                let avail = dq.rx_tail.wrapping_sub(dq.rx_head) & dq.rx_mask;
                let add = value.wrapping_sub(dq.rx_tail) & dq.rx_mask;
                if avail + add > dq.rx_mask {
                    app.counters.reject_bad_register_value += 1;
                    return;
                }
                fetch(
                    &mut self.pcie,
                    self.desc_fetch,
                    dq.rx_ring,
                    dq.rx_tail,
                    add,
                    dq.rx_mask,
                );
                dq.rx_tail = value;
            }
            reg::TX_TAIL if dq.tx_ring != 0 && value <= dq.tx_mask => {
                let pending = dq.tx_tail.wrapping_sub(dq.tx_head) & dq.tx_mask;
                let add = value.wrapping_sub(dq.tx_tail) & dq.tx_mask;
                if pending + add > dq.tx_mask {
                    app.counters.reject_bad_register_value += 1;
                    return;
                }
                fetch(
                    &mut self.pcie,
                    self.desc_fetch,
                    dq.tx_ring,
                    dq.tx_tail,
                    add,
                    dq.tx_mask,
                );
                dq.tx_tail = value;
            }
            _ => app.counters.reject_bad_register_value += 1,
        }
    }

    /// The RX path into descriptor queue `q`.
    #[inline(always)]
    /// Returns whether the frame was written into a buffer.
    pub(super) fn deliver_desc(
        &mut self,
        q: usize,
        pc: &mut PortCounters,
        frame: &[u8],
        hash: u32,
    ) -> bool {
        if self.dqs[q].rx_ring != 0 && self.dqs[q].rx_head == self.dqs[q].rx_tail {
            self.look_before_drop(self.dqs[q].owner as usize);
        }
        let dq = &mut self.dqs[q];
        let qc = &mut self.dq_counters[q];
        if dq.rx_ring == 0 {
            pc.drop_no_match += 1;
            return false;
        }
        let Some(app) = self.apps[dq.owner as usize].as_mut() else {
            pc.drop_no_match += 1;
            return false;
        };
        if dq.rx_head == dq.rx_tail {
            qc.drop_no_descriptor += 1;
            return false;
        }
        let d = app.desc(dq.rx_ring, dq.rx_head);
        let buf = d.rx_buffer() as usize;
        let len = frame.len();
        let mut written = true;
        if len > desc::BUF_SIZE || !app.in_region(buf, desc::BUF_SIZE) {
            // A descriptor pointing outside the application's memory: refuse
            // it, hand it back marked, drop the frame.
            // SYNC POINT E (Release, in `refuse_rx`): software sees RX_ERR
            // with DD and takes its buffer back unread.
            d.refuse_rx();
            qc.drop_bad_descriptor += 1;
            app.counters.reject_bad_descriptor += 1;
            written = false;
        } else {
            app.write(buf, frame);
            self.pcie
                .record_dma_write(TrafficClass::Data, buf as u64, len as u64);
            if let Some(ts) = self.ts_offset[dq.owner as usize * self.nports + dq.port as usize] {
                let off = ts.offset;
                if off + 4 <= len {
                    let sent = frame[off..off + 4].try_into().expect("4 bytes");
                    let rtt = ts.format.round_trip(sent, self.clock.now_ns());
                    app.write(buf + off, &rtt);
                }
            }
            // SYNC POINT E (Release, in `hand_back_rx`): the frame bytes are
            // visible once software sees DD.
            d.hand_back_rx(len, hash);
            qc.rx_frames += 1;
            qc.rx_bytes += len as u64;
            self.frames += 1;
            self.flits_in += crate::wire::flits(len) as u64;
        }
        advance_rx_head(&mut self.pcie, dq, self.desc_writeback);
        written
    }

    /// [`Core::deliver_desc`] for a frame of the run in `slot` (see `Run`
    /// in the engine), to a queue enabled with its owner attached when the
    /// run opened: the frame's counts go to the run. False, with nothing
    /// done, when the frame needs deciding again (no descriptor, or a
    /// refused one).
    #[inline(always)]
    pub(super) fn desc_run_frame(&mut self, slot: usize, frame: &[u8], hash: u32) -> bool {
        let run = &mut self.runs[slot];
        let counts = &mut run.counts;
        let dq = &mut self.dqs[(run.target - layout::DESC_TARGET_BASE) as usize];
        if dq.rx_head == dq.rx_tail {
            return false;
        }
        let Some(app) = self.apps[dq.owner as usize].as_ref() else {
            return false;
        };
        let d = app.desc(dq.rx_ring, dq.rx_head);
        let buf = d.rx_buffer() as usize;
        let len = frame.len();
        if len > desc::BUF_SIZE || !app.in_region(buf, desc::BUF_SIZE) {
            return false;
        }
        app.write(buf, frame);
        let shift = self.shifts.mps;
        counts.tlps += split_count_shift(buf as u64, len as u64, shift);
        counts.dma_bytes += len as u64;
        // SYNC POINT E (Release, in `hand_back_rx`), as in `deliver_desc`.
        d.hand_back_rx(len, hash);
        counts.frames += 1;
        counts.bytes += len as u64;
        counts.flits += crate::wire::flits(len) as u64;
        // As `advance_rx_head`, with the write-back counted in the run.
        if dq.rx_wb_pending == 0 {
            dq.rx_wb_first = dq.rx_head;
        }
        dq.rx_head = (dq.rx_head + 1) & dq.rx_mask;
        dq.rx_wb_pending += 1;
        if dq.rx_wb_pending >= self.desc_writeback || dq.rx_head == 0 {
            let addr = (dq.rx_ring + dq.rx_wb_first as usize * layout::DESC_SLOT) as u64;
            let bytes = u64::from(dq.rx_wb_pending) * DESC_BYTES;
            counts.wb_writes += 1;
            counts.wb_bytes += bytes;
            counts.wb_tlps += split_count_shift(addr, bytes, shift);
            dq.rx_wb_pending = 0;
        }
        true
    }

    /// Accounts RX write-backs still being coalesced (end of a step).
    pub(super) fn flush_desc_writebacks(&mut self, slot: usize) {
        let Some(app) = self.apps[slot].as_ref() else {
            return;
        };
        for q in app.desc_base..app.desc_base + app.desc_count {
            let dq = &mut self.dqs[q as usize];
            if dq.rx_wb_pending > 0 {
                flush_wb(&mut self.pcie, dq);
            }
        }
    }

    /// The TX path of application `slot`'s descriptor queues.
    pub(super) fn process_desc_tx(&mut self, slot: usize, ports: &mut [Port], now: u64) -> usize {
        let (base, count) = {
            let app = self.apps[slot].as_ref().expect("caller checked");
            (app.desc_base, app.desc_count)
        };
        let mut sent = 0;
        // The DMA reads of the frames and the descriptor write-backs, each
        // counted exactly (TLPs cut as `record_dma_read`/`record_dma_write`
        // cut them) and added to the PCIe counters once, after the loop.
        let sh = self.shifts;
        let (mut reads, mut read_bytes, mut requests, mut completions) = (0u64, 0u64, 0u64, 0u64);
        let (mut wbs, mut wb_tlps) = (0u64, 0u64);
        for q in base..base + count {
            let q = q as usize;
            let mut n = 0;
            while n < TX_BUDGET {
                let dq = self.dqs[q];
                if dq.tx_ring == 0 || dq.tx_head == dq.tx_tail {
                    break;
                }
                let port = dq.port as usize;
                let cfg = slot * self.nports + port;
                if let Some(tb) = self.limiter[cfg].as_mut() {
                    if !tb.refill(now) {
                        break;
                    }
                }
                let app = self.apps[slot].as_mut().expect("caller checked");
                let d = app.desc(dq.tx_ring, dq.tx_head);
                let (qw0, qw1) = d.read_tx();
                let buf = qw0 as usize;
                let len = (qw1 & desc::LEN_MASK) as usize;
                let ok = qw1 & desc::TX_EOP != 0
                    && (crate::wire::MIN_FRAME..=crate::wire::MAX_FRAME.min(desc::BUF_SIZE))
                        .contains(&len)
                    && app.in_region(buf, len);
                let mut done = desc::TX_DD;
                if ok {
                    let frame = &mut self.txbuf[..len];
                    app.read(buf, frame);
                    // `len` >= MIN_FRAME: never a zero-length read.
                    reads += 1;
                    read_bytes += len as u64;
                    requests += split_count_shift(buf as u64, len as u64, sh.mrrs);
                    completions += split_count_shift(buf as u64, len as u64, sh.rcb);
                    let mut t = now;
                    if let Some(ts) = self.ts_offset[cfg] {
                        t = self.clock.now_ns();
                        if ts.offset + 4 <= len {
                            frame[ts.offset..ts.offset + 4].copy_from_slice(&ts.format.stamp(t));
                        }
                    }
                    port::transmit(ports, port, frame, t);
                    let qc = &mut self.dq_counters[q];
                    qc.tx_frames += 1;
                    qc.tx_bytes += len as u64;
                    self.frames += 1;
                    if let Some(tb) = self.limiter[cfg].as_mut() {
                        tb.take(crate::wire::flits(len) as u64);
                    }
                } else {
                    self.dq_counters[q].tx_bad_descriptor += 1;
                    done |= desc::TX_ERR;
                }
                if qw1 & desc::TX_RS != 0 || !ok {
                    // SYNC POINT F (Release, in `write_back_tx`): software
                    // reclaims buffers up to here once it sees DD.
                    d.write_back_tx(qw1 | done);
                    let at = (dq.tx_ring + dq.tx_head as usize * layout::DESC_SLOT) as u64;
                    wbs += 1;
                    wb_tlps += split_count_shift(at, DESC_BYTES, sh.mps);
                }
                if !ok {
                    app.counters.reject_bad_descriptor += 1;
                }
                self.dqs[q].tx_head = (dq.tx_head + 1) & dq.tx_mask;
                n += 1;
            }
            sent += n;
        }
        if reads > 0 {
            self.pcie.record_dma_reads(
                TrafficClass::Data,
                reads,
                read_bytes,
                requests,
                completions,
            );
        }
        if wbs > 0 {
            self.pcie
                .record_dma_writes(TrafficClass::Descriptor, wbs, wbs * DESC_BYTES, wb_tlps);
        }
        sent
    }

    /// Whether `target` is a descriptor queue owned by app `slot` with RX
    /// enabled; its port.
    pub(super) fn desc_target(&self, slot: usize, target: u64) -> Option<u16> {
        let app = self.apps[slot].as_ref()?;
        let q = target.checked_sub(layout::DESC_TARGET_BASE as u64)?;
        if q < app.desc_base as u64 || q >= (app.desc_base + app.desc_count) as u64 {
            return None;
        }
        let dq = &self.dqs[q as usize];
        (dq.rx_ring != 0).then_some(dq.port)
    }

    pub(super) fn queue_counters(&self, q: usize) -> &QueueCounters {
        &self.dq_counters[q]
    }
}

/// Accounts descriptor fetches for `n` descriptors from index `from`:
/// reads of `f` descriptors, never across the end of the ring.
fn fetch(pcie: &mut pcie_model::PcieCounters, f: u32, ring: usize, from: u32, n: u32, mask: u32) {
    let mut i = from;
    let mut left = n;
    while left > 0 {
        let till_end = mask + 1 - i;
        let k = left.min(f).min(till_end);
        pcie.record_dma_read(
            TrafficClass::Descriptor,
            (ring + i as usize * layout::DESC_SLOT) as u64,
            k as u64 * DESC_BYTES,
        );
        i = (i + k) & mask;
        left -= k;
    }
}

/// Moves `dq`'s RX head past the descriptor just handed back, coalescing
/// its write-back with the next ones (`writeback` to a TLP; the batch is
/// flushed early where the ring wraps).
#[inline(always)]
fn advance_rx_head(pcie: &mut pcie_model::PcieCounters, dq: &mut DescQueue, writeback: u32) {
    if dq.rx_wb_pending == 0 {
        dq.rx_wb_first = dq.rx_head;
    }
    dq.rx_head = (dq.rx_head + 1) & dq.rx_mask;
    dq.rx_wb_pending += 1;
    if dq.rx_wb_pending >= writeback || dq.rx_head == 0 {
        flush_wb(pcie, dq);
    }
}

/// Accounts `dq`'s coalesced RX write-backs as one DMA write. Once per
/// batch, so kept out of line: inlined into both RX paths it cost the
/// baseline's engine 3 instructions per frame (`bench cache`).
#[inline(never)]
fn flush_wb(pcie: &mut pcie_model::PcieCounters, dq: &mut DescQueue) {
    let addr = dq.rx_ring + dq.rx_wb_first as usize * layout::DESC_SLOT;
    pcie.record_dma_write(
        TrafficClass::Descriptor,
        addr as u64,
        dq.rx_wb_pending as u64 * DESC_BYTES,
    );
    dq.rx_wb_pending = 0;
}
