//! The checked-in seed corpora are what `enso-fuzz-seeds` writes, pass
//! every harness, and reach what they are meant to.

use std::path::Path;

fn corpus() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus"))
}

#[test]
fn checked_in_corpus_is_the_generated_one() {
    for (target, name, bytes) in enso_fuzz::seeds::all() {
        let p = corpus().join(target).join(&name);
        let on_disk = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            on_disk == bytes,
            "{} differs from the generated seed: rerun enso-fuzz-seeds",
            p.display()
        );
    }
}

#[test]
fn every_seed_passes_its_harness() {
    let mut n = 0;
    for t in enso_fuzz::TARGETS {
        for e in std::fs::read_dir(corpus().join(t.name)).expect("corpus dir") {
            let data = std::fs::read(e.expect("entry").path()).expect("seed");
            (t.run)(&data);
            n += 1;
        }
    }
    assert!(n >= 20, "{n} seeds");
}

#[test]
fn engine_seeds_move_frames_both_ways() {
    for (name, data) in enso_fuzz::seeds::engine() {
        let s = enso_fuzz::engine::summary(&data);
        let delivered = s.pipe_sum(|c| c.rx_frames);
        let sent: u64 = s.ports.iter().map(|p| p.counters.tx_frames).sum();
        let g = s.generator(0).expect("generator");
        eprintln!(
            "{name}: generator sent {}, delivered {delivered}, sent by software {sent}, drops {:?}",
            g.sent,
            s.drops()
        );
        assert!(g.sent > 0 && delivered > 0, "{name}: nothing delivered");
        if name == "tx-both-ports" {
            assert!(
                sent >= 2 && s.ports[1].counters.rx_frames >= 1,
                "{name}: nothing sent"
            );
        }
    }
}

#[test]
fn pcap_and_pcapng_seeds_load() {
    for (name, data) in enso_fuzz::seeds::pcaps() {
        let r = pktgen::pcap::ReplaySet::from_reader(&data[..], name);
        let want = if name.ends_with(".pcapng") { 1 } else { 2 };
        assert!(r.expect("loads").len() >= want, "{name}");
    }
}

#[test]
fn memif_seeds_reach_the_data_path_and_the_refusals() {
    let mut seen = Vec::new();
    for (name, data) in enso_fuzz::seeds::memif() {
        let s = enso_fuzz::memif::summary(&data);
        let c = &s.counters;
        eprintln!("{name}: connected {}, {c:?}", s.connected);
        match name {
            "frames-both-ways" => {
                assert!(s.connected, "{name}");
                assert_eq!((c.rx_frames, c.rx_bytes), (1, 100), "{name}");
                assert_eq!((c.tx_frames, c.tx_bytes), (2, 64 + 214), "{name}");
            }
            "chained" => {
                assert!(s.connected, "{name}");
                assert_eq!((c.rx_frames, c.rx_chained), (2, 1), "{name}");
                assert_eq!(c.rx_bytes, 100 + 2048 + 100, "{name}");
            }
            "decode-and-refused-init" => {
                assert!(!s.connected, "{name}");
                assert_eq!(c.handshake_errors, 1, "{name}");
            }
            "head-too-far" => {
                assert!(s.connected, "{name}");
                assert_eq!(
                    (c.ring_errors, c.disconnects, c.rx_frames),
                    (1, 1, 0),
                    "{name}"
                );
            }
            other => panic!("no expectation for memif seed {other}"),
        }
        seen.push(name);
    }
    assert_eq!(seen.len(), 4);
}
