//! IPv4 headers.

use std::net::Ipv4Addr;

use super::{checksum, ParseError};

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// IP protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

mod field {
    use std::ops::Range;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const TOTAL_LEN: Range<usize> = 2..4;
    pub(super) const IDENT: Range<usize> = 4..6;
    pub(super) const FLAGS_FRAG: Range<usize> = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Range<usize> = 10..12;
    pub(super) const SRC: Range<usize> = 12..16;
    pub(super) const DST: Range<usize> = 16..20;
}

/// A zero-copy view of an IPv4 packet.
///
/// [`Ipv4Packet::new_checked`] guarantees: version 4, header length at least
/// 20 and within the buffer, total length at least the header length and
/// within the buffer (the buffer may be longer: Ethernet padding).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after validating the header's lengths and version.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        let packet = Ipv4Packet { buffer };
        let header_len = packet.header_len();
        let total_len = usize::from(packet.total_len());
        if packet.version() != 4 || header_len < MIN_HEADER_LEN || total_len < header_len {
            return Err(ParseError::BadIpv4Header);
        }
        if header_len > packet.buffer.as_ref().len() || total_len > packet.buffer.as_ref().len() {
            return Err(ParseError::Truncated);
        }
        Ok(packet)
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// IP version field.
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0F) * 4
    }

    /// Total length field (header + payload).
    pub fn total_len(&self) -> u16 {
        be16(&self.b()[field::TOTAL_LEN])
    }

    /// Identification field.
    pub fn ident(&self) -> u16 {
        be16(&self.b()[field::IDENT])
    }

    /// True for any fragment: "more fragments" set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        be16(&self.b()[field::FLAGS_FRAG]) & 0x3FFF != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(&self.b()[field::CHECKSUM])
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(&self.b()[field::SRC]))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(&self.b()[field::DST]))
    }

    /// True if the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(0, &self.b()[..self.header_len()])) == 0
    }

    /// The payload, up to the total length (Ethernet padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Writes version 4 and a header length of `header_len` bytes.
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.bm()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0F);
    }

    /// Sets the total length field.
    pub fn set_total_len(&mut self, len: u16) {
        self.bm()[field::TOTAL_LEN].copy_from_slice(&len.to_be_bytes());
    }

    /// Sets the identification field.
    pub fn set_ident(&mut self, ident: u16) {
        self.bm()[field::IDENT].copy_from_slice(&ident.to_be_bytes());
    }

    /// Sets "don't fragment" and clears the fragment offset.
    pub fn set_dont_fragment(&mut self) {
        self.bm()[field::FLAGS_FRAG].copy_from_slice(&0x4000u16.to_be_bytes());
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.bm()[field::TTL] = ttl;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, protocol: u8) {
        self.bm()[field::PROTOCOL] = protocol;
    }

    /// Sets the source address (checksum not updated).
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.bm()[field::SRC].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address (checksum not updated).
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.bm()[field::DST].copy_from_slice(&addr.octets());
    }

    /// Swaps the source and destination addresses. The header checksum
    /// stays right (the one's-complement sum does not depend on the order
    /// of the words), and so does a TCP/UDP checksum over the pseudo-header.
    pub fn swap_addrs(&mut self) {
        let (src, dst) = (self.src_addr(), self.dst_addr());
        self.set_src_addr(dst);
        self.set_dst_addr(src);
    }

    /// Sets the header checksum field.
    pub fn set_checksum(&mut self, check: u16) {
        self.bm()[field::CHECKSUM].copy_from_slice(&check.to_be_bytes());
    }

    /// Sets the destination address and patches the header checksum
    /// incrementally (RFC 1624) instead of recomputing it.
    pub fn rewrite_dst_addr(&mut self, addr: Ipv4Addr) {
        let old = u32::from(self.dst_addr());
        let new = u32::from(addr);
        let check = checksum::adjust32(self.checksum(), old, new);
        self.set_dst_addr(addr);
        self.bm()[field::CHECKSUM].copy_from_slice(&check.to_be_bytes());
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        self.bm()[field::CHECKSUM].fill(0);
        let check = checksum::fold(checksum::sum(0, &self.b()[..hl]));
        self.bm()[field::CHECKSUM].copy_from_slice(&check.to_be_bytes());
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        &mut self.bm()[hl..tl]
    }
}

/// The one's-complement sum of the TCP/UDP pseudo-header (not folded).
pub(crate) fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, l4_len: u16) -> u32 {
    let mut acc = checksum::sum(0, &src.octets());
    acc = checksum::sum(acc, &dst.octets());
    acc + u32::from(protocol) + u32::from(l4_len)
}

pub(crate) fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

pub(crate) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real header: 10.0.0.1 -> 10.0.0.2, UDP, total length 46, checksum
    // computed by hand below and cross-checked by verify_checksum.
    fn header() -> [u8; 46] {
        let mut b = [0u8; 46];
        b[..20].copy_from_slice(&[
            0x45, 0x00, 0x00, 0x2e, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1,
            10, 0, 0, 2,
        ]);
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        b
    }

    #[test]
    fn parses_fields() {
        let b = header();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 46);
        assert_eq!(p.ident(), 0x1234);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), PROTO_UDP);
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 26);
    }

    #[test]
    fn rejects_bad_headers() {
        let b = header();
        assert_eq!(
            Ipv4Packet::new_checked(&b[..19]).unwrap_err(),
            ParseError::Truncated
        );
        // Total length beyond the buffer.
        assert_eq!(
            Ipv4Packet::new_checked(&b[..45]).unwrap_err(),
            ParseError::Truncated
        );
        let mut v6 = b;
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).unwrap_err(),
            ParseError::BadIpv4Header
        );
        let mut short_ihl = b;
        short_ihl[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&short_ihl[..]).unwrap_err(),
            ParseError::BadIpv4Header
        );
        let mut long_ihl = b;
        long_ihl[0] = 0x4F; // 60-byte header, total length 46
        assert_eq!(
            Ipv4Packet::new_checked(&long_ihl[..]).unwrap_err(),
            ParseError::BadIpv4Header
        );
        let mut frag = b;
        frag[6] = 0x20; // more fragments
        assert!(Ipv4Packet::new_checked(&frag[..]).unwrap().is_fragment());
    }

    #[test]
    fn rewrite_keeps_checksum_valid() {
        let mut b = header();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.rewrite_dst_addr(Ipv4Addr::new(172, 16, 200, 3));
        assert!(p.verify_checksum());
        assert_eq!(p.dst_addr(), Ipv4Addr::new(172, 16, 200, 3));
    }
}
