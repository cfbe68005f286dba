//! IPv6 headers (the fixed 40-byte header; extension headers are not
//! walked: a packet whose next header is not the upper-layer protocol a
//! caller wants is not that protocol's).

use std::net::Ipv6Addr;

use super::ipv4::be16;
use super::{checksum, ParseError};

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;
/// Next-header number of ICMPv6.
pub const NEXT_HEADER_ICMPV6: u8 = 58;
/// Next-header number of UDP.
pub const NEXT_HEADER_UDP: u8 = 17;

mod field {
    use std::ops::Range;
    pub(super) const PAYLOAD_LEN: Range<usize> = 4..6;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC: Range<usize> = 8..24;
    pub(super) const DST: Range<usize> = 24..40;
}

/// A zero-copy view of an IPv6 packet.
///
/// [`Ipv6Packet::new_checked`] guarantees: version 6, the fixed header and
/// the payload length within the buffer (the buffer may be longer:
/// Ethernet padding).
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after validating the version and payload length.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(ParseError::BadIpv6Header);
        }
        let p = Ipv6Packet { buffer };
        if HEADER_LEN + usize::from(p.payload_len()) > p.buffer.as_ref().len() {
            return Err(ParseError::Truncated);
        }
        Ok(p)
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Payload length field (what follows the fixed header).
    pub fn payload_len(&self) -> u16 {
        be16(&self.b()[field::PAYLOAD_LEN])
    }

    /// Next header (the upper-layer protocol when there are no extension
    /// headers).
    pub fn next_header(&self) -> u8 {
        self.b()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(read16(&self.b()[field::SRC]))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(read16(&self.b()[field::DST]))
    }

    /// The payload, up to the payload length (Ethernet padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the payload length (the caller keeps it within the buffer).
    pub fn set_payload_len(&mut self, len: u16) {
        self.bm()[field::PAYLOAD_LEN].copy_from_slice(&len.to_be_bytes());
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, hops: u8) {
        self.bm()[field::HOP_LIMIT] = hops;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.bm()[field::SRC].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.bm()[field::DST].copy_from_slice(&addr.octets());
    }

    /// Swaps the source and destination addresses (an upper-layer checksum
    /// over the pseudo-header stays right: the sum does not depend on the
    /// order).
    pub fn swap_addrs(&mut self) {
        let (src, dst) = (self.src_addr(), self.dst_addr());
        self.set_src_addr(dst);
        self.set_dst_addr(src);
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.bm()[HEADER_LEN..end]
    }
}

/// The one's-complement sum (not folded) of the IPv6 pseudo-header of
/// RFC 8200 section 8.1: addresses, upper-layer length, next header.
pub(crate) fn pseudo_header_sum(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, len: u32) -> u32 {
    let mut acc = checksum::sum(0, &src.octets());
    acc = checksum::sum(acc, &dst.octets());
    acc + (len >> 16) + (len & 0xFFFF) + u32::from(next_header)
}

/// The solicited-node multicast address of `addr` (RFC 4291 section
/// 2.7.1): ff02::1:ff00:0/104 and the address's low 24 bits.
pub fn solicited_node(addr: &Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The link-local all-nodes multicast address, ff02::1.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

fn read16(b: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(b);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header of an ICMPv6 echo request fe80::1 -> fe80::2, 16 bytes of
    /// payload, hop limit 64, as a capture shows it.
    const HEADER: [u8; 40] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x10, 0x3a, 0x40, // ver, len 16, ICMPv6, hops 64
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // src
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // dst
    ];

    #[test]
    fn parses_fields_and_checks_lengths() {
        let mut b = [0u8; 60];
        b[..40].copy_from_slice(&HEADER);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload_len(), 16);
        assert_eq!(p.next_header(), NEXT_HEADER_ICMPV6);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "fe80::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload().len(), 16, "padding excluded");
        assert_eq!(
            Ipv6Packet::new_checked(&b[..55]).unwrap_err(),
            ParseError::Truncated
        );
        assert_eq!(
            Ipv6Packet::new_checked(&b[..39]).unwrap_err(),
            ParseError::Truncated
        );
        b[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap_err(),
            ParseError::BadIpv6Header
        );
    }

    #[test]
    fn swap_and_setters() {
        let mut b = HEADER;
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.swap_addrs();
        p.set_hop_limit(255);
        assert_eq!(p.src_addr(), "fe80::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(b[7], 255);
    }

    #[test]
    fn solicited_node_addresses() {
        // RFC 4291's form: the low 24 bits of the address.
        let a: Ipv6Addr = "2001:db8::2aa:ff:fe28:9c5a".parse().unwrap();
        assert_eq!(
            solicited_node(&a),
            "ff02::1:ff28:9c5a".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn pseudo_header_sum_by_hand() {
        // fe80::1 + fe80::2 + length 16 + next header 58:
        // 0xfe80 + 0x0001 + 0xfe80 + 0x0002 + 0x0010 + 0x003a = 0x1fd4d.
        let s = pseudo_header_sum(
            &"fe80::1".parse().unwrap(),
            &"fe80::2".parse().unwrap(),
            58,
            16,
        );
        assert_eq!(checksum::fold(s), !0xfd4e);
    }
}
