//! The fast path for runs of frames: frames a generator sends to a target
//! it sent a frame to before in the same step are written without deciding
//! again what [`Core::deliver`] decided for the first (see [`Run`]).

use pcie_model::TrafficClass;

use super::evict;
use super::shared::{copy_bytes, lines_ahead_of, LinesAhead};
use super::state::{Core, Run, RUN_SLOTS};
use crate::layout;
use crate::wire::FLIT;

impl Core {
    /// Closes every open run.
    #[inline]
    pub(super) fn close_runs(&mut self) {
        if self.runs_open {
            for slot in 0..RUN_SLOTS {
                self.close_run(slot);
            }
            self.runs_open = false;
        }
    }

    /// Gives a pipe its tail back and adds the run's counts.
    #[inline]
    pub(super) fn close_run(&mut self, slot: usize) {
        let target = self.runs[slot].target;
        if target == Run::NONE {
            return;
        }
        let run = std::mem::replace(&mut self.runs[slot], Run::CLOSED);
        if self.unfenced {
            // The run's non-temporal stores are weakly ordered: this fence
            // puts them before every later store, among them the
            // notification's or tail's Release store that publishes the
            // tail set below (its Acquire partner is the application's
            // load of that notification or tail).
            evict::store_fence();
            self.unfenced = false;
        }
        let c = run.counts;
        if target >= layout::DESC_TARGET_BASE {
            let qc = &mut self.dq_counters[(target - layout::DESC_TARGET_BASE) as usize];
            qc.rx_frames += c.frames;
            qc.rx_bytes += c.bytes;
        } else {
            let pid = target as usize;
            self.pipes[pid].tail = run.tail;
            let pcs = &mut self.pipe_counters[pid];
            pcs.rx_frames += c.frames;
            pcs.rx_bytes += c.bytes;
            self.short_frames += c.short;
        }
        self.frames += c.frames;
        self.run_frames += c.frames;
        self.flits_in += c.flits;
        self.pcie
            .record_dma_writes(TrafficClass::Data, c.frames, c.dma_bytes, c.tlps);
        if c.wb_writes > 0 {
            self.pcie.record_dma_writes(
                TrafficClass::Descriptor,
                c.wb_writes,
                c.wb_bytes,
                c.wb_tlps,
            );
        }
    }

    /// After [`Core::deliver`] wrote a frame for `target` (no run open
    /// for it): opens a run there if the frames that follow need nothing
    /// decided again. `ts` as for `deliver`.
    #[inline]
    pub(super) fn open_run(&mut self, port: usize, target: u32) {
        if self.trace.is_some() {
            return;
        }
        let mut run = Run {
            target,
            flows_version: self.flows.version(),
            fallback_version: self.fallback[port].version(),
            ..Run::CLOSED
        };
        if target < layout::DESC_TARGET_BASE {
            let p = &self.pipes[target as usize];
            if self.per_packet || !p.outstanding || p.stream || p.base == 0 {
                return;
            }
            // Frames its owner stamps are written one by one.
            if self.ts_offset[p.owner as usize * self.nports + port].is_some() {
                return;
            }
            let Some(app) = self.apps[p.owner as usize].as_ref() else {
                return;
            };
            // The whole ring lies in the region (as every enabled pipe's
            // does; checked again so the run's writes can rely on it).
            if !app.in_region(p.base, self.pipe_size) {
                return;
            }
            let free = p.head.wrapping_sub(p.tail).wrapping_sub(1) & (self.pipe_flits - 1);
            run.ring = app.region.as_ptr() as usize + p.base;
            run.base = p.base;
            run.tail = p.tail;
            run.room = free.min(self.pipe_flits - p.tail);
        } else {
            // A queue's frames are stamped by its owner's setting for its
            // own port.
            let dq = &self.dqs[(target - layout::DESC_TARGET_BASE) as usize];
            if self.ts_offset[dq.owner as usize * self.nports + dq.port as usize].is_some() {
                return;
            }
        }
        let slot = target as usize & (RUN_SLOTS - 1);
        self.close_run(slot);
        self.runs[slot] = run;
        self.runs_open = true;
    }

    /// Writes a frame of `flits` lines (no marker) into the pipe of the run
    /// in `slot`, which has room for them before the end of its ring.
    ///
    /// Everything that does not change while the run is open was looked up
    /// when it opened (the ring's place in the engine's mapping, the link's
    /// MPS): a frame costs its copy, its TLP count and its tail.
    #[inline(always)]
    pub(super) fn pipe_run_frame(&mut self, slot: usize, data: &[u8], flits: u32) {
        let shift = self.shifts.mps;
        let run = &mut self.runs[slot];
        debug_assert!(flits <= run.room && data.len() <= flits as usize * FLIT);
        let from = run.tail as usize * FLIT;
        let dst = (run.ring + from) as *mut u8;
        let short = flits as usize <= evict::MAX_FLITS;
        if short && self.non_temporal {
            // SAFETY: the run opened on a pipe whose whole ring lies in its
            // owner's mapped region (`open_run`), which stays mapped while
            // the run is open (runs close before register writes are
            // applied and at the end of every generator pass); `from` is a
            // line start (the ring is page-aligned) and `flits` whole lines
            // fit before the ring's end (`room`). The engine streams only
            // when `evict::non_temporal_supported`. Plain data, published
            // after the fence in `close_run`.
            unsafe { evict::stream_lines(dst, data) };
            self.unfenced = true;
        } else {
            // SAFETY: as above: `data` (at most `flits` lines) lies inside
            // the ring; the application may read it concurrently, as with
            // every write of the engine's (published by the notification's
            // Release store).
            unsafe { copy_bytes(data.as_ptr(), dst, data.len()) };
        }
        let c = &mut run.counts;
        let dma = u64::from(flits) * FLIT as u64;
        c.tlps += pcie_model::tlp::split_count_shift((run.base + from) as u64, dma, shift);
        c.dma_bytes += dma;
        run.tail = (run.tail + flits) & (self.pipe_flits - 1);
        // As in `deliver`: short frames only (and streamed ones need none).
        if short {
            c.short += 1;
            if self.evict_ahead != 0 && !self.non_temporal {
                let to = run.tail as usize * FLIT;
                // `room` is the free space, or less near the ring's end,
                // where a few lines then go without.
                let op = if self.prefetch_ahead {
                    LinesAhead::Prefetch {
                        free: (run.room - flits) as usize * FLIT,
                    }
                } else {
                    LinesAhead::Evict
                };
                lines_ahead_of(run.ring, self.pipe_size, from, to, self.evict_ahead, op);
            }
        }
        run.room -= flits;
        c.frames += 1;
        c.bytes += data.len() as u64;
        c.flits += u64::from(flits);
    }
}
