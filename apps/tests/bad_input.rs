//! Bad input to the binaries is one line naming what is wrong, and exit
//! status 1, before any device is needed; what they print without a
//! device is JSON with --json.

use std::process::Command;

/// Runs `bin` with `args` against a device that does not exist; returns
/// its exit code and standard error.
fn run(bin: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin)
        .args(["--device", "none", "--dir"])
        .arg(dir.path())
        .args(["--duration-s", "1", "--progress-s", "0"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks that `err` is one line, `<who>: ...`, that contains `says`.
fn one_line(who: &str, err: &str, says: &str) {
    assert!(err.starts_with(&format!("{who}: ")), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(says), "{err} does not say {says:?}");
}

#[test]
fn an_empty_backend_list_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("backends.txt");
    std::fs::write(&list, "# none yet\n\n").unwrap();
    let (code, err) = run(
        env!("CARGO_BIN_EXE_maglev"),
        &["--backends", list.to_str().unwrap()],
    );
    assert_eq!(code, Some(1), "{err}");
    one_line("maglev", &err, &format!("{}: no backends", list.display()));
}

#[test]
fn a_table_size_that_is_not_prime_names_the_flag() {
    let (code, err) = run(
        env!("CARGO_BIN_EXE_maglev"),
        &["--backend-count", "4", "--table-size", "1000"],
    );
    assert_eq!(code, Some(1), "{err}");
    one_line(
        "maglev",
        &err,
        "--table-size: table size 1000 is not a prime",
    );
}

#[test]
fn negative_shares_and_exponents_are_checked_not_taken_for_flags() {
    for (who, bin, args, says) in [
        (
            "telemetry",
            env!("CARGO_BIN_EXE_telemetry"),
            ["--threshold", "-1"],
            "threshold -1 is outside [0, 1]",
        ),
        (
            "telemetry",
            env!("CARGO_BIN_EXE_telemetry"),
            ["--probability", "-0.5"],
            "sampling probability -0.5 is outside",
        ),
        (
            "kv-client",
            env!("CARGO_BIN_EXE_kv-client"),
            ["--zipf", "-1"],
            "Zipf exponent -1 is not a positive finite number",
        ),
        (
            "kv-client",
            env!("CARGO_BIN_EXE_kv-client"),
            ["--get-ratio", "-0.5"],
            "GET ratio -0.5 is outside 0..=1",
        ),
    ] {
        let (code, err) = run(bin, &args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        one_line(who, &err, says);
    }
}

#[test]
fn logmon_lists_its_patterns_as_json_with_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_logmon"))
        .args(["--list-patterns", "--services", "sshd", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = v.as_array().unwrap();
    assert!(!list.is_empty());
    for p in list {
        assert!(p["name"].as_str().unwrap().starts_with("sshd-"), "{p}");
        assert!(p["regex"].as_str().is_some(), "{p}");
    }
    // Without --json, one tab-separated line per pattern.
    let out = Command::new(env!("CARGO_BIN_EXE_logmon"))
        .args(["--list-patterns", "--services", "sshd"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), list.len());
    assert!(text.lines().all(|l| l.contains('\t')), "{text}");
}

#[test]
fn log_client_names_a_log_file_it_cannot_send() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, b"").unwrap();
    let missing = dir.path().join("missing.log");
    for (file, says) in [
        (&empty, format!("{}: the log is empty", empty.display())),
        (&missing, format!("{}: No such file", missing.display())),
    ] {
        let (code, err) = run(
            env!("CARGO_BIN_EXE_log-client"),
            &["--file", file.to_str().unwrap()],
        );
        assert_eq!(code, Some(1), "{err}");
        one_line("log-client", &err, &says);
    }
}
