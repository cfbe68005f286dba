//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};
use pktgen::pcap::CaptureWriter;

/// A device with one port cabled to itself (`delay_ns` each way) in a
/// directory of its own.
pub fn self_loop(dir: &Path, delay_ns: u64) -> Nic {
    let mut cfg = DeviceConfig::new(
        format!("t{}", std::process::id()),
        WireConfig::Cable { peer: 0, delay_ns },
    );
    cfg.dir = dir.into();
    Nic::start(cfg, RunOptions::default()).expect("device starts")
}

/// Test frames `(kind, len)`, sequence numbers from 0.
pub fn frames(spec: &[(FrameKind, usize)]) -> Vec<Vec<u8>> {
    let tf = TestFrames::new(8, 0);
    spec.iter()
        .enumerate()
        .map(|(i, &(kind, len))| {
            let mut buf = vec![0u8; 1536];
            let n = tf.build(kind, i as u64, i as u32 % 8, len, &mut buf);
            buf.truncate(n);
            buf
        })
        .collect()
}

/// Writes `frames` to a pcap file.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> PathBuf {
    let mut w = CaptureWriter::create(path).expect("create pcap");
    for (i, f) in frames.iter().enumerate() {
        w.write(Duration::from_micros(i as u64), f)
            .expect("write pcap");
    }
    w.finish().expect("flush pcap");
    path.into()
}

/// Reads every frame of a pcap file with the pcap-file crate itself.
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let f = std::fs::File::open(path).expect("open capture");
    let mut r = pcap_file::pcap::PcapReader::new(f).expect("a pcap file");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("a whole record");
        assert_eq!(p.orig_len as usize, p.data.len(), "no snap length");
        out.push(p.data.into_owned());
    }
    out
}

/// The RTT the NIC wrote at `offset`.
pub fn rtt_at(frame: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(frame[offset..offset + 4].try_into().unwrap())
}

/// Reads an EnsōGen CSV as Ensō's Python frontend does (`csv.DictReader`,
/// then `int(v)` on every value of every row, at least three rows): the
/// header's columns and each row's values, or why that reader would fail.
pub fn read_ensogen_csv(path: &Path) -> Result<(Vec<String>, Vec<Vec<u64>>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .ok_or("no header")?
        .split(',')
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate() {
        let vals: Vec<&str> = line.split(',').collect();
        if vals.len() != header.len() {
            return Err(format!(
                "row {}: {} values for {} columns",
                i + 1,
                vals.len(),
                header.len()
            ));
        }
        let row = vals
            .iter()
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("row {}: int({v:?}) fails", i + 1))
            })
            .collect::<Result<Vec<u64>, String>>()?;
        rows.push(row);
    }
    if rows.len() < 3 {
        return Err(format!("{} rows; at least 3 are needed", rows.len()));
    }
    Ok((header, rows))
}

/// Runs Ensō's Python frontend's reading of an EnsōGen CSV (its
/// `EnsoGenStats` parse and the checks `get_summary` makes) over `path`
/// with python3; `None` (after recording the skip) when python3 is not there.
/// Returns what the script printed: `rows rx_packets tx_packets`.
pub fn python_reads_ensogen_csv(path: &Path) -> Option<Result<String, String>> {
    const SCRIPT: &str = r#"
import sys
from collections import defaultdict
from csv import DictReader
stats = defaultdict(list)
n = 0
with open(sys.argv[1], newline="") as f:
    for row in DictReader(f):
        n += 1
        for k, v in row.items():
            stats[k].append(int(v))
if n < 3:
    raise RuntimeError("Not enough samples to calculate summary")
for k in ["rx_goodput_mbps", "rx_pkt_rate_kpps", "rx_bytes", "rx_packets",
          "tx_goodput_mbps", "tx_pkt_rate_kpps", "tx_bytes", "tx_packets"]:
    assert k in stats, k
rx_goodput = [g for g in stats["rx_goodput_mbps"] if g != 0][1:-1]
if "mean_rtt_ns" in stats:
    mean_rtts = stats["mean_rtt_ns"][1:-1]
    sum(mean_rtts) / len(mean_rtts)
print(n, stats["rx_packets"][-1], stats["tx_packets"][-1])
"#;
    let out = match std::process::Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(path)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            test_skips::skipped(format!(
                "the Python reading of the CSV: python3 cannot be run ({e})"
            ));
            return None;
        }
    };
    if out.status.success() {
        Some(Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    } else {
        Some(Err(String::from_utf8_lossy(&out.stderr).into_owned()))
    }
}
