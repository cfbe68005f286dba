//! The bytestream path: Ensō stream pipes hold the UDP payloads of arriving
//! frames back to back, so a log split over packets is contiguous text in
//! the pipe and is scanned where it lies. An unfinished line stays in the
//! pipe (nothing is freed past it) and is scanned again with what follows.
//!
//! Keeping that line costs a notification: the pipe's head stays short of
//! its tail, so the NIC's notification stays outstanding and the next frame
//! brings none. The driver asks for the latest tail instead (a head
//! rewrite, answered at once with a notification), and paces those asks:
//! after an answer that shows nothing new it waits [`STREAM_ASK_GAP_MIN_NS`],
//! doubling up to [`STREAM_ASK_GAP_MAX_NS`] while answers stay empty. Asking on
//! every poll would cost the NIC a register write and a notification per
//! poll, several per frame when the reader is faster than the stream.

use std::time::{Duration, Instant};

use enso::app::{DriverError, DriverStats};
use enso::{AllocError, Device, RxPipe};

use super::{AppDriver, StreamHandler};

/// Runs a [`StreamHandler`] over Ensō stream pipes. All pipes feed the same
/// handler, so give it one pipe per ordered stream (one sender).
#[derive(Debug)]
pub struct EnsoStreamDriver {
    /// The device handle.
    pub dev: Device,
    /// `bytes` counts bytes the handler was done with, `batches` the calls
    /// that gave it new bytes, `frames` stays 0 (the pipe holds no frames).
    pub stats: DriverStats,
    /// Stream pipes.
    pipes: Vec<StreamPipe>,
    /// Head rewrites sent to learn about new bytes behind an unfinished
    /// tail.
    pub tail_prefetches: u64,
}

/// The first wait before asking again for a pipe's tail after an answer
/// that showed nothing new: about two answers' round trips through the
/// emulated NIC, well under the time a 1 KiB frame takes at 10 Gb/s.
pub const STREAM_ASK_GAP_MIN_NS: u64 = 1_000;
/// The longest such wait: what pacing may add to the time a line waits in
/// an otherwise idle pipe.
pub const STREAM_ASK_GAP_MAX_NS: u64 = 32_000;

/// One stream pipe the driver serves.
#[derive(Debug)]
struct StreamPipe {
    pipe: RxPipe,
    /// Bytes left unfinished at the last poll.
    left: usize,
    /// No asking for the tail before this, once an answer showed nothing
    /// new (`None`: ask when the next answer shows nothing new).
    ask_after: Option<Instant>,
    /// The wait set after the next ask.
    gap_ns: u64,
}

impl StreamPipe {
    fn new(pipe: RxPipe) -> Self {
        Self {
            pipe,
            left: 0,
            ask_after: None,
            gap_ns: STREAM_ASK_GAP_MIN_NS,
        }
    }
}

impl EnsoStreamDriver {
    /// A driver over `dev`.
    pub fn new(dev: Device) -> Self {
        Self {
            dev,
            stats: DriverStats::default(),
            pipes: Vec::new(),
            tail_prefetches: 0,
        }
    }

    /// Allocates a stream pipe that receives the fallback traffic of
    /// `port`.
    pub fn add_fallback_stream_pipe_on(&mut self, port: u32) -> Result<RxPipe, AllocError> {
        let p = self.dev.alloc_stream_pipe_on(port, true)?;
        self.pipes.push(StreamPipe::new(p));
        Ok(p)
    }

    /// Serves a stream pipe allocated elsewhere (e.g. bound to a flow).
    pub fn add_pipe(&mut self, pipe: RxPipe) {
        self.pipes.push(StreamPipe::new(pipe));
    }

    /// Bytes left unfinished in the pipes (held for the next poll).
    pub fn pending(&self) -> usize {
        self.pipes.iter().map(|p| p.left).sum()
    }

    /// Gives the handler the bytes of one pipe with new data, if any, and
    /// frees what it is done with. Returns those bytes.
    pub fn poll<H: StreamHandler + ?Sized>(&mut self, h: &mut H) -> Result<usize, DriverError> {
        let Some(p) = self.dev.next_pipe_with_data()? else {
            return Ok(0);
        };
        let Some(slot) = self.pipes.iter().position(|x| x.pipe == p) else {
            // Not a stream pipe of this driver: hand it back untouched.
            self.dev.free_all(p)?;
            return Ok(0);
        };
        let left = self.pipes[slot].left;
        let (len, used) = {
            let b = self.dev.peek(p)?;
            let len = b.len();
            if len <= left {
                (len, 0)
            } else {
                (len, h.consume(b.bytes()).min(len))
            }
        };
        if len <= left {
            // Only the unfinished tail, already seen. Its notification was
            // used and no head write is pending, so ask for the latest tail
            // (a head rewrite; the next peek reads the answer), paced.
            let sp = &mut self.pipes[slot];
            let now = Instant::now();
            if sp.ask_after.is_some_and(|t| now < t) {
                return Ok(0);
            }
            sp.ask_after = Some(now + Duration::from_nanos(sp.gap_ns));
            sp.gap_ns = (sp.gap_ns * 2).min(STREAM_ASK_GAP_MAX_NS);
            self.ask_for_tail(p)?;
            return Ok(0);
        }
        // New bytes: the stream is moving, so the next empty answer starts
        // the waits afresh.
        let sp = &mut self.pipes[slot];
        sp.ask_after = None;
        sp.gap_ns = STREAM_ASK_GAP_MIN_NS;
        if used > 0 {
            self.dev.confirm(p, used)?;
            // With bytes left behind the new head the NIC notifies the
            // current tail at once, so new data is never missed.
            self.dev.free(p, used)?;
        } else {
            self.ask_for_tail(p)?;
        }
        self.pipes[slot].left = len - used;
        self.stats.bytes += used as u64;
        self.stats.batches += 1;
        Ok(used)
    }

    fn ask_for_tail(&mut self, p: RxPipe) -> Result<(), DriverError> {
        self.tail_prefetches += 1;
        self.dev.prefetch(p).map_err(DriverError::from)
    }
}

impl<H: StreamHandler + ?Sized> AppDriver<H> for EnsoStreamDriver {
    #[inline]
    fn poll(&mut self, h: &mut H) -> Result<usize, DriverError> {
        EnsoStreamDriver::poll(self, h)
    }
    fn stats(&self) -> &DriverStats {
        &self.stats
    }
    fn device(&self) -> &Device {
        &self.dev
    }
    fn device_mut(&mut self) -> &mut Device {
        &mut self.dev
    }
}
