//! UDP datagrams.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::ipv4::{be16, pseudo_header_sum, PROTO_UDP};
use super::ipv6;
use super::{checksum, ParseError};

/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// A zero-copy view of a UDP datagram. [`UdpPacket::new_checked`] ensures
/// the length field is at least 8 and within the buffer.
#[derive(Debug, Clone, Copy)]
pub struct UdpPacket<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` after validating the length field.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let len = buffer.as_ref().len();
        if len < UDP_HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        let p = UdpPacket { buffer };
        let field = usize::from(p.len());
        if field < UDP_HEADER_LEN {
            return Err(ParseError::BadL4Header);
        }
        if field > len {
            return Err(ParseError::Truncated);
        }
        Ok(p)
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[0..2])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[2..4])
    }

    /// Length field (header + payload).
    pub fn len(&self) -> u16 {
        be16(&self.buffer.as_ref()[4..6])
    }

    /// True if the datagram carries no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= UDP_HEADER_LEN
    }

    /// Checksum field (0: none).
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[6..8])
    }

    /// The payload, up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[UDP_HEADER_LEN..usize::from(self.len())]
    }

    /// True if the checksum is absent (0) or correct for these addresses.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let acc = pseudo_header_sum(src, dst, PROTO_UDP, len);
        checksum::fold(checksum::sum(
            acc,
            &self.buffer.as_ref()[..usize::from(len)],
        )) == 0
    }

    /// True if the checksum is right for these IPv6 addresses; over IPv6
    /// the checksum is mandatory (RFC 8200 section 8.1), so 0 is wrong.
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let b = &self.buffer.as_ref()[..usize::from(self.len())];
        let acc = ipv6::pseudo_header_sum(src, dst, PROTO_UDP, b.len() as u32);
        checksum::fold(checksum::sum(acc, b)) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        self.buffer.as_mut()[0..2].copy_from_slice(&port.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&port.to_be_bytes());
    }

    /// Sets the length field.
    pub fn set_len(&mut self, len: u16) {
        self.buffer.as_mut()[4..6].copy_from_slice(&len.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, check: u16) {
        self.buffer.as_mut()[6..8].copy_from_slice(&check.to_be_bytes());
    }

    /// Computes and writes the checksum for these addresses.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let len = self.len();
        self.buffer.as_mut()[6..8].fill(0);
        let acc = pseudo_header_sum(src, dst, PROTO_UDP, len);
        let mut check = checksum::fold(checksum::sum(
            acc,
            &self.buffer.as_ref()[..usize::from(len)],
        ));
        if check == 0 {
            check = 0xFFFF; // 0 would mean "no checksum"
        }
        self.buffer.as_mut()[6..8].copy_from_slice(&check.to_be_bytes());
    }

    /// Computes and writes the checksum for these IPv6 addresses.
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let len = usize::from(self.len());
        self.buffer.as_mut()[6..8].fill(0);
        let acc = ipv6::pseudo_header_sum(src, dst, PROTO_UDP, len as u32);
        let mut check = checksum::fold(checksum::sum(acc, &self.buffer.as_ref()[..len]));
        if check == 0 {
            check = 0xFFFF; // 0 is not a checksum
        }
        self.buffer.as_mut()[6..8].copy_from_slice(&check.to_be_bytes());
    }

    /// Swaps the source and destination ports (the checksum stays right).
    pub fn swap_ports(&mut self) {
        let (src, dst) = (self.src_port(), self.dst_port());
        self.set_src_port(dst);
        self.set_dst_port(src);
    }

    /// Patches the checksum after an address in the pseudo-header changed
    /// from `old` to `new`; a datagram without checksum keeps none.
    pub fn adjust_checksum_for_addr(&mut self, old: Ipv4Addr, new: Ipv4Addr) {
        let check = self.checksum();
        if check == 0 {
            return;
        }
        let mut check = checksum::adjust32(check, u32::from(old), u32::from(new));
        if check == 0 {
            check = 0xFFFF;
        }
        self.buffer.as_mut()[6..8].copy_from_slice(&check.to_be_bytes());
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[UDP_HEADER_LEN..len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_length_checks() {
        let mut b = [0u8; 12];
        b[4..6].copy_from_slice(&12u16.to_be_bytes());
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload().len(), 4);
        b[4..6].copy_from_slice(&13u16.to_be_bytes());
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            ParseError::Truncated
        );
        b[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            ParseError::BadL4Header
        );
        assert_eq!(
            UdpPacket::new_checked(&b[..7]).unwrap_err(),
            ParseError::Truncated
        );
    }

    #[test]
    fn udp_checksum_round_trip_and_adjust() {
        let (src, dst, new) = (
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            Ipv4Addr::new(192, 168, 1, 77),
        );
        let mut b = [0u8; 19];
        b[4..6].copy_from_slice(&19u16.to_be_bytes());
        b[8..].copy_from_slice(b"hello world");
        let mut p = UdpPacket::new_checked(&mut b[..]).unwrap();
        p.fill_checksum(src, dst);
        assert!(p.verify_checksum(src, dst));
        assert!(!p.verify_checksum(src, new));
        p.adjust_checksum_for_addr(dst, new);
        assert!(p.verify_checksum(src, new));
    }

    #[test]
    fn udp_over_ipv6_checksum_by_hand() {
        // fe80::1 port 1000 -> fe80::2 port 7, payload "hi". Words:
        // fe80 0001 fe80 0002 000a 0011 (pseudo-header), 03e8 0007 000a
        // (ports, length), 6869 = 0x2_6980, folded 0x6982, complemented
        // 0x967D.
        let (src, dst): (Ipv6Addr, Ipv6Addr) =
            ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
        let mut b = [0x03, 0xe8, 0x00, 0x07, 0x00, 0x0a, 0, 0, b'h', b'i'];
        let mut p = UdpPacket::new_checked(&mut b[..]).unwrap();
        p.fill_checksum_v6(&src, &dst);
        assert_eq!(p.checksum(), 0x967d);
        assert!(p.verify_checksum_v6(&src, &dst));
        p.swap_ports();
        assert!(p.verify_checksum_v6(&dst, &src), "swapping keeps it right");
        assert_eq!((p.src_port(), p.dst_port()), (7, 1000));
        p.set_checksum(0);
        assert!(
            !p.verify_checksum_v6(&dst, &src),
            "0 is no checksum over IPv6"
        );
    }
}
