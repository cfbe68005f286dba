//! Posted register writes: copying them out of an application's queue once
//! they have crossed the emulated interconnect, and applying them to pipes,
//! notification buffers and descriptor queues.

use pcie_model::TrafficClass;

use super::shared::NOTIF_BYTES;
use super::state::Core;
use crate::layout::{self, reg};

/// Posted register writes applied per application per step at most.
pub(super) const MMIO_BUDGET: u32 = 256;

/// TX notifications the NIC fetches in one read request at most.
const TX_FETCH_MAX: u32 = 256;

impl Core {
    /// A frame for application `slot` is about to be dropped for lack of
    /// room: apply the head updates it has posted first (once per step), as
    /// the engine may have deferred looking at them while busy.
    pub(super) fn look_before_drop(&mut self, slot: usize) {
        let now = self.now;
        let step = self.step_no;
        let Some(app) = self.apps.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if app.looked_step != step {
            app.looked_step = step;
            // Register writes may change the pipes runs hold the tails of.
            self.close_runs();
            self.drain_mmio(slot, now);
        }
    }

    /// Applies posted register writes of application `slot`, in order.
    ///
    /// A producer more than [`layout::MMIO_QUEUE_LEN`] entries ahead of the
    /// consumer (or behind it) claims entries the queue cannot hold: only
    /// hostile software publishes one. It is counted once under
    /// `reject_bad_register_value` and the consumer is moved to it, leaving
    /// the queue empty: none of the claimed entries is applied, and writes
    /// posted after it from there on are applied as usual. Replaying the
    /// queue up to such a producer would cost up to 2^32 entries of engine
    /// time and hold the application's later writes behind them.
    pub(super) fn drain_mmio(&mut self, slot: usize, now: u64) -> usize {
        let latency = self.latency;
        let app = self.apps[slot].as_mut().expect("caller checked");
        let q = app.mmio_queue();
        // Copy the entries out first: applying one needs the whole core.
        let mut batch = std::mem::take(&mut self.mmio_batch);
        batch.clear();
        let mut cons = app.mmio_consumer;
        let taken = q.take(&mut cons, MMIO_BUDGET as usize, latency, now, &mut batch);
        app.mmio_consumer = cons;
        let n = match taken {
            None => {
                app.counters.reject_bad_register_value += 1;
                self.mmio_batch = batch;
                return 0;
            }
            Some(0) => {
                self.mmio_batch = batch;
                return 0;
            }
            Some(n) => n,
        };
        for &(addr, value) in &batch {
            self.apply_register(slot, addr, value);
        }
        self.mmio_batch = batch;
        if self.apps[slot].as_ref().is_some_and(|a| !a.owed.is_empty()) {
            self.notify_owed(slot);
        }
        n
    }

