//! The TX path of Ensō pipes: reading an application's TX notifications,
//! reassembling the frames in their data, transmitting them (within the
//! port's rate limit), and completing the notifications.

use enso_abi::timestamp::Timestamping;
use pcie_model::TrafficClass;

use super::shared::{read_region, TxCursor, NOTIF_BYTES};
use super::state::Core;
use crate::clock::Clock;
use crate::layout::{self, TxRequest};
use crate::port::{self, Port, Wire};
use crate::wire::{self, FrameError, FLIT};

/// Frames transmitted per application per step at most.
const TX_BUDGET: usize = 64;

/// Where the TX path hands the frames it reassembled, with their send
/// times: a type whose method is always inlined into the loop (a closure's
/// body called from more than one place is not).
trait TxSink {
    fn send(&mut self, frame: &[u8], now: u64);
}

/// The port's generator, which checks the frames (as a batch).
struct ToGenerator<'a>(port::Returns<'a>);

impl TxSink for ToGenerator<'_> {
    #[inline(always)]
    fn send(&mut self, frame: &[u8], now: u64) {
        self.0.on_return(frame, now);
    }
}

/// Whatever else is at the other end of port `port`'s wire.
struct ToWire<'a> {
    ports: &'a mut [Port],
    port: usize,
}

impl TxSink for ToWire<'_> {
    #[inline(always)]
    fn send(&mut self, frame: &[u8], now: u64) {
        port::transmit_uncounted(self.ports, self.port, frame, now);
    }
}

impl Core {
    /// The TX path of application `slot`: read TX notifications, transmit the
    /// frames in their data, complete them.
    pub(super) fn process_tx(&mut self, slot: usize, ports: &mut [Port], now: u64) -> usize {
        let mut frames = 0;
        let mut rounds = 0;
        while frames < TX_BUDGET && rounds < TX_BUDGET {
            rounds += 1;
            let app = self.apps[slot].as_mut().expect("caller checked");
            let cur = match app.tx {
                Some(c) => c,
                None => {
                    let nb = &app.nb;
                    if nb.tx_ring == 0 || nb.tx_head == nb.tx_tail {
                        break;
                    }
                    let slot_i = nb.tx_head;
                    match app.tx_notif(nb.tx_ring, slot_i).read() {
                        TxRequest::Data {
                            address,
                            length,
                            port,
                        } => {
                            let (addr, len) = (address as usize, length as usize);
                            let port = port as usize;
                            app.counters.tx_notifications += 1;
                            if len > layout::MAX_TX_LEN as usize
                                || !app.in_region(addr, len)
                                || port >= ports.len()
                            {
                                app.counters.reject_bad_tx_notification += 1;
                                self.complete_tx(slot);
                                continue;
                            }
                            self.pcie
                                .record_dma_read(TrafficClass::Data, addr as u64, len as u64);
                            let c = TxCursor {
                                addr,
                                len,
                                off: 0,
                                port,
                                evict: self.evict_tx && !app.in_rx_pipes(addr, len),
                            };
                            self.apps[slot].as_mut().expect("checked").tx = Some(c);
                            c
                        }
                        TxRequest::Config { id, args, port } => {
                            app.counters.config_notifications += 1;
                            let st = self.apply_config(slot, id, args, port as usize, now);
                            self.complete_tx_status(slot, Some(st));
                            continue;
                        }
                        TxRequest::Bad(_) => {
                            app.counters.reject_bad_tx_notification += 1;
                            self.complete_tx(slot);
                            continue;
                        }
                    }
                }
            };
            let lim = self.port_cfg(slot, cur.port);
            if let Some(tb) = self.limiter[lim].as_mut() {
                if !tb.refill(now) {
                    break; // the port's rate limit is used up for now
                }
            }
            frames += self.transmit_some(slot, cur, ports, TX_BUDGET - frames, now);
        }
        frames
    }

    /// Transmits frames of the current notification; completes it when done.
    fn transmit_some(
        &mut self,
        slot: usize,
        c: TxCursor,
        ports: &mut [Port],
        budget: usize,
        step_now: u64,
    ) -> usize {
        // What is at the other end of the port is looked at once per call:
        // a generator gets the frames straight into its checker.
        let (sent, bytes) = match &mut ports[c.port].wire {
            Wire::Generator(g) => {
                self.transmit_frames(slot, c, budget, step_now, ToGenerator(g.returns()))
            }
            _ => {
                let to = ToWire {
                    ports: &mut *ports,
                    port: c.port,
                };
                self.transmit_frames(slot, c, budget, step_now, to)
            }
        };
        let pc = &mut ports[c.port].counters;
        pc.tx_frames += sent as u64;
        pc.tx_bytes += bytes;
        sent
    }

