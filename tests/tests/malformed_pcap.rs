//! Capture files made by another tool (scapy, through
//! `tests/malformed/make_captures.py`) as the RX file of a pcap port
//! (`pcap:rx=FILE`), with an application echoing every frame it receives
//! back out to the port's TX file: every file is either replayed, its
//! frames delivered byte for byte (less the bytes after the length their
//! headers state, which the NIC does not write into a pipe) or counted as
//! malformed, or refused at start with exactly one line naming the file
//! and the record. Nothing is lost without a count: frames replayed =
//! frames delivered + the port's drops.
//!
//! Needs python3 and scapy (Debian: `python3-scapy`); without them the
//! test says why and passes, except under `CI=true`.

use std::path::Path;
use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions};
use nic_emu::backend::pcap::{Capture, PcapWire};
use nic_emu::backend::rate::ReplayRate;
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

#[path = "../malformed/scapy.rs"]
mod scapy;
use scapy::scapy_missing;

fn start(wire: PcapWire) -> Result<Nic, String> {
    let mut cfg = DeviceConfig::new(
        format!("malformed-{}", std::process::id()),
        WireConfig::Pcap(wire),
    );
    cfg.pipe_size = 4 << 20;
    cfg.notif_ring_entries = 1024;
    Nic::start(cfg, RunOptions::default()).map_err(|e| e.to_string())
}

/// Echoes every frame back unchanged until the port has replayed its file
/// and `want` frames have been echoed (or 20 s pass); returns how many were.
fn echo(nic: &Nic, want: u64) -> u64 {
    let mut dev = Device::attach_nic(nic, DeviceOptions::default()).unwrap();
    let start = Instant::now();
    let pipe = dev.alloc_rxtx_pipe(true).unwrap();
    let mut echoed = 0u64;
    let replayed = || nic.stats().ports[0].wire_stats["replay_passes"] == 1;
    while (echoed < want || !replayed()) && start.elapsed() < Duration::from_secs(20) {
        let n = {
            let batch = dev.recv(pipe).unwrap();
            echoed += batch.packets().count() as u64;
            batch.len()
        };
        if n > 0 {
            dev.send_and_free(pipe, n).unwrap();
        }
    }
    let until = Instant::now() + Duration::from_secs(5);
    while dev.tx_in_flight() > 0 && Instant::now() < until {
        let _ = dev.reap_completions();
    }
    echoed
}

/// The records of a capture, read with pcap-file itself (pcap or pcapng):
/// the bytes captured and the frame's original length.
fn records_of(path: &Path) -> Vec<(Vec<u8>, u32)> {
    let f = std::fs::File::open(path).unwrap();
    let mut out = Vec::new();
    if path.extension().is_some_and(|e| e == "pcapng") {
        let mut r = pcap_file::pcapng::PcapNgReader::new(f).unwrap();
        while let Some(b) = r.next_block() {
            if let pcap_file::pcapng::Block::EnhancedPacket(p) = b.unwrap() {
                out.push((p.data.into_owned(), p.original_len));
            }
        }
    } else {
        // Raw records: pcap-file's own reader refuses an original length
        // above the snap length, which is what a snap length writes.
        let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
        while let Some(p) = r.next_raw_packet() {
            let p = p.unwrap();
            out.push((p.data.into_owned(), p.orig_len));
        }
    }
    out
}

