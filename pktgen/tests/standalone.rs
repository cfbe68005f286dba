//! The generator against a device in another process: a device that goes
//! away mid-run ends the run within a fraction of a second, not after the
//! generator's stall timeouts, and the generator still reports what it
//! measured, says the device went away, and exits 1.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nic_emu::testframe::FrameKind::Ipv4Udp;
use nic_emu::{DeviceConfig, Nic, RunOptions};
use pktgen::rate::{Rate, DEFAULT_MAX_DEN};
use pktgen::session::{RunPlan, Session, SessionOptions};
use pktgen::stream::TxStream;
use pktgen::traffic::TrafficSpec;

/// Set (to the directory) in the environment of the device process.
const DEVICE_DIR: &str = "PKTGEN_TEST_DEVICE_DIR";
/// Set (to a `nic-emu run --port` wiring) in the environment of the device
/// process.
const DEVICE_WIRE: &str = "PKTGEN_TEST_DEVICE_WIRE";
/// Printed by the device process once the generator has attached.
const ATTACHED: &str = "device: attached";
/// How long the generator may take to notice and report (it checks every
/// 10 ms; the rest is slack for a loaded machine).
const NOTICE_WITHIN: Duration = Duration::from_secs(3);

/// Most 64 B frames queued ahead of the NIC at 1 Gb/s (20 ms of them). A
/// frame counts as sent once the generator sees its TX notification
/// completed; when the device goes away, frames it sent (and that came
/// back) may not have been seen completed yet.
const IN_FLIGHT_AT_1GBPS: u64 = 29_762;

/// Not a test: the device process that [`start_device`] starts (this test
/// binary run again with only this test). Runs a device named `gone` with
/// one port wired as asked until killed.
#[test]
#[ignore = "run by another test as a device process"]
fn device_process() {
    let dir = std::env::var(DEVICE_DIR).expect("run by another test");
    let wire = std::env::var(DEVICE_WIRE).expect("run by another test");
    let wire = nic_emu::spec::parse_wire(&wire).expect("a wiring");
    let mut cfg = DeviceConfig::new("gone", wire);
    cfg.dir = dir.into();
    let opts = RunOptions {
        listen: true,
        ..Default::default()
    };
    let nic = Nic::start(cfg, opts).expect("device starts");
    let start = Instant::now();
    // The generator attaches twice (a transmit and a receive handle).
    while nic.stats().apps.len() < 2 {
        assert!(start.elapsed() < Duration::from_secs(30), "nobody attached");
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("{ATTACHED}");
    // Until the test kills this process.
    std::thread::sleep(Duration::from_secs(60));
}

/// Kills and reaps a child process when dropped (a failed test leaves none).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a device named `gone` in another process, in `dir`, its port 0
/// wired as `wire` says (`cable:0`, `null`, ...).
fn start_device(dir: &Path, wire: &str) -> Reaped {
    let dev = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "device_process", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(DEVICE_DIR, dir)
        .env(DEVICE_WIRE, wire)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dev = Reaped(dev);
    let sock = dir.join("enso-gone").join(nic_emu::device::CONTROL_SOCKET);
    let start = Instant::now();
    while !sock.exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "no device");
        std::thread::sleep(Duration::from_millis(10));
    }
    dev
}

