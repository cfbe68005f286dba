//! `bench wire` on memif against DPDK's `dpdk-testpmd`: every setup runs,
//! and what it prints holds together. Needs `dpdk-testpmd` and DPDK's memif
//! driver (Debian: `dpdk-dev`, `librte-net-memif23`); without them the test
//! records why (test-skips) and passes, except under `CI=true`, where they
//! are installed.

use std::process::Command;

#[test]
fn wire_json_has_every_setup_with_rates_that_hold_together() {
    if let Some(why) = memif::testpmd::missing_tool() {
        test_skips::missing(why);
        return;
    }
    // Each testpmd busy-polls a core of two: nothing else of ours runs.
    let _one = memif::testpmd::ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "wire",
            "--backends",
            "memif",
            "--sizes",
            "64",
            "--nic",
            "stepped",
        ])
        .args(["--rounds", "1", "--trial-ms", "2000", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench wire failed: {stderr}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let rows = rows.as_array().expect("an array");
    let setups: Vec<&str> = rows.iter().map(|r| r["setup"].as_str().unwrap()).collect();
    assert_eq!(
        setups,
        ["dpdk", "emu-tx-stepped", "emu-rx-stepped"],
        "{rows:?}"
    );
    for r in rows {
        let mpps = r["mpps"].as_f64().unwrap();
        let offered = r["offered_mpps"].as_f64().unwrap();
        // Frames did flow, at a rate a 2-core machine can carry (64 B
        // packets: far below 100 Mpps).
        assert!(mpps > 0.01 && mpps < 100.0, "{r}");
        // A sink gets no more than its source sent. The two are sampled
        // differently (testpmd prints a rate once a second, the NIC's
        // application counts over the window), so a rate that varies
        // within the trial can put one above the other by a fraction; a
        // sink counting each frame twice, or bytes for frames, is far
        // beyond that.
        assert!(mpps <= offered * 1.5 + 0.01, "{r}");
        assert_eq!(r["backend"], "memif");
        assert_eq!(r["wire_size"], 64);
        assert!(r["probe_rtt_ns"].as_f64().unwrap() > 0.0, "{r}");
    }
    let dpdk = rows[0]["mpps"].as_f64().unwrap();
    for r in &rows[1..] {
        assert_eq!(r["compared_with"], "dpdk", "{r}");
        let ratio = r["ratio_to_dpdk"].as_f64().unwrap();
        let mine = r["mpps"].as_f64().unwrap();
        // One round: the ratio is that round's rates over each other.
        assert!((ratio - mine / dpdk).abs() < 1e-6 * ratio.max(1.0), "{r}");
        assert_eq!(r["goal"], 0.8);
        assert_eq!(r["goal_met"], ratio >= 0.8, "{r}");
    }
}