    fn apply_register(&mut self, slot: usize, addr: u32, value: u32) {
        self.pcie.record_mmio_write(TrafficClass::Register, 4);
        let app = self.apps[slot].as_mut().expect("caller checked");
        app.counters.mmio_writes += 1;
        let Some((q, r)) = layout::split_reg_addr(addr) else {
            app.counters.reject_foreign_register += 1;
            return;
        };
        if q < layout::MAX_PIPES {
            if !app.owns_pipe(q) {
                app.counters.reject_foreign_register += 1;
                return;
            }
            match r {
                // The enabling order of the real NIC's software zeroes head
                // and tail before writing the address: harmless, accepted.
                reg::RX_HEAD | reg::RX_TAIL if value == 0 && self.pipes[q as usize].base == 0 => {}
                reg::RX_HEAD => self.pipe_head_write(slot, q, value),
                reg::RX_MEM_LOW => self.pipes[q as usize].pending_low = value,
                reg::RX_MEM_HIGH => {
                    self.pipe_enable(slot, q, value);
                    self.refresh_rx_spans(slot);
                }
                _ => app.counters.reject_foreign_register += 1,
            }
        } else if q >= layout::DESC_QUEUE_BASE {
            let dq = q - layout::DESC_QUEUE_BASE;
            if app.owns_queue(dq) {
                self.desc_register(slot, dq as usize, r, value);
            } else {
                app.counters.reject_foreign_register += 1;
            }
        } else if q == layout::NBUF_QUEUE_BASE + app.nbuf_id {
            let entries = self.ring_mask + 1;
            let ring_bytes = entries as usize * layout::NOTIF_SLOT;
            let nb = &mut app.nb;
            match r {
                // Zeroing before enabling, as for pipes.
                reg::RX_HEAD | reg::RX_TAIL if value == 0 && nb.rx_ring == 0 => {}
                reg::TX_HEAD | reg::TX_TAIL if value == 0 && nb.tx_ring == 0 => {}
                reg::RX_HEAD if value < entries && nb.rx_ring != 0 => {
                    // The head may only move over notifications the NIC wrote.
                    let used = nb.rx_tail.wrapping_sub(nb.rx_head) & self.ring_mask;
                    let adv = value.wrapping_sub(nb.rx_head) & self.ring_mask;
                    if adv <= used {
                        nb.rx_head = value;
                    } else {
                        app.counters.reject_bad_register_value += 1;
                    }
                }
                reg::TX_TAIL if value < entries && nb.tx_ring != 0 => {
                    let old = nb.tx_tail;
                    nb.tx_tail = value;
                    // The NIC fetches the new notifications in as few reads as
                    // it can (at most TX_FETCH_MAX each, not across the end).
                    let mut i = old;
                    while i != value {
                        let till_end = entries - i;
                        let n = (value.wrapping_sub(i) & self.ring_mask)
                            .min(till_end)
                            .min(TX_FETCH_MAX);
                        self.pcie.record_dma_read(
                            TrafficClass::Notification,
                            (nb.tx_ring + i as usize * layout::NOTIF_SLOT) as u64,
                            n as u64 * NOTIF_BYTES,
                        );
                        i = (i + n) & self.ring_mask;
                    }
                    nb.tx_fetched = value;
                }
                reg::RX_MEM_LOW => nb.rx_low = value,
                reg::TX_MEM_LOW => nb.tx_low = value,
                reg::RX_MEM_HIGH | reg::TX_MEM_HIGH => {
                    let low = if r == reg::RX_MEM_HIGH {
                        nb.rx_low
                    } else {
                        nb.tx_low
                    };
                    let off = (value as usize) << 32 | low as usize;
                    let ok = off == 0
                        || (off.is_multiple_of(layout::PAGE) && app.in_region(off, ring_bytes));
                    let nb = &mut app.nb;
                    if !ok {
                        app.counters.reject_bad_register_value += 1;
                    } else if r == reg::RX_MEM_HIGH {
                        (nb.rx_ring, nb.rx_head, nb.rx_tail) = (off, 0, 0);
                    } else {
                        (nb.tx_ring, nb.tx_head, nb.tx_tail, nb.tx_fetched) = (off, 0, 0, 0);
                        app.tx = None;
                        app.asm.reset();
                    }
                }
                _ => app.counters.reject_bad_register_value += 1,
            }
        } else {
            app.counters.reject_foreign_register += 1;
        }
    }

    /// Recomputes application `slot`'s RX pipe spans (after a pipe was
    /// enabled, moved or disabled; rare, so a full pass is fine).
    fn refresh_rx_spans(&mut self, slot: usize) {
        let size = self.pipe_size;
        let app = self.apps[slot].as_mut().expect("caller checked");
        let (from, n) = (app.pipe_base as usize, app.pipe_count as usize);
        app.rx_spans.clear();
        app.rx_spans.extend(
            self.pipes[from..from + n]
                .iter()
                .filter(|p| p.base != 0)
                .map(|p| (p.base, p.base + size)),
        );
        app.rx_spans.sort_unstable();
    }

    fn pipe_enable(&mut self, slot: usize, pid: u32, high: u32) {
        let app = self.apps[slot].as_mut().expect("caller checked");
        let p = &mut self.pipes[pid as usize];
        let port = (p.pending_low & layout::PIPE_PORT_MASK) as usize;
        let stream = p.pending_low & layout::PIPE_STREAM != 0;
        let off = (high as usize) << 32 | (p.pending_low & !layout::PIPE_LOW_BITS) as usize;
        if off == 0 {
            p.base = 0;
            p.outstanding = false;
            app.rules -= self.flows.retain(|x| x == pid);
            for f in &mut self.fallback {
                f.remove(pid);
            }
            return;
        }
        if !app.in_region(off, self.pipe_size) || port >= self.fallback.len() {
            app.counters.reject_bad_register_value += 1;
            return;
        }
        if p.base != 0 && p.port as usize != port {
            // Moving to another port: its old port's steering forgets it.
            app.rules -= self.flows.retain(|x| x == pid);
            self.fallback[p.port as usize].remove(pid);
        }
        (p.base, p.head, p.tail, p.outstanding, p.port) = (off, 0, 0, false, port as u16);
        p.stream = stream;
    }
}
