//! The pcap port: frames replayed from a capture file through the NIC to an
//! application that sends them back, written to another capture file, and
//! compared frame by frame; capture files that cannot be used refused at
//! start with one line naming the file, the record and why.

use std::path::Path;
use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions};
use nic_emu::backend::pcap::{Capture, PcapWire};
use nic_emu::backend::rate::ReplayRate;
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

/// Writes a pcap (microsecond stamps, or nanosecond) holding `frames`,
/// one every 10 µs, with link type `linktype`.
fn write_pcap(path: &Path, frames: &[Vec<u8>], nanos: bool, linktype: u32) {
    let mut b = Vec::new();
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    b.extend_from_slice(&magic.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&linktype.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let us = 10 * i as u32;
        b.extend_from_slice(&1000u32.to_le_bytes());
        b.extend_from_slice(&(if nanos { us * 1000 } else { us }).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

/// IPv4, IPv6 and opaque test frames of many sizes, and an ARP request.
fn frames(n: usize) -> Vec<Vec<u8>> {
    let tf = TestFrames::new(8, 7);
    let mut buf = [0u8; 1536];
    let mut v: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let kind = [FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw][i % 3];
            let len = 60 + (i * 37) % 1455;
            let m = tf.build(kind, i as u64, (i % 8) as u32, len, &mut buf);
            buf[..m].to_vec()
        })
        .collect();
    let mut arp = vec![0u8; 42];
    arp[..6].fill(0xff);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    v.push(arp);
    v
}

fn start(name: &str, wire: PcapWire) -> Result<Nic, String> {
    let mut cfg = DeviceConfig::new(
        format!("{name}-{}", std::process::id()),
        WireConfig::Pcap(wire),
    );
    // A wire has no back-pressure: a replay at full speed into a pipe that
    // the echo loop empties late (a loaded host) would drop frames for want
    // of room. 4 MiB holds every frame the tests replay, even unread.
    cfg.pipe_size = 4 << 20;
    cfg.notif_ring_entries = 1024;
    Nic::start(cfg, RunOptions::default()).map_err(|e| e.to_string())
}

/// Echoes every frame back unchanged until `want` have been echoed (or
/// 20 s pass); returns how many were, and how long it took from before the
/// pipe that receives them existed.
fn echo_timed(nic: &Nic, want: u64) -> (u64, Duration) {
    let mut dev = Device::attach_nic(nic, DeviceOptions::default()).unwrap();
    let start = Instant::now();
    let pipe = dev.alloc_rxtx_pipe(true).unwrap();
    let mut echoed = 0u64;
    while echoed < want && start.elapsed() < Duration::from_secs(20) {
        let n = {
            let batch = dev.recv(pipe).unwrap();
            let frames = batch.packets().count() as u64;
            echoed += frames;
            batch.len()
        };
        if n > 0 {
            dev.send_and_free(pipe, n).unwrap();
        }
    }
    let took = start.elapsed();
    // Let the last sends complete before the device stops.
    let until = Instant::now() + Duration::from_secs(5);
    while dev.tx_in_flight() > 0 && Instant::now() < until {
        let _ = dev.reap_completions();
    }
    (echoed, took)
}

fn echo(nic: &Nic, want: u64) -> u64 {
    echo_timed(nic, want).0
}

#[test]
fn a_pcap_port_replays_every_frame_and_writes_back_what_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (inp, out) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    let want = frames(600);
    write_pcap(&inp, &want, false, 1);
    let wire = PcapWire {
        rx: Some(inp.clone()),
        tx: Some(out.clone()),
        loops: Some(2),
        rate: ReplayRate::Max,
    };
    let nic = start("pcap-rt", wire).unwrap();
    // Nothing is replayed before something can receive it.
    std::thread::sleep(Duration::from_millis(100));
    let s = nic.stats();
    assert_eq!(
        s.ports[0].counters.rx_frames, 0,
        "replayed before a listener"
    );
    let n = want.len() as u64 * 2;
    assert_eq!(echo(&nic, n), n);
    let s = nic.stop();
    let p = &s.ports[0];
    assert_eq!(p.counters.rx_frames, n);
    assert_eq!(p.counters.tx_frames, n);
    assert_eq!(p.wire_stats["replayed_frames"], n);
    assert_eq!(p.wire_stats["replay_passes"], 2);
    assert_eq!(p.wire_stats["written_frames"], n);
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
    let back = Capture::read(&out).unwrap();
    assert_eq!(back.len() as u64, n);
    let mut last = 0;
    for i in 0..back.len() {
        let (f, ts) = back.frame(i);
        assert_eq!(f, &want[i % want.len()][..], "frame {i}");
        assert!(ts >= last, "stamps go backwards at {i}");
        last = ts;
    }
}

