//! Tests of reading replay sets, laying out streams and writing captures.

use std::fs::File;

use nic_emu::testframe::{FrameKind, TestFrames};
use pcap_file::pcap::PcapReader;
use pcap_file::{DataLink, TsResolution};

use super::read::open;
use super::*;

/// A classic little-endian microsecond pcap, built by hand.
fn pcap_bytes(link: u32, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    pcap_bytes_snap(link, 65535, records)
}

fn pcap_bytes_snap(link: u32, snaplen: u32, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&0i32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&snaplen.to_le_bytes());
    b.extend_from_slice(&link.to_le_bytes());
    for (i, (incl, orig, data)) in records.iter().enumerate() {
        b.extend_from_slice(&(1_000 + i as u32).to_le_bytes());
        b.extend_from_slice(&(i as u32 * 10).to_le_bytes());
        b.extend_from_slice(&incl.to_le_bytes());
        b.extend_from_slice(&orig.to_le_bytes());
        b.extend_from_slice(data);
    }
    b
}

fn frames(lens: &[usize], kind: FrameKind) -> Vec<Vec<u8>> {
    let tf = TestFrames::new(4, 7);
    lens.iter()
        .enumerate()
        .map(|(i, &len)| {
            let mut buf = vec![0u8; MAX_FRAME];
            let n = tf.build(kind, i as u64, i as u32 % 4, len, &mut buf);
            buf.truncate(n);
            buf
        })
        .collect()
}

fn pcap_of(frames: &[Vec<u8>]) -> Vec<u8> {
    let recs: Vec<_> = frames
        .iter()
        .map(|f| (f.len() as u32, f.len() as u32, f.as_slice()))
        .collect();
    pcap_bytes(1, &recs)
}

fn kind_of(data: &[u8]) -> PcapErrorKind {
    ReplaySet::from_reader(data, "t.pcap").unwrap_err().kind
}

#[test]
fn reads_a_replay_set() {
    let fs = frames(&[60, 128, 1514, 61], FrameKind::Ipv4Udp);
    let set = ReplaySet::from_reader(pcap_of(&fs).as_slice(), "t.pcap").unwrap();
    assert_eq!(set.len(), 4);
    for (a, b) in set.iter().zip(&fs) {
        assert_eq!(a, b.as_slice());
    }
    assert_eq!(set.bytes(), 60 + 128 + 1514 + 61);
    assert_eq!(set.trimmed(), 0);
    let p = set.profile();
    assert_eq!(p.mean_flits, (1 + 2 + 24 + 1) as f64 / 4.0);
}

#[test]
fn missing_file_and_garbage_are_typed_errors() {
    let e = ReplaySet::from_pcap("/nonexistent/x.pcap").unwrap_err();
    assert!(matches!(e.kind, PcapErrorKind::Open(_)));
    assert!(e
        .to_string()
        .starts_with("/nonexistent/x.pcap: cannot open"));
    assert!(matches!(kind_of(b""), PcapErrorKind::TruncatedHeader));
    assert!(matches!(
        check_header("/nonexistent/x.pcap").unwrap_err().kind,
        PcapErrorKind::Open(_)
    ));
    assert!(matches!(
        kind_of(b"\xd4\xc3"),
        PcapErrorKind::TruncatedHeader
    ));
    // A good magic, then a header cut short.
    let good = pcap_of(&frames(&[60], FrameKind::Ipv4Udp));
    for cut in [4, 10, 23] {
        assert!(
            matches!(kind_of(&good[..cut]), PcapErrorKind::TruncatedHeader),
            "{cut}"
        );
    }
    assert!(matches!(
        kind_of(b"GARBAGE GARBAGE GARBAGE GARBAGE"),
        PcapErrorKind::BadMagic(0x4741_5242)
    ));
    let ng = [0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0];
    assert!(matches!(kind_of(&ng), PcapErrorKind::TruncatedHeader));
    // Versions other than 2.0 to 2.4.
    for (major, minor) in [(99u16, 4u16), (2, 5), (1, 0), (0, 0), (4, 2)] {
        let mut v = pcap_of(&frames(&[60], FrameKind::Ipv4Udp));
        v[4..6].copy_from_slice(&major.to_le_bytes());
        v[6..8].copy_from_slice(&minor.to_le_bytes());
        let e = ReplaySet::from_reader(v.as_slice(), "v.pcap").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "v.pcap: pcap format version {major}.{minor} is not supported (2.0 to 2.4 are)"
            )
        );
    }
    for minor in [0u16, 3, 4] {
        let mut v = pcap_of(&frames(&[60], FrameKind::Ipv4Udp));
        v[6..8].copy_from_slice(&minor.to_le_bytes());
        assert_eq!(
            ReplaySet::from_reader(v.as_slice(), "v.pcap")
                .unwrap()
                .len(),
            1
        );
    }
    // Linux cooked capture.
    let sll = pcap_bytes(113, &[]);
    let e = ReplaySet::from_reader(sll.as_slice(), "sll.pcap").unwrap_err();
    assert!(matches!(e.kind, PcapErrorKind::LinkType(113)));
    assert_eq!(e.to_string(), "sll.pcap: link type 113 is not Ethernet (1)");
}

