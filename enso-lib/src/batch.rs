//! Batches of received bytes and the frames in them.
//!
//! A batch is one contiguous slice of a pipe (the pipe is mapped twice back
//! to back, so a batch that wraps is still one slice). Frames start on 64 B
//! boundaries and are delimited from their own headers
//! ([`enso_abi::wire::delimit`]): IPv4, IPv6, ARP, 802.3 and opaque frames
//! (behind a marker flit) all come out right, and an empty batch yields
//! nothing.

use enso_abi::wire::{self, FrameError, FLIT};

/// Received bytes of one pipe, borrowed from the [`Device`](crate::Device)
/// until dropped.
///
/// # Freeing is explicit
///
/// A batch from [`Device::recv`](crate::Device::recv) *consumes* its bytes:
/// the next `recv` on the pipe hands out only bytes that arrived after
/// them. Dropping the batch does **not** give them back to the NIC: they
/// stay consumed but not freed, the pipe's head does not move, and once
/// the pipe is full the NIC drops whole frames (counted as `pipe_full`).
/// After dropping the batch, hand its bytes back with one of:
///
/// * [`Device::free`](crate::Device::free)`(pipe, batch_len)` or
///   [`Device::free_all`](crate::Device::free_all)`(pipe)` (everything
///   consumed so far): one head write;
/// * [`Device::send_and_free`](crate::Device::send_and_free) on an RX/TX
///   pipe: sent in place, freed when the NIC completes the send;
/// * [`Device::discard`](crate::Device::discard) on an RX/TX pipe with
///   sends in flight: freed in order behind them;
/// * [`Device::unconsume`](crate::Device::unconsume): not freed, but handed
///   out again by the next `recv`.
///
/// A batch from [`Device::peek`](crate::Device::peek) consumes nothing:
/// dropping it leaves its bytes to the next `peek` or `recv`
/// ([`Device::confirm`](crate::Device::confirm) consumes part of it).
///
/// The batch borrows the device mutably, so it must be dropped (or go out
/// of scope) before any of these calls; take its length first.
#[derive(Debug)]
#[must_use = "a received batch's bytes stay consumed and are not freed until free/free_all/send_and_free is called for them"]
pub struct RxBatch<'a> {
    pub(crate) data: &'a mut [u8],
}

impl<'a> RxBatch<'a> {
    /// Bytes in the batch (a multiple of 64).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the batch holds no bytes (nothing was received).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The raw bytes (frames back to back on flit boundaries).
    pub fn bytes(&self) -> &[u8] {
        self.data
    }

    /// The raw bytes, writable (for in-place processing of a bytestream).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.data
    }

    /// The frames in the batch.
    pub fn packets(&self) -> Packets<'_> {
        Packets {
            rest: self.data,
            error: None,
        }
    }

    /// The frames in the batch, writable in place (zero-copy echo/forward).
    pub fn packets_mut(&mut self) -> PacketsMut<'_> {
        PacketsMut {
            base: self.data.as_ptr() as usize,
            rest: self.data,
            error: None,
        }
    }

    /// Number of frames (walks the batch).
    pub fn packet_count(&self) -> usize {
        self.packets().count()
    }

    /// Where each frame of the batch is: its offset and length in
    /// [`RxBatch::bytes`] (past its marker flit, if it has one) and where
    /// its slot ends (the next frame's start; free or send up to it to
    /// hand back the frames before).
    pub fn frames(&self) -> Frames<'_> {
        Frames {
            data: self.data,
            at: 0,
            error: None,
        }
    }
}

/// One frame of a batch ([`RxBatch::frames`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSpan {
    /// Offset of the frame's first byte in the batch (behind its marker
    /// flit, if it has one).
    pub offset: usize,
    /// The frame's length in bytes.
    pub len: usize,
    /// Offset where the frame's slot ends (a multiple of 64): the next
    /// frame's slot starts there.
    pub end: usize,
}

/// Iterator over where the frames of a batch are ([`RxBatch::frames`]).
#[derive(Debug)]
pub struct Frames<'a> {
    data: &'a [u8],
    at: usize,
    error: Option<FrameError>,
}

impl Frames<'_> {
    /// Set if iteration stopped early on bytes that are not a frame.
    pub fn error(&self) -> Option<FrameError> {
        self.error
    }
}

impl Iterator for Frames<'_> {
    type Item = FrameSpan;
    #[inline]
    fn next(&mut self) -> Option<FrameSpan> {
        let rest = &self.data[self.at..];
        match next_frame(rest)? {
            Ok(d) => {
                let span = FrameSpan {
                    offset: self.at + d.start,
                    len: d.len,
                    end: self.at + (d.flits * FLIT).min(rest.len()),
                };
                self.at = span.end;
                Some(span)
            }
            Err(e) => {
                self.error = Some(e);
                self.at = self.data.len();
                None
            }
        }
    }
}

