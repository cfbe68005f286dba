//! Frame delimiting and steering keys (`nic_emu::wire`, from the ABI
//! crate) checked against the frames the NIC's generator builds.

use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::wire::*;

#[test]
fn ipv4_ipv6_arp_and_opaque_are_delimited() {
    let tf = TestFrames::new(4, 1);
    let mut buf = [0u8; MAX_FRAME];
    for kind in [FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw] {
        for len in [64usize, 65, 127, 128, 200, 1500, 1518, 1536] {
            let n = tf.build(kind, 7, 3, len, &mut buf);
            assert_eq!(n, len.max(kind.min_len()));
            let p = place(&buf[..n]).unwrap();
            assert_eq!(p.len, n, "{kind:?} {len}");
            assert_eq!(p.marker, kind == FrameKind::Raw);
            if !p.marker {
                let d = delimit(&buf[..n]).unwrap();
                assert_eq!((d.start, d.len, d.flits), (0, n, flits(n)));
            }
        }
    }
    // ARP request: 42 bytes padded to 60 on the wire.
    let mut arp = [0u8; 60];
    arp[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    arp[14 + 4] = 6;
    arp[14 + 5] = 4;
    assert_eq!(place(&arp).unwrap().len, 42);
}

#[test]
fn classify_agrees_with_place_and_steer_key() {
    let tf = TestFrames::new(4, 1);
    let mut buf = [0u8; MAX_FRAME];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..20_000u64 {
        let kind = [FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw][(i % 3) as usize];
        let n = tf.build(
            kind,
            i,
            (i % 4) as u32,
            60 + (i as usize * 7) % 1477,
            &mut buf,
        );
        // Corrupt some bytes of some frames.
        let mut f = buf[..n].to_vec();
        if i % 5 == 0 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x as usize) % f.len().min(48);
            f[at] = (x >> 32) as u8;
        }
        let cut = if i % 7 == 0 {
            (x as usize >> 8) % f.len()
        } else {
            f.len()
        };
        let f = &f[..cut];
        let want = place(f).map(|p| (p, steer_key(f)));
        assert_eq!(classify(f), want, "frame {i}");
    }
}

#[test]
fn steering_key_of_tcp_syn_and_udp() {
    let tf = TestFrames::new(4, 1);
    let mut buf = [0u8; 128];
    let n = tf.build(FrameKind::Ipv4Udp, 1, 2, 64, &mut buf);
    match steer_key(&buf[..n]) {
        SteerKey::Ipv4 { tuple, syn } => {
            assert_eq!(tuple.protocol, PROTO_UDP);
            assert!(!syn);
            assert_eq!(tuple.dst_port, nic_emu::testframe::DST_PORT + 2);
        }
        other => panic!("{other:?}"),
    }
    let n = tf.build(FrameKind::Raw, 1, 2, 64, &mut buf);
    assert!(matches!(steer_key(&buf[..n]), SteerKey::Other { .. }));
}
