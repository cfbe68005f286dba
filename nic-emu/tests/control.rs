//! The control socket under malformed requests: each gets one error line
//! and the connection keeps serving.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nic_emu::device::{ControlRequest, ControlResponse, CONTROL_SOCKET};
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
