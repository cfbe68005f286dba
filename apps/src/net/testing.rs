//! Frames for the tests of this module, built byte by byte as a capture
//! shows them, with checksums from a plain 16-bit reference sum (not the
//! module's own code).

#![allow(clippy::too_many_arguments)]

use std::net::{Ipv4Addr, Ipv6Addr};

use super::ethernet::MacAddr;

/// The MAC of the port under test.
pub(crate) const OUR_MAC: MacAddr = MacAddr([0x02, 0x45, 0xa1, 0xb2, 0xc3, 0x00]);
/// The peer's MAC (a kernel's veth end).
pub(crate) const PEER_MAC: MacAddr = MacAddr([0x5a, 0x11, 0x22, 0x33, 0x44, 0x55]);

/// The Internet checksum of `data`, word by word (0 over data that
/// carries a right checksum).
pub(crate) fn ref_checksum(data: &[u8]) -> u16 {
    ref_fold(ref_sum(data))
}

fn ref_sum(data: &[u8]) -> u64 {
    let mut s = 0u64;
    for (i, b) in data.iter().enumerate() {
        s += if i % 2 == 0 {
            u64::from(*b) << 8
        } else {
            u64::from(*b)
        };
    }
    s
}

fn ref_fold(mut s: u64) -> u16 {
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

/// The IPv6 upper-layer checksum of `data` (RFC 8200 section 8.1).
pub(crate) fn ref_checksum6(src: &Ipv6Addr, dst: &Ipv6Addr, nh: u8, data: &[u8]) -> u16 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(data.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, nh]);
    ref_fold(ref_sum(&pseudo) + ref_sum(data))
}

/// The IPv4 UDP checksum of `data` (RFC 768).
pub(crate) fn ref_checksum4(src: Ipv4Addr, dst: Ipv4Addr, data: &[u8]) -> u16 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&(data.len() as u16).to_be_bytes());
    ref_fold(ref_sum(&pseudo) + ref_sum(data))
}

/// One's-complement addition (what a checksum field does when a word it
/// covers goes down by `delta`).
pub(crate) fn ones_add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xFFFF) + (s >> 16)) as u16
}

fn ethernet(dst: MacAddr, src: MacAddr, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(1536);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn ipv4(f: &mut Vec<u8>, src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload_len: usize) {
    let at = f.len();
    let total = (20 + payload_len) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x9a, 0xbc, 0x40, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let c = ref_checksum(&f[at..]);
    f[at + 10..at + 12].copy_from_slice(&c.to_be_bytes());
}

fn ipv6(f: &mut Vec<u8>, src: &Ipv6Addr, dst: &Ipv6Addr, nh: u8, hops: u8, len: usize) {
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(len as u16).to_be_bytes());
    f.extend_from_slice(&[nh, hops]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
}

/// Pads a frame to the 60-byte Ethernet minimum, as a NIC does.
fn pad(mut f: Vec<u8>) -> Vec<u8> {
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// An ICMP message of type `t` (echo: identifier, sequence, data).
pub(crate) fn icmp4_frame(
    src_mac: MacAddr,
    dst_mac: MacAddr,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    t: u8,
    ident: u16,
    seq: u16,
    data: &[u8],
) -> Vec<u8> {
    let mut f = ethernet(dst_mac, src_mac, 0x0800);
    ipv4(&mut f, src, dst, 1, 8 + data.len());
    let at = f.len();
    f.extend_from_slice(&[t, 0, 0, 0]);
    f.extend_from_slice(&ident.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(data);
    let c = ref_checksum(&f[at..]);
    f[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
    pad(f)
}

/// An ICMPv6 message of type `t` with identifier and sequence (or the
/// first word of other types) and data.
pub(crate) fn icmp6_frame(
    src_mac: MacAddr,
    dst_mac: MacAddr,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hops: u8,
    t: u8,
    ident: u16,
    seq: u16,
    data: &[u8],
) -> Vec<u8> {
    let mut f = ethernet(dst_mac, src_mac, 0x86dd);
    ipv6(&mut f, &src, &dst, 58, hops, 8 + data.len());
    f.extend_from_slice(&[t, 0, 0, 0]);
    f.extend_from_slice(&ident.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(data);
    fix_icmp6(&mut f);
    f
}

/// Sets the payload length and the ICMPv6 checksum of a frame built here
/// after bytes were added at its end.
pub(crate) fn fix_icmp6(f: &mut [u8]) {
    let len = f.len() - 54;
    f[18..20].copy_from_slice(&(len as u16).to_be_bytes());
    f[56..58].fill(0);
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&f[22..38]).unwrap());
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&f[38..54]).unwrap());
    let c = ref_checksum6(&src, &dst, 58, &f[54..]);
    f[56..58].copy_from_slice(&c.to_be_bytes());
}

/// A neighbour solicitation for `target` from `src` (Linux's: hop limit
/// 255, a source link-layer address option unless `sll` is `None`), sent
/// to the multicast MAC of `dst` if it is multicast, else to [`OUR_MAC`].
pub(crate) fn solicitation(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
    sll: Option<MacAddr>,
) -> Vec<u8> {
    let d = dst.octets();
    let dst_mac = if dst.is_multicast() {
        MacAddr([0x33, 0x33, d[12], d[13], d[14], d[15]])
    } else {
        OUR_MAC
    };
    let mut data = target.octets().to_vec();
    if let Some(m) = sll {
        data.extend_from_slice(&[1, 1]);
        data.extend_from_slice(&m.0);
    }
    icmp6_frame(PEER_MAC, dst_mac, src, dst, 255, 135, 0, 0, &data)
}

/// An IPv4 UDP datagram (checksum computed, or 0 if `checksum` is false).
pub(crate) fn udp4_frame(
    src_mac: MacAddr,
    dst_mac: MacAddr,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    payload: &[u8],
    checksum: bool,
) -> Vec<u8> {
    let mut f = ethernet(dst_mac, src_mac, 0x0800);
    ipv4(&mut f, src, dst, 17, 8 + payload.len());
    let at = f.len();
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    if checksum {
        let c = ref_checksum4(src, dst, &f[at..]);
        f[at + 6..at + 8].copy_from_slice(&(if c == 0 { 0xFFFF } else { c }).to_be_bytes());
    }
    pad(f)
}

/// An IPv6 UDP datagram, checksum computed.
pub(crate) fn udp6_frame(
    src_mac: MacAddr,
    dst_mac: MacAddr,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = ethernet(dst_mac, src_mac, 0x86dd);
    ipv6(&mut f, &src, &dst, 17, 64, 8 + payload.len());
    let at = f.len();
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    let c = ref_checksum6(&src, &dst, 17, &f[at..]);
    f[at + 6..at + 8].copy_from_slice(&(if c == 0 { 0xFFFF } else { c }).to_be_bytes());
    f
}
