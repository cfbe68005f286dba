//! A C interface to the Ensō application library (`enso`): `libenso_c`
//! and its header `include/enso.h`.
//!
//! * A device is an opaque handle (`enso_device_t *`) from
//!   [`enso_device_open`], owned by one thread at a time.
//! * Pipes are small non-negative integers, valid only with the device that
//!   allocated them. RX and RX/TX pipes count from 0; TX pipes from
//!   [`TX_HANDLE_BASE`], so passing one kind where the other is expected is
//!   refused ([`ENSO_ERR_BAD_HANDLE`]) rather than taken for a pipe of the
//!   other kind.
//! * Every function returns 0 (or a non-negative count or handle) on
//!   success and a negative `ENSO_ERR_*` code on failure;
//!   [`enso_strerror`] names a code and [`enso_last_error`] gives the
//!   message of the calling thread's last failure.
//! * No panic crosses the boundary: each entry point catches one and
//!   returns [`ENSO_ERR_INTERNAL`]; a device whose call panicked refuses
//!   every later call but [`enso_device_close`] with that code, since its
//!   state may be half updated.
//!
//! The header is written by hand; `tests/header.rs` checks that it
//! declares exactly the functions, structures and constants defined here,
//! with the same types.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt::Display;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use enso::socket::{Socket, SocketError, Sockets};
use enso::{
    AllocError, AttachError, ConfigError, Device, DeviceError, DeviceOptions, FlowRule, FreeError,
    RecvError, RxPipe, RxTxPipe, SendError, StatsError, TsFormat, TxPipe,
};
use enso_abi::wire::{self, FLIT};

/// Success.
pub const ENSO_OK: c_int = 0;
/// A null pointer, a string that is not UTF-8, or a value out of range.
pub const ENSO_ERR_INVALID: c_int = -1;
/// A pipe handle this device did not allocate, or of the wrong kind.
pub const ENSO_ERR_BAD_HANDLE: c_int = -2;
/// Nothing to do now: no pipe has data ([`enso_next_pipe_with_data`]).
pub const ENSO_ERR_AGAIN: c_int = -3;
/// The device refused the attachment or could not be reached.
pub const ENSO_ERR_ATTACH: c_int = -4;
/// Device options that cannot work.
pub const ENSO_ERR_OPTIONS: c_int = -5;
/// Mapping shared memory failed.
pub const ENSO_ERR_IO: c_int = -6;
/// Every RX (or RX/TX) pipe the handle reserved is in use.
pub const ENSO_ERR_NO_PIPES: c_int = -7;
/// Every TX pipe the handle reserved is in use.
pub const ENSO_ERR_NO_TX_PIPES: c_int = -8;
/// The device has no such port.
pub const ENSO_ERR_NO_PORT: c_int = -9;
/// The handle's DMA region has no room left.
pub const ENSO_ERR_NO_MEMORY: c_int = -10;
/// More bytes than were received (and not yet freed or sent).
pub const ENSO_ERR_TOO_MANY_BYTES: c_int = -11;
/// A byte count that is not a multiple of 64.
pub const ENSO_ERR_UNALIGNED: c_int = -12;
/// Bytes of this pipe are still being sent: free them by sending, or
/// after the sends complete.
pub const ENSO_ERR_IN_FLIGHT: c_int = -13;
/// More bytes than a TX pipe holds.
pub const ENSO_ERR_TOO_LARGE: c_int = -14;
/// Sending more than the last `enso_tx_buf` reserved.
pub const ENSO_ERR_NOT_RESERVED: c_int = -15;
/// Batch bytes that are not frames (a corrupted pipe), or a frame that
/// cannot be written to a TX stream.
pub const ENSO_ERR_MALFORMED: c_int = -16;
/// The device stopped taking register writes or completing sends.
pub const ENSO_ERR_STALLED: c_int = -17;
/// The device is gone (stopped, or its process exited).
pub const ENSO_ERR_GONE: c_int = -18;
/// A bug in the library (a caught panic); close the device.
pub const ENSO_ERR_INTERNAL: c_int = -19;
// The NIC's answers to configuration calls, -40 and down.
/// The NIC refused the configuration (bad argument, pipe not enabled).
pub const ENSO_ERR_REFUSED: c_int = -40;
/// The NIC's flow table has no room for the flow.
pub const ENSO_ERR_TABLE_FULL: c_int = -41;
/// The application holds as many flow rules as the NIC allows one.
pub const ENSO_ERR_QUOTA: c_int = -42;
/// The flow's rule belongs to another application.
pub const ENSO_ERR_NOT_OWNER: c_int = -43;
/// No rule is bound for the flow.
pub const ENSO_ERR_NOT_BOUND: c_int = -44;

