//! Frames through an in-process NIC with the generator's library: a pcap
//! replayed out of a port cabled to itself comes back byte for byte, and
//! RTTs measured over a cable with a delay are never shorter than it, never
//! longer than the run, and exactly the delay when the test holds the
//! NIC's clock.

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
    let started = std::time::Instant::now();
    let out = s.run(&plan, Some(&mut cap), &mut |_, _| {}).unwrap();
    let run_ns = started.elapsed().as_nanos() as u64;
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
    // And none is longer than the whole run took: a frame cannot have been
    // away longer than that (the exact value is checked under a held clock
    // below).
    let max = *rtts.iter().max().unwrap();
    assert!(max <= run_ns, "an RTT of {max} ns in a run of {run_ns} ns");
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

/// With the NIC's clock held by the test, the RTT of every frame is known
/// in advance: each is stamped when the NIC sends it, at `T0`, waits on the
/// cable until the clock reaches `T0 + DELAY_NS`, and the test moves the
/// clock there in one store once every frame is on the cable. So the RTTs
/// the generator reports are bounded on both sides, by the same number: a
/// NIC that added time (or lost it) anywhere between its TX stamp and its
/// RX arithmetic, or a generator that misread the stamp, fails.
#[test]
fn rtt_under_a_held_clock_is_exactly_the_cable_delay() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    const DELAY_NS: u64 = 250_000;
    const OFFSET: u8 = 18;
    let dir = tempfile::tempdir().unwrap();
    let nic = common::self_loop(dir.path(), DELAY_NS);
    let t0 = nic_emu::monotonic_ns() + 1_000_000_000;
    let clock = Arc::new(AtomicU64::new(t0));
    let c = nic_emu::Clock::Manual(clock.clone());
    nic.with_engine(move |e| e.set_clock(c));

    // (Not IPv6: bytes 18-21 are its payload length, which the stamp
    // would overwrite.)
    let sent = common::frames(&[(Ipv4Udp, 60), (Raw, 200), (Ipv4Udp, 1000)]);
    let stream =
        TxStream::from_set(&ReplaySet::from_frames(sent.iter().map(Vec::as_slice)).unwrap());
    let mut s = Session::attach_nic(&nic, SessionOptions { queues: 2, port: 0 }).unwrap();
    let out_path = dir.path().join("held.pcap");
    // Few enough for the RX pipes to hold them all. No rate limit: the
    // NIC's limiter refills from the clock the test is holding.
    let n = 600u64;
    let plan = RunPlan {
        limit: None,
        count: Some(n),
        duration: Some(Duration::from_secs(20)),
        timestamp_offset: Some(OFFSET),
        // The frames wait on the cable for as long as the test holds the
        // clock: the receive side must not give up on them meanwhile.
        drain: pktgen::session::Drain {
            quiet: Duration::from_secs(20),
            max: Duration::from_secs(20),
        },
        ..RunPlan::new(&stream)
    };
    let port_frames = |nic: &nic_emu::Nic| {
        let st = nic.stats();
        (
            st.ports[0].counters.tx_frames,
            st.ports[0].counters.rx_frames,
        )
    };
    let out = std::thread::scope(|sc| {
        let run = sc.spawn(|| {
            let mut cap = CaptureWriter::create(&out_path).unwrap();
            let out = s.run(&plan, Some(&mut cap), &mut |_, _| {}).unwrap();
            cap.finish().unwrap();
            out
        });
        // Every frame sent, at T0, and on the cable.
        let until = Instant::now() + Duration::from_secs(20);
        while port_frames(&nic).0 < n {
            assert!(
                Instant::now() < until,
                "sent {:?} of {n}",
                port_frames(&nic)
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        // One nanosecond short of the delay, none may arrive.
        clock.store(t0 + DELAY_NS - 1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(port_frames(&nic), (n, 0), "a frame left the cable early");
        clock.store(t0 + DELAY_NS, Ordering::Relaxed);
        run.join().unwrap()
    });
    assert_eq!(
        (
            out.counters.tx_packets,
            out.counters.rx_packets,
            out.counters.rtt_samples
        ),
        (n, n, n)
    );
    // Every RTT the NIC wrote is the delay, to the nanosecond...
    let got = common::read_pcap(&out_path);
    assert_eq!(got.len() as u64, n);
    for f in &got {
        assert_eq!(u64::from(common::rtt_at(f, OFFSET.into())), DELAY_NS);
    }
    assert_eq!(out.counters.rtt_sum_ns, n * DELAY_NS);
    // ... and the generator's histogram says so (to its 0.1% precision).
    let sum = out.rtt.expect("RTTs measured").summary();
    for (what, v) in [
        ("min", sum.min_ns),
        ("p50", sum.p50_ns),
        ("max", sum.max_ns),
    ] {
        let v = v as f64;
        assert!(
            (DELAY_NS as f64 * 0.999..=DELAY_NS as f64 * 1.001).contains(&v),
            "{what} {v} ns for a {DELAY_NS} ns cable"
        );
    }
    drop(s);
    let stats = nic.stop();
    assert_eq!(stats.total_drops(), 0, "{:?}", stats.drops());
}