    /// The body of [`Core::transmit_some`]: reassembles frames from the
    /// notification's data and hands each to `to` with its send time;
    /// returns the frames and bytes sent (the caller counts them at the port).
    #[inline(always)]
    fn transmit_frames(
        &mut self,
        slot: usize,
        mut c: TxCursor,
        budget: usize,
        step_now: u64,
        mut to: impl TxSink,
    ) -> (usize, u64) {
        // Neither changes while a notification is transmitted (both are
        // configured through TX notifications, between them).
        let cfg = self.port_cfg(slot, c.port);
        let ts = self.ts_offset[cfg];
        let limited = self.limiter[cfg].is_some();
        let app = self.apps[slot].as_mut().expect("caller checked");
        let asm = &mut app.asm;
        let buf = &mut asm.buf[..];
        // The assembler's state, kept in locals while frames are read.
        let (mut fill, mut need, mut start, mut pad) = (asm.fill, asm.need, asm.start, asm.pad);
        let mut sent = 0;
        let mut bytes = 0u64;
        while c.off < c.len && sent < budget {
            let avail = c.len - c.off;
            if pad > 0 {
                let k = pad.min(avail);
                pad -= k;
                c.off += k;
                continue;
            }
            if need == 0 && fill == 0 && avail >= FLIT {
                // The usual case: a frame starts with a whole flit in this
                // notification, read with a fixed-size copy the compiler
                // inlines (no call into `memcpy`) and delimited without
                // length checks. In bounds: `addr..addr + len` was checked
                // when read.
                let flit: &mut [u8; FLIT] = (&mut buf[..FLIT]).try_into().expect("FLIT bytes");
                read_region(&app.region, c.addr + c.off, flit);
                c.off += FLIT;
                match wire::delimit(flit) {
                    Ok(d) if d.start + d.len <= FLIT => {
                        // The whole frame is in this flit (a marker is a
                        // flit of its own, so it starts at 0) and uses all
                        // of it: sent at once, no padding follows.
                        let frame = &mut flit[..d.len];
                        let now = stamp_tx(frame, ts, &self.clock, step_now);
                        to.send(frame, now);
                        bytes += d.len as u64;
                        sent += 1;
                        if limited {
                            if let Some(tb) = self.limiter[cfg].as_mut() {
                                if !tb.take(1) {
                                    break;
                                }
                            }
                        }
                        continue;
                    }
                    Ok(d) => {
                        fill = FLIT;
                        need = d.start + d.len;
                        start = d.start;
                    }
                    Err(_) => {
                        app.counters.reject_bad_tx_frame += 1;
                        // This flit and the rest of the notification.
                        app.counters.tx_bytes_discarded += (FLIT + c.len - c.off) as u64;
                        (fill, need, start, pad) = (0, 0, 0, 0);
                        c.off = c.len; // cannot resynchronise: drop the rest
                        break;
                    }
                }
            } else if need == 0 {
                // Less than a flit of the frame's start is here (the rest of
                // one, or the start of one, at a notification's end).
                let k = (FLIT - fill).min(avail);
                read_region(&app.region, c.addr + c.off, &mut buf[fill..fill + k]);
                fill += k;
                c.off += k;
                match wire::delimit(&buf[..fill]) {
                    Ok(d) => {
                        need = d.start + d.len;
                        start = d.start;
                    }
                    Err(FrameError::Truncated) if fill < FLIT => {
                        // Not enough header yet: wait for the next notification.
                        continue;
                    }
                    Err(_) => {
                        app.counters.reject_bad_tx_frame += 1;
                        // The frame's start and the rest of the notification.
                        app.counters.tx_bytes_discarded += (fill + c.len - c.off) as u64;
                        (fill, need, start, pad) = (0, 0, 0, 0);
                        c.off = c.len; // cannot resynchronise: drop the rest
                        break;
                    }
                }
            }
            if fill < need {
                let k = (need - fill).min(c.len - c.off);
                read_region(&app.region, c.addr + c.off, &mut buf[fill..fill + k]);
                fill += k;
                c.off += k;
            }
            if fill >= need {
                let len = need - start;
                let frame = &mut buf[start..need];
                let now = stamp_tx(frame, ts, &self.clock, step_now);
                to.send(frame, now);
                bytes += len as u64;
                let total = FLIT * wire::flits(len) + start;
                pad = total - fill;
                fill = 0;
                need = 0;
                start = 0;
                sent += 1;
                if limited {
                    if let Some(tb) = self.limiter[cfg].as_mut() {
                        if !tb.take(wire::flits(len) as u64) {
                            break;
                        }
                    }
                }
            }
        }
        app.counters.tx_frames += sent as u64;
        app.counters.tx_bytes += bytes;
        self.frames += sent as u64;
        if c.off >= c.len {
            // Padding never continues into the next notification.
            pad = 0;
        }
        let asm = &mut app.asm;
        (asm.fill, asm.need, asm.start, asm.pad) = (fill, need, start, pad);
        if c.off >= c.len {
            if c.evict {
                // Done with these bytes: drop this core's copies (see
                // `Core::evict_tx`).
                app.evict_span(c.addr, c.len);
            }
            app.tx = None;
            self.complete_tx(slot);
        } else {
            app.tx = Some(c);
        }
        (sent, bytes)
    }

