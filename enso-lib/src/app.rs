//! One body of application logic, run on either interface.
//!
//! An application implements [`PacketHandler`]: it sees one received frame
//! at a time, may change it in place, and says what to do with it. A driver
//! feeds it from an interface: [`EnsoDriver`] from Ensō RX/TX pipes (frames
//! are forwarded in place, zero copy); [`PacketizedDriver`] from
//! descriptor queues, with the same contract.

use crate::device::{Device, RxTxPipe};
use crate::error::{DeviceError, FreeError, RecvError, SendError};
use crate::packetized::{Mbuf, QueueId};

/// What to do with a frame after handling it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Send it back out (as modified in place).
    Forward,
    /// Processed; nothing to send.
    Consume,
    /// Invalid or unwanted; counted as a drop.
    Drop,
}

/// Per-frame application logic, independent of the interface.
pub trait PacketHandler {
    /// Handles one received frame (Ethernet, without FCS).
    fn handle(&mut self, frame: &mut [u8]) -> Verdict;
}

impl<F: FnMut(&mut [u8]) -> Verdict> PacketHandler for F {
    fn handle(&mut self, frame: &mut [u8]) -> Verdict {
        self(frame)
    }
}

/// What a driver counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DriverStats {
    /// Frames handed to the handler.
    pub frames: u64,
    /// Their bytes (frame lengths).
    pub bytes: u64,
    /// Frames the handler forwarded ([`Verdict::Forward`]) and were sent.
    pub forwarded: u64,
    /// Frames the handler consumed (and forwards from RX-only pipes).
    pub consumed: u64,
    /// Frames the handler dropped.
    pub dropped: u64,
    /// Batches (or bursts) handled.
    pub batches: u64,
}

