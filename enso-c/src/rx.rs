//! Receiving: pipes with data in notification order, received bytes,
//! freeing them, and iterating over the frames of a batch.

use std::ffi::c_int;

use enso_abi::wire::{self, FLIT};

use crate::device::EnsoDevice;
use crate::error::Failure;
use crate::guard::guard;
use crate::structs::EnsoBatch;
use crate::{ENSO_ERR_AGAIN, ENSO_ERR_INVALID, ENSO_OK};

/// The handle of a pipe with received data, in notification order, or
/// [`ENSO_ERR_AGAIN`] if none has any. A pipe returned and not fully
/// received stays ready.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_next_pipe_with_data(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| match d.dev.next_pipe_with_data()? {
        Some(p) => d.handle_of(p),
        // Not an error worth a message: the common answer of a poll.
        None => Ok(ENSO_ERR_AGAIN),
    })
}

/// # Safety
/// `dev` is null or a live handle used by this thread only; `batch` is null
/// or valid for writes.
unsafe fn take(dev: *mut EnsoDevice, pipe: c_int, batch: *mut EnsoBatch, consume: bool) -> c_int {
    on_device!(dev, |d| {
        if batch.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null batch"));
        }
        let p = d.rx(pipe)?;
        let mut b = if consume {
            d.dev.recv(p)?
        } else {
            d.dev.peek(p)?
        };
        let bytes = b.bytes_mut();
        let v = EnsoBatch {
            data: bytes.as_mut_ptr(),
            len: bytes.len(),
            next: 0,
        };
        // SAFETY: non-null and, by the caller's contract, writable.
        unsafe { batch.write(v) };
        Ok(ENSO_OK)
    })
}

/// Receives what pipe `pipe` holds and has not handed out yet (possibly
/// nothing: `len` 0). The bytes count as consumed; they stay valid and
/// unchanged until freed ([`enso_free`]) or sent ([`enso_send_and_free`](crate::enso_send_and_free)),
/// and may be changed in place.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `batch` is null
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_recv(
    dev: *mut EnsoDevice,
    pipe: c_int,
    batch: *mut EnsoBatch,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { take(dev, pipe, batch, true) }
}

/// As [`enso_recv`] without consuming: the next receive or peek returns
/// the same bytes (and any newer ones). [`enso_confirm`] consumes part.
///
/// # Safety
/// As [`enso_recv`].
#[no_mangle]
pub unsafe extern "C" fn enso_peek(
    dev: *mut EnsoDevice,
    pipe: c_int,
    batch: *mut EnsoBatch,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { take(dev, pipe, batch, false) }
}

/// As [`enso_recv`], bounded: at most `max_pkts` whole frames in at most
/// `max_bytes` bytes of the pipe (marker flits and padding included; the
/// batch's `len` says how many). Frames past either bound stay for the
/// next receive. A frame's offset in the batch is its address (from
/// [`enso_batch_next`]) minus `data`, right behind a marker flit too.
///
/// # Safety
/// As [`enso_recv`].
#[no_mangle]
pub unsafe extern "C" fn enso_recv_max(
    dev: *mut EnsoDevice,
    pipe: c_int,
    max_bytes: usize,
    max_pkts: usize,
    batch: *mut EnsoBatch,
) -> c_int {
    on_device!(dev, |d| {
        if batch.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null batch"));
        }
        let p = d.rx(pipe)?;
        let mut b = d.dev.recv_max(p, max_bytes, max_pkts)?;
        let bytes = b.bytes_mut();
        let v = EnsoBatch {
            data: bytes.as_mut_ptr(),
            len: bytes.len(),
            next: 0,
        };
        // SAFETY: non-null and, by the caller's contract, writable.
        unsafe { batch.write(v) };
        Ok(ENSO_OK)
    })
}

/// Marks the first `bytes` of a peeked batch as consumed.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_confirm(dev: *mut EnsoDevice, pipe: c_int, bytes: usize) -> c_int {
    on_device!(dev, |d| {
        let p = d.rx(pipe)?;
        d.dev.confirm(p, bytes)?;
        Ok(ENSO_OK)
    })
}

