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

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use netview::ipv4::{self, Ipv4Packet};
use nic_emu::backend::pcap::pcapng_ns;
use nic_emu::wire::{self, FrameError, FLIT, MAX_FRAME, MIN_FRAME};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::rate::FrameProfile;

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

/// A stream over the four magic bytes already read and the rest.
type Magic<R> = io::Chain<Cursor<[u8; 4]>, R>;

/// A capture file opened past its file (or first section) header.
enum Opened<R: Read> {
    Pcap(PcapReader<Magic<R>>),
    PcapNg(PcapNgReader<Magic<R>>),
}

/// Opens a pcap or pcapng stream: checks the magic (so garbage gets a
/// precise error) and, for pcap, the version and link type (a pcapng
/// file's interfaces are checked as their blocks come).
fn open<R: Read>(mut r: R) -> Result<Opened<R>, PcapErrorKind> {
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut magic[got..]) {
            Ok(0) => return Err(PcapErrorKind::TruncatedHeader),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(PcapErrorKind::Io(e)),
        }
    }
    let be = u32::from_be_bytes(magic);
    if be == PCAPNG_MAGIC {
        let reader = PcapNgReader::new(Cursor::new(magic).chain(r)).map_err(|e| match e {
            pcap_file::PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                PcapErrorKind::TruncatedHeader
            }
            pcap_file::PcapError::IoError(e) => PcapErrorKind::Io(e),
            pcap_file::PcapError::InvalidField(reason) => {
                PcapErrorKind::BadBlock { after: 0, reason }
            }
            _ => PcapErrorKind::BadBlock {
                after: 0,
                reason: "unparsable section header",
            },
        })?;
        return Ok(Opened::PcapNg(reader));
    }
    if !matches!(be, 0xA1B2_C3D4 | 0xA1B2_3C4D | 0xD4C3_B2A1 | 0x4D3C_B2A1) {
        return Err(PcapErrorKind::BadMagic(be));
    }
    let reader = PcapReader::new(Cursor::new(magic).chain(r)).map_err(|e| match e {
        pcap_file::PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            PcapErrorKind::TruncatedHeader
        }
        pcap_file::PcapError::IoError(e) => PcapErrorKind::Io(e),
        _ => PcapErrorKind::BadMagic(be),
    })?;
    // libpcap has written 2.4 for decades; another version lays out its
    // headers differently, or is a corrupt header read as if it were not.
    let (major, minor) = (reader.header().version_major, reader.header().version_minor);
    if major != 2 || minor > 4 {
        return Err(PcapErrorKind::Version(major, minor));
    }
    let link = u32::from(reader.header().datalink);
    if link != LINKTYPE_ETHERNET {
        return Err(PcapErrorKind::LinkType(link));
    }
    Ok(Opened::Pcap(reader))
}

