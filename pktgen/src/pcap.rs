//! Pcap files: reading a replay set, laying it out as the 64 B-aligned byte
//! stream the NIC transmits from, and writing captured frames.
//!
//! Reading never panics on a corrupt file: every problem is a
//! [`PcapError`] that names the file and, for a record, its number (1-based,
//! as Wireshark numbers frames).
//!
//! # The replay stream
//!
//! Like EnsōGen, the generator does not hand the NIC one frame at a time: it
//! copies the replay set once into a buffer where every frame starts on a
//! flit (64 B) boundary, and sends that buffer in chunks of up to 128 KiB,
//! one TX notification per chunk, never splitting a frame between chunks.
//! The NIC finds the frames in a chunk from their own headers
//! ([`nic_emu::wire::delimit`]); frames whose headers state no length (not
//! IPv4, IPv6 or ARP) are preceded by a marker flit that carries it. The real
//! EnsōGen needs no markers because the real NIC only handles IPv4.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use netview::ipv4::{self, Ipv4Packet};
use nic_emu::wire::{self, FrameError, FLIT, MAX_FRAME, MIN_FRAME};

use crate::rate::FrameProfile;

mod capture;
mod read;
#[cfg(test)]
mod tests;

pub use self::capture::{CaptureError, CaptureWriter};
pub use self::read::{check_header, read_capture, read_capture_from};

use read::{for_each_record, open_file};

/// Bytes per TX notification when replaying, as the real library splits.
pub const TX_CHUNK_BYTES: usize = 128 << 10;

/// Link type number of Ethernet in pcap headers.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Magic of a pcapng section header block.
const PCAPNG_MAGIC: u32 = 0x0A0D_0D0A;

/// Snap length written into capture files.
const CAPTURE_SNAPLEN: u32 = 65_535;

/// A pcap file that could not be read or replayed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct PcapError {
    /// The file (or the name given to a reader).
    pub path: PathBuf,
    /// What is wrong with it.
    #[source]
    pub kind: PcapErrorKind,
}

