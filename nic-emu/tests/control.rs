//! The control socket under malformed requests: each gets one error line
//! and the connection keeps serving.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nic_emu::device::{ControlLimits, ControlRequest, ControlResponse, CONTROL_SOCKET};
use nic_emu::{AttachRequest, DeviceConfig, Nic, RunOptions, WireConfig};

#[test]
fn a_request_that_is_not_utf8_gets_an_error_line_and_the_connection_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = DeviceConfig::new("ctl", WireConfig::Null);
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 64 << 10;
    cfg.notif_ring_entries = 1024;
    let opts = RunOptions {
        listen: true,
        ..Default::default()
    };
    let nic = Nic::start(cfg, opts).unwrap();
    let mut s = UnixStream::connect(nic.dir().join(CONTROL_SOCKET)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut ask = |request: &[u8]| {
        s.write_all(request).unwrap();
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(
            line.ends_with('\n'),
            "no answer line to {request:?}: {line:?}"
        );
        serde_json::from_str::<ControlResponse>(&line).unwrap()
    };
    for (request, says) in [
        (&b"\xff\xfe\n"[..], "bad request: not UTF-8"),
        (
            b"{\"op\": \"attach\", \"pipes\": \"\xc3\x28\"}\n",
            "not UTF-8",
        ),
        (b"not json\n", "bad request"),
    ] {
        match ask(request) {
            ControlResponse::Error(e) => assert!(e.contains(says), "{request:?}: {e}"),
            other => panic!("{request:?}: {other:?}"),
        }
    }
    // The same connection still attaches.
    let mut attach = serde_json::to_vec(&ControlRequest::Attach(AttachRequest {
        pipes: 1,
        dma_bytes: 1 << 20,
        desc_queues: 0,
    }))
    .unwrap();
    attach.push(b'\n');
    match ask(&attach) {
        ControlResponse::Attached(info) => assert_eq!(info.pipe_count, 1),
        other => panic!("{other:?}"),
    }
    drop((s, r));
    nic.stop();
}

fn start(dir: &std::path::Path, limits: ControlLimits) -> Nic {
    let mut cfg = DeviceConfig::new("ctl", WireConfig::Null);
    cfg.dir = dir.to_path_buf();
    cfg.pipe_size = 64 << 10;
    cfg.notif_ring_entries = 1024;
    let opts = RunOptions {
        listen: true,
        control: limits,
        ..Default::default()
    };
    Nic::start(cfg, opts).unwrap()
}

fn attach_line() -> Vec<u8> {
    let mut attach = serde_json::to_vec(&ControlRequest::Attach(AttachRequest {
        pipes: 1,
        dma_bytes: 1 << 20,
        desc_queues: 0,
    }))
    .unwrap();
    attach.push(b'\n');
    attach
}

/// Reads what is left on `s` until it is closed (or `within` passes):
/// the lines the device sent, and whether it closed the connection.
fn read_to_close(s: &UnixStream, within: Duration) -> (Vec<String>, bool) {
    s.set_read_timeout(Some(within)).unwrap();
    let mut r = BufReader::new(s);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) => return (lines, true),
            Ok(_) => lines.push(line),
            Err(_) => return (lines, false),
        }
    }
}

fn error_of(line: &str) -> String {
    match serde_json::from_str::<ControlResponse>(line) {
        Ok(ControlResponse::Error(e)) => e,
        other => panic!("not an error line: {line:?} ({other:?})"),
    }
}

/// Stalls the engine thread for `d` (as a NIC the host deschedules
/// would be) while `f` runs; the stall has begun when `f` starts.
fn with_engine_stalled<R>(nic: &Nic, d: Duration, f: impl FnOnce() -> R) -> R {
    std::thread::scope(|sc| {
        let (began, wait) = std::sync::mpsc::channel();
        sc.spawn(move || {
            nic.with_engine(move |_| {
                began.send(()).unwrap();
                std::thread::sleep(d);
            })
        });
        wait.recv().unwrap();
        f()
    })
}

#[test]
fn connections_past_the_cap_get_one_error_line_and_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 4;
    let nic = start(
        dir.path(),
        ControlLimits {
            max_connections: cap,
            request_timeout: Duration::from_secs(30),
            ..Default::default()
        },
    );
    let sock = nic.dir().join(CONTROL_SOCKET);
    // `cap` clients that hold their connections: two attached, two silent.
    let mut held = Vec::new();
    for i in 0..cap {
        let mut s = UnixStream::connect(&sock).unwrap();
        if i < 2 {
            s.write_all(&attach_line()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).unwrap();
            assert!(line.contains("attached"), "{line}");
        }
        held.push(s);
    }
    // The device has taken all of them once the attached ones answered and
    // the counter says so; then every further one is refused.
    let t0 = std::time::Instant::now();
    while nic.control_counters().connections < cap as u64 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "connections not served"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for n in 1..=3u64 {
        let s = UnixStream::connect(&sock).unwrap();
        let (lines, closed) = read_to_close(&s, Duration::from_secs(10));
        assert!(closed, "a refused connection is closed: {lines:?}");
        assert_eq!(lines.len(), 1, "{lines:?}");
        let e = error_of(&lines[0]);
        assert!(e.contains("busy") && e.contains(&cap.to_string()), "{e}");
        assert_eq!(nic.control_counters().refused_busy, n);
    }
    assert_eq!(nic.stats().apps.len(), 2, "refusals took nothing");
    // A place freed is served again.
    drop(held.pop());
    let t0 = std::time::Instant::now();
    let info = loop {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(&attach_line()).unwrap();
        let (lines, _) = read_to_close(&s, Duration::from_millis(500));
        match serde_json::from_str::<ControlResponse>(&lines[0]).unwrap() {
            ControlResponse::Attached(info) => break (info, s),
            ControlResponse::Error(e) => assert!(e.contains("busy"), "{e}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no place freed");
    };
    assert_eq!(info.0.pipe_count, 1);
    assert_eq!(nic.stats().apps.len(), 3);
    drop((held, info));
    nic.stop();
}

