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

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
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
    f[0..6].copy_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x00, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
    f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    // IPv4.
    let ip_len = (len - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64; // TTL
    f[23] = 17; // UDP
    f[26..30].copy_from_slice(&[10, flow_b[1], flow_b[2], flow_b[3]]);
    f[30..34].copy_from_slice(&[10, 255, 0, 1]);
    let csum = ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&csum.to_be_bytes());
    // UDP.
    let sport = 1024 + (flow % 60000) as u16;
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
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

fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_frames_carry_their_length() {
        for len in [42, 60, 61, 127, 1514] {
            let f = udp_frame(len, 5);
            assert_eq!(f.len(), len);
            assert_eq!(frame_len(&f), Some(len));
            assert_eq!(ipv4_checksum(&f[14..34]), 0, "checksum verifies");
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
