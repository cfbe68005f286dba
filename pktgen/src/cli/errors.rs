//! What is wrong with a command line: invalid settings, or arguments
//! clap refused.

use super::TEST_PAYLOAD;
use crate::pcap::PcapError;
use crate::rate::{RateError, FCS_LEN};
use crate::search::SearchConfigError;
use crate::traffic::TrafficError;

/// Arguments that parse but do not go together, or files that are not
/// usable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `-` for an output that only goes to a file.
    #[error("{0} -: only --json writes to standard output; give a file name (./- for a file called '-')")]
    NotStdout(&'static str),
    /// Two of the files named would be the same file.
    #[error("{0} and {1} name the same file ({2})")]
    SameFile(&'static str, &'static str, String),
    /// RATE_NUM without RATE_DEN.
    #[error("RATE_NUM needs RATE_DEN (as in: pktgen PCAP 744 1000)")]
    MissingRateDen,
    /// A number where the pcap goes.
    #[error("'{0}' is not a pcap file; the rate comes after the pcap (PCAP RATE_NUM RATE_DEN), or use --rate")]
    RateWithoutPcap(String),
    /// RATE_NUM/RATE_DEN and --rate.
    #[error("give the rate once: RATE_NUM RATE_DEN or --rate, not both")]
    TwoRates,
    /// A bad limiter pair.
    #[error("{0}")]
    Rate(#[from] RateError),
    /// An option that means nothing for a pcap replay.
    #[error("{0} does not apply to pcap replay (the pcap sets the frames)")]
    NotForPcap(&'static str),
    /// The pcap file is missing or bad.
    #[error("{0}")]
    Pcap(#[from] PcapError),
    /// A zero-loss option without --zero-loss.
    #[error("{0} needs --zero-loss")]
    NeedsZeroLoss(&'static str),
    /// An option that the zero-loss search controls.
    #[error(
        "{0} does not apply to --zero-loss (the search sets the rate and length of each trial)"
    )]
    NotForZeroLoss(&'static str),
    /// `--size` and `--sizes`.
    #[error(
        "give --size (one traffic mix to search) or --sizes (sizes to search one by one), not both"
    )]
    SizeAndSizes,
    /// The search maximum is not in Gb/s.
    #[error("with --zero-loss, --rate is the upper end of the search and must be in bits per second (e.g. 100Gbps or line)")]
    SearchRateUnit,
    /// A bad search setting.
    #[error("{0}")]
    Search(#[from] SearchConfigError),
    /// Bad traffic.
    #[error("{0}")]
    Traffic(#[from] TrafficError),
    /// An option that names an outside NIC, with `--in-process`.
    #[error("{0} does not apply to --in-process (it starts its own NIC: the generator on port 0, an echo server on port 1)")]
    NotForInProcess(&'static str),
    /// An option whose output or measurement a zero-loss search does not
    /// make.
    #[error("{0} does not apply to --zero-loss ({1})")]
    NotInSearch(&'static str, &'static str),
    /// The NIC timestamp would not fit in the smallest frame sent.
    #[error(
        "--timestamp-offset {offset} puts the 4-byte timestamp at bytes {offset}..{end}, \
         past the end of the smallest frame sent ({len} B without FCS){hint}",
        end = u32::from(*offset) + 4,
        hint = match most {
            Some(m) => format!("; give at most {m}"),
            None => "; no offset suits every frame sent: send the smaller frames \
                     separately, or leave out --rtt"
                .to_string(),
        }
    )]
    StampPastFrame {
        /// The offset.
        offset: u8,
        /// The smallest frame's length.
        len: usize,
        /// The largest offset that would do, if any.
        most: Option<usize>,
    },
    /// The NIC timestamp would overwrite part of the synthetic frames'
    /// test payload.
    #[error(
        "--timestamp-offset {offset} puts the 4-byte timestamp at bytes {offset}..{end}, \
         over the test payload (bytes {start}..{stop}: magic, sequence number, flow and the \
         echo byte the echo server increments), which returned frames are recognised and \
         checked by; give at most {below}, or at least {stop} with frames of {min_len} B \
         or more with FCS",
        min_len = TEST_PAYLOAD.end + 4 + FCS_LEN,
        end = u32::from(*offset) + 4,
        start = TEST_PAYLOAD.start,
        stop = TEST_PAYLOAD.end,
        below = TEST_PAYLOAD.start - 4
    )]
    StampOverPayload {
        /// The offset.
        offset: u8,
    },
    /// A core that threads cannot be pinned to.
    #[error("{0}")]
    Core(String),
    /// The NIC's timestamp would overwrite what a frame of the pcap is
    /// delimited by.
    #[error(
        "--timestamp-offset {offset} puts the NIC's 4-byte timestamp at bytes {offset}..{end}, \
         over what frame {frame} of the pcap ({kind}) states its length or kind by: once \
         stamped, the NIC could not tell where it ends; {hint}",
        end = u32::from(*offset) + 4,
        hint = match suggest {
            Some(o) => format!(
                "give --timestamp-offset {o}, the first offset from 14 that every frame \
                 of this pcap takes"
            ),
            None => "no offset from 14 to 60 suits every frame of this pcap: replay its \
                     kinds of frames separately, or leave out --rtt"
                .to_string(),
        }
    )]
    StampOverHeaders {
        /// The offset.
        offset: u8,
        /// The frame, from 1.
        frame: u64,
        /// What kind of frame it is.
        kind: String,
        /// An offset every frame takes, if any.
        suggest: Option<u8>,
    },
    /// `--pcie-addr` that is not one.
    #[error("--pcie-addr {0}: not a PCIe address (DDDD:BB:DD.F or BB:DD.F)")]
    PcieAddr(String),
    /// A number out of range.
    #[error("{what} must be {range}, not {value}")]
    OutOfRange {
        /// The option.
        what: &'static str,
        /// What is allowed.
        range: &'static str,
        /// What was given.
        value: String,
    },
}

/// Why the command line was refused.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// clap could not parse it (or help or the version was asked for:
    /// [`clap::Error::exit`] prints those and exits 0).
    #[error(transparent)]
    Usage(#[from] clap::Error),
    /// It parsed but makes no sense.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

impl CliError {
    /// The error as one line, without clap's usage and hints.
    pub fn message(&self) -> String {
        match self {
            CliError::Usage(e) => nic_emu::args::usage_line(e),
            CliError::Invalid(e) => e.to_string(),
        }
    }
}
