//! Minimal zero-copy views of the headers the applications read and write.
//!
//! Only what the applications need: Ethernet II, IPv4 (options allowed,
//! fragments recognised), UDP and TCP. Each view follows one pattern: a
//! `new_checked` constructor validates every length once, after which field
//! accessors cannot go out of bounds; malformed input is a [`ParseError`],
//! never a panic. Nothing here allocates.
//!
//! Frames carry no FCS. Frames built here are padded with zeros to
//! [`MIN_FRAME_LEN`] (the 64-byte Ethernet minimum less the 4-byte FCS),
//! and are at most [`MAX_FRAME_LEN`] bytes, the largest frame an Ensō pipe
//! carries (24 flits).
//!
//! Not supported (reported as [`ParseError::NotIpv4`]): VLAN tags, IPv6.

pub mod l4;

// The header views live in `crate::net`; these are their old paths.
use crate::net::checksum;
pub use crate::net::{ethernet, ipv4, ParseError};

use std::net::Ipv4Addr;

pub use ethernet::{EthernetFrame, MacAddr, MacParseError};
pub use ipv4::{Ipv4Packet, PROTO_TCP, PROTO_UDP};
pub use l4::{tcp_flags, TcpPacket, UdpPacket};

/// Largest frame an Ensō pipe carries (24 flits of 64 B).
pub const MAX_FRAME_LEN: usize = 1536;
/// Smallest Ethernet frame without its FCS; shorter frames are padded.
pub const MIN_FRAME_LEN: usize = 60;
/// Offset of the UDP payload in frames built by this module (IPv4 without
/// options).
pub const UDP_PAYLOAD_OFFSET: usize =
    ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN + l4::UDP_HEADER_LEN;
/// Offset of the TCP payload in frames built by this module.
pub const TCP_PAYLOAD_OFFSET: usize =
    ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN + l4::TCP_MIN_HEADER_LEN;

/// A frame could not be written into the given buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The buffer is shorter than the frame.
    #[error("buffer of {available} bytes cannot hold a {needed}-byte frame")]
    BufferTooSmall {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
    /// The frame would exceed [`MAX_FRAME_LEN`].
    #[error("a {len}-byte frame exceeds the {MAX_FRAME_LEN}-byte limit")]
    TooLarge {
        /// Length the frame would have.
        len: usize,
    },
}

/// The flow identity of a TCP or UDP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiveTuple {
    /// Source address.
    pub src_ip: Ipv4Addr,
    /// Destination address.
    pub dst_ip: Ipv4Addr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IP protocol ([`PROTO_TCP`] or [`PROTO_UDP`]).
    pub protocol: u8,
}

impl FiveTuple {
    /// Extracts the 5-tuple of an IPv4 TCP or UDP frame.
    pub fn parse(frame: &[u8]) -> Result<Self, ParseError> {
        Ok(Self::at(frame, &Layout::parse(frame)?))
    }

    /// The tuple of a frame whose layout was already validated.
    #[inline]
    fn at(frame: &[u8], layout: &Layout) -> Self {
        // One bounds check per field group; the layout guarantees both.
        let mut addrs = [0u8; 8];
        addrs.copy_from_slice(&frame[26..34]);
        let mut ports = [0u8; 4];
        ports.copy_from_slice(&frame[layout.l4_offset..layout.l4_offset + 4]);
        FiveTuple {
            src_ip: Ipv4Addr::new(addrs[0], addrs[1], addrs[2], addrs[3]),
            dst_ip: Ipv4Addr::new(addrs[4], addrs[5], addrs[6], addrs[7]),
            src_port: u16::from_be_bytes([ports[0], ports[1]]),
            dst_port: u16::from_be_bytes([ports[2], ports[3]]),
            protocol: layout.protocol,
        }
    }

