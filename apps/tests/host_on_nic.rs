//! A server with `--ip` and `--reflect` end to end on the emulated NIC, on
//! both interfaces: a peer on the cabled port sends what a kernel would
//! (an ARP request, a neighbour solicitation, pings, UDP datagrams over
//! IPv4 and IPv6, a datagram for another host) and gets the answers a
//! kernel expects, built by the same `Hosted<Echo>` handler on both.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use enso::app::{EnsoDriver, PacketizedDriver};
use enso::{Device, DeviceOptions};
use enso_apps::echo::Echo;
use enso_apps::load::PipeClient;
use enso_apps::net::host::Host;
use enso_apps::nic::{Hosted, Interface};
use enso_apps::packet::{emit_udp_frame, EmitError, Endpoints, MacAddr};
use nic_emu::{DeviceConfig, Engine, WireConfig};

const OURS4: Ipv4Addr = Ipv4Addr::new(10, 60, 0, 2);
const PEER4: Ipv4Addr = Ipv4Addr::new(10, 60, 0, 1);
const PEER_MAC: MacAddr = MacAddr([0x5a, 0, 0, 0, 0, 1]);

fn ours6() -> Ipv6Addr {
    "fd60::2".parse().unwrap()
}
fn peer6() -> Ipv6Addr {
    "fd60::1".parse().unwrap()
}

/// The Internet checksum of the concatenation of `parts`.
fn csum(parts: &[&[u8]]) -> u16 {
    let mut s = 0u64;
    for b in parts.iter().flat_map(|p| p.chunks(2)) {
        s += u64::from(u16::from_be_bytes([b[0], *b.get(1).unwrap_or(&0)]));
    }
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

fn eth(dst: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&PEER_MAC.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn arp_request() -> Vec<u8> {
    let mut f = eth([0xff; 6], 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&PEER_MAC.0);
    f.extend_from_slice(&PEER4.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&OURS4.octets());
    f.resize(60, 0);
    f
}

fn ping4(mac: [u8; 6]) -> Vec<u8> {
    let mut f = eth(mac, 0x0800);
    let mut ip = vec![0x45, 0, 0, 36, 0, 1, 0x40, 0, 64, 1, 0, 0];
    ip.extend_from_slice(&PEER4.octets());
    ip.extend_from_slice(&OURS4.octets());
    let c = csum(&[&ip]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 5, 1, 2, 3, 4, 5, 6, 7, 8];
    let c = csum(&[&icmp]);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&icmp);
    f.resize(60, 0);
    f
}

/// An IPv6 frame carrying `l4` (`nh`), checksum at `at` in it filled.
fn v6(dst_mac: [u8; 6], dst: Ipv6Addr, nh: u8, hops: u8, mut l4: Vec<u8>, at: usize) -> Vec<u8> {
    let mut f = eth(dst_mac, 0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    f.extend_from_slice(&[nh, hops]);
    f.extend_from_slice(&peer6().octets());
    f.extend_from_slice(&dst.octets());
    let len = (l4.len() as u32).to_be_bytes();
    let c = csum(&[&peer6().octets(), &dst.octets(), &len, &[0, 0, 0, nh], &l4]);
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&l4);
    f
}

fn solicitation() -> Vec<u8> {
    let t = ours6().octets();
    let group: Ipv6Addr = format!("ff02::1:ff{:02x}:{:02x}{:02x}", t[13], t[14], t[15])
        .parse()
        .unwrap();
    let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&t);
    m.extend_from_slice(&[1, 1]);
    m.extend_from_slice(&PEER_MAC.0);
    v6(
        [0x33, 0x33, 0xff, t[13], t[14], t[15]],
        group,
        58,
        255,
        m,
        2,
    )
}

fn ping6(mac: [u8; 6]) -> Vec<u8> {
    let m = vec![128, 0, 0, 0, 0xab, 0xcd, 0, 1, 9, 8, 7, 6];
    v6(mac, ours6(), 58, 64, m, 2)
}

fn udp6(mac: [u8; 6]) -> Vec<u8> {
    let mut m = vec![0x9c, 0x40, 0, 7, 0, 13, 0, 0];
    m.extend_from_slice(b"hello");
    v6(mac, ours6(), 17, 64, m, 6)
}

fn udp4(mac: [u8; 6], dst: Ipv4Addr) -> Vec<u8> {
    let ep = Endpoints {
        src_mac: PEER_MAC,
        dst_mac: MacAddr(mac),
        src_ip: PEER4,
        dst_ip: dst,
        src_port: 40000,
        dst_port: 7,
    };
    let mut b = vec![0u8; 1536];
    let n = emit_udp_frame(&mut b, &ep, b"0123456789abcdefghij").unwrap();
    b.truncate(n);
    b
}

