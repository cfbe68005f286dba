//! The RX path: steering a frame that arrived from the wire and writing it
//! into its frame pipe, stream pipe or descriptor queue, or counting why
//! not; and the generator's frames on their way in, run by run.

use pcie_model::{PcieCounters, TrafficClass};

use super::evict;
use super::notify::{notify_pipe, visible_at};
use super::shared::{App, LinesAhead};
use super::state::{Core, Full, TraceEvent, RUN_SLOTS};
use crate::counters::{PipeWriteMode, PortCounters};
use crate::layout;
use crate::port;
use crate::steering;
use crate::wire::{self, FrameError, FLIT};

/// The RX path of one port as the destination of its generator's frames.
/// The caller calls [`Core::close_runs`] when the generator is done.
pub(super) struct RxSink<'a> {
    pub(super) core: &'a mut Core,
    pub(super) port: usize,
    pub(super) counters: &'a mut PortCounters,
    /// Frames the NIC dropped as they arrived.
    pub(super) dropped: u64,
}

impl port::FrameSink for &mut RxSink<'_> {
    #[inline(always)]
    fn frame(&mut self, frame: &[u8], pre: Option<port::Precomputed<'_>>) {
        let core = &mut *self.core;
        if let Some((c, memo)) = &pre {
            let t = memo.remembered();
            let s = t as usize & (RUN_SLOTS - 1);
            let run = &core.runs[s];
            if run.target == t && memo.target_at(run.flows_version, run.fallback_version) == Some(t)
            {
                if t >= layout::DESC_TARGET_BASE {
                    if core.desc_run_frame(s, frame, c.hash) {
                        return;
                    }
                } else if !c.place.marker && run.room as usize >= c.place.flits {
                    core.pipe_run_frame(s, &frame[..c.place.len], c.place.flits as u32);
                    return;
                }
            }
        }
        // The whole way. First close the run in the slot of the frame's
        // target (it may be the target's own), or every run if the target
        // is not known yet (no current remembered steering).
        let current = pre.as_ref().and_then(|(_, memo)| {
            memo.target_at(core.flows.version(), core.fallback[self.port].version())
        });
        match current {
            Some(t) => core.close_run(t as usize & (RUN_SLOTS - 1)),
            None => core.close_runs(),
        }
        match core.deliver(self.port, self.counters, frame, pre) {
            Some(t) => core.open_run(self.port, t),
            None => self.dropped += 1,
        }
    }
}

