use super::*;
use crate::net::testing::*;

const OURS4: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const PEER4: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);

fn ours6() -> Ipv6Addr {
    "fd00:9::2".parse().unwrap()
}
fn peer6() -> Ipv6Addr {
    "fd00:9::1".parse().unwrap()
}

fn host() -> Host {
    Host::new(
        OUR_MAC,
        &[IpAddr::V4(OURS4), IpAddr::V6(ours6()), IpAddr::V4(OURS4)],
    )
}

/// `process` and `respond` must agree: run both, check they do, return
/// the answer (or the untouched frame) and the action.
fn run(h: &mut Host, frame: &[u8]) -> (Vec<u8>, HostAction) {
    let mut a = frame.to_vec();
    let act = h.process(&mut a);
    let mut twin = Host::new(h.mac, &h.addrs());
    let mut out = vec![0u8; 1536];
    let r = twin.respond(frame, &mut out);
    match (act, r) {
        (HostAction::Reply, HostReply::Reply(n)) => assert_eq!(&out[..n], &a[..]),
        (HostAction::Drop, HostReply::Drop) | (HostAction::Pass, HostReply::Pass) => {
            assert_eq!(a, frame, "left untouched")
        }
        other => panic!("process and respond disagree: {other:?}"),
    }
    (a, act)
}

impl Host {
    fn addrs(&self) -> Vec<IpAddr> {
        let v4 = self.ipv4.iter().map(|a| IpAddr::V4(*a));
        v4.chain(self.ipv6.iter().map(|a| IpAddr::V6(*a))).collect()
    }
}

/// An ARP request as Linux sends it on a veth (42 bytes: no padding).
fn arp_request(target: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&PEER_MAC.0);
    f.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01]);
    f.extend_from_slice(&PEER_MAC.0);
    f.extend_from_slice(&PEER4.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target.octets());
    f
}

#[test]
fn an_arp_request_gets_the_reply_a_kernel_expects() {
    let mut h = host();
    let (a, act) = run(&mut h, &arp_request(OURS4));
    assert_eq!(act, HostAction::Reply);
    let mut want = Vec::new();
    want.extend_from_slice(&PEER_MAC.0);
    want.extend_from_slice(&OUR_MAC.0);
    want.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02]);
    want.extend_from_slice(&OUR_MAC.0);
    want.extend_from_slice(&OURS4.octets());
    want.extend_from_slice(&PEER_MAC.0);
    want.extend_from_slice(&PEER4.octets());
    assert_eq!(a, want);
    assert_eq!(h.stats().arp_replies, 1);
    assert_eq!(h.stats().answered(), 1);
}

#[test]
fn arp_for_other_addresses_and_arp_replies_are_dropped() {
    let mut h = host();
    let (_, act) = run(&mut h, &arp_request(Ipv4Addr::new(10, 9, 0, 3)));
    assert_eq!(act, HostAction::Drop);
    let mut reply = arp_request(OURS4);
    reply[21] = 2;
    assert_eq!(run(&mut h, &reply).1, HostAction::Drop);
    let mut bad = arp_request(OURS4);
    bad[16] = 0x86; // protocol type IPv6
    assert_eq!(run(&mut h, &bad).1, HostAction::Drop);
    let st = h.stats();
    assert_eq!((st.not_for_us, st.ignored, st.malformed), (1, 1, 1));
    assert_eq!(st.answered(), 0);
}