/// Gives the last `bytes` consumed back to the pipe: the next receive
/// returns them again.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_unconsume(dev: *mut EnsoDevice, pipe: c_int, bytes: usize) -> c_int {
    on_device!(dev, |d| {
        let p = d.rx(pipe)?;
        d.dev.unconsume(p, bytes)?;
        Ok(ENSO_OK)
    })
}

/// Hands the first `bytes` of consumed data back to the NIC (a multiple of
/// 64; the pointers of those bytes are invalid afterwards).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_free(dev: *mut EnsoDevice, pipe: c_int, bytes: usize) -> c_int {
    on_device!(dev, |d| {
        let p = d.rx(pipe)?;
        d.dev.free(p, bytes)?;
        Ok(ENSO_OK)
    })
}

/// Hands everything consumed so far back to the NIC.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_free_all(dev: *mut EnsoDevice, pipe: c_int) -> c_int {
    on_device!(dev, |d| {
        let p = d.rx(pipe)?;
        d.dev.free_all(p)?;
        Ok(ENSO_OK)
    })
}

/// Asks the NIC for a notification with the pipe's latest tail now (for a
/// reader waiting on more of a message it has part of).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_prefetch(dev: *mut EnsoDevice, pipe: c_int) -> c_int {
    on_device!(dev, |d| {
        let p = d.rx(pipe)?;
        d.dev.prefetch(p)?;
        Ok(ENSO_OK)
    })
}

/// The next frame of `batch`: stores its address and length and returns 1;
/// returns 0 at the end of the batch, or [`ENSO_ERR_MALFORMED`](crate::ENSO_ERR_MALFORMED) (and ends
/// the iteration) at bytes that are not a frame. Frames are delimited by
/// the same rules as the Rust library's batches: from their own headers
/// (IPv4, IPv6, ARP, 802.3), or behind a marker flit.
///
/// # Safety
/// `batch` is null or a batch filled by [`enso_recv`] or [`enso_peek`]
/// whose bytes are not freed or sent yet (its `data`, `len` unchanged and
/// `next` only moved by this function); `frame` and `len` are null or valid
/// for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_batch_next(
    batch: *mut EnsoBatch,
    frame: *mut *mut u8,
    len: *mut usize,
) -> c_int {
    guard(|| {
        if batch.is_null() || frame.is_null() || len.is_null() {
            return Err(Failure::new(
                ENSO_ERR_INVALID,
                "null batch, frame or length",
            ));
        }
        // SAFETY: non-null and, by the caller's contract, a batch only this
        // call uses.
        let b = unsafe { &mut *batch };
        if b.next >= b.len {
            return Ok(0);
        }
        if b.data.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "batch with null data"));
        }
        // SAFETY: `data .. data + len` is the received span (caller's
        // contract), writable and unchanged by the NIC until freed, and
        // `next < len`.
        let rest = unsafe { std::slice::from_raw_parts_mut(b.data.add(b.next), b.len - b.next) };
        let d = match wire::delimit(rest) {
            Ok(d) if d.start + d.len <= rest.len() => d,
            Ok(_) => {
                b.next = b.len;
                return Err(wire::FrameError::Truncated.into());
            }
            Err(e) => {
                b.next = b.len;
                return Err(e.into());
            }
        };
        let f = rest[d.start..d.start + d.len].as_mut_ptr();
        b.next += (d.flits * FLIT).min(rest.len());
        // SAFETY: both non-null (checked) and writable (caller's contract).
        unsafe {
            frame.write(f);
            len.write(d.len);
        }
        Ok(1)
    })
}

/// The handle of an RX/TX pipe with received data, in notification order
/// (RX-only pipes with data are passed over and stay ready), or
/// [`ENSO_ERR_AGAIN`] if none has any.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_next_rxtx_pipe_with_data(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| match d.dev.next_rxtx_pipe_with_data()? {
        Some(p) => d.handle_of(p.rx()),
        None => Ok(ENSO_ERR_AGAIN),
    })
}
