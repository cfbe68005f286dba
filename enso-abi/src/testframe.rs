//! Self-checking test frames: what the built-in traffic generator sends and
//! verifies when the frames come back, and what tests and the packet generator
//! use to build traffic.
//!
//! Every frame is a function of `(kind, seq, flow, len)`, so a receiver can
//! rebuild the expected bytes and compare them all. The payload starts with
//! the magic `EGEN`, the 64-bit sequence number, the flow number and one
//! *echo byte*, which an echo server increments; the rest is a pattern derived
//! from the flow and the length.

use netview::ethernet::{EthernetFrame, MacAddr};
use netview::ipv4::{self, Ipv4Packet};
use netview::udp::UdpPacket;

use crate::wire::{self, FiveTuple};

/// Magic at the start of every test payload.
pub const MAGIC: [u8; 4] = *b"EGEN";
/// Destination UDP port of flow 0; flow `f` uses `DST_PORT + f` (mod 2^16).
pub const DST_PORT: u16 = 5000;
/// Destination IPv4 address of every test frame (10.1.0.1).
pub const DST_IP: u32 = 0x0a01_0001;
/// EtherType of the opaque (non-IP) test frames.
pub const RAW_ETHERTYPE: u16 = 0x88B6;

/// The three frame shapes the generator can make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// UDP over IPv4.
    Ipv4Udp,
    /// UDP over IPv6.
    Ipv6Udp,
    /// A non-IP frame whose length no header states.
    Raw,
}

impl FrameKind {
    /// Offset of the test payload.
    pub const fn payload_offset(self) -> usize {
        match self {
            FrameKind::Ipv4Udp => 14 + 20 + 8,
            FrameKind::Ipv6Udp => 14 + 40 + 8,
            FrameKind::Raw => 14,
        }
    }
    /// Smallest frame of this kind (the payload needs 17 bytes; Ethernet 60).
    pub const fn min_len(self) -> usize {
        let n = self.payload_offset() + 17;
        if n < 60 {
            60
        } else {
            n
        }
    }
    /// Offset of the echo byte.
    pub const fn echo_offset(self) -> usize {
        self.payload_offset() + 16
    }
}

/// Why a received frame is not the test frame it claims to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Not one of the generator's test frames.
    #[error("not a test frame")]
    Foreign,
    /// A flow number the generator does not use.
    #[error("flow {0} out of range")]
    BadFlow(u32),
    /// Bytes that differ from what was sent.
    #[error("bytes differ from the frame that was sent (first at offset {0})")]
    Corrupt(usize),
}

/// A verified test frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    /// Its sequence number.
    pub seq: u64,
    /// Its flow.
    pub flow: u32,
    /// Its kind.
    pub kind: FrameKind,
}

/// Builder and checker of test frames for `flows` flows.
#[derive(Clone, Debug)]
pub struct TestFrames {
    flows: u32,
    stream: u8,
}

impl TestFrames {
    /// `stream` distinguishes generators (it is in the source MAC).
    pub fn new(flows: u32, stream: u8) -> Self {
        Self {
            flows: flows.max(1),
            stream,
        }
    }

    /// Flows the frames are spread over.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// The 5-tuple of an IPv4 test frame of flow `flow`.
    pub fn flow_tuple(flow: u32) -> FiveTuple {
        FiveTuple {
            src_ip: 0x0a00_0000 | (flow & 0x00ff_ffff),
            dst_ip: DST_IP,
            src_port: 1024u16.wrapping_add(flow as u16),
            dst_port: DST_PORT.wrapping_add(flow as u16),
            protocol: wire::PROTO_UDP,
        }
    }

    /// Writes test frame `(kind, seq, flow, len)` into `out` and returns its
    /// length, which is `len` clamped to `[kind.min_len(), MAX_FRAME]`.
    pub fn build(&self, kind: FrameKind, seq: u64, flow: u32, len: usize, out: &mut [u8]) -> usize {
        let len = len.clamp(kind.min_len(), wire::MAX_FRAME);
        let f = &mut out[..len];
        let mut eth = EthernetFrame::new_unchecked(&mut *f);
        eth.set_dst_addr(MacAddr([0x02, 0, 0, 0, 0, 0x01]));
        eth.set_src_addr(MacAddr([0x02, 0, 0, 0, self.stream, 0x02]));
        let t = Self::flow_tuple(flow);
        match kind {
            FrameKind::Ipv4Udp => {
                eth.set_ethertype(wire::ETHERTYPE_IPV4);
                let hdr = &mut f[14..34];
                // Type of service, identification and flags 0: the
                // timestamp goes in identification and flags.
                hdr.fill(0);
                let mut ip = Ipv4Packet::new_unchecked(hdr);
                ip.set_version_and_header_len(ipv4::MIN_HEADER_LEN);
                ip.set_total_len((len - 14) as u16);
                ip.set_ttl(64);
                ip.set_protocol(wire::PROTO_UDP);
                ip.set_src_addr(t.src_ip.into());
                ip.set_dst_addr(t.dst_ip.into());
                ip.fill_checksum();
                udp(&mut f[34..42], &t, len - 34);
            }
            FrameKind::Ipv6Udp => {
                eth.set_ethertype(wire::ETHERTYPE_IPV6);
                let ip = &mut f[14..54];
                ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
                ip[4..6].copy_from_slice(&((len - 54) as u16).to_be_bytes());
                ip[6] = wire::PROTO_UDP;
                ip[7] = 64;
                ip[8..24].fill(0);
                ip[8..10].copy_from_slice(&[0xfd, 0]);
                ip[20..24].copy_from_slice(&t.src_ip.to_be_bytes());
                ip[24..40].fill(0);
                ip[24..26].copy_from_slice(&[0xfd, 0]);
                ip[36..40].copy_from_slice(&t.dst_ip.to_be_bytes());
                udp(&mut f[54..62], &t, len - 54);
            }
            FrameKind::Raw => eth.set_ethertype(RAW_ETHERTYPE),
        }
        let p = kind.payload_offset();
        f[p..p + 4].copy_from_slice(&MAGIC);
        f[p + 4..p + 12].copy_from_slice(&seq.to_le_bytes());
        f[p + 12..p + 16].copy_from_slice(&flow.to_le_bytes());
        f[p + 16] = seq as u8;
        // The pattern depends on flow and length only, so a sender can keep one
        // template per (kind, length, flow) and patch the sequence number.
        let base = (flow as u8).wrapping_mul(31).wrapping_add(len as u8);
        for (i, b) in f[p + 17..].iter_mut().enumerate() {
            *b = base.wrapping_add(i as u8);
        }
        len
    }