/// What the port must do with a file.
enum Want {
    /// Replay every record: each frame delivered (cut to the given length,
    /// `None`: whole) or, `Malformed`, counted in `drop_malformed`.
    Replayed(Vec<Frame>),
    /// Refuse to start: this one line after `FILE: `.
    Refused(&'static str),
}

#[derive(Clone, Copy)]
enum Frame {
    Whole,
    Cut(usize),
    Malformed,
}

fn cases() -> Vec<(&'static str, Want)> {
    use Frame::{Cut, Malformed, Whole};
    use Want::{Refused, Replayed};
    let whole = |n: usize| Replayed(vec![Whole; n]);
    vec![
        ("ipv4_udp.pcap", whole(4)),
        ("ipv6_udp.pcap", whole(3)),
        ("nanosecond.pcap", whole(3)),
        ("big_endian.pcap", whole(2)),
        ("vlan.pcap", whole(3)),
        ("qinq.pcap", whole(3)),
        ("short_frames.pcap", whole(5)),
        ("dot3_snap.pcap", whole(1)),
        // The port sends a record as captured (and counts it snapped): the
        // first, 64 of 242 bytes, is shorter than its IPv4 total length.
        ("snapped.pcap", Replayed(vec![Malformed, Whole])),
        ("frames.pcapng", whole(3)),
        ("ipv4_ihl.pcap", whole(3)),
        ("ipv6_len_short.pcap", Replayed(vec![Whole, Cut(62), Whole])),
        (
            "padded.pcap",
            Replayed(vec![Cut(42), Cut(14 + 13), Cut(46), Whole]),
        ),
        (
            "ipv4_len_long.pcap",
            Replayed(vec![Whole, Malformed, Whole]),
        ),
        (
            "ipv4_len_short.pcap",
            Replayed(vec![Whole, Malformed, Whole]),
        ),
        (
            "ipv6_len_long.pcap",
            Replayed(vec![Whole, Malformed, Whole]),
        ),
        (
            "runt_13.pcap",
            Refused("record 2: a frame of 13 bytes; the port takes 14 to 1536"),
        ),
        (
            "jumbo.pcap",
            Refused("record 2: a frame of 9000 bytes; the port takes 14 to 1536"),
        ),
        ("truncated_record.pcap", Refused("record 3: truncated")),
        (
            "truncated.pcapng",
            Refused("block after record 2: truncated"),
        ),
        (
            "raw_ip.pcapng",
            Refused(
                "interface 0 has link type 228 (IPV4); a pcap port takes Ethernet frames only \
                 (link type 1)",
            ),
        ),
        (
            "truncated_record_header.pcap",
            Refused("record 3: truncated"),
        ),
        (
            "raw_ip.pcap",
            Refused("link type 101 (RAW); a pcap port takes Ethernet frames only (link type 1)"),
        ),
        (
            "linux_sll.pcap",
            Refused(
                "link type 113 (LINUX_SLL); a pcap port takes Ethernet frames only (link type 1)",
            ),
        ),
        (
            "text.txt",
            Refused("not a capture file (magic 0x54686973; pcap and pcapng are read)"),
        ),
        (
            "empty.pcap",
            Refused("not a capture file (shorter than any header)"),
        ),
        ("random.bin", Refused("")),
        ("header_cut.pcap", Refused("bad pcap header: truncated")),
        ("header_only.pcap", Refused("holds no frames")),
    ]
}

#[test]
fn scapys_captures_are_replayed_counted_or_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("caps");
    if let Some(why) = scapy_missing(&caps) {
        test_skips::missing(why);
        return;
    }
    let (written, named) = scapy::written_and_named(&caps, cases().iter().map(|(n, _)| *n));
    assert_eq!(written, named, "a case for every file");

    for (name, want) in cases() {
        let file = caps.join(name);
        let out = dir.path().join(format!("{name}.out.pcap"));
        let wire = PcapWire {
            rx: Some(file.clone()),
            tx: Some(out.clone()),
            loops: Some(1),
            rate: ReplayRate::Max,
        };
        match want {
            Want::Refused(msg) => {
                let e = start(wire)
                    .err()
                    .unwrap_or_else(|| panic!("{name} started"));
                let msg = if name == "random.bin" {
                    let b = std::fs::read(&file).unwrap();
                    let magic = u32::from_be_bytes(b[..4].try_into().unwrap());
                    format!("not a capture file (magic {magic:#010x}; pcap and pcapng are read)")
                } else {
                    msg.to_string()
                };
                assert_eq!(e, format!("port 0: {}: {msg}", file.display()), "{name}");
            }
            Want::Replayed(frames) => {
                let records = records_of(&file);
                let snapped = records
                    .iter()
                    .filter(|(d, orig)| d.len() < *orig as usize)
                    .count() as u64;
                let records: Vec<Vec<u8>> = records.into_iter().map(|(d, _)| d).collect();
                assert_eq!(records.len(), frames.len(), "{name}: records");
                let delivered: Vec<Vec<u8>> = records
                    .iter()
                    .zip(&frames)
                    .filter_map(|(r, f)| match *f {
                        Frame::Whole => Some(r.clone()),
                        Frame::Cut(n) => Some(r[..n].to_vec()),
                        Frame::Malformed => None,
                    })
                    .collect();
                let malformed = frames
                    .iter()
                    .filter(|f| matches!(f, Frame::Malformed))
                    .count() as u64;
                let nic = start(wire).unwrap_or_else(|e| panic!("{name}: {e}"));
                let n = delivered.len() as u64;
                assert_eq!(echo(&nic, n), n, "{name}: frames delivered");
                let s = nic.stop();
                let p = &s.ports[0];
                let total = records.len() as u64;
                assert_eq!(p.wire_stats["replayed_frames"], total, "{name}");
                assert_eq!(p.wire_stats["snapped_records"], snapped, "{name}");
                assert_eq!(p.counters.rx_frames, total, "{name}");
                assert_eq!(p.counters.drop_malformed, malformed, "{name}");
                // Every other drop is zero: replayed = delivered + malformed.
                assert_eq!(s.total_drops(), malformed, "{name}: {:?}", s.drops());
                assert_eq!(p.counters.tx_frames, n, "{name}");
                assert_eq!(p.wire_stats["written_frames"], n, "{name}");
                let back = Capture::read(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
                let back: Vec<&[u8]> = (0..back.len()).map(|i| back.frame(i).0).collect();
                let want: Vec<&[u8]> = delivered.iter().map(Vec::as_slice).collect();
                assert_eq!(back, want, "{name}: frames written back");
            }
        }
    }
}
