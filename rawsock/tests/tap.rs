//! TAP tests inside network namespaces made for the test. The TAP device is
//! created from a thread inside the namespace, so it never appears in the
//! machine's own namespace. Needs root, `ip` and `/dev/net/tun`.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::*;
use rawsock::testnet::{preflight, unique_name, Netns};
use rawsock::{Error, Tap};

/// The address the kernel side of the TAP gets, and the one the test plays
/// (RFC 2544 benchmarking range, only ever inside the test namespace).
const KERNEL_IP: [u8; 4] = [198, 18, 0, 1];
const PEER_IP: [u8; 4] = [198, 18, 0, 2];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// Reads frames until `pick` accepts one or `timeout` passes.
fn read_until(tap: &mut Tap, timeout: Duration, mut pick: impl FnMut(&[u8]) -> bool) -> Vec<u8> {
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 65536];
    let mut seen = 0;
    while Instant::now() < deadline && seen < 1000 {
        tap.wait_readable(10).unwrap();
        while let Some(n) = tap.recv(&mut buf).unwrap() {
            seen += 1;
            if pick(&buf[..n]) {
                return buf[..n].to_vec();
            }
        }
    }
    panic!("no matching frame within {timeout:?} ({seen} others)");
}

fn is_arp(f: &[u8], op: u16, target_ip: [u8; 4]) -> bool {
    f.len() >= 42
        && f[12..14] == [0x08, 0x06]
        && f[20..22] == op.to_be_bytes()
        && f[38..42] == target_ip
}

/// Asks who has `KERNEL_IP` and checks the kernel answers from the TAP's MAC.
fn arp_round_trip(tap: &mut Tap) {
    let request = arp_frame([0xff; 6], PEER_MAC, 1, PEER_IP, [0; 6], KERNEL_IP);
    assert!(tap.send(&request).unwrap());
    let reply = read_until(tap, Duration::from_secs(2), |f| is_arp(f, 2, PEER_IP));
    assert_eq!(reply[0..6], PEER_MAC, "reply addressed to us");
    assert_eq!(reply[6..12], tap.mac(), "reply from the TAP's MAC");
    assert_eq!(reply[22..28], tap.mac(), "sender hardware address");
    assert_eq!(reply[28..32], KERNEL_IP, "sender protocol address");
}

fn configure(ns: &Netns, name: &str) {
    // No IPv6 chatter on the test link (best effort: IPv6 may be absent).
    let knob = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
    let _ = ns.enter(|| std::fs::write(&knob, "1"));
    ns.ip(&["addr", "add", "198.18.0.1/24", "dev", name])
        .unwrap();
}

#[test]
fn tap_frames_flow_both_ways() {
    if let Some(why) = preflight(&["ip", "/dev/net/tun"]) {
        test_skips::skipped(why);
        return;
    }
    let ns = Netns::new().unwrap();
    let name = unique_name("tap-", '-', "");
    let mut tap = ns
        .enter(|| Tap::create(&name))
        .unwrap()
        .expect("create TAP");
    assert_eq!(tap.name(), name);
    assert_eq!(tap.mac(), mac_of(&ns, &name));
    configure(&ns, &name);
    // Down: writes are refused; too short: refused.
    let probe = arp_frame([0xff; 6], PEER_MAC, 1, PEER_IP, [0; 6], KERNEL_IP);
    assert_eq!(
        tap.send(&probe).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    tap.set_up().unwrap();
    assert_eq!(
        tap.send(&probe[..13]).unwrap_err().raw_os_error(),
        Some(libc::EINVAL)
    );

    // Frames the kernel sends are read: a datagram to PEER_IP makes the
    // kernel ask for PEER_IP's MAC first.
    let sock = ns
        .enter(|| UdpSocket::bind("198.18.0.1:0"))
        .unwrap()
        .unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let port = sock.local_addr().unwrap().port();
    sock.send_to(b"from the kernel", "198.18.0.2:9999").unwrap();
    let request = read_until(&mut tap, Duration::from_secs(2), |f| is_arp(f, 1, PEER_IP));
    assert_eq!(request[0..6], [0xff; 6], "broadcast");
    assert_eq!(request[6..12], tap.mac());
    assert_eq!(request[28..32], KERNEL_IP);

    // Frames we write reach the kernel: our answer releases the datagram.
    let reply = arp_frame(tap.mac(), PEER_MAC, 2, PEER_IP, tap.mac(), KERNEL_IP);
    assert!(tap.send(&reply).unwrap());
    let udp = read_until(&mut tap, Duration::from_secs(2), |f| {
        f.len() >= 42 && f[12..14] == [0x08, 0x00] && f[23] == 17 && f[30..34] == PEER_IP
    });
    assert_eq!(udp[0..6], PEER_MAC);
    assert_eq!(udp[6..12], tap.mac());
    assert_eq!(ip_checksum(&udp[14..34]), 0, "IPv4 header checksum");
    assert_eq!(u16::from_be_bytes([udp[36], udp[37]]), 9999);
    assert_eq!(&udp[42..], b"from the kernel");

    // And the kernel answers an ARP request we write.
    arp_round_trip(&mut tap);

    // A datagram we write is delivered to the socket in the namespace.
    let frame = udp_frame(
        tap.mac(),
        PEER_MAC,
        PEER_IP,
        KERNEL_IP,
        9999,
        port,
        b"from the wire",
    );
    assert!(tap.send(&frame).unwrap());
    let mut buf = [0u8; 64];
    let (n, from) = sock.recv_from(&mut buf).expect("datagram from the TAP");
    assert_eq!(&buf[..n], b"from the wire");
    assert_eq!(from.to_string(), "198.18.0.2:9999");

    // A second TAP of the same name, or one named like an existing
    // interface, is refused instead of attaching to it.
    for taken in [name.as_str(), "lo"] {
        let res = ns.enter(|| Tap::create(taken)).unwrap();
        match res {
            Err(Error::Interface { reason, .. }) => assert!(reason.contains("exists"), "{reason}"),
            other => panic!("{taken}: {other:?}"),
        }
    }
}

#[test]
fn tap_keeps_working_after_moving_to_another_namespace() {
    if let Some(why) = preflight(&["ip", "/dev/net/tun"]) {
        test_skips::skipped(why);
        return;
    }
    let home = Netns::new().unwrap();
    let away = Netns::new().unwrap();
    let name = unique_name("tap-", '-', "");
    let mut tap = home.enter(|| Tap::create(&name)).unwrap().unwrap();
    home.ip(&["link", "set", "dev", &name, "netns", away.name()])
        .unwrap();
    match tap.set_up() {
        Err(Error::Interface { reason, .. }) => assert!(reason.contains("namespace"), "{reason}"),
        other => panic!("set_up after the move: {other:?}"),
    }
    configure(&away, &name);
    away.ip(&["link", "set", "dev", &name, "up"]).unwrap();
    arp_round_trip(&mut tap);
}

#[test]
fn tap_name_pattern_is_filled_in_by_the_kernel() {
    if let Some(why) = preflight(&["ip", "/dev/net/tun"]) {
        test_skips::skipped(why);
        return;
    }
    let ns = Netns::new().unwrap();
    let tap = ns.enter(|| Tap::create("rstap%d")).unwrap().unwrap();
    assert_eq!(
        tap.name(),
        "rstap0",
        "first free number in a fresh namespace"
    );
    assert_eq!(tap.mac(), mac_of(&ns, tap.name()));
}
