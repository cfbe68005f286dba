//! Receiving: handing out received bytes (recv, peek), confirming,
//! returning and freeing them.

use enso_abi::layout::{reg, reg_addr};

use super::{Device, PipeSw, RxPipe, RxTxPipe, TxPipe, TxRecord};
use crate::batch::RxBatch;
use crate::error::{FreeError, RecvError};

impl Device {
    pub(super) fn pipe_mut(&mut self, p: RxPipe) -> Option<&mut PipeSw> {
        if p.dev != self.uid {
            return None;
        }
        self.pipes.get_mut(p.idx as usize).filter(|p| !p.free)
    }

    /// Received bytes not yet handed out, without consuming them.
    pub fn peek(&mut self, pipe: impl Into<RxPipe>) -> Result<RxBatch<'_>, RecvError> {
        self.take(pipe.into(), false)
    }

    /// Received bytes not yet handed out; they count as consumed (free them
    /// or send them later).
    pub fn recv(&mut self, pipe: impl Into<RxPipe>) -> Result<RxBatch<'_>, RecvError> {
        self.take(pipe.into(), true)
    }

    /// As [`Device::recv`], bounded: the batch holds at most `max_pkts`
    /// whole frames in at most `max_bytes` bytes of the pipe (marker flits
    /// and padding to 64 B included: [`RxBatch::len`]). Frames past either
    /// bound stay for the next receive; a first frame larger than
    /// `max_bytes` gives an empty batch. [`RxBatch::frames`] says where each
    /// frame is. On a stream pipe only `max_bytes` applies. Bytes that are
    /// not frames are handed out when first (within `max_bytes`), so the
    /// batch's iterators report them.
    ///
    /// Ensō's `RecvPkts(max)` / `Recv(buf, max)`, DPDK's burst size.
    pub fn recv_max(
        &mut self,
        pipe: impl Into<RxPipe>,
        max_bytes: usize,
        max_pkts: usize,
    ) -> Result<RxBatch<'_>, RecvError> {
        let pipe = pipe.into();
        if self.pipe_id(pipe).is_none() {
            return Err(RecvError::ForeignPipe);
        }
        let idx = pipe.idx as usize;
        if self.pipes[idx].tail == self.pipes[idx].consumed {
            self.poll()?;
        }
        let p = &mut self.pipes[idx];
        let (mask, unit) = (p.mask, p.unit());
        let avail = (p.tail.wrapping_sub(p.consumed) & mask) as usize * unit;
        let start = p.consumed as usize * unit;
        // SAFETY: as in `take`: `start, avail < pipe size`, inside the doubly mapped pipe,
        // between software's head and the notified tail (which the NIC does not write), and
        // handed out only while `self` is mutably borrowed.
        let all = unsafe { std::slice::from_raw_parts_mut(p.map.as_ptr().add(start), avail) };
        let len = if p.shift == 0 {
            avail.min(max_bytes)
        } else {
            crate::batch::frames_within(all, max_bytes, max_pkts)
        };
        p.consumed = (p.consumed + (len / unit) as u32) & mask;
        Ok(RxBatch {
            data: &mut all[..len],
        })
    }

    pub(super) fn take(&mut self, pipe: RxPipe, consume: bool) -> Result<RxBatch<'_>, RecvError> {
        if self.pipe_id(pipe).is_none() {
            return Err(RecvError::ForeignPipe);
        }
        let idx = pipe.idx as usize;
        // `recv` polls only when it has nothing; `peek` always does, since
        // its caller may be waiting for more after an unfinished message.
        if !consume || self.pipes[idx].tail == self.pipes[idx].consumed {
            self.poll()?;
        }
        let p = &mut self.pipes[idx];
        let (mask, unit) = (p.mask, p.unit());
        let flits = p.tail.wrapping_sub(p.consumed) & mask;
        let start = p.consumed as usize * unit;
        if consume {
            p.consumed = p.tail;
        }
        let len = flits as usize * unit;
        // SAFETY: `start, len < pipe size`: inside the doubly mapped pipe. The NIC does not
        // write between software's head and the notified tail (`poll` refuses a tail that
        // moves backwards, which would put taken or freed bytes in the span), and the span
        // is handed out only while `self` is mutably borrowed, so the slice is not aliased.
        let data = unsafe { std::slice::from_raw_parts_mut(p.map.as_ptr().add(start), len) };
        Ok(RxBatch { data })
    }

    /// [`Device::recv`] and, in the same borrow, the free span at the end of
    /// TX pipe `tx` (at most `max` bytes; no waiting, so it may be shorter
    /// or empty; completions are not reaped here: [`Device::tx_space`] does,
    /// and callers ask it first). For applications that answer what they
    /// receive: write the answers straight into the TX pipe while reading
    /// the requests, then [`Device::send`] the bytes written at the start of
    /// the span.
    pub fn recv_with_tx_span(
        &mut self,
        pipe: impl Into<RxPipe>,
        tx: TxPipe,
        max: usize,
    ) -> Result<(RxBatch<'_>, &mut [u8]), RecvError> {
        if self.tx_idx(tx).is_none() {
            return Err(RecvError::ForeignPipe);
        }
        let (at, len, base) = {
            let t = &self.tx_pipes[tx.idx as usize];
            let free = t.size - (t.tail - t.done) as usize;
            (
                (t.tail % t.size as u64) as usize,
                free.min(max),
                t.map.as_ptr(),
            )
        };
        // The span is what the next `send` may send.
        self.tx_pipes[tx.idx as usize].reserved = len;
        let batch = self.take(pipe.into(), true)?;
        // SAFETY: `at < size` and `len <= size - in flight`: inside the doubly mapped TX
        // pipe, in bytes the NIC is not reading (completed or never sent). The TX pipe is
        // a mapping of its own, disjoint from every RX pipe, so the span does not alias
        // `batch`; both live only while `self` is mutably borrowed.
        let span = unsafe { std::slice::from_raw_parts_mut(base.add(at), len) };
        Ok((batch, span))
    }

    /// Marks `bytes` of a peeked batch as consumed.
    pub fn confirm(&mut self, pipe: impl Into<RxPipe>, bytes: usize) -> Result<(), FreeError> {
        let p = self.pipe_mut(pipe.into()).ok_or(FreeError::ForeignPipe)?;
        let n = p.units_within(bytes, p.consumed, p.tail)?;
        p.consumed = (p.consumed + n) & p.mask;
        Ok(())
    }

    /// Returns the last `bytes` of consumed data to the pipe: the next
    /// `recv` hands them out again.
    pub fn unconsume(&mut self, pipe: impl Into<RxPipe>, bytes: usize) -> Result<(), FreeError> {
        let p = self.pipe_mut(pipe.into()).ok_or(FreeError::ForeignPipe)?;
        let n = p.units_within(bytes, p.sent, p.consumed)?;
        p.consumed = p.consumed.wrapping_sub(n) & p.mask;
        Ok(())
    }

    /// Skips `bytes` of received data of an RX/TX pipe without sending them;
    /// they are handed back to the NIC in order, after any sends before them
    /// complete.
    pub fn discard(&mut self, pipe: RxTxPipe, bytes: usize) -> Result<(), FreeError> {
        let pr = pipe.0;
        let p = self.pipe_mut(pr).ok_or(FreeError::ForeignPipe)?;
        let flits = p.units_within(bytes, p.sent, p.consumed)?;
        if flits == 0 {
            return Ok(());
        }
        let (mask, unit) = (p.mask, p.unit());
        if p.sent == p.freed {
            // Nothing in flight: free at once.
            return self.free(pr, bytes);
        }
        // Behind sends in flight: an empty TX notification whose completion
        // frees the skipped bytes keeps the frees in order.
        let addr = p.off + p.sent as usize * unit;
        p.sent = (p.sent + flits) & mask;
        self.push_data(
            addr,
            0,
            0,
            TxRecord::RxTx {
                pipe: pr.idx,
                flits,
            },
        )?;
        self.flush_tx()?;
        Ok(())
    }

    /// Hands `bytes` of received data back to the NIC (one head write).
    pub fn free(&mut self, pipe: impl Into<RxPipe>, bytes: usize) -> Result<(), FreeError> {
        let p = self.pipe_mut(pipe.into()).ok_or(FreeError::ForeignPipe)?;
        if !bytes.is_multiple_of(p.unit()) {
            return Err(FreeError::Unaligned(bytes));
        }
        if p.sent != p.freed {
            return Err(FreeError::InFlight);
        }
        let n = p.units_within(bytes, p.freed, p.consumed)?;
        if n == 0 {
            return Ok(());
        }
        p.freed = (p.freed + n) & p.mask;
        p.sent = p.freed;
        let (id, head) = (p.id, p.freed);
        self.stats.head_writes += 1;
        self.mmio_write(reg_addr(id, reg::RX_HEAD), head)?;
        Ok(())
    }

    /// Frees everything consumed so far.
    pub fn free_all(&mut self, pipe: impl Into<RxPipe>) -> Result<(), FreeError> {
        let pipe = pipe.into();
        let p = self.pipe_mut(pipe).ok_or(FreeError::ForeignPipe)?;
        let (mask, unit) = (p.mask, p.unit());
        let n = (p.consumed.wrapping_sub(p.freed) & mask) as usize * unit;
        self.free(pipe, n)
    }
}
