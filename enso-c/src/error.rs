//! Failures: the library's errors as `ENSO_ERR_*` codes, the calling
//! thread's last error message, and the names of the codes.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt::Display;

use enso::{
    AllocError, AttachError, ConfigError, DeviceError, FreeError, RecvError, SendError, StatsError,
};
use enso_abi::wire::{self};

use crate::{
    ENSO_ERR_AGAIN, ENSO_ERR_ATTACH, ENSO_ERR_BAD_HANDLE, ENSO_ERR_GONE, ENSO_ERR_INTERNAL,
    ENSO_ERR_INVALID, ENSO_ERR_IN_FLIGHT, ENSO_ERR_IO, ENSO_ERR_MALFORMED, ENSO_ERR_NOT_BOUND,
    ENSO_ERR_NOT_OWNER, ENSO_ERR_NOT_RESERVED, ENSO_ERR_NO_MEMORY, ENSO_ERR_NO_PIPES,
    ENSO_ERR_NO_PORT, ENSO_ERR_NO_TX_PIPES, ENSO_ERR_OPTIONS, ENSO_ERR_QUOTA, ENSO_ERR_REFUSED,
    ENSO_ERR_STALLED, ENSO_ERR_TABLE_FULL, ENSO_ERR_TOO_LARGE, ENSO_ERR_TOO_MANY_BYTES,
    ENSO_ERR_UNALIGNED, ENSO_OK,
};

thread_local! {
    /// The message of this thread's last failure.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// A failed call: its code and what went wrong. Made only on failure.
#[derive(Debug)]
pub(crate) struct Failure {
    code: c_int,
    msg: String,
}

impl Failure {
    pub(crate) fn new(code: c_int, msg: impl Display) -> Self {
        Self {
            code,
            msg: msg.to_string(),
        }
    }
}

/// Errors of the Rust library, as codes.
pub(crate) trait Code: Display {
    fn code(&self) -> c_int;
}

impl<E: Code> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::new(e.code(), e)
    }
}

impl Code for DeviceError {
    fn code(&self) -> c_int {
        match self {
            DeviceError::MmioStalled | DeviceError::TxStalled => ENSO_ERR_STALLED,
            DeviceError::Gone => ENSO_ERR_GONE,
        }
    }
}

impl Code for AttachError {
    fn code(&self) -> c_int {
        match self {
            AttachError::Device(_) => ENSO_ERR_ATTACH,
            AttachError::Io(_) => ENSO_ERR_IO,
            AttachError::Options(_) => ENSO_ERR_OPTIONS,
            AttachError::Stalled(d) => d.code(),
        }
    }
}

impl Code for AllocError {
    fn code(&self) -> c_int {
        match self {
            AllocError::NoPipes(_) | AllocError::NoMorePipes(_) | AllocError::NoQueues(_) => {
                ENSO_ERR_NO_PIPES
            }
            AllocError::NoTxPipes(_) => ENSO_ERR_NO_TX_PIPES,
            AllocError::NoPool => ENSO_ERR_OPTIONS,
            AllocError::NoPort(_) => ENSO_ERR_NO_PORT,
            AllocError::NoMemory => ENSO_ERR_NO_MEMORY,
            AllocError::Map(_) => ENSO_ERR_IO,
            AllocError::Refused(_) => ENSO_ERR_REFUSED,
            AllocError::Device(d) => d.code(),
        }
    }
}

impl Code for FreeError {
    fn code(&self) -> c_int {
        match self {
            FreeError::ForeignPipe => ENSO_ERR_BAD_HANDLE,
            FreeError::MoreThanReceived { .. } => ENSO_ERR_TOO_MANY_BYTES,
            FreeError::Unaligned(_) => ENSO_ERR_UNALIGNED,
            FreeError::InFlight => ENSO_ERR_IN_FLIGHT,
            FreeError::Device(d) => d.code(),
        }
    }
}

impl Code for SendError {
    fn code(&self) -> c_int {
        match self {
            SendError::ForeignPipe => ENSO_ERR_BAD_HANDLE,
            SendError::MoreThanReceived { .. } => ENSO_ERR_TOO_MANY_BYTES,
            SendError::Unaligned(_) => ENSO_ERR_UNALIGNED,
            SendError::TooLarge { .. } => ENSO_ERR_TOO_LARGE,
            SendError::NotReserved { .. } => ENSO_ERR_NOT_RESERVED,
            SendError::NoPort(_) => ENSO_ERR_NO_PORT,
            SendError::Frame(_) => ENSO_ERR_MALFORMED,
            SendError::Device(d) => d.code(),
        }
    }
}