    /// Hashes the tuple with `seed`.
    #[inline]
    pub fn hash(&self, seed: u64) -> u64 {
        let a = (u64::from(u32::from(self.src_ip)) << 32) | u64::from(u32::from(self.dst_ip));
        let b = (u64::from(self.src_port) << 24)
            | (u64::from(self.dst_port) << 8)
            | u64::from(self.protocol);
        crate::hash::mix64(a ^ crate::hash::mix64(b ^ seed))
    }
}

/// Where the headers of a validated IPv4 TCP/UDP frame are.
#[derive(Clone, Copy, Debug)]
struct Layout {
    protocol: u8,
    l4_offset: usize,
}

impl Layout {
    /// Validates Ethernet, IPv4 and the TCP/UDP header of `frame`.
    fn parse(frame: &[u8]) -> Result<Self, ParseError> {
        let eth = EthernetFrame::new_checked(frame)?;
        if eth.ethertype() != ethernet::ETHERTYPE_IPV4 {
            return Err(ParseError::NotIpv4);
        }
        let ip = Ipv4Packet::new_checked(eth.payload())?;
        if ip.is_fragment() {
            return Err(ParseError::Fragment);
        }
        let protocol = ip.protocol();
        match protocol {
            PROTO_TCP => {
                TcpPacket::new_checked(ip.payload())?;
            }
            PROTO_UDP => {
                UdpPacket::new_checked(ip.payload())?;
            }
            _ => return Err(ParseError::UnsupportedProtocol),
        }
        Ok(Layout {
            protocol,
            l4_offset: ethernet::HEADER_LEN + ip.header_len(),
        })
    }
}

/// Sends a TCP/UDP frame on toward `dst_ip` at `dst_mac`: the old
/// destination MAC becomes the source MAC (the frame was addressed to us),
/// and the IPv4 header checksum and the TCP/UDP checksum are patched
/// incrementally. The frame is left untouched if it does not parse.
pub fn rewrite_destination(
    frame: &mut [u8],
    dst_mac: MacAddr,
    dst_ip: Ipv4Addr,
) -> Result<(), ParseError> {
    let layout = Layout::parse(frame)?;
    rewrite_at(frame, &layout, dst_mac, dst_ip);
    Ok(())
}

/// Parses a TCP/UDP frame once, lets `choose` pick a destination from its
/// 5-tuple, and rewrites the frame toward it as [`rewrite_destination`]
/// does. The frame is left untouched if it does not parse.
#[inline]
pub fn forward_by_tuple(
    frame: &mut [u8],
    choose: impl FnOnce(&FiveTuple) -> (MacAddr, Ipv4Addr),
) -> Result<(), ParseError> {
    let layout = Layout::parse(frame)?;
    let (mac, ip) = choose(&FiveTuple::at(frame, &layout));
    rewrite_at(frame, &layout, mac, ip);
    Ok(())
}

#[inline]
fn rewrite_at(frame: &mut [u8], layout: &Layout, dst_mac: MacAddr, dst_ip: Ipv4Addr) {
    let mut eth = EthernetFrame::new_unchecked(&mut *frame);
    let our_mac = eth.dst_addr();
    eth.set_src_addr(our_mac);
    eth.set_dst_addr(dst_mac);
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]);
    // The address is covered by the IPv4 header checksum and, through the
    // pseudo-header, by the TCP/UDP checksum: one delta patches both.
    let delta = checksum::delta32(u32::from(ip.dst_addr()), u32::from(dst_ip));
    ip.set_dst_addr(dst_ip);
    ip.set_checksum(checksum::apply(ip.checksum(), delta));
    let l4 = &mut frame[layout.l4_offset..];
    if layout.protocol == PROTO_TCP {
        let mut tcp = TcpPacket::new_unchecked(l4);
        tcp.set_checksum(checksum::apply(tcp.checksum(), delta));
    } else {
        let mut udp = UdpPacket::new_unchecked(l4);
        // Zero means "no checksum" and stays so; a computed zero is sent
        // as 0xFFFF.
        if udp.checksum() != 0 {
            let check = checksum::apply(udp.checksum(), delta);
            udp.set_checksum(if check == 0 { 0xFFFF } else { check });
        }
    }
}

