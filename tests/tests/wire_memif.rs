//! The memif port against DPDK's own memif driver: `dpdk-testpmd` in io
//! forwarding mode sends back every frame an application sends out of the
//! port, in both roles, with the counts checked on both sides.
//!
//! Needs `dpdk-testpmd` and DPDK's memif PMD (Debian: `dpdk-dev`,
//! `librte-net-memif23`); without them the tests say why and pass, except
//! under `CI=true`, where they fail.

use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions};
use memif::testpmd::{missing_tool, TestPmd, ONE_AT_A_TIME};
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{DeviceConfig, Nic, RunOptions};

fn start(name: &str, port: &str) -> Nic {
    let wire = nic_emu::spec::parse_wire(port).unwrap();
    let mut cfg = DeviceConfig::new(format!("{name}-{}", std::process::id()), wire);
    cfg.pipe_size = 1 << 20;
    cfg.notif_ring_entries = 1024;
    Nic::start(cfg, RunOptions::default()).unwrap()
}

/// Waits until the port's memif peer is connected.
fn wait_connected(nic: &Nic, pmd: &mut TestPmd) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = nic.stats();
        if s.ports[0].wire_stats.get("connected") == Some(&1) {
            return;
        }
        pmd.assert_running();
        assert!(
            Instant::now() < deadline,
            "no memif connection: {:?}\n{}",
            s.ports[0],
            pmd.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `n` test frames of 60..1514 B out of port 0 and receives them
/// back (at most `window` in flight, so testpmd never has to drop), each
/// byte for byte; returns how many probe frames came back before.
fn exchange(nic: &Nic, n: u64, window: u64) -> u64 {
    let opts = DeviceOptions {
        tx_pipes: 1,
        ..Default::default()
    };
    let mut dev = Device::attach_nic(nic, opts).unwrap();
    let rx = dev.alloc_rx_pipe(true).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    // A DPDK peer posts its receive buffers when it first polls, which
    // may come a little after the connection: until one probe frame comes
    // back, send one every 10 ms (those that find no buffer are counted
    // as ring_full drops; the rest come back and are counted here).
    let tf = TestFrames::new(4, 3);
    let mut probe = [0u8; 60];
    let pn = tf.build(FrameKind::Ipv4Udp, u64::MAX, 0, 60, &mut probe);
    let probe = &probe[..pn];
    let mut probes = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    'probe: loop {
        let buf = dev.tx_buf(tx, probe.len()).unwrap();
        buf.copy_from_slice(probe);
        dev.send(tx, probe.len(), 0).unwrap();
        let until = Instant::now() + Duration::from_millis(10);
        while Instant::now() < until {
            let _ = dev.reap_completions();
            let n = dev.recv(rx).unwrap().len();
            if n > 0 {
                dev.free(rx, n).unwrap();
                probes += 1;
                break 'probe;
            }
        }
        assert!(Instant::now() < deadline, "no probe came back");
    }
    // Later probes still on their way back.
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        let _ = dev.reap_completions();
        let batch = dev.recv(rx).unwrap();
        let (n, k) = (batch.len(), batch.packets().count() as u64);
        if n > 0 {
            dev.free(rx, n).unwrap();
            probes += k;
        }
    }
    let drops_before: u64 = nic.stats().ports[0].wire_drops.values().sum();
    let mut want = vec![0u8; 1536];
    let (mut sent, mut got) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    while got < n {
        if sent < n && sent - got < window {
            let len = 60 + (sent as usize * 131) % 1455;
            let kind = if sent % 2 == 0 {
                FrameKind::Ipv4Udp
            } else {
                FrameKind::Ipv6Udp
            };
            let mut f = vec![0u8; 1536];
            let m = tf.build(kind, sent, (sent % 4) as u32, len, &mut f);
            if let Ok(buf) = dev.tx_buf(tx, m) {
                buf[..m].copy_from_slice(&f[..m]);
                dev.send(tx, m, 0).unwrap();
                sent += 1;
            }
        }
        let _ = dev.reap_completions();
        let n_bytes = {
            let batch = dev.recv(rx).unwrap();
            for p in batch.packets() {
                let len = 60 + (got as usize * 131) % 1455;
                let kind = if got % 2 == 0 {
                    FrameKind::Ipv4Udp
                } else {
                    FrameKind::Ipv6Udp
                };
                let m = tf.build(kind, got, (got % 4) as u32, len, &mut want);
                assert_eq!(p, &want[..m], "frame {got} came back different");
                got += 1;
            }
            batch.len()
        };
        if n_bytes > 0 {
            dev.free(rx, n_bytes).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "stalled at {got}/{n} (sent {sent}): {:?}",
            nic.stats().ports[0]
        );
    }
    let drops: u64 = nic.stats().ports[0].wire_drops.values().sum();
    assert_eq!(drops, drops_before, "{:?}", nic.stats().ports[0].wire_drops);
    probes
}

