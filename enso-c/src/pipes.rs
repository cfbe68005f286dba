//! Pipes: allocating RX, RX/TX, TX and stream pipes; binding flow rules
//! and fallback settings.

use std::ffi::c_int;

use enso::FlowRule;

use crate::device::EnsoDevice;
use crate::error::Failure;
use crate::guard::flag;
use crate::structs::EnsoFlowRule;
use crate::{ENSO_ERR_INVALID, ENSO_OK};

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
/// sent back in place with [`enso_send_and_free`](crate::enso_send_and_free).
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

/// Allocates a TX pipe of the `tx_pipe_size` option's bytes (past the
/// `tx_pipes` option's, while the handle's memory has room). Returns its
/// handle (>= 0).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_tx_pipe_alloc(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| {
        let p = d.dev.alloc_tx_pipe()?;
        Ok(d.add_tx(p))
    })
}

/// Frees RX (or RX/TX, or stream) pipe `pipe`: waits (bounded) for its
/// sends in flight, disables it at the NIC (which drops what arrives for
/// it, forgets its flow rules and takes it out of the fallback pipes), and
/// keeps it for the next allocation, which may give the same handle. What
/// it held is dropped.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_rx_pipe_free(dev: *mut EnsoDevice, pipe: c_int) -> c_int {
    on_device!(dev, |d| {
        let p = d.rx(pipe)?;
        d.dev.free_pipe(p)?;
        d.remove_rx(pipe);
        Ok(ENSO_OK)
    })
}

/// Frees TX pipe `pipe`: waits (bounded) until what was sent from it is
/// sent, and keeps it for the next [`enso_tx_pipe_alloc`], which may give
/// the same handle.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_tx_pipe_free(dev: *mut EnsoDevice, pipe: c_int) -> c_int {
    on_device!(dev, |d| {
        let p = d.tx(pipe)?;
        d.dev.free_tx_pipe(p)?;
        d.remove_tx(pipe);
        Ok(ENSO_OK)
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
pub(crate) unsafe fn bind(
    dev: *mut EnsoDevice,
    pipe: c_int,
    rule: *const EnsoFlowRule,
    add: bool,
) -> c_int {
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

/// Allocates a stream pipe on `port`: the NIC appends the UDP payload of
/// each frame back to back, byte by byte ([`enso_recv`](crate::enso_recv) gives the bytes,
/// [`enso_free`](crate::enso_free) takes any count). Returns its RX handle.
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
