//! Target `frames`: frame delimiting (`enso_abi::wire`) on arbitrary bytes.
//!
//! The input is one frame as it arrives from the wire (any length,
//! Ethernet, 802.1Q/QinQ, IPv4, IPv6, ARP, 802.3 or anything else).
//! Invariants:
//! * `classify(f) == place(f).map(|p| (p, steer_key(f)))`, and
//!   `classify_full` adds the flow hash of the key;
//! * `stated_len` is `stated_len_unbounded` with its bound, and a placed
//!   frame's length is what its headers state (no marker) or all of it
//!   (marker, exactly when no header states a length);
//! * a placed frame is `MIN_FRAME..=MAX_FRAME` bytes, no more than arrived,
//!   and its flits (marker included) hold it;
//! * written into a pipe as the NIC writes it (marker flit, frame, zero
//!   padding to the flit), twice in a row, `delimit` finds each copy again
//!   with the same length and flits, and the second where the first ends;
//! * `delimit` of the raw bytes, when it succeeds, describes a frame of
//!   `MIN_FRAME..=MAX_FRAME` bytes whose flits hold it.

use enso_abi::wire::{self, Delimited, FrameError, SteerKey, FLIT, MAX_FRAME, MIN_FRAME};

pub fn run(data: &[u8]) {
    let placed = wire::place(data);
    let key = wire::steer_key(data);
    assert_eq!(wire::classify(data), placed.map(|p| (p, key)), "classify");
    match wire::classify_full(data) {
        Ok(c) => {
            assert_eq!(Ok(c.place), placed);
            assert_eq!(c.key, key);
            let hash = match &c.key {
                SteerKey::Ipv4 { tuple, .. } => wire::hash_tuple(tuple),
                SteerKey::Other { hash } => *hash,
            };
            assert_eq!(c.hash, hash, "flow hash");
        }
        Err(e) => assert_eq!(Err(e), placed),
    }
    assert_eq!(
        wire::steer_key(data),
        key,
        "steer_key is a function of the bytes"
    );

    let stated = wire::stated_len(data);
    let unbounded = wire::stated_len_unbounded(data);
    let expect = match unbounded {
        Ok(Some(l)) if l > MAX_FRAME => Err(FrameError::Oversize),
        x => x,
    };
    assert_eq!(stated, expect, "stated_len vs stated_len_unbounded");

    if let Ok(p) = placed {
        assert!((MIN_FRAME..=MAX_FRAME).contains(&p.len), "{p:?}");
        assert!(p.len <= data.len(), "{p:?} of {} bytes", data.len());
        assert!(data.len() <= MAX_FRAME);
        assert_eq!(p.flits, usize::from(p.marker) + wire::flits(p.len), "{p:?}");
        assert!(p.flits * FLIT >= p.len + usize::from(p.marker) * FLIT);
        if p.marker {
            assert_eq!(
                stated,
                Ok(None),
                "marker for a frame that states its length"
            );
            assert_eq!(p.len, data.len());
        } else {
            assert_eq!(
                stated,
                Ok(Some(p.len)),
                "placed length is not the stated one"
            );
        }
        round_trip(data, p);
    } else if let Ok(Some(l)) = stated {
        // A usable stated length within what arrived is always placed.
        assert!(
            l > data.len() || l < MIN_FRAME || data.len() > MAX_FRAME,
            "{placed:?} for a frame stating {l} of {} bytes",
            data.len()
        );
    }

    if let Ok(d) = wire::delimit(data) {
        check_delimited(&d);
    }
}

fn check_delimited(d: &Delimited) {
    assert!(d.start == 0 || d.start == FLIT, "{d:?}");
    assert!((MIN_FRAME..=MAX_FRAME).contains(&d.len), "{d:?}");
    assert_eq!(d.flits, d.start / FLIT + wire::flits(d.len), "{d:?}");
    assert!(d.flits * FLIT >= d.start + d.len, "{d:?}");
}

/// Lays the frame out twice as the NIC writes a pipe and delimits it back.
fn round_trip(data: &[u8], p: wire::Placement) {
    let mut pipe = vec![0u8; 2 * p.flits * FLIT];
    for copy in 0..2 {
        let at = copy * p.flits * FLIT;
        let mut pos = at;
        if p.marker {
            let flit: &mut [u8; FLIT] = (&mut pipe[pos..pos + FLIT]).try_into().expect("a flit");
            wire::write_marker(flit, p.len);
            pos += FLIT;
        }
        pipe[pos..pos + p.len].copy_from_slice(&data[..p.len]);
    }
    let mut off = 0;
    for _ in 0..2 {
        let d = wire::delimit(&pipe[off..])
            .unwrap_or_else(|e| panic!("a placed frame ({p:?}) does not delimit back: {e}"));
        check_delimited(&d);
        assert_eq!((d.len, d.flits), (p.len, p.flits), "{d:?} vs {p:?}");
        assert_eq!(d.start, usize::from(p.marker) * FLIT);
        assert_eq!(&pipe[off + d.start..off + d.start + d.len], &data[..p.len]);
        off += d.flits * FLIT;
    }
    assert_eq!(off, pipe.len());
}
