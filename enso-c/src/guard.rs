//! Running an entry point: a caught panic becomes [`ENSO_ERR_INTERNAL`]
//! (and poisons the device it happened on), a failure is reported.
//!
//! [`ENSO_ERR_INTERNAL`]: crate::ENSO_ERR_INTERNAL

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::device::EnsoDevice;
use crate::error::{panic_text, report, Failure};
use crate::{ENSO_ERR_INTERNAL, ENSO_ERR_INVALID};

/// Runs an entry point that touches no device; a panic becomes
/// [`ENSO_ERR_INTERNAL`].
pub(crate) fn guard(f: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
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
pub(crate) unsafe fn with_dev(
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
        let f = |$d: &mut $crate::EnsoDevice| -> Result<::std::ffi::c_int, $crate::error::Failure> {
            $body
        };
        // SAFETY: the entry point's contract: `$dev` is null or a handle
        // from `enso_device_open`, not closed, used by this thread only.
        unsafe { $crate::guard::with_dev($dev, f) }
    }};
}

/// Writes `v` through `out`, refusing a null pointer.
///
/// # Safety
/// `out` is null or valid for a write of a `T`.
pub(crate) unsafe fn put<T>(out: *mut T, v: T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::new(ENSO_ERR_INVALID, format!("null {what}")));
    }
    // SAFETY: non-null and, by the caller's contract, valid for writes.
    unsafe { out.write(v) };
    Ok(())
}

pub(crate) fn flag(v: c_int) -> bool {
    v != 0
}
