//! Runs each example in process (an emulated NIC with a generator port)
//! through the `run` function its `main` calls, and checks its summary.

use clap::Parser;

#[path = "../examples/capture.rs"]
mod capture;
#[path = "../examples/echo.rs"]
mod echo;
#[path = "../examples/echo_copy.rs"]
mod echo_copy;
#[path = "../examples/flow_and_fallback.rs"]
mod flow_and_fallback;
#[path = "../examples/l2_forward.rs"]
mod l2_forward;
#[path = "../examples/socket_echo.rs"]
mod socket_echo;

fn args<P: Parser>(argv: &[&str]) -> P {
    P::try_parse_from(argv).expect("arguments")
}

#[test]
fn echo_sends_every_frame_back() {
    let a: echo::Args = args(&["echo", "--in-process", "--frames", "2000", "--json"]);
    let s = echo::run(&a).expect("echo");
    assert_eq!(s.frames, 2000);
    assert_eq!(s.bytes, 2000 * 64);
    assert!((1..=2000).contains(&s.batches));
    assert_eq!(
        (s.sent, s.returned, s.corrupt),
        (Some(2000), Some(2000), Some(0))
    );
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["frames"], 2000);
}

#[test]
fn echo_copy_sends_a_copy_of_every_frame_while_walking_the_batch() {
    let a: echo_copy::Args = args(&["echo_copy", "--in-process", "--frames", "3000"]);
    let s = echo_copy::run(&a).expect("echo_copy");
    assert_eq!(s.frames, 3000);
    assert_eq!(s.rx_bytes, 3000 * 64);
    assert!((1..=3000).contains(&s.batches), "{s:?}");
    assert_eq!(
        (s.sent, s.returned, s.corrupt),
        (Some(3000), Some(3000), Some(0)),
        "every copy came back intact"
    );
    assert_eq!((s.pipes, s.tx_pipes), (2, 2));
}

#[test]
fn echo_copy_with_a_tx_pipe_per_rx_pipe_gets_every_frame_back() {
    // Eight RX pipes, each with its own TX pipe: seven more TX pipes than
    // the handle reserved at attach, allocated as asked for.
    let a: echo_copy::Args = args(&[
        "echo_copy",
        "--in-process",
        "--pipes",
        "8",
        "--frames",
        "4000",
    ]);
    let s = echo_copy::run(&a).expect("echo_copy");
    assert_eq!((s.pipes, s.tx_pipes), (8, 8));
    assert_eq!(s.frames, 4000);
    assert_eq!(s.rx_bytes, 4000 * 64);
    assert!((1..=4000).contains(&s.batches), "{s:?}");
    assert_eq!(
        (s.sent, s.returned, s.corrupt),
        (Some(4000), Some(4000), Some(0)),
        "every copy came back intact"
    );
}

#[test]
fn l2_forward_sends_port_0_frames_out_of_port_1_with_macs_swapped() {
    let mut f = [0u8; 14];
    f[..6].copy_from_slice(&[1; 6]);
    f[6..12].copy_from_slice(&[2; 6]);
    l2_forward::swap_macs(&mut f);
    assert_eq!((&f[..6], &f[6..12]), (&[2u8; 6][..], &[1u8; 6][..]));

    let a: l2_forward::Args = args(&["l2_forward", "--in-process", "--frames", "1000"]);
    let s = l2_forward::run(&a).expect("l2_forward");
    assert_eq!(s.frames, 1000);
    assert_eq!(s.port1_tx_frames, Some(1000));
}

#[test]
fn capture_writes_every_frame_to_the_pcap_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("rx.pcap");
    let out_arg = out.to_str().expect("utf-8 path");
    let argv = [
        "capture",
        "--in-process",
        "--frames",
        "300",
        "--out",
        out_arg,
    ];
    let s = capture::run(&args(&argv)).expect("capture");
    assert_eq!((s.frames, s.malformed_batches), (300, 0));
    let file = std::fs::File::open(&out).expect("pcap");
    let mut r = pcap_file::pcap::PcapReader::new(file).expect("pcap header");
    let (mut n, mut bytes) = (0, 0);
    while let Some(p) = r.next_packet() {
        let p = p.expect("pcap record");
        assert!((64..=1514).contains(&p.data.len()), "{}", p.data.len());
        n += 1;
        bytes += p.data.len() as u64;
    }
    assert_eq!((n, bytes), (300, s.bytes));
}

#[test]
fn flow_and_fallback_splits_one_flow_from_the_rest() {
    let argv = ["flow_and_fallback", "--in-process", "--frames", "400"];
    let s = flow_and_fallback::run(&args(&argv)).expect("flow_and_fallback");
    // Four flows in turn: one in four frames is the bound flow's.
    assert_eq!((s.bound.flow, s.bound.other), (100, 0));
    assert_eq!((s.fallback.flow, s.fallback.other), (0, 300));
}

#[test]
fn socket_echo_answers_every_datagram_with_std_sockets_and_with_enso_sockets() {
    // Before the port: the std version on the loopback interface.
    let a: socket_echo::Args = args(&["socket_echo", "--std", "--datagrams", "200"]);
    let s = socket_echo::run(&a).expect("std echo");
    assert_eq!((s.sent, s.echoed, s.wrong), (200, 200, 0));
    // After: Ensō's socket calls against an emulated NIC whose port loops
    // back: each datagram reaches the server's socket by its binding, comes
    // back with addresses swapped, and reaches the client's socket by its.
    let a: socket_echo::Args = args(&["socket_echo", "--in-process", "--datagrams", "2000"]);
    let s = socket_echo::run(&a).expect("enso echo");
    assert_eq!((s.sent, s.echoed, s.wrong), (2000, 2000, 0));
}

#[test]
fn socket_echo_frames_round_trip_through_the_helpers() {
    use std::net::SocketAddrV4;
    let src: SocketAddrV4 = "10.0.0.2:5000".parse().unwrap();
    let dst: SocketAddrV4 = "10.0.0.1:7".parse().unwrap();
    let mut f = socket_echo::udp_frame(src, dst, b"hello");
    assert_eq!(f.len(), 60, "padded to the minimum frame");
    assert_eq!(socket_echo::parse_udp(&f), Some((src, dst, &b"hello"[..])));
    socket_echo::swap_endpoints(&mut f);
    assert_eq!(socket_echo::parse_udp(&f), Some((dst, src, &b"hello"[..])));
}
