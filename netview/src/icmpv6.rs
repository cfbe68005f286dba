//! ICMPv6 (RFC 4443) and the neighbour discovery messages a host answers
//! (RFC 4861): echo, neighbour solicitation and advertisement.

use std::net::Ipv6Addr;

use super::ethernet::MacAddr;
use super::ipv4::be16;
use super::ipv6::{pseudo_header_sum, NEXT_HEADER_ICMPV6};
use super::{checksum, ParseError};

/// Length of the ICMPv6 header (type, code, checksum, four more bytes).
pub const HEADER_LEN: usize = 8;
/// Type of an echo request.
pub const ECHO_REQUEST: u8 = 128;
/// Type of an echo reply.
pub const ECHO_REPLY: u8 = 129;
/// Type of a neighbour solicitation.
pub const NEIGHBOR_SOLICIT: u8 = 135;
/// Type of a neighbour advertisement.
pub const NEIGHBOR_ADVERT: u8 = 136;
/// Length of a neighbour solicitation or advertisement without options.
pub const ND_LEN: usize = 24;
/// Length of a link-layer address option for Ethernet.
pub const LLADDR_OPTION_LEN: usize = 8;
/// Option type: source link-layer address.
pub const OPT_SOURCE_LLADDR: u8 = 1;
/// Option type: target link-layer address.
pub const OPT_TARGET_LLADDR: u8 = 2;
/// Advertisement flags: router.
pub const FLAG_ROUTER: u32 = 0x8000_0000;
/// Advertisement flags: solicited (an answer to a solicitation).
pub const FLAG_SOLICITED: u32 = 0x4000_0000;
/// Advertisement flags: override (update a cached link-layer address).
pub const FLAG_OVERRIDE: u32 = 0x2000_0000;

