//! The clients stopped with Ctrl-C (SIGINT) end their run and still report
//! it, and undo what they set on the device: log-client clears the rate
//! limit it set on its port, also when it ends with a backlog the limit
//! holds back, and refuses a port the device does not have as such.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nic_emu::Nic;

mod common;

use common::listening_device as device;

/// Waits until `port` of `nic` has sent a frame: the client has attached
/// and is in its sending loop (its signal handling installed).
fn wait_for_tx(nic: &Nic, port: usize, child: &mut Child) {
    let start = Instant::now();
    while nic.stats().ports[port].counters.tx_frames == 0 {
        if let Some(s) = child.try_wait().unwrap() {
            panic!("the client ended before sending: {s:?}");
        }
        assert!(start.elapsed() < Duration::from_secs(20), "nothing sent");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends SIGINT to `child`; returns its status, stdout and stderr.
fn interrupt(mut child: Child) -> (ExitStatus, String, String) {
    // SAFETY: kill(2) with a pid we spawned and have not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running 20 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, out, err)
}

/// The slowest rate log-client can set: one flit every 5 ms, a 1 KiB
/// payload every ~85 ms.
const SLOWEST_GBPS: &str = "0.0001024";

/// Checks that port 0 of `nic` (device `name` in `d`) is not rate limited:
/// another client's 200 packets all go out within its run. At
/// [`SLOWEST_GBPS`] they would take 17 s, and the client stops after 5 s
/// and waits at most 2 s more for its sends to complete.
fn assert_port_unlimited(nic: &Nic, name: &str, d: &str) {
    let before = nic.stats().ports[0].counters.tx_frames;
    let out = Command::new(env!("CARGO_BIN_EXE_log-client"))
        .args(["--device", name, "--dir", d, "--progress-s", "0"])
        .args(["--bytes", "204800", "--duration-s", "5", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packets = v["packets"].as_u64().unwrap();
    assert!(packets >= 200, "{v}");
    let sent = nic.stats().ports[0].counters.tx_frames - before;
    assert_eq!(sent, packets, "the port still limits the rate: {v}");
}

#[test]
fn log_client_reports_and_clears_its_rate_limit_on_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let nic = device(dir.path(), "intlog", &["null"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_log-client"))
        .args(["--device", "intlog", "--dir", d, "--progress-s", "0"])
        .args(["--passes", "0", "--gbps", SLOWEST_GBPS, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_tx(&nic, 0, &mut child);
    let (status, out, err) = interrupt(child);
    assert_eq!(status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(v["interrupted"], true, "{v}");
    assert!(v["packets"].as_u64().unwrap() > 0, "{v}");
    assert_port_unlimited(&nic, "intlog", d);
}

#[test]
fn log_client_clears_its_rate_limit_behind_a_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let nic = device(dir.path(), "backlog", &["null"]);
    // Ends with its TX pipe full of frames the limit holds back.
    let out = Command::new(env!("CARGO_BIN_EXE_log-client"))
        .args(["--device", "backlog", "--dir", d, "--progress-s", "0"])
        .args(["--passes", "0", "--gbps", SLOWEST_GBPS])
        .args(["--duration-s", "0.2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_port_unlimited(&nic, "backlog", d);
}

#[test]
fn kv_client_reports_on_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // No server: the requests go unanswered, which is a valid run too.
    let nic = device(dir.path(), "intkv", &["cable:1", "cable:0"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kv-client"))
        .args(["--device", "intkv", "--dir", d, "--port", "1"])
        .args(["--progress-s", "0", "--no-preload", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_tx(&nic, 1, &mut child);
    let (status, out, err) = interrupt(child);
    assert_eq!(status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(v["interrupted"], true, "{v}");
    assert!(v["report"]["requests"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn log_client_with_a_rate_on_a_missing_port_says_there_is_no_port() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let _nic = device(dir.path(), "noport", &["null"]);
    let out = Command::new(env!("CARGO_BIN_EXE_log-client"))
        .args(["--device", "noport", "--dir", d, "--progress-s", "0"])
        .args(["--port", "3", "--gbps", "1", "--bytes", "1000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "log-client: no port 3\n"
    );
}

#[test]
fn a_server_reports_its_run_on_ctrl_c() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let _nic = device(dir.path(), "intsrv", &["generator:size=64,flows=16"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_telemetry"))
        .args([
            "--device",
            "intsrv",
            "--dir",
            d,
            "--progress-s",
            "0.05",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A progress line: the server is in its serving loop.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("Mpps"), "{first}");
    // SAFETY: kill(2) with a pid we spawned and have not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{rest}");
    assert!(rest.contains("telemetry: interrupted"), "{rest}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["served"]["interrupted"], true, "{v}");
    assert!(v["served"]["frames"].as_u64().unwrap() > 0, "{v}");
}
