//! The C interface against a live device, called from Rust: a standalone
//! NIC in this process (listening on its control socket, as `nic-emu run`
//! does) whose one port is a loopback, so that what a TX pipe sends comes
//! back in and is steered to the pipes.

use std::ffi::{CStr, CString};
use std::ptr;
use std::time::{Duration, Instant};

use enso_c::*;
use nic_emu::testframe::{FrameKind, TestFrames, DST_IP, DST_PORT};
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

struct Setup {
    nic: Nic,
    dir: tempfile::TempDir,
    name: CString,
}

fn loopback_device(tag: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("c-{tag}-{}", std::process::id());
    let mut cfg = DeviceConfig::new(&name, WireConfig::Loopback);
    cfg.dir = dir.path().into();
    let nic = Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )
    .expect("device starts");
    Setup {
        nic,
        dir,
        name: CString::new(name).unwrap(),
    }
}

impl Setup {
    fn open(&self, opts: Option<&EnsoDeviceOptions>) -> *mut EnsoDevice {
        let dir = CString::new(self.dir.path().to_str().unwrap()).unwrap();
        let mut dev = ptr::null_mut();
        let opts = opts.map_or(ptr::null(), |o| o as *const _);
        // SAFETY: valid strings, options and out pointer.
        let rc = unsafe { enso_device_open(self.name.as_ptr(), dir.as_ptr(), opts, &mut dev) };
        assert_eq!(rc, ENSO_OK, "open: {}", last_error());
        assert!(!dev.is_null());
        dev
    }
}

