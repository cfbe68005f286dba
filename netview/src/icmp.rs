//! ICMP for IPv4 (RFC 792): what a host needs to answer `ping`.

use super::ipv4::be16;
use super::{checksum, ParseError};

/// Length of the ICMP header (type, code, checksum, and four bytes that
/// are the identifier and sequence number for echo messages).
pub const HEADER_LEN: usize = 8;
/// Type of an echo reply.
pub const ECHO_REPLY: u8 = 0;
/// Type of an echo request.
pub const ECHO_REQUEST: u8 = 8;

/// A zero-copy view of an ICMP message; the buffer is the whole message
/// (the IPv4 payload). [`IcmpPacket::new_checked`] guarantees the 8-byte
/// header.
#[derive(Debug, Clone, Copy)]
pub struct IcmpPacket<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Wraps `buffer` without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        IcmpPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        Ok(IcmpPacket { buffer })
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[2..4])
    }

    /// Identifier of an echo message.
    pub fn echo_ident(&self) -> u16 {
        be16(&self.buffer.as_ref()[4..6])
    }

    /// Sequence number of an echo message.
    pub fn echo_seq(&self) -> u16 {
        be16(&self.buffer.as_ref()[6..8])
    }

    /// The data after the header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// True if the checksum over the whole message is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(0, self.buffer.as_ref())) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, t: u8) {
        self.buffer.as_mut()[0] = t;
    }

    /// Sets the code.
    pub fn set_code(&mut self, c: u8) {
        self.buffer.as_mut()[1] = c;
    }

    /// Computes and writes the checksum over the whole message.
    pub fn fill_checksum(&mut self) {
        self.buffer.as_mut()[2..4].fill(0);
        let check = checksum::fold(checksum::sum(0, self.buffer.as_ref()));
        self.buffer.as_mut()[2..4].copy_from_slice(&check.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo request as `ping` sends it: identifier 0x1234, sequence 1,
    /// data "abcdefgh". Checksum by hand: the words 0800 0000 1234 0001
    /// 6162 6364 6566 6768 sum to 0x1_ABC9, folded 0xABCA, complemented
    /// 0x5435.
    const REQUEST: [u8; 16] = [
        0x08, 0x00, 0x54, 0x35, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd', b'e', b'f', b'g',
        b'h',
    ];

    #[test]
    fn parses_and_verifies_a_request() {
        let p = IcmpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!((p.msg_type(), p.code()), (ECHO_REQUEST, 0));
        assert_eq!((p.echo_ident(), p.echo_seq()), (0x1234, 1));
        assert_eq!(p.checksum(), 0x5435);
        assert!(p.verify_checksum());
        assert_eq!(p.data(), b"abcdefgh");
        let mut bad = REQUEST;
        bad[9] ^= 1;
        assert!(!IcmpPacket::new_checked(&bad[..]).unwrap().verify_checksum());
        assert_eq!(
            IcmpPacket::new_checked(&REQUEST[..7]).unwrap_err(),
            ParseError::Truncated
        );
    }

    #[test]
    fn the_reply_checksum_is_the_hand_computed_one() {
        let mut b = REQUEST;
        let mut p = IcmpPacket::new_checked(&mut b[..]).unwrap();
        p.set_msg_type(ECHO_REPLY);
        p.fill_checksum();
        // Type 8 -> 0 takes 0x0800 off the sum: 0xA3CA, complemented.
        assert_eq!(&b[..4], &[0x00, 0x00, 0x5c, 0x35]);
    }
}
