//! The `nic-emu` binary with a pcap port reading capture files made by
//! another tool (scapy, through `tests/malformed/make_captures.py`): a file
//! the port cannot use ends the run at start with exit status 1 and one
//! line naming the port, the file and (where there is one) the record; a
//! file it can use runs. No run panics or hangs (each is bounded). What
//! the port does with each file's frames is checked, frame by frame, in
//! the workspace's tests (`tests/tests/malformed_pcap.rs`).
//!
//! Needs python3 and scapy (Debian: `python3-scapy`); without them the
//! test records why it skipped and passes, except under `CI=true`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nic-emu");

#[path = "../../tests/malformed/scapy.rs"]
mod scapy;
use scapy::scapy_missing;

/// Runs `nic-emu run` with `file` as port 0's RX file for at most 0.2 s
/// of replay, killing it (and failing) after 20 s; its status and stderr.
fn run_with(file: &Path, dir: &Path) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(BIN)
        .args(["run", "--name", &format!("mf{}", std::process::id())])
        .arg("--dir")
        .arg(dir)
        .arg("--port")
        .arg(format!("pcap:rx={}", file.display()))
        .args(["--duration-s", "0.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} still running after 20 s", file.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status, err)
}

#[test]
fn scapys_captures_start_a_pcap_port_or_are_one_line_naming_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("caps");
    if let Some(why) = scapy_missing(&caps) {
        test_skips::missing(why);
        return;
    }
    // The files the port refuses, and what the line says after the file.
    let refused = [
        ("runt_13.pcap", "record 2: a frame of 13 bytes"),
        ("jumbo.pcap", "record 2: a frame of 9000 bytes"),
        ("truncated_record.pcap", "record 3: truncated"),
        ("truncated.pcapng", "block after record 2: truncated"),
        ("raw_ip.pcapng", "interface 0 has link type 228 (IPV4)"),
        ("truncated_record_header.pcap", "record 3: truncated"),
        ("raw_ip.pcap", "link type 101 (RAW)"),
        ("linux_sll.pcap", "link type 113 (LINUX_SLL)"),
        ("text.txt", "not a capture file (magic 0x54686973;"),
        ("empty.pcap", "not a capture file (shorter than any header)"),
        ("random.bin", "not a capture file (magic 0x"),
        ("header_cut.pcap", "bad pcap header: truncated"),
        ("header_only.pcap", "holds no frames"),
    ];
    let mut files: Vec<_> = std::fs::read_dir(&caps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 29, "{files:?}");
    let mut seen = 0;
    for file in files {
        let name = file.file_name().unwrap().to_str().unwrap();
        let (status, err) = run_with(&file, dir.path());
        assert!(!err.contains("panicked"), "{name}: {err}");
        match refused.iter().find(|(n, _)| *n == name) {
            Some((_, want)) => {
                seen += 1;
                assert_eq!(status.code(), Some(1), "{name}: {err}");
                assert_eq!(err.lines().count(), 1, "{name}: {err}");
                let prefix = format!("nic-emu: port 0: {}: {want}", file.display());
                assert!(err.starts_with(&prefix), "{name}: {err}");
            }
            None => assert!(status.success(), "{name}: {err}"),
        }
    }
    assert_eq!(seen, refused.len());
}
