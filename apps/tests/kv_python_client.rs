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
        eprintln!("skipped: python3 is not installed");
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