/// Addresses and ports of one direction of a UDP or TCP conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoints {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl Endpoints {
    /// The other direction (for a reply).
    pub fn reversed(&self) -> Self {
        Endpoints {
            src_mac: self.dst_mac,
            dst_mac: self.src_mac,
            src_ip: self.dst_ip,
            dst_ip: self.src_ip,
            src_port: self.dst_port,
            dst_port: self.src_port,
        }
    }
}

/// A parsed IPv4/UDP frame.
#[derive(Clone, Copy, Debug)]
pub struct UdpDatagram<'a> {
    /// Who sent it to whom.
    pub endpoints: Endpoints,
    /// The UDP payload (up to the UDP length field).
    pub payload: &'a [u8],
}

impl<'a> UdpDatagram<'a> {
    /// Parses an IPv4/UDP frame; TCP and anything else is an error.
    pub fn parse(frame: &'a [u8]) -> Result<Self, ParseError> {
        match Self::parse_plain(frame) {
            Some(d) => Ok(d),
            None => Self::parse_layered(frame),
        }
    }

    /// The general parser: every header checked layer by layer.
    fn parse_layered(frame: &'a [u8]) -> Result<Self, ParseError> {
        let layout = Layout::parse(frame)?;
        if layout.protocol != PROTO_UDP {
            return Err(ParseError::UnsupportedProtocol);
        }
        let eth = EthernetFrame::new_unchecked(frame);
        let ip = Ipv4Packet::new_unchecked(eth.payload());
        let udp = UdpPacket::new_unchecked(&frame[layout.l4_offset..]);
        Ok(UdpDatagram {
            endpoints: Endpoints {
                src_mac: eth.src_addr(),
                dst_mac: eth.dst_addr(),
                src_ip: ip.src_addr(),
                dst_ip: ip.dst_addr(),
                src_port: udp.src_port(),
                dst_port: udp.dst_port(),
            },
            payload: &frame
                [layout.l4_offset + l4::UDP_HEADER_LEN..layout.l4_offset + usize::from(udp.len())],
        })
    }
}

impl<'a> UdpDatagram<'a> {
    /// [`UdpDatagram::parse`] of the usual frame, an unfragmented IPv4
    /// datagram with a 20-byte header carrying UDP, read at fixed offsets
    /// from one 42-byte header array; `None` for anything else (including
    /// every malformed frame), which the general parser then reads and
    /// names the error of. The KV server parses a frame per batch, and the
    /// layered checks cost it ~130 instructions a frame; the test
    /// `plain_udp_parse_matches_the_layered_parser` holds the two equal.
    #[inline]
    fn parse_plain(frame: &'a [u8]) -> Option<Self> {
        let h: &[u8; UDP_PAYLOAD_OFFSET] = frame.get(..UDP_PAYLOAD_OFFSET)?.try_into().ok()?;
        let be = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
        let total = usize::from(be(16));
        let udp_len = usize::from(be(38));
        let plain = be(12) == ethernet::ETHERTYPE_IPV4
            && h[14] == 0x45
            && h[23] == PROTO_UDP
            && be(20) & 0x3FFF == 0
            && total <= frame.len() - ethernet::HEADER_LEN
            && udp_len >= l4::UDP_HEADER_LEN
            && udp_len + ipv4::MIN_HEADER_LEN <= total;
        if !plain {
            return None;
        }
        let mac = |at: usize| MacAddr(h[at..at + 6].try_into().expect("6 bytes"));
        let ip = |at: usize| Ipv4Addr::new(h[at], h[at + 1], h[at + 2], h[at + 3]);
        Some(UdpDatagram {
            endpoints: Endpoints {
                src_mac: mac(6),
                dst_mac: mac(0),
                src_ip: ip(26),
                dst_ip: ip(30),
                src_port: be(34),
                dst_port: be(36),
            },
            payload: &frame[UDP_PAYLOAD_OFFSET..UDP_PAYLOAD_OFFSET - l4::UDP_HEADER_LEN + udp_len],
        })
    }
}