#[test]
fn a_client_that_does_not_complete_its_request_is_cut_off_an_attached_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let timeout = Duration::from_millis(300);
    let nic = start(
        dir.path(),
        ControlLimits {
            request_timeout: timeout,
            ..Default::default()
        },
    );
    let sock = nic.dir().join(CONTROL_SOCKET);
    // An attached client that then sends nothing keeps its attachment.
    let mut holder = UnixStream::connect(&sock).unwrap();
    holder.write_all(&attach_line()).unwrap();
    holder
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(&holder).read_line(&mut line).unwrap();
    assert!(line.contains("attached"), "{line}");
    // A silent client, and one that sends half a request and then a byte
    // now and then (each gap shorter than the timeout).
    let silent = UnixStream::connect(&sock).unwrap();
    let mut trickle = UnixStream::connect(&sock).unwrap();
    let t0 = std::time::Instant::now();
    let (lines, closed) = std::thread::scope(|sc| {
        sc.spawn(|| {
            for b in b"{\"op\": \"attach\", \"pipes\": 1".iter() {
                if trickle.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(timeout / 4);
            }
        });
        read_to_close(&silent, Duration::from_secs(10))
    });
    let waited = t0.elapsed();
    assert!(closed, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        error_of(&lines[0]).contains("no complete request"),
        "{lines:?}"
    );
    assert!(
        waited >= timeout - Duration::from_millis(50) && waited < Duration::from_secs(5),
        "cut off after {waited:?}"
    );
    let (lines, closed) = read_to_close(&trickle, Duration::from_secs(10));
    assert!(closed, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        error_of(&lines[0]).contains("no complete request"),
        "{lines:?}"
    );
    assert_eq!(nic.control_counters().request_timeouts, 2);
    // The attached client, silent for many timeouts, is still attached
    // and its connection open.
    std::thread::sleep(timeout * 3);
    assert_eq!(nic.stats().apps.len(), 1);
    holder.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let e = std::io::Read::read(&mut holder, &mut byte).expect_err("connection closed");
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    // Once it sends part of a request, the timeout applies to it too, and
    // cutting it off detaches it.
    holder.set_nonblocking(false).unwrap();
    holder.write_all(b"{").unwrap();
    let (lines, closed) = read_to_close(&holder, Duration::from_secs(10));
    assert!(closed && lines.len() == 1, "{lines:?}");
    assert_eq!(nic.control_counters().request_timeouts, 3);
    let t0 = std::time::Instant::now();
    while !nic.stats().apps.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(10), "not detached");
        std::thread::sleep(Duration::from_millis(5));
    }
    nic.stop();
}

#[test]
fn an_attach_the_engine_answers_too_late_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let nic = start(
        dir.path(),
        ControlLimits {
            answer_timeout: Duration::from_millis(200),
            ..Default::default()
        },
    );
    let sock = nic.dir().join(CONTROL_SOCKET);
    let mut s = UnixStream::connect(&sock).unwrap();
    let lines = with_engine_stalled(&nic, Duration::from_millis(1000), || {
        s.write_all(&attach_line()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        line
    });
    assert!(error_of(&lines).contains("did not answer"), "{lines}");
    // The engine took the attach once it ran again, then (commands run in
    // order) the undo: by the time it answers this, both are done.
    assert_eq!(nic.stats().apps.len(), 0, "an attachment nobody knows of");
    assert_eq!(nic.control_counters().late_undone, 1);
    // The connection serves on.
    s.write_all(&attach_line()).unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    assert!(line.contains("attached"), "{line}");
    assert_eq!(nic.stats().apps.len(), 1);
    drop(s);
    nic.stop();
}

#[test]
fn an_attach_whose_client_gave_up_before_the_answer_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let nic = start(dir.path(), ControlLimits::default());
    let sock = nic.dir().join(CONTROL_SOCKET);
    with_engine_stalled(&nic, Duration::from_millis(500), || {
        // The client asks and goes (as the library does when its own wait
        // runs out) before the engine answers.
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(&attach_line()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    });
    let t0 = std::time::Instant::now();
    while nic.control_counters().undelivered == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "answer not undone");
        std::thread::sleep(Duration::from_millis(5));
    }
    while !nic.stats().apps.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(10), "not detached");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(nic.control_counters().undelivered, 1);
    nic.stop();
}
