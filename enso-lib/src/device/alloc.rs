//! Allocating pipes (RX, RX/TX, stream, TX) in the handle's DMA region.

use enso_abi::layout::{self, config, reg, reg_addr};
use enso_abi::shm::MirrorMap;
use enso_abi::wire::FLIT;

use super::{Device, PipeSw, RxPipe, RxTxPipe, TxPipe, TxPipeSw};
use crate::error::AllocError;

impl Device {
    /// Reserves `len` bytes (page aligned) of the DMA region.
    pub(crate) fn alloc_region_bytes(&mut self, len: usize) -> Result<usize, AllocError> {
        self.alloc_region(len)
    }

    pub(super) fn alloc_region(&mut self, len: usize) -> Result<usize, AllocError> {
        let off = self.next_off.next_multiple_of(layout::PAGE);
        if off + len > self.info.dma_len {
            return Err(AllocError::NoMemory);
        }
        self.next_off = off + len;
        Ok(off)
    }

    pub(super) fn alloc_pipe(
        &mut self,
        fallback: bool,
        rxtx: bool,
        port: u32,
    ) -> Result<RxPipe, AllocError> {
        self.alloc_pipe_kind(fallback, rxtx, false, port)
    }

    pub(super) fn alloc_pipe_kind(
        &mut self,
        fallback: bool,
        rxtx: bool,
        stream: bool,
        port: u32,
    ) -> Result<RxPipe, AllocError> {
        if port as usize >= self.info.ports {
            return Err(AllocError::NoPort(port));
        }
        let idx = self.pipes.len() as u32;
        if idx >= self.info.pipe_count.min(self.opts.pipes) {
            return Err(AllocError::NoPipes(self.info.pipe_count));
        }
        let size = self.info.pipe_size;
        let off = self.alloc_region(size)?;
        let map =
            MirrorMap::new(&self.file, off, size).map_err(|e| AllocError::Map(e.to_string()))?;
        let id = self.info.pipe_base + idx;
        self.pipes.push(PipeSw {
            id,
            map,
            off,
            tail: 0,
            consumed: 0,
            sent: 0,
            freed: 0,
            rxtx,
            queued: false,
            dirty: false,
            shift: if stream { 0 } else { FLIT.trailing_zeros() },
            mask: if stream {
                size as u32 - 1
            } else {
                (size / FLIT) as u32 - 1
            },
        });
        // Enable: head and tail start at zero; the high address half enables.
        // The low 12 bits of the (page aligned) address name the port.
        let flags = if stream { layout::PIPE_STREAM } else { 0 };
        self.mmio_write(reg_addr(id, reg::RX_MEM_LOW), off as u32 | port | flags)?;
        self.mmio_write(reg_addr(id, reg::RX_MEM_HIGH), (off >> 32) as u32)?;
        let p = RxPipe { dev: self.uid, idx };
        if fallback {
            self.config(config::FALLBACK, [config::FALLBACK_ADD, id as u64, 0, 0, 0])?;
        }
        Ok(p)
    }

    /// Allocates an RX pipe; `fallback` makes it receive traffic that no
    /// flow rule matches.
    pub fn alloc_rx_pipe(&mut self, fallback: bool) -> Result<RxPipe, AllocError> {
        self.alloc_pipe(fallback, false, 0)
    }

    /// Allocates an RX pipe that receives from `port`.
    pub fn alloc_rx_pipe_on(&mut self, port: u32, fallback: bool) -> Result<RxPipe, AllocError> {
        self.alloc_pipe(fallback, false, port)
    }

    /// Allocates a *stream pipe* on `port`: the NIC appends the UDP payload
    /// of each frame, back to back with byte granularity, so a message
    /// stream split over frames is contiguous in the pipe. [`Device::recv`]
    /// returns those bytes ([`RxBatch::bytes`](crate::RxBatch::bytes)); [`Device::free`] takes any
    /// byte count (leave an unfinished message in place). Notifications are
    /// reactive: the NIC tells software about new bytes when the head is
    /// written, so a reader that frees nothing (it holds only part of a
    /// message) asks for the latest tail with [`Device::prefetch`].
    pub fn alloc_stream_pipe_on(
        &mut self,
        port: u32,
        fallback: bool,
    ) -> Result<RxPipe, AllocError> {
        self.alloc_pipe_kind(fallback, false, true, port)
    }

    /// Allocates an RX/TX pipe (received bytes can be sent in place).
    pub fn alloc_rxtx_pipe(&mut self, fallback: bool) -> Result<RxTxPipe, AllocError> {
        self.alloc_pipe(fallback, true, 0).map(RxTxPipe)
    }

    /// Allocates an RX/TX pipe that receives from `port`.
    pub fn alloc_rxtx_pipe_on(
        &mut self,
        port: u32,
        fallback: bool,
    ) -> Result<RxTxPipe, AllocError> {
        self.alloc_pipe(fallback, true, port).map(RxTxPipe)
    }

    /// The RX/TX view of a pipe, if it was allocated as one.
    pub fn as_rxtx(&self, p: RxPipe) -> Option<RxTxPipe> {
        (p.dev == self.uid && self.pipes.get(p.idx as usize)?.rxtx).then_some(RxTxPipe(p))
    }

    /// Allocates a TX pipe of `opts.tx_pipe_size` bytes.
    pub fn alloc_tx_pipe(&mut self) -> Result<TxPipe, AllocError> {
        if self.tx_pipes.len() as u32 >= self.opts.tx_pipes {
            return Err(AllocError::NoTxPipes(self.opts.tx_pipes));
        }
        let size = self.opts.tx_pipe_size;
        let off = self.alloc_region(size)?;
        let map =
            MirrorMap::new(&self.file, off, size).map_err(|e| AllocError::Map(e.to_string()))?;
        self.tx_pipes.push(TxPipeSw {
            map,
            off,
            size,
            tail: 0,
            done: 0,
            reserved: 0,
        });
        Ok(TxPipe {
            dev: self.uid,
            idx: self.tx_pipes.len() as u32 - 1,
        })
    }
}
