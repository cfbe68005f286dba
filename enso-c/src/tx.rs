//! Sending: received bytes in place, and TX pipes' buffers and frames;
//! completions.

use std::ffi::c_int;

use crate::device::EnsoDevice;
use crate::error::Failure;
use crate::guard::guard;
use crate::{ENSO_ERR_INVALID, ENSO_OK};

/// Sends the first `bytes` of received and not yet sent data of RX/TX pipe
/// `pipe` in place on `port`; they are freed when the NIC has sent them.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_send_and_free(
    dev: *mut EnsoDevice,
    pipe: c_int,
    bytes: usize,
    port: u32,
) -> c_int {
    on_device!(dev, |d| {
        let p = d.rxtx(pipe)?;
        d.dev.send_and_free_on(p, bytes, port)?;
        Ok(ENSO_OK)
    })
}

/// Skips the first `bytes` of received and not yet sent data of RX/TX pipe
/// `pipe` without sending them (they are freed in order, after sends
/// before them complete).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_discard(dev: *mut EnsoDevice, pipe: c_int, bytes: usize) -> c_int {
    on_device!(dev, |d| {
        let p = d.rxtx(pipe)?;
        d.dev.discard(p, bytes)?;
        Ok(ENSO_OK)
    })
}

/// Reserves `len` writable bytes at the end of TX pipe `pipe`, waiting
/// (bounded) for room, and stores their address in `*buf`. Write frames
/// there (each on a 64 B boundary, see [`enso_write_frame`]), then call
/// [`enso_send`]. The span is valid until that send.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `buf` is null
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_tx_buf(
    dev: *mut EnsoDevice,
    pipe: c_int,
    len: usize,
    buf: *mut *mut u8,
) -> c_int {
    on_device!(dev, |d| {
        if buf.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null buffer pointer"));
        }
        let p = d.tx(pipe)?;
        let span = d.dev.tx_buf(p, len)?.as_mut_ptr();
        // SAFETY: non-null and writable (caller's contract).
        unsafe { buf.write(span) };
        Ok(ENSO_OK)
    })
}

/// Sends the first `len` bytes of the span the last [`enso_tx_buf`] of
/// `pipe` reserved, on `port` (`len` a multiple of 64, but for the last
/// frame's padding).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_send(
    dev: *mut EnsoDevice,
    pipe: c_int,
    len: usize,
    port: u32,
) -> c_int {
    on_device!(dev, |d| {
        let p = d.tx(pipe)?;
        d.dev.send(p, len, port)?;
        Ok(ENSO_OK)
    })
}

/// Stores the free bytes of TX pipe `pipe` in `*space` (after reclaiming
/// completions).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `space` is null
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_tx_space(
    dev: *mut EnsoDevice,
    pipe: c_int,
    space: *mut usize,
) -> c_int {
    on_device!(dev, |d| {
        if space.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null space pointer"));
        }
        let p = d.tx(pipe)?;
        let n = d.dev.tx_space(p)?;
        // SAFETY: non-null and writable (caller's contract).
        unsafe { space.write(n) };
        Ok(ENSO_OK)
    })
}

/// Reclaims completed sends (freeing RX/TX pipe bytes and TX pipe room);
/// returns how many completed.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_reap_completions(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| {
        let n = d.dev.reap_completions()?;
        Ok(n.min(c_int::MAX as usize) as c_int)
    })
}

/// Blocks until one of the handle's pipes or queues has data or a send
/// completes, or `timeout_us` microseconds pass; returns 1 when there is
/// something to take, 0 when the wait ended without (the NIC wakes the
/// handle; see `Device::wait`). For a loop that would otherwise spin on
/// an idle NIC.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_wait(dev: *mut EnsoDevice, timeout_us: u64) -> c_int {
    on_device!(dev, |d| {
        let ready = d.dev.wait(std::time::Duration::from_micros(timeout_us))?;
        Ok(c_int::from(ready))
    })
}

/// Sends (TX notifications) not yet completed by the NIC.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_tx_in_flight(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| Ok(
        d.dev.tx_in_flight().min(c_int::MAX as u32) as c_int
    ))
}

/// Writes `frame` (`frame_len` bytes, without FCS) into `out` as it must
/// appear in a TX pipe: behind a marker flit if no header states its
/// length. Returns the bytes used (a multiple of 64), or
/// [`ENSO_ERR_MALFORMED`](crate::ENSO_ERR_MALFORMED) if it is not a frame or `out_len` is too short
/// (nothing is written then).
///
/// # Safety
/// `out` is null or valid for `out_len` bytes of writes; `frame` is null or
/// valid for `frame_len` bytes of reads; the two do not overlap.
#[no_mangle]
pub unsafe extern "C" fn enso_write_frame(
    out: *mut u8,
    out_len: usize,
    frame: *const u8,
    frame_len: usize,
) -> c_int {
    guard(|| {
        if out.is_null() || frame.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null buffer or frame"));
        }
        // SAFETY: non-null, and the caller's contract gives the lengths
        // and that the spans do not overlap.
        let (out, frame) = unsafe {
            (
                std::slice::from_raw_parts_mut(out, out_len),
                std::slice::from_raw_parts(frame, frame_len),
            )
        };
        let n = enso::batch::write_frame(out, frame)?;
        Ok(n as c_int)
    })
}