/// What is wrong with a pcap file.
#[derive(Debug, thiserror::Error)]
pub enum PcapErrorKind {
    /// The file could not be opened.
    #[error("cannot open: {0}")]
    Open(#[source] io::Error),
    /// Reading failed part way.
    #[error("read error: {0}")]
    Io(#[source] io::Error),
    /// Shorter than the 24 B file header.
    #[error("truncated file header (not a pcap file, or cut short)")]
    TruncatedHeader,
    /// The first four bytes are no pcap magic.
    #[error("not a pcap file (magic {0:#010x})")]
    BadMagic(u32),
    /// A header version this reader does not know.
    #[error("pcap format version {0}.{1} is not supported (2.0 to 2.4 are)")]
    Version(u16, u16),
    /// Not Ethernet frames.
    #[error("link type {0} is not Ethernet (1)")]
    LinkType(u32),
    /// A pcapng interface whose frames are not Ethernet.
    #[error("interface {interface} has link type {link}, not Ethernet (1)")]
    InterfaceLinkType {
        /// Interface number in its section, from 0.
        interface: usize,
        /// Its link type.
        link: u32,
    },
    /// A pcapng file ends inside a block, or a block's length is corrupt.
    #[error("the block after record {after} is truncated (file cut short or corrupt length)")]
    TruncatedBlock {
        /// Records read before it.
        after: u64,
    },
    /// A pcapng block with impossible fields.
    #[error("the block after record {after}: {reason}")]
    BadBlock {
        /// Records read before it.
        after: u64,
        /// What the pcapng parser objected to.
        reason: &'static str,
    },
    /// The file ends inside a record, or a record's length field is corrupt.
    #[error("record {record} is truncated (file cut short or corrupt length)")]
    TruncatedRecord {
        /// Record number, from 1.
        record: u64,
    },
    /// A record header with impossible fields.
    #[error("record {record}: {reason}")]
    BadRecord {
        /// Record number, from 1.
        record: u64,
        /// What the pcap parser objected to.
        reason: &'static str,
    },
    /// A frame that cannot be replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// A frame that cannot be replayed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// Larger than the NIC's largest frame.
    #[error("frame {frame} is {len} bytes, more than the {MAX_FRAME} B the NIC sends")]
    FrameTooLarge {
        /// Frame number, from 1.
        frame: u64,
        /// Its length.
        len: usize,
    },
    /// Shorter than an Ethernet header.
    #[error("frame {frame} is {len} bytes, shorter than an Ethernet header")]
    FrameTooSmall {
        /// Frame number, from 1.
        frame: u64,
        /// Its length.
        len: usize,
    },
    /// Captured with a snap length, and too long on the wire to be sent
    /// padded back to its length.
    #[error(
        "frame {frame} was cut to {captured} of {original} bytes when captured; \
         {original} B is more than the {MAX_FRAME} B the NIC sends, so it cannot be padded back"
    )]
    Snapped {
        /// Frame number, from 1.
        frame: u64,
        /// Bytes in the file.
        captured: u32,
        /// Bytes on the wire.
        original: u32,
    },
    /// Headers that state a length the frame does not have.
    #[error(
        "frame {frame} is {len} bytes but its headers state a length of {stated}; \
         at most {len} (the bytes captured) is accepted"
    )]
    StatedLength {
        /// Frame number, from 1.
        frame: u64,
        /// Its length.
        len: usize,
        /// The length its headers state.
        stated: usize,
    },
    /// Headers that contradict the frame's length.
    #[error("frame {frame}: {source}")]
    Undelimitable {
        /// Frame number, from 1.
        frame: u64,
        /// Why the NIC could not delimit it.
        #[source]
        source: FrameError,
    },
    /// Nothing to replay.
    #[error("no frames to replay")]
    NoFrames,
}

/// One record of a capture file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedFrame {
    /// Timestamp (since the Unix epoch, or whatever the writer used).
    pub timestamp: Duration,
    /// Length of the frame when it was captured (at least `data.len()`).
    pub orig_len: u32,
    /// The bytes in the file.
    pub data: Vec<u8>,
}

/// The frames to replay, as the NIC will send them, stored back to back.
///
/// Bytes after a frame's stated length (Ethernet padding, trailers) are not
/// kept: the NIC delimits frames by their headers and would not send them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplaySet {
    data: Vec<u8>,
    /// End offset of each frame in `data`.
    ends: Vec<usize>,
    trimmed: u64,
    trimmed_bytes: u64,
    padded: u64,
    malformed_ipv4: u64,
}

/// Whether `frame` is IPv4 (behind up to two VLAN tags, as the NIC reads
/// it) with a header the NIC's delimiting does not check and a receiver
/// would refuse: a version that is not 4, a header length (IHL) below 5
/// words, or a header longer than the total length it states.
pub fn malformed_ipv4(frame: &[u8]) -> bool {
    let be16 = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let mut at = 12;
    let mut ty = be16(at);
    let mut tags = 0;
    while matches!(ty, Some(wire::ETHERTYPE_VLAN | wire::ETHERTYPE_QINQ)) && tags < 2 {
        at += 4;
        ty = be16(at);
        tags += 1;
    }
    if ty != Some(wire::ETHERTYPE_IPV4) {
        return false;
    }
    // Version, header length and total length: the first four bytes.
    let Some(fields) = frame.get(at + 2..at + 6) else {
        // Too short to hold the fields: the NIC's delimiting refuses it.
        return false;
    };
    let ip = Ipv4Packet::new_unchecked(fields);
    ip.version() != 4
        || ip.header_len() < ipv4::MIN_HEADER_LEN
        || ip.header_len() > usize::from(ip.total_len())
}