/// Timestamp format: the emulator's own (little-endian nanoseconds).
pub const ENSO_TS_NATIVE: c_int = 0;
/// Timestamp format: the real Ensō NIC's (big-endian cycles of 5 ns), as
/// Ensō's `get_pkt_rtt` reads it.
pub const ENSO_TS_ENSO: c_int = 1;
/// Ensō's default timestamp offset (its `kDefaultRttOffset`).
pub const ENSO_DEFAULT_RTT_OFFSET: c_int = 18;
const _: () = assert!(ENSO_DEFAULT_RTT_OFFSET == enso::DEFAULT_RTT_OFFSET as c_int);

/// The first TX pipe handle; RX and RX/TX handles are below it.
pub const TX_HANDLE_BASE: c_int = 0x10000;

/// Settings of a device handle ([`enso_device_options_default`] fills in
/// the library's defaults).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EnsoDeviceOptions {
    /// RX and RX/TX pipes the handle may allocate (at most 65535).
    pub pipes: u32,
    /// TX pipes the handle may allocate (at most 65535).
    pub tx_pipes: u32,
    /// Bytes per TX pipe: a power of two of at least 4096.
    pub tx_pipe_size: u64,
    /// TX notifications in flight at most (at least 1).
    pub tx_credits: u32,
    /// Notification prefetching: -1 follows the device's mode, 0 off, 1 on.
    pub prefetch: i32,
}

/// Received bytes of one pipe: `len` bytes at `data`, frames back to back
/// on 64 B boundaries. `next` is the iteration cursor of
/// [`enso_batch_next`] (0 after a receive).
#[repr(C)]
#[derive(Debug)]
pub struct EnsoBatch {
    pub data: *mut u8,
    pub len: usize,
    pub next: usize,
}

/// A flow rule: IPv4 addresses and ports in host byte order (10.1.0.1 is
/// 0x0a010001), protocol 6 (TCP) or 17 (UDP); zero fields are wildcards
/// as the NIC's matching rules define.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EnsoFlowRule {
    pub src_ip: u32,
    pub dst_ip: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
}

/// What the library counted (software's view of one device handle).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EnsoDeviceStats {
    pub notifications: u64,
    pub notification_polls: u64,
    pub head_writes: u64,
    pub prefetches: u64,
    pub tx_notifications: u64,
    pub completions: u64,
    pub mmio_writes: u64,
    pub bogus_notifications: u64,
}

/// The NIC's counters of a port ([`enso_port_stats`]): frames and bytes
/// each way, the port's drops by cause, and the drops of the handle's
/// pipes summed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EnsoPortStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub drop_no_match: u64,
    pub drop_malformed: u64,
    pub drop_oversize: u64,
    pub drop_wire_fifo_full: u64,
    pub drop_wire: u64,
    pub tx_discarded: u64,
    pub pipe_full: u64,
    pub notif_ring_full: u64,
    pub not_udp: u64,
}

/// An RX pipe and, if it was allocated as one, its RX/TX view.
#[derive(Clone, Copy, Debug)]
struct RxEntry {
    pipe: RxPipe,
    rxtx: Option<RxTxPipe>,
}

/// The device behind an `enso_device_t *`.
pub struct EnsoDevice {
    dev: Device,
    /// Indexed by RX handle.
    rx: Vec<RxEntry>,
    /// Indexed by TX handle - [`TX_HANDLE_BASE`].
    tx: Vec<TxPipe>,
    /// The RX handle `enso_next_pipe_with_data` returned last (looked at
    /// first when mapping the next pipe back to its handle).
    last: usize,
    /// A call on this device panicked: its state may be inconsistent.
    poisoned: bool,
}

