//! Frames sent in place: a set laid out once in the TX pipe and sent lap
//! after lap of it comes back frame for frame as configured, in exact
//! counts, fillers and all; a set too large for the pipe is copied and
//! comes back the same.

mod common;

use std::time::Duration;

use pktgen::pcap::{stream_frames, CaptureWriter};
use pktgen::rate::Rate;
use pktgen::session::{tx_pipe_size, RunPlan, Session, SessionOptions};
use pktgen::stream::TxStream;
use pktgen::traffic::TrafficSpec;

/// The frames of one pass of `stream`'s set, as configured.
fn set_frames(stream: &TxStream) -> Vec<Vec<u8>> {
    stream_frames(stream.stream().data())
        .take(stream.set_len())
        .map(|f| f.unwrap().to_vec())
        .collect()
}

/// Sends `count` frames of `stream` (with two queues: one 4 MiB TX pipe,
/// 32 MiB of RX pipes, which hold every frame sent here even if the
/// receiver does not run) and checks that every frame came back as the
/// set has it, in exact counts. Returns whether it was sent in place.
fn send_and_check(stream: &TxStream, count: u64) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let nic = common::self_loop(dir.path(), 0);
    let mut s = Session::attach_nic(&nic, SessionOptions { queues: 2, port: 0 }).unwrap();
    assert_eq!(s.tx_pipe_size(), tx_pipe_size(2));
    let set = set_frames(stream);
    let want: Vec<Vec<u8>> = (0..count as usize)
        .map(|i| set[i % set.len()].clone())
        .collect();
    let want_bytes: u64 = want.iter().map(|f| f.len() as u64).sum();
    assert!(want_bytes < (s.rx_pipes() * s.rx_pipe_size()) as u64 / 2);

    let limit = Rate::parse("2Gbps")
        .unwrap()
        .limiter_setting(&stream.profile())
        .unwrap();
    let out_path = dir.path().join("out.pcap");
    let mut cap = CaptureWriter::create(&out_path).unwrap();
    let plan = RunPlan {
        limit: Some(limit),
        count: Some(count),
        duration: Some(Duration::from_secs(60)),
        ..RunPlan::new(stream)
    };
    let out = s.run(&plan, Some(&mut cap), &mut |_, _| {}).unwrap();
    cap.finish().unwrap();
    assert!(!out.interrupted && !out.device_gone);
    assert_eq!(out.counters.tx_packets, count);
    assert_eq!(out.counters.rx_packets, count);
    assert_eq!(out.counters.tx_bytes, want_bytes);
    assert_eq!(out.counters.rx_bytes, want_bytes);

    // Round robin over the RX pipes reorders: compare as multisets.
    let mut got = common::read_pcap(&out_path);
    let mut want = want;
    got.sort();
    want.sort();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "frames came back other than configured");
    drop(s);
    let stats = nic.stop();
    assert_eq!(stats.total_drops(), 0, "{:?}", stats.drops());
    out.in_place
}

#[test]
fn laps_of_the_pipe_send_every_frame_as_configured() {
    // 1518 B frames of three flows: 24 flits each, so a 4 MiB pipe holds
    // 910 passes and 16 filler marker flits. Three and a half laps.
    let stream = TxStream::synthetic(&TrafficSpec {
        sizes: "1518".parse().unwrap(),
        flows: Some(3),
        ..TrafficSpec::default()
    })
    .unwrap();
    let per_lap = (tx_pipe_size(2) / 64 / (3 * 24)) as u64 * 3;
    assert!(send_and_check(&stream, per_lap * 7 / 2 + 1));

    // A size mix (its frames end mid-flit) across flows: two laps and a
    // part of one.
    let stream = TxStream::synthetic(&TrafficSpec {
        sizes: "64:7,570:4,1500:1".parse().unwrap(),
        flows: Some(5),
        ..TrafficSpec::default()
    })
    .unwrap();
    let per_lap = (tx_pipe_size(2) as f64 / 64.0 / stream.profile().mean_flits) as u64;
    assert!(send_and_check(&stream, 2 * per_lap + 1_234));
}

#[test]
fn a_set_larger_than_the_pipe_allows_is_copied() {
    // 2000 distinct 1518 B frames take 48000 flits: one pass in 4 MiB,
    // with 17536 flits left over, more than the frames to put fillers in.
    let stream = TxStream::synthetic(&TrafficSpec {
        sizes: "1518".parse().unwrap(),
        flows: Some(2000),
        ..TrafficSpec::default()
    })
    .unwrap();
    assert_eq!(stream.set_len(), 2000);
    assert!(!send_and_check(&stream, 4321));
}
