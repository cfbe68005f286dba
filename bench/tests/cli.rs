//! Wrong arguments: one line on stderr and status 2, before anything runs
//! or is written.

use std::process::Command;

#[test]
fn wrong_arguments_fail_in_one_line_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["all", "--cores", "0,0"],
            "--cores 0,0: both sides on core 0: give two distinct cores",
        ),
        (
            &["echo", "--cores", "0,0"],
            "--cores 0,0: both sides on core 0: give two distinct cores",
        ),
        (
            &[
                "echo",
                "--interface",
                "packetized",
                "--no-reference",
                "--evict-ahead-always",
            ],
            "--evict-ahead-always applies only to the enso interface's pipes, and \
             --interface selects packetized",
        ),
        (
            &["echo", "--ref-batch", "4", "--no-reference"],
            "--ref-batch sets the reference ring's batch, and --no-reference leaves the \
             reference ring out",
        ),
        (
            &["apps", "--apps", "maglev", "--log-patterns", "sshd"],
            "--log-patterns applies only to log_monitor, and --apps selects maglev",
        ),
        (
            &["apps", "--apps", "maglev", "--kv-batch", "4"],
            "--kv-batch applies only to kv, and --apps selects maglev",
        ),
        (
            &["cache", "--source", "cachegrind", "--cores", "0,0"],
            "--cores applies only to --source perf, and --source selects cachegrind",
        ),
        (
            &["latency", "--loads", "50,50"],
            "--loads: 50 is given twice",
        ),
        (
            &["wire", "--backends", "memif,tap"],
            "--backends: unknown backend \"tap\" (memif, afpacket)",
        ),
        (
            &["wire", "--nic", "stepped,stepped"],
            "--nic: stepped is given twice",
        ),
        (
            &["wire", "--sizes", "64,9000"],
            "packet size 9000 outside 64..=1518 (wire size with FCS)",
        ),
    ];
    for &(args, line) in cases {
        let r = Command::new(env!("CARGO_BIN_EXE_bench"))
            .args(args)
            .args(["--out", o])
            .output()
            .unwrap();
        assert_eq!(r.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&r.stderr),
            format!("bench: {line}\n"),
            "{args:?}"
        );
        assert!(r.stdout.is_empty(), "{args:?}");
        assert!(!out.exists(), "{args:?} wrote {o}");
    }
}

/// Device directories (in /dev/shm) whose names carry `pid`.
fn devices_of(pid: u32) -> Vec<String> {
    let pid = pid.to_string();
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("enso-") && n.contains(&pid))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_interrupted_apps_run_stops_cleanly_and_writes_no_results_directory() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Far longer than the test waits: the signal comes after the first
    // trial's line, whenever that is.
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "apps",
            "--apps",
            "maglev",
            "--maglev-flows",
            "16",
            "--rounds",
            "100",
            "--trial-ms",
            "50",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert_ne!(err.read_line(&mut line).unwrap(), 0, "ended early: {seen}");
        seen.push_str(&line);
        if line.contains("round 1 enso") {
            break;
        }
    }
    let pid = child.id();
    // SAFETY: kill(2) with a signal number has no memory effects; `pid` is
    // our child, which has not been waited for and so is not reused.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    err.read_to_string(&mut seen).unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");
    assert!(!seen.contains("panicked"), "{seen}");
    assert!(!out.exists(), "an interrupted run left {}", out.display());
    assert_eq!(devices_of(pid), Vec::<String>::new());
}

#[test]
fn predict_json_prints_rows_with_paper_numbers_and_sourced_parameters() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "predict",
            "--json",
            "--sizes",
            "64,1518",
            "--packets",
            "5000",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let with_paper: Vec<_> = rows.iter().filter(|r| r["paper"].is_number()).collect();
    assert!(with_paper.len() >= 8, "{}", with_paper.len());
    for r in &with_paper {
        assert!(r["predicted"].as_f64().unwrap().is_finite(), "{r}");
        assert!(r["error"].is_number() && r["bound_by"].is_string(), "{r}");
    }
    let params = v["parameters"].as_array().unwrap();
    assert!(params
        .iter()
        .all(|p| p["source"].as_str().is_some_and(|s| !s.is_empty())));
    assert!(v["held_out"].as_array().unwrap().len() == with_paper.len());
}
