//! Capture files made by another tool (scapy, through
//! `tests/malformed/make_captures.py`) replayed by the `pktgen` binary
//! through a device whose port is cabled to itself: every file is either
//! sent whole and comes back byte for byte (less the bytes after the
//! length its headers state, which the NIC does not send, counted in a
//! note), or refused with exactly one line naming the file and the record
//! and exit status 2. No run panics or hangs (each is bounded), and no
//! frame is lost without a count: frames sent = frames received + the
//! device's drops.
//!
//! Needs python3 and scapy (Debian: `python3-scapy`); without them the
//! test says why and passes, except under `CI=true`.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

#[path = "../../tests/malformed/scapy.rs"]
mod scapy;
use scapy::scapy_missing;

/// Runs `cmd` to its end, killing it (and failing) if it takes longer than
/// `limit`.
fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pktgen");
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
            panic!("{cmd:?} still running after {limit:?}: {err}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// What pktgen must do with a file.
enum Want {
    /// Send every frame once and receive it back: the frames of the file,
    /// each cut to the given length (`None`: whole), and these notes.
    Sent(Vec<Option<usize>>, Vec<&'static str>),
    /// Refuse it: exit status 2, and this one line after `pktgen: FILE: `.
    Refused(&'static str),
}

/// The frames of a capture, read with pcap-file itself (pcap or pcapng),
/// as they were on the wire: a record cut by a snap length padded with
/// zeros to its original length, as pktgen sends it.
fn frames_of(path: &Path) -> Vec<Vec<u8>> {
    let f = std::fs::File::open(path).unwrap();
    let mut out = Vec::new();
    let mut push = |mut data: Vec<u8>, orig: u32| {
        data.resize(data.len().max(orig as usize), 0);
        out.push(data);
    };
    if path.extension().is_some_and(|e| e == "pcapng") {
        let mut r = pcap_file::pcapng::PcapNgReader::new(f).unwrap();
        while let Some(b) = r.next_block() {
            if let pcap_file::pcapng::Block::EnhancedPacket(p) = b.unwrap() {
                push(p.data.into_owned(), p.original_len);
            }
        }
    } else {
        // Raw records: pcap-file's own reader refuses an original length
        // above the snap length, which is what a snap length writes.
        let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
        while let Some(p) = r.next_raw_packet() {
            let p = p.unwrap();
            push(p.data.into_owned(), p.orig_len);
        }
    }
    out
}

fn cases() -> Vec<(&'static str, Want)> {
    use Want::{Refused, Sent};
    let whole = |n: usize| Sent(vec![None; n], vec![]);
    vec![
        ("ipv4_udp.pcap", whole(4)),
        ("ipv6_udp.pcap", whole(3)),
        ("nanosecond.pcap", whole(3)),
        ("big_endian.pcap", whole(2)),
        ("vlan.pcap", whole(3)),
        ("qinq.pcap", whole(3)),
        ("short_frames.pcap", whole(5)),
        ("dot3_snap.pcap", whole(1)),
        (
            "snapped.pcap",
            Sent(
                vec![None; 2],
                vec![
                    "1 of 2 frames of the pcap were cut short when captured (a snap length); \
                     they are sent padded with zeros to their original length",
                ],
            ),
        ),
        ("frames.pcapng", whole(3)),
        (
            "ipv4_ihl.pcap",
            Sent(
                vec![None; 3],
                vec![
                    "1 of 3 frames of the pcap are malformed IPv4 (version not 4, header \
                     length below 20 B or past the total length); they are sent as they are",
                ],
            ),
        ),
        (
            "ipv6_len_short.pcap",
            Sent(
                vec![None, Some(14 + 40 + 8), None],
                vec![
                    "1 of 3 frames of the pcap hold bytes after the length their headers \
                     state (100 B in all: Ethernet padding or trailers); they are sent \
                     without them, as the NIC sends frames",
                ],
            ),
        ),
        (
            "padded.pcap",
            Sent(
                vec![Some(42), Some(14 + 13), Some(46), None],
                vec![
                    "3 of 4 frames of the pcap hold bytes after the length their headers \
                     state (65 B in all: Ethernet padding or trailers); they are sent \
                     without them, as the NIC sends frames",
                ],
            ),
        ),
        (
            "runt_13.pcap",
            Refused("frame 2 is 13 bytes, shorter than an Ethernet header"),
        ),
        (
            "ipv4_len_long.pcap",
            Refused(
                "frame 2 is 100 bytes but its headers state a length of 1014; \
                 at most 100 (the bytes captured) is accepted",
            ),
        ),
        (
            "ipv4_len_short.pcap",
            Refused("frame 2: stated length is inconsistent with the headers"),
        ),
        (
            "ipv6_len_long.pcap",
            Refused(
                "frame 2 is 162 bytes but its headers state a length of 554; \
                 at most 162 (the bytes captured) is accepted",
            ),
        ),
        (
            "jumbo.pcap",
            Refused("frame 2 is 9000 bytes, more than the 1536 B the NIC sends"),
        ),
        (
            "truncated_record.pcap",
            Refused("record 3 is truncated (file cut short or corrupt length)"),
        ),
        (
            "truncated_record_header.pcap",
            Refused("record 3 is truncated (file cut short or corrupt length)"),
        ),
        (
            "truncated.pcapng",
            Refused("the block after record 2 is truncated (file cut short or corrupt length)"),
        ),
        (
            "raw_ip.pcapng",
            Refused("interface 0 has link type 228, not Ethernet (1)"),
        ),
        ("raw_ip.pcap", Refused("link type 101 is not Ethernet (1)")),
        (
            "linux_sll.pcap",
            Refused("link type 113 is not Ethernet (1)"),
        ),
        ("text.txt", Refused("not a pcap file (magic 0x54686973)")),
        (
            "empty.pcap",
            Refused("truncated file header (not a pcap file, or cut short)"),
        ),
        ("random.bin", Refused("")),
        (
            "header_cut.pcap",
            Refused("truncated file header (not a pcap file, or cut short)"),
        ),
        ("header_only.pcap", Refused("no frames to replay")),
    ]
}

#[test]
fn scapys_captures_are_sent_whole_or_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("caps");
    if let Some(why) = scapy_missing(&caps) {
        test_skips::missing(why);
        return;
    }
    // Every file the script wrote has a case here, and the other way round.
    let (written, named) = scapy::written_and_named(&caps, cases().iter().map(|(n, _)| *n));
    assert_eq!(written, named);

    // Port 0 cabled to itself, reachable by other processes.
    let device = format!("malformed-{}", std::process::id());
    let mut cfg = DeviceConfig::new(
        device.clone(),
        WireConfig::Cable {
            peer: 0,
            delay_ns: 0,
        },
    );
    cfg.dir = dir.path().into();
    let run = RunOptions {
        listen: true,
        ..Default::default()
    };
    let nic = Nic::start(cfg, run).unwrap();
    for (name, want) in cases() {
        let file = caps.join(name);
        let back = dir.path().join(format!("{name}.back.pcap"));
        let json = dir.path().join(format!("{name}.json"));
        let before = nic.stats();
        let count = match &want {
            Want::Sent(lens, _) => lens.len(),
            Want::Refused(_) => 1,
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pktgen"));
        cmd.arg(&file)
            .args(["--device", &device, "--dir"])
            .arg(dir.path())
            .args(["--count", &count.to_string(), "--queues", "1"])
            .args(["--rate", "100Mbps", "--capture"])
            .arg(&back)
            .arg(format!("--json={}", json.display()));
        let out = run_bounded(cmd, Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains("panicked"), "{name}: {err}");
        match want {
            Want::Refused(msg) => {
                assert_eq!(out.status.code(), Some(2), "{name}: {err}");
                let lines: Vec<&str> = err.lines().collect();
                assert_eq!(lines.len(), 1, "{name}: {err}");
                let msg = if name == "random.bin" {
                    let b = std::fs::read(&file).unwrap();
                    let magic = u32::from_be_bytes(b[..4].try_into().unwrap());
                    format!("not a pcap file (magic {magic:#010x})")
                } else {
                    msg.to_string()
                };
                assert_eq!(
                    lines[0],
                    format!("pktgen: {}: {msg}", file.display()),
                    "{name}"
                );
                assert!(out.stdout.is_empty(), "{name}");
                assert!(!back.exists(), "{name}: refused, yet a capture was made");
                // Nothing reached the device.
                let after = nic.stats();
                assert_eq!(
                    after.ports[0].counters.tx_frames, before.ports[0].counters.tx_frames,
                    "{name}"
                );
            }
            Want::Sent(lens, notes) => {
                assert!(out.status.success(), "{name}: {err}");
                let sent: Vec<Vec<u8>> = frames_of(&file)
                    .into_iter()
                    .zip(&lens)
                    .map(|(f, l)| f[..l.unwrap_or(f.len())].to_vec())
                    .collect();
                assert_eq!(sent.len(), lens.len(), "{name}: frames in the file");
                // With one queue, frames come back in the order sent.
                let got = common::read_pcap(&back);
                assert_eq!(got, sent, "{name}: frames back");
                let found: Vec<&str> = err
                    .lines()
                    .filter_map(|l| l.strip_prefix("pktgen: note: "))
                    .filter(|l| l.contains("frames of the pcap"))
                    .collect();
                assert_eq!(found, notes, "{name}: {err}");
                let r: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
                let n = sent.len() as u64;
                let bytes: u64 = sent.iter().map(|f| f.len() as u64).sum();
                assert_eq!(r["totals"]["tx"]["packets"], n, "{name}: {r}");
                assert_eq!(r["totals"]["rx"]["packets"], n, "{name}: {r}");
                assert_eq!(r["totals"]["tx"]["bytes"], bytes, "{name}");
                assert_eq!(r["totals"]["rx"]["bytes"], bytes, "{name}");
                assert_eq!(r["loss"]["lost"], 0, "{name}");
                // The device agrees: as many frames out and in, no drops.
                let after = nic.stats();
                let (a, b) = (&after.ports[0].counters, &before.ports[0].counters);
                assert_eq!(a.tx_frames - b.tx_frames, n, "{name}");
                assert_eq!(a.rx_frames - b.rx_frames, n, "{name}");
                assert_eq!(
                    after.total_drops(),
                    before.total_drops(),
                    "{name}: {:?}",
                    after.drops()
                );
            }
        }
    }
    let s = nic.stop();
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
}