impl Core {
    /// The RX path: steer a frame that arrived from the wire and write it into
    /// its pipe, or count why not. The caller counts the frame's arrival in
    /// `pc` (`rx_frames`, `rx_bytes`). The frame is stamped with its round
    /// trip if the pipe's owner has timestamping on for `port`.
    /// Returns its steering target (a frame pipe or a descriptor queue) if
    /// it was written there.
    #[inline(always)]
    pub(super) fn deliver(
        &mut self,
        port: usize,
        pc: &mut PortCounters,
        frame: &[u8],
        pre: Option<crate::port::Precomputed<'_>>,
    ) -> Option<u32> {
        let fallback = &mut self.fallback[port];
        let (place, hash, target) = match pre {
            Some((c, memo)) => (
                c.place,
                c.hash,
                steering::steer_memo(&self.flows, fallback, port as u16, c, memo),
            ),
            None => match wire::classify_full(frame) {
                Ok(c) => (
                    c.place,
                    c.hash,
                    steering::steer_classified(&self.flows, fallback, port as u16, &c),
                ),
                Err(FrameError::Oversize) => {
                    pc.drop_oversize += 1;
                    return None;
                }
                Err(_) => {
                    pc.drop_malformed += 1;
                    return None;
                }
            },
        };
        let Some(pid) = target else {
            pc.drop_no_match += 1;
            return None;
        };
        if pid >= layout::DESC_TARGET_BASE {
            let q = (pid - layout::DESC_TARGET_BASE) as usize;
            return self.deliver_desc(q, pc, frame, hash).then_some(pid);
        }
        let pid = pid as usize;
        // Where it goes and whether it fits; if not, apply the application's
        // posted writes (it may have freed room) and decide again, once.
        let mut looked = false;
        let (owner, notify) = loop {
            let p = &self.pipes[pid];
            let owner = p.owner as usize;
            if p.base == 0 || self.apps[owner].is_none() {
                pc.drop_no_match += 1;
                return None;
            }
            if p.stream {
                // Applying the posted writes may disable the pipe or make it
                // a frame pipe: decide again from the top after looking.
                if !looked && self.stream_lacks_room(pid, frame.len()) {
                    looked = true;
                    self.look_before_drop(owner);
                    continue;
                }
                self.deliver_stream(pid, frame);
                return None;
            }
            let notify = self.per_packet || !p.outstanding;
            match self.lacks_room(pid, owner, place.flits, notify) {
                None => break (owner, notify),
                Some(_) if !looked => {
                    looked = true;
                    self.look_before_drop(owner);
                }
                Some(full) => {
                    let pcs = &mut self.pipe_counters[pid];
                    match full {
                        Full::Pipe => pcs.drop_pipe_full += 1,
                        Full::NotificationRing => pcs.drop_notif_ring_full += 1,
                    }
                    return None;
                }
            }
        };
        let pipe = &mut self.pipes[pid];
        let pcs = &mut self.pipe_counters[pid];
        let ts = self.ts_offset[owner * self.nports + port];
        let app = self.apps[owner].as_mut().expect("checked above");
        let mask = self.pipe_flits - 1;
        // DMA the frame: bursts never cross the end of the ring.
        let mut tail = pipe.tail;
        if place.marker {
            let mut m = [0u8; FLIT];
            wire::write_marker(&mut m, place.len);
            let off = pipe.base + tail as usize * FLIT;
            app.write(off, &m);
            self.pcie
                .record_dma_write(TrafficClass::Data, off as u64, FLIT as u64);
            tail = (tail + 1) & mask;
        }
        let pos = tail as usize * FLIT;
        write_ring(
            app,
            &mut self.pcie,
            pipe.base,
            self.pipe_size,
            pos,
            &frame[..place.len],
            FLIT,
        );
        if let Some(ts) = ts {
            let off = ts.offset;
            if off + 4 <= place.len {
                // Replace the send time with the round-trip time.
                let sent = frame[off..off + 4].try_into().expect("4 bytes");
                let b = ts.format.round_trip(sent, self.clock.now_ns());
                let at = (pos + off) % self.pipe_size;
                let first = 4.min(self.pipe_size - at);
                app.write(pipe.base + at, &b[..first]);
                if first < 4 {
                    app.write(pipe.base, &b[first..]);
                }
            }
        }
        let from = pipe.tail as usize * FLIT;
        pipe.tail = (tail + wire::flits(place.len) as u32) & mask;
        // Short frames only: see [`evict`] for where it pays.
        if place.flits <= evict::MAX_FLITS {
            self.short_frames += 1;
            if self.evict_ahead != 0 {
                let to = pipe.tail as usize * FLIT;
                let op = if self.prefetch_ahead {
                    let free = pipe.head.wrapping_sub(pipe.tail).wrapping_sub(1) & mask;
                    LinesAhead::Prefetch {
                        free: free as usize * FLIT,
                    }
                } else {
                    LinesAhead::Evict
                };
                app.ahead_ring(pipe.base, self.pipe_size, from, to, self.evict_ahead, op);
            }
        }
        pcs.rx_frames += 1;
        pcs.rx_bytes += place.len as u64;
        self.frames += 1;
        self.flits_in += place.flits as u64;
        if let Some(t) = self.trace.as_mut() {
            t.push(TraceEvent::Frame { pipe: pid as u32 });
        }
        if notify {
            let vis = visible_at(&self.clock, self.latency);
            let (pcie, trace) = (&mut self.pcie, &mut self.trace);
            notify_pipe(app, pcie, trace, self.ring_mask, pid, pipe, pcs, vis);
        }
        Some(pid as u32)
    }

    /// Flits of all enabled frame pipes: what single-line frames (the
    /// shortest the chooser counts) take to go once round each of them.
    pub(super) fn frame_pipe_flits(&self) -> u64 {
        let n = self
            .pipes
            .iter()
            .filter(|p| p.base != 0 && !p.stream)
            .count();
        n as u64 * u64::from(self.pipe_flits)
    }

    /// What a frame of `flits` for enabled frame pipe `pid` of application
    /// `owner` finds full, if anything (the notification ring only matters
    /// when the frame is to be `notify`-ed).
    #[inline]
    fn lacks_room(&self, pid: usize, owner: usize, flits: usize, notify: bool) -> Option<Full> {
        let p = &self.pipes[pid];
        let free = layout::ring_free(p.head, p.tail, self.pipe_flits - 1);
        if flits as u32 > free {
            return Some(Full::Pipe);
        }
        if notify {
            let nb = &self.apps[owner].as_ref()?.nb;
            if nb.rx_ring == 0 || (nb.rx_tail + 1) & self.ring_mask == nb.rx_head {
                return Some(Full::NotificationRing);
            }
        }
        None
    }

