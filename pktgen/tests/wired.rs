//! pktgen through a port on a real wire: the NIC's port 0 is a memif
//! server whose peer is DPDK's `dpdk-testpmd` forwarding every frame back
//! (io mode), so pktgen's frames leave the emulated NIC, cross DPDK and
//! come back, and their round-trip times are measured with the NIC's
//! timestamps. Needs `dpdk-testpmd` and DPDK's memif driver (Debian:
//! `dpdk-dev`, `librte-net-memif23`); without them the test says why and
//! passes, except under `CI=true`.

use std::process::Command;
use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions};
use memif::testpmd::{missing_tool, TestPmd, ONE_AT_A_TIME};
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{DeviceConfig, Nic, RunOptions};

/// Sends test frames out of port 0 until one comes back: a DPDK peer
/// posts its receive buffers only once it polls.
fn until_the_peer_answers(nic: &Nic) {
    let opts = DeviceOptions {
        tx_pipes: 1,
        ..Default::default()
    };
    let mut dev = Device::attach_nic(nic, opts).unwrap();
    let rx = dev.alloc_rx_pipe(true).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    let mut f = [0u8; 60];
    let n = TestFrames::new(1, 9).build(FrameKind::Ipv4Udp, 0, 0, 60, &mut f);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        dev.tx_buf(tx, n).unwrap().copy_from_slice(&f[..n]);
        dev.send(tx, n, 0).unwrap();
        let until = Instant::now() + Duration::from_millis(10);
        while Instant::now() < until {
            let _ = dev.reap_completions();
            let got = dev.recv(rx).unwrap().len();
            if got > 0 {
                dev.free(rx, got).unwrap();
                // Let the rest of the probes come back and be dropped.
                std::thread::sleep(Duration::from_millis(100));
                return;
            }
        }
        assert!(Instant::now() < deadline, "the memif peer never answered");
    }
}

#[test]
fn pktgen_measures_rtt_through_a_memif_port_and_dpdk() {
    if let Some(why) = missing_tool() {
        test_skips::missing(why);
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("memif.sock");
    let name = format!("pg-wired-{}", std::process::id());
    let wire =
        nic_emu::spec::parse_wire(&format!("memif:socket={},role=server", sock.display())).unwrap();
    let mut cfg = DeviceConfig::new(name.clone(), wire);
    cfg.dir = dir.path().to_path_buf();
    let nic = Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )
    .unwrap();
    let vdev = format!(
        "net_memif0,role=client,id=0,socket={},socket-abstract=no",
        sock.display()
    );
    let mut pmd = TestPmd::spawn("pktgen", &vdev, "io");
    until_the_peer_answers(&nic);
    pmd.assert_running();
    let drops_before: u64 = nic.stats().ports[0].wire_drops.values().sum();
    let n = 20_000u64;
    let out = Command::new(env!("CARGO_BIN_EXE_pktgen"))
        .args(["--device", &name, "--dir"])
        .arg(dir.path())
        .args([
            "--size",
            "64",
            "--rate",
            "100kpps",
            "--count",
            &n.to_string(),
        ])
        .args(["--rtt", "--json"])
        .output()
        .unwrap();
    let (_, _, pmd_out) = pmd.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pktgen failed: {stderr}\n{pmd_out}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(r["loss"]["lost"], 0, "{r}");
    assert_eq!(r["loss"]["received"], n, "{r}");
    assert_eq!(r["latency"]["count"], n, "every frame timed: {r}");
    // Round trips through DPDK are real ones: above zero and well below a
    // second.
    let p50 = r["latency"]["p50_ns"].as_u64().unwrap();
    assert!(p50 > 0 && p50 < 1_000_000_000, "p50 {p50} ns");
    // Frames the probes lost before the peer polled are the only drops.
    let drops: u64 = nic.stats().ports[0].wire_drops.values().sum();
    assert_eq!(drops, drops_before, "{r}");
    let s = nic.stop();
    assert!(s.ports[0].counters.rx_frames >= n);
}
