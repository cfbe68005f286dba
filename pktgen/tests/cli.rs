//! The `pktgen` binary: errors are one clear line and a non-zero exit, and
//! runs against an in-process device write what they promise.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use nic_emu::testframe::FrameKind::{Ipv4Udp, Ipv6Udp};
use nic_emu::testframe::TestFrames;

fn pktgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pktgen"))
        .args(args)
        .output()
        .expect("run pktgen")
}

/// Fails with exactly one line on stderr, starting `pktgen: `, and no panic.
fn one_line_error(args: &[&str]) -> String {
    let out = pktgen(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{args:?}: {err}"
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    assert!(lines[0].starts_with("pktgen: "), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
    lines[0].to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn wrong_arguments() {
    assert!(one_line_error(&["--bogus"]).contains("--bogus"));
    assert!(one_line_error(&["--rate", "fast"]).contains("bad number in rate 'fast'"));
    assert!(one_line_error(&["--size", "10"]).contains("outside 64..=1540"));
    assert!(one_line_error(&["744", "1000"]).contains("'744' is not a pcap file"));
    assert!(one_line_error(&["--queues", "0"]).contains("--queues must be 1..=8192"));
    assert!(one_line_error(&["--in-process", "--port", "1"]).contains("--port does not apply"));
    assert!(one_line_error(&["--sizes", "64"]).contains("--sizes needs --zero-loss"));
    let out = pktgen(&["--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    // Help is not an error.
    let out = pktgen(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--zero-loss"));
}

#[test]
fn the_default_rate_is_the_most_the_nic_sends() {
    // 69 B frames (65 B in memory) are two flits each: 100 Gb/s of them
    // would be 1.4 flits per cycle. The default sends at one flit per
    // cycle, and says so; 100Gbps asked for in numbers is refused.
    let out = pktgen(&["--in-process", "--size", "69", "--count", "2000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pktgen: note: 100 Gb/s of these frames (140.4 Mpps) needs more than one flit per cycle; sending at the NIC's most, 100.0 Mpps"),
        "{err}"
    );
    assert!(!err.contains("above one flit per cycle"), "{err}");
    let m = one_line_error(&["--in-process", "--size", "69", "--rate", "100Gbps"]);
    assert_eq!(
        m,
        "pktgen: rate 100Gbps: 1.404 flits per cycle with these frames; \
         the NIC sends at most one: 71.200 Gb/s, 100.000 Mpps"
    );
    let out = pktgen(&["--in-process", "--size", "69", "--rate", "100Gbps"]);
    assert_eq!(out.status.code(), Some(2));
    // At 64 B, 100 Gb/s is under one flit per cycle: no note.
    let out = pktgen(&["--in-process", "--count", "2000"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("note: 100 Gb/s"));
}

#[test]
fn a_dash_is_standard_output_for_json_only() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--capture", "--save", "--rtt-hist"] {
        let out = Command::new(env!("CARGO_BIN_EXE_pktgen"))
            .args(["--in-process", "--count", "10", flag, "-"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "pktgen: {flag} -: only --json writes to standard output; \
                 give a file name (./- for a file called '-')\n"
            )
        );
        assert!(!dir.path().join("-").exists(), "{flag} made a file '-'");
    }
}

#[test]
fn missing_and_corrupt_pcaps() {
    let dir = tempfile::tempdir().unwrap();
    let m = one_line_error(&[s(&dir.path().join("none.pcap"))]);
    assert!(m.contains("none.pcap: cannot open"), "{m}");
    let garbage = dir.path().join("garbage.pcap");
    std::fs::write(&garbage, b"this is not a capture file at all").unwrap();
    assert!(one_line_error(&[s(&garbage), "744", "1000"]).contains("not a pcap file"));
    // A good pcap cut inside its last record: found when the frames load.
    let good = common::write_pcap(
        &dir.path().join("good.pcap"),
        &common::frames(&[(Ipv4Udp, 60), (Ipv4Udp, 300)]),
    );
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let m = one_line_error(&[s(&cut), "--in-process"]);
    assert!(m.contains("record 2 is truncated"), "{m}");
    let empty = dir.path().join("empty.pcap");
    std::fs::write(&empty, &bytes[..24]).unwrap();
    assert!(one_line_error(&[s(&empty)]).contains("no frames to replay"));
    // A record length far beyond the file.
    let mut huge = bytes.clone();
    huge[32..36].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let huge_path = dir.path().join("huge.pcap");
    std::fs::write(&huge_path, &huge).unwrap();
    let m = one_line_error(&[s(&huge_path), "--in-process"]);
    assert!(m.contains("record 1"), "{m}");
    // Frames the NIC cannot send.
    let big = common::write_pcap(&dir.path().join("big.pcap"), &[vec![0u8; 1600]]);
    let m = one_line_error(&[s(&big), "--in-process"]);
    assert!(m.contains("frame 1 is 1600 bytes"), "{m}");
    let runt = common::write_pcap(&dir.path().join("runt.pcap"), &[vec![0u8; 10]]);
    let m = one_line_error(&[s(&runt), "--in-process"]);
    assert!(m.contains("shorter than an Ethernet header"), "{m}");
    // Every bad pcap is bad input: exit status 2, as for the command line,
    // whether its file header or a record is wrong.
    for p in [
        dir.path().join("none.pcap"),
        garbage,
        cut,
        empty,
        huge_path,
        big,
        runt,
    ] {
        let out = pktgen(&[s(&p), "--in-process", "--count", "10"]);
        assert_eq!(out.status.code(), Some(2), "{}", p.display());
    }
}

#[test]
fn a_timestamp_past_the_smallest_pcap_frame_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = common::write_pcap(
        &dir.path().join("in.pcap"),
        &common::frames(&[(Ipv4Udp, 300), (Ipv4Udp, 60)]),
    );
    let hist = dir.path().join("rtt.txt");
    let args = [
        s(&pcap),
        "--in-process",
        "--count",
        "10",
        "--rtt-hist",
        s(&hist),
    ];
    for off in ["57", "60"] {
        let mut a = args.to_vec();
        a.extend(["--timestamp-offset", off]);
        let m = one_line_error(&a);
        assert!(
            m.starts_with(&format!(
                "pktgen: --timestamp-offset {off} puts the 4-byte timestamp"
            )) && m.ends_with("(60 B without FCS); give at most 56"),
            "{m}"
        );
        assert_eq!(pktgen(&a).status.code(), Some(2), "a refused command line");
        assert!(!hist.exists(), "refused before any output is made");
    }
    let mut a = args.to_vec();
    a.extend(["--timestamp-offset", "56"]);
    let out = pktgen(&a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn unknown_device_and_unwritable_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let m = one_line_error(&["--device", "nosuchnic", "--dir", s(dir.path())]);
    assert!(
        m.starts_with("pktgen: cannot attach to device 'nosuchnic'")
            && m.contains("is it running?"),
        "{m}"
    );
    let bad = dir.path().join("no/such/dir/out.csv");
    let m = one_line_error(&["--in-process", "--save", s(&bad)]);
    assert!(m.contains("out.csv") && m.contains("No such file"), "{m}");
    let m = one_line_error(&["--in-process", "--count", "10", "--rate", "1000Gbps"]);
    assert!(
        m.contains("the NIC sends at most one: 134.400 Gb/s, 200.000 Mpps"),
        "{m}"
    );
}

#[test]
fn pcap_through_an_echo_server_to_a_capture() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [60usize, 64, 100, 128, 256, 333, 512, 1024, 1514];
    let spec: Vec<_> = (0..200)
        .map(|i| (Ipv4Udp, sizes[i % sizes.len()]))
        .collect();
    let sent = common::frames(&spec);
    let pcap = common::write_pcap(&dir.path().join("in.pcap"), &sent);
    let cap = dir.path().join("out.pcap");
    let hist = dir.path().join("rtt.txt");
    let csv = dir.path().join("stats.csv");
    let json = dir.path().join("report.json");
    // EnsōGen's form: PCAP RATE_NUM RATE_DEN.
    let out = pktgen(&[
        s(&pcap),
        "1",
        "1000",
        "--in-process",
        "--count",
        "200",
        "--queues",
        "1",
        "--rtt-hist",
        s(&hist),
        "--capture",
        s(&cap),
        "--save",
        s(&csv),
        "--stats-delay",
        "20",
        "--json",
        s(&json),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("lost 0 of 200"), "{summary}");

    // Every frame came back once, changed only in the timestamp and the
    // echo byte.
    let got = common::read_pcap(&cap);
    assert_eq!(got.len(), 200);
    let echo = Ipv4Udp.echo_offset();
    let mut seen = [false; 200];
    for f in &got {
        let v = TestFrames::peek(f).expect("a test frame");
        let want = &sent[v.seq as usize];
        assert_eq!(f.len(), want.len());
        assert!(!seen[v.seq as usize], "frame {} twice", v.seq);
        seen[v.seq as usize] = true;
        for (i, (a, b)) in f.iter().zip(want.iter()).enumerate() {
            match i {
                18..=21 => {}
                i if i == echo => assert_eq!(*a, b.wrapping_add(1), "echo byte"),
                _ => assert_eq!(a, b, "frame {} byte {i}", v.seq),
            }
        }
        assert!(common::rtt_at(f, 18) > 0);
    }

    // The histogram file counts every frame received.
    let text = std::fs::read_to_string(&hist).unwrap();
    let total: u64 = text
        .lines()
        .map(|l| {
            let (v, n) = l.split_once(',').expect("rtt_ns,count");
            v.parse::<u64>().unwrap();
            n.parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(total, 200);

    // EnsōGen's CSV columns; the last row holds the totals.
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "rx_goodput_mbps,rx_tput_mbps,rx_pkt_rate_kpps,rx_bytes,rx_packets,\
         tx_goodput_mbps,tx_tput_mbps,tx_pkt_rate_kpps,tx_bytes,tx_packets,mean_rtt_ns"
    );
    let last: Vec<&str> = lines.last().unwrap().split(',').collect();
    let bytes: u64 = sent.iter().map(|f| f.len() as u64).sum();
    assert_eq!(last[3..5], [bytes.to_string(), "200".to_string()]);
    assert_eq!(last[8..10], [bytes.to_string(), "200".to_string()]);

    // The JSON report: configuration, totals, loss, latency, device.
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["config"]["rate"], "1/1000");
    assert_eq!(
        (j["limiter"]["num"].clone(), j["limiter"]["den"].clone()),
        (1.into(), 1000.into())
    );
    assert_eq!(j["config"]["count"], 200);
    assert_eq!(j["config"]["in_process"], true);
    assert_eq!(j["loss"]["lost"], 0);
    assert_eq!(j["totals"]["rx"]["packets"], 200);
    // Totals' rates are over the time sending and receiving took, which
    // ends before the run (and its wait for frames in flight) does. Either
    // may end first: sending ends when the last completion is reaped, which
    // can be after the last echo arrived.
    let send_ns = j["totals"]["send_ns"].as_u64().unwrap();
    let receive_ns = j["totals"]["receive_ns"].as_u64().unwrap();
    let run_ns = j["totals"]["t_ns"].as_u64().unwrap();
    assert!(
        send_ns > 0 && receive_ns > 0 && send_ns.max(receive_ns) <= run_ns,
        "{}",
        j["totals"]
    );
    let kpps = j["totals"]["tx"]["pkt_rate_kpps"].as_f64().unwrap();
    assert!((kpps - 200.0 / (send_ns as f64 / 1e9) / 1e3).abs() < 1e-6 * kpps);
    let secs = format!("in {:.3} s of sending", send_ns as f64 / 1e9);
    assert!(summary.contains(&secs), "{summary}");
    assert_eq!(j["latency"]["count"], 200);
    assert_eq!(j["clock"]["name"], "clock_monotonic");
    assert_eq!(j["device"]["total_drops"], 0);
    assert_eq!(j["device"]["ports"][0]["counters"]["tx_frames"], 200);
}

#[test]
fn json_on_standard_output_and_loss_sets_the_exit_status() {
    // The device under test is the echo server; at 64 B and a modest rate
    // everything comes back and the status is 0.
    let out = pktgen(&[
        "--in-process",
        "--rate",
        "20Mbps",
        "--count",
        "3000",
        "--single-core",
        "--rtt",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON only");
    let (sent, received) = (
        j["loss"]["sent"].as_u64().unwrap(),
        j["loss"]["received"].as_u64().unwrap(),
    );
    assert_eq!(sent, 3000);
    // EnsōGen's rule: with RTT on, the status says whether all came back.
    assert_eq!(out.status.success(), sent == received, "{err}");
    assert!(err.contains("lost"), "the summary goes to stderr: {err}");
    let lat = &j["latency"];
    assert_eq!(lat["count"].as_u64(), Some(received));
    for k in ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns"] {
        assert!(lat[k].as_f64().unwrap() > 0.0, "{k}");
    }
}

#[test]
fn zero_loss_search_from_the_command_line() {
    let out = pktgen(&[
        "--in-process",
        "--zero-loss",
        "--sizes",
        "64,512",
        "--rate",
        "1Gbps",
        "--precision",
        "0.4",
        "--trial-ms",
        "100",
        "--warmup-ms",
        "0",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sizes = j["zero_loss"]["sizes"].as_array().unwrap();
    // Exit status 1 only when a size found no rate without loss.
    let none_found = sizes.iter().any(|z| z["rate_gbps"].is_null());
    assert_eq!(out.status.code(), Some(i32::from(none_found)), "{err}");
    assert_eq!(sizes.len(), 2);
    for z in sizes {
        let trials = z["trials"].as_array().unwrap();
        assert!(!trials.is_empty());
        // The report's rate is one a trial passed at, or null when none did.
        let passed: Vec<f64> = trials
            .iter()
            .filter(|t| t["passed"] == true)
            .map(|t| t["rate_gbps"].as_f64().unwrap())
            .collect();
        match z["rate_gbps"].as_f64() {
            Some(rate) => {
                assert!((0.0..=1.0).contains(&rate) && passed.contains(&rate), "{z}")
            }
            None => assert!(z["rate_gbps"].is_null() && passed.is_empty(), "{z}"),
        }
        assert_eq!(z["finished"], true);
    }
    assert_eq!(j["interrupted"], false);
    assert_eq!(j["zero_loss"]["interrupted"], false);
    assert!(err.contains("zero-loss 64 B at 1.000 Gb/s"), "{err}");
}

#[test]
fn an_interrupted_search_reports_what_it_finished() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("zl.json");
    // At 100 Gb/s the generator cannot offer the load (148.8 Mpps of 64 B,
    // 23.5 Mpps of 512 B), so the first trial of each size fails and the
    // search of 512 B goes on for several trials of 100 ms after it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_pktgen"))
        .args([
            "--in-process",
            "--zero-loss",
            "--sizes",
            "64,512",
            "--rate",
            "100Gbps",
            "--precision",
            "10",
            "--trial-ms",
            "100",
            "--warmup-ms",
            "0",
            &format!("--json={}", s(&json)),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        err.push_str(&line);
        err.push('\n');
        if line.starts_with("zero-loss 512 B at 100.000 Gb/s") {
            let kill = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(kill.success());
            break;
        }
    }
    for line in lines {
        err.push_str(&line.unwrap());
        err.push('\n');
    }
    let out = child.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{err}\n{summary}");
    // A result line for the size that finished, and what the other had.
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines.len(), 3, "{summary}");
    assert!(lines[0].starts_with("zero-loss 64 B: "), "{summary}");
    assert!(!lines[0].contains("interrupted"), "{summary}");
    assert!(
        lines[1].starts_with("zero-loss 512 B: interrupted after "),
        "{summary}"
    );
    assert_eq!(lines[2], "interrupted");
    // The JSON report is written, with both sizes and the trials so far.
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["interrupted"], true);
    let z = &j["zero_loss"];
    assert_eq!(z["interrupted"], true);
    let sizes = z["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 2);
    assert_eq!(
        (sizes[0]["size"].clone(), sizes[0]["finished"].clone()),
        (64.into(), true.into())
    );
    assert_eq!(
        (sizes[1]["size"].clone(), sizes[1]["finished"].clone()),
        (512.into(), false.into())
    );
    assert!(!sizes[1]["trials"].as_array().unwrap().is_empty());
    assert_eq!(sizes[1]["converged"], false);
}

#[test]
fn a_snaplen_cut_pcap_is_replayed_padded() {
    // As `tcpdump -s 64` writes: snap length 64, a 242 B frame saved as
    // its first 64 B (orig_len 242), and a 60 B frame saved whole.
    let f = common::frames(&[(Ipv4Udp, 242), (Ipv4Udp, 60)]);
    let mut b = Vec::new();
    for v in [0xA1B2_C3D4u32, 0x0004_0002, 0, 0, 64, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for (data, orig) in [(&f[0][..64], 242u32), (&f[1][..], 60)] {
        for v in [1u32, 0, data.len() as u32, orig] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(data);
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("snap.pcap");
    std::fs::write(&pcap, &b).unwrap();
    let cap = dir.path().join("back.pcap");
    let out = pktgen(&[
        s(&pcap),
        "--in-process",
        "--count",
        "2",
        "--rate",
        "100Mbps",
        "--capture",
        s(&cap),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("cut short")).collect();
    assert_eq!(
        notes,
        ["pktgen: note: 1 of 2 frames of the pcap were cut short when captured (a snap length); \
          they are sent padded with zeros to their original length"],
        "{err}"
    );
    // The frame went out at its length on the wire.
    assert!(String::from_utf8_lossy(&out.stdout).contains("lost 0 of 2"));
    let mut lens: Vec<usize> = common::read_pcap(&cap).iter().map(Vec::len).collect();
    lens.sort_unstable();
    assert_eq!(lens, [60, 242]);
}

#[test]
fn trimmed_and_malformed_pcap_frames_are_counted_in_the_report() {
    // An ARP frame padded to 60 B, an IPv6 frame whose payload length is
    // 100 B short of the frame, an IPv4 frame with IHL 3, and a whole one.
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    arp[18] = 6;
    arp[19] = 4;
    let mut v6 = common::frames(&[(Ipv6Udp, 300)]).remove(0);
    v6[18..20].copy_from_slice(&146u16.to_be_bytes());
    let mut bad_ihl = common::frames(&[(Ipv4Udp, 100)]).remove(0);
    bad_ihl[14] = 0x43;
    let whole = common::frames(&[(Ipv4Udp, 100)]).remove(0);
    let dir = tempfile::tempdir().unwrap();
    let pcap = common::write_pcap(&dir.path().join("in.pcap"), &[arp, v6, bad_ihl, whole]);
    let json = dir.path().join("r.json");
    let out = pktgen(&[
        s(&pcap),
        "--in-process",
        "--count",
        "4",
        "--rate",
        "100Mbps",
        &format!("--json={}", s(&json)),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let want = [
        "2 of 4 frames of the pcap hold bytes after the length their headers state \
         (118 B in all: Ethernet padding or trailers); they are sent without them, \
         as the NIC sends frames",
        "1 of 4 frames of the pcap are malformed IPv4 (version not 4, header length \
         below 20 B or past the total length); they are sent as they are",
    ];
    for w in want {
        assert!(err.contains(&format!("pktgen: note: {w}\n")), "{err}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let notes = report["notes"].as_array().unwrap();
    for w in want {
        assert!(notes.iter().any(|n| n == w), "{notes:?}");
    }
    // Sent trimmed: 42 + 200 + 100 + 100 bytes.
    assert_eq!(report["totals"]["tx"]["bytes"], 442);
}

#[test]
fn save_writes_a_csv_that_ensos_python_frontend_reads() {
    // A run shorter than one statistics interval: --save still holds the
    // three rows the frontend needs. --save-detailed keeps fractions.
    let dir = tempfile::tempdir().unwrap();
    let sent = common::frames(&[(Ipv4Udp, 60), (Ipv4Udp, 200)]);
    let pcap = common::write_pcap(&dir.path().join("in.pcap"), &sent);
    let csv = dir.path().join("stats.csv");
    let detailed = dir.path().join("detailed.csv");
    let out = pktgen(&[
        s(&pcap),
        "10",
        "1000",
        "--count",
        "1000",
        "--queues",
        "2",
        "--rtt",
        "--stats-delay",
        "50",
        "--save",
        s(&csv),
        "--save-detailed",
        s(&detailed),
        "--in-process",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let (header, rows) = common::read_ensogen_csv(&csv).unwrap();
    assert_eq!(
        header.join(","),
        "rx_goodput_mbps,rx_tput_mbps,rx_pkt_rate_kpps,rx_bytes,rx_packets,\
         tx_goodput_mbps,tx_tput_mbps,tx_pkt_rate_kpps,tx_bytes,tx_packets,mean_rtt_ns"
    );
    assert!(rows.len() >= 3 && rows.len() <= 20, "{} rows", rows.len());
    let last = rows.last().unwrap();
    assert_eq!(last[3..5], [500 * (60 + 200), 1000]);
    assert_eq!(last[8..10], [500 * (60 + 200), 1000]);
    // Running totals never go down; some interval measured a mean RTT.
    for w in rows.windows(2) {
        assert!(w[0][4] <= w[1][4] && w[0][9] <= w[1][9]);
    }
    assert!(rows.iter().any(|r| r[10] > 0));
    // The detailed file: the same rows, with fractions.
    let d = std::fs::read_to_string(&detailed).unwrap();
    assert_eq!(d.lines().count(), rows.len() + 1);
    assert!(d.lines().nth(1).unwrap().contains('.'));
    let l: Vec<&str> = d.lines().last().unwrap().split(',').collect();
    assert_eq!(l[4], "1000");
    // Without python3 only the Rust reading is checked (the skip is recorded).
    if let Some(r) = common::python_reads_ensogen_csv(&csv) {
        assert_eq!(r.unwrap(), format!("{} 1000 1000", rows.len()));
    }
}

#[test]
fn ensogen_options_are_accepted_and_checked() {
    let m = one_line_error(&["--pcie-addr", "65:00", "--in-process"]);
    assert_eq!(
        m,
        "pktgen: --pcie-addr 65:00: not a PCIe address (DDDD:BB:DD.F or BB:DD.F)"
    );
    let m = one_line_error(&["--multicore", "--single-core", "--in-process"]);
    assert!(
        m.contains("--multicore") && m.contains("--single-core"),
        "{m}"
    );
    let m = one_line_error(&["--rtt-hist-len", "100000001", "--in-process"]);
    assert_eq!(
        m,
        "pktgen: --rtt-hist-len must be at most 100000000, not 100000001"
    );
    let m = one_line_error(&["--rtt-hist-offset", "-1", "--in-process"]);
    assert!(m.contains("must not be negative"), "{m}");
    // Without --rtt-hist, the histogram's shape is accepted and unused, as
    // EnsōGen takes it; a short BB:DD.F address is one.
    let out = pktgen(&[
        "--in-process",
        "--count",
        "100",
        "--multicore",
        "--rtt-hist-offset",
        "10",
        "--rtt-hist-len",
        "10",
        "--pcie-addr",
        "65:00.0",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "pktgen: note: --pcie-addr 65:00.0 chooses a real NIC; an emulated one is chosen \
             by name: this run started its own (--in-process)\n"
        ),
        "{err}"
    );
    // With it, RTTs outside the array follow it, and a note says so.
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.txt");
    let out = pktgen(&[
        "--in-process",
        "--count",
        "100",
        "--rate",
        "100Mbps",
        "--rtt-hist",
        s(&hist),
        "--rtt-hist-offset",
        "0",
        "--rtt-hist-len",
        "1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let note = err
        .lines()
        .find(|l| l.contains("RTT histogram entries"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        note.ends_with(&format!(
            "lie outside its array of 0..5 ns (--rtt-hist-offset, --rtt-hist-len); they follow \
             it in {}",
            hist.display()
        )),
        "{note}"
    );
    let text = std::fs::read_to_string(&hist).unwrap();
    let total: u64 = text
        .lines()
        .map(|l| l.split_once(',').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 100);
}

#[test]
fn rtt_on_a_mixed_ipv4_ipv6_pcap_is_refused_at_an_offset_that_breaks_ipv6() {
    // The default offset, 18, is IPv6's payload length: stamped there, an
    // IPv6 frame could no longer be delimited. Refused before sending, with
    // an offset every frame takes.
    let dir = tempfile::tempdir().unwrap();
    let spec: Vec<_> = (0..50)
        .flat_map(|_| [(Ipv4Udp, 100), (Ipv6Udp, 200)])
        .collect();
    let sent = common::frames(&spec);
    let pcap = common::write_pcap(&dir.path().join("mixed.pcap"), &sent);
    let args = [s(&pcap), "--in-process", "--count", "100", "--rtt"];
    let m = one_line_error(&args);
    assert_eq!(
        m,
        "pktgen: --timestamp-offset 18 puts the NIC's 4-byte timestamp at bytes 18..22, over \
         what frame 2 of the pcap (IPv6) states its length or kind by: once stamped, the NIC \
         could not tell where it ends; give --timestamp-offset 20, the first offset from 14 \
         that every frame of this pcap takes"
    );
    assert_eq!(pktgen(&args).status.code(), Some(2));
    // At the offset suggested, the run measures every frame's RTT.
    let json = dir.path().join("r.json");
    let out = pktgen(
        &[
            &args[..],
            &[
                "--timestamp-offset",
                "20",
                "--rate",
                "100Mbps",
                &format!("--json={}", s(&json)),
            ],
        ]
        .concat(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("not frames"), "{err}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["loss"]["lost"], 0);
    assert_eq!(j["totals"]["rx"]["packets"], 100);
    assert_eq!(j["latency"]["count"], 100);
    // With an 802.3 frame of 22 B the timestamp must lie in bytes 14..22,
    // where IPv4 keeps its header length and total length (14..18) and
    // IPv6 its payload length (18..20): no offset suits all three.
    let mut dot3 = vec![0u8; 22];
    dot3[12..14].copy_from_slice(&8u16.to_be_bytes());
    let mut three = common::frames(&[(Ipv4Udp, 100), (Ipv6Udp, 200)]);
    three.push(dot3);
    let p2 = common::write_pcap(&dir.path().join("three.pcap"), &three);
    let m = one_line_error(&[s(&p2), "--in-process", "--count", "3", "--rtt"]);
    assert!(
        m.ends_with(
            "frame 2 of the pcap (IPv6) states its length or kind by: once stamped, the NIC \
             could not tell where it ends; no offset from 14 to 60 suits every frame of this \
             pcap: replay its kinds of frames separately, or leave out --rtt"
        ),
        "{m}"
    ); // Past the end of a 23 B frame: the largest offset that fits it (19)
       // lies over the IPv6 frame's payload length, and none below suits the
       // IPv4 frame too, so no offset is suggested.
    let mut dot3 = vec![0u8; 23];
    dot3[12..14].copy_from_slice(&9u16.to_be_bytes());
    let mut three = common::frames(&[(Ipv4Udp, 100), (Ipv6Udp, 200)]);
    three.push(dot3);
    let p3 = common::write_pcap(&dir.path().join("three23.pcap"), &three);
    let m = one_line_error(&[
        s(&p3),
        "--in-process",
        "--count",
        "3",
        "--rtt",
        "--timestamp-offset",
        "30",
    ]);
    assert!(
        m.ends_with(
            "past the end of the smallest frame sent (23 B without FCS); no offset suits every \
             frame sent: send the smaller frames separately, or leave out --rtt"
        ),
        "{m}"
    );
}

/// The process's umask, read without changing it.
fn umask() -> u32 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(l["Umask:".len()..].trim(), 8).unwrap()
}

#[test]
fn outputs_are_never_written_through_a_symlink_and_are_made_0644() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, b"keep me").unwrap();
    for flag in [
        "--capture",
        "--save",
        "--save-detailed",
        "--rtt-hist",
        "--json",
    ] {
        let link = dir.path().join(format!("planted{flag}"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let m = one_line_error(&["--in-process", "--count", "10", flag, s(&link)]);
        assert!(
            m.contains(s(&link)) && m.contains("symbolic link"),
            "{flag}: {m}"
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me", "{flag}");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }
    // What it makes is 0644 (less the umask), not 0666.
    let cap = dir.path().join("out.pcap");
    let csv = dir.path().join("out.csv");
    let out = pktgen(&[
        "--in-process",
        "--count",
        "10",
        "--capture",
        s(&cap),
        "--save",
        s(&csv),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for p in [&cap, &csv] {
        let mode = std::fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o644 & !umask(), "{}", p.display());
    }
}