#[test]
fn a_ping_gets_its_echo_reply() {
    let mut h = host();
    let data: Vec<u8> = (0..56u8).collect(); // ping's default 56 bytes
    let req = icmp4_frame(PEER_MAC, OUR_MAC, PEER4, OURS4, 8, 0x1c2b, 7, &data);
    let (a, act) = run(&mut h, &req);
    assert_eq!(act, HostAction::Reply);
    assert_eq!(a.len(), req.len());
    assert_eq!(&a[0..6], &PEER_MAC.0);
    assert_eq!(&a[6..12], &OUR_MAC.0);
    assert_eq!(&a[26..30], &OURS4.octets(), "source: the address pinged");
    assert_eq!(&a[30..34], &PEER4.octets());
    assert_eq!(a[22], 64, "TTL");
    assert_eq!(ref_checksum(&a[14..34]), 0, "IPv4 header checksum");
    let icmp = &a[34..];
    assert_eq!((icmp[0], icmp[1]), (0, 0), "echo reply");
    assert_eq!(&icmp[4..8], &[0x1c, 0x2b, 0, 7], "identifier and sequence");
    assert_eq!(&icmp[8..], &data[..]);
    assert_eq!(ref_checksum(icmp), 0, "ICMP checksum");
    // Only the type changed in the ICMP message: the checksum went up by
    // 0x0800 (one's complement), as RFC 1624 says it must.
    let before = u16::from_be_bytes([req[36], req[37]]);
    let after = u16::from_be_bytes([icmp[2], icmp[3]]);
    assert_eq!(ones_add(before, 0x0800), after);
    assert_eq!(h.stats().icmp_echo_replies, 1);
}

#[test]
fn an_icmpv6_ping_gets_its_echo_reply() {
    let mut h = host();
    let data = *b"0123456789abcdef0123456789abcdef";
    let req = icmp6_frame(
        PEER_MAC,
        OUR_MAC,
        peer6(),
        ours6(),
        64,
        128,
        0x0102,
        9,
        &data,
    );
    let (a, act) = run(&mut h, &req);
    assert_eq!(act, HostAction::Reply);
    assert_eq!(&a[0..6], &PEER_MAC.0);
    assert_eq!(&a[6..12], &OUR_MAC.0);
    assert_eq!(&a[22..38], &ours6().octets());
    assert_eq!(&a[38..54], &peer6().octets());
    let icmp = &a[54..];
    assert_eq!((icmp[0], icmp[1]), (129, 0));
    assert_eq!(&icmp[4..8], &[0x01, 0x02, 0, 9]);
    assert_eq!(&icmp[8..], &data[..]);
    assert_eq!(ref_checksum6(&ours6(), &peer6(), 58, icmp), 0);
    assert_eq!(h.stats().icmpv6_echo_replies, 1);
}

#[test]
fn a_neighbour_solicitation_gets_a_solicited_override_advertisement() {
    let mut h = host();
    let to = crate::net::ipv6::solicited_node(&ours6());
    let ns = solicitation(peer6(), to, ours6(), Some(PEER_MAC));
    assert_eq!(ns.len(), 86, "as Linux sends it");
    assert_eq!(&ns[0..6], &[0x33, 0x33, 0xff, 0, 0, 2]);
    let (a, act) = run(&mut h, &ns);
    assert_eq!(act, HostAction::Reply);
    assert_eq!(&a[0..6], &PEER_MAC.0);
    assert_eq!(&a[6..12], &OUR_MAC.0);
    assert_eq!(&a[12..14], &[0x86, 0xdd]);
    assert_eq!(&a[18..20], &[0, 32], "payload length");
    assert_eq!((a[20], a[21]), (58, 255), "ICMPv6, hop limit 255");
    assert_eq!(&a[22..38], &ours6().octets(), "from the target");
    assert_eq!(&a[38..54], &peer6().octets(), "to the solicitor");
    let na = &a[54..86];
    assert_eq!((na[0], na[1]), (136, 0));
    assert_eq!(&na[4..8], &[0x60, 0, 0, 0], "solicited and override");
    assert_eq!(&na[8..24], &ours6().octets());
    assert_eq!(&na[24..26], &[2, 1], "target link-layer address option");
    assert_eq!(&na[26..32], &OUR_MAC.0);
    assert_eq!(ref_checksum6(&ours6(), &peer6(), 58, na), 0);
    assert_eq!(h.stats().nd_replies, 1);

    // Unicast (a reachability probe) and without the option: answered
    // without it; with more options: shortened, the rest zero padding.
    let probe = solicitation(peer6(), ours6(), ours6(), None);
    let mut probe = probe;
    probe[0..6].copy_from_slice(&OUR_MAC.0);
    let (a, act) = run(&mut h, &probe);
    assert_eq!(act, HostAction::Reply);
    assert_eq!(a.len(), 78);
    assert_eq!(&a[18..20], &[0, 24]);
    assert_eq!(ref_checksum6(&ours6(), &peer6(), 58, &a[54..]), 0);
    let mut long = solicitation(peer6(), to, ours6(), Some(PEER_MAC));
    long.extend_from_slice(&[1, 1, 9, 9, 9, 9, 9, 9]); // a second option
    fix_icmp6(&mut long);
    let (a, act) = run(&mut h, &long);
    assert_eq!(act, HostAction::Reply);
    assert_eq!(&a[18..20], &[0, 32]);
    assert_eq!(&a[86..], &[0; 8]);
    assert_eq!(ref_checksum6(&ours6(), &peer6(), 58, &a[54..86]), 0);
    assert_eq!(h.stats().nd_replies, 3);
}

