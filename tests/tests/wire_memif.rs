//! The memif port against DPDK's own memif driver: `dpdk-testpmd` in io
//! forwarding mode sends back every frame an application sends out of the
//! port, in both roles, with the counts checked on both sides.
//!
//! Needs `dpdk-testpmd` and DPDK's memif PMD (Debian: `dpdk-dev`,
//! `librte-net-memif23`); without them the tests say why and pass, except
//! under `CI=true`, where they fail.

use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions};
use memif::testpmd::{have_testpmd, TestPmd, ONE_AT_A_TIME};
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
    if !have_testpmd() {
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
    if !have_testpmd() {
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
