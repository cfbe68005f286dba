//! Shared by the tests that replay the captures `make_captures.py` writes
//! (pktgen's, the pcap port's in-process and `nic-emu run`'s), each of
//! which includes this file as a module.

// Not every including test uses every helper.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// Writes scapy's captures into `dir`; what is missing (python3 or scapy)
/// when it cannot, for the caller to skip with (`test_skips::missing`).
pub fn scapy_missing(dir: &Path) -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/malformed/make_captures.py");
    match Command::new("python3").arg(&script).arg(dir).output() {
        Err(e) => Some(format!("python3 cannot be run ({e})")),
        Ok(o) if o.status.success() => None,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            if !err.contains("No module named 'scapy'") {
                panic!("{} failed: {err}", script.display());
            }
            Some("scapy is not installed (Debian: python3-scapy)".to_string())
        }
    }
}

/// The files in `dir` and the `names` a test has cases for, both sorted,
/// for the test to assert equal: a case for every file, and the other way
/// round.
pub fn written_and_named<'a>(
    dir: &Path,
    names: impl Iterator<Item = &'a str>,
) -> (Vec<String>, Vec<String>) {
    let mut written: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut named: Vec<String> = names.map(str::to_string).collect();
    named.sort();
    (written, named)
}
