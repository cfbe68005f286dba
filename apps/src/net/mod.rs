//! Checked views of the headers a network host reads and writes (from
//! `netview`, re-exported here under their old paths), the host logic that
//! answers ARP, neighbour discovery and pings, and UDP reflection.

pub(crate) use netview::checksum;
pub use netview::{arp, ethernet, icmp, icmpv6, ipv4, ipv6, udp, ParseError};
pub mod host;
pub mod reflect;

#[cfg(test)]
pub(crate) mod testing;