fn check_room(buf_len: usize, header_len: usize, payload_len: usize) -> Result<usize, EmitError> {
    let len = (header_len + payload_len).max(MIN_FRAME_LEN);
    if len > MAX_FRAME_LEN {
        return Err(EmitError::TooLarge { len });
    }
    if len > buf_len {
        return Err(EmitError::BufferTooSmall {
            needed: len,
            available: buf_len,
        });
    }
    Ok(len)
}

fn write_l2_l3(buf: &mut [u8], ep: &Endpoints, protocol: u8, ip_len: usize) {
    let mut eth = EthernetFrame::new_unchecked(&mut *buf);
    eth.set_dst_addr(ep.dst_mac);
    eth.set_src_addr(ep.src_mac);
    eth.set_ethertype(ethernet::ETHERTYPE_IPV4);
    let mut ip = Ipv4Packet::new_unchecked(&mut buf[ethernet::HEADER_LEN..]);
    ip.set_version_and_header_len(ipv4::MIN_HEADER_LEN);
    ip.set_total_len(ip_len as u16);
    ip.set_ident(0);
    ip.set_dont_fragment();
    ip.set_ttl(64);
    ip.set_protocol(protocol);
    ip.set_src_addr(ep.src_ip);
    ip.set_dst_addr(ep.dst_ip);
    // DSCP/ECN byte, then the checksum over the finished header.
    buf[ethernet::HEADER_LEN + 1] = 0;
    Ipv4Packet::new_unchecked(&mut buf[ethernet::HEADER_LEN..]).fill_checksum();
}

/// Whether a built UDP frame carries a UDP checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UdpChecksum {
    /// Compute it in software.
    Compute,
    /// Leave it 0 ("none", legal over IPv4), as when the NIC offloads it.
    Omit,
}

/// Writes headers around a UDP payload of `payload_len` bytes that the
/// caller already placed at [`UDP_PAYLOAD_OFFSET`] in `buf`, computes the
/// IPv4 checksum (and the UDP one if asked), zero-pads to [`MIN_FRAME_LEN`]
/// and returns the frame length.
pub fn finish_udp_frame(
    buf: &mut [u8],
    ep: &Endpoints,
    payload_len: usize,
    checksum: UdpChecksum,
) -> Result<usize, EmitError> {
    let len = check_room(buf.len(), UDP_PAYLOAD_OFFSET, payload_len)?;
    let udp_len = l4::UDP_HEADER_LEN + payload_len;
    // The 42 header bytes are built in one array and stored at once: the
    // KV server and client build a frame per batch, and the field-by-field
    // setters (each re-slicing the buffer) cost them ~80 instructions a
    // frame. `write_l2_l3` writes the same bytes (see the test
    // `udp_headers_match_the_field_writers`).
    let h = udp_headers(ep, udp_len as u16);
    buf[..UDP_PAYLOAD_OFFSET].copy_from_slice(&h);
    if checksum == UdpChecksum::Compute {
        let l4_off = ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN;
        UdpPacket::new_unchecked(&mut buf[l4_off..l4_off + udp_len])
            .fill_checksum(ep.src_ip, ep.dst_ip);
    }
    if len > UDP_PAYLOAD_OFFSET + payload_len {
        // Padding of a short frame (a call into memset, skipped when none).
        buf[UDP_PAYLOAD_OFFSET + payload_len..len].fill(0);
    }
    Ok(len)
}

