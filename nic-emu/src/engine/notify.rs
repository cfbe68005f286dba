//! RX notifications: the reactive rule (a head write while data is pending
//! is answered with a notification), per-packet notifications, prefetching
//! by head rewrite, and the notifications a full ring owes.

use pcie_model::{PcieCounters, TrafficClass};

use super::shared::{App, NOTIF_BYTES};
use super::state::{Core, PipeState, TraceEvent};
use crate::clock::Clock;
use crate::counters::PipeCounters;
use crate::layout;

impl Core {
    /// Software handed pipe bytes back (or rewrote the head to prefetch).
    pub(super) fn pipe_head_write(&mut self, slot: usize, pid: u32, head: u32) {
        let app = self.apps[slot].as_mut().expect("caller checked");
        let p = &mut self.pipes[pid as usize];
        let mask = if p.stream {
            self.pipe_size as u32 - 1
        } else {
            self.pipe_flits - 1
        };
        if p.base == 0 || head > mask {
            app.counters.reject_bad_register_value += 1;
            return;
        }
        let used = layout::ring_used(p.head, p.tail, mask);
        let adv = layout::ring_used(p.head, head, mask);
        if adv > used {
            // A head beyond the tail would hand the NIC bytes software has
            // not read: refuse it.
            app.counters.reject_bad_register_value += 1;
            return;
        }
        let vis = visible_at(&self.clock, self.latency);
        let pc = &mut self.pipe_counters[pid as usize];
        pc.head_writes += 1;
        if let Some(t) = self.trace.as_mut() {
            t.push(TraceEvent::HeadWrite { pipe: pid, head });
        }
        if adv == 0 {
            pc.head_rewrites += 1;
        }
        p.head = head;
        if self.per_packet {
            return;
        }
        if head == p.tail {
            p.outstanding = false;
        } else if push_rx_notif(app, &mut self.pcie, self.ring_mask, pid, p.tail, vis) {
            // Reactive rule: data is still pending, so tell software now.
            p.outstanding = true;
            pc.notifications += 1;
            if let Some(t) = self.trace.as_mut() {
                t.push(TraceEvent::Notify {
                    pipe: pid,
                    tail: p.tail,
                });
            }
        } else {
            app.counters.notif_ring_full += 1;
            p.outstanding = false;
            if !app.owed.contains(&pid) {
                app.owed.push(pid);
            }
        }
    }

    /// Sends the notifications a full ring refused at head writes (see
    /// `App::owed`), while the ring has room.
    #[cold]
    pub(super) fn notify_owed(&mut self, slot: usize) {
        let vis = visible_at(&self.clock, self.latency);
        let app = self.apps[slot].as_mut().expect("caller checked");
        while let Some(&pid) = app.owed.last() {
            let p = &mut self.pipes[pid as usize];
            // Still enabled, its own, with data and nothing announced since.
            if p.base != 0 && app.owns_pipe(pid) && !p.outstanding && p.head != p.tail {
                if !push_rx_notif(app, &mut self.pcie, self.ring_mask, pid, p.tail, vis) {
                    return;
                }
                p.outstanding = true;
                self.pipe_counters[pid as usize].notifications += 1;
                if let Some(t) = self.trace.as_mut() {
                    t.push(TraceEvent::Notify {
                        pipe: pid,
                        tail: p.tail,
                    });
                }
            }
            app.owed.pop();
        }
    }
}

/// When a notification or completion written now reaches software: `now +
/// latency` with an emulated interconnect, 0 (at once) without.
#[inline]
pub(super) fn visible_at(clock: &Clock, latency: u64) -> u64 {
    if latency > 0 {
        clock.now_ns() + latency
    } else {
        0
    }
}

/// Notifies software that pipe `pid` now ends at its tail, and marks the
/// notification outstanding (the frame and stream RX paths share this).
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn notify_pipe(
    app: &mut App,
    pcie: &mut PcieCounters,
    trace: &mut Option<Vec<TraceEvent>>,
    ring_mask: u32,
    pid: usize,
    pipe: &mut PipeState,
    pcs: &mut PipeCounters,
    visible_ns: u64,
) {
    push_rx_notif(app, pcie, ring_mask, pid as u32, pipe.tail, visible_ns);
    pipe.outstanding = true;
    pcs.notifications += 1;
    if let Some(t) = trace.as_mut() {
        t.push(TraceEvent::Notify {
            pipe: pid as u32,
            tail: pipe.tail,
        });
    }
}

/// Writes an RX notification; false if the ring is full or disabled.
#[inline]
fn push_rx_notif(
    app: &mut App,
    pcie: &mut PcieCounters,
    mask: u32,
    pipe: u32,
    tail: u32,
    visible_ns: u64,
) -> bool {
    let nb = &app.nb;
    if nb.rx_ring == 0 || (nb.rx_tail + 1) & mask == nb.rx_head {
        return false;
    }
    let (ring, i) = (nb.rx_ring, nb.rx_tail);
    // SYNC POINT C (Release, in `publish`): the frame bytes up to `tail`
    // are visible to software once it sees the notification.
    app.rx_notif(ring, i).publish(pipe, tail, visible_ns);
    pcie.record_dma_write(
        TrafficClass::Notification,
        (ring + i as usize * layout::NOTIF_SLOT) as u64,
        NOTIF_BYTES,
    );
    app.nb.rx_tail = (i + 1) & mask;
    app.counters.rx_notifications += 1;
    true
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use super::visible_at;
    use crate::clock::Clock;

    #[test]
    fn a_notification_is_visible_at_once_without_an_interconnect() {
        let clock = Clock::Manual(Arc::new(AtomicU64::new(1_000)));
        assert_eq!(visible_at(&clock, 0), 0);
        assert_eq!(visible_at(&clock, 250), 1_250);
    }
}
