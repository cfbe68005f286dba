//! What the generator sends: a replay set (from a pcap or built from a
//! synthetic traffic spec) laid out once as a 64 B-aligned [`ReplayStream`],
//! with what the transmit loop needs to count goodput bytes of any run of
//! frames without walking them.

use crate::cli::TrafficSource;
use crate::pcap::{PcapError, ReplayError, ReplaySet, ReplayStream, StreamOptions, TX_CHUNK_BYTES};
use crate::rate::FrameProfile;
use crate::traffic::{SizeSpec, Traffic, TrafficError, TrafficSpec};

/// Most frames built for one pass of synthetic traffic.
pub const MAX_SYNTHETIC_FRAMES: u64 = 1 << 16;
/// Most bytes built for one pass of synthetic traffic.
pub const MAX_SYNTHETIC_BYTES: u64 = 32 << 20;
/// Frames drawn for one pass of a size range (`64-1518`).
const RANGE_SAMPLE: u64 = 1024;

/// Why the frames to send could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The pcap file is missing or bad.
    #[error("{0}")]
    Pcap(#[from] PcapError),
    /// The synthetic spec is bad.
    #[error("{0}")]
    Traffic(#[from] TrafficError),
    /// A built frame could not be laid out (cannot happen for test frames).
    #[error("{0}")]
    Replay(#[from] ReplayError),
}

/// The frames of a run, laid out for the NIC.
#[derive(Clone, Debug)]
pub struct TxStream {
    stream: ReplayStream,
    /// `cum[i]`: bytes of set frames `0..i`.
    cum: Vec<u64>,
    profile: FrameProfile,
    /// Frames of one pass that are not IPv4 (a timestamp at the default
    /// offset would overwrite their headers).
    non_ipv4: usize,
    /// Synthetic flows not present in one pass (the pass was capped).
    flows_left_out: u64,
    /// Length of the shortest frame of a pass (no FCS).
    min_len: usize,
    /// Frames of a pcap cut short when captured and padded back.
    padded: u64,
    /// Frames of a pcap sent without the bytes after their stated length,
    /// and those bytes.
    trimmed: (u64, u64),
    /// IPv4 frames of a pcap with a malformed header.
    malformed_ipv4: u64,
}

impl TxStream {
    /// Lays out a replay set: chunks of at most 128 KiB, and the set
    /// repeated until a pass fills two chunks, so the loop never sends
    /// small notifications where it wraps.
    pub fn from_set(set: &ReplaySet) -> Self {
        let opts = StreamOptions {
            chunk_bytes: TX_CHUNK_BYTES,
            min_bytes: 2 * TX_CHUNK_BYTES,
        };
        let mut cum = Vec::with_capacity(set.len() + 1);
        cum.push(0u64);
        let mut non_ipv4 = 0;
        let mut min_len = usize::MAX;
        for f in set.iter() {
            cum.push(cum[cum.len() - 1] + f.len() as u64);
            min_len = min_len.min(f.len());
            if f.get(12..14) != Some(&[0x08, 0x00][..]) {
                non_ipv4 += 1;
            }
        }
        Self {
            stream: ReplayStream::new(set, opts),
            cum,
            profile: set.profile(),
            non_ipv4,
            flows_left_out: 0,
            min_len: if set.is_empty() { 0 } else { min_len },
            padded: set.padded(),
            trimmed: (set.trimmed(), set.trimmed_bytes()),
            malformed_ipv4: set.malformed_ipv4(),
        }
    }

    /// The frames of a pcap file.
    pub fn from_pcap(path: &std::path::Path) -> Result<Self, StreamError> {
        Ok(Self::from_set(&ReplaySet::from_pcap(path)?))
    }

    /// Synthetic traffic: one pass holds every combination of flow and
    /// size-mix slot (frame `n` has flow `n mod flows` and the mix's slot
    /// `n mod weights`), up to [`MAX_SYNTHETIC_FRAMES`] frames and
    /// [`MAX_SYNTHETIC_BYTES`].
    pub fn synthetic(spec: &TrafficSpec) -> Result<Self, StreamError> {
        let t = Traffic::new(spec.clone())?;
        let period = match &spec.sizes {
            SizeSpec::Fixed(_) => 1,
            SizeSpec::Mix(v) => v.iter().map(|&(_, w)| u64::from(w)).sum(),
            SizeSpec::Range(..) => RANGE_SAMPLE,
        };
        let flows = u64::from(t.flows());
        let want = lcm(flows, period);
        let by_bytes =
            (MAX_SYNTHETIC_BYTES / (t.profile().mean_flits * 64.0).max(64.0) as u64).max(1);
        let n = want.min(MAX_SYNTHETIC_FRAMES).min(by_bytes).max(1);
        let mut data = Vec::new();
        let mut ends = Vec::with_capacity(n as usize);
        let mut buf = vec![0u8; nic_emu::wire::MAX_FRAME];
        for seq in 0..n {
            let len = t.build(seq, &mut buf);
            data.extend_from_slice(&buf[..len]);
            ends.push(data.len());
        }
        let frames = ends.iter().scan(0, |start, &end| {
            let f = &data[*start..end];
            *start = end;
            Some(f)
        });
        let set = ReplaySet::from_frames(frames)?;
        let mut s = Self::from_set(&set);
        s.flows_left_out = flows.saturating_sub(n);
        Ok(s)
    }

    /// The frames of a configured traffic source.
    pub fn from_source(src: &TrafficSource) -> Result<Self, StreamError> {
        match src {
            TrafficSource::Pcap { path } => Self::from_pcap(path),
            TrafficSource::Synthetic(spec) => Self::synthetic(spec),
        }
    }

    /// The laid-out stream.
    pub fn stream(&self) -> &ReplayStream {
        &self.stream
    }

    /// Mean frame length and flits.
    pub fn profile(&self) -> FrameProfile {
        self.profile
    }

    /// Frames in one pass of the replay set.
    pub fn set_len(&self) -> usize {
        self.cum.len() - 1
    }

    /// Length of the shortest frame sent (no FCS).
    pub fn min_len(&self) -> usize {
        self.min_len
    }

    /// Frames of one pass that are not IPv4.
    pub fn non_ipv4(&self) -> usize {
        self.non_ipv4
    }

    /// Flows of a synthetic spec that one pass leaves out (0 if all are in).
    pub fn flows_left_out(&self) -> u64 {
        self.flows_left_out
    }

    /// Frames of a pcap that were cut short when captured and are sent
    /// padded with zeros back to their original length.
    pub fn padded(&self) -> u64 {
        self.padded
    }

    /// Frames of one pass sent without bytes that followed the length
    /// their headers state (Ethernet padding, a trailer), and how many
    /// bytes those were in all.
    pub fn trimmed(&self) -> (u64, u64) {
        self.trimmed
    }

    /// IPv4 frames of one pass whose header is malformed
    /// ([`crate::pcap::malformed_ipv4`]); they are sent as they are.
    pub fn malformed_ipv4(&self) -> u64 {
        self.malformed_ipv4
    }

    /// Checks that the NIC's timestamp at `offset` leaves every frame of a
    /// pass delimitable ([`crate::pcap::stamp_keeps_frame`]); the NIC
    /// stamps a port's frames at one offset. Otherwise names the first
    /// frame it does not leave so, and the smallest offset from 14 (past
    /// the Ethernet addresses a device under test may rewrite) that every
    /// frame takes, if there is one.
    pub fn check_stamp(&self, offset: u8) -> Result<(), crate::cli::ConfigError> {
        let frames = || {
            crate::pcap::stream_frames(self.stream.data())
                .take(self.set_len())
                .map_while(Result::ok)
        };
        let keeps = |o: usize| frames().all(|f| crate::pcap::stamp_keeps_frame(f, o));
        let Some((i, f)) = frames()
            .enumerate()
            .find(|(_, f)| !crate::pcap::stamp_keeps_frame(f, offset.into()))
        else {
            return Ok(());
        };
        let suggest = (14u8..=60).find(|&o| keeps(o.into()));
        Err(crate::cli::ConfigError::StampOverHeaders {
            offset,
            frame: i as u64 + 1,
            kind: crate::pcap::frame_kind(f),
            suggest,
        })
    }

    /// The largest offset from 14 to `most` at which the NIC's timestamp
    /// leaves every frame of a pass delimitable, if there is one: what to
    /// suggest when an offset does not fit the smallest frame (the largest
    /// that fits may still lie over a frame's headers).
    pub fn largest_stamp_offset(&self, most: usize) -> Option<usize> {
        let frames = || {
            crate::pcap::stream_frames(self.stream.data())
                .take(self.set_len())
                .map_while(Result::ok)
        };
        (14..=most)
            .rev()
            .find(|&o| frames().all(|f| crate::pcap::stamp_keeps_frame(f, o)))
    }

    /// Goodput bytes of stream frames `first..first + n`.
    pub fn frame_bytes(&self, first: u64, n: u64) -> u64 {
        self.bytes_before(first + n) - self.bytes_before(first)
    }

    /// Bytes of stream frames `0..k` (the stream repeats the set).
    fn bytes_before(&self, k: u64) -> u64 {
        let len = self.set_len() as u64;
        let total = self.cum[self.set_len()];
        (k / len) * total + self.cum[(k % len) as usize]
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Least common multiple, saturating.
fn lcm(a: u64, b: u64) -> u64 {
    let (a, b) = (a.max(1), b.max(1));
    (a / gcd(a, b)).saturating_mul(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::stream_frames;

    #[test]
    fn synthetic_pass_covers_flows_and_mix() {
        let spec = TrafficSpec {
            sizes: "64:2,128:1".parse().unwrap(),
            flows: Some(4),
            ..TrafficSpec::default()
        };
        let s = TxStream::synthetic(&spec).unwrap();
        // lcm(4 flows, 3 mix slots) frames per pass.
        assert_eq!(s.set_len(), 12);
        assert_eq!(s.flows_left_out(), 0);
        assert_eq!(s.non_ipv4(), 0);
        let t = Traffic::new(spec).unwrap();
        let mut buf = vec![0u8; 1536];
        let got: Vec<&[u8]> = stream_frames(s.stream().data())
            .map(Result::unwrap)
            .collect();
        assert!(got.len() >= 12 && got.len().is_multiple_of(12));
        for (i, f) in got.iter().enumerate() {
            let n = t.build(i as u64 % 12, &mut buf);
            assert_eq!(*f, &buf[..n], "frame {i}");
        }
        // Bytes of any run of frames, across passes.
        let lens: Vec<u64> = got.iter().map(|f| f.len() as u64).collect();
        for (first, n) in [(0u64, 1u64), (5, 7), (11, 2), (3, 40)] {
            let want: u64 = (first..first + n).map(|k| lens[(k % 12) as usize]).sum();
            assert_eq!(s.frame_bytes(first, n), want);
        }
    }

    #[test]
    fn large_flow_counts_are_capped() {
        let spec = TrafficSpec {
            flows: Some(1 << 20),
            ..TrafficSpec::default()
        };
        let s = TxStream::synthetic(&spec).unwrap();
        assert_eq!(s.set_len() as u64, MAX_SYNTHETIC_FRAMES);
        assert_eq!(s.flows_left_out(), (1 << 20) - MAX_SYNTHETIC_FRAMES);
        let big = TrafficSpec {
            sizes: SizeSpec::Fixed(1518),
            flows: Some(1 << 20),
            ..TrafficSpec::default()
        };
        let s = TxStream::synthetic(&big).unwrap();
        assert!(s.set_len() as u64 * 1536 <= MAX_SYNTHETIC_BYTES + 1536);
    }

    #[test]
    fn lcm_saturates() {
        assert_eq!(lcm(4, 6), 12);
        assert_eq!(lcm(0, 5), 5);
        assert_eq!(lcm(u64::MAX, 2), u64::MAX);
    }
}