/// Ethernet, IPv4 (20 bytes, DF, TTL 64, ident 0, checksum filled) and UDP
/// headers (checksum 0) for a UDP datagram of `udp_len` bytes.
#[inline]
fn udp_headers(ep: &Endpoints, udp_len: u16) -> [u8; UDP_PAYLOAD_OFFSET] {
    let ip_len = ipv4::MIN_HEADER_LEN as u16 + udp_len;
    let (src, dst) = (ep.src_ip.octets(), ep.dst_ip.octets());
    let mut h = [0u8; UDP_PAYLOAD_OFFSET];
    h[0..6].copy_from_slice(&ep.dst_mac.0);
    h[6..12].copy_from_slice(&ep.src_mac.0);
    h[12..14].copy_from_slice(&ethernet::ETHERTYPE_IPV4.to_be_bytes());
    h[14] = 0x45;
    h[16..18].copy_from_slice(&ip_len.to_be_bytes());
    h[20..22].copy_from_slice(&0x4000u16.to_be_bytes());
    h[22] = 64;
    h[23] = PROTO_UDP;
    h[26..30].copy_from_slice(&src);
    h[30..34].copy_from_slice(&dst);
    // The header's 16-bit words, the checksum word zero.
    let words = 0x4500u32
        + u32::from(ip_len)
        + 0x4000
        + ((64u32 << 8) | u32::from(PROTO_UDP))
        + u32::from(u16::from_be_bytes([src[0], src[1]]))
        + u32::from(u16::from_be_bytes([src[2], src[3]]))
        + u32::from(u16::from_be_bytes([dst[0], dst[1]]))
        + u32::from(u16::from_be_bytes([dst[2], dst[3]]));
    h[24..26].copy_from_slice(&checksum::fold(words).to_be_bytes());
    h[34..36].copy_from_slice(&ep.src_port.to_be_bytes());
    h[36..38].copy_from_slice(&ep.dst_port.to_be_bytes());
    h[38..40].copy_from_slice(&udp_len.to_be_bytes());
    h
}

/// Builds an IPv4/UDP frame carrying `payload` into `buf` and returns its
/// length.
pub fn emit_udp_frame(buf: &mut [u8], ep: &Endpoints, payload: &[u8]) -> Result<usize, EmitError> {
    check_room(buf.len(), UDP_PAYLOAD_OFFSET, payload.len())?;
    buf[UDP_PAYLOAD_OFFSET..UDP_PAYLOAD_OFFSET + payload.len()].copy_from_slice(payload);
    finish_udp_frame(buf, ep, payload.len(), UdpChecksum::Compute)
}