impl ReplaySet {
    /// Loads the frames of a pcap file.
    pub fn from_pcap(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        let path = path.as_ref();
        Self::from_reader(open_file(path)?, path)
    }

    /// Loads the frames of a pcap stream; `name` labels errors.
    ///
    /// A frame cut short when captured (a snap length, as `tcpdump -s`
    /// writes) is padded with zeros back to its original length, so that
    /// it matches the length its headers state, if that length is one the
    /// NIC sends ([`ReplaySet::padded`] counts them); a longer one is a
    /// [`ReplayError::Snapped`].
    pub fn from_reader<R: Read>(r: R, name: impl AsRef<Path>) -> Result<Self, PcapError> {
        let mut set = ReplaySet::default();
        let mut frame = Vec::new();
        let res = for_each_record(r, |record, p| {
            let (captured, original) = (p.data.len(), p.orig_len as usize);
            if captured >= original {
                set.push(record, &p.data)?;
                return Ok(());
            }
            if original > MAX_FRAME {
                return Err(ReplayError::Snapped {
                    frame: record,
                    captured: captured as u32,
                    original: p.orig_len,
                }
                .into());
            }
            frame.clear();
            frame.extend_from_slice(&p.data);
            frame.resize(original, 0);
            set.push(record, &frame)?;
            set.padded += 1;
            Ok(())
        })
        .and_then(|()| {
            if set.is_empty() {
                Err(ReplayError::NoFrames.into())
            } else {
                Ok(())
            }
        });
        res.map_err(|kind| PcapError {
            path: name.as_ref().into(),
            kind,
        })?;
        Ok(set)
    }

    /// A replay set of the given frames.
    pub fn from_frames<'a>(
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Self, ReplayError> {
        let mut set = ReplaySet::default();
        for (i, f) in frames.into_iter().enumerate() {
            set.push(i as u64 + 1, f)?;
        }
        if set.is_empty() {
            return Err(ReplayError::NoFrames);
        }
        Ok(set)
    }

    fn push(&mut self, frame: u64, data: &[u8]) -> Result<(), ReplayError> {
        let len = data.len();
        if len > MAX_FRAME {
            return Err(ReplayError::FrameTooLarge { frame, len });
        }
        if len < MIN_FRAME {
            return Err(ReplayError::FrameTooSmall { frame, len });
        }
        let p = wire::place(data).map_err(|source| {
            // A length beyond the frame (up to 65535 in an IPv4 header): say
            // what it is and what would do, rather than "oversize" or
            // "truncated" of a frame that is neither.
            match wire::stated_len_unbounded(data) {
                Ok(Some(stated)) if stated > len => {
                    ReplayError::StatedLength { frame, len, stated }
                }
                _ => ReplayError::Undelimitable { frame, source },
            }
        })?;
        if p.len < len {
            self.trimmed += 1;
            self.trimmed_bytes += (len - p.len) as u64;
        }
        if malformed_ipv4(data) {
            self.malformed_ipv4 += 1;
        }
        self.data.extend_from_slice(&data[..p.len]);
        self.ends.push(self.data.len());
        Ok(())
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no frames.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Frame `i` (from 0).
    pub fn frame(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.data[start..self.ends[i]]
    }

    /// The frames in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.frame(i))
    }

    /// Sum of the frame lengths (goodput bytes of one pass).
    pub fn bytes(&self) -> u64 {
        self.data.len() as u64
    }

    /// Frames whose padding or trailer was dropped: bytes after the length
    /// their headers state, which the NIC would not send.
    pub fn trimmed(&self) -> u64 {
        self.trimmed
    }

    /// Bytes dropped from the [`ReplaySet::trimmed`] frames.
    pub fn trimmed_bytes(&self) -> u64 {
        self.trimmed_bytes
    }

    /// IPv4 frames with a malformed header ([`malformed_ipv4`]), kept as
    /// they are: the NIC delimits them by their total length.
    pub fn malformed_ipv4(&self) -> u64 {
        self.malformed_ipv4
    }