// ---------------------------------------------------------------------
// Errors

thread_local! {
    /// The message of this thread's last failure.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// A failed call: its code and what went wrong. Made only on failure.
#[derive(Debug)]
struct Failure {
    code: c_int,
    msg: String,
}

impl Failure {
    fn new(code: c_int, msg: impl Display) -> Self {
        Self {
            code,
            msg: msg.to_string(),
        }
    }
}

/// Errors of the Rust library, as codes.
trait Code: Display {
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
            AllocError::NoPipes(_) | AllocError::NoQueues(_) => ENSO_ERR_NO_PIPES,
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
fn report(f: Failure) -> c_int {
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
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    let what = p
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
        .unwrap_or("(no message)");
    format!("internal error: {what}")
}

/// Runs an entry point that touches no device; a panic becomes
/// [`ENSO_ERR_INTERNAL`].
fn guard(f: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => report(e),
        Err(p) => report(Failure::new(ENSO_ERR_INTERNAL, panic_text(&*p))),
    }
}

/// Runs an entry point on device `dev`: refuses a null or poisoned device;
/// a panic poisons it and becomes [`ENSO_ERR_INTERNAL`].
///
/// # Safety
/// `dev` is null or a handle from [`enso_device_open`], not closed, and
/// no other thread is using it.
unsafe fn with_dev(
    dev: *mut EnsoDevice,
    f: impl FnOnce(&mut EnsoDevice) -> Result<c_int, Failure>,
) -> c_int {
    if dev.is_null() {
        return report(Failure::new(ENSO_ERR_INVALID, "null device handle"));
    }
    // SAFETY: non-null, and by the caller's contract a live handle that
    // only this thread uses, so the one `&mut` is not aliased.
    let d = unsafe { &mut *dev };
    if d.poisoned {
        return report(Failure::new(
            ENSO_ERR_INTERNAL,
            "an earlier call on this device failed internally; close it",
        ));
    }
    match catch_unwind(AssertUnwindSafe(|| f(d))) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => report(e),
        Err(p) => {
            // SAFETY: as above; the closure holding the other borrow is gone.
            unsafe { (*dev).poisoned = true };
            report(Failure::new(ENSO_ERR_INTERNAL, panic_text(&*p)))
        }
    }
}

/// Runs `$body` on device `$dev` through [`with_dev`], in an entry point
/// whose contract makes `$dev` null or a live handle only the calling
/// thread uses.
macro_rules! on_device {
    ($dev:expr, |$d:ident| $body:expr) => {{
        let f = |$d: &mut EnsoDevice| -> Result<c_int, Failure> { $body };
        // SAFETY: the entry point's contract: `$dev` is null or a handle
        // from `enso_device_open`, not closed, used by this thread only.
        unsafe { with_dev($dev, f) }
    }};
}

/// Writes `v` through `out`, refusing a null pointer.
///
/// # Safety
/// `out` is null or valid for a write of a `T`.
unsafe fn put<T>(out: *mut T, v: T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::new(ENSO_ERR_INVALID, format!("null {what}")));
    }
    // SAFETY: non-null and, by the caller's contract, valid for writes.
    unsafe { out.write(v) };
    Ok(())
}

fn flag(v: c_int) -> bool {
    v != 0
}

impl EnsoDevice {
    fn rx_entry(&self, h: c_int) -> Result<RxEntry, Failure> {
        usize::try_from(h)
            .ok()
            .and_then(|i| self.rx.get(i))
            .copied()
            .ok_or_else(|| {
                Failure::new(
                    ENSO_ERR_BAD_HANDLE,
                    format!("{h}: not an RX pipe of this device"),
                )
            })
    }

    fn rx(&self, h: c_int) -> Result<RxPipe, Failure> {
        self.rx_entry(h).map(|e| e.pipe)
    }

    fn rxtx(&self, h: c_int) -> Result<RxTxPipe, Failure> {
        self.rx_entry(h)?
            .rxtx
            .ok_or_else(|| Failure::new(ENSO_ERR_BAD_HANDLE, format!("{h}: not an RX/TX pipe")))
    }

