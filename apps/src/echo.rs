//! The echo server of the paper's microbenchmarks: receive a frame,
//! increment one payload byte, send it back.
//!
//! The byte is the *echo byte* of the test payload that traffic generators
//! send (`enso_abi::testframe`: magic, sequence number, flow, echo byte), so
//! the generator can check that every frame came back exactly once and was
//! processed. Other frames are forwarded unchanged.
//!
//! [`Echo::reflecting`] makes it a UDP echo server instead, as a kernel
//! peer expects one: every UDP datagram (IPv4 or IPv6) goes back to its
//! sender with addresses and ports swapped, from the port's MAC, payload
//! unchanged and checksums valid ([`crate::net::reflect::reflect_udp`]);
//! other frames, and datagrams with a wrong checksum, are dropped and
//! counted.

use enso::app::{PacketHandler, Verdict};
use enso_abi::testframe::TestFrames;

use crate::net::ethernet::MacAddr;
use crate::net::reflect::{reflect_udp, ReflectError};

/// Echo server logic (one per core).
#[derive(Debug, Default, Clone)]
pub struct Echo {
    /// Frames whose echo byte was incremented.
    pub echoed: u64,
    /// Frames forwarded unchanged (not test frames).
    pub other: u64,
    /// UDP datagrams sent back to their sender (reflecting).
    pub reflected: u64,
    /// Frames not reflected: not UDP over IPv4/IPv6 (reflecting).
    pub not_udp: u64,
    /// UDP datagrams not reflected: wrong or, over IPv6, missing checksum
    /// (reflecting).
    pub bad_checksum: u64,
    /// The port's MAC, when reflecting.
    reflect: Option<MacAddr>,
}

impl Echo {
    /// A server that has echoed nothing yet, incrementing the echo byte of
    /// test frames.
    pub fn new() -> Self {
        Self::default()
    }

    /// A UDP echo server answering from `mac`, the port's MAC.
    pub fn reflecting(mac: MacAddr) -> Self {
        Echo {
            reflect: Some(mac),
            ..Self::default()
        }
    }

    /// Whether this server reflects UDP datagrams.
    pub fn is_reflecting(&self) -> bool {
        self.reflect.is_some()
    }
}

impl Echo {
    /// The reflecting server's work on one frame. Kept out of line: inlined
    /// into the driver's loop, its bulk cost the test-frame echo (the
    /// microbenchmarks' server) about 27 instructions a packet, measured
    /// with `bench cache`.
    #[inline(never)]
    fn reflect_one(&mut self, frame: &mut [u8], mac: MacAddr) -> Verdict {
        match reflect_udp(frame, mac) {
            Ok(()) => {
                self.reflected += 1;
                Verdict::Forward
            }
            Err(ReflectError::NotUdp(_)) => {
                self.not_udp += 1;
                Verdict::Drop
            }
            Err(ReflectError::BadChecksum) => {
                self.bad_checksum += 1;
                Verdict::Drop
            }
        }
    }
}

impl PacketHandler for Echo {
    #[inline]
    fn handle(&mut self, frame: &mut [u8]) -> Verdict {
        if let Some(mac) = self.reflect {
            return self.reflect_one(frame, mac);
        }
        echo_test_frame(frame, &mut self.echoed, &mut self.other);
        Verdict::Forward
    }
}

/// Increments the echo byte of a test frame (counted in `echoed`); other
/// frames are left as they are (counted in `other`).
#[inline]
fn echo_test_frame(frame: &mut [u8], echoed: &mut u64, other: &mut u64) {
    match TestFrames::peek(frame) {
        Some(v) => {
            let e = v.kind.echo_offset();
            frame[e] = frame[e].wrapping_add(1);
            *echoed += 1;
        }
        None => *other += 1,
    }
}

/// The microbenchmarks' echo server alone: [`Echo::new`]'s work, with no
/// reflecting mode, so every frame is forwarded and the driver's loop
/// knows it (a handler that may drop costs the driver run bookkeeping per
/// frame). The experiments use it; the `echo` binary uses [`Echo`].
#[derive(Debug, Default, Clone)]
pub struct TestFrameEcho {
    /// Frames whose echo byte was incremented.
    pub echoed: u64,
    /// Frames forwarded unchanged (not test frames).
    pub other: u64,
}