    /// Frames cut short when captured, padded with zeros back to their
    /// original length.
    pub fn padded(&self) -> u64 {
        self.padded
    }

    /// Mean length and flits, for converting rates.
    pub fn profile(&self) -> FrameProfile {
        FrameProfile::from_lens(self.iter().map(<[u8]>::len)).unwrap_or(FrameProfile::fixed(60))
    }
}

/// How a [`ReplayStream`] is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamOptions {
    /// Most bytes per chunk (one TX notification). Rounded down to whole
    /// flits, and at least large enough for the largest frame and a marker.
    pub chunk_bytes: usize,
    /// Repeat the whole set until the stream holds at least this many bytes,
    /// so a small pcap still fills large chunks.
    pub min_bytes: usize,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            chunk_bytes: TX_CHUNK_BYTES,
            min_bytes: 0,
        }
    }
}

/// A run of whole frames sent with one TX notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Offset in the stream (a multiple of 64).
    pub offset: usize,
    /// Bytes (a multiple of 64).
    pub len: usize,
    /// Index of its first frame in the stream.
    pub first_frame: usize,
    /// Frames in it.
    pub frames: usize,
}

/// A replay set laid out for the NIC: frames on flit boundaries, cut into
/// chunks that never split a frame.
#[derive(Clone, Debug)]
pub struct ReplayStream {
    data: Vec<u8>,
    chunks: Vec<Chunk>,
    /// End offset (flit-aligned) of each frame in `data`.
    ends: Vec<usize>,
    passes: usize,
    frame_bytes: u64,
}

impl ReplayStream {
    /// Lays out `set`.
    pub fn new(set: &ReplaySet, opts: StreamOptions) -> Self {
        let min_chunk = FLIT + wire::flits(MAX_FRAME) * FLIT;
        let chunk_cap = (opts.chunk_bytes / FLIT * FLIT).max(min_chunk);
        let pass_flits: usize = set
            .iter()
            .map(|f| wire::place(f).map_or(wire::flits(f.len()), |p| p.flits))
            .sum();
        let pass_bytes = pass_flits * FLIT;
        let passes = if pass_bytes == 0 {
            0
        } else {
            opts.min_bytes.div_ceil(pass_bytes).max(1)
        };
        let mut s = ReplayStream {
            data: Vec::with_capacity(pass_bytes * passes),
            chunks: Vec::new(),
            ends: Vec::with_capacity(set.len() * passes),
            passes,
            frame_bytes: 0,
        };
        let mut chunk = Chunk {
            offset: 0,
            len: 0,
            first_frame: 0,
            frames: 0,
        };
        for _ in 0..passes {
            for f in set.iter() {
                // Frames in a set passed `place` when they were added.
                let marker = wire::place(f).map(|p| p.marker).unwrap_or(false);
                let need = (usize::from(marker) + wire::flits(f.len())) * FLIT;
                if chunk.len + need > chunk_cap {
                    s.chunks.push(chunk);
                    chunk = Chunk {
                        offset: s.data.len(),
                        len: 0,
                        first_frame: s.ends.len(),
                        frames: 0,
                    };
                }
                if marker {
                    let mut flit = [0u8; FLIT];
                    wire::write_marker(&mut flit, f.len());
                    s.data.extend_from_slice(&flit);
                }
                s.data.extend_from_slice(f);
                s.data.resize(s.data.len().next_multiple_of(FLIT), 0);
                s.ends.push(s.data.len());
                s.frame_bytes += f.len() as u64;
                chunk.len += need;
                chunk.frames += 1;
            }
        }
        if chunk.frames > 0 {
            s.chunks.push(chunk);
        }
        s
    }

