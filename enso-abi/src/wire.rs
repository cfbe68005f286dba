//! Frames on the wire and in pipes: how a frame's length is found from its
//! own bytes, and the marker flit that delimits frames whose headers carry no
//! length.
//!
//! An Ensō pipe holds frames back to back, each starting on a 64 B flit
//! boundary, with no per-frame metadata. Software must therefore find each
//! frame's length from the frame itself. The real library only understands
//! IPv4 (total length + 14) and reads garbage on anything else. Here the
//! length comes from the first header that states it:
//!
//! | frame (after up to two 802.1Q/802.1ad tags) | length                      |
//! |---------------------------------------------|-----------------------------|
//! | IPv4 (0x0800)                               | L2 + total length           |
//! | IPv6 (0x86DD), payload length != 0          | L2 + 40 + payload length    |
//! | ARP (0x0806)                                | L2 + 8 + 2·hlen + 2·plen    |
//! | 802.3 length field (EtherType <= 1500)      | L2 + that length            |
//! | anything else ("opaque")                    | from a marker flit          |
//!
//! Bytes after the stated length (Ethernet padding of short frames, trailers)
//! are not part of the frame; the NIC strips them when it writes a pipe.
//!
//! An opaque frame is preceded in the pipe by one *marker flit*: 64 bytes
//! whose EtherType field (offset 12) is 0x88B5 (IEEE 802 "local
//! experimental"), followed by the magic `ENSO` and the frame's length. A real
//! frame with EtherType 0x88B5 is itself opaque, so it also gets a marker and
//! there is no ambiguity. The same rule delimits the TX byte stream software
//! hands to the NIC, so zero-copy echo of any frame works.

/// Bytes in a flit, the unit of every pipe address.
pub const FLIT: usize = 64;
/// Largest frame (without FCS) the NIC accepts: 24 flits.
pub const MAX_FRAME: usize = 1536;
/// Smallest frame: an Ethernet header.
pub const MIN_FRAME: usize = 14;
/// EtherType of a marker flit.
pub const MARKER_ETHERTYPE: u16 = 0x88B5;
/// Magic that follows the marker EtherType.
pub const MARKER_MAGIC: [u8; 4] = *b"ENSO";

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
pub const ETHERTYPE_ARP: u16 = 0x0806;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const ETHERTYPE_QINQ: u16 = 0x88A8;

/// Why a frame could not be delimited (or written into a stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the headers that state the length.
    #[error("frame too short to hold its headers")]
    Truncated,
    /// The stated length is smaller than the headers it must contain.
    #[error("stated length is inconsistent with the headers")]
    BadLength,
    /// Larger than [`MAX_FRAME`].
    #[error("frame larger than {MAX_FRAME} bytes")]
    Oversize,
    /// A marker flit with a bad magic or length.
    #[error("corrupt marker flit")]
    BadMarker,
    /// The buffer to write the frame into is shorter than the bytes it takes
    /// in a stream.
    #[error("buffer shorter than the frame's stream length")]
    NoRoom,
}

// Every frame's delimiting returns a `Result<_, FrameError>`: a variant with
// a payload would widen all of them (it cost the echo datapath ~7
// instructions per packet), so the error stays one byte.
const _: () = assert!(std::mem::size_of::<FrameError>() == 1);

/// Flits occupied by `len` bytes.
#[inline]
pub const fn flits(len: usize) -> usize {
    len.div_ceil(FLIT)
}

// Delimiting reads its fields at fixed offsets, not through netview's
// header views: it runs once per frame in the engine, and its shortcuts
// ([`delimit`], [`place`]) make one bounds check for every byte they read
// where a stack of views checks each header it wraps. A view's
// `new_checked` also asks for more than delimiting needs (a whole header,
// the stated length within the buffer), which a frame cut at the end of a
// TX notification does not have.
#[inline]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// L2 header length and the EtherType behind up to two VLAN tags.
#[inline]
fn l2(frame: &[u8]) -> Option<(usize, u16)> {
    let mut off = 12;
    let mut ty = be16(frame, off)?;
    let mut tags = 0;
    while (ty == ETHERTYPE_VLAN || ty == ETHERTYPE_QINQ) && tags < 2 {
        off += 4;
        ty = be16(frame, off)?;
        tags += 1;
    }
    Some((off + 2, ty))
}

