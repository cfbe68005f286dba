//! A memif endpoint: the shared-memory packet interface of DPDK
//! (`net_memif`) and VPP (libmemif), protocol version 2.0, copy mode, either
//! role, driven by polling from one thread.
//!
//! ```no_run
//! use memif::{Config, Memif, Role, SocketName};
//!
//! let mut m = Memif::new(Config::new(SocketName::parse("@memif-demo"), Role::Client))?;
//! loop {
//!     m.poll_control()?; // every so often: connect, handshake, liveness
//!     let frame = [0u8; 60];
//!     m.tx_burst(0, [&frame[..]]);
//!     m.rx_burst(0, 32, |frame| println!("{} bytes", frame.len()));
//! #   break;
//! }
//! # Ok::<(), memif::MemifError>(())
//! ```
//!
//! # Protocol summary
//!
//! * Control channel: a `SOCK_SEQPACKET` Unix socket, on a filesystem path
//!   or an abstract name (`"\0" + name`, DPDK's default; written `@name`
//!   here). Messages are 128 bytes, packed little-endian, type in bytes
//!   0-1 (see [`msg`](crate::msg) for every field offset).
//! * Handshake (lockstep): server HELLO; client INIT -> ACK; ADD_REGION per
//!   region with its memfd (SCM_RIGHTS) -> ACK; ADD_RING per ring with an
//!   eventfd -> ACK; CONNECT -> the server maps everything and answers
//!   CONNECTED. Either side may send DISCONNECT (code, reason) at any time.
//! * Memory (copy mode): the client's region 0 holds the client-to-server
//!   rings, then the server-to-client rings (`128 + 16 * 2^n` bytes each),
//!   then the packet buffers (2048 bytes by default).
//! * Rings: cookie `0x3E31F20` @0, flags u16 @4 (1 = receiver masks
//!   interrupts), head u16 @6, tail u16 @64, 16-byte descriptors from @128
//!   (flags u16 (1 = chained), region u16, length u32, offset u32,
//!   metadata u32). Client-to-server: the client fills and advances head,
//!   the server consumes and advances tail. Server-to-client: the client
//!   posts empty buffers by advancing head, the server fills them and
//!   advances tail. Indices are published with release stores and read
//!   with acquire loads. The sender writes the ring's eventfd only if the
//!   receiver's interrupt-mask flag is clear; this crate polls and sets it.
//!
//! # What is checked
//!
//! Everything the peer controls: message sizes and types, handshake order,
//! version, id, secret, region files (shared memory only, size, seals, at
//! most 4 GiB each and `Config::max_region_bytes` in all), eventfds (that
//! they are eventfds), ring placement, size and
//! cookie, and on every frame each descriptor's region, offset and length
//! and every index the peer moves. A server honours descriptors that point
//! into any region the client registered (a DPDK zero-copy client points
//! into extra regions), within those checks. Violations are counted in
//! [`Counters`] and end the connection with a DISCONNECT; none panics or
//! touches memory outside the peer's regions.
//!
//! # Limits
//!
//! Copy mode only on our side (we never offer zero-copy regions). Ethernet
//! mode only. One connection per server endpoint (one interface id).
//! Frames handed to the `rx_burst` callback live in shared memory: a
//! misbehaving peer could change their bytes during the callback (never
//! their length or location); copy them if that matters.

mod config;
mod control;
mod counters;
mod datapath;
mod endpoint;
pub mod msg;
mod ring;
mod shm;
mod sock;

pub use config::{Config, Role, SocketName, MAX_LOG2_RING_SIZE, MAX_RINGS};
pub use counters::Counters;
pub use endpoint::{Memif, DRAIN_TIMEOUT, HANDSHAKE_TIMEOUT, RECONNECT_DELAY};
pub use ring::{Desc, COOKIE, DESC_FLAG_NEXT, RING_FLAG_MASK_INT};

/// Errors from creating or driving an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum MemifError {
    #[error("invalid memif configuration: {0}")]
    Config(String),
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(std::path::PathBuf),
    #[error("another memif server is listening on {0}")]
    AddrInUse(String),
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl MemifError {
    pub(crate) fn io(context: &'static str, source: std::io::Error) -> MemifError {
        MemifError::Io { context, source }
    }
}

#[cfg(test)]
mod tests {
    /// The engine builds an endpoint and moves it to its polling thread.
    #[test]
    fn an_endpoint_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<crate::Memif>();
    }
}

#[cfg(feature = "test-support")]
pub mod testpmd;
