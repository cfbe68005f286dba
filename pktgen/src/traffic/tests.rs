//! Tests of size, address and port specifications and the frames they
//! make.

use std::collections::{HashMap, HashSet};

use super::*;

fn ranged(spec: &str) -> Ipv4Range {
    spec.parse().unwrap()
}

#[test]
fn size_strings() {
    assert_eq!("64".parse(), Ok(SizeSpec::Fixed(64)));
    assert_eq!(
        " 64, 128 ,1518".parse(),
        Ok(SizeSpec::Mix(vec![(64, 1), (128, 1), (1518, 1)]))
    );
    assert_eq!(
        "64:7,594:4,1518:1".parse::<SizeSpec>(),
        Ok(SizeSpec::imix())
    );
    assert_eq!("IMIX".parse(), Ok(SizeSpec::imix()));
    assert_eq!("64-1518".parse(), Ok(SizeSpec::Range(64, 1518)));
    assert_eq!("".parse::<SizeSpec>(), Err(SizeError::Empty));
    assert_eq!("60".parse::<SizeSpec>(), Err(SizeError::OutOfRange(60)));
    assert_eq!("1541".parse::<SizeSpec>(), Err(SizeError::OutOfRange(1541)));
    assert_eq!("1540".parse(), Ok(SizeSpec::Fixed(1540)));
    assert_eq!(
        "big".parse::<SizeSpec>(),
        Err(SizeError::BadNumber("big".into()))
    );
    assert_eq!(
        "64,".parse::<SizeSpec>(),
        Err(SizeError::BadNumber("".into()))
    );
    assert_eq!("64:0".parse::<SizeSpec>(), Err(SizeError::ZeroWeight(64)));
    assert_eq!(
        "64:x".parse::<SizeSpec>(),
        Err(SizeError::BadNumber("64:x".into()))
    );
    assert_eq!(
        "200-100".parse::<SizeSpec>(),
        Err(SizeError::Reversed(200, 100))
    );
    assert_eq!("64:4000000".parse::<SizeSpec>(), Err(SizeError::TooHeavy));
    for s in ["64", "64:1,128:1", "imix", "100-200"] {
        let a: SizeSpec = s.parse().unwrap();
        assert_eq!(a.to_string().parse::<SizeSpec>(), Ok(a.clone()));
    }
    // The documented IMIX mean.
    let p = SizeSpec::imix().profile();
    assert!((p.mean_len + 4.0 - 361.833).abs() < 1e-3);
}

