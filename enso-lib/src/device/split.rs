//! Receiving on one pipe while sending on another: a batch borrows its
//! pipe's bytes, and [`TxHalf`] the device's sending side, so an RX batch
//! can be walked while frames are written and sent on a TX pipe (the way
//! Ensō's `echo_copy` loop is written).

use std::marker::PhantomData;
use std::ptr::NonNull;

use super::{Device, RxPipe, TxPipe};
use crate::batch::RxBatch;
use crate::error::{RecvError, SendError};

/// The sending side of a device, for one TX pipe, handed out beside an RX
/// batch by [`Device::recv_and_tx`]. It can reserve, write and send on its
/// TX pipe (and reap completions) while the batch is alive.
pub struct TxHalf<'a> {
    dev: NonNull<Device>,
    pipe: TxPipe,
    _borrow: PhantomData<&'a mut Device>,
}

impl std::fmt::Debug for TxHalf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxHalf").field("pipe", &self.pipe).finish()
    }
}

impl Device {
    /// [`Device::recv`] on `rx` and, in the same borrow, the sending side
    /// of TX pipe `tx`: walk the batch and send on the TX pipe as you go.
    /// The batch's bytes stay the caller's until freed ([`Device::free`],
    /// after both are dropped), whatever is sent meanwhile.
    pub fn recv_and_tx(
        &mut self,
        rx: impl Into<RxPipe>,
        tx: TxPipe,
    ) -> Result<(RxBatch<'_>, TxHalf<'_>), RecvError> {
        if self.tx_idx(tx).is_none() {
            return Err(RecvError::ForeignPipe);
        }
        let data: *mut [u8] = self.take(rx.into(), true)?.data;
        let batch = RxBatch {
            // SAFETY: `data` lies in the RX pipe's own mapping, not in
            // `Device`: no method of `TxHalf` writes it or hands it back to
            // the NIC (the bytes are consumed, not freed; reaping frees only
            // bytes sent before), so the batch and the `&mut Device` the
            // half makes for each call never alias. Both live for the one
            // borrow of `self`.
            data: unsafe { &mut *data },
        };
        let half = TxHalf {
            dev: NonNull::from(&mut *self),
            pipe: tx,
            _borrow: PhantomData,
        };
        Ok((batch, half))
    }
}

impl TxHalf<'_> {
    fn dev(&mut self) -> &mut Device {
        // SAFETY: made from the `&mut Device` of `recv_and_tx`, whose borrow
        // this value holds; see there for why it does not alias the batch.
        unsafe { self.dev.as_mut() }
    }

    /// The TX pipe.
    pub fn pipe(&self) -> TxPipe {
        self.pipe
    }

    /// [`Device::tx_space`] of the TX pipe.
    pub fn tx_space(&mut self) -> Result<usize, SendError> {
        let p = self.pipe;
        self.dev().tx_space(p)
    }

    /// [`Device::tx_buf`] of the TX pipe.
    pub fn tx_buf(&mut self, len: usize) -> Result<&mut [u8], SendError> {
        let p = self.pipe;
        self.dev().tx_buf(p, len)
    }

    /// [`Device::send`] of the TX pipe.
    pub fn send(&mut self, len: usize, port: u32) -> Result<(), SendError> {
        let p = self.pipe;
        self.dev().send(p, len, port)
    }

    /// Copies one frame into the TX pipe (behind a marker flit if its
    /// headers state no length, padded to 64 B) and sends it on `port`:
    /// Ensō's `AllocateBuf`, `memcpy`, `SendAndFree`.
    pub fn send_copy(&mut self, frame: &[u8], port: u32) -> Result<(), SendError> {
        let need = crate::batch::stream_len(frame)?;
        let buf = self.tx_buf(need)?;
        let used = crate::batch::write_frame(buf, frame)?;
        self.send(used, port)
    }

    /// [`Device::reap_completions`].
    pub fn reap_completions(&mut self) -> Result<usize, crate::error::DeviceError> {
        self.dev().reap_completions()
    }
}