#[test]
fn solicitations_that_must_not_be_answered_are_not() {
    let mut h = host();
    let to = crate::net::ipv6::solicited_node(&ours6());
    // For another target.
    let other: Ipv6Addr = "fd00:9::7".parse().unwrap();
    let ns = solicitation(
        peer6(),
        crate::net::ipv6::solicited_node(&other),
        other,
        None,
    );
    assert_eq!(run(&mut h, &ns).1, HostAction::Drop);
    // Duplicate address detection.
    let dad = solicitation(Ipv6Addr::UNSPECIFIED, to, ours6(), None);
    assert_eq!(run(&mut h, &dad).1, HostAction::Drop);
    // Hop limit below 255: it came through a router.
    let mut routed = solicitation(peer6(), to, ours6(), Some(PEER_MAC));
    routed[21] = 254;
    assert_eq!(run(&mut h, &routed).1, HostAction::Drop);
    // A wrong checksum.
    let mut bad = solicitation(peer6(), to, ours6(), Some(PEER_MAC));
    bad[60] ^= 0x40;
    assert_eq!(run(&mut h, &bad).1, HostAction::Drop);
    let st = h.stats();
    // The one for another target is sent to another solicited-node group.
    assert_eq!((st.not_for_us, st.ignored, st.malformed), (1, 1, 2));
    assert_eq!(st.answered(), 0);
}

