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
