//! Answering a UDP datagram the way a UDP echo server does: the same
//! payload back to its sender.

use super::ethernet::{self, EthernetFrame, MacAddr};
use super::ipv4::{Ipv4Packet, PROTO_UDP};
use super::ipv6::{self, Ipv6Packet, NEXT_HEADER_UDP};
use super::udp::UdpPacket;
use super::ParseError;

/// Why a frame was not reflected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ReflectError {
    /// Not an unfragmented UDP datagram over IPv4 or IPv6 (without
    /// extension headers), or its headers are inconsistent.
    #[error("not a UDP datagram: {0}")]
    NotUdp(ParseError),
    /// Its UDP checksum (or IPv4 header checksum) is wrong, or missing
    /// over IPv6: a UDP socket would not have received it.
    #[error("bad checksum")]
    BadChecksum,
}

/// Turns the UDP datagram in `frame` into its echo in place: Ethernet
/// destination the sender's MAC and source `mac`, IP and UDP addresses
/// swapped, hop limit (TTL) 64, payload unchanged. Checksums: the IPv4
/// header one is recomputed (the TTL changed); the UDP one is verified
/// first and then stays right by itself, since swapping addresses and
/// ports does not change the one's-complement sum it covers; a datagram
/// that came without one (IPv4 only) gets one computed. Anything else is
/// left untouched and the reason returned.
pub fn reflect_udp(frame: &mut [u8], mac: MacAddr) -> Result<(), ReflectError> {
    let eth = EthernetFrame::new_checked(&*frame).map_err(ReflectError::NotUdp)?;
    let not_udp = ReflectError::NotUdp(ParseError::UnsupportedProtocol);
    match eth.ethertype() {
        ethernet::ETHERTYPE_IPV4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).map_err(ReflectError::NotUdp)?;
            if ip.is_fragment() {
                return Err(ReflectError::NotUdp(ParseError::Fragment));
            }
            if ip.protocol() != PROTO_UDP {
                return Err(not_udp);
            }
            let udp = UdpPacket::new_checked(ip.payload()).map_err(ReflectError::NotUdp)?;
            if !ip.verify_checksum() || !udp.verify_checksum(ip.src_addr(), ip.dst_addr()) {
                return Err(ReflectError::BadChecksum);
            }
            let had_checksum = udp.checksum() != 0;
            swap_ethernet(frame, mac);
            let mut ip = Ipv4Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]);
            ip.swap_addrs();
            ip.set_ttl(64);
            ip.fill_checksum();
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
            udp.swap_ports();
            if !had_checksum {
                udp.fill_checksum(src, dst);
            }
        }
        ethernet::ETHERTYPE_IPV6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).map_err(ReflectError::NotUdp)?;
            if ip.next_header() != NEXT_HEADER_UDP {
                return Err(not_udp);
            }
            let udp = UdpPacket::new_checked(ip.payload()).map_err(ReflectError::NotUdp)?;
            if !udp.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()) {
                return Err(ReflectError::BadChecksum);
            }
            swap_ethernet(frame, mac);
            let mut ip = Ipv6Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]);
            ip.swap_addrs();
            ip.set_hop_limit(64);
            UdpPacket::new_unchecked(&mut frame[ethernet::HEADER_LEN + ipv6::HEADER_LEN..])
                .swap_ports();
        }
        _ => return Err(ReflectError::NotUdp(ParseError::NotIpv4)),
    }
    Ok(())
}

fn swap_ethernet(frame: &mut [u8], mac: MacAddr) {
    let mut eth = EthernetFrame::new_unchecked(frame);
    let sender = eth.src_addr();
    eth.set_dst_addr(sender);
    eth.set_src_addr(mac);
}