#[test]
fn a_memif_server_port_exchanges_frames_with_a_testpmd_client() {
    if let Some(why) = missing_tool() {
        test_skips::missing(why);
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("memif.sock");
    let nic = start(
        "memif-srv",
        &format!("memif:socket={},role=server", sock.display()),
    );
    let vdev = format!(
        "net_memif0,role=client,id=0,socket={},socket-abstract=no",
        sock.display()
    );
    let mut pmd = TestPmd::spawn("nic-srv", &vdev, "io");
    wait_connected(&nic, &mut pmd);
    let n = 10_000;
    let probes = exchange(&nic, n, 128);
    let (rx, tx, out) = pmd.stop();
    assert_eq!((rx, tx), (n + probes, n + probes), "testpmd:\n{out}");
    let s = nic.stop();
    let p = &s.ports[0];
    assert_eq!(p.counters.rx_frames, n + probes);
    assert_eq!(p.wire_stats["tx_frames"], n + probes);
}

#[test]
fn a_memif_client_port_exchanges_frames_with_a_testpmd_server() {
    if let Some(why) = missing_tool() {
        test_skips::missing(why);
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // DPDK's default socket is abstract; as a filesystem-socket server
    // testpmd is unreliable (its path disappears after a second).
    let name = format!("enso-memif-test-{}", std::process::id());
    let vdev = format!("net_memif0,role=server,id=0,socket={name},socket-abstract=yes");
    let mut pmd = TestPmd::spawn("nic-cli", &vdev, "io");
    let nic = start("memif-cli", &format!("memif:socket=@{name},role=client"));
    wait_connected(&nic, &mut pmd);
    let n = 10_000;
    let probes = exchange(&nic, n, 128);
    let (rx, tx, out) = pmd.stop();
    assert_eq!((rx, tx), (n + probes, n + probes), "testpmd:\n{out}");
    let s = nic.stop();
    let p = &s.ports[0];
    assert_eq!(p.counters.rx_frames, n + probes);
    assert_eq!(p.wire_stats["tx_frames"], n + probes);
}

/// How one testpmd-driven run went.
struct Driven {
    /// testpmd's accumulated counters.
    pmd_rx: u64,
    pmd_tx: u64,
    /// What the port's memif took from and put on the rings.
    memif_rx: u64,
    memif_tx: u64,
    /// Everything the NIC dropped, by cause.
    drops: std::collections::BTreeMap<&'static str, u64>,
}

/// Runs testpmd as the traffic source through an echo application on
/// the NIC for `secs` seconds: testpmd forwards in `fwd` mode (`flowgen`,
/// or `io` with `--tx-first`) `len`-byte frames; our port is the memif
/// server (testpmd the client) or the client.
fn testpmd_drives(ours_server: bool, fwd: &str, len: usize, secs: u64) -> Driven {
    use enso::app::{EnsoDriver, Verdict};
    use std::sync::atomic::{AtomicBool, Ordering};

    let tag = format!(
        "drv-{}-{fwd}-{len}",
        if ours_server { "srv" } else { "cli" }
    );
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("memif.sock");
    let abs = format!("enso-memif-{}-{tag}", std::process::id());
    let (port, vdev) = if ours_server {
        (
            format!("memif:socket={},role=server", sock.display()),
            format!(
                "net_memif0,role=client,id=0,socket={},socket-abstract=no",
                sock.display()
            ),
        )
    } else {
        (
            format!("memif:socket=@{abs},role=client"),
            format!("net_memif0,role=server,id=0,socket={abs},socket-abstract=yes"),
        )
    };
    let txpkts = format!("--txpkts={len}");
    let mut app: Vec<&str> = vec![&txpkts];
    if fwd == "io" {
        app.push("--tx-first");
    }
    let nic = start(&format!("memif-{tag}"), &port);
    let stop = AtomicBool::new(false);
    let ready = AtomicBool::new(false);
    std::thread::scope(|s| {
        let echo = s.spawn(|| {
            let opts = DeviceOptions {
                tx_pipes: 1,
                ..Default::default()
            };
            let dev = Device::attach_nic(&nic, opts).unwrap();
            let mut d = EnsoDriver::new(dev);
            d.add_fallback_pipes(1).unwrap();
            ready.store(true, Ordering::Release);
            let mut h = |_: &mut [u8]| Verdict::Forward;
            while !stop.load(Ordering::Acquire) {
                d.poll(&mut h).unwrap();
            }
            d.stats.clone()
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready.load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "echo did not attach");
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut pmd = TestPmd::spawn_full(&tag, &vdev, fwd, &[], &app);
        wait_connected(&nic, &mut pmd);
        std::thread::sleep(Duration::from_secs(secs));
        pmd.assert_running();
        let (pmd_rx, pmd_tx, out) = pmd.stop();
        // Let what is still in the NIC settle (bounded).
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut last = (u64::MAX, u64::MAX);
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let p = nic.stats().ports[0].clone();
            let now = (p.counters.rx_frames, p.counters.tx_frames);
            if now == last || Instant::now() > deadline {
                break;
            }
            last = now;
        }
        stop.store(true, Ordering::Release);
        let app_stats = echo.join().unwrap();
        let st = nic.stats();
        let p = &st.ports[0];
        let d = Driven {
            pmd_rx,
            pmd_tx,
            memif_rx: p.wire_stats["rx_frames"],
            memif_tx: p.wire_stats["tx_frames"],
            drops: st.drops().into_iter().filter(|(_, v)| *v > 0).collect(),
        };
        eprintln!(
            "{tag}: testpmd sent {pmd_tx}, got back {pmd_rx} ({:.0} frames/s back); \
             memif rx {} tx {}; echo app {:?}; NIC drops {:?}; wire drops {:?}",
            pmd_rx as f64 / secs as f64,
            d.memif_rx,
            d.memif_tx,
            app_stats,
            d.drops,
            p.wire_drops
        );
        if pmd_rx == 0 {
            eprintln!("testpmd output:\n{out}");
        }
        d
    })
}

/// Seconds each testpmd-driven case runs (`MEMIF_DRIVE_SECS` overrides,
/// 1..=60).
fn drive_secs() -> u64 {
    std::env::var("MEMIF_DRIVE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s| (1..=60).contains(s))
        .unwrap_or(10)
}

/// testpmd is the traffic source, through an echo application on the
/// NIC: flowgen (sends regardless) and io with `--tx-first` (32 frames
/// ping-pong), 64 and 1518 bytes, our port as server and as client. Every
/// frame testpmd sent came back, was dropped by the NIC under a named
/// cause, or was still in testpmd's receive ring when it stopped.
#[test]
fn testpmd_as_the_source_gets_every_frame_back_or_counted() {
    if let Some(why) = missing_tool() {
        test_skips::missing(why);
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let secs = drive_secs();
    let mut failures = Vec::new();
    for ours_server in [true, false] {
        for fwd in ["flowgen", "io"] {
            for len in [64, 1518] {
                let d = testpmd_drives(ours_server, fwd, len, secs);
                let case = format!(
                    "{} {fwd} {len} B",
                    if ours_server { "server" } else { "client" }
                );
                let dropped: u64 = d.drops.values().sum();
                // The ring between them loses nothing: what testpmd sent
                // is what the port took.
                if d.memif_rx != d.pmd_tx {
                    failures.push(format!(
                        "{case}: testpmd sent {} but the port received {}",
                        d.pmd_tx, d.memif_rx
                    ));
                }
                // Each frame the port took was put on the ring back or
                // dropped under a cause.
                if d.memif_rx != d.memif_tx + dropped {
                    failures.push(format!(
                        "{case}: received {} != sent back {} + dropped {dropped} {:?}",
                        d.memif_rx, d.memif_tx, d.drops
                    ));
                }
                // What testpmd did not read before it stopped is at most
                // one ring (1024 descriptors).
                let unread = d.memif_tx.checked_sub(d.pmd_rx);
                if unread.is_none_or(|u| u > 1024) {
                    failures.push(format!(
                        "{case}: sent back {} but testpmd received {}",
                        d.memif_tx, d.pmd_rx
                    ));
                }
                // Frames keep flowing for the whole run, both ways.
                let min = if fwd == "io" { 100 * secs } else { 1000 * secs };
                if d.pmd_rx < min {
                    failures.push(format!(
                        "{case}: only {} frames came back in {secs} s (want {min})",
                        d.pmd_rx
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