    /// Whether stream pipe `pid` may lack room for a frame of `len` bytes
    /// (a quick bound on its payload; [`Core::deliver_stream`] decides).
    #[inline]
    fn stream_lacks_room(&self, pid: usize, len: usize) -> bool {
        let p = &self.pipes[pid];
        let used = p.tail.wrapping_sub(p.head) & (self.pipe_size as u32 - 1);
        used as usize + len + FLIT > self.pipe_size
    }

    /// The RX path of a stream pipe (enabled, owner attached: the caller
    /// checked, with no register write applied since): append the frame's
    /// UDP payload.
    fn deliver_stream(&mut self, pid: usize, frame: &[u8]) {
        let pipe = &mut self.pipes[pid];
        let pcs = &mut self.pipe_counters[pid];
        let Some(payload) = udp_payload(frame) else {
            pcs.drop_not_udp += 1;
            return;
        };
        let app = self.apps[pipe.owner as usize]
            .as_mut()
            .expect("caller checked");
        let mask = self.pipe_size as u32 - 1;
        // One flit's worth of bytes is kept free, as in a frame pipe.
        let used = pipe.tail.wrapping_sub(pipe.head) & mask;
        let free = (mask + 1 - FLIT as u32).saturating_sub(used);
        if payload.len() as u32 > free {
            pcs.drop_pipe_full += 1;
            return;
        }
        let notify = self.per_packet || !pipe.outstanding;
        if notify {
            let nb = &app.nb;
            if nb.rx_ring == 0 || (nb.rx_tail + 1) & self.ring_mask == nb.rx_head {
                pcs.drop_notif_ring_full += 1;
                return;
            }
        }
        let pos = pipe.tail as usize;
        write_ring(
            app,
            &mut self.pcie,
            pipe.base,
            self.pipe_size,
            pos,
            payload,
            1,
        );
        let from = pipe.tail as usize;
        pipe.tail = (pipe.tail + payload.len() as u32) & mask;
        if self.evict_ahead != 0 {
            // Further ahead than in frame pipes: one write may fill many
            // lines (see [`evict`]).
            let ahead = self.evict_ahead * evict::STREAM_AHEAD_FACTOR;
            let to = pipe.tail as usize;
            app.ahead_ring(
                pipe.base,
                self.pipe_size,
                from,
                to,
                ahead,
                LinesAhead::Evict,
            );
        }
        pcs.rx_frames += 1;
        pcs.rx_bytes += payload.len() as u64;
        self.frames += 1;
        self.flits_in += wire::flits(payload.len()) as u64;
        if let Some(t) = self.trace.as_mut() {
            t.push(TraceEvent::Frame { pipe: pid as u32 });
        }
        if notify {
            let vis = visible_at(&self.clock, self.latency);
            let (pcie, trace) = (&mut self.pcie, &mut self.trace);
            notify_pipe(app, pcie, trace, self.ring_mask, pid, pipe, pcs, vis);
        }
    }

    /// Writes short frames `mode`'s way from now on, `bytes` ahead of the
    /// tail for the ways that work ahead (falling back where the CPU lacks
    /// an instruction: see [`Engine::set_pipe_writes`]).
    pub(super) fn set_pipe_writes(&mut self, mode: PipeWriteMode, bytes: usize) {
        use PipeWriteMode::*;
        let mode = match mode {
            NonTemporal if !evict::non_temporal_supported() => Plain,
            PrefetchAhead if !evict::prefetch_for_write_supported() => EvictAhead,
            m => m,
        };
        // Streaming covers the frames of runs; frames that go the whole
        // way, and stream pipes, keep evicting ahead.
        self.evict_ahead = if mode == Plain { 0 } else { bytes };
        self.non_temporal = mode == NonTemporal;
        self.prefetch_ahead = mode == PrefetchAhead;
        self.pipe_writes = match mode {
            EvictAhead | PrefetchAhead if bytes == 0 => Plain,
            m => m,
        };
    }
}

/// DMA-writes `data` into a ring of `size` bytes at `base` (region offset),
/// starting at `pos`, in two bursts if it wraps (a burst never crosses the
/// end); each burst is accounted rounded up to `round` bytes (64 for a frame
/// pipe, whose frames occupy whole flits; 1 for a stream pipe).
#[inline(always)]
fn write_ring(
    app: &App,
    pcie: &mut PcieCounters,
    base: usize,
    size: usize,
    pos: usize,
    data: &[u8],
    round: usize,
) {
    let first = data.len().min(size - pos);
    app.write(base + pos, &data[..first]);
    pcie.record_dma_write(
        TrafficClass::Data,
        (base + pos) as u64,
        first.next_multiple_of(round) as u64,
    );
    if first < data.len() {
        let rest = data.len() - first;
        app.write(base, &data[first..]);
        pcie.record_dma_write(
            TrafficClass::Data,
            base as u64,
            rest.next_multiple_of(round) as u64,
        );
    }
}

