//! Reading pcap and pcapng files, record by record.

use std::fs::File;
use std::io::{self, BufReader, Cursor, Read};
use std::path::Path;
use std::time::Duration;

use nic_emu::backend::pcap::pcapng_ns;
use pcap_file::pcap::{PcapPacket, PcapReader};
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::{Block, PcapNgReader};

use super::{CapturedFrame, PcapError, PcapErrorKind, LINKTYPE_ETHERNET, PCAPNG_MAGIC};

/// A stream over the four magic bytes already read and the rest.
pub(super) type Magic<R> = io::Chain<Cursor<[u8; 4]>, R>;

/// A capture file opened past its file (or first section) header.
pub(super) enum Opened<R: Read> {
    Pcap(PcapReader<Magic<R>>),
    PcapNg(PcapNgReader<Magic<R>>),
}

/// Opens a pcap or pcapng stream: checks the magic (so garbage gets a
/// precise error) and, for pcap, the version and link type (a pcapng
/// file's interfaces are checked as their blocks come).
pub(super) fn open<R: Read>(mut r: R) -> Result<Opened<R>, PcapErrorKind> {
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
pub(super) fn for_each_record<R: Read>(
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

pub(super) fn open_file(path: &Path) -> Result<BufReader<File>, PcapError> {
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