    fn tx(&self, h: c_int) -> Result<TxPipe, Failure> {
        h.checked_sub(TX_HANDLE_BASE)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.tx.get(i))
            .copied()
            .ok_or_else(|| {
                Failure::new(
                    ENSO_ERR_BAD_HANDLE,
                    format!("{h}: not a TX pipe of this device"),
                )
            })
    }

    fn port(&self, port: u32) -> Result<(), Failure> {
        if (port as usize) < self.dev.info().ports {
            Ok(())
        } else {
            Err(Failure::new(
                ENSO_ERR_NO_PORT,
                format!("no port {port} (the device has {})", self.dev.info().ports),
            ))
        }
    }

    fn add_rx(&mut self, pipe: RxPipe, rxtx: Option<RxTxPipe>) -> c_int {
        self.rx.push(RxEntry { pipe, rxtx });
        self.rx.len() as c_int - 1
    }

    /// The handle of `pipe` (one of ours: `Device` hands out only pipes
    /// it allocated, and this device allocated them all through `rx`).
    fn handle_of(&mut self, pipe: RxPipe) -> Result<c_int, Failure> {
        if self.rx.get(self.last).is_some_and(|e| e.pipe == pipe) {
            return Ok(self.last as c_int);
        }
        let i = self.rx.iter().position(|e| e.pipe == pipe).ok_or_else(|| {
            Failure::new(
                ENSO_ERR_INTERNAL,
                "the device returned a pipe with no handle",
            )
        })?;
        self.last = i;
        Ok(i as c_int)
    }
}

// ---------------------------------------------------------------------
// Errors and options

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

/// Fills `opts` with the library's defaults (16 pipes, 1 TX pipe of 2 MiB,
/// 500 TX credits, prefetching as the device says).
///
/// # Safety
/// `opts` is null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_device_options_default(opts: *mut EnsoDeviceOptions) -> c_int {
    guard(|| {
        let d = DeviceOptions::default();
        let o = EnsoDeviceOptions {
            pipes: d.pipes,
            tx_pipes: d.tx_pipes,
            tx_pipe_size: d.tx_pipe_size as u64,
            tx_credits: d.tx_credits,
            prefetch: -1,
        };
        // SAFETY: the caller's contract.
        unsafe { put(opts, o, "options") }?;
        Ok(ENSO_OK)
    })
}

fn options(o: &EnsoDeviceOptions) -> Result<DeviceOptions, Failure> {
    let bad = |what: &str| Err(Failure::new(ENSO_ERR_OPTIONS, what));
    if o.pipes > 0xffff || o.tx_pipes > 0xffff {
        return bad("pipes and tx_pipes must be at most 65535");
    }
    let Ok(tx_pipe_size) = usize::try_from(o.tx_pipe_size) else {
        return bad("tx_pipe_size too large");
    };
    let prefetch = match o.prefetch {
        -1 => None,
        0 => Some(false),
        1 => Some(true),
        _ => return bad("prefetch must be -1, 0 or 1"),
    };
    Ok(DeviceOptions {
        pipes: o.pipes,
        tx_pipes: o.tx_pipes,
        tx_pipe_size,
        tx_credits: o.tx_credits,
        prefetch,
        ..DeviceOptions::default()
    })
}

// ---------------------------------------------------------------------
// Devices