/// The UDP payload of an IPv4 or IPv6 frame (untagged).
fn udp_payload(frame: &[u8]) -> Option<&[u8]> {
    let ty = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let (start, end) = match ty {
        wire::ETHERTYPE_IPV4 => {
            let ip = frame.get(14..34)?;
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let tot = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if ip[9] != wire::PROTO_UDP || ihl < 20 || tot < ihl + 8 {
                return None;
            }
            (14 + ihl + 8, 14 + tot)
        }
        wire::ETHERTYPE_IPV6 => {
            let ip = frame.get(14..54)?;
            let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            if ip[6] != wire::PROTO_UDP || plen < 8 {
                return None;
            }
            (14 + 40 + 8, 14 + 40 + plen)
        }
        _ => return None,
    };
    frame.get(start..end)
}

#[cfg(test)]
mod tests {
    use super::udp_payload;
    use crate::wire::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, PROTO_TCP, PROTO_UDP};

    /// An untagged IPv4 UDP frame carrying `payload`, padded to `pad_to`.
    fn v4(payload: &[u8], pad_to: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        let tot = (20 + 8 + payload.len()) as u16;
        f[16..18].copy_from_slice(&tot.to_be_bytes());
        f[23] = PROTO_UDP;
        f.extend_from_slice(payload);
        f.resize(f.len().max(pad_to), 0xee);
        f
    }

    fn v6(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        f[14] = 0x60;
        let plen = (8 + payload.len()) as u16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        f[20] = PROTO_UDP;
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_udp_payload_ends_where_the_ip_length_says() {
        // A short datagram in a minimum-size frame: the padding is not
        // payload.
        let f = v4(b"hello", 60);
        assert_eq!(f.len(), 60);
        assert_eq!(udp_payload(&f), Some(&b"hello"[..]));
        assert_eq!(udp_payload(&v4(&[7u8; 1000], 0)), Some(&[7u8; 1000][..]));
        assert_eq!(udp_payload(&v4(b"", 60)), Some(&b""[..]));
        assert_eq!(udp_payload(&v6(b"over six")), Some(&b"over six"[..]));
    }

    #[test]
    fn ip_options_move_the_payload() {
        let mut f = v4(b"", 0);
        // IHL 6: 4 bytes of options before the UDP header.
        f[14] = 0x46;
        f.splice(34..34, [1u8, 1, 1, 1]);
        f.extend_from_slice(b"data");
        f[16..18].copy_from_slice(&(24u16 + 8 + 4).to_be_bytes());
        assert_eq!(udp_payload(&f), Some(&b"data"[..]));
    }

    #[test]
    fn what_is_not_a_whole_udp_datagram_has_no_payload() {
        let mut tcp = v4(b"hello", 60);
        tcp[23] = PROTO_TCP;
        assert_eq!(udp_payload(&tcp), None);
        let mut tcp6 = v6(b"hello");
        tcp6[20] = PROTO_TCP;
        assert_eq!(udp_payload(&tcp6), None);
        // A header length below 20 bytes.
        let mut short_ihl = v4(b"hello", 60);
        short_ihl[14] = 0x44;
        assert_eq!(udp_payload(&short_ihl), None);
        // A total length shorter than the headers.
        let mut short_tot = v4(b"hello", 60);
        short_tot[16..18].copy_from_slice(&27u16.to_be_bytes());
        assert_eq!(udp_payload(&short_tot), None);
        let mut short_plen = v6(b"hello");
        short_plen[18..20].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(udp_payload(&short_plen), None);
        // A length beyond the frame's end.
        let mut long_tot = v4(b"hello", 0);
        long_tot[16..18].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(udp_payload(&long_tot), None);
        // Tagged (VLAN) or another ethertype, and frames cut short.
        let mut vlan = v4(b"hello", 60);
        vlan[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        assert_eq!(udp_payload(&vlan), None);
        let f = v4(b"hello", 60);
        for cut in [0, 12, 13, 20, 33] {
            assert_eq!(udp_payload(&f[..cut]), None, "cut at {cut}");
        }
        assert_eq!(udp_payload(&v6(b"x")[..53]), None);
    }
}