#[test]
fn frames_for_other_hosts_are_dropped_and_ours_passed() {
    let mut h = host();
    let other_ip = Ipv4Addr::new(10, 9, 0, 99);
    let other_mac = MacAddr([0x02, 0, 0, 0, 0, 0x63]);
    let for_us = udp4_frame(PEER_MAC, OUR_MAC, PEER4, OURS4, 5000, 7, b"hello", true);
    assert_eq!(run(&mut h, &for_us).1, HostAction::Pass);
    let v6 = udp6_frame(PEER_MAC, OUR_MAC, peer6(), ours6(), 5000, 7, b"hello");
    assert_eq!(run(&mut h, &v6).1, HostAction::Pass);
    let wrong_ip = udp4_frame(PEER_MAC, OUR_MAC, PEER4, other_ip, 5000, 7, b"x", true);
    assert_eq!(run(&mut h, &wrong_ip).1, HostAction::Drop);
    let wrong_mac = udp4_frame(PEER_MAC, other_mac, PEER4, OURS4, 5000, 7, b"x", true);
    assert_eq!(run(&mut h, &wrong_mac).1, HostAction::Drop);
    let ping_other = icmp4_frame(PEER_MAC, OUR_MAC, PEER4, other_ip, 8, 1, 1, b"x");
    assert_eq!(run(&mut h, &ping_other).1, HostAction::Drop);
    let v6_other = udp6_frame(PEER_MAC, OUR_MAC, peer6(), peer6(), 1, 2, b"x");
    assert_eq!(run(&mut h, &v6_other).1, HostAction::Drop);
    // An MLD report to ff02::16, a multicast group the host is not in.
    let mld = icmp6_frame(
        PEER_MAC,
        MacAddr([0x33, 0x33, 0, 0, 0, 0x16]),
        peer6(),
        "ff02::16".parse().unwrap(),
        1,
        143,
        0,
        0,
        &[0; 20],
    );
    assert_eq!(run(&mut h, &mld).1, HostAction::Drop);
    // Ours, but nothing to answer: an echo reply, and an unknown EtherType.
    let pong = icmp4_frame(PEER_MAC, OUR_MAC, PEER4, OURS4, 0, 1, 1, b"x");
    assert_eq!(run(&mut h, &pong).1, HostAction::Drop);
    let mut lldp = for_us.clone();
    lldp[12..14].copy_from_slice(&[0x88, 0xcc]);
    assert_eq!(run(&mut h, &lldp).1, HostAction::Drop);
    // A ping with a wrong checksum, and a truncated frame.
    let mut bad = icmp4_frame(PEER_MAC, OUR_MAC, PEER4, OURS4, 8, 1, 1, b"abc");
    bad[40] ^= 1;
    assert_eq!(run(&mut h, &bad).1, HostAction::Drop);
    assert_eq!(run(&mut h, &for_us[..20]).1, HostAction::Drop);
    let st = *h.stats();
    assert_eq!(st.not_for_us, 5);
    assert_eq!(st.ignored, 2);
    assert_eq!(st.malformed, 2);
    assert_eq!(st.answered(), 0);
    assert_eq!(st.dropped(), 9);
}

#[test]
fn a_host_without_addresses_passes_everything() {
    let mut h = Host::new(OUR_MAC, &[]);
    assert!(!h.is_active());
    for f in [
        arp_request(OURS4),
        icmp4_frame(PEER_MAC, OUR_MAC, PEER4, OURS4, 8, 1, 1, b"x"),
        vec![1, 2, 3],
    ] {
        assert_eq!(run(&mut h, &f).1, HostAction::Pass);
    }
    assert_eq!(*h.stats(), HostStats::default());
}

#[test]
fn a_response_buffer_too_small_is_a_counted_drop() {
    let mut h = host();
    let req = arp_request(OURS4);
    let mut out = [0u8; 20];
    assert_eq!(h.respond(&req, &mut out), HostReply::Drop);
    assert_eq!(h.stats().malformed, 1);
}

#[test]
fn no_frame_makes_the_host_panic() {
    let mut h = host();
    let to = crate::net::ipv6::solicited_node(&ours6());
    let seeds = [
        arp_request(OURS4),
        icmp4_frame(PEER_MAC, OUR_MAC, PEER4, OURS4, 8, 1, 1, b"abcd"),
        icmp6_frame(PEER_MAC, OUR_MAC, peer6(), ours6(), 64, 128, 1, 1, b"abcd"),
        solicitation(peer6(), to, ours6(), Some(PEER_MAC)),
    ];
    let mut x = 0x5eed_u64;
    let mut out = [0u8; 1536];
    for round in 0..40_000 {
        let mut f = seeds[round % seeds.len()].clone();
        for _ in 0..round % 4 {
            x = crate::hash::mix64(x);
            let at = (x % f.len() as u64) as usize;
            f[at] = (x >> 32) as u8;
        }
        x = crate::hash::mix64(x);
        let cut = if x.is_multiple_of(3) {
            (x >> 8) as usize % (f.len() + 1)
        } else {
            f.len()
        };
        let _ = h.respond(&f[..cut], &mut out);
        let _ = h.process(&mut f[..cut]);
    }
    // Both kinds of outcome occurred among the damaged frames.
    let st = h.stats();
    assert!(st.answered() > 0 && st.dropped() > 0, "{st:?}");
}