/// Attaches to the standalone device `name` in directory `dir` (null for
/// `/dev/shm`), with options `opts` (null for the defaults), and stores the
/// handle in `*out` (left untouched on failure).
///
/// # Safety
/// `name` and `dir` are null or NUL-terminated strings; `opts` is null or
/// points to options; `out` is null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_device_open(
    name: *const c_char,
    dir: *const c_char,
    opts: *const EnsoDeviceOptions,
    out: *mut *mut EnsoDevice,
) -> c_int {
    guard(|| {
        if name.is_null() || out.is_null() {
            return Err(Failure::new(
                ENSO_ERR_INVALID,
                "null name or handle pointer",
            ));
        }
        // SAFETY: non-null and, by the caller's contract, NUL-terminated.
        let name = unsafe { CStr::from_ptr(name) }
            .to_str()
            .map_err(|_| Failure::new(ENSO_ERR_INVALID, "device name is not UTF-8"))?;
        enso_abi::devname::check_name(name).map_err(|e| Failure::new(ENSO_ERR_INVALID, e))?;
        let dir = if dir.is_null() {
            Path::new("/dev/shm")
        } else {
            // SAFETY: as `name`.
            let d = unsafe { CStr::from_ptr(dir) };
            Path::new(std::ffi::OsStr::from_bytes(d.to_bytes()))
        };
        let opts = if opts.is_null() {
            DeviceOptions::default()
        } else {
            // SAFETY: non-null and, by the caller's contract, options.
            options(unsafe { &*opts })?
        };
        let dev = Device::open_in(dir, name, opts)?;
        let h = Box::new(EnsoDevice {
            dev,
            rx: Vec::new(),
            tx: Vec::new(),
            last: 0,
            poisoned: false,
        });
        // SAFETY: `out` is non-null (checked) and valid for writes.
        unsafe { out.write(Box::into_raw(h)) };
        Ok(ENSO_OK)
    })
}

/// Detaches and frees the handle (null is allowed and does nothing). Data
/// still being sent may be discarded by the device: wait for
/// `enso_tx_in_flight` to reach 0 first to have it all sent.
///
/// # Safety
/// `dev` is null or a handle from [`enso_device_open`], not closed yet and
/// not used by another thread; it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn enso_device_close(dev: *mut EnsoDevice) -> c_int {
    guard(|| {
        if !dev.is_null() {
            // SAFETY: made by `Box::into_raw` in `enso_device_open` and, by
            // the caller's contract, not freed yet.
            drop(unsafe { Box::from_raw(dev) });
        }
        Ok(ENSO_OK)
    })
}

/// The number of ports of the device.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_device_port_count(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| Ok(
        d.dev.info().ports.min(c_int::MAX as usize) as c_int
    ))
}

/// 0 while the device is there, [`ENSO_ERR_GONE`] once it has stopped (a
/// loop that may wait for traffic for long should call it now and then).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_device_check_alive(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| {
        d.dev.check_alive()?;
        Ok(ENSO_OK)
    })
}

/// Copies the handle's software counters into `*stats`.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `stats` is null
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_device_stats(
    dev: *mut EnsoDevice,
    stats: *mut EnsoDeviceStats,
) -> c_int {
    on_device!(dev, |d| {
        let s = d.dev.stats();
        let v = EnsoDeviceStats {
            notifications: s.notifications,
            notification_polls: s.notification_polls,
            head_writes: s.head_writes,
            prefetches: s.prefetches,
            tx_notifications: s.tx_notifications,
            completions: s.completions,
            mmio_writes: s.mmio_writes,
            bogus_notifications: s.bogus_notifications,
        };
        // SAFETY: the caller's contract.
        unsafe { put(stats, v, "stats") }?;
        Ok(ENSO_OK)
    })
}

/// Copies the NIC's counters of `port` into `*stats` (a standalone
/// device's are its latest snapshot, at most 200 ms old;
/// [`ENSO_ERR_IO`] before its first). Not for the datapath.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `stats` is null
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_port_stats(
    dev: *mut EnsoDevice,
    port: u32,
    stats: *mut EnsoPortStats,
) -> c_int {
    on_device!(dev, |d| {
        if stats.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null stats"));
        }
        let s = d.dev.port_stats(port)?;
        let sum = |f: fn(&enso::PipeDrops) -> u64| s.pipes.iter().map(f).sum::<u64>();
        let v = EnsoPortStats {
            rx_frames: s.rx_frames,
            rx_bytes: s.rx_bytes,
            tx_frames: s.tx_frames,
            tx_bytes: s.tx_bytes,
            drop_no_match: s.drops.no_match,
            drop_malformed: s.drops.malformed,
            drop_oversize: s.drops.oversize,
            drop_wire_fifo_full: s.drops.wire_fifo_full,
            drop_wire: s.drops.wire,
            tx_discarded: s.drops.tx_discarded,
            pipe_full: sum(|p| p.pipe_full),
            notif_ring_full: sum(|p| p.notif_ring_full),
            not_udp: sum(|p| p.not_udp),
        };
        // SAFETY: the caller's contract.
        unsafe { put(stats, v, "stats") }?;
        Ok(ENSO_OK)
    })
}

