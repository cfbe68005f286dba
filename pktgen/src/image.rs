//! The frames of a run laid out once in the TX pipe and sent in place, as
//! EnsōGen sends its pcap from buffers it fills once: the pipe holds whole
//! passes of the replay set, back to back, filling it exactly, so that each
//! lap of the ring sends the same bytes and nothing is copied per send.
//!
//! A TX pipe's size is a power of two and frames take whole flits (24 for
//! a 1518 B frame), so passes of frames rarely fill it exactly. The flits
//! left over go into marker flits (the NIC's delimiter of opaque frames,
//! [`nic_emu::wire::write_marker`]) put in front of as many frames, spread
//! evenly: the NIC reads a frame's length from its marker and sends the
//! same bytes, and its rate limiter counts the frame's flits, not the
//! marker. A set that does not fit (a pass longer than the pipe, or too
//! few frames to hold the leftover flits) is sent by copying, as before.

use nic_emu::wire::{self, FLIT};

use crate::pcap::stream_frames;
use crate::stream::TxStream;

/// How a set fills a TX pipe of a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageLayout {
    /// Whole passes of the replay set in the pipe.
    pub passes: usize,
    /// Marker flits added in front of frames to fill the pipe exactly.
    pub fillers: usize,
    /// Frames of the image that may take a filler (those without a marker
    /// of their own).
    plain: usize,
}

impl ImageLayout {
    /// How `stream`'s set fills `size` bytes, if it can: at least one
    /// whole pass, and no more leftover flits than frames to put them in
    /// front of.
    pub fn of(stream: &TxStream, size: usize) -> Option<Self> {
        if !size.is_multiple_of(FLIT) || stream.set_len() == 0 {
            return None;
        }
        let (mut pass_flits, mut plain) = (0usize, 0usize);
        for f in set_frames(stream) {
            let f = f.ok()?;
            let p = wire::place(f).ok()?;
            pass_flits += p.flits;
            plain += usize::from(!p.marker);
        }
        let flits = size / FLIT;
        let passes = flits / pass_flits.max(1);
        let fillers = flits - passes * pass_flits;
        let plain = passes * plain;
        (passes > 0 && fillers <= plain).then_some(Self {
            passes,
            fillers,
            plain,
        })
    }
}

/// The frames laid out in a TX pipe: where each ends, and the bytes of any
/// run of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxImage {
    /// End offset of frame `i` (flit-aligned); the last is the size.
    ends: Vec<usize>,
    /// `cum[i]`: frame bytes (no markers, no padding) of frames `0..i`.
    cum: Vec<u64>,
    layout: ImageLayout,
}

impl TxImage {
    /// Writes whole passes of `stream`'s set into `buf` (the TX pipe,
    /// from where the next send starts), filling it exactly, if
    /// [`ImageLayout::of`] allows; otherwise leaves `buf` alone.
    pub fn write(stream: &TxStream, buf: &mut [u8]) -> Option<Self> {
        let layout = ImageLayout::of(stream, buf.len())?;
        let n = layout.passes * stream.set_len();
        let mut img = TxImage {
            ends: Vec::with_capacity(n),
            cum: Vec::with_capacity(n + 1),
            layout,
        };
        img.cum.push(0);
        let (mut at, mut plain, mut bytes) = (0usize, 0usize, 0u64);
        for _ in 0..layout.passes {
            for f in set_frames(stream) {
                // `ImageLayout::of` delimited and placed every frame.
                let f = f.ok()?;
                let p = wire::place(f).ok()?;
                let mut marker = p.marker;
                if !marker {
                    // Filler `k` goes in front of plain frame
                    // `floor(k * plain / fillers)`: evenly spread.
                    let (j, r, m) = (plain, layout.fillers, layout.plain);
                    marker = (j + 1) * r / m > j * r / m;
                    plain += 1;
                }
                if marker {
                    let flit: &mut [u8; FLIT] = (&mut buf[at..at + FLIT]).try_into().ok()?;
                    wire::write_marker(flit, f.len());
                    at += FLIT;
                }
                buf[at..at + f.len()].copy_from_slice(f);
                let end = at + wire::flits(f.len()) * FLIT;
                buf[at + f.len()..end].fill(0);
                at = end;
                bytes += f.len() as u64;
                img.ends.push(at);
                img.cum.push(bytes);
            }
        }
        debug_assert_eq!(at, buf.len());
        Some(img)
    }

    /// Frames in the image.
    pub fn frames(&self) -> usize {
        self.ends.len()
    }

