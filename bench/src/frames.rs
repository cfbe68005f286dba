//! Template frames for the datapaths, and where a frame ends.
//!
//! Sizes follow the paper's convention: a "64 B packet" is a 64-byte
//! Ethernet frame on the wire *including* its 4-byte FCS. Memory (a pipe, a
//! ring) holds the frame without the FCS, so a 64 B packet is 60 bytes there
//! and fills one 64 B flit; a 1518 B packet is 1514 bytes, 24 flits.
//!
//! A frame's length is found from the frame itself, as the Ensō library does:
//! 14 + the IPv4 total length, or 14 + 40 + the IPv6 payload length. Other
//! EtherTypes have no length in the header and are not carried by the
//! reference datapath.

use std::net::Ipv4Addr;

use netview::ethernet::{EthernetFrame, MacAddr, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use netview::ipv4::{self, Ipv4Packet};
use netview::udp::UdpPacket;

/// Bytes in a flit, the unit of an Ensō pipe: every frame starts on one.
pub const FLIT: usize = 64;
/// Bytes of Ethernet frame check sequence, counted on the wire, absent in memory.
pub const FCS_LEN: usize = 4;
/// Preamble, start delimiter and inter-frame gap: wire bytes between frames.
pub const WIRE_GAP: usize = 20;
/// Smallest Ethernet frame on the wire (with FCS).
pub const MIN_WIRE_SIZE: usize = 64;
/// Largest standard Ethernet frame on the wire (with FCS).
pub const MAX_WIRE_SIZE: usize = 1518;
/// Ethernet (14) + IPv4 (20) + UDP (8) header bytes in [`udp_frame`]s.
pub const UDP_HEADERS: usize = 42;
/// Where [`udp_frame`]s carry their 8-byte sequence number: the first
/// payload byte.
pub const SEQ_OFFSET: usize = UDP_HEADERS;

/// Bytes of a frame that must be present to find its length.
pub const HEADER_PEEK: usize = 20;

/// Checks a packet size on the wire (with FCS): within
/// [`MIN_WIRE_SIZE`]..=[`MAX_WIRE_SIZE`].
pub fn check_wire_size(wire_size: usize) -> Result<(), String> {
    if (MIN_WIRE_SIZE..=MAX_WIRE_SIZE).contains(&wire_size) {
        Ok(())
    } else {
        Err(format!(
            "packet size {wire_size} outside {MIN_WIRE_SIZE}..={MAX_WIRE_SIZE} (wire size with FCS)"
        ))
    }
}

/// Bytes a frame of `len` bytes occupies in a pipe: whole flits.
#[inline]
pub const fn slot_len(len: usize) -> usize {
    len.div_ceil(FLIT) * FLIT
}

/// In-memory frame length (no FCS) of a packet of `wire_size` bytes.
#[inline]
pub const fn frame_len_for_wire_size(wire_size: usize) -> usize {
    wire_size - FCS_LEN
}

/// The frame's length according to its own header: 14 + IPv4 total length,
/// or 54 + IPv6 payload length. `None` for other EtherTypes or if fewer than
/// [`HEADER_PEEK`] bytes are given.
#[inline]
pub fn frame_len(header: &[u8]) -> Option<usize> {
    if header.len() < HEADER_PEEK {
        return None;
    }
    match u16::from_be_bytes([header[12], header[13]]) {
        ETHERTYPE_IPV4 => Some(14 + usize::from(u16::from_be_bytes([header[16], header[17]]))),
        ETHERTYPE_IPV6 => Some(54 + usize::from(u16::from_be_bytes([header[18], header[19]]))),
        _ => None,
    }
}

/// An Ethernet/IPv4/UDP frame of exactly `len` bytes (no FCS; at least 42),
/// with addresses and ports derived from `flow`, a valid IPv4 header
/// checksum, no UDP checksum, and a payload of a repeating byte pattern.
pub fn udp_frame(len: usize, flow: u32) -> Vec<u8> {
    assert!(
        (UDP_HEADERS..=14 + usize::from(u16::MAX)).contains(&len),
        "frame length {len} out of range"
    );
    let mut f = vec![0u8; len];
    let flow_b = flow.to_be_bytes();
    // Ethernet: locally administered unicast addresses.
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    eth.set_dst_addr(MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x02]));
    eth.set_src_addr(MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]));
    eth.set_ethertype(ETHERTYPE_IPV4);
    // IPv4: identification, flags and type of service 0.
    let ip_len = (len - 14) as u16;
    let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
    ip.set_version_and_header_len(ipv4::MIN_HEADER_LEN);
    ip.set_total_len(ip_len);
    ip.set_ttl(64);
    ip.set_protocol(ipv4::PROTO_UDP);
    ip.set_src_addr(Ipv4Addr::new(10, flow_b[1], flow_b[2], flow_b[3]));
    ip.set_dst_addr(Ipv4Addr::new(10, 255, 0, 1));
    ip.fill_checksum();
    // UDP, without checksum.
    let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
    udp.set_src_port(1024 + (flow % 60000) as u16);
    udp.set_dst_port(9);
    udp.set_len(ip_len - 20);
    for (i, b) in f[UDP_HEADERS..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7).wrapping_add(flow as u8);
    }
    f
}

/// `flows` UDP frames of one wire size (with FCS, 64..=1518), one per flow.
pub fn udp_templates(wire_size: usize, flows: u32) -> Vec<Vec<u8>> {
    (0..flows.max(1))
        .map(|flow| udp_frame(frame_len_for_wire_size(wire_size), flow))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use netview::checksum::{fold, sum};

    #[test]
    fn udp_frames_carry_their_length() {
        for len in [42, 60, 61, 127, 1514] {
            let f = udp_frame(len, 5);
            assert_eq!(f.len(), len);
            assert_eq!(frame_len(&f), Some(len));
            assert_eq!(fold(sum(0, &f[14..34])), 0, "checksum verifies");
        }
        assert_eq!(slot_len(60), 64);
        assert_eq!(slot_len(64), 64);
        assert_eq!(slot_len(65), 128);
        assert_eq!(slot_len(1514), 1536);
    }

    #[test]
    fn wire_sizes_are_checked() {
        assert!(check_wire_size(MIN_WIRE_SIZE).is_ok());
        assert!(check_wire_size(MAX_WIRE_SIZE).is_ok());
        for s in [0, 59, 63, 1519, usize::MAX] {
            assert_eq!(
                check_wire_size(s).unwrap_err(),
                format!("packet size {s} outside 64..=1518 (wire size with FCS)")
            );
        }
    }

    #[test]
    fn other_headers() {
        let mut v6 = vec![0u8; 100];
        v6[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        v6[18..20].copy_from_slice(&46u16.to_be_bytes());
        assert_eq!(frame_len(&v6), Some(100));
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(frame_len(&arp), None);
        assert_eq!(frame_len(&v6[..19]), None);
    }
}
