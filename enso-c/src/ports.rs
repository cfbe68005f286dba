//! Per-port settings: timestamping, RTT from timestamps, and rate
//! limits.

use std::ffi::c_int;

use enso::TsFormat;

use crate::device::EnsoDevice;
use crate::error::Failure;
use crate::guard::{guard, put};
use crate::{ENSO_ERR_INVALID, ENSO_OK, ENSO_TS_ENSO, ENSO_TS_NATIVE};

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