/// Bytes at the start of `data` (frames back to back on flit boundaries)
/// that hold at most `max_pkts` whole frames in at most `max_bytes`. Bytes
/// that are not frames, first in `data`, count as one slot of everything
/// left (within `max_bytes`, in whole flits), so that they are handed out
/// and the batch's iterators report them; behind frames they are left for
/// the next call. Walks headers only: no allocation.
#[inline]
pub(crate) fn frames_within(data: &[u8], max_bytes: usize, max_pkts: usize) -> usize {
    let limit = data.len().min(max_bytes);
    let (mut at, mut n) = (0, 0);
    while n < max_pkts && at < data.len() {
        match next_frame(&data[at..]) {
            Some(Ok(d)) => {
                let end = at + (d.flits * FLIT).min(data.len() - at);
                if end > limit {
                    break;
                }
                at = end;
                n += 1;
            }
            _ => {
                if n == 0 {
                    at = limit - limit % FLIT;
                }
                break;
            }
        }
    }
    at
}

/// Where the next frame is in `rest`, or an error if the bytes are not
/// frames (which means the pipe was corrupted).
#[inline]
fn next_frame(rest: &[u8]) -> Option<Result<wire::Delimited, FrameError>> {
    if rest.is_empty() {
        return None;
    }
    match wire::delimit(rest) {
        Ok(d) if d.start + d.len <= rest.len() => Some(Ok(d)),
        Ok(_) => Some(Err(FrameError::Truncated)),
        Err(e) => Some(Err(e)),
    }
}

/// Iterator over the frames of a batch.
#[derive(Debug)]
pub struct Packets<'a> {
    rest: &'a [u8],
    error: Option<FrameError>,
}

impl<'a> Packets<'a> {
    /// Set if iteration stopped early on bytes that are not a frame.
    pub fn error(&self) -> Option<FrameError> {
        self.error
    }
}

impl<'a> Iterator for Packets<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        match next_frame(self.rest)? {
            Ok(d) => {
                let frame = &self.rest[d.start..d.start + d.len];
                let step = (d.flits * FLIT).min(self.rest.len());
                self.rest = &self.rest[step..];
                Some(frame)
            }
            Err(e) => {
                self.error = Some(e);
                self.rest = &[];
                None
            }
        }
    }
}

/// Iterator over the frames of a batch, writable.
#[derive(Debug)]
pub struct PacketsMut<'a> {
    base: usize,
    rest: &'a mut [u8],
    error: Option<FrameError>,
}

impl<'a> PacketsMut<'a> {
    /// Address of the batch's first byte (to turn frames into offsets).
    pub fn base_addr(&self) -> usize {
        self.base
    }

    /// Why iteration stopped early, if it did: bytes that are not a frame.
    pub fn error(&self) -> Option<FrameError> {
        self.error
    }
}

impl<'a> Iterator for PacketsMut<'a> {
    type Item = &'a mut [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a mut [u8]> {
        match next_frame(self.rest)? {
            Ok(d) => {
                let rest = std::mem::take(&mut self.rest);
                let step = (d.flits * FLIT).min(rest.len());
                let (this, after) = rest.split_at_mut(step);
                self.rest = after;
                Some(&mut this[d.start..d.start + d.len])
            }
            Err(e) => {
                self.error = Some(e);
                self.rest = &mut [];
                None
            }
        }
    }
}

/// Bytes a frame takes in a pipe or TX stream (marker flit included).
pub fn stream_len(frame: &[u8]) -> Result<usize, FrameError> {
    let p = wire::place(frame)?;
    Ok(p.flits * FLIT)
}