/// Turns automatic notification prefetching in
/// [`enso_next_pipe_with_data`] on (`on` non-zero) or off.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_set_prefetch(dev: *mut EnsoDevice, on: c_int) -> c_int {
    on_device!(dev, |d| {
        d.dev.set_prefetch(flag(on));
        Ok(ENSO_OK)
    })
}

// ---------------------------------------------------------------------
// Pipes

/// Allocates an RX pipe receiving from `port`; `fallback` non-zero makes it
/// a fallback pipe (it gets the port's traffic no flow rule matches).
/// Returns its handle (>= 0).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_rx_pipe_alloc(
    dev: *mut EnsoDevice,
    port: u32,
    fallback: c_int,
) -> c_int {
    on_device!(dev, |d| {
        d.port(port)?;
        let p = d.dev.alloc_rx_pipe_on(port, flag(fallback))?;
        Ok(d.add_rx(p, None))
    })
}

/// As [`enso_rx_pipe_alloc`], for an RX/TX pipe: received bytes can be
/// sent back in place with [`enso_send_and_free`].
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_rxtx_pipe_alloc(
    dev: *mut EnsoDevice,
    port: u32,
    fallback: c_int,
) -> c_int {
    on_device!(dev, |d| {
        d.port(port)?;
        let p = d.dev.alloc_rxtx_pipe_on(port, flag(fallback))?;
        Ok(d.add_rx(p.rx(), Some(p)))
    })
}

/// Allocates a TX pipe of the `tx_pipe_size` option's bytes. Returns its
/// handle (>= 0).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_tx_pipe_alloc(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| {
        let p = d.dev.alloc_tx_pipe()?;
        d.tx.push(p);
        Ok(TX_HANDLE_BASE + d.tx.len() as c_int - 1)
    })
}

/// Steers traffic matching `rule` to RX (or RX/TX) pipe `pipe`.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `rule` is null
/// or points to a rule.
#[no_mangle]
pub unsafe extern "C" fn enso_bind(
    dev: *mut EnsoDevice,
    pipe: c_int,
    rule: *const EnsoFlowRule,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { bind(dev, pipe, rule, true) }
}

/// Removes a rule added with [`enso_bind`].
///
/// # Safety
/// As [`enso_bind`].
#[no_mangle]
pub unsafe extern "C" fn enso_unbind(
    dev: *mut EnsoDevice,
    pipe: c_int,
    rule: *const EnsoFlowRule,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { bind(dev, pipe, rule, false) }
}

/// # Safety
/// As [`enso_bind`].
unsafe fn bind(dev: *mut EnsoDevice, pipe: c_int, rule: *const EnsoFlowRule, add: bool) -> c_int {
    on_device!(dev, |d| {
        if rule.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null flow rule"));
        }
        // SAFETY: non-null and, by the caller's contract, a rule.
        let r = unsafe { *rule };
        let rule = FlowRule {
            src_ip: r.src_ip,
            dst_ip: r.dst_ip,
            src_port: r.src_port,
            dst_port: r.dst_port,
            protocol: r.protocol,
        };
        let p = d.rx(pipe)?;
        if add {
            d.dev.bind(p, rule)?;
        } else {
            d.dev.unbind(p, rule)?;
        }
        Ok(ENSO_OK)
    })
}

/// Makes the NIC pick among the fallback pipes of `pipe`'s port by round
/// robin (`rr` non-zero) or by flow hash (0, the default). The policy is
/// the port's, for every application's fallback pipes on it.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_set_fallback_round_robin(
    dev: *mut EnsoDevice,
    pipe: c_int,
    rr: c_int,
) -> c_int {
    on_device!(dev, |d| {
        let p = d.rx(pipe)?;
        d.dev.set_fallback_round_robin(p, flag(rr))?;
        Ok(ENSO_OK)
    })
}

