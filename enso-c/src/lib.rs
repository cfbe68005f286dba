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
//! declares exactly the functions, structures and constants defined in
//! this crate, with the same types.
//!
//! | module      | entry points                                        |
//! |-------------|-----------------------------------------------------|
//! | `error`     | error codes as text, the thread's last error        |
//! | `device`    | options, attaching and closing, counters, port MACs |
//! | `pipes`     | allocating pipes, flow rules, fallback settings     |
//! | `rx`        | receiving, freeing, iterating over frames           |
//! | `tx`        | sending, TX buffers, completions                    |
//! | `ports`     | timestamping, RTT, rate limits                      |
//! | `sockets`   | Ensō's socket calls                                 |

use std::ffi::c_int;

#[macro_use]
mod guard;
mod device;
mod error;
mod pipes;
mod ports;
mod rx;
mod sockets;
mod structs;
#[cfg(test)]
mod tests;
mod tx;

pub use device::{
    enso_device_check_alive, enso_device_close, enso_device_open, enso_device_options_default,
    enso_device_port_count, enso_device_stats, enso_port_mac, enso_port_stats, enso_set_prefetch,
    EnsoDevice,
};
pub use error::{enso_last_error, enso_strerror};
pub use pipes::{
    enso_bind, enso_rx_pipe_alloc, enso_rx_pipe_free, enso_rxtx_pipe_alloc,
    enso_set_fallback_round_robin, enso_stream_pipe_alloc, enso_tx_pipe_alloc, enso_tx_pipe_free,
    enso_unbind,
};
pub use ports::{
    enso_rtt_ns, enso_set_rate_limit, enso_set_timestamping, enso_set_timestamping_as,
};
pub use rx::{
    enso_batch_next, enso_confirm, enso_free, enso_free_all, enso_next_pipe_with_data,
    enso_next_rxtx_pipe_with_data, enso_peek, enso_prefetch, enso_recv, enso_recv_max,
    enso_unconsume,
};
pub use sockets::{
    enso_get_completions, enso_recv_select, enso_socket, enso_socket_bind, enso_socket_free,
    enso_socket_recv, enso_socket_recv_zc, enso_socket_send, enso_socket_send_zc,
    enso_socket_shutdown, enso_sockets_close, enso_sockets_open, EnsoSockets,
};
pub use structs::{EnsoBatch, EnsoDeviceOptions, EnsoDeviceStats, EnsoFlowRule, EnsoPortStats};
pub use tx::{
    enso_discard, enso_reap_completions, enso_send, enso_send_and_free, enso_tx_buf,
    enso_tx_in_flight, enso_tx_space, enso_wait, enso_write_frame,
};

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
