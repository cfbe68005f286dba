//! Writing captures: the frames a run received, as a pcap file.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

use super::CAPTURE_SNAPLEN;

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