/// The frame length stated by the frame's own headers.
///
/// `Ok(None)` means the frame is opaque (its headers state no length).
/// [`FrameError::Oversize`] if they state more than [`MAX_FRAME`] bytes.
#[inline]
pub fn stated_len(frame: &[u8]) -> Result<Option<usize>, FrameError> {
    match stated_len_unbounded(frame)? {
        Some(len) if len > MAX_FRAME => Err(FrameError::Oversize),
        stated => Ok(stated),
    }
}

/// [`stated_len`] without its bound: what the headers say, up to 65535
/// bytes plus the headers around the length field (for messages that must
/// say what a frame claims).
#[inline]
pub fn stated_len_unbounded(frame: &[u8]) -> Result<Option<usize>, FrameError> {
    let (hl, ty) = l2(frame).ok_or(FrameError::Truncated)?;
    let len = match ty {
        ETHERTYPE_IPV4 => {
            let tot = be16(frame, hl + 2).ok_or(FrameError::Truncated)? as usize;
            if tot < 20 {
                return Err(FrameError::BadLength);
            }
            hl + tot
        }
        ETHERTYPE_IPV6 => {
            let pl = be16(frame, hl + 4).ok_or(FrameError::Truncated)? as usize;
            if pl == 0 {
                // Jumbogram or garbage: no usable length in the header.
                return Ok(None);
            }
            hl + 40 + pl
        }
        ETHERTYPE_ARP => {
            let hlen = *frame.get(hl + 4).ok_or(FrameError::Truncated)? as usize;
            let plen = *frame.get(hl + 5).ok_or(FrameError::Truncated)? as usize;
            hl + 8 + 2 * hlen + 2 * plen
        }
        MARKER_ETHERTYPE => return Ok(None),
        t if t <= 1500 => hl + t as usize,
        _ => return Ok(None),
    };
    Ok(Some(len))
}

/// Where the next frame of a pipe or TX stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delimited {
    /// Offset of the frame from the current position (0, or [`FLIT`] after a
    /// marker flit).
    pub start: usize,
    /// Frame length in bytes.
    pub len: usize,
    /// Flits consumed in all, marker included.
    pub flits: usize,
}

/// Finds the frame that starts at `buf[0]` in a pipe or TX stream.
///
/// `buf` may be longer than the frame (the rest of the batch) or shorter
/// (a frame cut at the end of a TX notification); only the headers need to be
/// present. The returned frame may extend past `buf`; callers check that.
#[inline]
pub fn delimit(buf: &[u8]) -> Result<Delimited, FrameError> {
    if buf.len() < MIN_FRAME {
        return Err(FrameError::Truncated);
    }
    // The common case first, with the checks of the general path below
    // (which gives the error when one fails): an untagged IPv4 frame.
    if buf.len() >= 18 && buf[12] == 0x08 && buf[13] == 0x00 {
        let len = 14 + u16::from_be_bytes([buf[16], buf[17]]) as usize;
        if (MIN_FRAME.max(14 + 20)..=MAX_FRAME).contains(&len) {
            return Ok(Delimited {
                start: 0,
                len,
                flits: flits(len),
            });
        }
    }
    delimit_general(buf)
}

/// [`delimit`] without its shortcut for untagged IPv4.
fn delimit_general(buf: &[u8]) -> Result<Delimited, FrameError> {
    if buf.len() < MIN_FRAME {
        return Err(FrameError::Truncated);
    }
    if be16(buf, 12) == Some(MARKER_ETHERTYPE) {
        // A marker flit: magic, then the opaque frame's length.
        if buf.len() < 20 || buf[14..18] != MARKER_MAGIC {
            return Err(FrameError::BadMarker);
        }
        let len = be16(buf, 18).ok_or(FrameError::Truncated)? as usize;
        if !(MIN_FRAME..=MAX_FRAME).contains(&len) {
            return Err(FrameError::BadMarker);
        }
        return Ok(Delimited {
            start: FLIT,
            len,
            flits: 1 + flits(len),
        });
    }
    match stated_len(buf)? {
        Some(len) if len < MIN_FRAME => Err(FrameError::BadLength),
        Some(len) => Ok(Delimited {
            start: 0,
            len,
            flits: flits(len),
        }),
        None => Err(FrameError::BadMarker),
    }
}