/// Calls `f` with every record of a pcap stream, numbered from 1.
///
/// The records are read raw and checked here rather than by pcap-file's
/// `next_packet`, which refuses a record whose original length exceeds the
/// file's snap length: exactly what `tcpdump -s 64` writes for every frame
/// longer than 64 B. The captured length must still be within the snap
/// length and the original length.
///
/// A pcapng file's packets (enhanced and simple packet blocks) are its
/// records, numbered the same way; its other blocks are skipped, and every
/// interface must be Ethernet.
fn for_each_record<R: Read>(
    r: R,
    f: impl FnMut(u64, &PcapPacket<'_>) -> Result<(), PcapErrorKind>,
) -> Result<(), PcapErrorKind> {
    match open(r)? {
        Opened::Pcap(reader) => for_each_pcap_record(reader, f),
        Opened::PcapNg(reader) => for_each_pcapng_record(reader, f),
    }
}

fn for_each_pcapng_record<R: Read>(
    mut reader: PcapNgReader<R>,
    mut f: impl FnMut(u64, &PcapPacket<'_>) -> Result<(), PcapErrorKind>,
) -> Result<(), PcapErrorKind> {
    let mut record = 0u64;
    // The interfaces of the current section, as the packets name them.
    let mut ifaces: Vec<InterfaceDescriptionBlock<'static>> = Vec::new();
    while let Some(block) = reader.next_block() {
        let block = block.map_err(|e| match e {
            pcap_file::PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                PcapErrorKind::TruncatedBlock { after: record }
            }
            pcap_file::PcapError::IoError(e) => PcapErrorKind::Io(e),
            pcap_file::PcapError::InvalidField(reason) => PcapErrorKind::BadBlock {
                after: record,
                reason,
            },
            _ => PcapErrorKind::BadBlock {
                after: record,
                reason: "unparsable block",
            },
        })?;
        let p = match block {
            Block::SectionHeader(_) => {
                ifaces.clear();
                continue;
            }
            Block::InterfaceDescription(d) => {
                let link = u32::from(d.linktype);
                if link != LINKTYPE_ETHERNET {
                    return Err(PcapErrorKind::InterfaceLinkType {
                        interface: ifaces.len(),
                        link,
                    });
                }
                ifaces.push(d.into_owned());
                continue;
            }
            Block::EnhancedPacket(p) => {
                record += 1;
                let Some(iface) = ifaces.get(p.interface_id as usize) else {
                    return Err(PcapErrorKind::BadRecord {
                        record,
                        reason: "names an interface the file does not describe",
                    });
                };
                PcapPacket {
                    timestamp: Duration::from_nanos(pcapng_ns(p.timestamp, Some(iface))),
                    orig_len: p.original_len,
                    data: p.data,
                }
            }
            Block::SimplePacket(p) => {
                record += 1;
                if ifaces.is_empty() {
                    return Err(PcapErrorKind::BadRecord {
                        record,
                        reason: "a packet before any interface is described",
                    });
                }
                PcapPacket {
                    timestamp: Duration::ZERO,
                    orig_len: p.original_len,
                    data: p.data,
                }
            }
            _ => continue,
        };
        if p.data.len() > p.orig_len as usize {
            return Err(PcapErrorKind::BadRecord {
                record,
                reason: "captured length above the original length",
            });
        }
        f(record, &p)?;
    }
    Ok(())
}

fn for_each_pcap_record<R: Read>(
    mut reader: PcapReader<R>,
    mut f: impl FnMut(u64, &PcapPacket<'_>) -> Result<(), PcapErrorKind>,
) -> Result<(), PcapErrorKind> {
    let header = reader.header();
    let mut record = 0u64;
    while let Some(p) = reader.next_raw_packet() {
        record += 1;
        let p = p.and_then(|raw| {
            if raw.incl_len > header.snaplen {
                return Err(pcap_file::PcapError::InvalidField(
                    "captured length above the file's snap length",
                ));
            }
            // Every length check but orig_len <= snap_len.
            raw.try_into_pcap_packet(header.ts_resolution, u32::MAX)
        });
        let p = p.map_err(|e| match e {
            pcap_file::PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                PcapErrorKind::TruncatedRecord { record }
            }
            pcap_file::PcapError::IoError(e) => PcapErrorKind::Io(e),
            pcap_file::PcapError::InvalidField(reason) => {
                PcapErrorKind::BadRecord { record, reason }
            }
            _ => PcapErrorKind::BadRecord {
                record,
                reason: "unparsable record",
            },
        })?;
        f(record, &p)?;
    }
    Ok(())
}

fn open_file(path: &Path) -> Result<BufReader<File>, PcapError> {
    File::open(path).map(BufReader::new).map_err(|e| PcapError {
        path: path.into(),
        kind: PcapErrorKind::Open(e),
    })
}

/// Checks that `path` opens and starts with the header of an Ethernet pcap
/// file (or of a pcapng file), without reading its records: a quick check
/// before a long load.
pub fn check_header(path: impl AsRef<Path>) -> Result<(), PcapError> {
    let path = path.as_ref();
    open(open_file(path)?).map(drop).map_err(|kind| PcapError {
        path: path.into(),
        kind,
    })
}

/// Reads every record of an Ethernet pcap file.
pub fn read_capture(path: impl AsRef<Path>) -> Result<Vec<CapturedFrame>, PcapError> {
    let path = path.as_ref();
    read_capture_from(open_file(path)?, path)
}

/// Reads every record of an Ethernet pcap stream; `name` labels errors.
pub fn read_capture_from<R: Read>(
    r: R,
    name: impl AsRef<Path>,
) -> Result<Vec<CapturedFrame>, PcapError> {
    let mut out = Vec::new();
    for_each_record(r, |_, p| {
        out.push(CapturedFrame {
            timestamp: p.timestamp,
            orig_len: p.orig_len,
            data: p.data.to_vec(),
        });
        Ok(())
    })
    .map_err(|kind| PcapError {
        path: name.as_ref().into(),
        kind,
    })?;
    Ok(out)
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

/// A capture file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Creating the file failed.
    #[error("{}: cannot create: {source}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Writing failed.
    #[error("capture write failed: {0}")]
    Io(#[source] io::Error),
    /// The timestamp does not fit a pcap record (after 2106).
    #[error("timestamp {0:?} does not fit a pcap record")]
    Timestamp(Duration),
    /// Larger than the capture's snap length.
    #[error("frame of {0} bytes is larger than the capture snap length")]
    FrameTooLarge(usize),
}

/// Writes frames to a pcap file with nanosecond timestamps.
pub struct CaptureWriter<W: Write> {
    inner: PcapWriter<W>,
    frames: u64,
}

impl<W: Write> std::fmt::Debug for CaptureWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureWriter")
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl CaptureWriter<BufWriter<File>> {
    /// Creates `path`, or truncates it if it is a regular file of ours
    /// ([`nic_emu::outfile::create`]: never through a symbolic link).
    pub fn create(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        let path = path.as_ref();
        let f = nic_emu::outfile::create(path).map_err(|source| CaptureError::Create {
            path: path.into(),
            source,
        })?;
        Self::new(BufWriter::new(f))
    }
}

impl<W: Write> CaptureWriter<W> {
    /// Writes the file header to `w`.
    pub fn new(w: W) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: CAPTURE_SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::native(),
        };
        let inner = PcapWriter::with_header(w, header).map_err(write_error)?;
        Ok(Self { inner, frames: 0 })
    }

    /// Appends one frame captured at `timestamp`.
    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> Result<(), CaptureError> {
        if frame.len() > CAPTURE_SNAPLEN as usize {
            return Err(CaptureError::FrameTooLarge(frame.len()));
        }
        if timestamp.as_secs() > u64::from(u32::MAX) {
            return Err(CaptureError::Timestamp(timestamp));
        }
        let p = PcapPacket {
            timestamp,
            orig_len: frame.len() as u32,
            data: Cow::Borrowed(frame),
        };
        self.inner.write_packet(&p).map_err(write_error)?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes and returns the writer.
    pub fn finish(self) -> Result<W, CaptureError> {
        let mut w = self.inner.into_writer();
        w.flush().map_err(CaptureError::Io)?;
        Ok(w)
    }
}

fn write_error(e: pcap_file::PcapError) -> CaptureError {
    match e {
        pcap_file::PcapError::IoError(e) => CaptureError::Io(e),
        other => CaptureError::Io(io::Error::other(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nic_emu::testframe::{FrameKind, TestFrames};

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
        let e =
            ReplaySet::from_reader(pcapng_bytes(113, &recs).as_slice(), "t.pcapng").unwrap_err();
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
}