    /// The whole stream.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The chunks, in order.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// The bytes of a chunk.
    pub fn chunk_data(&self, c: &Chunk) -> &[u8] {
        &self.data[c.offset..c.offset + c.len]
    }

    /// Frames in the stream (all passes).
    pub fn frames(&self) -> usize {
        self.ends.len()
    }

    /// How many times the set was repeated.
    pub fn passes(&self) -> usize {
        self.passes
    }

    /// Sum of frame lengths in the stream (goodput bytes of one send).
    pub fn frame_bytes(&self) -> u64 {
        self.frame_bytes
    }

    /// Bytes of the first `frames` frames of chunk `c` (to send fewer than
    /// a whole chunk when a frame count runs out).
    pub fn prefix_len(&self, c: &Chunk, frames: usize) -> usize {
        match frames.min(c.frames) {
            0 => 0,
            n => self.ends[c.first_frame + n - 1] - c.offset,
        }
    }
}

/// The EtherType behind up to two VLAN tags, as the NIC reads it.
fn ethertype(frame: &[u8]) -> Option<u16> {
    let be16 = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let mut at = 12;
    let mut ty = be16(at)?;
    let mut tags = 0;
    while (ty == wire::ETHERTYPE_VLAN || ty == wire::ETHERTYPE_QINQ) && tags < 2 {
        at += 4;
        ty = be16(at)?;
        tags += 1;
    }
    Some(ty)
}

/// What kind of frame `frame` is, for messages: `IPv4`, `IPv6`, `ARP`,
/// `802.3`, or its EtherType.
pub fn frame_kind(frame: &[u8]) -> String {
    match ethertype(frame) {
        Some(wire::ETHERTYPE_IPV4) => "IPv4".into(),
        Some(wire::ETHERTYPE_IPV6) => "IPv6".into(),
        Some(wire::ETHERTYPE_ARP) => "ARP".into(),
        Some(t) if t <= 1500 => "802.3".into(),
        Some(t) => format!("EtherType {t:#06x}"),
        None => "too short for an EtherType".into(),
    }
}

/// Whether the NIC's 4-byte timestamp at `offset` (written when the frame
/// is sent, replaced by the RTT when it comes back) leaves `frame` as the
/// NIC delimits it: the same length, the same need for a marker flit, and
/// an IPv4 header that stays well formed. A timestamp over a length field
/// (IPv6's payload length, ARP's address lengths, IPv4's total length) or
/// an EtherType fails this, and the NIC could no longer find the frame's
/// end. Checked with several values, since the timestamp takes any.
pub fn stamp_keeps_frame(frame: &[u8], offset: usize) -> bool {
    let Some(end) = offset.checked_add(4).filter(|&e| e <= frame.len()) else {
        return false;
    };
    let before = (wire::place(frame), malformed_ipv4(frame));
    let mut f = frame.to_vec();
    [
        [0u8; 4],
        [0xff; 4],
        [0x12, 0x34, 0x56, 0x78],
        [0x80, 0, 0, 1],
    ]
    .iter()
    .all(|v| {
        f[offset..end].copy_from_slice(v);
        let after = (wire::place(&f), malformed_ipv4(&f));
        after.0.is_ok() && after.0 == before.0 && (before.1 || !after.1)
    })
}

/// Splits a flit-aligned TX stream into frames the way the NIC does.
pub fn stream_frames(mut stream: &[u8]) -> impl Iterator<Item = Result<&[u8], FrameError>> {
    std::iter::from_fn(move || {
        if stream.is_empty() {
            return None;
        }
        let d = match wire::delimit(stream) {
            Ok(d) => d,
            Err(e) => {
                stream = &[];
                return Some(Err(e));
            }
        };
        let Some(frame) = stream.get(d.start..d.start + d.len) else {
            stream = &[];
            return Some(Err(FrameError::Truncated));
        };
        stream = stream.get(d.flits * FLIT..).unwrap_or(&[]);
        Some(Ok(frame))
    })
}