impl Code for RecvError {
    fn code(&self) -> c_int {
        match self {
            RecvError::ForeignPipe => ENSO_ERR_BAD_HANDLE,
            RecvError::Device(d) => d.code(),
        }
    }
}

impl Code for ConfigError {
    fn code(&self) -> c_int {
        match self {
            ConfigError::ForeignPipe => ENSO_ERR_BAD_HANDLE,
            ConfigError::BadValue => ENSO_ERR_INVALID,
            ConfigError::Device(d) => d.code(),
            ConfigError::Refused => ENSO_ERR_REFUSED,
            ConfigError::TableFull => ENSO_ERR_TABLE_FULL,
            ConfigError::QuotaReached(_) => ENSO_ERR_QUOTA,
            ConfigError::NotOwner => ENSO_ERR_NOT_OWNER,
            ConfigError::NotBound => ENSO_ERR_NOT_BOUND,
        }
    }
}

impl Code for StatsError {
    fn code(&self) -> c_int {
        match self {
            StatsError::NoPort(_) => ENSO_ERR_NO_PORT,
            StatsError::Unavailable(_) => ENSO_ERR_IO,
        }
    }
}

impl Code for wire::FrameError {
    fn code(&self) -> c_int {
        ENSO_ERR_MALFORMED
    }
}

/// Records `f` as this thread's last error and returns its code.
#[cold]
pub(crate) fn report(f: Failure) -> c_int {
    // A message with a NUL in it keeps what comes before the NUL.
    let msg = match CString::new(f.msg) {
        Ok(m) => m,
        Err(e) => {
            let at = e.nul_position();
            let mut v = e.into_vec();
            v.truncate(at);
            CString::new(v).unwrap_or_default()
        }
    };
    // `try_with`: during thread teardown the message is lost, the code is not.
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = Some(msg));
    f.code
}

/// The text of a caught panic.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    let what = p
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
        .unwrap_or("(no message)");
    format!("internal error: {what}")
}

/// A constant string naming error code `code` (never null; unknown codes
/// get "unknown error code").
#[no_mangle]
pub extern "C" fn enso_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        ENSO_OK => c"success",
        ENSO_ERR_INVALID => c"invalid argument (null pointer, bad string or value out of range)",
        ENSO_ERR_BAD_HANDLE => c"not a pipe of this device, or a pipe of the wrong kind",
        ENSO_ERR_AGAIN => c"nothing to receive now",
        ENSO_ERR_ATTACH => c"the device refused the attachment or could not be reached",
        ENSO_ERR_OPTIONS => c"device options that cannot work",
        ENSO_ERR_IO => c"mapping shared memory failed",
        ENSO_ERR_NO_PIPES => c"no free RX pipe (see the pipes option)",
        ENSO_ERR_NO_TX_PIPES => c"no free TX pipe (see the tx_pipes option)",
        ENSO_ERR_NO_PORT => c"the device has no such port",
        ENSO_ERR_NO_MEMORY => c"the DMA region has no room left",
        ENSO_ERR_TOO_MANY_BYTES => c"more bytes than were received and not yet freed or sent",
        ENSO_ERR_UNALIGNED => c"byte count is not a multiple of 64",
        ENSO_ERR_IN_FLIGHT => c"bytes of this pipe are still being sent",
        ENSO_ERR_TOO_LARGE => c"more bytes than the TX pipe holds",
        ENSO_ERR_NOT_RESERVED => c"sending more bytes than enso_tx_buf reserved",
        ENSO_ERR_MALFORMED => c"bytes that are not a frame",
        ENSO_ERR_STALLED => c"the device stalled",
        ENSO_ERR_GONE => c"the device is gone (stopped, or its process exited)",
        ENSO_ERR_INTERNAL => c"internal error in the library; close the device",
        ENSO_ERR_REFUSED => {
            c"the NIC refused the configuration (bad argument, or a pipe not enabled)"
        }
        ENSO_ERR_TABLE_FULL => c"the NIC's flow table has no room for this flow",
        ENSO_ERR_QUOTA => c"flow rule quota reached (the NIC gives one application 2048 rules)",
        ENSO_ERR_NOT_OWNER => c"the flow's rule belongs to another application",
        ENSO_ERR_NOT_BOUND => c"no rule is bound for this flow",
        _ => c"unknown error code",
    };
    s.as_ptr()
}

/// The message of the calling thread's last failed call (never null; empty
/// if none failed). Valid until this thread's next failing call.
#[no_mangle]
pub extern "C" fn enso_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|l| l.borrow().as_ref().map(|m| m.as_ptr()))
        .ok()
        .flatten()
        .unwrap_or(c"".as_ptr())
}
