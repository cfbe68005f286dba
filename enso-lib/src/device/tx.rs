//! Sending: TX notification slots, completions, in-place sends from
//! RX/TX pipes and sends from TX pipes.

use enso_abi::layout::{self, reg, reg_addr};
use enso_abi::wire::FLIT;

use super::{Device, RxTxPipe, TxPipe, TxRecord, Wait};
use crate::error::{DeviceError, SendError};

/// Largest TX notification the library sends (as the real library).
const TX_CHUNK: usize = 128 << 10;

impl Device {
    /// Takes a TX notification slot, reclaiming completions (and waiting,
    /// bounded) when all credits are in use.
    pub(super) fn tx_slot(&mut self) -> Result<u32, DeviceError> {
        if self.tx_inflight >= self.tx_credits {
            self.flush_tx()?;
            let mut wait = Wait::new();
            loop {
                self.reap_completions()?;
                if self.tx_inflight < self.tx_credits {
                    break;
                }
                wait.check(self, DeviceError::TxStalled)?;
                std::hint::spin_loop();
            }
        }
        Ok(self.tx_tail)
    }

    pub(super) fn tx_commit(&mut self, slot: u32, rec: TxRecord) {
        self.tx_records[slot as usize] = rec;
        self.tx_tail = (slot + 1) & self.ring_mask;
        self.tx_inflight += 1;
        self.tx_unflushed = true;
        self.stats.tx_notifications += 1;
    }

    pub(super) fn push_data(
        &mut self,
        addr: usize,
        len: usize,
        port: u32,
        rec: TxRecord,
    ) -> Result<(), DeviceError> {
        let slot = self.tx_slot()?;
        self.tx_notif(slot).fill_data(addr as u64, len as u32, port);
        self.tx_commit(slot, rec);
        Ok(())
    }

    /// One TX tail write for everything queued since the last one.
    pub(super) fn flush_tx(&mut self) -> Result<(), DeviceError> {
        if self.tx_unflushed {
            self.tx_unflushed = false;
            let nb = layout::NBUF_QUEUE_BASE + self.info.nbuf_id;
            self.mmio_write(reg_addr(nb, reg::TX_TAIL), self.tx_tail)?;
        }
        Ok(())
    }

    /// Reclaims completed TX notifications in order: frees RX/TX pipe bytes
    /// (one head write per pipe) and TX pipe space. Returns the sends
    /// completed (configuration notifications are not counted).
    pub fn reap_completions(&mut self) -> Result<usize, DeviceError> {
        let mut n = 0;
        let now = if self.stamp && self.tx_inflight > 0 {
            enso_abi::monotonic_ns()
        } else {
            0
        };
        while self.tx_inflight > 0 {
            let slot = self.tx_done;
            // SYNC POINT D (Acquire, in `completed`): the NIC has finished
            // reading the data.
            if !self.tx_notif(slot).completed(self.stamp.then_some(now)) {
                break; // not completed, or the completion is still on its way
            }
            let mut send = true;
            match std::mem::take(&mut self.tx_records[slot as usize]) {
                TxRecord::None => {}
                TxRecord::Config => send = false,
                TxRecord::RxTx { pipe, flits } => {
                    let p = &mut self.pipes[pipe as usize];
                    p.freed = (p.freed + flits) & p.mask;
                    if !p.dirty {
                        p.dirty = true;
                        self.dirty.push(pipe);
                    }
                }
                TxRecord::Tx { pipe, bytes } => {
                    self.tx_pipes[pipe as usize].done += bytes as u64;
                }
            }
            self.tx_done = (slot + 1) & self.ring_mask;
            self.tx_inflight -= 1;
            n += usize::from(send);
        }
        self.stats.completions += n as u64;
        while let Some(i) = self.dirty.pop() {
            let p = &mut self.pipes[i as usize];
            p.dirty = false;
            let (id, head) = (p.id, p.freed);
            self.stats.head_writes += 1;
            self.mmio_write(reg_addr(id, reg::RX_HEAD), head)?;
        }
        Ok(n)
    }

    /// Sends the first `bytes` of received-but-unsent data of an RX/TX pipe
    /// in place (port 0); they are freed when the NIC completes the send.
    pub fn send_and_free(&mut self, pipe: RxTxPipe, bytes: usize) -> Result<(), SendError> {
        self.send_and_free_on(pipe, bytes, 0)
    }

