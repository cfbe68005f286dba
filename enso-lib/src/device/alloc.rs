//! Allocating pipes (RX, RX/TX, stream, TX) in the handle's DMA region.

use enso_abi::layout::{self, config, reg, reg_addr};
use enso_abi::shm::MirrorMap;
use enso_abi::wire::FLIT;

use enso_abi::control::{extend_remote, ExtendRequest};

use super::liveness::Keepalive;
use super::{Device, PipeSw, RxPipe, RxTxPipe, TxPipe, TxPipeSw, Wait};
use crate::error::{AllocError, DeviceError, FreeError};

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
        let size = self.info.pipe_size;
        let shift = if stream { 0 } else { FLIT.trailing_zeros() };
        let mask = if stream {
            size as u32 - 1
        } else {
            (size / FLIT) as u32 - 1
        };
        // A freed pipe's slot first (its memory and id), then a new one.
        let (idx, id, off) = if let Some(i) = self.pipes.iter().position(|p| p.free) {
            self.settle_freed_pipes()?;
            let p = &mut self.pipes[i];
            (p.tail, p.consumed, p.sent, p.freed) = (0, 0, 0, 0);
            (p.rxtx, p.shift, p.mask, p.free) = (rxtx, shift, mask, false);
            (i as u32, p.id, p.off)
        } else {
            let idx = self.pipes.len() as u32;
            if idx >= self.info.pipe_count {
                self.grow_pipe_ids(idx + 1)?;
            }
            let off = self.alloc_region(size)?;
            let map = MirrorMap::new(&self.file, off, size)
                .map_err(|e| AllocError::Map(e.to_string()))?;
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
                free: false,
                shift,
                mask,
            });
            self.grow_ready();
            (idx, id, off)
        };
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

    /// Frees a pipe: waits (bounded) for its sends in flight to complete,
    /// disables it at the NIC (which forgets its flow rules and takes it
    /// out of the fallback pipes) and keeps its slot for the next
    /// allocation, which reuses it. Bytes received and not freed are
    /// dropped with it. The handle no longer names a pipe: calls with it
    /// fail, or after a new allocation reuses the slot, name the new pipe.
    pub fn free_pipe(&mut self, pipe: impl Into<RxPipe>) -> Result<(), FreeError> {
        let pipe = pipe.into();
        if self.pipe_id(pipe).is_none() {
            return Err(FreeError::ForeignPipe);
        }
        let idx = pipe.idx as usize;
        let mut wait = Wait::new();
        loop {
            let p = &self.pipes[idx];
            if p.sent == p.freed {
                break;
            }
            self.flush_tx()?;
            self.reap_completions()?;
            wait.check(self, DeviceError::TxStalled)?;
            std::hint::spin_loop();
        }
        let p = &mut self.pipes[idx];
        p.free = true;
        let id = p.id;
        // Nothing is handed out again, and a prefetch that picks the slot
        // writes a zero head, which the NIC takes for a disabled pipe.
        (p.tail, p.consumed, p.freed, p.sent) = (0, 0, 0, 0);
        // Disabling: a zero address.
        self.mmio_write(reg_addr(id, reg::RX_MEM_LOW), 0)?;
        self.mmio_write(reg_addr(id, reg::RX_MEM_HIGH), 0)?;
        Ok(())
    }

    /// Asks the device for pipe ids after the handle's, to hold `need` in
    /// all: twice as many as it holds if it can have them (fewer requests
    /// for a handle that keeps allocating), else just `need`.
    fn grow_pipe_ids(&mut self, need: u32) -> Result<(), AllocError> {
        let most = layout::MAX_PIPES - self.info.pipe_base;
        if need > most {
            return Err(AllocError::NoMorePipes(format!(
                "{need} pipes from id {} would pass the device's {} pipe ids",
                self.info.pipe_base,
                layout::MAX_PIPES
            )));
        }
        let double = self.info.pipe_count.saturating_mul(2).clamp(need, most);
        let info = match self.extend_attachment(double) {
            Ok(info) => info,
            Err(_) if double > need => self.extend_attachment(need)?,
            Err(e) => return Err(e),
        };
        let sane = info.app_id == self.info.app_id
            && info.pipe_base == self.info.pipe_base
            && info.pipe_count >= need
            && info.pipe_base as u64 + info.pipe_count as u64 <= layout::MAX_PIPES as u64;
        if !sane {
            return Err(AllocError::NoMorePipes(format!(
                "bad answer: pipes {}+{} for application {}, asked for {need} from {}",
                info.pipe_base, info.pipe_count, info.app_id, self.info.pipe_base
            )));
        }
        self.info.pipe_count = info.pipe_count;
        // `dirty` holds each pipe once: it never grows on the datapath.
        self.dirty.reserve(info.pipe_count as usize);
        Ok(())
    }

    /// One request for `pipes` pipe ids in all, through the attachment.
    fn extend_attachment(
        &mut self,
        pipes: u32,
    ) -> Result<enso_abi::control::AttachInfo, AllocError> {
        let req = ExtendRequest {
            app_id: self.info.app_id,
            pipes,
        };
        match &mut self._keep {
            Keepalive::Socket(s) => extend_remote(s, req).map_err(AllocError::NoMorePipes),
            Keepalive::Control(c, _) => c
                .extend(req)
                .map_err(|e| AllocError::NoMorePipes(e.to_string())),
            Keepalive::None => Err(AllocError::NoPipes(self.info.pipe_count)),
        }
    }

    /// Makes the queue of pipes with data hold every pipe (it never grows
    /// on the datapath): after a pipe slot was added.
    fn grow_ready(&mut self) {
        if self.ready.len() >= self.pipes.len() {
            return;
        }
        let cap = self.ready.len();
        let mut ready = vec![0; (2 * cap).max(self.pipes.len())];
        for (i, r) in ready.iter_mut().take(self.ready_len).enumerate() {
            *r = self.ready[(self.ready_head + i) % cap];
        }
        self.ready = ready.into_boxed_slice();
        self.ready_head = 0;
    }

    /// Before a freed pipe's slot is reused: waits (bounded) until the NIC
    /// has taken the writes that disabled it, then consumes every
    /// notification it wrote before that (ignored: they name a free pipe),
    /// so that none of them is taken for the new pipe's.
    fn settle_freed_pipes(&mut self) -> Result<(), DeviceError> {
        let mut wait = Wait::new();
        loop {
            self.mmio_cons = self.mmio_queue().acquire_consumer();
            if self.mmio_cons == self.mmio_prod {
                break;
            }
            wait.check(self, DeviceError::MmioStalled)?;
            std::hint::spin_loop();
        }
        // Notifications cross an emulated interconnect in this long.
        let settle = std::time::Duration::from_nanos(2 * self.info.interconnect_latency_ns);
        let start = std::time::Instant::now();
        loop {
            let n = self.poll()?;
            if n == 0 && start.elapsed() >= settle {
                return Ok(());
            }
        }
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

    /// Allocates a TX pipe of `opts.tx_pipe_size` bytes: a freed one's
    /// slot and memory first ([`Device::free_tx_pipe`]), else new memory
    /// of the DMA region, which has room for as many pipes as the device
    /// has pipe ids ([`DeviceOptions::tx_pipes`](super::DeviceOptions::tx_pipes)
    /// is what it is sized for at least). [`AllocError::NoMemory`] once the
    /// region is full.
    pub fn alloc_tx_pipe(&mut self) -> Result<TxPipe, AllocError> {
        if let Some(i) = self.tx_pipes.iter().position(|t| t.free) {
            let t = &mut self.tx_pipes[i];
            (t.tail, t.done, t.reserved, t.free) = (0, 0, 0, false);
            return Ok(TxPipe {
                dev: self.uid,
                idx: i as u32,
            });
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
            free: false,
        });
        Ok(TxPipe {
            dev: self.uid,
            idx: self.tx_pipes.len() as u32 - 1,
        })
    }

    /// Frees a TX pipe: waits (bounded) until the NIC has sent everything
    /// sent from it, then keeps its slot and memory for the next
    /// [`Device::alloc_tx_pipe`], which reuses them. The handle no longer
    /// names a pipe: calls with it fail, or after a new allocation reuses
    /// the slot, name the new pipe.
    pub fn free_tx_pipe(&mut self, pipe: TxPipe) -> Result<(), FreeError> {
        let idx = self.tx_idx(pipe).ok_or(FreeError::ForeignPipe)?;
        let mut wait = Wait::new();
        loop {
            let t = &self.tx_pipes[idx];
            if t.done == t.tail {
                break;
            }
            self.flush_tx()?;
            self.reap_completions()?;
            wait.check(self, DeviceError::TxStalled)?;
            std::hint::spin_loop();
        }
        let t = &mut self.tx_pipes[idx];
        (t.tail, t.done, t.reserved, t.free) = (0, 0, 0, true);
        Ok(())
    }

    /// The slot of TX pipe `pipe`, if it is this handle's and not freed.
    #[inline]
    pub(super) fn tx_idx(&self, pipe: TxPipe) -> Option<usize> {
        let i = pipe.idx as usize;
        (pipe.dev == self.uid && self.tx_pipes.get(i).is_some_and(|t| !t.free)).then_some(i)
    }
}
