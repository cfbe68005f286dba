//! The emulated NIC on real Linux interfaces, with the kernel's network
//! stack as the peer: `echo --reflect --ip` on a port wired to one end of
//! a veth pair (`afpacket:`) or to a TAP device (`tap:`) answers ping over
//! IPv4 and IPv6 with no static neighbour entry, and sends back every UDP
//! datagram (18 to 1472 B, IPv4 and IPv6) a kernel socket sends it, byte
//! for byte.
//!
//! Each test makes its own network namespaces (and veth pair or TAP
//! device), with unique names, sends traffic only inside them, and removes
//! them when done. They need root, `ip`, `ethtool`, `ping` and `python3`:
//! without them they record why (test-skips) and pass, except under
//! `CI=true`, where a missing tool fails them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nic_emu::{DeviceConfig, Nic, RunOptions};
use rawsock::testnet::{preflight, Netns, Veth};

const TOOLS: &[&str] = &["ip", "ethtool", "ping", "python3"];

/// The UDP client: sends one datagram of each size to ADDR:PORT from a
/// kernel socket and waits (bounded) for it to come back unchanged; prints
/// one JSON line.
const CLIENT: &str = r#"
import json, socket, sys
addr, port, fam = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET6 if fam == "6" else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2.0)
sizes = list(range(18, 64)) + list(range(64, 1473, 97)) + [1472]
if fam == "6":
    sizes = [n for n in sizes if n <= 1452]
ok, bad = 0, []
for n in sizes:
    data = bytes((i * 7 + n) % 256 for i in range(n))
    s.sendto(data, (addr, port))
    try:
        back, frm = s.recvfrom(4096)
    except socket.timeout:
        bad.append([n, "timeout"]); continue
    if back == data and frm[0] == addr and frm[1] == port:
        ok += 1
    else:
        bad.append([n, len(back), str(frm)])
print(json.dumps({"sent": len(sizes), "ok": ok, "bad": bad}))
"#;

fn out(o: std::io::Result<std::process::Output>) -> (bool, String) {
    let o = o.expect("run a command");
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s += &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), s)
}