#[test]
fn pktgen_reports_and_fails_when_its_device_process_dies() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let mut dev = start_device(dir.path(), "cable:0");
    let gen = Command::new(env!("CARGO_BIN_EXE_pktgen"))
        .args(["--device", "gone", "--dir", dir.path().to_str().unwrap()])
        .args(["--size", "64", "--rate", "1Gbps", "--duration", "30"])
        .args(["--stats-delay", "100", "--rtt", "--queues", "1"])
        .arg(format!("--json={}", json.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut gen = Reaped(gen);
    let mut lines = BufReader::new(dev.0.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("the device process ended").unwrap();
        if line.ends_with(ATTACHED) {
            break;
        }
    }
    // Let it send for a while, then kill the device.
    std::thread::sleep(Duration::from_millis(500));
    dev.0.kill().unwrap();
    dev.0.wait().unwrap();
    let killed = Instant::now();
    let status = loop {
        if let Some(s) = gen.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            killed.elapsed() < NOTICE_WITHIN,
            "pktgen still running {NOTICE_WITHIN:?} after its device died"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let (mut out, mut err) = (String::new(), String::new());
    gen.0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    gen.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The report of what it measured, then the reason on standard error.
    assert!(out.starts_with("TX "), "{out}");
    assert!(out.contains("\nRX "), "{out}");
    assert!(
        err.ends_with(
            "pktgen: device 'gone' went away during the run (it was stopped or its process \
             exited); the results are those until then\n"
        ),
        "{err}"
    );
    let report: pktgen::report::Report =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(report.device_gone);
    assert!(report.device.is_none());
    // 1 Gb/s of 64 B frames for ~0.5 s is ~740 000 frames; some got out.
    let sent = report.totals.tx.packets;
    assert!(sent > 1000 && sent < 2_000_000, "{sent}");
    assert!(report.totals.rx.packets <= sent + IN_FLIGHT_AT_1GBPS);
}

#[test]
fn a_run_ends_marked_when_its_in_process_device_stops() {
    let dir = tempfile::tempdir().unwrap();
    let nic = common::self_loop(dir.path(), 0);
    let stream = TxStream::synthetic(&TrafficSpec::default()).unwrap();
    let mut s = Session::attach_nic(&nic, SessionOptions { queues: 2, port: 0 }).unwrap();
    let limit = Rate::parse("1Gbps")
        .unwrap()
        .rate_limit(&stream.profile(), DEFAULT_MAX_DEN)
        .unwrap();
    let plan = RunPlan {
        limit: Some(limit),
        duration: Some(Duration::from_secs(30)),
        ..RunPlan::new(&stream)
    };
    let start = Instant::now();
    let out = std::thread::scope(|sc| {
        let h = sc.spawn(|| s.run(&plan, None, &mut |_, _| {}));
        std::thread::sleep(Duration::from_millis(300));
        nic.stop();
        h.join().unwrap()
    })
    .expect("a device that went away ends the run, not as an error");
    assert!(start.elapsed() < Duration::from_millis(300) + NOTICE_WITHIN);
    assert!(out.device_gone);
    assert!(!out.interrupted);
    assert!(out.counters.tx_packets > 0);
    assert!(out.counters.rx_packets <= out.counters.tx_packets + IN_FLIGHT_AT_1GBPS);
}

/// Runs pktgen against the device `gone` in `dir` to completion.
fn pktgen_on(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pktgen"))
        .args(["--device", "gone", "--dir", dir.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn loss_sets_the_exit_status_only_when_rtt_is_measured() {
    // A port wired to nothing: every frame sent is lost.
    let dir = tempfile::tempdir().unwrap();
    let _dev = start_device(dir.path(), "null");
    let run = ["--size", "64", "--rate", "100Mbps", "--count", "2000"];
    let out = pktgen_on(dir.path(), &run);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("lost 2000 of 2000 (100.0000%)"), "{text}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "EnsōGen's rule: loss without RTT is reported, not a failure"
    );
    let out = pktgen_on(dir.path(), &[&run[..], &["--rtt"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("lost 2000 of 2000 (100.0000%)"), "{text}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "with RTT on, frames received != sent"
    );
}

#[test]
fn ensogen_command_line_of_ensos_python_frontend_runs_as_a_drop_in() {
    // The command line Ensō's Python frontend builds (with every option it
    // may add), against a device in another process whose port is cabled
    // to itself; only --device and --dir are ours.
    let dir = tempfile::tempdir().unwrap();
    let _dev = start_device(dir.path(), "cable:0");
    let frames = common::frames(&[(Ipv4Udp, 60), (Ipv4Udp, 1000)]);
    let pcap = common::write_pcap(&dir.path().join("2_64.pcap"), &frames);
    let (csv, hist) = (dir.path().join("stats.csv"), dir.path().join("hist.csv"));
    let p = |p: &Path| p.to_str().unwrap().to_string();
    let mut args: Vec<String> = [&p(&pcap), "1", "20", "--count", "4000"]
        .map(String::from)
        .to_vec();
    let cores = pktgen::cli::usable_cores();
    match cores.windows(2).find(|w| w[1] == w[0] + 1) {
        Some(w) => args.extend(["--core".into(), w[0].to_string()]),
        None => test_skips::skipped("--core: no two adjacent cores to run on, left out"),
    }
    args.extend(
        [
            "--queues",
            "4",
            "--save",
            &p(&csv),
            "--multicore",
            "--rtt",
            "--rtt-hist",
            &p(&hist),
            "--rtt-hist-offset",
            "0",
            "--rtt-hist-len",
            "2000000",
            "--stats-delay",
            "100",
            "--pcie-addr",
            "0000:65:00.0",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = pktgen_on(dir.path(), &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "pktgen: note: --pcie-addr 0000:65:00.0 chooses a real NIC; an emulated one is \
             chosen by name: 'gone' (--device)\n"
        ),
        "{err}"
    );
    let (header, rows) = common::read_ensogen_csv(&csv).unwrap();
    assert_eq!(header.last().unwrap(), "mean_rtt_ns");
    let last = rows.last().unwrap();
    assert_eq!((last[4], last[9]), (4000, 4000), "rx_packets, tx_packets");
    if let Some(r) = common::python_reads_ensogen_csv(&csv) {
        assert_eq!(r.unwrap(), format!("{} 4000 4000", rows.len()));
    }
    // The histogram: 5 ns steps, every frame counted once, increasing
    // (the array covers everything up to 10 ms here).
    let text = std::fs::read_to_string(&hist).unwrap();
    let lines: Vec<(u64, u64)> = text
        .lines()
        .map(|l| {
            let (v, n) = l.split_once(',').unwrap();
            (v.parse().unwrap(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), 4000);
    assert!(lines.iter().all(|&(v, n)| v % 5 == 0 && n > 0));
    assert!(lines.windows(2).all(|w| w[0].0 < w[1].0));
}