/// Builds an IPv4/TCP frame (20-byte header, see [`TcpPacket::set_header`])
/// carrying `payload` into `buf` and returns its length.
pub fn emit_tcp_frame(
    buf: &mut [u8],
    ep: &Endpoints,
    flags: u8,
    seq: u32,
    payload: &[u8],
) -> Result<usize, EmitError> {
    let len = check_room(buf.len(), TCP_PAYLOAD_OFFSET, payload.len())?;
    let seg_len = l4::TCP_MIN_HEADER_LEN + payload.len();
    write_l2_l3(buf, ep, PROTO_TCP, ipv4::MIN_HEADER_LEN + seg_len);
    buf[TCP_PAYLOAD_OFFSET..TCP_PAYLOAD_OFFSET + payload.len()].copy_from_slice(payload);
    let l4_off = ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN;
    let ack = if flags & tcp_flags::ACK != 0 { 1 } else { 0 };
    let mut tcp = TcpPacket::new_unchecked(&mut buf[l4_off..l4_off + seg_len]);
    tcp.set_header(ep.src_port, ep.dst_port, seq, ack, flags);
    tcp.fill_checksum(ep.src_ip, ep.dst_ip);
    buf[TCP_PAYLOAD_OFFSET + payload.len()..len].fill(0);
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints() -> Endpoints {
        Endpoints {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            src_port: 5000,
            dst_port: 6000,
        }
    }

    #[test]
    fn udp_headers_match_the_field_writers() {
        let mut eps = vec![endpoints()];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200 {
            x = crate::hash::mix64(x);
            let b = x.to_le_bytes();
            eps.push(Endpoints {
                src_mac: MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]),
                dst_mac: MacAddr([b[7], b[6], b[5], b[4], b[3], b[2]]),
                src_ip: Ipv4Addr::from((x >> 32) as u32),
                dst_ip: Ipv4Addr::from(x as u32),
                src_port: (x >> 16) as u16,
                dst_port: (x >> 40) as u16,
            });
        }
        for (i, ep) in eps.iter().enumerate() {
            for payload_len in [0usize, 1, 17, 200, MAX_FRAME_LEN - UDP_PAYLOAD_OFFSET] {
                let udp_len = l4::UDP_HEADER_LEN + payload_len;
                let mut want = vec![0u8; MAX_FRAME_LEN];
                write_l2_l3(&mut want, ep, PROTO_UDP, ipv4::MIN_HEADER_LEN + udp_len);
                let l4_off = ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN;
                let mut udp = UdpPacket::new_unchecked(&mut want[l4_off..l4_off + udp_len]);
                udp.set_src_port(ep.src_port);
                udp.set_dst_port(ep.dst_port);
                udp.set_len(udp_len as u16);
                udp.set_checksum(0);
                let got = udp_headers(ep, udp_len as u16);
                assert_eq!(
                    &got[..],
                    &want[..UDP_PAYLOAD_OFFSET],
                    "endpoints {i}, payload {payload_len}"
                );
            }
        }
    }

    /// Equal results, field by field (`UdpDatagram` holds no `PartialEq`).
    fn same(
        a: &Result<UdpDatagram<'_>, ParseError>,
        b: &Result<UdpDatagram<'_>, ParseError>,
    ) -> bool {
        match (a, b) {
            (Ok(a), Ok(b)) => a.endpoints == b.endpoints && a.payload == b.payload,
            (Err(a), Err(b)) => a == b,
            _ => false,
        }
    }

    #[test]
    fn plain_udp_parse_matches_the_layered_parser() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut plain = 0;
        for round in 0..20_000 {
            let mut buf = [0u8; 256];
            let payload_len = round % 97;
            let payload: Vec<u8> = (0..payload_len as u8).collect();
            let n = emit_udp_frame(&mut buf, &endpoints(), &payload).unwrap();
            // Damage up to three bytes of the headers (or of the length
            // fields in particular), and sometimes cut the frame short.
            for _ in 0..round % 4 {
                x = crate::hash::mix64(x);
                let at = if x & 1 == 0 {
                    [12, 13, 14, 16, 17, 20, 21, 23, 38, 39][(x >> 8) as usize % 10]
                } else {
                    (x >> 8) as usize % UDP_PAYLOAD_OFFSET
                };
                buf[at] = (x >> 32) as u8;
            }
            x = crate::hash::mix64(x);
            let len = if x.is_multiple_of(5) {
                (x >> 16) as usize % (n + 1)
            } else {
                n
            };
            let frame = &buf[..len];
            let fast = UdpDatagram::parse(frame);
            let slow = UdpDatagram::parse_layered(frame);
            assert!(
                same(&fast, &slow),
                "round {round}: {:?} vs {:?}",
                fast.map(|d| d.payload.len()),
                slow.map(|d| d.payload.len())
            );
            plain += usize::from(UdpDatagram::parse_plain(frame).is_some());
        }
        // Both paths were exercised.
        assert!(
            (2_000..19_000).contains(&plain),
            "{plain} frames took the plain path"
        );
    }

    #[test]
    fn udp_frame_round_trip() {
        let mut buf = [0xAAu8; MAX_FRAME_LEN];
        let len = emit_udp_frame(&mut buf, &endpoints(), b"abc").unwrap();
        assert_eq!(len, MIN_FRAME_LEN);
        assert!(
            buf[UDP_PAYLOAD_OFFSET + 3..len].iter().all(|&b| b == 0),
            "padding zeroed"
        );
        let d = UdpDatagram::parse(&buf[..len]).unwrap();
        assert_eq!(d.endpoints, endpoints());
        assert_eq!(d.payload, b"abc");
        let mut omitted = [0u8; 64];
        omitted[UDP_PAYLOAD_OFFSET..UDP_PAYLOAD_OFFSET + 3].copy_from_slice(b"abc");
        let l = finish_udp_frame(&mut omitted, &endpoints(), 3, UdpChecksum::Omit).unwrap();
        assert_eq!(&omitted[40..42], &[0, 0]);
        assert_eq!(&omitted[..40], &buf[..40]);
        assert_eq!(&omitted[42..l], &buf[42..len]);
        let ip = Ipv4Packet::new_checked(&buf[14..len]).unwrap();
        assert!(ip.verify_checksum());
        assert!(UdpPacket::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(ip.src_addr(), ip.dst_addr()));
        let t = FiveTuple::parse(&buf[..len]).unwrap();
        assert_eq!(
            (t.src_port, t.dst_port, t.protocol),
            (5000, 6000, PROTO_UDP)
        );
    }

    #[test]
    fn emit_limits() {
        let mut small = [0u8; 59];
        assert_eq!(
            emit_udp_frame(&mut small, &endpoints(), b""),
            Err(EmitError::BufferTooSmall {
                needed: 60,
                available: 59
            })
        );
        let mut big = vec![0u8; 4096];
        let payload = vec![1u8; MAX_FRAME_LEN - UDP_PAYLOAD_OFFSET + 1];
        assert_eq!(
            emit_udp_frame(&mut big, &endpoints(), &payload),
            Err(EmitError::TooLarge {
                len: MAX_FRAME_LEN + 1
            })
        );
        let len = emit_udp_frame(&mut big, &endpoints(), &payload[1..]).unwrap();
        assert_eq!(len, MAX_FRAME_LEN);
    }

    #[test]
    fn tcp_frame_and_rewrite() {
        let mut buf = [0u8; 128];
        let len = emit_tcp_frame(&mut buf, &endpoints(), tcp_flags::SYN, 99, b"").unwrap();
        assert_eq!(len, MIN_FRAME_LEN);
        let t = FiveTuple::parse(&buf[..len]).unwrap();
        assert_eq!(t.protocol, PROTO_TCP);
        let backend = Ipv4Addr::new(192, 168, 10, 20);
        let bmac = MacAddr([2, 0, 0, 0, 0, 9]);
        rewrite_destination(&mut buf[..len], bmac, backend).unwrap();
        let eth = EthernetFrame::new_checked(&buf[..len]).unwrap();
        assert_eq!(eth.dst_addr(), bmac);
        assert_eq!(eth.src_addr(), endpoints().dst_mac);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.dst_addr(), backend);
        assert!(ip.verify_checksum());
        assert!(TcpPacket::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(ip.src_addr(), backend));
    }

    #[test]
    fn rewrite_leaves_bad_frames_alone() {
        let mut buf = [0u8; 64];
        let len = emit_udp_frame(&mut buf, &endpoints(), b"x").unwrap();
        buf[23] = 1; // ICMP
        let before = buf;
        assert_eq!(
            rewrite_destination(&mut buf[..len], MacAddr::default(), Ipv4Addr::LOCALHOST),
            Err(ParseError::UnsupportedProtocol)
        );
        assert_eq!(buf, before);
    }

    #[test]
    fn parsing_never_panics_on_any_prefix_or_mutation() {
        let mut buf = [0u8; 128];
        let len = emit_tcp_frame(&mut buf, &endpoints(), tcp_flags::ACK, 1, b"payload").unwrap();
        for cut in 0..=len {
            let _ = FiveTuple::parse(&buf[..cut]);
            let _ = UdpDatagram::parse(&buf[..cut]);
        }
        let mut state = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            let mut f = buf;
            for _ in 0..3 {
                state = crate::hash::mix64(state);
                f[(state % len as u64) as usize] = (state >> 32) as u8;
            }
            let cut = (state >> 40) as usize % (len + 1);
            let _ = FiveTuple::parse(&f[..cut]);
            let _ = UdpDatagram::parse(&f[..cut]);
            let _ = rewrite_destination(&mut f[..cut], MacAddr::default(), Ipv4Addr::LOCALHOST);
        }
    }
}
