//! `log-client --passes N` sends the log N times, however short the log.

use std::process::Command;

mod common;

/// Runs log-client against device `passes` in `d` with `args`; returns its
/// JSON report.
fn send(d: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_log-client"))
        .args([
            "--device",
            "passes",
            "--dir",
            d,
            "--progress-s",
            "0",
            "--json",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn passes_of_a_log_shorter_than_a_send_are_counted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let nic = common::listening_device(dir.path(), "passes", &["null"]);
    // About 10 packets a pass: one send (up to 64 packets) holds several.
    let one = send(d, &["--bytes", "10000"]);
    let (bytes, packets) = (
        one["log_bytes"].as_u64().unwrap(),
        one["packets"].as_u64().unwrap(),
    );
    for passes in [2u64, 3, 7] {
        let v = send(d, &["--bytes", "10000", "--passes", &passes.to_string()]);
        assert_eq!(v["passes"].as_u64(), Some(passes), "{v}");
        assert_eq!(v["log_bytes"].as_u64(), Some(passes * bytes), "{v}");
        assert_eq!(v["packets"].as_u64(), Some(passes * packets), "{v}");
    }
    drop(nic);
}
