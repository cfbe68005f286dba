//! ARP over Ethernet for IPv4 (RFC 826), the only kind a host on an
//! Ethernet link sees.

use std::net::Ipv4Addr;

use super::ethernet::{MacAddr, ETHERTYPE_IPV4};
use super::ipv4::{be16, be32};
use super::ParseError;

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;
/// Operation code of a request.
pub const OP_REQUEST: u16 = 1;
/// Operation code of a reply.
pub const OP_REPLY: u16 = 2;
/// Hardware type of Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

mod field {
    use std::ops::Range;
    pub(super) const HTYPE: Range<usize> = 0..2;
    pub(super) const PTYPE: Range<usize> = 2..4;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: Range<usize> = 6..8;
    pub(super) const SHA: Range<usize> = 8..14;
    pub(super) const SPA: Range<usize> = 14..18;
    pub(super) const THA: Range<usize> = 18..24;
    pub(super) const TPA: Range<usize> = 24..28;
}

/// A zero-copy view of an Ethernet/IPv4 ARP packet.
/// [`ArpPacket::new_checked`] guarantees 28 bytes and the Ethernet/IPv4
/// hardware and protocol types and lengths.
#[derive(Debug, Clone, Copy)]
pub struct ArpPacket<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer` without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps `buffer` after checking its length and that it maps IPv4
    /// addresses to Ethernet ones.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < PACKET_LEN {
            return Err(ParseError::Truncated);
        }
        if be16(&b[field::HTYPE]) != HTYPE_ETHERNET
            || be16(&b[field::PTYPE]) != ETHERTYPE_IPV4
            || b[field::HLEN] != 6
            || b[field::PLEN] != 4
        {
            return Err(ParseError::BadArp);
        }
        Ok(ArpPacket { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Operation ([`OP_REQUEST`], [`OP_REPLY`], ...).
    pub fn operation(&self) -> u16 {
        be16(&self.b()[field::OPER])
    }

    /// Sender hardware address.
    pub fn sender_mac(&self) -> MacAddr {
        MacAddr(self.b()[field::SHA].try_into().expect("6 bytes"))
    }

    /// Sender protocol address.
    pub fn sender_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(&self.b()[field::SPA]))
    }

    /// Target hardware address.
    pub fn target_mac(&self) -> MacAddr {
        MacAddr(self.b()[field::THA].try_into().expect("6 bytes"))
    }

    /// Target protocol address.
    pub fn target_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(&self.b()[field::TPA]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Turns this request into the reply of `mac`, the owner of the target
    /// address: operation 2, the requester becomes the target, and `mac`
    /// with the requested address the sender.
    pub fn make_reply(&mut self, mac: MacAddr) {
        let (sha, spa, tpa) = (self.sender_mac(), self.sender_ip(), self.target_ip());
        let b = self.buffer.as_mut();
        b[field::OPER].copy_from_slice(&OP_REPLY.to_be_bytes());
        b[field::SHA].copy_from_slice(&mac.0);
        b[field::SPA].copy_from_slice(&tpa.octets());
        b[field::THA].copy_from_slice(&sha.0);
        b[field::TPA].copy_from_slice(&spa.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Who has 192.168.1.1? Tell 192.168.1.100" from 00:11:22:33:44:55,
    /// byte for byte as a capture shows the ARP part.
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // Ethernet, IPv4, 6, 4, request
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 192, 168, 1, 100, // sender
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 192, 168, 1, 1, // target
    ];

    #[test]
    fn parses_a_request() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.operation(), OP_REQUEST);
        assert_eq!(p.sender_mac(), MacAddr([0, 0x11, 0x22, 0x33, 0x44, 0x55]));
        assert_eq!(p.sender_ip(), Ipv4Addr::new(192, 168, 1, 100));
        assert_eq!(p.target_mac(), MacAddr([0; 6]));
        assert_eq!(p.target_ip(), Ipv4Addr::new(192, 168, 1, 1));
    }

    #[test]
    fn the_reply_is_the_one_a_host_sends() {
        let mut b = REQUEST;
        ArpPacket::new_checked(&mut b[..])
            .unwrap()
            .make_reply(MacAddr([0x02, 0x45, 1, 2, 3, 0]));
        let want: [u8; 28] = [
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, // reply
            0x02, 0x45, 1, 2, 3, 0, 192, 168, 1, 1, // 192.168.1.1 is at ...
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 192, 168, 1, 100,
        ];
        assert_eq!(b, want);
    }

    #[test]
    fn other_hardware_or_protocols_are_refused() {
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..27]).unwrap_err(),
            ParseError::Truncated
        );
        for (at, v) in [(1, 6u8), (2, 0x86), (4, 8), (5, 16)] {
            let mut b = REQUEST;
            b[at] = v;
            assert_eq!(
                ArpPacket::new_checked(&b[..]).unwrap_err(),
                ParseError::BadArp,
                "byte {at}"
            );
        }
    }
}