// ---------------------------------------------------------------------
// Receiving

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
/// unchanged until freed ([`enso_free`]) or sent ([`enso_send_and_free`]),
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
/// returns 0 at the end of the batch, or [`ENSO_ERR_MALFORMED`] (and ends
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

// ---------------------------------------------------------------------
// Sending

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
/// [`ENSO_ERR_MALFORMED`] if it is not a frame or `out_len` is too short
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

// ---------------------------------------------------------------------
// Per-port settings

/// Timestamping on `port`: with `offset` in 0..=60, frames sent on the port
/// carry their 32-bit send time (ns) at byte `offset` and frames received
/// there the round-trip time (ns) instead; a negative `offset` turns it
/// off.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_set_timestamping(
    dev: *mut EnsoDevice,
    port: u32,
    offset: c_int,
) -> c_int {
    on_device!(dev, |d| {
        d.port(port)?;
        let offset = match offset {
            o if o < 0 => None,
            0..=60 => Some(offset as u8),
            _ => {
                return Err(Failure::new(
                    ENSO_ERR_INVALID,
                    format!("timestamp offset {offset} is not in 0..=60"),
                ))
            }
        };
        d.dev.set_timestamping(port, offset)?;
        Ok(ENSO_OK)
    })
}

fn ts_format(format: c_int) -> Result<TsFormat, Failure> {
    match format {
        ENSO_TS_NATIVE => Ok(TsFormat::Native),
        ENSO_TS_ENSO => Ok(TsFormat::Enso),
        _ => Err(Failure::new(
            ENSO_ERR_INVALID,
            format!("timestamp format {format} is neither ENSO_TS_NATIVE nor ENSO_TS_ENSO"),
        )),
    }
}

/// As [`enso_set_timestamping`], in `format`: [`ENSO_TS_ENSO`] writes
/// what the real Ensō NIC writes (big-endian cycles of 5 ns, read by
/// Ensō's `get_pkt_rtt` and by [`enso_rtt_ns`]), [`ENSO_TS_NATIVE`]
/// little-endian nanoseconds.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_set_timestamping_as(
    dev: *mut EnsoDevice,
    port: u32,
    offset: c_int,
    format: c_int,
) -> c_int {
    on_device!(dev, |d| {
        d.port(port)?;
        let format = ts_format(format)?;
        let offset = match offset {
            o if o < 0 => None,
            0..=60 => Some(offset as u8),
            _ => {
                return Err(Failure::new(
                    ENSO_ERR_INVALID,
                    format!("timestamp offset {offset} is not in 0..=60"),
                ))
            }
        };
        d.dev.set_timestamping_as(port, offset, format)?;
        Ok(ENSO_OK)
    })
}

/// Reads the round-trip time a port with timestamping on wrote into a
/// received frame (`len` bytes at `frame`) at `offset` in `format`, in
/// nanoseconds, into `*rtt_ns`. [`ENSO_ERR_INVALID`] if the frame is too
/// short to hold it (or a pointer is null, or the format unknown).
///
/// # Safety
/// `frame` is null or valid for `len` bytes of reads; `rtt_ns` is null or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_rtt_ns(
    frame: *const u8,
    len: usize,
    offset: usize,
    format: c_int,
    rtt_ns: *mut u64,
) -> c_int {
    guard(|| {
        if frame.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null frame"));
        }
        let format = ts_format(format)?;
        // SAFETY: non-null and, by the caller's contract, `len` readable bytes.
        let f = unsafe { std::slice::from_raw_parts(frame, len) };
        let ns = enso::rtt_ns(f, offset, format).ok_or_else(|| {
            Failure::new(
                ENSO_ERR_INVALID,
                format!("a frame of {len} bytes holds no timestamp at {offset}"),
            )
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(rtt_ns, ns, "rtt pointer") }?;
        Ok(ENSO_OK)
    })
}