    /// Completes the TX notification at the head by clearing its signal.
    fn complete_tx(&mut self, slot: usize) {
        self.complete_tx_status(slot, None);
    }

    /// Completes the TX notification at the head, with the answer to a
    /// configuration (`Some`) written first.
    fn complete_tx_status(&mut self, slot: usize, status: Option<u64>) {
        let app = self.apps[slot].as_mut().expect("caller checked");
        let ring = app.nb.tx_ring;
        let i = app.nb.tx_head;
        let vis = (self.latency > 0).then(|| self.clock.now_ns() + self.latency);
        // SYNC POINT D (Release, in `complete`): the NIC no longer reads the
        // data once software sees the completion (and sees the status).
        let n = app.tx_notif(ring, i);
        match status {
            Some(s) => n.complete_config(s, vis),
            None => n.complete(vis),
        }
        self.pcie.record_dma_write(
            TrafficClass::Notification,
            (ring + i as usize * layout::NOTIF_SLOT) as u64,
            NOTIF_BYTES,
        );
        app.nb.tx_head = (i + 1) & self.ring_mask;
    }
}

/// The send time of a frame leaving at step time `step_now`; with
/// timestamping on (`ts`: the stamp's offset), the time of this very frame,
/// written into it when it is long enough.
#[inline(always)]
fn stamp_tx(frame: &mut [u8], ts: Option<Timestamping>, clock: &Clock, step_now: u64) -> u64 {
    let Some(ts) = ts else {
        return step_now;
    };
    let now = clock.now_ns();
    let off = ts.offset;
    if off + 4 <= frame.len() {
        frame[off..off + 4].copy_from_slice(&ts.format.stamp(now));
    }
    now
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use enso_abi::timestamp::{Timestamping, TsFormat};

    use super::stamp_tx;
    use crate::clock::Clock;

    fn at(offset: usize) -> Option<Timestamping> {
        Some(Timestamping {
            offset,
            format: TsFormat::Native,
        })
    }

    #[test]
    fn without_timestamping_a_frame_leaves_at_the_step_time_untouched() {
        let clock = Clock::Manual(Arc::new(AtomicU64::new(9_999)));
        let mut frame = [0xabu8; 64];
        assert_eq!(stamp_tx(&mut frame, None, &clock, 77), 77);
        assert_eq!(frame, [0xab; 64]);
    }

    #[test]
    fn with_timestamping_the_frame_carries_its_own_send_time() {
        let t = (5u64 << 32) | 0x0102_0304;
        let clock = Clock::Manual(Arc::new(AtomicU64::new(t)));
        let mut frame = [0u8; 64];
        assert_eq!(stamp_tx(&mut frame, at(60), &clock, 77), t);
        // The low 32 bits, little-endian, at the offset; nothing else.
        assert_eq!(frame[60..], [4, 3, 2, 1]);
        assert!(frame[..60].iter().all(|&b| b == 0));
        // Too short for the stamp: the time is still the frame's own.
        let mut short = [0u8; 63];
        assert_eq!(stamp_tx(&mut short, at(60), &clock, 77), t);
        assert_eq!(short, [0; 63]);
    }
}
