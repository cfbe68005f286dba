//! Ensō's socket-like calls against an emulated NIC in this process whose
//! port 0 loops back: what a socket sends returns to the port and is
//! steered by the bindings.

#[path = "../examples/socket_echo.rs"]
#[allow(dead_code)]
mod socket_echo;

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use enso::socket::{Socket, SocketError, Sockets};
use enso::Device;
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};
use socket_echo::{parse_udp, udp_frame};

fn loopback(tag: &str) -> (Nic, Sockets) {
    let name = format!("sock-{tag}-{}", std::process::id());
    let nic = Nic::start(
        DeviceConfig::new(name, WireConfig::Loopback),
        RunOptions::default(),
    )
    .unwrap();
    let dev = Device::attach_nic(&nic, Sockets::options()).unwrap();
    (nic, Sockets::from_device(dev))
}

fn addr(s: &str) -> SocketAddrV4 {
    s.parse().unwrap()
}

/// Frames that reach `s` within a second, copied out with `recv` into a
/// buffer of `cap` bytes per call.
fn collect(socks: &mut Sockets, s: Socket, want: usize, cap: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; cap];
    let until = Instant::now() + Duration::from_secs(2);
    while out.len() < want && Instant::now() < until {
        let n = socks.recv(s, &mut buf).unwrap();
        let mut at = 0;
        while at < n {
            let (_, _, data) = parse_udp(&buf[at..n]).expect("a UDP frame");
            let len = 42 + data.len();
            out.push(buf[at..at + len].to_vec());
            at += len.max(60).next_multiple_of(64);
        }
    }
    out
}

#[test]
fn bindings_steer_datagrams_to_their_sockets_and_recv_copies_whole_frames() {
    let (nic, mut socks) = loopback("steer");
    let a = socks.socket(false).unwrap();
    let b = socks.socket(false).unwrap();
    socks.bind(a, addr("10.0.0.1:7")).unwrap();
    socks.bind(b, addr("10.0.0.1:8")).unwrap();
    let c = addr("10.0.0.9:4000");
    for i in 0..10u8 {
        let to = if i % 2 == 0 {
            "10.0.0.1:7"
        } else {
            "10.0.0.1:8"
        };
        socks.send(a, &udp_frame(c, addr(to), &[i; 100])).unwrap();
    }
    // A buffer of 200 bytes holds one 142-byte frame's 192-byte slot at a
    // time: recv leaves the rest for the next call, loses none.
    let got_a = collect(&mut socks, a, 5, 200);
    let got_b = collect(&mut socks, b, 5, 4096);
    let payloads =
        |v: &[Vec<u8>]| -> Vec<u8> { v.iter().map(|f| parse_udp(f).unwrap().2[0]).collect() };
    assert_eq!(payloads(&got_a), [0, 2, 4, 6, 8]);
    assert_eq!(payloads(&got_b), [1, 3, 5, 7, 9]);
    // A buffer too small for the first frame gets nothing, and keeps it.
    socks
        .send(a, &udp_frame(c, addr("10.0.0.1:7"), &[42; 100]))
        .unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    while nic.stats().ports[0].counters.rx_frames < 11 {
        assert!(Instant::now() < until, "the frame did not come back");
        std::thread::sleep(Duration::from_millis(1));
    }
    // The port has it; the pipe gets it in the same engine step.
    std::thread::sleep(Duration::from_millis(20));
    let mut small = [0u8; 100];
    assert_eq!(socks.recv(a, &mut small).unwrap(), 0);
    assert_eq!(payloads(&collect(&mut socks, a, 1, 4096)), [42]);
    drop(socks);
    nic.try_stop().unwrap();
}

