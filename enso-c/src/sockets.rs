//! Ensō's socket calls over one device handle.

use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use enso::socket::{Socket, SocketError, Sockets};

use crate::device::{enso_device_open, enso_device_options_default, EnsoDevice};
use crate::error::{panic_text, report, Code, Failure};
use crate::guard::{flag, guard};
use crate::structs::{EnsoBatch, EnsoDeviceOptions};
use crate::{
    ENSO_ERR_AGAIN, ENSO_ERR_BAD_HANDLE, ENSO_ERR_INTERNAL, ENSO_ERR_INVALID, ENSO_ERR_MALFORMED,
    ENSO_OK,
};

/// The sockets behind an `enso_sockets_t *`: Ensō's socket calls over one
/// device handle.
pub struct EnsoSockets {
    socks: Sockets,
    /// A call on these sockets panicked: their state may be inconsistent.
    poisoned: bool,
}

impl Code for SocketError {
    fn code(&self) -> c_int {
        match self {
            SocketError::NoSocket(_) => ENSO_ERR_BAD_HANDLE,
            SocketError::NotFrames(_) => ENSO_ERR_MALFORMED,
            SocketError::Enso(e) => e.code(),
        }
    }
}

impl Code for enso::Error {
    fn code(&self) -> c_int {
        match self {
            enso::Error::Attach(e) => e.code(),
            enso::Error::Alloc(e) => e.code(),
            enso::Error::Recv(e) => e.code(),
            enso::Error::Free(e) => e.code(),
            enso::Error::Send(e) => e.code(),
            enso::Error::Config(e) => e.code(),
            enso::Error::Device(e) => e.code(),
            enso::Error::Stats(e) => e.code(),
            e => e.device().map_or(ENSO_ERR_INTERNAL, |d| d.code()),
        }
    }
}

/// As [`with_dev`], for sockets.
///
/// # Safety
/// `s` is null or a handle from [`enso_sockets_open`], not closed, and no
/// other thread is using it.
unsafe fn with_socks(
    s: *mut EnsoSockets,
    f: impl FnOnce(&mut Sockets) -> Result<c_int, Failure>,
) -> c_int {
    if s.is_null() {
        return report(Failure::new(ENSO_ERR_INVALID, "null sockets handle"));
    }
    // SAFETY: non-null, and by the caller's contract a live handle that
    // only this thread uses, so the one `&mut` is not aliased.
    let x = unsafe { &mut *s };
    if x.poisoned {
        return report(Failure::new(
            ENSO_ERR_INTERNAL,
            "an earlier call on these sockets failed internally; close them",
        ));
    }
    match catch_unwind(AssertUnwindSafe(|| f(&mut x.socks))) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => report(e),
        Err(p) => {
            // SAFETY: as above; the closure holding the other borrow is gone.
            unsafe { (*s).poisoned = true };
            report(Failure::new(ENSO_ERR_INTERNAL, panic_text(&*p)))
        }
    }
}

macro_rules! on_sockets {
    ($s:expr, |$x:ident| $body:expr) => {{
        let f = |$x: &mut Sockets| -> Result<c_int, Failure> { $body };
        // SAFETY: the entry point's contract: `$s` is null or a handle
        // from `enso_sockets_open`, not closed, used by this thread only.
        unsafe { with_socks($s, f) }
    }};
}

fn socket_of(s: c_int) -> Result<Socket, Failure> {
    u32::try_from(s)
        .map(Socket)
        .map_err(|_| Failure::new(ENSO_ERR_BAD_HANDLE, format!("{s}: not a socket")))
}

fn batch_out(batch: *mut EnsoBatch, b: &mut enso::RxBatch<'_>) {
    let bytes = b.bytes_mut();
    let v = EnsoBatch {
        data: bytes.as_mut_ptr(),
        len: bytes.len(),
        next: 0,
    };
    // SAFETY: the callers checked `batch` is non-null; by their contract it
    // is writable.
    unsafe { batch.write(v) };
}

/// Attaches to the standalone device `name` in `dir` (null for `/dev/shm`)
/// for Ensō's socket calls (room for 64 sockets), storing the handle in
/// `*out`.
///
/// # Safety
/// `name` and `dir` are null or NUL-terminated strings; `out` is null or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_sockets_open(
    name: *const c_char,
    dir: *const c_char,
    out: *mut *mut EnsoSockets,
) -> c_int {
    let mut opts = EnsoDeviceOptions {
        pipes: 0,
        tx_pipes: 0,
        tx_pipe_size: 0,
        tx_credits: 0,
        prefetch: 0,
    };
    // SAFETY: a valid, writable options struct.
    unsafe { enso_device_options_default(&mut opts) };
    let so = Sockets::options();
    opts.pipes = so.pipes;
    opts.tx_pipes = so.tx_pipes;
    let mut dev: *mut EnsoDevice = std::ptr::null_mut();
    // SAFETY: the caller's contract for `name` and `dir`; valid options and
    // out pointer.
    let rc = unsafe { enso_device_open(name, dir, &opts, &mut dev) };
    if rc != ENSO_OK {
        return rc;
    }
    // SAFETY: `enso_device_open` succeeded: `dev` came from `Box::into_raw`
    // and nothing else holds it.
    let d = unsafe { Box::from_raw(dev) };
    guard(|| {
        if out.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null out pointer"));
        }
        let s = Box::new(EnsoSockets {
            socks: Sockets::from_device(d.dev),
            poisoned: false,
        });
        // SAFETY: non-null and writable (caller's contract).
        unsafe { out.write(Box::into_raw(s)) };
        Ok(ENSO_OK)
    })
}