/// How the NIC stores a frame that arrived from the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Bytes of the frame to store (its stated length, or all of it if opaque).
    pub len: usize,
    /// Whether a marker flit precedes it.
    pub marker: bool,
    /// Flits used in the pipe, marker included.
    pub flits: usize,
}

/// Decides how a received frame is stored in a pipe, or why it is dropped.
#[inline]
pub fn place(frame: &[u8]) -> Result<Placement, FrameError> {
    match ipv4_placement(frame) {
        Some(p) => Ok(p),
        None => place_general(frame),
    }
}

/// The placement of the usual frame, untagged IPv4 whose stated length is
/// usable, read at fixed offsets; `None` for anything else (errors
/// included), which [`place_general`] decides. It decides the same for the
/// frames this accepts (test `ipv4_shortcut_places_as_the_general_path`),
/// all of which hold a whole IPv4 header (34 bytes or more).
#[inline(always)]
fn ipv4_placement(frame: &[u8]) -> Option<Placement> {
    let h = frame.first_chunk::<18>()?;
    let tot = usize::from(u16::from_be_bytes([h[16], h[17]]));
    let len = 14 + tot; // after the 14-byte Ethernet header
    let usable = h[12] == 0x08
        && h[13] == 0x00
        && tot >= 20
        && (MIN_FRAME..=frame.len()).contains(&len)
        && frame.len() <= MAX_FRAME;
    usable.then(|| Placement {
        len,
        marker: false,
        flits: flits(len),
    })
}

/// [`place`] of any frame, its headers read layer by layer.
#[inline(never)]
fn place_general(frame: &[u8]) -> Result<Placement, FrameError> {
    if frame.len() > MAX_FRAME {
        return Err(FrameError::Oversize);
    }
    if frame.len() < MIN_FRAME {
        return Err(FrameError::Truncated);
    }
    match stated_len(frame)? {
        Some(len) if len > frame.len() => Err(FrameError::Truncated),
        Some(len) if len < MIN_FRAME => Err(FrameError::BadLength),
        Some(len) => Ok(Placement {
            len,
            marker: false,
            flits: flits(len),
        }),
        None => Ok(Placement {
            len: frame.len(),
            marker: true,
            flits: 1 + flits(frame.len()),
        }),
    }
}

/// Writes a marker flit for an opaque frame of `len` bytes into `flit`.
pub fn write_marker(flit: &mut [u8; FLIT], len: usize) {
    debug_assert!((MIN_FRAME..=MAX_FRAME).contains(&len));
    flit.fill(0);
    flit[12..14].copy_from_slice(&MARKER_ETHERTYPE.to_be_bytes());
    flit[14..18].copy_from_slice(&MARKER_MAGIC);
    flit[18..20].copy_from_slice(&(len as u16).to_be_bytes());
}

/// The fields the NIC steers on, taken from an IPv4 frame.
///
/// Every field is a number in the host's byte order, read from the frame's
/// big-endian (network order) bytes: address 10.1.0.1 is `0x0a01_0001`
/// (`u32::from(Ipv4Addr::new(10, 1, 0, 1))`), port 5000 is `5000`, not
/// `htonl`/`htons` of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// IPv4 source address, host byte order (`u32::from(Ipv4Addr)`).
    pub src_ip: u32,
    /// IPv4 destination address, host byte order.
    pub dst_ip: u32,
    /// TCP or UDP source port, host byte order.
    pub src_port: u16,
    /// TCP or UDP destination port, host byte order.
    pub dst_port: u16,
    /// IP protocol number ([`PROTO_TCP`] 6, [`PROTO_UDP`] 17); one byte, no
    /// byte order.
    pub protocol: u8,
}

pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// Parsed steering information of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SteerKey {
    /// IPv4; `syn` is set for a TCP segment with SYN and without ACK.
    Ipv4 { tuple: FiveTuple, syn: bool },
    /// Anything else: only a hash for fallback selection.
    Other { hash: u32 },
}

