//! Ethernet II frames (no FCS, no VLAN tags).

use std::fmt;
use std::str::FromStr;

use super::ParseError;

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;

mod field {
    use std::ops::Range;
    pub(super) const DST: Range<usize> = 0..6;
    pub(super) const SRC: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
}

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address, ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xFF; 6]);

    /// True for group addresses (the I/G bit), broadcast included.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// True for the IPv6 multicast range 33:33:xx:xx:xx:xx (RFC 2464).
    pub fn is_ipv6_multicast(&self) -> bool {
        self.0[0] == 0x33 && self.0[1] == 0x33
    }

    /// A locally administered unicast address carrying an IPv4 address in
    /// its low four bytes (`02:00:a:b:c:d`): a stable MAC for hosts that
    /// are configured by IP only.
    pub fn from_ipv4(ip: std::net::Ipv4Addr) -> Self {
        let [a, b, c, d] = ip.octets();
        MacAddr([0x02, 0x00, a, b, c, d])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// The text was not six colon-separated hexadecimal bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address (expected six hex bytes separated by ':')")]
pub struct MacParseError;

impl FromStr for MacAddr {
    type Err = MacParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or(MacParseError)?;
            if part.is_empty() || part.len() > 2 {
                return Err(MacParseError);
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| MacParseError)?;
        }
        if parts.next().is_some() {
            return Err(MacParseError);
        }
        Ok(MacAddr(out))
    }
}

/// A zero-copy view of an Ethernet II frame.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` without checking it; field accessors may panic if it
    /// is shorter than [`HEADER_LEN`].
    pub fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` after checking that it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination address.
    pub fn dst_addr(&self) -> MacAddr {
        MacAddr(read6(&self.buffer.as_ref()[field::DST]))
    }

    /// Source address.
    pub fn src_addr(&self) -> MacAddr {
        MacAddr(read6(&self.buffer.as_ref()[field::SRC]))
    }

    /// EtherType of the payload.
    pub fn ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Everything after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, ethertype: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&ethertype.to_be_bytes());
    }

    /// Everything after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

fn read6(b: &[u8]) -> [u8; 6] {
    let mut out = [0u8; 6];
    out.copy_from_slice(b);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut buf = [0u8; 20];
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(MacAddr([1, 2, 3, 4, 5, 6]));
        f.set_src_addr(MacAddr([7, 8, 9, 10, 11, 12]));
        f.set_ethertype(ETHERTYPE_IPV4);
        assert_eq!(f.dst_addr(), MacAddr([1, 2, 3, 4, 5, 6]));
        assert_eq!(f.src_addr().to_string(), "07:08:09:0a:0b:0c");
        assert_eq!(f.ethertype(), 0x0800);
        assert_eq!(f.payload().len(), 6);
        assert_eq!(&buf[12..14], &[0x08, 0x00]);
    }

    #[test]
    fn short_frame_is_rejected() {
        assert_eq!(
            EthernetFrame::new_checked(&[0u8; 13][..]).unwrap_err(),
            ParseError::Truncated
        );
    }

    #[test]
    fn mac_parsing() {
        assert_eq!(
            "02:00:0a:00:00:01".parse(),
            Ok(MacAddr([2, 0, 10, 0, 0, 1]))
        );
        for bad in [
            "",
            "02:00:0a:00:00",
            "02:00:0a:00:00:01:02",
            "0x:00:00:00:00:00",
            "002:0:0:0:0:0",
        ] {
            assert_eq!(bad.parse::<MacAddr>(), Err(MacParseError), "{bad}");
        }
    }
}