#[test]
fn recv_select_names_the_socket_with_data_and_shutdown_unbinds() {
    let (nic, mut socks) = loopback("select");
    let a = socks.socket(false).unwrap();
    let b = socks.socket(false).unwrap();
    socks.bind(a, addr("10.0.0.1:7")).unwrap();
    socks.bind(b, addr("10.0.0.1:8")).unwrap();
    let c = addr("10.0.0.9:4000");
    socks
        .send(a, &udp_frame(c, addr("10.0.0.1:8"), b"for b"))
        .unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    let (who, data) = loop {
        if let Some((s, batch)) = socks.recv_select().unwrap() {
            let f = batch.packets().next().unwrap().to_vec();
            break (s, f);
        }
        assert!(Instant::now() < until, "nothing arrived");
    };
    assert_eq!(who, b);
    assert_eq!(parse_udp(&data).unwrap().2, b"for b");
    socks.free(b, 64).unwrap();

    // After shutdown, b's binding is gone: the NIC has no rule and no
    // fallback for the next datagram to port 8, so it counts a drop.
    socks.shutdown(b).unwrap();
    assert!(matches!(socks.recv_zc(b), Err(SocketError::NoSocket(1))));
    assert!(matches!(socks.shutdown(b), Err(SocketError::NoSocket(1))));
    let before = nic.stats().ports[0].counters.drop_no_match;
    socks
        .send(a, &udp_frame(c, addr("10.0.0.1:8"), b"for b"))
        .unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    while nic.stats().ports[0].counters.drop_no_match == before {
        assert!(Instant::now() < until, "the datagram was not dropped");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(socks.recv_select().unwrap().is_none());
    drop(socks);
    nic.try_stop().unwrap();
}

#[test]
fn bad_sockets_and_bytes_that_are_not_frames_are_refused() {
    let (nic, mut socks) = loopback("bad");
    assert!(matches!(
        socks.bind(Socket(3), addr("10.0.0.1:7")),
        Err(SocketError::NoSocket(3))
    ));
    let a = socks.socket(true).unwrap();
    assert!(matches!(
        socks.send(Socket(9), &[0u8; 64]),
        Err(SocketError::NoSocket(9))
    ));
    // Not an Ethernet/IP frame the NIC can delimit.
    match socks.send(a, &[0xffu8; 64]) {
        Err(SocketError::NotFrames(why)) => assert!(why.contains("byte 0"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A frame whose header claims more bytes than are given.
    let f = udp_frame(addr("10.0.0.9:1"), addr("10.0.0.1:7"), &[1; 200]);
    match socks.send(a, &f[..100]) {
        Err(SocketError::NotFrames(why)) => assert!(why.contains("cut short"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Sending what was not received is the library's error, passed on.
    assert!(matches!(socks.send_zc(a, 64), Err(SocketError::Enso(_))));
    assert_eq!(socks.get_completions().unwrap(), 0);
    drop(socks);
    nic.try_stop().unwrap();
}

#[test]
fn socket_timestamps_are_in_ensos_format_at_its_default_offset() {
    use enso::{rtt_ns, TsFormat, DEFAULT_RTT_OFFSET};
    assert_eq!(DEFAULT_RTT_OFFSET, 18);
    let (nic, mut socks) = loopback("ts");
    let s = socks.socket(true).unwrap();
    socks.enable_device_timestamp(DEFAULT_RTT_OFFSET).unwrap();
    let off = DEFAULT_RTT_OFFSET as usize;
    let mut rtts = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    for i in 0..5u8 {
        let f = udp_frame(addr("10.0.0.9:4000"), addr("10.0.0.1:7"), &[i; 40]);
        socks.send(s, &f).unwrap();
        let want = rtts.len() + 1;
        while rtts.len() < want {
            assert!(Instant::now() < until, "frames did not come back");
            let n = {
                let b = socks.recv_zc(s).unwrap();
                for p in b.packets() {
                    let raw: [u8; 4] = p[off..off + 4].try_into().unwrap();
                    rtts.push((raw, rtt_ns(p, off, TsFormat::Enso).unwrap()));
                }
                b.len()
            };
            socks.free(s, n).unwrap();
        }
    }
    for (raw, ns) in rtts {
        // Big-endian cycles of 5 ns: a round trip within a loopback is
        // well under a second (little-endian nanoseconds read this way
        // would be seconds long for any round trip under 16 us).
        assert!(ns < 1_000_000_000, "{raw:?} read as {ns} ns");
        assert_eq!(ns, u32::from_be_bytes(raw) as u64 * 5);
    }
    socks.disable_device_timestamp().unwrap();
    drop(socks);
    nic.try_stop().unwrap();
}

#[test]
fn get_completions_counts_what_recv_and_send_reaped_too() {
    let (nic, mut socks) = loopback("compl");
    let s = socks.socket(true).unwrap();
    let f = udp_frame(addr("10.0.0.9:4000"), addr("10.0.0.1:7"), &[1; 40]);
    let mut pending = 0usize;
    let mut received = 0;
    let mut buf = vec![0u8; 4096];
    let until = Instant::now() + Duration::from_secs(5);
    // EnsōGen's loop: send, receive, and `pending -= get_completions()`.
    // Only every fourth round asks get_completions, so recv and send
    // reap most completions in between; none may be lost.
    for round in 0..200 {
        if round < 100 {
            socks.send(s, &f).unwrap();
            pending += 1;
        }
        // Each 82-byte frame takes a 128-byte slot.
        received += socks.recv(s, &mut buf).unwrap() / 128;
        if round % 4 == 3 {
            pending -= socks.get_completions().unwrap();
        }
    }
    while pending > 0 || received < 100 {
        assert!(
            Instant::now() < until,
            "stalled: {pending} pending, {received} received"
        );
        received += socks.recv(s, &mut buf).unwrap() / 128;
        pending -= socks.get_completions().unwrap();
    }
    assert_eq!((pending, received), (0, 100));
    assert_eq!(socks.get_completions().unwrap(), 0, "nothing counted twice");
    drop(socks);
    nic.try_stop().unwrap();
}

#[test]
fn shutdown_frees_the_pipe_so_sockets_can_be_made_again_and_again() {
    let (nic, mut socks) = loopback("reuse");
    // Sockets::options() reserves 64 pipe ids; a 65th socket at once
    // asks the device for more.
    let mut all: Vec<Socket> = (0..64).map(|_| socks.socket(false).unwrap()).collect();
    assert_eq!(socks.device().info().pipe_count, 64);
    all.push(socks.socket(false).unwrap());
    assert_eq!(all[64], Socket(64));
    assert!(socks.device().info().pipe_count > 64);
    for s in &all {
        socks.shutdown(*s).unwrap();
    }
    // 65 shutdowns later, sockets are made again, and they work: each
    // bound socket receives what is sent to it, nothing of its
    // predecessor's.
    let c = addr("10.0.0.9:4000");
    for round in 0..3u16 {
        let s = socks.socket(false).unwrap();
        assert_eq!(s, Socket(0), "the lowest free number");
        let to = SocketAddrV4::new([10, 0, 0, 1].into(), 100 + round);
        socks.bind(s, to).unwrap();
        socks
            .send(s, &udp_frame(c, to, &[round as u8; 50]))
            .unwrap();
        let got = collect(&mut socks, s, 1, 4096);
        assert_eq!(got.len(), 1, "round {round}");
        assert_eq!(parse_udp(&got[0]).unwrap().2, &[round as u8; 50][..]);
        // One frame in the pipe not yet taken when it is shut down.
        socks.send(s, &udp_frame(c, to, &[0xee; 50])).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        socks.shutdown(s).unwrap();
    }
    let more: Vec<Socket> = (0..64).map(|_| socks.socket(true).unwrap()).collect();
    assert_eq!(more.len(), 64);
    assert!(matches!(
        socks.shutdown(Socket(99)),
        Err(SocketError::NoSocket(99))
    ));
    drop(socks);
    nic.try_stop().unwrap();
}