impl PacketHandler for TestFrameEcho {
    #[inline]
    fn handle(&mut self, frame: &mut [u8]) -> Verdict {
        echo_test_frame(frame, &mut self.echoed, &mut self.other);
        Verdict::Forward
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use enso_abi::testframe::FrameKind;

    #[test]
    fn increments_the_echo_byte_of_every_kind() {
        let tf = TestFrames::new(2, 0);
        let mut f = [0u8; 1536];
        let mut s = [0u8; 1536];
        let mut echo = Echo::new();
        for kind in [FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw] {
            let n = tf.build(kind, 41, 1, 200, &mut f);
            assert_eq!(echo.handle(&mut f[..n]), Verdict::Forward);
            tf.verify(&f[..n], 1, None, &mut s).unwrap();
        }
        let mut junk = [7u8; 60];
        assert_eq!(echo.handle(&mut junk), Verdict::Forward);
        assert_eq!(junk, [7u8; 60]);
        // The experiments' echo does the same, frame for frame.
        let mut alone = TestFrameEcho::default();
        for kind in [FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw] {
            let n = tf.build(kind, 41, 1, 200, &mut f);
            assert_eq!(alone.handle(&mut f[..n]), Verdict::Forward);
            tf.verify(&f[..n], 1, None, &mut s).unwrap();
        }
        assert_eq!(alone.handle(&mut junk), Verdict::Forward);
        assert_eq!(junk, [7u8; 60]);
        assert_eq!((alone.echoed, alone.other), (echo.echoed, echo.other));
        assert_eq!((echo.echoed, echo.other), (3, 1));
    }

    mod reflecting {
        use super::*;
        use crate::net::host::Host;
        use crate::net::testing::*;
        use crate::nic::Hosted;
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

        const OURS: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
        const PEER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

        fn v6(s: &str) -> Ipv6Addr {
            s.parse().unwrap()
        }

        /// The echo server as the binaries run it with `--reflect --ip`.
        fn server() -> Hosted<Echo> {
            let addrs = [IpAddr::V4(OURS), IpAddr::V6(v6("fd00::10"))];
            Hosted::new(Host::new(OUR_MAC, &addrs), Echo::reflecting(OUR_MAC))
        }

        fn payload(n: usize) -> Vec<u8> {
            (0..n).map(|i| (i * 31 + 7) as u8).collect()
        }

        #[test]
        fn ipv4_datagrams_come_back_swapped_with_valid_checksums() {
            let mut s = server();
            let mut n = 0;
            for len in (18..=1472).step_by(13).chain([1471, 1472]) {
                for with_checksum in [true, false] {
                    let p = payload(len);
                    let req =
                        udp4_frame(PEER_MAC, OUR_MAC, PEER, OURS, 40000, 7, &p, with_checksum);
                    let mut f = req.clone();
                    assert_eq!(s.handle(&mut f), Verdict::Forward, "{len}");
                    n += 1;
                    assert_eq!(f.len(), req.len());
                    assert_eq!(&f[0..6], &PEER_MAC.0, "to the sender");
                    assert_eq!(&f[6..12], &OUR_MAC.0, "from the port");
                    assert_eq!(&f[26..30], &OURS.octets());
                    assert_eq!(&f[30..34], &PEER.octets());
                    assert_eq!(&f[34..38], &[0, 7, 0x9c, 0x40], "ports swapped");
                    assert_eq!(&f[38..40], &req[38..40], "UDP length");
                    assert_eq!(&f[42..42 + len], &p[..], "payload unchanged");
                    assert_eq!(ref_checksum(&f[14..34]), 0, "IPv4 header checksum");
                    let c = u16::from_be_bytes([f[40], f[41]]);
                    assert_ne!(c, 0, "a UDP checksum, computed if there was none");
                    assert_eq!(ref_checksum4(OURS, PEER, &f[34..42 + len]), 0);
                }
            }
            assert_eq!(s.app.reflected, n);
        }

        #[test]
        fn ipv6_datagrams_come_back_swapped_with_valid_checksums() {
            let mut s = server();
            let (peer, ours) = (v6("fd00::1"), v6("fd00::10"));
            let mut n = 0;
            for len in (18..=1452).step_by(11).chain([1452]) {
                let p = payload(len);
                let req = udp6_frame(PEER_MAC, OUR_MAC, peer, ours, 33000, 7, &p);
                let mut f = req.clone();
                assert_eq!(s.handle(&mut f), Verdict::Forward, "{len}");
                n += 1;
                assert_eq!(&f[0..6], &PEER_MAC.0);
                assert_eq!(&f[6..12], &OUR_MAC.0);
                assert_eq!(&f[22..38], &ours.octets());
                assert_eq!(&f[38..54], &peer.octets());
                assert_eq!(&f[54..58], &[0, 7, 0x80, 0xe8]);
                assert_eq!(&f[62..], &p[..]);
                assert_eq!(ref_checksum6(&ours, &peer, 17, &f[54..]), 0);
            }
            assert_eq!(s.app.reflected, n);
        }

        #[test]
        fn what_is_not_a_good_udp_datagram_is_dropped_and_counted() {
            let mut s = server();
            // TCP to our address: not reflected.
            let mut tcp = udp4_frame(PEER_MAC, OUR_MAC, PEER, OURS, 1, 2, b"abcdefghijkl", true);
            tcp[23] = 6;
            tcp[24..26].fill(0);
            let c = ref_checksum(&tcp[14..34]);
            tcp[24..26].copy_from_slice(&c.to_be_bytes());
            let mut f = tcp.clone();
            assert_eq!(s.handle(&mut f), Verdict::Drop);
            assert_eq!(f, tcp, "untouched");
            // A damaged payload: the checksum no longer matches.
            let mut bad = udp4_frame(PEER_MAC, OUR_MAC, PEER, OURS, 1, 2, b"payload!", true);
            bad[45] ^= 0x10;
            assert_eq!(s.handle(&mut bad), Verdict::Drop);
            // IPv6 without a UDP checksum.
            let (peer, ours) = (v6("fd00::1"), v6("fd00::10"));
            let mut zero = udp6_frame(PEER_MAC, OUR_MAC, peer, ours, 1, 2, b"x");
            zero[60..62].fill(0);
            assert_eq!(s.handle(&mut zero), Verdict::Drop);
            // For another address: the host drops it before the echo sees it.
            let mut other = udp4_frame(
                PEER_MAC,
                OUR_MAC,
                PEER,
                Ipv4Addr::new(192, 0, 2, 99),
                1,
                2,
                b"x",
                true,
            );
            assert_eq!(s.handle(&mut other), Verdict::Drop);
            assert_eq!(
                (s.app.not_udp, s.app.bad_checksum, s.app.reflected),
                (1, 2, 0)
            );
            assert_eq!(s.host.stats().not_for_us, 1);
        }

        #[test]
        fn reflecting_without_addresses_answers_any_datagram() {
            let mut e = Echo::reflecting(OUR_MAC);
            let other = MacAddr([2, 0, 0, 0, 0, 0x99]);
            let mut f = udp4_frame(PEER_MAC, other, PEER, OURS, 9, 7, b"hi there", true);
            assert_eq!(e.handle(&mut f), Verdict::Forward);
            assert_eq!(&f[6..12], &OUR_MAC.0, "always from the port's MAC");
            // A test frame is a UDP datagram like any other: reflected,
            // its echo byte left alone.
            let tf = TestFrames::new(2, 0);
            let mut b = [0u8; 1536];
            let n = tf.build(FrameKind::Ipv4Udp, 41, 1, 200, &mut b);
            let before = b;
            assert_eq!(e.handle(&mut b[..n]), Verdict::Forward);
            assert_eq!(&b[42..n], &before[42..n]);
            assert_eq!(e.echoed, 0);
        }
    }
}