    /// As [`Device::send_and_free`], on port `port`.
    pub fn send_and_free_on(
        &mut self,
        pipe: RxTxPipe,
        bytes: usize,
        port: u32,
    ) -> Result<(), SendError> {
        let p = pipe.0;
        if self.pipe_id(p).is_none() {
            return Err(SendError::ForeignPipe);
        }
        if port as usize >= self.info.ports {
            return Err(SendError::NoPort(port));
        }
        if !bytes.is_multiple_of(FLIT) {
            return Err(SendError::Unaligned(bytes));
        }
        let size = self.info.pipe_size;
        let ps = &self.pipes[p.idx as usize];
        let mask = ps.mask;
        let avail = (ps.consumed.wrapping_sub(ps.sent) & mask) as usize * FLIT;
        if bytes > avail {
            return Err(SendError::MoreThanReceived {
                asked: bytes,
                available: avail,
            });
        }
        let mut pos = ps.sent as usize * FLIT;
        let base = ps.off;
        let mut left = bytes;
        while left > 0 {
            // Never cross the end of the pipe or exceed one chunk.
            let n = left.min(size - pos).min(TX_CHUNK);
            let rec = TxRecord::RxTx {
                pipe: p.idx,
                flits: (n / FLIT) as u32,
            };
            self.push_data(base + pos, n, port, rec)?;
            pos = (pos + n) % size;
            left -= n;
        }
        let ps = &mut self.pipes[p.idx as usize];
        ps.sent = (ps.sent + (bytes / FLIT) as u32) & mask;
        self.flush_tx()?;
        Ok(())
    }

    /// Bytes free in a TX pipe (after reclaiming completions).
    pub fn tx_space(&mut self, pipe: TxPipe) -> Result<usize, SendError> {
        if self.tx_idx(pipe).is_none() {
            return Err(SendError::ForeignPipe);
        }
        self.reap_completions()?;
        let t = &self.tx_pipes[pipe.idx as usize];
        Ok(t.size - (t.tail - t.done) as usize)
    }

    /// A writable span of `len` bytes at the end of a TX pipe, waiting
    /// (bounded) for space. Fill it, then call [`Device::send`].
    pub fn tx_buf(&mut self, pipe: TxPipe, len: usize) -> Result<&mut [u8], SendError> {
        if self.tx_idx(pipe).is_none() {
            return Err(SendError::ForeignPipe);
        }
        let cap = self.tx_pipes[pipe.idx as usize].size;
        if len > cap {
            return Err(SendError::TooLarge {
                asked: len,
                capacity: cap,
            });
        }
        let mut wait = Wait::new();
        while self.tx_space(pipe)? < len {
            self.flush_tx()?;
            wait.check(self, DeviceError::TxStalled)?;
            std::hint::spin_loop();
        }
        let t = &mut self.tx_pipes[pipe.idx as usize];
        t.reserved = len;
        let at = (t.tail % t.size as u64) as usize;
        // SAFETY: `at < size`, `len <= size`: inside the doubly mapped TX pipe; the NIC is
        // not reading bytes between `tail` and `done + size` (completed or never sent),
        // and the slice lives only while `self` is mutably borrowed.
        Ok(unsafe { std::slice::from_raw_parts_mut(t.map.as_ptr().add(at), len) })
    }

    /// Sends `len` bytes written at the start of the last [`Device::tx_buf`]
    /// span (frames on 64 B boundaries; `len` a multiple of 64, except that
    /// the last frame's padding may be left out). `len` may be less than
    /// the span, not more ([`SendError::NotReserved`]); a send ends the
    /// span, so each send needs its own `tx_buf` (or
    /// [`Device::recv_with_tx_span`]).
    pub fn send(&mut self, pipe: TxPipe, len: usize, port: u32) -> Result<(), SendError> {
        if self.tx_idx(pipe).is_none() {
            return Err(SendError::ForeignPipe);
        }
        if port as usize >= self.info.ports {
            return Err(SendError::NoPort(port));
        }
        let (size, off, tail, done) = {
            let t = &self.tx_pipes[pipe.idx as usize];
            (t.size, t.off, t.tail, t.done)
        };
        let padded = len.next_multiple_of(FLIT);
        let reserved = self.tx_pipes[pipe.idx as usize].reserved;
        // `tx_buf` waited for `reserved` bytes of space; space comes in
        // whole flits, so the padding fits too (checked all the same).
        if len > reserved || padded > size - (tail - done) as usize {
            return Err(SendError::NotReserved {
                asked: len,
                reserved,
            });
        }
        self.tx_pipes[pipe.idx as usize].reserved = 0;
        let mut pos = (tail % size as u64) as usize;
        let mut left = len;
        while left > 0 {
            let n = left.min(size - pos).min(TX_CHUNK);
            // The padding of the last piece is freed with it.
            let freed = if n == left { padded - (len - left) } else { n };
            self.push_data(
                off + pos,
                n,
                port,
                TxRecord::Tx {
                    pipe: pipe.idx,
                    bytes: freed as u32,
                },
            )?;
            pos = (pos + n) % size;
            left -= n;
        }
        self.tx_pipes[pipe.idx as usize].tail += padded as u64;
        self.flush_tx()?;
        Ok(())
    }

    /// TX notifications sent but not completed.
    pub fn tx_in_flight(&self) -> u32 {
        self.tx_inflight
    }
}