#[test]
fn address_and_port_ranges() {
    let r = ranged("10.0.0.0/16");
    assert_eq!((r.first(), r.count()), (Ipv4Addr::new(10, 0, 0, 0), 65536));
    assert_eq!(r.nth(65536 + 258), Ipv4Addr::new(10, 0, 1, 2));
    let r = ranged("10.0.0.1-10.0.0.200");
    assert_eq!(r.count(), 200);
    assert_eq!(r.nth(199), Ipv4Addr::new(10, 0, 0, 200));
    assert_eq!(r.nth(200), Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(ranged("0.0.0.0/0").count(), 1 << 32);
    assert_eq!(ranged("1.2.3.4").count(), 1);
    assert_eq!(ranged("1.2.3.4/32").count(), 1);
    for s in ["10.0.0.0/16", "10.0.0.1-10.0.0.200", "1.2.3.4", "0.0.0.0/0"] {
        assert_eq!(ranged(s).to_string(), s);
    }
    assert_eq!(
        "10.0.0.5/24".parse::<Ipv4Range>(),
        Err(RangeError::HostBits {
            given: "10.0.0.5/24".into(),
            network: "10.0.0.0/24".into()
        })
    );
    assert!(matches!(
        "10.0.0/8".parse::<Ipv4Range>(),
        Err(RangeError::BadAddress(_))
    ));
    assert!(matches!(
        "10.0.0.0/33".parse::<Ipv4Range>(),
        Err(RangeError::BadPrefix(_))
    ));
    assert!(matches!(
        "10.0.0.9-10.0.0.1".parse::<Ipv4Range>(),
        Err(RangeError::Reversed(_))
    ));
    let p: PortRange = "1000-1999".parse().unwrap();
    assert_eq!((p.first(), p.count(), p.nth(1000)), (1000, 1000, 1000));
    assert_eq!("0-65535".parse::<PortRange>().unwrap().count(), 65536);
    assert!(matches!(
        "70000".parse::<PortRange>(),
        Err(RangeError::BadPort(_))
    ));
    assert!(matches!(
        "9-1".parse::<PortRange>(),
        Err(RangeError::Reversed(_))
    ));
    assert_eq!(p.to_string(), "1000-1999");
}

#[test]
fn default_traffic_is_nic_emu_test_frames() {
    let t = Traffic::new(TrafficSpec {
        flows: Some(8),
        ..TrafficSpec::default()
    })
    .unwrap();
    let tf = TestFrames::new(8, 0);
    let (mut a, mut b, mut s) = ([0u8; MAX_FRAME], [0u8; MAX_FRAME], [0u8; MAX_FRAME]);
    for seq in [0u64, 1, 7, 8, 1_000_003] {
        let n = t.build(seq, &mut a);
        assert_eq!(n, 60);
        let m = tf.build(FrameKind::Ipv4Udp, seq, (seq % 8) as u32, 60, &mut b);
        assert_eq!(&a[..n], &b[..m]);
        assert_eq!(tf.verify(&a[..n], 0, None, &mut s).unwrap().seq, seq);
        assert_eq!(t.verify(&a[..n], 0, None, &mut s).unwrap().seq, seq);
    }
}

#[test]
fn ranged_frames_have_the_tuples_and_a_valid_checksum() {
    let t = Traffic::new(TrafficSpec {
        sizes: "64,1518".parse().unwrap(),
        src_ip: Some(ranged("10.0.0.0/30")),
        dst_ip: Some(ranged("192.168.1.10-192.168.1.12")),
        src_port: Some("1000-1001".parse().unwrap()),
        seed: 3,
        ..TrafficSpec::default()
    })
    .unwrap();
    // 4 sources x 3 destinations x 2 source ports.
    assert_eq!(t.flows(), 24);
    let mut seen = HashSet::new();
    let (mut f, mut s) = ([0u8; MAX_FRAME], [0u8; MAX_FRAME]);
    for seq in 0..48u64 {
        let n = t.build(seq, &mut f);
        let frame = &f[..n];
        assert_eq!(n + 4, t.size(seq));
        // The NIC's view of it.
        let p = wire::place(frame).unwrap();
        assert_eq!(p.len, n);
        let wire::SteerKey::Ipv4 { tuple, .. } = wire::steer_key(frame) else {
            panic!("not IPv4");
        };
        assert_eq!(tuple, t.tuple(t.flow(seq)));
        assert!((0x0a00_0000..=0x0a00_0003).contains(&tuple.src_ip));
        assert!((0xc0a8_010a..=0xc0a8_010c).contains(&tuple.dst_ip));
        assert!(tuple.src_port == 1000 || tuple.src_port == 1001);
        assert_eq!(tuple.dst_port, nic_emu::testframe::DST_PORT);
        seen.insert(tuple);
        // Checksum over the header, including the checksum field, is 0.
        let mut sum = 0u32;
        for c in frame[14..34].chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff, "seq {seq}");
        // Self-checking, echo byte and all.
        assert_eq!(t.verify(frame, 0, None, &mut s).unwrap().seq, seq);
        let e = FrameKind::Ipv4Udp.echo_offset();
        let mut echoed = frame.to_vec();
        echoed[e] = echoed[e].wrapping_add(1);
        assert!(t.verify(&echoed, 0, None, &mut s).is_err());
        assert!(t.verify(&echoed, 1, None, &mut s).is_ok());
    }
    assert_eq!(seen.len(), 24);
}