#[test]
fn pcapng_input_and_paced_replay_work_too() {
    let dir = tempfile::tempdir().unwrap();
    let (inp, out) = (dir.path().join("in.pcapng"), dir.path().join("out.pcap"));
    let want = frames(50);
    // A pcapng section: SHB, an Ethernet IDB, then one EPB per frame.
    let mut b = Vec::new();
    let block = |b: &mut Vec<u8>, kind: u32, body: &[u8]| {
        let len = 12 + body.len().next_multiple_of(4);
        b.extend_from_slice(&kind.to_le_bytes());
        b.extend_from_slice(&(len as u32).to_le_bytes());
        b.extend_from_slice(body);
        b.resize(b.len() + body.len().next_multiple_of(4) - body.len(), 0);
        b.extend_from_slice(&(len as u32).to_le_bytes());
    };
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    block(&mut b, 0x0a0d_0d0a, &shb);
    let mut idb = 1u16.to_le_bytes().to_vec();
    idb.extend_from_slice(&[0, 0]);
    idb.extend_from_slice(&65535u32.to_le_bytes());
    block(&mut b, 1, &idb);
    for (i, f) in want.iter().enumerate() {
        let mut epb = 0u32.to_le_bytes().to_vec();
        let ts = 1_000_000u64 + 20 * i as u64; // µs
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
        epb.extend_from_slice(f);
        block(&mut b, 6, &epb);
    }
    std::fs::write(&inp, b).unwrap();
    let wire = PcapWire {
        rx: Some(inp),
        tx: Some(out.clone()),
        loops: Some(1),
        rate: ReplayRate::Pps(1000.0),
    };
    let nic = start("pcapng", wire).unwrap();
    let (echoed, took) = echo_timed(&nic, want.len() as u64);
    assert_eq!(echoed, want.len() as u64);
    // At 1000 frames a second, replay starts when the pipe exists and the
    // 50th frame is due 49 ms later: it cannot have arrived sooner (how
    // much later depends on the host, so there is no upper bound here).
    assert!(
        took >= Duration::from_millis(49),
        "50 frames at 1 kpps in {took:?}"
    );
    nic.stop();
    let back = Capture::read(&out).unwrap();
    assert_eq!(back.len(), want.len());
    for (i, w) in want.iter().enumerate() {
        assert_eq!(back.frame(i).0, &w[..], "frame {i}");
    }
}

#[test]
fn capture_files_that_cannot_be_used_are_one_line_naming_file_record_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = frames(3);
    type Make = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Make, &str)> = vec![
        (
            "text.pcap",
            Box::new(|p: &Path| std::fs::write(p, b"hello, this is not a capture").unwrap()),
            "not a capture file",
        ),
        (
            "tiny.pcap",
            Box::new(|p: &Path| std::fs::write(p, b"ab").unwrap()),
            "not a capture file",
        ),
        (
            "rawip.pcap",
            Box::new(move |p: &Path| write_pcap(p, &frames(3), false, 101)),
            "Ethernet frames only",
        ),
        (
            "cut.pcap",
            Box::new(move |p: &Path| {
                write_pcap(p, &frames(3), false, 1);
                let b = std::fs::read(p).unwrap();
                std::fs::write(p, &b[..b.len() - 7]).unwrap();
            }),
            "record 4: truncated",
        ),
        (
            "jumbo.pcap",
            Box::new(move |p: &Path| {
                let mut f = frames(2);
                f.push(vec![0u8; 9000]);
                write_pcap(p, &f, true, 1)
            }),
            "record 4: a frame of 9000 bytes",
        ),
        (
            "runt.pcap",
            Box::new(|p: &Path| write_pcap(p, &[vec![0u8; 10]], false, 1)),
            "record 1: a frame of 10 bytes",
        ),
        (
            "empty.pcap",
            Box::new(|p: &Path| write_pcap(p, &[], false, 1)),
            "holds no frames",
        ),
    ];
    assert!(!good.is_empty());
    for (name, make, want) in cases {
        let path = d.join(name);
        make(&path);
        let wire = PcapWire {
            rx: Some(path.clone()),
            ..PcapWire::parse("rx=x").unwrap()
        };
        let e = start("badpcap", wire).expect_err(name);
        assert!(e.contains(name), "{name}: {e}");
        assert!(e.contains(want), "{name}: want '{want}' in: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // A missing file, and a directory.
    for (p, want) in [
        (d.join("missing.pcap"), "No such file"),
        (d.to_path_buf(), "not a regular file"),
    ] {
        let wire = PcapWire {
            rx: Some(p),
            ..PcapWire::parse("rx=x").unwrap()
        };
        let e = start("badpcap", wire).expect_err(want);
        assert!(e.contains(want), "{e}");
    }
    // No device directory is left behind by a refusal.
    let left = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("enso-badpcap-{}", std::process::id()))
        })
        .count();
    assert_eq!(left, 0);
}

#[test]
fn the_wiring_parser_takes_pcap_options_and_refuses_nonsense() {
    let w =
        nic_emu::spec::parse_wire("pcap:rx=a.pcap,tx=b.pcap,loop=inf,rate=original*10").unwrap();
    let WireConfig::Pcap(p) = w else { panic!() };
    assert_eq!(p.loops, None);
    assert_eq!(p.rate, ReplayRate::Original(10.0));
    assert_eq!(p.tx.as_deref(), Some(Path::new("b.pcap")));
    for bad in [
        "pcap:",
        "pcap:rx=a,rx=b",
        "pcap:rx=a,loop=0",
        "pcap:rx=a,rate=fast",
        "pcap:rx=a,speed=1",
        "pcap:rx",
    ] {
        let e = nic_emu::spec::parse_wire(bad).unwrap_err().to_string();
        assert!(e.contains("pcap"), "{bad}: {e}");
    }
}