    /// Bytes of the image (the TX pipe's size).
    pub fn size(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    /// How the set fills it.
    pub fn layout(&self) -> ImageLayout {
        self.layout
    }

    /// Offset of frame `i` (`frames()` for the end).
    pub fn offset(&self, i: usize) -> usize {
        match i {
            0 => 0,
            i => self.ends[i - 1],
        }
    }

    /// The most frames from frame `i` on, at most `most` and not past the
    /// end of the image, that take at most `budget` bytes; and those bytes.
    #[inline]
    pub fn fit(&self, i: usize, most: usize, budget: usize) -> (usize, usize) {
        let start = self.offset(i);
        let last = (i + most).min(self.ends.len());
        let n = self.ends[i..last].partition_point(|&e| e - start <= budget);
        (n, self.offset(i + n) - start)
    }

    /// Frame bytes of frames `i..i + n`.
    #[inline]
    pub fn frame_bytes(&self, i: usize, n: usize) -> u64 {
        self.cum[i + n] - self.cum[i]
    }
}

/// The frames of one pass of the set.
fn set_frames(stream: &TxStream) -> impl Iterator<Item = Result<&[u8], wire::FrameError>> + '_ {
    stream_frames(stream.stream().data()).take(stream.set_len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{SizeSpec, TrafficSpec};

    fn synthetic(sizes: &str, flows: u32) -> TxStream {
        TxStream::synthetic(&TrafficSpec {
            sizes: sizes.parse::<SizeSpec>().unwrap(),
            flows: Some(flows),
            ..TrafficSpec::default()
        })
        .unwrap()
    }

    /// The image holds `passes` passes of the set in order, each frame's
    /// bytes as the stream has them, and fills `size` exactly.
    fn check(stream: &TxStream, size: usize) -> TxImage {
        let mut buf = vec![0xa5u8; size];
        let img = TxImage::write(stream, &mut buf).expect("fits");
        let set: Vec<&[u8]> = set_frames(stream).map(Result::unwrap).collect();
        let got: Vec<&[u8]> = stream_frames(&buf).map(Result::unwrap).collect();
        let l = img.layout();
        assert_eq!(got.len(), l.passes * set.len());
        assert_eq!(img.frames(), got.len());
        assert_eq!(img.size(), size);
        for (i, f) in got.iter().enumerate() {
            assert_eq!(*f, set[i % set.len()], "frame {i}");
        }
        // Markers: the fillers, and those of opaque frames.
        let (mut at, mut markers) = (0, 0);
        while at < buf.len() {
            let d = wire::delimit(&buf[at..]).unwrap();
            markers += usize::from(d.start == FLIT);
            at += d.flits * FLIT;
        }
        assert_eq!(at, size);
        let own: usize = set
            .iter()
            .filter(|f| wire::place(f).unwrap().marker)
            .count();
        assert_eq!(markers, l.fillers + own * l.passes);
        let all: u64 = got.iter().map(|f| f.len() as u64).sum();
        assert_eq!(img.frame_bytes(0, img.frames()), all);
        img
    }

    #[test]
    fn fixed_sizes_fill_the_pipe_exactly() {
        // 64 B: one flit per frame, no filler.
        let img = check(&synthetic("64", 1), 1 << 20);
        assert_eq!(img.layout().fillers, 0);
        assert_eq!(img.frames(), (1 << 20) / 64);
        // 1518 B (1514 without the FCS): 24 flits; 2 MiB = 1365 frames
        // and 8 flits.
        let img = check(&synthetic("1518", 1), 2 << 20);
        assert_eq!((img.layout().passes, img.layout().fillers), (1365, 8));
        assert_eq!(img.frames(), 1365);
        assert_eq!(img.frame_bytes(0, 1365), 1365 * 1514);
        // A mix over flows.
        check(&synthetic("64:7,576:4,1500:1", 16), 8 << 20);
        // A size range: 3072 frames of 13 flits or so a pass.
        check(&synthetic("64-1518", 3), 64 << 20);
    }

    #[test]
    fn runs_of_frames_fit_a_budget() {
        let img = check(&synthetic("1518", 1), 1 << 20);
        let f = img.offset(1);
        assert!(f == 1536 || f == 1600, "{f}");
        // Nothing fits a budget below one frame.
        assert_eq!(img.fit(0, 10, f - 1), (0, 0));
        assert_eq!(img.fit(0, 10, f), (1, f));
        // `most` and the end of the image bound the run.
        assert_eq!(img.fit(0, 3, usize::MAX).0, 3);
        let last = img.frames() - 1;
        assert_eq!(
            img.fit(last, 10, usize::MAX),
            (1, img.size() - img.offset(last))
        );
        // The run ends on the last frame that fits.
        let (n, len) = img.fit(5, 1000, 10_000);
        assert!(len <= 10_000 && img.offset(5 + n + 1) - img.offset(5) > 10_000);
        assert_eq!(len, img.offset(5 + n) - img.offset(5));
        assert_eq!(img.frame_bytes(5, n), 1514 * n as u64);
    }

    #[test]
    fn sets_that_do_not_fit_are_refused() {
        // A pass longer than the pipe.
        let big = synthetic("1518", 1000);
        assert_eq!(ImageLayout::of(&big, 1 << 20), None);
        let mut buf = vec![7u8; 1 << 20];
        assert_eq!(TxImage::write(&big, &mut buf), None);
        assert!(buf.iter().all(|&b| b == 7), "left alone");
        // One pass that fits, with more flits left over than frames.
        assert_eq!(ImageLayout::of(&big, 2 << 20), None);
        assert!(ImageLayout::of(&big, 64 << 20).is_some());
    }
}
