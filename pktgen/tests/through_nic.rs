//! Frames through an in-process NIC with the generator's library: a pcap
//! replayed out of a port cabled to itself comes back byte for byte, and
//! RTTs measured over a cable with a delay are never shorter than it.

mod common;

use std::time::Duration;

use nic_emu::testframe::FrameKind::{Ipv4Udp, Ipv6Udp, Raw};
use pktgen::pcap::{CaptureWriter, ReplaySet};
use pktgen::rate::{Rate, DEFAULT_MAX_DEN};
use pktgen::session::{RunPlan, Session, SessionOptions};
use pktgen::stream::TxStream;

#[test]
fn replay_comes_back_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let nic = common::self_loop(dir.path(), 0);
    // Every size class and frame kind, including frames that need a marker
    // flit (no length in their headers) and frames that end mid-flit.
    let spec = [
        (Ipv4Udp, 60),
        (Ipv4Udp, 61),
        (Ipv4Udp, 64),
        (Ipv4Udp, 128),
        (Ipv4Udp, 500),
        (Ipv4Udp, 1514),
        (Ipv4Udp, 1536),
        (Ipv6Udp, 79),
        (Ipv6Udp, 200),
        (Ipv6Udp, 1500),
        (Raw, 60),
        (Raw, 100),
        (Raw, 1536),
    ];
    let sent: Vec<Vec<u8>> = (0..20).flat_map(|_| common::frames(&spec)).collect();
    let pcap = common::write_pcap(&dir.path().join("in.pcap"), &sent);
    let stream = TxStream::from_set(&ReplaySet::from_pcap(&pcap).unwrap());

    let mut s = Session::attach_nic(&nic, SessionOptions { queues: 2, port: 0 }).unwrap();
    let out_path = dir.path().join("out.pcap");
    let mut cap = CaptureWriter::create(&out_path).unwrap();
    let limit = Rate::parse("200Mbps")
        .unwrap()
        .rate_limit(&stream.profile(), DEFAULT_MAX_DEN)
        .unwrap();
    let plan = RunPlan {
        limit: Some(limit),
        count: Some(sent.len() as u64),
        duration: Some(Duration::from_secs(20)),
        ..RunPlan::new(&stream)
    };
    let out = s.run(&plan, Some(&mut cap), &mut |_, _| {}).unwrap();
    cap.finish().unwrap();
    assert_eq!(out.counters.tx_packets, sent.len() as u64);
    assert_eq!(out.counters.rx_packets, sent.len() as u64);
    let want_bytes: u64 = sent.iter().map(|f| f.len() as u64).sum();
    assert_eq!(out.counters.tx_bytes, want_bytes);
    assert_eq!(out.counters.rx_bytes, want_bytes);

    // Two RX pipes may reorder frames between them: compare as multisets.
    let mut got = common::read_pcap(&out_path);
    let mut want = sent.clone();
    got.sort();
    want.sort();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "captured frames differ from the pcap");
    drop(s);
    let stats = nic.stop();
    assert_eq!(stats.total_drops(), 0, "{:?}", stats.drops());
}

#[test]
fn rtt_over_a_delayed_cable_is_at_least_the_delay() {
    const DELAY_NS: u64 = 100_000;
    const OFFSET: u8 = 18;
    let dir = tempfile::tempdir().unwrap();
    let nic = common::self_loop(dir.path(), DELAY_NS);
    let sent = common::frames(&[(Ipv4Udp, 60), (Ipv4Udp, 124), (Ipv4Udp, 1000)]);
    let stream =
        TxStream::from_set(&ReplaySet::from_frames(sent.iter().map(Vec::as_slice)).unwrap());
    let mut s = Session::attach_nic(&nic, SessionOptions { queues: 2, port: 0 }).unwrap();
    let out_path = dir.path().join("rtt.pcap");
    let mut cap = CaptureWriter::create(&out_path).unwrap();
    let limit = Rate::parse("500kpps")
        .unwrap()
        .rate_limit(&stream.profile(), DEFAULT_MAX_DEN)
        .unwrap();
    // Few enough that the RX pipes hold them all even if the receiving
    // thread is descheduled for the whole run.
    let n = 5_000u64;
    let plan = RunPlan {
        limit: Some(limit),
        count: Some(n),
        duration: Some(Duration::from_secs(20)),
        timestamp_offset: Some(OFFSET),
        ..RunPlan::new(&stream)
    };
    let out = s.run(&plan, Some(&mut cap), &mut |_, _| {}).unwrap();
    cap.finish().unwrap();
    assert_eq!(out.counters.tx_packets, n);
    assert_eq!(out.counters.rx_packets, n);
    let h = out.rtt.expect("RTTs measured");
    assert_eq!(h.count(), out.counters.rx_packets);
    assert_eq!(out.counters.rtt_samples, n);

    // Every RTT, exactly as the NIC wrote it into the frame.
    let got = common::read_pcap(&out_path);
    assert_eq!(got.len() as u64, n);
    let rtts: Vec<u64> = got
        .iter()
        .map(|f| u64::from(common::rtt_at(f, OFFSET.into())))
        .collect();
    let min = *rtts.iter().min().unwrap();
    assert!(
        min >= DELAY_NS,
        "an RTT of {min} ns beat a {DELAY_NS} ns cable"
    );
    assert_eq!(rtts.iter().sum::<u64>(), out.counters.rtt_sum_ns);
    // The histogram holds the same values (to its 0.1% precision).
    let sum = h.summary();
    assert!(sum.min_ns as f64 >= DELAY_NS as f64 * 0.999);
    assert!(sum.p50_ns >= DELAY_NS);
    // Only the timestamp bytes differ from what was sent.
    for f in &got {
        let v = nic_emu::testframe::TestFrames::peek(f).unwrap();
        let mut f = f.clone();
        f[18..22].fill(0);
        assert_eq!(f, sent[v.seq as usize], "frame {}", v.seq);
    }

    // With timestamping off again, frames come back untouched.
    let plan = RunPlan {
        timestamp_offset: None,
        count: Some(300),
        ..plan
    };
    let out = s.run(&plan, None, &mut |_, _| {}).unwrap();
    assert!(out.rtt.is_none());
    assert_eq!(out.counters.rx_packets, 300);
}