#[test]
fn verify_rejects_changes_but_skips_the_timestamp() {
    let t = Traffic::new(TrafficSpec {
        sizes: "imix".parse().unwrap(),
        flows: Some(5),
        dst_port: Some("7000-7009".parse().unwrap()),
        ..TrafficSpec::default()
    })
    .unwrap();
    let (mut f, mut s) = ([0u8; MAX_FRAME], [0u8; MAX_FRAME]);
    let n = t.build(11, &mut f);
    let mut bad = f[..n].to_vec();
    bad[n - 1] ^= 1;
    assert_eq!(
        t.verify(&bad, 0, None, &mut s),
        Err(VerifyError::Corrupt(n - 1))
    );
    // A timestamp written at offset 18 is ignored when asked.
    let mut stamped = f[..n].to_vec();
    stamped[18..22].copy_from_slice(&[9, 9, 9, 9]);
    assert!(t.verify(&stamped, 0, None, &mut s).is_err());
    assert!(t.verify(&stamped, 0, Some(18..22), &mut s).is_ok());
    // A frame of another size claiming the same sequence number.
    let other = t.frame_len(11) + 64;
    let mut longer = f[..n].to_vec();
    longer.resize(other.min(MAX_FRAME), 0);
    assert!(t.verify(&longer, 0, None, &mut s).is_err());
    assert_eq!(
        t.verify(&[0u8; 10], 0, None, &mut s),
        Err(VerifyError::Foreign)
    );
}

#[test]
fn mixes_have_exact_shares_and_seeds_change_the_order() {
    let spec = |seed| TrafficSpec {
        sizes: SizeSpec::imix(),
        seed,
        ..TrafficSpec::default()
    };
    let a = Traffic::new(spec(1)).unwrap();
    let b = Traffic::new(spec(2)).unwrap();
    // Every window of 12 frames has 7, 4 and 1 of the sizes.
    for start in [0u64, 5, 1000] {
        let mut counts = HashMap::new();
        for seq in start..start + 12 {
            *counts.entry(a.size(seq)).or_insert(0) += 1;
        }
        assert_eq!(counts, HashMap::from([(64, 7), (594, 4), (1518, 1)]));
    }
    let order = |t: &Traffic| (0..12).map(|s| t.size(s)).collect::<Vec<_>>();
    assert_ne!(order(&a), order(&b));
    assert_eq!(order(&a), order(&Traffic::new(spec(1)).unwrap()));
    // A range covers its span, deterministically.
    let r = Traffic::new(TrafficSpec {
        sizes: SizeSpec::Range(100, 110),
        ..TrafficSpec::default()
    })
    .unwrap();
    let sizes: HashSet<_> = (0..2000).map(|s| r.size(s)).collect();
    assert_eq!(sizes, (100..=110).collect());
    let mut f = [0u8; MAX_FRAME];
    assert_eq!(r.build(77, &mut f) + 4, r.size(77));
}

#[test]
fn bad_specs_are_refused() {
    let spec = TrafficSpec {
        flows: Some(0),
        ..TrafficSpec::default()
    };
    assert_eq!(Traffic::new(spec).unwrap_err(), TrafficError::Flows(0));
    let spec = TrafficSpec {
        sizes: SizeSpec::Fixed(10),
        ..TrafficSpec::default()
    };
    assert_eq!(
        Traffic::new(spec).unwrap_err(),
        TrafficError::Size(SizeError::OutOfRange(10))
    );
    // Huge ranges cap the default flow count.
    let t = Traffic::new(TrafficSpec {
        src_ip: Some(ranged("0.0.0.0/0")),
        ..TrafficSpec::default()
    })
    .unwrap();
    assert_eq!(t.flows(), MAX_FLOWS);
}

#[test]
fn spec_round_trips_through_json() {
    let spec = TrafficSpec {
        sizes: SizeSpec::imix(),
        flows: Some(9),
        src_ip: Some(ranged("10.0.0.0/16")),
        dst_port: Some("80-90".parse().unwrap()),
        ..TrafficSpec::default()
    };
    let j = serde_json::to_value(&spec).unwrap();
    assert_eq!(j["src_ip"], "10.0.0.0/16");
    assert_eq!(j["sizes"], "64:7,594:4,1518:1");
    assert_eq!(serde_json::from_value::<TrafficSpec>(j).unwrap(), spec);
}