/// A little-endian pcapng: a section header, an interface of link type
/// `link`, and an enhanced packet block per `(interface, captured,
/// original, frame)`, stamped 10 us apart (no if_tsresol: microseconds).
fn pcapng_bytes(link: u16, records: &[(u32, u32, u32, &[u8])]) -> Vec<u8> {
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
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    block(&mut b, PCAPNG_MAGIC, &shb);
    let mut idb = link.to_le_bytes().to_vec();
    idb.extend_from_slice(&[0, 0]);
    idb.extend_from_slice(&65535u32.to_le_bytes());
    block(&mut b, 1, &idb);
    for (i, (iface, incl, orig, data)) in records.iter().enumerate() {
        let ts = 1_700_000_000_000_000u64 + 10 * i as u64;
        let mut epb = iface.to_le_bytes().to_vec();
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&incl.to_le_bytes());
        epb.extend_from_slice(&orig.to_le_bytes());
        epb.extend_from_slice(&data[..*incl as usize]);
        block(&mut b, 6, &epb);
    }
    b
}

#[test]
fn pcapng_is_read_as_pcap_is() {
    let fs = frames(&[60, 300, 1514], FrameKind::Ipv4Udp);
    let recs: Vec<_> = fs
        .iter()
        .map(|f| (0, f.len() as u32, f.len() as u32, f.as_slice()))
        .collect();
    let ng = pcapng_bytes(1, &recs);
    let set = ReplaySet::from_reader(ng.as_slice(), "t.pcapng").unwrap();
    assert_eq!(
        set.iter().collect::<Vec<_>>(),
        fs.iter().map(Vec::as_slice).collect::<Vec<_>>()
    );
    assert!(open(ng.as_slice()).is_ok());
    // Timestamps in microseconds, the resolution without if_tsresol.
    let c = read_capture_from(ng.as_slice(), "t.pcapng").unwrap();
    assert_eq!(c[1].timestamp, Duration::from_micros(1_700_000_000_000_010));
    // A record cut by a snap length is padded back, as in a pcap.
    let snapped = pcapng_bytes(1, &[(0, 64, 300, &fs[1])]);
    let set = ReplaySet::from_reader(snapped.as_slice(), "t.pcapng").unwrap();
    assert_eq!((set.padded(), set.frame(0).len()), (1, 300));

    // Refusals name the interface, the record, or the block.
    let e = ReplaySet::from_reader(pcapng_bytes(113, &recs).as_slice(), "t.pcapng").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.pcapng: interface 0 has link type 113, not Ethernet (1)"
    );
    let mut other = recs.clone();
    other[1].0 = 1;
    let e = kind_of(&pcapng_bytes(1, &other));
    assert_eq!(
        e.to_string(),
        "record 2: names an interface the file does not describe"
    );
    for cut in [ng.len() - 1, ng.len() - 1514, ng.len() - 1540] {
        let e = kind_of(&ng[..cut]);
        assert!(
            matches!(e, PcapErrorKind::TruncatedBlock { after: 2 }),
            "{cut}: {e:?}"
        );
        assert_eq!(
            e.to_string(),
            "the block after record 2 is truncated (file cut short or corrupt length)"
        );
    }
    let bigger = pcapng_bytes(1, &[(0, 100, 60, &fs[1])]);
    assert!(matches!(
        kind_of(&bigger),
        PcapErrorKind::BadRecord { record: 1, .. }
    ));
    // A section header and nothing else: nothing to replay.
    assert!(matches!(
        kind_of(&ng[..28]),
        PcapErrorKind::Replay(ReplayError::NoFrames)
    ));
}