/// The steering key of an IPv4 packet whose IP header starts at `hl`.
#[inline]
fn ipv4_key(frame: &[u8], hl: usize) -> Option<SteerKey> {
    let ip = frame.get(hl..hl + 20)?;
    let ihl = (ip[0] & 0x0f) as usize * 4;
    let protocol = ip[9];
    let src_ip = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    let dst_ip = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    let l4 = hl + ihl.max(20);
    let (mut src_port, mut dst_port, mut syn) = (0, 0, false);
    if (protocol == PROTO_TCP || protocol == PROTO_UDP) && frag == 0 {
        if let Some(p) = frame.get(l4..l4 + 4) {
            src_port = u16::from_be_bytes([p[0], p[1]]);
            dst_port = u16::from_be_bytes([p[2], p[3]]);
        }
        if protocol == PROTO_TCP {
            if let Some(&flags) = frame.get(l4 + 13) {
                syn = flags & 0x12 == 0x02;
            }
        }
    }
    Some(SteerKey::Ipv4 {
        tuple: FiveTuple {
            src_ip,
            dst_ip,
            src_port,
            dst_port,
            protocol,
        },
        syn,
    })
}

/// Extracts the steering key of a frame (never fails: unknown frames hash
/// their first bytes).
#[inline]
pub fn steer_key(frame: &[u8]) -> SteerKey {
    if let Some((hl, ETHERTYPE_IPV4)) = l2(frame) {
        if let Some(k) = ipv4_key(frame, hl) {
            return k;
        }
    }
    let n = frame.len().min(54);
    let mut h = 0x9e37_79b9u32;
    for chunk in frame[..n].chunks(4) {
        let mut w = [0u8; 4];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u32::from_le_bytes(w))
            .wrapping_mul(0x85eb_ca6b)
            .rotate_left(13);
    }
    SteerKey::Other { hash: h }
}

/// Everything the NIC's receive path needs to know about a frame: where it
/// goes in a pipe, what it steers on, and its flow hash. Depends only on the
/// headers, so a sender of template frames can compute it once per template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classified {
    pub place: Placement,
    pub key: SteerKey,
    /// Flow hash for fallback selection ([`hash_tuple`] for IPv4).
    pub hash: u32,
}

/// [`classify`] plus the flow hash.
#[inline]
pub fn classify_full(frame: &[u8]) -> Result<Classified, FrameError> {
    let (place, key) = classify(frame)?;
    let hash = match &key {
        SteerKey::Ipv4 { tuple, .. } => hash_tuple(tuple),
        SteerKey::Other { hash } => *hash,
    };
    Ok(Classified { place, key, hash })
}

/// [`place`] and [`steer_key`] together, parsing an untagged IPv4 frame's
/// headers once (the NIC's per-frame path).
#[inline]
pub fn classify(frame: &[u8]) -> Result<(Placement, SteerKey), FrameError> {
    // Every frame the shortcut accepts has 34 bytes or more; saying so
    // first lets the header read below go unchecked.
    if frame.len() >= 34 {
        if let Some(p) = ipv4_placement(frame) {
            let key = ipv4_key(frame, 14).expect("34 bytes hold an IPv4 header");
            return Ok((p, key));
        }
    }
    Ok((place_general(frame)?, steer_key(frame)))
}

/// A cheap, well-mixed hash of a 5-tuple (for the flow table and fallback).
#[inline]
pub fn hash_tuple(t: &FiveTuple) -> u32 {
    let a = (t.src_ip as u64) << 32 | t.dst_ip as u64;
    let b = (t.src_port as u64) << 24 | (t.dst_port as u64) << 8 | t.protocol as u64;
    let mut x = a ^ b.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    (x ^ (x >> 32)) as u32
}

