//! `bench soak`: a short run accounts for every frame, and a wrong argument
//! is refused in one line.

use std::process::Command;

use serde_json::Value;

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} is not a count: {v}"))
}

#[test]
fn a_short_soak_accounts_for_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("soak");
    let r = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "soak",
            "--duration-s",
            "3",
            "--churn-ms",
            "100",
            "--json",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "stdout {stdout}\nstderr {stderr}");
    assert!(
        stderr.is_empty(),
        "--json prints nothing on stderr: {stderr}"
    );
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");

    let frames = u(&v, "frames");
    let verified = u(&v, "verified");
    let dropped = u(&v, "dropped_total");
    let elapsed = v["elapsed_s"].as_f64().unwrap();
    assert!((2.9..10.0).contains(&elapsed), "{elapsed}");
    // Even a slow, shared machine sends more than this in 3 s; no emulated
    // NIC sends 100 Mpps.
    assert!(frames > 10_000, "{frames}");
    assert!((frames as f64) < 100e6 * elapsed, "{frames}");
    assert!(verified > 0 && verified <= frames, "{verified} of {frames}");

    // Every frame is verified back or counted under a cause.
    assert_eq!(v["unexplained_loss"].as_i64(), Some(0), "{v}");
    assert_eq!(verified + dropped, frames, "{v}");
    let causes = v["dropped"].as_object().unwrap();
    let sum: u64 = causes.values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(sum, dropped, "{causes:?}");
    for cause in [
        "pipe_full",
        "no_match",
        "rx_unread_on_detach",
        "app_tx_ring_full",
    ] {
        assert!(causes.contains_key(cause), "{cause} missing: {causes:?}");
    }
    for bad in ["corrupt", "duplicates", "foreign"] {
        assert_eq!(u(&v, bad), 0, "{bad}: {v}");
    }
    assert_eq!(v["passed"], true);
    assert_eq!(v["drained"], true);

    // Per port, the generators' counts add up to the totals.
    let ports = v["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2);
    assert_eq!(ports.iter().map(|p| u(p, "frames")).sum::<u64>(), frames);
    assert_eq!(
        ports.iter().map(|p| u(p, "verified")).sum::<u64>(),
        verified
    );
    assert!(ports.iter().all(|p| u(p, "verified") > 0), "{ports:?}");

    // Churn: at most one replacement per thread every 100 ms.
    let cycles = u(&v, "attach_cycles");
    assert!(cycles >= 1, "{cycles}");
    assert!((cycles as f64) <= 2.0 * (elapsed * 10.0 + 1.0), "{cycles}");
    assert_eq!(
        u(&v, "graceful_detaches") + u(&v, "abrupt_detaches"),
        cycles
    );
    // The applications' frames: what they handled, left unread and dropped
    // is what the NIC delivered to them.
    let roles = v["roles"].as_array().unwrap();
    assert_eq!(roles.len(), 3, "{roles:?}");
    let unread: u64 = roles.iter().map(|r| u(r, "unread_on_detach")).sum();
    assert_eq!(unread, causes["rx_unread_on_detach"].as_u64().unwrap());
    let attached: u64 = roles.iter().map(|r| u(r, "attached")).sum();
    assert_eq!(attached, u(&v, "applications") as u64 + cycles);
    assert!(roles.iter().all(|r| u(r, "handled") > 0), "{roles:?}");

    // The probe, as every experiment prints it.
    assert!(v["probe_rtt_ns"].as_f64().unwrap() > 0.0);
    assert!(v["probe_rtt_ns_after"].as_f64().unwrap() > 0.0);

    // The results directory.
    for f in ["config.json", "soak.json", "timeline.csv", "summary.md"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("PASS"), "{md}");
}

#[test]
fn wrong_arguments_fail_in_one_line() {
    for (args, line) in [
        (
            &["soak", "--sizes", "64-9000"][..],
            "bench: --sizes 64-9000: packet size 9000 outside 64..=1518 (wire size with FCS)\n",
        ),
        (
            &["soak", "--flows", "2"][..],
            "bench: invalid value '2' for '--flows <FLOWS>': 2 is not in 4..=65536\n",
        ),
    ] {
        let r = Command::new(env!("CARGO_BIN_EXE_bench"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(r.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&r.stderr), line, "{args:?}");
        assert!(r.stdout.is_empty());
    }
}