/// A seeded xorshift generator for the corruption tests.
fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// `good` with a few bytes flipped anywhere, and sometimes cut.
fn corrupted(good: &[u8], next: &mut impl FnMut() -> u64) -> Vec<u8> {
    let mut b = good.to_vec();
    for _ in 0..(next() % 6) {
        let i = (next() % b.len() as u64) as usize;
        b[i] = next() as u8;
    }
    if next().is_multiple_of(3) {
        b.truncate((next() % b.len() as u64) as usize);
    }
    b
}

#[test]
fn never_panics_on_corrupt_pcapng() {
    let fs = frames(&[60, 300, 64, 1514], FrameKind::Ipv4Udp);
    let recs: Vec<_> = fs
        .iter()
        .map(|f| (0, f.len() as u32, f.len() as u32, f.as_slice()))
        .collect();
    let good = pcapng_bytes(1, &recs);
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    for _ in 0..500 {
        let b = corrupted(&good, &mut next);
        for e in [
            ReplaySet::from_reader(b.as_slice(), "fuzz").err(),
            read_capture_from(b.as_slice(), "fuzz").err(),
        ]
        .into_iter()
        .flatten()
        {
            let m = e.to_string();
            assert!(m.starts_with("fuzz: ") && !m.contains('\n'), "{m}");
        }
    }
}

#[test]
fn truncated_records_are_reported_by_number() {
    let good = pcap_of(&frames(&[60, 100, 200], FrameKind::Ipv4Udp));
    // Inside the last record's data, and inside its 16 B header.
    for cut in [good.len() - 1, good.len() - 150, good.len() - 200 - 8] {
        match kind_of(&good[..cut]) {
            PcapErrorKind::TruncatedRecord { record: 3 } => {}
            other => panic!("cut {cut}: {other:?}"),
        }
    }
    // Ends on a record boundary: fine.
    let two = good.len() - 200 - 16;
    assert_eq!(ReplaySet::from_reader(&good[..two], "t").unwrap().len(), 2);
    // Header only: nothing to replay, but a valid capture.
    assert!(matches!(
        kind_of(&good[..24]),
        PcapErrorKind::Replay(ReplayError::NoFrames)
    ));
    assert!(read_capture_from(&good[..24], "t").unwrap().is_empty());
}