/// Writes `frame` into `out` as it must appear in a TX stream (behind a
/// marker flit if its headers state no length); returns the bytes used, a
/// multiple of 64. `out` must hold [`stream_len`] bytes
/// ([`FrameError::NoRoom`] otherwise, with nothing written).
pub fn write_frame(out: &mut [u8], frame: &[u8]) -> Result<usize, FrameError> {
    let p = wire::place(frame)?;
    let need = p.flits * FLIT;
    if out.len() < need {
        return Err(FrameError::NoRoom);
    }
    let mut at = 0;
    if p.marker {
        let mut m = [0u8; FLIT];
        wire::write_marker(&mut m, p.len);
        out[..FLIT].copy_from_slice(&m);
        at = FLIT;
    }
    out[at..at + p.len].copy_from_slice(&frame[..p.len]);
    Ok(need)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nic_emu::testframe::{FrameKind, TestFrames};

    #[test]
    fn empty_batch_yields_nothing() {
        let mut none: [u8; 0] = [];
        let b = RxBatch { data: &mut none };
        assert_eq!(b.packet_count(), 0);
        assert!(b.packets().error().is_none());
    }

    #[test]
    fn mixed_frames_iterate_in_order() {
        let tf = TestFrames::new(3, 0);
        let mut stream = vec![0u8; 64 * 200];
        let mut at = 0;
        let mut want = vec![];
        let mut f = [0u8; 1536];
        for (i, (kind, len)) in [
            (FrameKind::Ipv4Udp, 64),
            (FrameKind::Raw, 100),
            (FrameKind::Ipv6Udp, 1500),
            (FrameKind::Ipv4Udp, 65),
            (FrameKind::Raw, 1536),
        ]
        .into_iter()
        .enumerate()
        {
            let n = tf.build(kind, i as u64, 1, len, &mut f);
            at += write_frame(&mut stream[at..], &f[..n]).unwrap();
            want.push(f[..n].to_vec());
        }
        let mut b = RxBatch {
            data: &mut stream[..at],
        };
        let got: Vec<Vec<u8>> = b.packets().map(|p| p.to_vec()).collect();
        assert_eq!(got, want);
        for p in b.packets_mut() {
            p[0] ^= 0xff;
        }
        assert!(b.packets().all(|p| p[0] == 0x02 ^ 0xff));
    }

    #[test]
    fn write_frame_refuses_a_short_buffer() {
        let tf = TestFrames::new(3, 0);
        let mut f = [0u8; 1536];
        // A frame that states its length (100 bytes: two flits) and an
        // opaque one (100 bytes behind a marker flit: three).
        for (kind, flits, at) in [(FrameKind::Ipv4Udp, 2, 0), (FrameKind::Raw, 3, FLIT)] {
            let n = tf.build(kind, 1, 1, 100, &mut f);
            let need = flits * FLIT;
            assert_eq!(stream_len(&f[..n]), Ok(need));
            for room in [0, 1, FLIT, n, need - 1] {
                let mut out = vec![0xaau8; room];
                assert_eq!(
                    write_frame(&mut out, &f[..n]),
                    Err(FrameError::NoRoom),
                    "{kind:?} into {room} bytes"
                );
                assert!(out.iter().all(|&b| b == 0xaa), "written into {room} bytes");
            }
            let mut out = vec![0u8; need];
            assert_eq!(write_frame(&mut out, &f[..n]), Ok(need));
            assert_eq!(&out[at..at + n], &f[..n]);
        }
    }

    #[test]
    fn frames_give_offsets_behind_markers_and_bounds_take_whole_frames() {
        let tf = TestFrames::new(3, 0);
        let mut stream = vec![0u8; 64 * 20];
        let mut at = 0;
        let mut f = [0u8; 1536];
        // 2 flits, 3 flits (marker + 100 B), 1 flit.
        for (i, (kind, len)) in [
            (FrameKind::Ipv4Udp, 100),
            (FrameKind::Raw, 100),
            (FrameKind::Ipv4Udp, 64),
        ]
        .into_iter()
        .enumerate()
        {
            let n = tf.build(kind, i as u64, 1, len, &mut f);
            at += write_frame(&mut stream[at..], &f[..n]).unwrap();
        }
        let b = RxBatch {
            data: &mut stream[..at],
        };
        let spans: Vec<FrameSpan> = b.frames().collect();
        let want = |offset, len, end| FrameSpan { offset, len, end };
        assert_eq!(
            spans,
            [want(0, 100, 128), want(192, 100, 320), want(320, 64, 384)]
        );
        for (s, p) in spans.iter().zip(b.packets()) {
            assert_eq!(&b.bytes()[s.offset..s.offset + s.len], p);
        }
        let data = b.bytes();
        assert_eq!(frames_within(data, usize::MAX, usize::MAX), 384);
        assert_eq!(frames_within(data, usize::MAX, 2), 320);
        assert_eq!(frames_within(data, 319, usize::MAX), 128);
        assert_eq!(frames_within(data, 127, usize::MAX), 0);
        assert_eq!(frames_within(data, 384, 0), 0);
        let junk = [0xffu8; 256];
        assert_eq!(
            frames_within(&junk, 200, 5),
            192,
            "garbage first is handed out"
        );
        let mut mixed = stream[..128].to_vec();
        mixed.extend_from_slice(&junk);
        assert_eq!(
            frames_within(&mixed, usize::MAX, 5),
            128,
            "garbage behind waits"
        );
    }

    #[test]
    fn garbage_stops_iteration_with_error() {
        let mut junk = [0xffu8; 128];
        let b = RxBatch { data: &mut junk };
        let mut it = b.packets();
        assert_eq!(it.next(), None);
        assert!(it.error().is_some());
    }
}