/// A zero-copy view of an ICMPv6 message; the buffer is the whole message
/// (the IPv6 payload). [`Icmpv6Packet::new_checked`] guarantees the
/// 8-byte header; [`Icmpv6Packet::nd_target`] needs [`ND_LEN`] bytes and
/// says so.
#[derive(Debug, Clone, Copy)]
pub struct Icmpv6Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps `buffer` without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wraps `buffer` after checking that it holds the header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.b()[0]
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        self.b()[1]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(&self.b()[2..4])
    }

    /// Identifier of an echo message.
    pub fn echo_ident(&self) -> u16 {
        be16(&self.b()[4..6])
    }

    /// Sequence number of an echo message.
    pub fn echo_seq(&self) -> u16 {
        be16(&self.b()[6..8])
    }

    /// The four bytes after the checksum as one word (the flags of an
    /// advertisement).
    pub fn word1(&self) -> u32 {
        u32::from_be_bytes(self.b()[4..8].try_into().expect("4 bytes"))
    }

    /// The data after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }

    /// The target address of a neighbour solicitation or advertisement.
    pub fn nd_target(&self) -> Result<Ipv6Addr, ParseError> {
        let t: [u8; 16] = self
            .b()
            .get(HEADER_LEN..ND_LEN)
            .ok_or(ParseError::Truncated)?
            .try_into()
            .expect("16 bytes");
        Ok(Ipv6Addr::from(t))
    }

    /// The link-layer address option of type `kind` of a neighbour
    /// solicitation or advertisement, if it has one; an option of length
    /// zero or running past the message is an error (RFC 4861 section 4.6).
    pub fn nd_lladdr_option(&self, kind: u8) -> Result<Option<MacAddr>, ParseError> {
        let b = self.b();
        if b.len() < ND_LEN {
            return Err(ParseError::Truncated);
        }
        let mut found = None;
        let mut at = ND_LEN;
        while at < b.len() {
            let (Some(&t), Some(&units)) = (b.get(at), b.get(at + 1)) else {
                return Err(ParseError::BadIcmp);
            };
            let len = usize::from(units) * 8;
            if len == 0 || at + len > b.len() {
                return Err(ParseError::BadIcmp);
            }
            if t == kind && len == LLADDR_OPTION_LEN && found.is_none() {
                found = Some(MacAddr(b[at + 2..at + 8].try_into().expect("6 bytes")));
            }
            at += len;
        }
        Ok(found)
    }

    /// True if the checksum is right for a message from `src` to `dst`.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let b = self.b();
        let acc = pseudo_header_sum(src, dst, NEXT_HEADER_ICMPV6, b.len() as u32);
        checksum::fold(checksum::sum(acc, b)) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, t: u8) {
        self.buffer.as_mut()[0] = t;
    }

    /// Sets the code.
    pub fn set_code(&mut self, c: u8) {
        self.buffer.as_mut()[1] = c;
    }

    /// Computes and writes the checksum for a message from `src` to `dst`.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.buffer.as_mut()[2..4].fill(0);
        let b = self.buffer.as_ref();
        let acc = pseudo_header_sum(src, dst, NEXT_HEADER_ICMPV6, b.len() as u32);
        let check = checksum::fold(checksum::sum(acc, b));
        self.buffer.as_mut()[2..4].copy_from_slice(&check.to_be_bytes());
    }

    /// Writes a neighbour advertisement for `target` with `flags`, and, if
    /// `lladdr` is given, a target link-layer address option after it. The
    /// buffer must be [`ND_LEN`] bytes, or [`ND_LEN`] +
    /// [`LLADDR_OPTION_LEN`] with `lladdr` (checked: an error otherwise);
    /// the checksum is left to [`Icmpv6Packet::fill_checksum`].
    pub fn write_neighbor_advert(
        &mut self,
        target: &Ipv6Addr,
        flags: u32,
        lladdr: Option<MacAddr>,
    ) -> Result<(), ParseError> {
        let want = ND_LEN + lladdr.map_or(0, |_| LLADDR_OPTION_LEN);
        let b = self.buffer.as_mut();
        if b.len() != want {
            return Err(ParseError::Truncated);
        }
        b[0] = NEIGHBOR_ADVERT;
        b[1] = 0;
        b[2..4].fill(0);
        b[4..8].copy_from_slice(&flags.to_be_bytes());
        b[8..24].copy_from_slice(&target.octets());
        if let Some(mac) = lladdr {
            b[24] = OPT_TARGET_LLADDR;
            b[25] = 1;
            b[26..32].copy_from_slice(&mac.0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// A neighbour solicitation from fe80::1 (00:11:22:33:44:55) for
    /// fe80::2, sent to ff02::1:ff00:2, as Linux sends it (checksum: see
    /// `ns_checksum_by_hand`).
    pub(crate) const NS: [u8; 32] = [
        0x87, 0x00, 0x15, 0xff, 0, 0, 0, 0, // type 135, checksum, reserved
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // target
        0x01, 0x01, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // source link-layer address
    ];

    #[test]
    fn ns_checksum_by_hand() {
        // Pseudo-header: fe80 + 0001 (src fe80::1), ff02 + 0001 + ff00 +
        // 0002 (dst ff02::1:ff00:2), length 0x20, next header 0x3a.
        // Message: 8700, target fe80 + 0002, option 0101 0011 2233 4455.
        let words: [u32; 15] = [
            0xfe80, 0x0001, 0xff02, 0x0001, 0xff00, 0x0002, 0x0020, 0x003a, 0x8700, 0xfe80, 0x0002,
            0x0101, 0x0011, 0x2233, 0x4455,
        ];
        let mut s: u32 = words.iter().sum();
        while s > 0xFFFF {
            s = (s & 0xFFFF) + (s >> 16);
        }
        assert_eq!(!(s as u16), 0x15ff);
        let p = Icmpv6Packet::new_checked(&NS[..]).unwrap();
        assert!(p.verify_checksum(&a("fe80::1"), &a("ff02::1:ff00:2")));
        assert!(!p.verify_checksum(&a("fe80::1"), &a("ff02::1:ff00:3")));
    }

    #[test]
    fn reads_a_solicitation() {
        let p = Icmpv6Packet::new_checked(&NS[..]).unwrap();
        assert_eq!((p.msg_type(), p.code()), (NEIGHBOR_SOLICIT, 0));
        assert_eq!(p.nd_target(), Ok(a("fe80::2")));
        assert_eq!(
            p.nd_lladdr_option(OPT_SOURCE_LLADDR),
            Ok(Some(MacAddr([0, 0x11, 0x22, 0x33, 0x44, 0x55])))
        );
        assert_eq!(p.nd_lladdr_option(OPT_TARGET_LLADDR), Ok(None));
        let short = Icmpv6Packet::new_checked(&NS[..24]).unwrap();
        assert_eq!(short.nd_lladdr_option(OPT_SOURCE_LLADDR), Ok(None));
        let mut zero = NS;
        zero[25] = 0;
        let p = Icmpv6Packet::new_checked(&zero[..]).unwrap();
        assert_eq!(p.nd_lladdr_option(1), Err(ParseError::BadIcmp));
        let mut long = NS;
        long[25] = 2;
        let p = Icmpv6Packet::new_checked(&long[..]).unwrap();
        assert_eq!(p.nd_lladdr_option(1), Err(ParseError::BadIcmp));
        let p = Icmpv6Packet::new_checked(&NS[..20]).unwrap();
        assert_eq!(p.nd_target(), Err(ParseError::Truncated));
    }

    #[test]
    fn writes_an_advertisement_with_its_hand_computed_checksum() {
        let mut b = [0u8; 32];
        let mut p = Icmpv6Packet::new_checked(&mut b[..]).unwrap();
        let mac = MacAddr([0x02, 0x45, 0, 0, 0, 1]);
        p.write_neighbor_advert(&a("fe80::2"), FLAG_SOLICITED | FLAG_OVERRIDE, Some(mac))
            .unwrap();
        p.fill_checksum(&a("fe80::2"), &a("fe80::1"));
        // fe80+0002 + fe80+0001 + 0020 + 003a (pseudo-header), 8800 +
        // 6000 + fe80+0002 (type, flags, target), 0201 + 0245 + 0000 +
        // 0001 (option) = 0x3_E826, folded 0xE829, complemented 0x17D6.
        let mut want = [0u8; 32];
        want[..8].copy_from_slice(&[0x88, 0x00, 0x17, 0xd6, 0x60, 0, 0, 0]);
        want[8..24].copy_from_slice(&a("fe80::2").octets());
        want[24..].copy_from_slice(&[0x02, 0x01, 0x02, 0x45, 0, 0, 0, 1]);
        assert_eq!(b, want);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(&a("fe80::2"), &a("fe80::1")));
        let mut small = [0u8; 24];
        assert_eq!(
            Icmpv6Packet::new_unchecked(&mut small[..]).write_neighbor_advert(
                &a("fe80::2"),
                0,
                Some(mac)
            ),
            Err(ParseError::Truncated)
        );
    }
}
