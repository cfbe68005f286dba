//! Target `pcap`: reading a capture as pktgen does (`pktgen::pcap`), on
//! arbitrary bytes (pcap in either byte order and timestamp resolution,
//! pcapng, garbage).
//!
//! Invariants:
//! * `ReplaySet::from_reader` and `read_capture_from` give frames or one
//!   error whose message is one line naming the input;
//! * they agree: the replay set loads only if the records read, and then
//!   holds one frame per record (padded back to its original length when
//!   it was cut by a snap length, trimmed to its stated length);
//! * every frame of the set is `MIN_FRAME..=MAX_FRAME` bytes and is placed
//!   by the NIC whole, without trailing bytes;
//! * laid out as the replay stream (small chunks), the stream's chunks are
//!   flit-aligned, never split a frame, and split back by
//!   `stream_frames` into exactly the set's frames, in order, pass after
//!   pass.

use enso_abi::wire::{self, FLIT, MAX_FRAME, MIN_FRAME};
use pktgen::pcap::{read_capture_from, stream_frames, ReplaySet, ReplayStream, StreamOptions};

const NAME: &str = "fuzz-input.pcap";

fn one_line(e: &dyn std::fmt::Display) {
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "multi-line error: {msg:?}");
    assert!(
        msg.starts_with(NAME),
        "error does not name the input: {msg:?}"
    );
}

pub fn run(data: &[u8]) {
    let records = read_capture_from(data, NAME);
    let set = ReplaySet::from_reader(data, NAME);
    if let Err(e) = &records {
        one_line(e);
    }
    let set = match set {
        Ok(set) => set,
        Err(e) => {
            one_line(&e);
            return;
        }
    };
    let records = records.expect("the replay set loaded but its records did not read");
    assert_eq!(set.len(), records.len(), "one frame per record");
    assert!(!set.is_empty());
    let mut bytes = 0u64;
    for (i, (f, r)) in set.iter().zip(&records).enumerate() {
        assert!(
            (MIN_FRAME..=MAX_FRAME).contains(&f.len()),
            "frame {i}: {} bytes",
            f.len()
        );
        let p = wire::place(f).unwrap_or_else(|e| panic!("frame {i} of the set: {e}"));
        assert_eq!(
            p.len,
            f.len(),
            "frame {i} keeps bytes the NIC would not send"
        );
        let original = r.data.len().max(r.orig_len as usize);
        assert!(f.len() <= original, "frame {i} grew");
        assert_eq!(
            &f[..f.len().min(r.data.len())],
            &r.data[..f.len().min(r.data.len())]
        );
        bytes += f.len() as u64;
    }
    assert_eq!(set.bytes(), bytes);
    assert!(set.trimmed() <= set.len() as u64 && set.padded() <= set.len() as u64);

    let opts = StreamOptions {
        chunk_bytes: 4096,
        min_bytes: 8192,
    };
    let stream = ReplayStream::new(&set, opts);
    assert!(stream.passes() >= 1);
    assert_eq!(stream.frames(), set.len() * stream.passes());
    assert_eq!(stream.frame_bytes(), bytes * stream.passes() as u64);
    assert_eq!(stream.data().len() % FLIT, 0);
    let mut frames = (0..set.len()).cycle().map(|i| set.frame(i));
    let mut next_offset = 0;
    let mut counted = 0;
    for c in stream.chunks() {
        assert_eq!(c.offset, next_offset, "chunks are contiguous");
        assert_eq!((c.offset % FLIT, c.len % FLIT), (0, 0), "{c:?}");
        assert_eq!(c.first_frame, counted);
        assert!(c.frames > 0);
        next_offset += c.len;
        counted += c.frames;
        let mut n = 0;
        for f in stream_frames(stream.chunk_data(c)) {
            let f = f.unwrap_or_else(|e| panic!("chunk {c:?} does not delimit: {e}"));
            assert_eq!(f, frames.next().expect("cycle"), "frame {n} of chunk {c:?}");
            n += 1;
        }
        assert_eq!(n, c.frames, "{c:?}");
        assert_eq!(stream.prefix_len(c, c.frames), c.len);
    }
    assert_eq!(counted, stream.frames());
    assert_eq!(next_offset, stream.data().len());
}