/// Detaches and frees the sockets handle (null is allowed).
///
/// # Safety
/// `s` is null or a handle from [`enso_sockets_open`], not closed yet and
/// not used by another thread; it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn enso_sockets_close(s: *mut EnsoSockets) -> c_int {
    if s.is_null() {
        return ENSO_OK;
    }
    // SAFETY: by the caller's contract, from `Box::into_raw` and not closed.
    let b = unsafe { Box::from_raw(s) };
    guard(move || {
        drop(b);
        Ok(ENSO_OK)
    })
}

/// `socket()`: a new socket (an RX/TX pipe on port 0); `fallback` non-zero
/// makes it receive what no binding steers elsewhere. Returns it (>= 0).
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_socket(s: *mut EnsoSockets, fallback: c_int) -> c_int {
    on_sockets!(s, |x| Ok(x.socket(flag(fallback))?.0 as c_int))
}

/// `bind()`: UDP datagrams to IPv4 address `ip` (host byte order:
/// 10.0.0.1 is 0x0a000001) and `port` (host byte order) go to socket
/// `sock`; 0 is a wildcard.
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_socket_bind(
    s: *mut EnsoSockets,
    sock: c_int,
    ip: u32,
    port: u16,
) -> c_int {
    on_sockets!(s, |x| {
        let addr = std::net::SocketAddrV4::new(ip.into(), port);
        x.bind(socket_of(sock)?, addr)?;
        Ok(ENSO_OK)
    })
}

/// `recv()`: copies whole frames received on `sock` into `buf` (each on a
/// 64 B boundary, as many as fit) and frees them. Returns the bytes
/// written (0: nothing came, or the first frame does not fit).
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only; `buf` is
/// null or valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn enso_socket_recv(
    s: *mut EnsoSockets,
    sock: c_int,
    buf: *mut u8,
    len: usize,
) -> c_int {
    on_sockets!(s, |x| {
        if buf.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null buffer"));
        }
        // SAFETY: non-null and, by the caller's contract, `len` writable bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(buf, len.min(c_int::MAX as usize)) };
        Ok(x.recv(socket_of(sock)?, out)? as c_int)
    })
}

/// `recv_zc()`: the frames `sock` has received and not yet taken, in
/// place, in `*batch` (`len` 0 if none). Hand them back with
/// [`enso_socket_free`] or send them with [`enso_socket_send_zc`].
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only; `batch`
/// is null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_socket_recv_zc(
    s: *mut EnsoSockets,
    sock: c_int,
    batch: *mut EnsoBatch,
) -> c_int {
    on_sockets!(s, |x| {
        if batch.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null batch"));
        }
        let mut b = x.recv_zc(socket_of(sock)?)?;
        batch_out(batch, &mut b);
        Ok(ENSO_OK)
    })
}

/// `recv_select()`: the next socket with frames (its number is returned)
/// and its frames in place in `*batch`; [`ENSO_ERR_AGAIN`] if none has any.
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only; `batch`
/// is null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_recv_select(s: *mut EnsoSockets, batch: *mut EnsoBatch) -> c_int {
    on_sockets!(s, |x| {
        if batch.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null batch"));
        }
        match x.recv_select()? {
            Some((so, mut b)) => {
                batch_out(batch, &mut b);
                Ok(so.0 as c_int)
            }
            None => Ok(ENSO_ERR_AGAIN),
        }
    })
}

/// `free_enso_pipe()`: hands back the first `len` bytes taken from `sock`.
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_socket_free(s: *mut EnsoSockets, sock: c_int, len: usize) -> c_int {
    on_sockets!(s, |x| {
        x.free(socket_of(sock)?, len)?;
        Ok(ENSO_OK)
    })
}

/// `send()` of received bytes: sends the first `len` bytes taken from
/// `sock` and not yet sent or freed, in place, on port 0; they are freed
/// once sent.
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_socket_send_zc(
    s: *mut EnsoSockets,
    sock: c_int,
    len: usize,
) -> c_int {
    on_sockets!(s, |x| {
        x.send_zc(socket_of(sock)?, len)?;
        Ok(ENSO_OK)
    })
}

/// `send()` of bytes elsewhere: copies `len` bytes of frames at `frames`
/// (each on a 64 B boundary; the last one's padding may be left out) into
/// the handle's TX pipe and sends them on port 0.
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only; `frames`
/// is null or valid for `len` bytes of reads.
#[no_mangle]
pub unsafe extern "C" fn enso_socket_send(
    s: *mut EnsoSockets,
    sock: c_int,
    frames: *const u8,
    len: usize,
) -> c_int {
    on_sockets!(s, |x| {
        if frames.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null frames"));
        }
        // SAFETY: non-null and, by the caller's contract, `len` readable bytes.
        let f = unsafe { std::slice::from_raw_parts(frames, len) };
        x.send(socket_of(sock)?, f)?;
        Ok(ENSO_OK)
    })
}

/// `get_completions()`: sends completed since the last call.
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_get_completions(s: *mut EnsoSockets) -> c_int {
    on_sockets!(s, |x| Ok(
        x.get_completions()?.min(c_int::MAX as usize) as c_int
    ))
}

/// `shutdown()`: removes the socket's bindings, hands back what it holds
/// and frees its pipe.
///
/// # Safety
/// `s` is null or a live sockets handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_socket_shutdown(s: *mut EnsoSockets, sock: c_int) -> c_int {
    on_sockets!(s, |x| {
        x.shutdown(socket_of(sock)?)?;
        Ok(ENSO_OK)
    })
}