/// Internet checksum of an IPv4 header, computed as if its checksum field
/// were zero (`netview`'s, the one checksum of the workspace).
#[inline]
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    netview::checksum::ipv4_header_checksum(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trip_and_rejects_garbage() {
        let mut flit = [0u8; FLIT];
        write_marker(&mut flit, 999);
        let d = delimit(&flit).unwrap();
        assert_eq!((d.start, d.len, d.flits), (64, 999, 1 + 16));
        flit[15] = b'X';
        assert_eq!(delimit(&flit), Err(FrameError::BadMarker));
        let mut flit = [0u8; FLIT];
        write_marker(&mut flit, 100);
        flit[18..20].copy_from_slice(&5000u16.to_be_bytes());
        assert_eq!(delimit(&flit), Err(FrameError::BadMarker));
    }

    #[test]
    fn ipv4_shortcut_places_as_the_general_path() {
        // Mostly IPv4 frames of every length around the limits, with stated
        // lengths below, at and beyond what arrived; some with other types.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = [0u8; MAX_FRAME + 64];
        let mut shortcut = 0;
        for i in 0..200_000 {
            let r = next();
            let n = (r % (MAX_FRAME as u64 + 40)) as usize;
            let f = &mut buf[..n];
            if n >= 18 {
                f[12] = if i % 8 == 0 { r as u8 } else { 0x08 };
                f[13] = if i % 16 == 0 { (r >> 8) as u8 } else { 0x00 };
                let tot = match (r >> 16) % 4 {
                    0 => (r >> 24) as u16,
                    1 => (n as u16).saturating_sub(14),
                    2 => ((r >> 24) % 64) as u16,
                    _ => (n as u16).saturating_sub(14 + ((r >> 24) % 48) as u16),
                };
                f[16..18].copy_from_slice(&tot.to_be_bytes());
            }
            let (fast, general) = (place(f), place_general(f));
            assert_eq!(fast, general, "frame {i} of {n} bytes");
            shortcut += usize::from(general.is_ok_and(|p| !p.marker));
        }
        assert!(
            shortcut > 50_000,
            "{shortcut} frames placed without a marker"
        );
    }

    #[test]
    fn bad_frames_are_rejected_not_misread() {
        assert_eq!(place(&[0u8; 10]), Err(FrameError::Truncated));
        assert_eq!(place(&[0u8; 2000]), Err(FrameError::Oversize));
        // IPv4 claiming more bytes than arrived.
        let mut f = [0u8; 64];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[16..18].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(place(&f), Err(FrameError::Truncated));
        // ... or more than the largest frame: what it states is still known.
        f[16..18].copy_from_slice(&65535u16.to_be_bytes());
        assert_eq!(place(&f), Err(FrameError::Oversize));
        assert_eq!(stated_len(&f), Err(FrameError::Oversize));
        assert_eq!(stated_len_unbounded(&f), Ok(Some(14 + 65535)));
        // IPv4 total length below its own header.
        f[16..18].copy_from_slice(&4u16.to_be_bytes());
        assert_eq!(place(&f), Err(FrameError::BadLength));
        // Trailing padding is stripped.
        f[16..18].copy_from_slice(&28u16.to_be_bytes());
        assert_eq!(place(&f).unwrap().len, 42);
        // Never panics on arbitrary bytes.
        let mut x = 0x1234_5678u64;
        for _ in 0..20_000 {
            let mut b = [0u8; 80];
            for v in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *v = x as u8;
            }
            let n = (x % 81) as usize;
            let _ = place(&b[..n]);
            let _ = delimit(&b[..n]);
            let _ = steer_key(&b[..n]);
        }
    }

    #[test]
    fn delimit_shortcut_agrees_with_the_general_path() {
        let mut x = 0x9e37_79b9u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut shortcut_hits = 0;
        for _ in 0..50_000 {
            let mut b = [0u8; 64];
            for v in b.iter_mut() {
                *v = next() as u8;
            }
            // Mostly IPv4, with total lengths around every bound.
            if next() % 4 != 0 {
                b[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                let tot = (next() % 1600) as u16;
                b[16..18].copy_from_slice(&tot.to_be_bytes());
            }
            let n = (next() % 65) as usize;
            let (fast, general) = (delimit(&b[..n]), delimit_general(&b[..n]));
            assert_eq!(fast, general, "{:?}", &b[..n]);
            shortcut_hits += usize::from(n >= 18 && fast.is_ok() && b[12..14] == [8, 0]);
        }
        assert!(shortcut_hits > 10_000, "{shortcut_hits}");
    }

    #[test]
    fn ipv4_checksum_known_value() {
        // Header from RFC 1071 style example (checksum field zeroed).
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_checksum(&h), 0xb861);
    }
}