/// Rate limit of what `port` sends: bursts of `num` flits every `den`
/// cycles of the NIC's 200 MHz clock (64 B frames at 100 Gb/s line rate:
/// 744/1000); `num` and `den` both 0 remove the limit.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_set_rate_limit(
    dev: *mut EnsoDevice,
    port: u32,
    num: u32,
    den: u32,
) -> c_int {
    on_device!(dev, |d| {
        d.port(port)?;
        let limit = match (num, den) {
            (0, 0) => None,
            (0, _) | (_, 0) => {
                return Err(Failure::new(
                    ENSO_ERR_INVALID,
                    "rate limit: num and den both non-zero, or both 0 to remove it",
                ))
            }
            l => Some(l),
        };
        d.dev.set_rate_limit(port, limit)?;
        Ok(ENSO_OK)
    })
}

// ---------------------------------------------------------------------
// More of the device: RX/TX pipes in notification order, port MACs,
// stream pipes

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

/// Writes the MAC address of `port` (6 bytes) to `mac`.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `mac` is null
/// or valid for 6 bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn enso_port_mac(dev: *mut EnsoDevice, port: u32, mac: *mut u8) -> c_int {
    on_device!(dev, |d| {
        if mac.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null MAC buffer"));
        }
        d.port(port)?;
        let m = d
            .dev
            .port_mac(port)
            .ok_or_else(|| Failure::new(ENSO_ERR_NO_PORT, format!("no port {port}")))?;
        // SAFETY: non-null and, by the caller's contract, 6 writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(m.as_ptr(), mac, 6) };
        Ok(ENSO_OK)
    })
}

/// Allocates a stream pipe on `port`: the NIC appends the UDP payload of
/// each frame back to back, byte by byte ([`enso_recv`] gives the bytes,
/// [`enso_free`] takes any count). Returns its RX handle.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_stream_pipe_alloc(
    dev: *mut EnsoDevice,
    port: u32,
    fallback: c_int,
) -> c_int {
    on_device!(dev, |d| {
        d.port(port)?;
        let p = d.dev.alloc_stream_pipe_on(port, flag(fallback))?;
        Ok(d.add_rx(p, None))
    })
}

// ---------------------------------------------------------------------
// Ensō's socket calls

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

#[cfg(test)]
mod tests {
    use super::*;
    use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

    fn last_error_text() -> String {
        // SAFETY: a NUL-terminated string, valid until this thread's next failure.
        unsafe { CStr::from_ptr(enso_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_an_error_code_with_its_message() {
        assert_eq!(guard(|| panic!("boom")), ENSO_ERR_INTERNAL);
        assert_eq!(last_error_text(), "internal error: boom");
        assert_eq!(guard(|| Ok(7)), 7);
        // A message with a NUL keeps what comes before it.
        assert_eq!(
            guard(|| Err(Failure::new(ENSO_ERR_INVALID, "bad\0tail"))),
            ENSO_ERR_INVALID
        );
        assert_eq!(last_error_text(), "bad");
    }

    #[test]
    fn a_device_whose_call_panicked_refuses_further_calls_but_closes() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("c-poison-{}", std::process::id());
        let mut cfg = DeviceConfig::new(&name, WireConfig::Loopback);
        cfg.dir = dir.path().into();
        let nic = Nic::start(
            cfg,
            RunOptions {
                listen: true,
                ..Default::default()
            },
        )
        .unwrap();
        let cname = CString::new(name).unwrap();
        let cdir = CString::new(dir.path().to_str().unwrap()).unwrap();
        let mut dev = std::ptr::null_mut();
        // SAFETY: valid strings and out pointer; `dev` is then a live
        // handle used by this thread only.
        unsafe {
            let rc = enso_device_open(cname.as_ptr(), cdir.as_ptr(), std::ptr::null(), &mut dev);
            assert_eq!(rc, ENSO_OK, "{}", last_error_text());
            assert_eq!(enso_device_port_count(dev), 1);
            let rc = with_dev(dev, |_| panic!("in the middle of something"));
            assert_eq!(rc, ENSO_ERR_INTERNAL);
            assert_eq!(enso_device_port_count(dev), ENSO_ERR_INTERNAL);
            assert!(last_error_text().contains("close it"));
            assert_eq!(enso_device_close(dev), ENSO_OK);
        }
        nic.stop();
    }
}