/// The echo server attached to device `name` in `dir`, reflecting, with
/// the given addresses.
fn echo_server(name: &str, dir: &std::path::Path, ips: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(["--device", name, "--dir"])
        .arg(dir)
        .args(["--reflect", "--ip", ips, "--json", "--duration-s", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start echo")
}

/// Waits until the echo server has attached (its pipe is a fallback).
fn wait_attached(nic: &Nic) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while nic.stats().apps.is_empty() {
        assert!(Instant::now() < deadline, "echo did not attach");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
}

/// Pings and UDP round trips from namespace `peer` to the NIC's
/// addresses; then stops the server and returns its JSON report.
fn exercise(peer: &Netns, nic: Nic, mut server: Child) -> serde_json::Value {
    for (fam, addr) in [("4", "10.77.0.2"), ("6", "fd77::2")] {
        let (ok, text) = out(peer.exec(
            "ping",
            &["-c", "3", "-i", "0.2", "-W", "2", &format!("-{fam}"), addr],
        ));
        assert!(
            ok,
            "ping -{fam} {addr} failed:\n{text}\n{:?}",
            nic.stats().ports[0]
        );
        assert!(text.contains("3 received"), "{text}");
        let (ok, text) = out(peer.exec("python3", &["-c", CLIENT, addr, "7777", fam]));
        assert!(ok, "UDP client failed:\n{text}");
        let v: serde_json::Value =
            serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(v["ok"], v["sent"], "IPv{fam}: {v}");
        assert!(v["sent"].as_u64().unwrap() > 50);
    }
    // The kernel learnt the port's MAC from the NIC's answers.
    let (_, neigh) = out(peer.ip(&["neigh", "show"]));
    let mac = enso_abi::devname::port_mac(&nic.stats().device, 0);
    let mac = mac.map(|b| format!("{b:02x}")).join(":");
    assert!(neigh.contains(&mac), "{mac} not in:\n{neigh}");
    // SAFETY: a signal to a child we spawned and have not waited for.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "echo did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = server.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let s = nic.stop();
    assert_eq!(s.ports[0].counters.drop_malformed, 0);
    report
}

fn check_report(r: &serde_json::Value) {
    let host = &r["host"];
    assert!(host["arp_replies"].as_u64().unwrap() >= 1, "{r}");
    assert!(host["nd_replies"].as_u64().unwrap() >= 1, "{r}");
    assert!(host["icmp_echo_replies"].as_u64().unwrap() >= 3, "{r}");
    assert!(host["icmpv6_echo_replies"].as_u64().unwrap() >= 3, "{r}");
    assert!(r["reflected"].as_u64().unwrap() > 100, "{r}");
}

fn device(name: &str, dir: &std::path::Path, port: &str) -> Result<Nic, String> {
    let wire = nic_emu::spec::parse_wire(port)?;
    let mut cfg = DeviceConfig::new(name.to_string(), wire);
    cfg.dir = dir.to_path_buf();
    cfg.pipe_size = 1 << 20;
    cfg.notif_ring_entries = 1024;
    Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())
}

fn configure_peer(ns: &Netns, iface: &str) {
    // A veth made for tests may have IPv6 switched off.
    let knob = format!("/proc/sys/net/ipv6/conf/{iface}/disable_ipv6");
    let (ok, text) = out(ns.exec("sh", &["-c", &format!("echo 0 > {knob}")]));
    assert!(ok, "{knob}: {text}");
    for args in [
        vec!["addr", "add", "10.77.0.1/24", "dev", iface],
        vec!["addr", "add", "fd77::1/64", "dev", iface, "nodad"],
        vec!["link", "set", iface, "up"],
    ] {
        let (ok, text) = out(ns.ip(&args));
        assert!(ok, "ip {args:?}: {text}");
    }
}

#[test]
fn echo_reflect_on_an_afpacket_port_answers_ping_and_udp_from_the_kernel() {
    if let Some(why) = preflight(TOOLS) {
        test_skips::skipped(why);
        return;
    }
    let nic_ns = Netns::new().unwrap();
    let peer = Netns::new().unwrap();
    let veth = Veth::new(&nic_ns, &peer).unwrap();
    configure_peer(&peer, veth.b());
    let dir = tempfile::tempdir().unwrap();
    let name = format!("rw-af-{}", std::process::id());
    let port = format!("afpacket:{}", veth.a());
    // The port's socket is made inside the NIC's namespace, where its end
    // of the veth pair is.
    let nic = nic_ns
        .enter(|| device(&name, dir.path(), &port))
        .unwrap()
        .unwrap();
    let server = echo_server(&name, dir.path(), "10.77.0.2,fd77::2");
    wait_attached(&nic);
    let r = exercise(&peer, nic, server);
    check_report(&r);
}

#[test]
fn echo_reflect_on_a_tap_port_answers_ping_and_udp_from_the_kernel() {
    if let Some(why) = preflight(TOOLS) {
        test_skips::skipped(why);
        return;
    }
    let ns = Netns::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let name = format!("rw-tap-{}", std::process::id());
    let tap = format!("rwt{}", std::process::id() % 100_000);
    // Made inside the namespace, so that the interface appears there and
    // nowhere else.
    let nic = ns
        .enter(|| device(&name, dir.path(), &format!("tap:{tap}")))
        .unwrap()
        .unwrap();
    configure_peer(&ns, &tap);
    let server = echo_server(&name, dir.path(), "10.77.0.2,fd77::2");
    wait_attached(&nic);
    let r = exercise(&ns, nic, server);
    check_report(&r);
}

#[test]
fn a_capture_tcpreplay_sends_into_the_peer_end_is_counted_exactly_by_telemetry() {
    if let Some(why) = preflight(&["ip", "ethtool", "tcpreplay"]) {
        test_skips::skipped(why);
        return;
    }
    let nic_ns = Netns::new().unwrap();
    let peer = Netns::new().unwrap();
    let veth = Veth::new(&nic_ns, &peer).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // 1000 IPv4/UDP frames of 16 flows, 60 to 1514 bytes, as a pcap.
    let n = 1000u64;
    let tf = nic_emu::testframe::TestFrames::new(16, 1);
    // pcap header: magic, version 2.4, zone, accuracy, snap length, Ethernet.
    let mut pcap = Vec::new();
    pcap.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    pcap.extend_from_slice(&[2, 0, 4, 0]);
    for v in [0u32, 0, 65535, 1] {
        pcap.extend_from_slice(&v.to_le_bytes());
    }
    let mut buf = [0u8; 1536];
    for i in 0..n {
        let len = 60 + (i as usize * 97) % 1455;
        let m = tf.build(
            nic_emu::testframe::FrameKind::Ipv4Udp,
            i,
            (i % 16) as u32,
            len,
            &mut buf,
        );
        for v in [1u32, i as u32, m as u32, m as u32] {
            pcap.extend_from_slice(&v.to_le_bytes());
        }
        pcap.extend_from_slice(&buf[..m]);
    }
    let file = dir.path().join("replay.pcap");
    std::fs::write(&file, &pcap).unwrap();
    let name = format!("rw-tr-{}", std::process::id());
    let port = format!("afpacket:{}", veth.a());
    let nic = nic_ns
        .enter(|| device(&name, dir.path(), &port))
        .unwrap()
        .unwrap();
    let server = Command::new(env!("CARGO_BIN_EXE_telemetry"))
        .args(["--device", &name, "--dir"])
        .arg(dir.path())
        .args(["--json", "--duration-s", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&nic);
    let (ok, text) = out(peer.exec(
        "tcpreplay",
        &[
            "-q",
            "--pps",
            "20000",
            "-i",
            veth.b(),
            file.to_str().unwrap(),
        ],
    ));
    assert!(ok, "tcpreplay: {text}");
    // Every frame arrives (bounded wait), then the server stops.
    let deadline = Instant::now() + Duration::from_secs(20);
    while nic.stats().ports[0].counters.rx_frames < n {
        assert!(Instant::now() < deadline, "{:?}", nic.stats().ports[0]);
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: a signal to a child we spawned and have not waited for.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let o = server.wait_with_output().unwrap();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let s = nic.stop();
    let p = &s.ports[0];
    assert_eq!(p.counters.rx_frames, n, "{p:?}");
    assert_eq!(p.wire_drops["kernel_drops"], 0);
    assert_eq!(r["packets"].as_u64(), Some(n), "{r}");
}
