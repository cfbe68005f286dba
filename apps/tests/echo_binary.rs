//! The `echo` binary serves a running device on either interface: every
//! frame the NIC's generator sends comes back with its echo byte
//! incremented, which the generator verifies.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

#[test]
fn echo_serves_both_interfaces() {
    for iface in ["enso", "packetized"] {
        let dir = tempfile::tempdir().unwrap();
        let nic = common::listening_device(
            dir.path(),
            "echobin",
            &["generator:size=64,flows=8,pps=200000"],
        );
        let out = Command::new(env!("CARGO_BIN_EXE_echo"))
            .args(["--device", "echobin", "--dir"])
            .arg(dir.path())
            .args(["--interface", iface, "--queues", "2"])
            .args(["--duration-s", "0.5", "--progress-s", "0", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{iface}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["interface"], iface);
        let frames = v["frames"].as_u64().unwrap();
        assert!(frames > 0, "{iface}: no frames in 0.5 s");
        assert_eq!(v["echoed"].as_u64(), Some(frames), "{iface}: {v}");
        assert_eq!(v["other"].as_u64(), Some(0), "{iface}: {v}");
        // The frames sent back last reach the generator once the engine
        // has stepped again.
        let deadline = Instant::now() + Duration::from_secs(10);
        let g = loop {
            let g = nic.stats().ports[0].generator.clone().expect("a generator");
            if g.returned >= frames.saturating_sub(4096) || Instant::now() > deadline {
                break g;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(
            (g.corrupt, g.duplicate, g.foreign),
            (0, 0, 0),
            "{iface}: {g:?}"
        );
        assert!(
            g.returned >= frames.saturating_sub(4096) && g.returned <= frames,
            "{iface}: {} returned of {frames} echoed",
            g.returned
        );
    }
}
