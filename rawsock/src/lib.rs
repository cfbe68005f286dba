//! Raw Ethernet frame I/O on Linux, for the emulated NIC's ports.
//!
//! Two backends, both moving whole Ethernet frames (destination MAC first,
//! no FCS):
//!
//! - [`AfPacket`]: an existing interface through two `AF_PACKET` sockets
//!   with memory-mapped rings (TPACKET_V3 block ring for receive, TPACKET_V2
//!   frame ring for transmit). No system call, allocation or lock per frame;
//!   one `sendto` per transmit burst.
//! - [`Tap`]: a TAP device made through `/dev/net/tun`. One `read` or
//!   `write` per frame, so it tops out near one million frames per second per
//!   core; give it its own I/O thread.
//!
//! With the `test-support` feature, [`testnet`] makes throw-away network
//! namespaces and veth pairs (root, `ip` and `ethtool` needed) that other
//! crates' tests can reuse.
//!
//! See the crate's README for the kernel behaviour this relies on and for
//! the limits.

mod afpacket;
mod sys;
mod tap;
#[cfg(any(test, feature = "test-support"))]
pub mod testnet;

pub use afpacket::{AfPacket, AfPacketConfig, Counters};
pub use tap::Tap;

use std::io;

/// Everything that can go wrong opening or driving a backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The named interface cannot be used: the name is malformed (empty,
    /// longer than 15 bytes, containing '/', ':' or white space), no such
    /// interface exists, it already exists (for [`Tap::create`]), or it is
    /// not an Ethernet interface.
    #[error("interface {name:?}: {reason}")]
    Interface {
        /// The name as the caller gave it.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A system call failed.
    #[error("{op}: {source}")]
    Os {
        /// What was being done.
        op: &'static str,
        /// The error the kernel reported.
        source: io::Error,
    },
}

impl Error {
    /// An [`Error::Os`] from `errno`.
    pub(crate) fn os(op: &'static str) -> Error {
        Error::Os {
            op,
            source: io::Error::last_os_error(),
        }
    }

    /// The OS error number, for [`Error::Os`].
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Os { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    /// The integrator moves ports to their I/O threads.
    #[test]
    fn ports_can_move_between_threads() {
        fn assert_send<T: Send>() {}
        assert_send::<crate::AfPacket>();
        assert_send::<crate::Tap>();
    }
}
