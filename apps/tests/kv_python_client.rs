//! The KV server answers a client that is not ours: the bytes the Python
//! client `apps/examples/kv_client.py` sends, in a UDP datagram from a
//! kernel peer's addresses, go through the same handler the drivers call
//! (`Hosted<KvServer>` as a `ReplyHandler`), and the reply, addressed back
//! to the sender, parses in the script. (No real network here: that needs
//! root; the script's `--dump` and `--parse` carry the bytes.)

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;

use enso_apps::kv::{KvServer, ServerConfig, StoreConfig};
use enso_apps::net::host::Host;
use enso_apps::nic::{Hosted, ReplyHandler};
use enso_apps::packet::{emit_udp_frame, Endpoints, MacAddr, UdpDatagram};

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 11, 0, 2);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 11, 0, 1);
const PORT_MAC: MacAddr = MacAddr([0x02, 0x45, 1, 2, 3, 0]);
const CLIENT_MAC: MacAddr = MacAddr([0x5a, 0, 0, 0, 0, 1]);

fn script() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/kv_client.py"
    ))
}

/// Runs the script with `args`; `None` if there is no python3.
fn python(args: &[&str]) -> Option<String> {
    let out = match Command::new("python3").arg(script()).args(args).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("python3: {e}"),
    };
    assert!(
        out.status.success(),
        "kv_client.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Sends the script's request for `cmd` from the client to the server and
/// returns what the script makes of the reply.
fn round_trip(server: &mut Hosted<KvServer>, cmd: &[&str]) -> Option<String> {
    let mut args = vec!["--dump"];
    args.extend_from_slice(cmd);
    let payload = unhex(&python(&args)?);
    let ep = Endpoints {
        src_mac: CLIENT_MAC,
        dst_mac: PORT_MAC,
        src_ip: CLIENT_IP,
        dst_ip: SERVER_IP,
        src_port: 47_123,
        dst_port: 9000,
    };
    let mut req = [0u8; 1536];
    let n = emit_udp_frame(&mut req, &ep, &payload).unwrap();
    let mut resp = [0u8; 1536];
    let m = server
        .reply(&req[..n], &mut resp)
        .expect("the request is answered");
    let d = UdpDatagram::parse(&resp[..m]).unwrap();
    assert_eq!(
        d.endpoints,
        ep.reversed(),
        "the reply goes back to the sender"
    );
    python(&["--parse", &hex(d.payload)])
}

#[test]
fn the_python_client_can_set_get_and_delete() {
    let kv = KvServer::new(&ServerConfig {
        store: StoreConfig {
            log_bytes: 1 << 20,
            buckets: 1024,
        },
        ..Default::default()
    })
    .unwrap();
    let host = Host::new(PORT_MAC, &[IpAddr::V4(SERVER_IP)]);
    let mut server = Hosted::new(host, kv);
    let Some(out) = round_trip(&mut server, &["set", "hello", "world"]) else {
        test_skips::skipped("python3 is not installed");
        return;
    };
    // (op, status, opaque, value)
    assert_eq!(out, "[(2, 'Success', 1, b'')]");
    assert_eq!(
        round_trip(&mut server, &["get", "hello"]).unwrap(),
        "[(1, 'Success', 1, b'world')]"
    );
    // A key of another length than 8 takes the hash's other path.
    let long = "a-key-of-twenty-one-b";
    assert_eq!(
        round_trip(&mut server, &["set", long, "v2"]).unwrap(),
        "[(2, 'Success', 1, b'')]"
    );
    assert_eq!(
        round_trip(&mut server, &["get", long]).unwrap(),
        "[(1, 'Success', 1, b'v2')]"
    );
    assert_eq!(
        round_trip(&mut server, &["delete", "hello"]).unwrap(),
        "[(3, 'Success', 1, b'')]"
    );
    assert_eq!(
        round_trip(&mut server, &["get", "hello"]).unwrap(),
        "[(1, 'NotFound', 1, b'')]"
    );
    let st = server.app.stats();
    assert_eq!((st.requests, st.errors, st.sets), (6, 0, 2));
}

/// The IPv4 fragments a kernel with a 1500-byte MTU makes of `frame` (an
/// Ethernet frame holding one IPv4 datagram without options).
fn fragments(frame: &[u8]) -> Vec<Vec<u8>> {
    const MTU_PAYLOAD: usize = 1480;
    let ip_payload = &frame[34..];
    let mut out = Vec::new();
    for (i, chunk) in ip_payload.chunks(MTU_PAYLOAD).enumerate() {
        let mut f = frame[..34].to_vec();
        f.extend_from_slice(chunk);
        let total = (20 + chunk.len()) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        let more = if (i + 1) * MTU_PAYLOAD < ip_payload.len() {
            0x2000
        } else {
            0
        };
        let off = (i * MTU_PAYLOAD / 8) as u16 | more;
        f[20..22].copy_from_slice(&off.to_be_bytes());
        f[24..26].fill(0);
        let sum: u32 = f[14..34]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let sum = (sum & 0xFFFF) + (sum >> 16);
        let sum = !(((sum & 0xFFFF) + (sum >> 16)) as u16);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        out.push(f);
    }
    out
}

#[test]
fn a_datagram_larger_than_the_mtu_arrives_as_fragments_and_is_counted() {
    let kv = KvServer::new(&ServerConfig {
        store: StoreConfig {
            log_bytes: 1 << 20,
            buckets: 1024,
        },
        ..Default::default()
    })
    .unwrap();
    let host = Host::new(PORT_MAC, &[IpAddr::V4(SERVER_IP)]);
    let mut server = Hosted::new(host, kv);
    let value = "v".repeat(2000);
    let Some(dump) = python(&["--dump", "set", "big", &value]) else {
        test_skips::skipped("python3 is not installed");
        return;
    };
    let payload = unhex(&dump);
    assert!(payload.len() > 2000);
    let ep = Endpoints {
        src_mac: CLIENT_MAC,
        dst_mac: PORT_MAC,
        src_ip: CLIENT_IP,
        dst_ip: SERVER_IP,
        src_port: 47_124,
        dst_port: 9000,
    };
    // The whole datagram as one (too large) frame: headers for an empty
    // payload, then the lengths set for this one (no UDP checksum).
    let mut whole = vec![0u8; 64];
    let h = emit_udp_frame(&mut whole, &ep, &[]).unwrap();
    whole.truncate(h);
    let ip_len = (h - 14 + payload.len()) as u16;
    whole[16..18].copy_from_slice(&ip_len.to_be_bytes());
    whole[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    whole[40..42].fill(0);
    whole.extend_from_slice(&payload);
    let frags = fragments(&whole);
    assert_eq!(frags.len(), 2);
    let mut resp = [0u8; 1536];
    for f in &frags {
        assert!(f.len() <= 1514);
        assert_eq!(
            server.reply(f, &mut resp),
            None,
            "a fragment is not answered"
        );
    }
    let st = *server.app.stats();
    assert_eq!(
        (st.frames, st.drop_fragment, st.drops(), st.responses),
        (2, 2, 2, 0)
    );
    // The server's JSON names the cause.
    let json = serde_json::to_value(st).unwrap();
    assert_eq!(json["drop_fragment"], 2);
    assert_eq!(json["drop_not_udp"], 0);
    // A datagram that fits is still answered.
    assert_eq!(
        round_trip(&mut server, &["get", "big"]).unwrap(),
        "[(1, 'NotFound', 1, b'')]"
    );
}
