//! The bytestream path: Ensō stream pipes hold the UDP payloads of arriving
//! frames back to back, so a log split over packets is contiguous text in
//! the pipe and is scanned where it lies. An unfinished line stays in the
//! pipe (nothing is freed past it) and is scanned again with what follows.

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
    /// Stream pipes and the bytes left unfinished in each at the last poll.
    pipes: Vec<(RxPipe, usize)>,
    /// Head rewrites sent to learn about new bytes behind an unfinished
    /// tail.
    pub tail_prefetches: u64,
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
        self.pipes.push((p, 0));
        Ok(p)
    }

    /// Serves a stream pipe allocated elsewhere (e.g. bound to a flow).
    pub fn add_pipe(&mut self, pipe: RxPipe) {
        self.pipes.push((pipe, 0));
    }

    /// Bytes left unfinished in the pipes (held for the next poll).
    pub fn pending(&self) -> usize {
        self.pipes.iter().map(|p| p.1).sum()
    }

    /// Gives the handler the bytes of one pipe with new data, if any, and
    /// frees what it is done with. Returns those bytes.
    pub fn poll<H: StreamHandler + ?Sized>(&mut self, h: &mut H) -> Result<usize, DriverError> {
        let Some(p) = self.dev.next_pipe_with_data()? else {
            return Ok(0);
        };
        let Some(slot) = self.pipes.iter().position(|x| x.0 == p) else {
            // Not a stream pipe of this driver: hand it back untouched.
            self.dev.free_all(p)?;
            return Ok(0);
        };
        let left = self.pipes[slot].1;
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
            // (a head rewrite); the next peek reads the notification.
            self.ask_for_tail(p)?;
            return Ok(0);
        }
        if used > 0 {
            self.dev.confirm(p, used)?;
            // With bytes left behind the new head the NIC notifies the
            // current tail at once, so new data is never missed.
            self.dev.free(p, used)?;
        } else {
            self.ask_for_tail(p)?;
        }
        self.pipes[slot].1 = len - used;
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
}