fn run(iface: Interface) {
    let name = format!("host-{iface}");
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = DeviceConfig::new(
        &name,
        WireConfig::Cable {
            peer: 1,
            delay_ns: 0,
        },
    );
    cfg.ports.push(WireConfig::Cable {
        peer: 0,
        delay_ns: 0,
    });
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 256 << 10;
    let mut e = Engine::new(cfg).unwrap();
    let mac = enso_abi::devname::port_mac(&name, 0);
    let frames = [
        arp_request(),
        solicitation(),
        ping4(mac),
        ping6(mac),
        udp4(mac, OURS4),
        udp6(mac),
        udp4(mac, Ipv4Addr::new(10, 60, 0, 9)), // another host's
    ];
    let client_opts = DeviceOptions {
        pipes: 1,
        tx_pipes: 1,
        ..Default::default()
    };
    let mut c =
        PipeClient::new(Device::attach_engine(&mut e, client_opts).unwrap(), 1, true).unwrap();
    let host = Host::new(MacAddr(mac), &[IpAddr::V4(OURS4), IpAddr::V6(ours6())]);
    let mut server = Hosted::new(host, Echo::reflecting(MacAddr(mac)));
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut next = 0;
    let mut step = |e: &mut Engine, d: &mut dyn FnMut(&mut Hosted<Echo>)| {
        for _ in 0..20_000 {
            e.step();
            d(&mut server);
            if next < frames.len() {
                next += c
                    .send_with(1, |b| -> Result<_, EmitError> {
                        let f = &frames[next];
                        b[..f.len()].copy_from_slice(f);
                        Ok(Some(f.len()))
                    })
                    .unwrap();
            }
            c.recv_with(|f| got.push(f.to_vec())).unwrap();
            if got.len() == 6 && next == frames.len() && e.run_until_idle(100) == 0 {
                break;
            }
        }
    };
    match iface {
        Interface::Enso => {
            let opts = DeviceOptions {
                pipes: 1,
                tx_pipes: 1,
                ..Default::default()
            };
            let mut d = EnsoDriver::new(Device::attach_engine(&mut e, opts).unwrap());
            d.add_fallback_pipes_on(0, 1).unwrap();
            step(&mut e, &mut |h| while d.poll(h).unwrap() > 0 {});
        }
        Interface::Packetized => {
            let opts = DeviceOptions {
                pipes: 0,
                tx_pipes: 0,
                queues: 1,
                rx_ring: 256,
                tx_ring: 256,
                pool_buffers: 1024,
                ..Default::default()
            };
            let mut d = PacketizedDriver::new(Device::attach_engine(&mut e, opts).unwrap(), 32);
            d.add_rss_queues_on(0, 1).unwrap();
            step(&mut e, &mut |h| while d.poll(h).unwrap() > 0 {});
        }
    }
    assert_eq!(
        got.len(),
        6,
        "{iface}: six answers (none for the other host)"
    );
    for f in &got {
        assert_eq!(&f[0..6], &PEER_MAC.0, "{iface}: to the peer");
        assert_eq!(&f[6..12], &mac, "{iface}: from the port's MAC");
    }
    let kinds: Vec<(u16, u8)> = got
        .iter()
        .map(|f| {
            let et = u16::from_be_bytes([f[12], f[13]]);
            let k = match et {
                0x0806 => f[21],
                0x0800 => f[23],
                _ => {
                    if f[20] == 58 {
                        f[54]
                    } else {
                        f[20]
                    }
                }
            };
            (et, k)
        })
        .collect();
    // ARP reply, advertisement, echo replies, UDP (IPv4, IPv6), in order.
    assert_eq!(
        kinds,
        [
            (0x0806, 2),
            (0x86dd, 136),
            (0x0800, 1),
            (0x86dd, 129),
            (0x0800, 17),
            (0x86dd, 17)
        ],
        "{iface}"
    );
    let st = server.host.stats();
    assert_eq!(
        (
            st.arp_replies,
            st.nd_replies,
            st.icmp_echo_replies,
            st.icmpv6_echo_replies
        ),
        (1, 1, 1, 1)
    );
    assert_eq!((st.not_for_us, st.ignored, st.malformed), (1, 0, 0));
    assert_eq!(server.app.reflected, 2);
}

#[test]
fn a_kernel_peer_gets_its_answers_on_both_interfaces() {
    for iface in Interface::ALL {
        run(iface);
    }
}