#[test]
fn snaplen_cut_frames_are_padded_back_to_their_length() {
    // As `tcpdump -s 64` writes: snap length 64, a 242 B frame saved
    // as its first 64 B, and a 60 B frame saved whole.
    let f = frames(&[242, 60], FrameKind::Ipv4Udp);
    let bytes = pcap_bytes_snap(1, 64, &[(64, 242, &f[0][..64]), (60, 60, &f[1])]);
    let set = ReplaySet::from_reader(bytes.as_slice(), "t").unwrap();
    assert_eq!(set.len(), 2);
    assert_eq!(set.padded(), 1);
    let first = set.frame(0);
    assert_eq!(first.len(), 242);
    assert_eq!(&first[..64], &f[0][..64]);
    assert!(first[64..].iter().all(|&b| b == 0));
    assert_eq!(set.frame(1), &f[1][..]);
    // The capture reader keeps the record as it is.
    let c = read_capture_from(bytes.as_slice(), "t").unwrap();
    assert_eq!((c[0].data.len(), c[0].orig_len), (64, 242));
    // A captured length above the snap length is still refused.
    let e = kind_of(&pcap_bytes_snap(1, 64, &[(100, 100, &f[0][..100])]));
    assert!(
        matches!(e, PcapErrorKind::BadRecord { record: 1, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("snap length"), "{e}");
}

#[test]
fn bad_records_and_unreplayable_frames() {
    let big = vec![0u8; 1600];
    let e = kind_of(&pcap_bytes(1, &[(1600, 1600, &big)]));
    assert!(matches!(
        e,
        PcapErrorKind::Replay(ReplayError::FrameTooLarge {
            frame: 1,
            len: 1600
        })
    ));
    assert!(e.to_string().contains("1600 bytes, more than the 1536 B"));
    let f = frames(&[200], FrameKind::Ipv4Udp).remove(0);
    // Captured with a snap length of 100, 1600 B on the wire: too long
    // to pad back.
    let e = kind_of(&pcap_bytes(1, &[(100, 1600, &f[..100])]));
    assert!(matches!(
        e,
        PcapErrorKind::Replay(ReplayError::Snapped {
            frame: 1,
            captured: 100,
            original: 1600
        })
    ));
    assert_eq!(
        e.to_string(),
        "frame 1 was cut to 100 of 1600 bytes when captured; 1600 B is more than \
         the 1536 B the NIC sends, so it cannot be padded back"
    );
    // incl_len > orig_len is refused by the parser.
    let e = kind_of(&pcap_bytes(1, &[(200, 100, &f)]));
    assert!(
        matches!(e, PcapErrorKind::BadRecord { record: 1, .. }),
        "{e:?}"
    );
    // Too small for an Ethernet header.
    let e = kind_of(&pcap_bytes(1, &[(10, 10, &f[..10])]));
    assert!(matches!(
        e,
        PcapErrorKind::Replay(ReplayError::FrameTooSmall { frame: 1, len: 10 })
    ));
    // IPv4 claiming more bytes than the frame has, beyond the NIC's
    // largest frame or not: the message gives both lengths.
    for (tot, stated) in [(1000u16, 1014), (1600, 1614), (65535, 65549)] {
        let mut lying = f.clone();
        lying[16..18].copy_from_slice(&tot.to_be_bytes());
        let e = kind_of(&pcap_bytes(1, &[(200, 200, &lying)]));
        assert_eq!(
            e.to_string(),
            format!(
                "frame 1 is 200 bytes but its headers state a length of {stated}; \
                 at most 200 (the bytes captured) is accepted"
            )
        );
    }
    // A total length below the IPv4 header is no length at all.
    let mut lying = f.clone();
    lying[16..18].copy_from_slice(&10u16.to_be_bytes());
    let e = kind_of(&pcap_bytes(1, &[(200, 200, &lying)]));
    assert!(matches!(
        e,
        PcapErrorKind::Replay(ReplayError::Undelimitable { frame: 1, .. })
    ));
}

#[test]
fn never_panics_on_corrupt_files() {
    let good = pcap_of(&frames(&[60, 300, 64, 1514, 90], FrameKind::Ipv4Udp));
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let b = corrupted(&good, &mut next);
        let _ = ReplaySet::from_reader(b.as_slice(), "fuzz");
        let _ = read_capture_from(b.as_slice(), "fuzz");
    }
    // Pure garbage.
    for n in [0usize, 3, 24, 40, 500] {
        let b: Vec<u8> = (0..n).map(|_| next() as u8).collect();
        assert!(ReplaySet::from_reader(b.as_slice(), "junk").is_err());
    }
}

#[test]
fn padding_is_trimmed_as_the_nic_would() {
    // An IPv4 frame of 42 bytes padded to 60, and one with a 100 B trailer
    // that would otherwise spill into an extra flit.
    let mut padded = frames(&[60], FrameKind::Ipv4Udp).remove(0);
    padded[16..18].copy_from_slice(&28u16.to_be_bytes());
    let mut trailer = frames(&[100], FrameKind::Ipv4Udp).remove(0);
    trailer.extend_from_slice(&[0xee; 100]);
    let set = ReplaySet::from_frames([padded.as_slice(), trailer.as_slice()]).unwrap();
    assert_eq!(set.frame(0).len(), 42);
    assert_eq!(set.frame(1).len(), 100);
    assert_eq!(set.trimmed(), 2);
    assert_eq!(set.trimmed_bytes(), 18 + 100);
}

#[test]
fn a_timestamp_over_a_length_field_does_not_keep_the_frame() {
    let v4 = frames(&[100], FrameKind::Ipv4Udp).remove(0);
    let v6 = frames(&[100], FrameKind::Ipv6Udp).remove(0);
    let raw = frames(&[100], FrameKind::Raw).remove(0);
    let mut arp = [0u8; 42];
    arp[12..14].copy_from_slice(&wire::ETHERTYPE_ARP.to_be_bytes());
    arp[18] = 6;
    arp[19] = 4;
    // IPv4: its version and IHL (14), total length (16..18) and
    // EtherType; IPv6: its payload length (18..20); ARP: hlen, plen.
    let ok = |f: &[u8]| {
        (0..=60)
            .filter(|&o| stamp_keeps_frame(f, o))
            .collect::<Vec<_>>()
    };
    let v4_ok = ok(&v4);
    assert!(v4_ok.contains(&18) && v4_ok.contains(&20) && v4_ok.contains(&0));
    for o in [9, 11, 14, 15, 16, 17] {
        assert!(!v4_ok.contains(&o), "IPv4 at {o}");
    }
    let v6_ok = ok(&v6);
    assert!(v6_ok.contains(&14) && v6_ok.contains(&20) && v6_ok.contains(&22));
    for o in 15..=19 {
        assert!(!v6_ok.contains(&o), "IPv6 at {o}");
    }
    let arp_ok = ok(&arp);
    assert!(arp_ok.contains(&14) && arp_ok.contains(&20) && !arp_ok.contains(&18));
    assert!(ok(&raw).contains(&18), "an opaque frame keeps its marker");
    assert!(!stamp_keeps_frame(&v4[..21], 18), "past the end");
    assert_eq!(frame_kind(&v6), "IPv6");
    assert_eq!(frame_kind(&arp), "ARP");
}

#[test]
fn padding_of_every_kind_is_counted_when_trimmed() {
    // IPv6 whose payload length is shorter than the frame, ARP padded
    // to 60 B, 802.3 whose length field is shorter than the frame.
    let mut v6 = frames(&[200], FrameKind::Ipv6Udp).remove(0);
    v6[18..20].copy_from_slice(&100u16.to_be_bytes());
    let mut arp = [0u8; 60];
    arp[12..14].copy_from_slice(&wire::ETHERTYPE_ARP.to_be_bytes());
    arp[18] = 6; // hlen
    arp[19] = 4; // plen
    let mut dot3 = [0u8; 100];
    dot3[12..14].copy_from_slice(&50u16.to_be_bytes());
    let whole = frames(&[100], FrameKind::Ipv4Udp).remove(0);
    let set = ReplaySet::from_frames([&v6[..], &arp[..], &dot3[..], &whole[..]]).unwrap();
    assert_eq!(set.frame(0).len(), 14 + 40 + 100);
    assert_eq!(set.frame(1).len(), 14 + 8 + 12 + 8);
    assert_eq!(set.frame(2).len(), 14 + 50);
    assert_eq!(set.frame(3).len(), 100);
    assert_eq!(set.trimmed(), 3);
    assert_eq!(set.trimmed_bytes(), (200 - 154) + (60 - 42) + (100 - 64));
    assert_eq!(set.malformed_ipv4(), 0);
}

#[test]
fn ipv4_headers_the_nic_does_not_check_are_counted_as_malformed() {
    let good = frames(&[100], FrameKind::Ipv4Udp).remove(0);
    assert!(!malformed_ipv4(&good));
    let with = |at: usize, v: u8| {
        let mut f = good.clone();
        f[at] = v;
        f
    };
    // IHL 0..4, version 6 in an IPv4 EtherType, a 60 B header in a
    // 28 B total length.
    let mut bad: Vec<Vec<u8>> = (0..5).map(|ihl| with(14, 0x40 | ihl)).collect();
    bad.push(with(14, 0x65));
    let mut long = with(14, 0x4f);
    long[16..18].copy_from_slice(&28u16.to_be_bytes());
    bad.push(long);
    // Behind a VLAN tag too.
    let mut tagged = good[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
    tagged.extend_from_slice(&good[12..]);
    assert!(!malformed_ipv4(&tagged));
    tagged[18] = 0x43;
    bad.push(tagged);
    for f in &bad {
        assert!(malformed_ipv4(f), "{:02x?}", &f[..20]);
    }
    // Not IPv4, or too short to say: not counted here.
    assert!(!malformed_ipv4(&frames(&[100], FrameKind::Ipv6Udp)[0]));
    assert!(!malformed_ipv4(&good[..15]));
    let mut all: Vec<&[u8]> = bad.iter().map(Vec::as_slice).collect();
    all.push(&good);
    let set = ReplaySet::from_frames(all).unwrap();
    assert_eq!(set.len(), bad.len() + 1, "sent as they are");
    assert_eq!(set.malformed_ipv4(), bad.len() as u64);
}

#[test]
fn stream_is_flit_aligned_and_chunks_never_split_frames() {
    let mut fs = frames(&[60, 65, 128, 1514, 1536, 300, 61], FrameKind::Ipv4Udp);
    fs.extend(frames(&[200, 64], FrameKind::Raw));
    fs.extend(frames(&[400], FrameKind::Ipv6Udp));
    let set = ReplaySet::from_frames(fs.iter().map(Vec::as_slice)).unwrap();
    let opts = StreamOptions {
        chunk_bytes: 4096,
        min_bytes: 20_000,
    };
    let s = ReplayStream::new(&set, opts);
    assert!(s.data().len() >= 20_000);
    assert_eq!(s.data().len() % FLIT, 0);
    assert_eq!(s.frames(), set.len() * s.passes());
    assert_eq!(s.frame_bytes(), set.bytes() * s.passes() as u64);
    // The NIC's delimiter finds exactly the set's frames, pass after pass.
    let got: Vec<&[u8]> = stream_frames(s.data()).map(Result::unwrap).collect();
    assert_eq!(got.len(), s.frames());
    for (i, f) in got.iter().enumerate() {
        assert_eq!(*f, set.frame(i % set.len()), "frame {i}");
    }
    // Chunks tile the stream, fit the cap, and each one delimits on its own.
    let mut at = 0;
    let mut first = 0;
    for c in s.chunks() {
        assert_eq!((c.offset, c.first_frame), (at, first));
        assert!(c.len <= 4096 && c.len % FLIT == 0 && c.frames > 0);
        let n = stream_frames(s.chunk_data(c)).map(Result::unwrap).count();
        assert_eq!(n, c.frames);
        assert_eq!(s.prefix_len(c, c.frames), c.len);
        let part = s.prefix_len(c, 1);
        assert_eq!(stream_frames(&s.chunk_data(c)[..part]).count(), 1);
        at += c.len;
        first += c.frames;
    }
    assert_eq!(at, s.data().len());
}

#[test]
fn default_chunks_are_128_kib() {
    let fs = frames(&[60; 3000], FrameKind::Ipv4Udp);
    let set = ReplaySet::from_frames(fs.iter().map(Vec::as_slice)).unwrap();
    let s = ReplayStream::new(&set, StreamOptions::default());
    assert_eq!(s.passes(), 1);
    assert_eq!(s.chunks().len(), 2);
    assert_eq!(s.chunks()[0].len, TX_CHUNK_BYTES);
    assert_eq!(s.chunks()[0].frames, 2048);
    assert_eq!(s.chunks()[1].frames, 3000 - 2048);
}

#[test]
fn captures_round_trip_through_pcap_file() {
    let fs = frames(&[60, 1514, 333], FrameKind::Ipv4Udp);
    let stamps = [
        Duration::new(1_700_000_000, 1),
        Duration::new(1_700_000_000, 999_999_999),
        Duration::new(5, 123_456_789),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cap.pcap");
    let mut w = CaptureWriter::create(&path).unwrap();
    for (f, t) in fs.iter().zip(stamps) {
        w.write(t, f).unwrap();
    }
    assert_eq!(w.frames(), 3);
    w.finish().unwrap();
    // Read back with pcap-file directly: nanosecond header, same bytes.
    let mut r = PcapReader::new(File::open(&path).unwrap()).unwrap();
    assert_eq!(r.header().ts_resolution, TsResolution::NanoSecond);
    assert_eq!(r.header().datalink, DataLink::ETHERNET);
    let mut n = 0;
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        assert_eq!(p.data.as_ref(), fs[n].as_slice());
        assert_eq!(p.timestamp, stamps[n]);
        assert_eq!(p.orig_len as usize, fs[n].len());
        n += 1;
    }
    assert_eq!(n, 3);
    // And with ours, which the replay loader accepts too.
    let back = read_capture(&path).unwrap();
    assert_eq!(back.len(), 3);
    assert_eq!(back[2].timestamp, stamps[2]);
    assert_eq!(
        ReplaySet::from_pcap(&path).unwrap().frame(1),
        fs[1].as_slice()
    );
    // Timestamps past 2106 do not fit.
    let mut w = CaptureWriter::new(Vec::new()).unwrap();
    assert!(matches!(
        w.write(Duration::from_secs(1 << 33), &fs[0]),
        Err(CaptureError::Timestamp(_))
    ));
}
