//! Checked views of the headers a network host reads and writes, one file
//! per protocol, over plain byte slices (the pattern of smoltcp's `wire`
//! module): `new_checked` validates every length once, after which field
//! accessors cannot go out of bounds; malformed input is a [`ParseError`],
//! never a panic. Nothing here allocates.
//!
//! The emulated NIC, the packet generator, the applications and the
//! benchmarks all build and read frames through these views, share the one
//! Internet checksum ([`checksum`]) and the one 64-bit mixer ([`mix64`]).

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
mod mix;
pub mod tcp;
pub mod udp;

pub use mix::mix64;

/// Why a frame could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ParseError {
    /// The frame ends before a header or length field says it should.
    #[error("frame truncated")]
    Truncated,
    /// The EtherType is not IPv4 (IPv6, ARP, VLAN-tagged, ...).
    #[error("not an IPv4 frame")]
    NotIpv4,
    /// Wrong IP version or inconsistent header/total lengths.
    #[error("malformed IPv4 header")]
    BadIpv4Header,
    /// Wrong IP version in an IPv6 header.
    #[error("malformed IPv6 header")]
    BadIpv6Header,
    /// An ARP packet that does not map IPv4 addresses to Ethernet ones.
    #[error("ARP packet not for IPv4 over Ethernet")]
    BadArp,
    /// An ICMP or ICMPv6 message with bad options or lengths.
    #[error("malformed ICMP message")]
    BadIcmp,
    /// An IP fragment: the transport header is absent or incomplete.
    #[error("IPv4 fragment")]
    Fragment,
    /// The IP payload is neither TCP nor UDP.
    #[error("transport protocol is neither TCP nor UDP")]
    UnsupportedProtocol,
    /// UDP length below 8 or TCP data offset below 5.
    #[error("malformed TCP/UDP header")]
    BadL4Header,
}
