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