fn last_error() -> String {
    // SAFETY: a NUL-terminated string, valid until this thread's next failure.
    unsafe { CStr::from_ptr(enso_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Test frame `seq` of flow `flow`, `len` bytes.
fn frame(flow: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; 2048];
    let n = TestFrames::new(16, 0).build(FrameKind::Ipv4Udp, seq, flow, len, &mut f);
    f.truncate(n);
    f
}

/// Sends `frames` in one TX notification of TX pipe `tx`.
fn send_frames(dev: *mut EnsoDevice, tx: i32, frames: &[Vec<u8>]) {
    let total: usize = frames.iter().map(|f| f.len().next_multiple_of(64)).sum();
    let mut buf = ptr::null_mut();
    // SAFETY: a live device; `buf` receives a span of `total` bytes.
    assert_eq!(unsafe { enso_tx_buf(dev, tx, total, &mut buf) }, ENSO_OK);
    let mut at = 0;
    for f in frames {
        // SAFETY: `buf + at` has `total - at` writable bytes; `f` is readable.
        let n = unsafe { enso_write_frame(buf.add(at), total - at, f.as_ptr(), f.len()) };
        assert_eq!(n as usize, f.len().next_multiple_of(64), "{}", last_error());
        at += n as usize;
    }
    // SAFETY: a live device.
    let rc = unsafe { enso_send(dev, tx, at, 0) };
    assert_eq!(rc, ENSO_OK, "{}", last_error());
}

/// Waits (bounded) for a pipe with data and receives its batch.
fn recv_next(dev: *mut EnsoDevice) -> (i32, EnsoBatch) {
    let start = Instant::now();
    loop {
        // SAFETY: a live device.
        let p = unsafe { enso_next_pipe_with_data(dev) };
        if p >= 0 {
            let mut b = EnsoBatch {
                data: ptr::null_mut(),
                len: 0,
                next: 0,
            };
            // SAFETY: a live device and a writable batch.
            assert_eq!(unsafe { enso_recv(dev, p, &mut b) }, ENSO_OK);
            return (p, b);
        }
        assert_eq!(p, ENSO_ERR_AGAIN, "{}", last_error());
        assert!(start.elapsed() < Duration::from_secs(10), "nothing arrived");
        std::hint::spin_loop();
    }
}

/// The frames of a batch, copied.
fn frames_of(b: &mut EnsoBatch) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let (mut f, mut n) = (ptr::null_mut(), 0usize);
    // SAFETY: a batch just received, not freed.
    while unsafe { enso_batch_next(b, &mut f, &mut n) } == 1 {
        // SAFETY: `enso_batch_next` gave `n` readable bytes at `f`.
        out.push(unsafe { std::slice::from_raw_parts(f, n) }.to_vec());
    }
    out
}

fn rule(flow: u32) -> EnsoFlowRule {
    EnsoFlowRule {
        src_ip: 0,
        dst_ip: DST_IP,
        src_port: 0,
        dst_port: DST_PORT + flow as u16,
        protocol: 17,
    }
}

#[test]
fn frames_sent_from_a_tx_pipe_reach_the_bound_pipe_and_the_fallback_pipe() {
    let s = loopback_device("steer");
    let mut o = EnsoDeviceOptions {
        pipes: 0,
        tx_pipes: 0,
        tx_pipe_size: 0,
        tx_credits: 0,
        prefetch: 0,
    };
    // SAFETY: a writable options struct.
    assert_eq!(unsafe { enso_device_options_default(&mut o) }, ENSO_OK);
    o.pipes = 2;
    o.tx_pipe_size = 1 << 16;
    let dev = s.open(Some(&o));
    // SAFETY: `dev` is live and used by this thread only; every pointer
    // passed is valid.
    unsafe {
        assert_eq!(enso_device_port_count(dev), 1);
        let rx = enso_rx_pipe_alloc(dev, 0, 0);
        let fb = enso_rxtx_pipe_alloc(dev, 0, 1);
        let tx = enso_tx_pipe_alloc(dev);
        assert_eq!((rx, fb, tx), (0, 1, TX_HANDLE_BASE));
        // Past the pipes and TX pipes reserved at attach: more are given.
        // Freed, a handle is refused until an allocation gives it again.
        let more = enso_rx_pipe_alloc(dev, 0, 0);
        assert_eq!(more, 2, "{}", last_error());
        assert_eq!(enso_rx_pipe_free(dev, more), ENSO_OK);
        assert_eq!(enso_rx_pipe_free(dev, more), ENSO_ERR_BAD_HANDLE);
        assert_eq!(enso_bind(dev, more, &rule(3)), ENSO_ERR_BAD_HANDLE);
        let tx2 = enso_tx_pipe_alloc(dev);
        assert_eq!(tx2, TX_HANDLE_BASE + 1, "{}", last_error());
        assert_eq!(enso_tx_pipe_free(dev, tx2), ENSO_OK);
        assert_eq!(enso_tx_pipe_free(dev, tx2), ENSO_ERR_BAD_HANDLE);
        assert_eq!(enso_tx_space(dev, tx2, &mut 0), ENSO_ERR_BAD_HANDLE);
        assert_eq!(enso_rx_pipe_alloc(dev, 1, 0), ENSO_ERR_NO_PORT);
        assert_eq!(enso_bind(dev, rx, &rule(3)), ENSO_OK);
        assert_eq!(enso_next_pipe_with_data(dev), ENSO_ERR_AGAIN);

        // Flow 3 goes to the bound pipe; flow 7 matches no rule.
        let sent = vec![frame(3, 1, 64), frame(3, 2, 200), frame(7, 3, 64)];
        send_frames(dev, tx, &sent);
        let mut got = std::collections::BTreeMap::<i32, Vec<Vec<u8>>>::new();
        while got.values().map(Vec::len).sum::<usize>() < 3 {
            let (p, mut b) = recv_next(dev);
            got.entry(p).or_default().extend(frames_of(&mut b));
            assert_eq!(b.next, b.len, "walked the whole batch");
            if p == rx {
                assert_eq!(enso_free(dev, p, b.len), ENSO_OK);
            } else {
                // An RX/TX pipe's bytes not sent back are discarded.
                assert_eq!(enso_discard(dev, p, b.len), ENSO_OK);
            }
        }
        assert_eq!(got[&rx], sent[..2]);
        assert_eq!(got[&fb], sent[2..]);

        // Unbound, flow 3 falls back too.
        assert_eq!(enso_unbind(dev, rx, &rule(3)), ENSO_OK);
        send_frames(dev, tx, &[frame(3, 4, 64)]);
        let (p, mut b) = recv_next(dev);
        assert_eq!((p, frames_of(&mut b)), (fb, vec![frame(3, 4, 64)]));
        // Sent back in place, it loops back into the fallback pipe.
        assert_eq!(enso_send_and_free(dev, fb, b.len, 0), ENSO_OK);
        let (p, mut b) = recv_next(dev);
        assert_eq!((p, frames_of(&mut b)), (fb, vec![frame(3, 4, 64)]));
        assert_eq!(enso_discard(dev, fb, b.len), ENSO_OK);

        let mut st = EnsoDeviceStats::default();
        assert_eq!(enso_device_stats(dev, &mut st), ENSO_OK);
        assert!(st.notifications >= 3 && st.tx_notifications >= 4, "{st:?}");
        let start = Instant::now();
        while enso_tx_in_flight(dev) > 0 {
            assert!(enso_reap_completions(dev) >= 0);
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "sends never completed"
            );
        }
        let mut space = 0usize;
        assert_eq!(enso_tx_space(dev, tx, &mut space), ENSO_OK);
        assert_eq!(space, 1 << 16);
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
    let stats = s.nic.stop();
    assert_eq!(
        stats.drops().values().sum::<u64>(),
        0,
        "{:?}",
        stats.drops()
    );
}

#[test]
fn peek_confirm_and_free_follow_the_library() {
    let s = loopback_device("peek");
    let dev = s.open(None);
    // SAFETY: `dev` is live and used by this thread only; pointers valid.
    unsafe {
        let rx = enso_rx_pipe_alloc(dev, 0, 1);
        let tx = enso_tx_pipe_alloc(dev);
        send_frames(dev, tx, &[frame(1, 1, 64), frame(1, 2, 64)]);
        let start = Instant::now();
        let mut b = EnsoBatch {
            data: ptr::null_mut(),
            len: 0,
            next: 0,
        };
        while b.len < 128 {
            assert_eq!(enso_peek(dev, rx, &mut b), ENSO_OK);
            // Notifications are reactive: with one outstanding for the
            // first frame, the NIC tells of the second when asked.
            assert_eq!(enso_prefetch(dev, rx), ENSO_OK);
            assert!(start.elapsed() < Duration::from_secs(10), "nothing arrived");
        }
        assert_eq!(b.len, 128);
        // Peeking again gives the same bytes.
        let first = b.data;
        assert_eq!(enso_peek(dev, rx, &mut b), ENSO_OK);
        assert_eq!((b.data, b.len), (first, 128));
        assert_eq!(enso_confirm(dev, rx, 64), ENSO_OK);
        assert_eq!(enso_confirm(dev, rx, 128), ENSO_ERR_TOO_MANY_BYTES);
        // What is left starts at the second frame.
        assert_eq!(enso_recv(dev, rx, &mut b), ENSO_OK);
        assert_eq!((b.data, b.len), (first.add(64), 64));
        assert_eq!(frames_of(&mut b), vec![frame(1, 2, 64)]);
        assert_eq!(enso_unconsume(dev, rx, 64), ENSO_OK);
        assert_eq!(enso_recv(dev, rx, &mut b), ENSO_OK);
        assert_eq!((b.data, b.len), (first.add(64), 64));

        assert_eq!(enso_free(dev, rx, 65), ENSO_ERR_UNALIGNED);
        assert_eq!(enso_free(dev, rx, 64 * 3), ENSO_ERR_TOO_MANY_BYTES);
        assert!(
            last_error().contains("192 bytes asked for"),
            "{}",
            last_error()
        );
        assert_eq!(enso_free(dev, rx, 64), ENSO_OK);
        assert_eq!(enso_free_all(dev, rx), ENSO_OK);
        assert_eq!(enso_recv(dev, rx, &mut b), ENSO_OK);
        assert_eq!(b.len, 0);
        assert_eq!(enso_prefetch(dev, rx), ENSO_OK);
        assert_eq!(enso_set_prefetch(dev, 1), ENSO_OK);
        assert_eq!(enso_set_fallback_round_robin(dev, rx, 1), ENSO_OK);
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
}

#[test]
fn handles_of_the_wrong_kind_and_bad_values_are_refused() {
    let s = loopback_device("bad");
    let dev = s.open(None);
    // SAFETY: `dev` is live and used by this thread only; pointers valid.
    unsafe {
        let rx = enso_rx_pipe_alloc(dev, 0, 0);
        let tx = enso_tx_pipe_alloc(dev);
        let mut b = EnsoBatch {
            data: ptr::null_mut(),
            len: 0,
            next: 0,
        };
        let mut buf = ptr::null_mut();
        for h in [tx, -5, 7, i32::MAX, i32::MIN] {
            assert_eq!(enso_recv(dev, h, &mut b), ENSO_ERR_BAD_HANDLE, "{h}");
            assert_eq!(enso_free(dev, h, 0), ENSO_ERR_BAD_HANDLE, "{h}");
            assert_eq!(enso_bind(dev, h, &rule(1)), ENSO_ERR_BAD_HANDLE, "{h}");
        }
        for h in [rx, TX_HANDLE_BASE + 1, -1, i32::MIN] {
            assert_eq!(
                enso_tx_buf(dev, h, 64, &mut buf),
                ENSO_ERR_BAD_HANDLE,
                "{h}"
            );
            assert_eq!(enso_send(dev, h, 64, 0), ENSO_ERR_BAD_HANDLE, "{h}");
        }
        // An RX pipe cannot send in place.
        assert_eq!(enso_send_and_free(dev, rx, 0, 0), ENSO_ERR_BAD_HANDLE);
        assert!(
            last_error().contains("not an RX/TX pipe"),
            "{}",
            last_error()
        );
        assert_eq!(enso_discard(dev, rx, 0), ENSO_ERR_BAD_HANDLE);
        // Null out-pointers.
        assert_eq!(enso_recv(dev, rx, ptr::null_mut()), ENSO_ERR_INVALID);
        assert_eq!(enso_tx_buf(dev, tx, 64, ptr::null_mut()), ENSO_ERR_INVALID);
        assert_eq!(enso_bind(dev, rx, ptr::null()), ENSO_ERR_INVALID);
        assert_eq!(enso_device_stats(dev, ptr::null_mut()), ENSO_ERR_INVALID);

        // Sending: nothing reserved, too much, another port.
        assert_eq!(enso_send(dev, tx, 64, 0), ENSO_ERR_NOT_RESERVED);
        assert_eq!(enso_tx_buf(dev, tx, 4 << 20, &mut buf), ENSO_ERR_TOO_LARGE);
        assert_eq!(enso_tx_buf(dev, tx, 64, &mut buf), ENSO_OK);
        assert_eq!(enso_send(dev, tx, 128, 0), ENSO_ERR_NOT_RESERVED);
        assert_eq!(enso_send(dev, tx, 64, 1), ENSO_ERR_NO_PORT);

        // Per-port settings.
        assert_eq!(enso_set_timestamping(dev, 1, 0), ENSO_ERR_NO_PORT);
        assert_eq!(enso_set_timestamping(dev, 0, 61), ENSO_ERR_INVALID);
        assert_eq!(enso_set_timestamping(dev, 0, 18), ENSO_OK);
        assert_eq!(enso_set_timestamping(dev, 0, -1), ENSO_OK);
        assert_eq!(enso_set_rate_limit(dev, 0, 1, 0), ENSO_ERR_INVALID);
        assert_eq!(enso_set_rate_limit(dev, 0, 0, 5), ENSO_ERR_INVALID);
        assert_eq!(enso_set_rate_limit(dev, 2, 744, 1000), ENSO_ERR_NO_PORT);
        assert_eq!(enso_set_rate_limit(dev, 0, 744, 1000), ENSO_OK);
        assert_eq!(enso_set_rate_limit(dev, 0, 0, 0), ENSO_OK);

        assert_eq!(enso_device_check_alive(dev), ENSO_OK);
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
}

#[test]
fn a_second_device_handle_has_its_own_pipes() {
    let s = loopback_device("two");
    let a = s.open(None);
    let b = s.open(None);
    // SAFETY: both live, used by this thread only.
    unsafe {
        assert_eq!(enso_rx_pipe_alloc(a, 0, 0), 0);
        assert_eq!(enso_rx_pipe_alloc(a, 0, 0), 1);
        // Handles are per device: b has no pipe 1 yet.
        assert_eq!(enso_free_all(b, 1), ENSO_ERR_BAD_HANDLE);
        assert_eq!(enso_rx_pipe_alloc(b, 0, 0), 0);
        assert_eq!(enso_device_close(a), ENSO_OK);
        assert_eq!(enso_free_all(b, 0), ENSO_OK);
        assert_eq!(enso_device_close(b), ENSO_OK);
    }
}

#[test]
fn recv_max_takes_whole_frames_within_both_bounds() {
    let s = loopback_device("recvmax");
    let dev = s.open(None);
    // SAFETY: `dev` is live and used by this thread only; pointers valid.
    unsafe {
        let rx = enso_rx_pipe_alloc(dev, 0, 1);
        let tx = enso_tx_pipe_alloc(dev);
        // 2 flits, 1 flit, 2 flits.
        let sent = [frame(1, 1, 100), frame(1, 2, 64), frame(1, 3, 128)];
        send_frames(dev, tx, &sent);
        let mut b = EnsoBatch {
            data: ptr::null_mut(),
            len: 0,
            next: 0,
        };
        let start = Instant::now();
        while b.len < 5 * 64 {
            assert_eq!(enso_peek(dev, rx, &mut b), ENSO_OK);
            assert_eq!(enso_prefetch(dev, rx), ENSO_OK);
            assert!(start.elapsed() < Duration::from_secs(10), "nothing arrived");
        }
        // The first two frames take 128 + 64 bytes: 191 holds only one.
        assert_eq!(enso_recv_max(dev, rx, 191, 10, &mut b), ENSO_OK);
        assert_eq!(b.len, 128);
        assert_eq!(frames_of(&mut b), vec![sent[0].clone()]);
        assert_eq!(enso_recv_max(dev, rx, 1 << 20, 1, &mut b), ENSO_OK);
        assert_eq!(b.len, 64);
        assert_eq!(frames_of(&mut b), vec![sent[1].clone()]);
        assert_eq!(enso_recv_max(dev, rx, 127, 10, &mut b), ENSO_OK);
        assert_eq!(b.len, 0, "the last frame is larger than the bound");
        assert_eq!(enso_recv_max(dev, rx, 128, 10, &mut b), ENSO_OK);
        assert_eq!(frames_of(&mut b), vec![sent[2].clone()]);
        assert_eq!(
            enso_recv_max(dev, rx, 128, 10, ptr::null_mut()),
            ENSO_ERR_INVALID
        );
        assert_eq!(enso_free_all(dev, rx), ENSO_OK);
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
}

#[test]
fn timestamps_in_ensos_format_come_back_as_round_trip_times() {
    let s = loopback_device("ts");
    let dev = s.open(None);
    let off = ENSO_DEFAULT_RTT_OFFSET as usize;
    // SAFETY: `dev` is live and used by this thread only; pointers valid.
    unsafe {
        let rx = enso_rx_pipe_alloc(dev, 0, 1);
        let tx = enso_tx_pipe_alloc(dev);
        assert_eq!(
            enso_set_timestamping_as(dev, 0, off as i32, 7),
            ENSO_ERR_INVALID
        );
        assert_eq!(
            enso_set_timestamping_as(dev, 0, off as i32, ENSO_TS_ENSO),
            ENSO_OK
        );
        send_frames(dev, tx, &[frame(1, 1, 64)]);
        let (p, mut b) = recv_next(dev);
        assert_eq!(p, rx);
        let (mut f, mut n) = (ptr::null_mut(), 0usize);
        assert_eq!(enso_batch_next(&mut b, &mut f, &mut n), 1);
        let mut rtt = u64::MAX;
        assert_eq!(enso_rtt_ns(f, n, off, ENSO_TS_ENSO, &mut rtt), ENSO_OK);
        let raw = std::slice::from_raw_parts(f.add(off), 4);
        assert_eq!(rtt, u32::from_be_bytes(raw.try_into().unwrap()) as u64 * 5);
        assert!(rtt < 1_000_000_000, "{rtt} ns");
        assert_eq!(enso_free_all(dev, rx), ENSO_OK);
        assert_eq!(enso_set_timestamping_as(dev, 0, -1, ENSO_TS_ENSO), ENSO_OK);
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
}

#[test]
fn port_stats_count_what_matched_no_rule() {
    let s = loopback_device("pstats");
    let dev = s.open(None);
    // SAFETY: `dev` is live and used by this thread only; pointers valid.
    unsafe {
        let rx = enso_rx_pipe_alloc(dev, 0, 0);
        assert_eq!(enso_bind(dev, rx, &rule(1)), ENSO_OK);
        let tx = enso_tx_pipe_alloc(dev);
        send_frames(
            dev,
            tx,
            &[frame(1, 1, 64), frame(2, 2, 64), frame(2, 3, 64)],
        );
        let mut st = EnsoPortStats::default();
        assert_eq!(enso_port_stats(dev, 1, &mut st), ENSO_ERR_NO_PORT);
        assert_eq!(enso_port_stats(dev, 0, ptr::null_mut()), ENSO_ERR_INVALID);
        let start = Instant::now();
        while st.rx_frames < 3 {
            // A standalone device's first snapshot comes 200 ms after start.
            let rc = enso_port_stats(dev, 0, &mut st);
            assert!(rc == ENSO_OK || rc == ENSO_ERR_IO, "{}", last_error());
            assert!(start.elapsed() < Duration::from_secs(10), "{st:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!((st.rx_frames, st.tx_frames, st.drop_no_match), (3, 3, 2));
        assert_eq!((st.rx_bytes, st.pipe_full), (3 * 64, 0));
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
}

/// Waits (bounded) for `f` to return something other than `again`.
fn wait_for(mut f: impl FnMut() -> i32, again: i32) -> i32 {
    let start = Instant::now();
    loop {
        let rc = f();
        if rc != again {
            return rc;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "nothing arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn socket_calls_bind_send_receive_select_and_shut_down() {
    let s = loopback_device("socks");
    let dir = CString::new(s.dir.path().to_str().unwrap()).unwrap();
    let mut socks = ptr::null_mut();
    // SAFETY: valid strings and pointers; `socks` is then a live handle
    // used by this thread only.
    unsafe {
        let rc = enso_sockets_open(s.name.as_ptr(), dir.as_ptr(), &mut socks);
        assert_eq!(rc, ENSO_OK, "{}", last_error());
        let a = enso_socket(socks, 0);
        let b = enso_socket(socks, 0);
        assert_eq!((a, b), (0, 1));
        assert_eq!(enso_socket_bind(socks, a, DST_IP, DST_PORT + 1), ENSO_OK);
        assert_eq!(enso_socket_bind(socks, b, DST_IP, DST_PORT + 2), ENSO_OK);
        assert_eq!(enso_socket_bind(socks, 7, DST_IP, 1), ENSO_ERR_BAD_HANDLE);
        // recv copies whole frames out.
        let f1 = frame(1, 1, 100);
        assert_eq!(enso_socket_send(socks, a, f1.as_ptr(), f1.len()), ENSO_OK);
        let mut buf = [0u8; 512];
        let n = wait_for(
            || enso_socket_recv(socks, a, buf.as_mut_ptr(), buf.len()),
            0,
        );
        assert_eq!(n, 128);
        assert_eq!(&buf[..100], &f1[..]);
        // recv_select names the socket that received, and its frames.
        let f2 = frame(2, 2, 64);
        assert_eq!(enso_socket_send(socks, a, f2.as_ptr(), f2.len()), ENSO_OK);
        let mut batch = EnsoBatch {
            data: ptr::null_mut(),
            len: 0,
            next: 0,
        };
        let got = wait_for(|| enso_recv_select(socks, &mut batch), ENSO_ERR_AGAIN);
        assert_eq!((got, batch.len), (b, 64));
        assert_eq!(frames_of(&mut batch), vec![f2.clone()]);
        // Sent back in place, it returns to `b`.
        assert_eq!(enso_socket_send_zc(socks, b, 64), ENSO_OK);
        let mut zc = EnsoBatch {
            data: ptr::null_mut(),
            len: 0,
            next: 0,
        };
        let _ = wait_for(
            || {
                assert_eq!(enso_socket_recv_zc(socks, b, &mut zc), ENSO_OK);
                zc.len as i32
            },
            0,
        );
        assert_eq!(frames_of(&mut zc), vec![f2]);
        assert_eq!(enso_socket_free(socks, b, 64), ENSO_OK);
        // Three sends completed: two copies and one in place.
        let mut done = 0;
        let start = Instant::now();
        while done < 3 {
            let n = enso_get_completions(socks);
            assert!(n >= 0, "{}", last_error());
            done += n;
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{done} completions"
            );
        }
        assert_eq!(done, 3);
        assert_eq!(
            enso_socket_send(socks, a, buf.as_ptr(), 10),
            ENSO_ERR_MALFORMED
        );
        assert_eq!(enso_socket_shutdown(socks, a), ENSO_OK);
        assert_eq!(enso_socket_shutdown(socks, a), ENSO_ERR_BAD_HANDLE);
        assert_eq!(
            enso_socket_recv(socks, -1, buf.as_mut_ptr(), 1),
            ENSO_ERR_BAD_HANDLE
        );
        assert_eq!(enso_sockets_close(socks), ENSO_OK);
    }
}

#[test]
fn port_macs_stream_pipes_and_rxtx_pipes_in_notification_order() {
    let s = loopback_device("more");
    let dev = s.open(None);
    // SAFETY: `dev` is live and used by this thread only; pointers valid.
    unsafe {
        let mut mac = [0u8; 6];
        assert_eq!(enso_port_mac(dev, 0, mac.as_mut_ptr()), ENSO_OK);
        assert_ne!(mac, [0; 6]);
        assert_eq!(mac[0] & 1, 0, "a unicast address");
        assert_eq!(enso_port_mac(dev, 1, mac.as_mut_ptr()), ENSO_ERR_NO_PORT);
        assert_eq!(enso_port_mac(dev, 0, ptr::null_mut()), ENSO_ERR_INVALID);
        // An RX pipe for flow 1, an RX/TX pipe for flow 2, a stream pipe
        // for flow 3.
        let rx = enso_rx_pipe_alloc(dev, 0, 0);
        let rxtx = enso_rxtx_pipe_alloc(dev, 0, 0);
        let st = enso_stream_pipe_alloc(dev, 0, 0);
        assert!(rx >= 0 && rxtx >= 0 && st >= 0, "{}", last_error());
        assert_eq!(enso_stream_pipe_alloc(dev, 3, 0), ENSO_ERR_NO_PORT);
        for (p, flow) in [(rx, 1), (rxtx, 2), (st, 3)] {
            assert_eq!(enso_bind(dev, p, &rule(flow)), ENSO_OK);
        }
        let tx = enso_tx_pipe_alloc(dev);
        send_frames(
            dev,
            tx,
            &[frame(1, 1, 64), frame(2, 2, 64), frame(3, 3, 100)],
        );
        // Only the RX/TX pipe is named; the RX pipe stays ready.
        let p = wait_for(|| enso_next_rxtx_pipe_with_data(dev), ENSO_ERR_AGAIN);
        assert_eq!(p, rxtx);
        let mut b = EnsoBatch {
            data: ptr::null_mut(),
            len: 0,
            next: 0,
        };
        assert_eq!(enso_recv(dev, rxtx, &mut b), ENSO_OK);
        assert_eq!(frames_of(&mut b), vec![frame(2, 2, 64)]);
        assert_eq!(enso_free_all(dev, rxtx), ENSO_OK);
        // The stream pipe holds the UDP payload alone: 100 - 42 bytes.
        let got = wait_for(
            || {
                assert_eq!(enso_recv(dev, st, &mut b), ENSO_OK);
                if b.len == 0 {
                    assert_eq!(enso_prefetch(dev, st), ENSO_OK);
                }
                b.len as i32
            },
            0,
        );
        assert_eq!(got, 58);
        let f3 = frame(3, 3, 100);
        assert_eq!(std::slice::from_raw_parts(b.data, b.len), &f3[42..]);
        assert_eq!(enso_free(dev, st, 5), ENSO_OK, "any byte count");
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
}

#[test]
fn pipes_past_those_reserved_are_given_and_freed_ones_given_again() {
    let s = loopback_device("grow");
    let mut o = EnsoDeviceOptions {
        pipes: 0,
        tx_pipes: 0,
        tx_pipe_size: 0,
        tx_credits: 0,
        prefetch: 0,
    };
    // SAFETY: a writable options struct.
    assert_eq!(unsafe { enso_device_options_default(&mut o) }, ENSO_OK);
    o.pipes = 1;
    o.tx_pipes = 1;
    o.tx_pipe_size = 1 << 16;
    let dev = s.open(Some(&o));
    // SAFETY: `dev` is live and used by this thread only; every pointer
    // passed is valid.
    unsafe {
        // An RX pipe with a TX pipe of its own, eight times over (seven
        // more of each than reserved).
        let mut pairs = vec![];
        for i in 0..8 {
            let rx = enso_rx_pipe_alloc(dev, 0, 0);
            let tx = enso_tx_pipe_alloc(dev);
            assert_eq!((rx, tx), (i, TX_HANDLE_BASE + i), "{}", last_error());
            assert_eq!(enso_bind(dev, rx, &rule(i as u32)), ENSO_OK);
            pairs.push((rx, tx));
        }
        // Each TX pipe sends its own flow; each RX pipe gets it intact.
        for &(rx, tx) in &pairs {
            let f = frame(rx as u32, rx as u64, 100);
            send_frames(dev, tx, std::slice::from_ref(&f));
            let (p, mut b) = recv_next(dev);
            assert_eq!((p, frames_of(&mut b)), (rx, vec![f]));
            assert_eq!(enso_free(dev, p, b.len), ENSO_OK);
        }
        // 200 times: freed pipes are given again, under the lowest free
        // handle.
        for _ in 0..200 {
            assert_eq!(enso_rx_pipe_free(dev, 3), ENSO_OK, "{}", last_error());
            assert_eq!(enso_tx_pipe_free(dev, TX_HANDLE_BASE + 5), ENSO_OK);
            assert_eq!(enso_rx_pipe_alloc(dev, 0, 0), 3, "{}", last_error());
            assert_eq!(enso_tx_pipe_alloc(dev), TX_HANDLE_BASE + 5);
        }
        // The freed pipe's rule went with it: flow 3 matches nothing now.
        send_frames(dev, pairs[5].1, &[frame(3, 99, 64)]);
        let start = Instant::now();
        while s.nic.stats().ports[0].counters.drop_no_match == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "not dropped");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(enso_bind(dev, 3, &rule(3)), ENSO_OK);
        let f = frame(3, 100, 64);
        send_frames(dev, pairs[5].1, std::slice::from_ref(&f));
        let (p, mut b) = recv_next(dev);
        assert_eq!((p, frames_of(&mut b)), (3, vec![f]));
        assert_eq!(enso_free(dev, p, b.len), ENSO_OK);
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
    let stats = s.nic.stop();
    assert_eq!(stats.ports[0].counters.drop_no_match, 1);
}