    /// Reads kind, sequence number and flow without checking the rest.
    #[inline]
    pub fn peek(frame: &[u8]) -> Option<Verified> {
        let ty = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
        let kind = match ty {
            wire::ETHERTYPE_IPV4 => FrameKind::Ipv4Udp,
            wire::ETHERTYPE_IPV6 => FrameKind::Ipv6Udp,
            RAW_ETHERTYPE => FrameKind::Raw,
            _ => return None,
        };
        let p = kind.payload_offset();
        let pay = frame.get(p..p + 17)?;
        if pay[0..4] != MAGIC {
            return None;
        }
        let seq = u64::from_le_bytes(pay[4..12].try_into().ok()?);
        let flow = u32::from_le_bytes(pay[12..16].try_into().ok()?);
        Some(Verified { seq, flow, kind })
    }

    /// Checks every byte of `frame` against the frame that was sent, with the
    /// echo byte incremented by `echo_inc`. Bytes in `skip` (a timestamp
    /// field the NIC rewrites) are not compared. `scratch` must hold
    /// [`wire::MAX_FRAME`] bytes.
    pub fn verify(
        &self,
        frame: &[u8],
        echo_inc: u8,
        skip: Option<std::ops::Range<usize>>,
        scratch: &mut [u8],
    ) -> Result<Verified, VerifyError> {
        let v = Self::peek(frame).ok_or(VerifyError::Foreign)?;
        if v.flow >= self.flows {
            return Err(VerifyError::BadFlow(v.flow));
        }
        let n = self.build(v.kind, v.seq, v.flow, frame.len(), scratch);
        Self::compare(frame, &mut scratch[..n], v.kind, echo_inc, skip)?;
        Ok(v)
    }

    /// Compares a received `frame` with `expected`, the whole test frame of
    /// kind `kind` that was sent, as [`TestFrames::build`] made it (or a
    /// frame built from it): equal but for the echo byte, incremented by
    /// `echo_inc`, and the bytes in `skip`, which are not compared.
    /// `expected` is changed to what `frame` should be. The error gives the
    /// first byte that differs (the shorter length if the lengths do).
    #[inline]
    pub fn compare(
        frame: &[u8],
        expected: &mut [u8],
        kind: FrameKind,
        echo_inc: u8,
        skip: Option<std::ops::Range<usize>>,
    ) -> Result<(), VerifyError> {
        let n = expected.len();
        if n != frame.len() {
            return Err(VerifyError::Corrupt(n.min(frame.len())));
        }
        let e = kind.echo_offset();
        expected[e] = expected[e].wrapping_add(echo_inc);
        if let Some(r) = skip {
            let r = r.start.min(n)..r.end.min(n);
            expected[r.clone()].copy_from_slice(&frame[r]);
        }
        if frame != expected {
            let at = frame
                .iter()
                .zip(expected.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(VerifyError::Corrupt(at));
        }
        Ok(())
    }
}

fn udp(h: &mut [u8], t: &FiveTuple, len: usize) {
    let mut udp = UdpPacket::new_unchecked(h);
    udp.set_src_port(t.src_port);
    udp.set_dst_port(t.dst_port);
    udp.set_len(len as u16);
    udp.set_checksum(0); // none (allowed for IPv4; tests only for IPv6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_then_verify_detects_any_change() {
        let tf = TestFrames::new(8, 3);
        let mut f = [0u8; 1536];
        let mut s = [0u8; 1536];
        for kind in [FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw] {
            let n = tf.build(kind, 123_456, 5, 300, &mut f);
            assert_eq!(tf.verify(&f[..n], 0, None, &mut s).unwrap().seq, 123_456);
            f[kind.echo_offset()] = f[kind.echo_offset()].wrapping_add(1);
            assert!(tf.verify(&f[..n], 0, None, &mut s).is_err());
            assert_eq!(tf.verify(&f[..n], 1, None, &mut s).unwrap().flow, 5);
            f[n - 1] ^= 0x40;
            assert_eq!(
                tf.verify(&f[..n], 1, None, &mut s),
                Err(VerifyError::Corrupt(n - 1))
            );
        }
        let n = tf.build(FrameKind::Ipv4Udp, 1, 9, 64, &mut f);
        assert_eq!(
            tf.verify(&f[..n], 0, None, &mut s),
            Err(VerifyError::BadFlow(9))
        );
    }

    #[test]
    fn lengths_are_clamped() {
        let tf = TestFrames::new(1, 0);
        let mut f = [0u8; 1536];
        assert_eq!(tf.build(FrameKind::Ipv4Udp, 0, 0, 10, &mut f), 60);
        assert_eq!(tf.build(FrameKind::Ipv6Udp, 0, 0, 64, &mut f), 79);
        assert_eq!(tf.build(FrameKind::Raw, 0, 0, 5000, &mut f), 1536);
    }
}
