//! TCP headers.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::ipv4::{be16, be32, pseudo_header_sum, PROTO_TCP};
use crate::ParseError;

/// Length of a TCP header without options.
pub const TCP_MIN_HEADER_LEN: usize = 20;

/// TCP flag bits (the low byte of the flags field).
pub mod tcp_flags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronise sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push function.
    pub const PSH: u8 = 0x08;
    /// Acknowledgment field significant.
    pub const ACK: u8 = 0x10;
}

/// A zero-copy view of a TCP segment. [`TcpPacket::new_checked`] ensures
/// the data offset is at least 5 words and within the buffer.
#[derive(Debug, Clone, Copy)]
pub struct TcpPacket<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps `buffer` without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps `buffer` after validating the data offset.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let len = buffer.as_ref().len();
        if len < TCP_MIN_HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        let p = TcpPacket { buffer };
        let hl = p.header_len();
        if hl < TCP_MIN_HEADER_LEN {
            return Err(ParseError::BadL4Header);
        }
        if hl > len {
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

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(&self.buffer.as_ref()[4..8])
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        be32(&self.buffer.as_ref()[8..12])
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[12] >> 4) * 4
    }

    /// Flag bits, see [`tcp_flags`].
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[13]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[16..18])
    }

    /// True if the checksum is correct for these addresses (the whole
    /// buffer is taken as the segment).
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let seg = self.buffer.as_ref();
        let acc = pseudo_header_sum(src, dst, PROTO_TCP, seg.len() as u16);
        checksum::fold(checksum::sum(acc, seg)) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Writes ports, sequence and acknowledgment numbers, a 20-byte header
    /// length, the flags, a window of 65535 and a zero urgent pointer.
    pub fn set_header(&mut self, src_port: u16, dst_port: u16, seq: u32, ack: u32, flags: u8) {
        let b = self.buffer.as_mut();
        b[0..2].copy_from_slice(&src_port.to_be_bytes());
        b[2..4].copy_from_slice(&dst_port.to_be_bytes());
        b[4..8].copy_from_slice(&seq.to_be_bytes());
        b[8..12].copy_from_slice(&ack.to_be_bytes());
        b[12] = (TCP_MIN_HEADER_LEN as u8 / 4) << 4;
        b[13] = flags;
        b[14..16].copy_from_slice(&0xFFFFu16.to_be_bytes());
        b[16..20].fill(0);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, check: u16) {
        self.buffer.as_mut()[16..18].copy_from_slice(&check.to_be_bytes());
    }

    /// Computes and writes the checksum (the whole buffer is the segment).
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.buffer.as_mut()[16..18].fill(0);
        let seg = self.buffer.as_ref();
        let acc = pseudo_header_sum(src, dst, PROTO_TCP, seg.len() as u16);
        let check = checksum::fold(checksum::sum(acc, seg));
        self.buffer.as_mut()[16..18].copy_from_slice(&check.to_be_bytes());
    }

    /// Patches the checksum after an address in the pseudo-header changed.
    pub fn adjust_checksum_for_addr(&mut self, old: Ipv4Addr, new: Ipv4Addr) {
        let check = checksum::adjust32(self.checksum(), u32::from(old), u32::from(new));
        self.buffer.as_mut()[16..18].copy_from_slice(&check.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_offset_checks() {
        let mut b = [0u8; 24];
        b[12] = 5 << 4;
        assert!(TcpPacket::new_checked(&b[..]).is_ok());
        b[12] = 4 << 4;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).unwrap_err(),
            ParseError::BadL4Header
        );
        b[12] = 7 << 4;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).unwrap_err(),
            ParseError::Truncated
        );
    }

    #[test]
    fn tcp_checksum_round_trip_and_adjust() {
        let (src, dst, new) = (
            Ipv4Addr::new(10, 1, 2, 3),
            Ipv4Addr::new(10, 9, 8, 7),
            Ipv4Addr::new(172, 31, 0, 5),
        );
        let mut b = [0u8; 23];
        let mut p = TcpPacket::new_unchecked(&mut b[..]);
        p.set_header(1234, 80, 7, 0, tcp_flags::SYN);
        p.fill_checksum(src, dst);
        assert!(p.verify_checksum(src, dst));
        p.adjust_checksum_for_addr(dst, new);
        assert!(p.verify_checksum(src, new));
        assert_eq!(p.flags(), tcp_flags::SYN);
        assert_eq!(
            (p.src_port(), p.dst_port(), p.seq(), p.ack()),
            (1234, 80, 7, 0)
        );
    }
}