/// Why a driver stopped.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The device stalled or is gone.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Receiving failed.
    #[error(transparent)]
    Recv(#[from] RecvError),
    /// Sending failed.
    #[error(transparent)]
    Send(#[from] SendError),
    /// Freeing failed.
    #[error(transparent)]
    Free(#[from] FreeError),
    /// A pipe held bytes that are not frames.
    #[error("pipe bytes are not frames: {0}")]
    Corrupt(enso_abi::wire::FrameError),
}

/// Runs a [`PacketHandler`] over RX/TX pipes: each batch is handled in
/// place, runs of forwarded frames are sent back zero-copy, runs of
/// consumed or dropped frames are handed back to the NIC.
///
/// It serves every pipe of `dev` that has data, including pipes allocated
/// on `dev` directly (bound to flows, say): give those their port with
/// [`EnsoDriver::set_port`], or they forward out of port 0. Frames of
/// RX-only pipes cannot be sent: there, [`Verdict::Forward`] counts as
/// consumed.
#[derive(Debug)]
pub struct EnsoDriver {
    /// The device handle the driver polls (usable directly, e.g. to bind
    /// flows to its pipes).
    pub dev: Device,
    /// What the driver counted.
    pub stats: DriverStats,
    /// The port each pipe serves (sends go back out of it).
    ports: std::collections::HashMap<crate::RxPipe, u32>,
}

impl EnsoDriver {
    /// A driver over `dev`, with no pipes yet (see
    /// [`EnsoDriver::add_fallback_pipes`]).
    pub fn new(dev: Device) -> Self {
        Self {
            dev,
            stats: DriverStats::default(),
            ports: std::collections::HashMap::new(),
        }
    }

    /// Allocates `n` RX/TX pipes that receive fallback traffic of port 0.
    pub fn add_fallback_pipes(&mut self, n: u32) -> Result<Vec<RxTxPipe>, crate::AllocError> {
        self.add_fallback_pipes_on(0, n)
    }

    /// Allocates `n` RX/TX pipes that receive fallback traffic of `port`;
    /// frames are forwarded back out of the port they came from.
    pub fn add_fallback_pipes_on(
        &mut self,
        port: u32,
        n: u32,
    ) -> Result<Vec<RxTxPipe>, crate::AllocError> {
        let v = (0..n)
            .map(|_| self.dev.alloc_rxtx_pipe_on(port, true))
            .collect::<Result<Vec<_>, _>>()?;
        for p in &v {
            self.ports.insert(p.rx(), port);
        }
        Ok(v)
    }

    /// Forwarded frames of `pipe` (allocated on `dev` directly) go out of
    /// `port`.
    pub fn set_port(&mut self, pipe: RxTxPipe, port: u32) {
        self.ports.insert(pipe.rx(), port);
    }

    /// Handles the frames of one pipe with data, if any. Returns the frames
    /// handled.
    pub fn poll<H: PacketHandler>(&mut self, h: &mut H) -> Result<usize, DriverError> {
        let Some(p) = self.dev.next_pipe_with_data()? else {
            self.dev.reap_completions()?;
            return Ok(0);
        };
        let Some(pipe) = self.dev.as_rxtx(p) else {
            // An RX-only pipe: everything is consumed or dropped.
            return self.poll_rx(p, h);
        };
        // Walk the batch once: runs of equal disposition, in order. A run
        // ends after the flits of its last frame (padding and marker of the
        // next frame excluded), and the loop does run bookkeeping only
        // where the disposition changes.
        let mut runs = [(false, 0usize); 256];
        let mut nruns = 0;
        let (frames, total, err) = {
            let mut b = self.dev.recv(pipe)?;
            let total = b.len();
            let mut frames = 0usize;
            let mut bytes = 0u64;
            // Frames forwarded, consumed, dropped.
            let mut verdicts = [0u64; 3];
            let mut it = b.packets_mut();
            let base = it.base_addr();
            let mut run_fwd = true;
            let mut run_start = 0usize;
            // Where the last frame walked ends (not rounded to a flit).
            let mut end = 0usize;
            for pkt in it.by_ref() {
                if nruns + 1 >= runs.len() {
                    // Too many alternations for one pass: the rest stays in
                    // the pipe for the next poll.
                    break;
                }
                let len = pkt.len();
                let pkt_end = pkt.as_ptr() as usize - base + len;
                let v = h.handle(pkt);
                frames += 1;
                bytes += len as u64;
                verdicts[v as usize] += 1;
                let fwd = v == Verdict::Forward;
                if fwd != run_fwd {
                    let at = end.next_multiple_of(enso_abi::wire::FLIT);
                    if at > run_start {
                        runs[nruns] = (run_fwd, at - run_start);
                        nruns += 1;
                        run_start = at;
                    }
                    run_fwd = fwd;
                }
                end = pkt_end;
            }
            let at = end.next_multiple_of(enso_abi::wire::FLIT);
            if at > run_start {
                runs[nruns] = (run_fwd, at - run_start);
                nruns += 1;
            }
            self.stats.bytes += bytes;
            self.stats.forwarded += verdicts[Verdict::Forward as usize];
            self.stats.consumed += verdicts[Verdict::Consume as usize];
            self.stats.dropped += verdicts[Verdict::Drop as usize];
            (frames, total, it.error())
        };
        if let Some(e) = err {
            return Err(DriverError::Corrupt(e));
        }
        let handled: usize = runs[..nruns].iter().map(|r| r.1).sum();
        if handled < total {
            // Not handled this time: give it back to the consumed cursor.
            self.dev.unconsume(pipe.rx(), total - handled)?;
        }
        let port = self.ports.get(&pipe.rx()).copied().unwrap_or(0);
        for &(fwd, len) in &runs[..nruns] {
            if fwd {
                self.dev.send_and_free_on(pipe, len, port)?;
            } else {
                self.dev.discard(pipe, len)?;
            }
        }
        self.stats.frames += frames as u64;
        self.stats.batches += 1;
        Ok(frames)
    }

    fn poll_rx<H: PacketHandler>(
        &mut self,
        p: crate::RxPipe,
        h: &mut H,
    ) -> Result<usize, DriverError> {
        let (frames, len, err) = {
            let mut b = self.dev.recv(p)?;
            let len = b.len();
            let mut it = b.packets_mut();
            let mut frames = 0;
            for pkt in it.by_ref() {
                frames += 1;
                self.stats.bytes += pkt.len() as u64;
                match h.handle(pkt) {
                    Verdict::Drop => self.stats.dropped += 1,
                    _ => self.stats.consumed += 1,
                }
            }
            (frames, len, it.error())
        };
        if let Some(e) = err {
            return Err(DriverError::Corrupt(e));
        }
        self.dev.free(p, len)?;
        self.stats.frames += frames as u64;
        self.stats.batches += 1;
        Ok(frames)
    }
}

/// Runs a [`PacketHandler`] over descriptor queues: `rx_burst`, handle each
/// buffer in place, `tx_burst` the forwarded ones on the same queue, return
/// the rest to the pool.
#[derive(Debug)]
pub struct PacketizedDriver {
    /// The device handle the driver polls.
    pub dev: Device,
    /// What the driver counted.
    pub stats: DriverStats,
    queues: Vec<QueueId>,
    next: usize,
    burst: usize,
    rx: Vec<Mbuf>,
    tx: Vec<Mbuf>,
}

impl PacketizedDriver {
    /// A driver with bursts of `burst` frames (DPDK's default: 32).
    pub fn new(dev: Device, burst: usize) -> Self {
        Self {
            dev,
            stats: DriverStats::default(),
            queues: Vec::new(),
            next: 0,
            burst: burst.max(1),
            rx: Vec::with_capacity(burst.max(1)),
            tx: Vec::with_capacity(burst.max(1)),
        }
    }

    /// Allocates `n` queue pairs on `port` that receive by RSS (fallback).
    pub fn add_rss_queues_on(
        &mut self,
        port: u32,
        n: u32,
    ) -> Result<Vec<QueueId>, crate::AllocError> {
        let v = (0..n)
            .map(|_| self.dev.alloc_queue(port, true))
            .collect::<Result<Vec<_>, _>>()?;
        self.queues.extend(&v);
        Ok(v)
    }

    /// Polls the next queue once: one burst received, handled and sent.
    /// Returns the frames handled.
    #[inline]
    pub fn poll<H: PacketHandler>(&mut self, h: &mut H) -> Result<usize, DriverError> {
        if self.queues.is_empty() {
            return Ok(0);
        }
        let q = self.queues[self.next];
        self.next = (self.next + 1) % self.queues.len();
        let n = self.dev.rx_burst(q, &mut self.rx, self.burst)?;
        // The burst's buffers are not prefetched before they are handled,
        // as some DPDK applications do: measured with the emulated NIC's
        // 64 B load, prefetching each buffer (for writing) right after
        // `rx_burst` made Maglev 15-25% faster with the two cores in
        // different complexes but ~15% slower with them close, and a read
        // or write prefetch halved telemetry's rate with them apart.
        for mut m in self.rx.drain(..) {
            let data = self.dev.mbuf_data_mut(&mut m);
            self.stats.bytes += data.len() as u64;
            match h.handle(data) {
                Verdict::Forward => {
                    self.stats.forwarded += 1;
                    self.tx.push(m);
                }
                v => {
                    if v == Verdict::Drop {
                        self.stats.dropped += 1;
                    } else {
                        self.stats.consumed += 1;
                    }
                    self.dev.free_mbufs([m]);
                }
            }
        }
        if !self.tx.is_empty() {
            self.dev.tx_burst(q, &mut self.tx)?;
            if !self.tx.is_empty() {
                // The TX ring is full: drop what did not fit, as DPDK
                // applications do.
                self.stats.dropped += self.tx.len() as u64;
                self.stats.forwarded -= self.tx.len() as u64;
                self.dev.free_mbufs(self.tx.drain(..));
            }
        } else {
            self.dev.tx_reclaim_all();
        }
        self.stats.frames += n as u64;
        if n > 0 {
            self.stats.batches += 1;
        }
        Ok(n)
    }
}
