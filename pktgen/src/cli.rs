//! Command-line arguments, EnsōGen's and ours, and their validation into a
//! [`Config`].
//!
//! EnsōGen's form still works: `pktgen PCAP RATE_NUM RATE_DEN` with
//! `--count`, `--core`, `--queues`, `--save`, `--single-core`, `--rtt`,
//! `--rtt-hist`, `--stats-delay` and `--timestamp-offset`. Without a pcap the
//! generator makes synthetic traffic (`--size`, `--flows`, address and port
//! ranges); `--rate` takes rates in Gb/s or Mpps; `--zero-loss` runs the
//! RFC 2544 search instead of one run.
//!
//! [`parse`] turns arguments into a [`Config`] or a [`CliError`] whose
//! [`CliError::message`] is one line.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde::{Deserialize, Serialize};

use crate::pcap::{self};
use crate::rate::{Rate, FCS_LEN};
use crate::search::{SearchConfig, RFC2544_SIZES};
use crate::serde_util::{duration_ns, option_duration_ns};
use crate::session::Idle;
use crate::threads::{choose_threads, other_busy_threads, usable_core_count, ThreadChoice};
use crate::traffic::{Ipv4Range, PortRange, SizeSpec, Traffic, TrafficSpec};

mod errors;
#[cfg(test)]
mod tests;

pub use self::errors::{CliError, ConfigError};

/// Most queues (pipes) the generator will open.
pub const MAX_QUEUES: u32 = 8192;

/// The generator's command line.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "pktgen",
    version,
    about = "Packet generator for the emulated Ensō NIC: pcap replay or synthetic traffic, \
             rate control, RTT, zero-loss search"
)]
pub struct Args {
    /// Pcap or pcapng file to replay (Ethernet, frames up to 1536 B);
    /// without it, synthetic traffic.
    #[arg(value_name = "PCAP")]
    pub pcap: Option<PathBuf>,
    /// Rate limiter, EnsōGen style: RATE_NUM flits every RATE_DEN cycles of
    /// the 200 MHz clock (744 1000 is 100 Gb/s at 64 B).
    #[arg(value_name = "RATE_NUM", allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub rate_num: Option<u32>,
    /// See RATE_NUM.
    #[arg(value_name = "RATE_DEN", allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub rate_den: Option<u32>,
    /// Rate: 10Gbps, 2.5G, 5Mpps, 100kpps, line (100 Gb/s) or NUM/DEN.
    /// Gb/s count 24 B per frame of Ethernet overhead.
    // Hyphen values reach Rate::parse, which says what is wrong with `-5G`.
    #[arg(long, value_name = "RATE", value_parser = Rate::parse, allow_hyphen_values = true)]
    pub rate: Option<Rate>,
    /// Stop after sending this many frames.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub count: Option<u64>,
    /// Stop after this long: 10s, 500ms, 2m, or seconds.
    #[arg(long, value_name = "TIME", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// First CPU core to pin threads to, as EnsōGen: receive on CORE,
    /// transmit on CORE+1 (both on CORE with --single-core).
    #[arg(long, value_name = "CORE", allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub core: Option<usize>,
    /// Number of queues (Ensō pipes) to send and receive on.
    #[arg(
        long,
        visible_alias = "pipes",
        value_name = "N",
        default_value_t = 4,
        allow_negative_numbers = true,
        value_parser = whole::<u32>
    )]
    pub queues: u32,
    /// Write EnsōGen's per-interval CSV to this file: its columns, whole
    /// numbers in its units (Mb/s, kpps, ns), one row per interval.
    #[arg(long, value_name = "CSV")]
    pub save: Option<PathBuf>,
    /// Write the same CSV with fractional rates and mean RTTs (an empty
    /// mean_rtt_ns where no frame was timed) to this file.
    #[arg(long, value_name = "CSV")]
    pub save_detailed: Option<PathBuf>,
    /// Send and receive on one thread (the default when fewer than three
    /// cores are usable: see --multicore).
    #[arg(long)]
    pub single_core: bool,
    /// Measure RTT with NIC timestamps.
    #[arg(long)]
    pub rtt: bool,
    /// Write the RTT histogram (lines rtt_ns,count) to this file; implies --rtt.
    #[arg(long, value_name = "FILE")]
    pub rtt_hist: Option<PathBuf>,
    /// First 5 ns cycle of the --rtt-hist array, as EnsōGen's (RTTs
    /// below it follow the array in the file).
    #[arg(
        long,
        value_name = "CYCLES",
        default_value_t = crate::stats::DEFAULT_HIST_OFFSET,
        allow_negative_numbers = true,
        value_parser = whole::<u32>
    )]
    pub rtt_hist_offset: u32,
    /// Cycles the --rtt-hist array covers, as EnsōGen's (RTTs past it
    /// follow the array in the file).
    #[arg(
        long,
        value_name = "CYCLES",
        default_value_t = crate::stats::DEFAULT_HIST_LEN,
        allow_negative_numbers = true,
        value_parser = whole::<u32>
    )]
    pub rtt_hist_len: u32,
    /// EnsōGen's choice of NIC by PCIe address (DDDD:BB:DD.F or BB:DD.F):
    /// checked and noted; an emulated NIC is chosen by --device.
    #[arg(long, value_name = "ADDR")]
    pub pcie_addr: Option<String>,
    /// Transmit and receive on threads of their own, as opposed to
    /// --single-core (Ensō's Python frontend passes it). Without either,
    /// two threads when the process may use a core for each and for the
    /// NIC's engine (and the echo server with --in-process), else one.
    #[arg(long, conflicts_with = "single_core")]
    pub multicore: bool,
    /// Without frames coming: `park` sleeps after 500 us until the NIC has
    /// something for the receiver (`Device::wait`); `spin` keeps polling (a
    /// core busy even when idle).
    #[arg(long, value_enum, default_value_t = Idle::Park)]
    pub idle: Idle,
    /// Milliseconds between statistics lines.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 1000,
        allow_negative_numbers = true,
        value_parser = whole::<u64>
    )]
    pub stats_delay: u64,
    /// Byte offset of the NIC timestamp in each frame.
    #[arg(
        long,
        value_name = "OFFSET",
        default_value_t = 18,
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(u8).range(0..=60)
    )]
    pub timestamp_offset: u8,
    /// Frame sizes with FCS: 64, 64,128,1518, 64:7,594:4,1518:1, imix or 64-1518.
    #[arg(long, value_name = "SIZES")]
    pub size: Option<SizeSpec>,
    /// Number of flows.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub flows: Option<u32>,
    /// Source IPv4 addresses: 10.0.0.1, 10.0.0.0/16 or 10.0.0.1-10.0.0.200.
    #[arg(long, value_name = "RANGE")]
    pub src_ip: Option<Ipv4Range>,
    /// Destination IPv4 addresses (as --src-ip).
    #[arg(long, value_name = "RANGE")]
    pub dst_ip: Option<Ipv4Range>,
    /// Source UDP ports: 53 or 1000-2000.
    #[arg(long, value_name = "RANGE")]
    pub src_port: Option<PortRange>,
    /// Destination UDP ports (as --src-port).
    #[arg(long, value_name = "RANGE")]
    pub dst_port: Option<PortRange>,
    /// Seed for size mixes and ranges.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        allow_negative_numbers = true,
        value_parser = whole::<u64>
    )]
    pub seed: u64,
    /// Write a JSON report (configuration, samples, totals, loss, latency,
    /// device counters) to FILE, or to standard output with `--json` alone
    /// or `--json -` (the summary then goes to standard error).
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        default_missing_value = "-"
    )]
    pub json: Option<PathBuf>,
    /// Write received frames to this pcap file (nanosecond timestamps).
    #[arg(long, value_name = "FILE")]
    pub capture: Option<PathBuf>,
    /// Search for the highest rate without loss (RFC 2544); --rate is then
    /// the upper end of the search.
    #[arg(long)]
    pub zero_loss: bool,
    /// Zero-loss search precision, Gb/s (default 0.1).
    #[arg(long, value_name = "GBPS", allow_negative_numbers = true)]
    pub precision: Option<f64>,
    /// Zero-loss trial length, ms (default 1000, at most an hour).
    #[arg(long, value_name = "MS", allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub trial_ms: Option<u64>,
    /// Zero-loss warm-up before each size, ms (default 5000, 0 for none, at
    /// most an hour).
    #[arg(long, value_name = "MS", allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub warmup_ms: Option<u64>,
    /// Zero-loss frame sizes with FCS, comma-separated
    /// (default 64,128,256,512,1024,1280,1518).
    #[arg(
        long,
        value_name = "SIZES",
        value_delimiter = ',',
        allow_negative_numbers = true,
        value_parser = whole::<usize>
    )]
    pub sizes: Option<Vec<usize>>,
    /// Name of the emulated NIC to attach to (default enso0).
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// Directory holding the NIC's device directory (default: the NIC's).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Port of the NIC to send and receive on (default 0).
    #[arg(long, value_name = "PORT", allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub port: Option<u32>,
    /// Start an emulated NIC in this process, with port 0 cabled to port 1
    /// and an echo server on port 1, and generate on port 0.
    #[arg(long)]
    pub in_process: bool,
}

/// NIC name used when `--device` is not given.
pub const DEFAULT_DEVICE: &str = "enso0";

/// What `--json` alone means: standard output.
pub const STDOUT: &str = "-";

/// Where the frames come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficSource {
    /// Replay a pcap file.
    Pcap {
        /// The file.
        path: PathBuf,
    },
    /// Build frames from a spec.
    Synthetic(TrafficSpec),
}

/// A checked configuration: what a run (or a search) will do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Frames to send.
    pub traffic: TrafficSource,
    /// Rate of a run; the upper end of a zero-loss search.
    pub rate: Rate,
    /// Frames to send, if limited.
    pub count: Option<u64>,
    /// How long to send, if limited.
    #[serde(rename = "duration_ns", with = "option_duration_ns")]
    pub duration: Option<Duration>,
    /// First core to pin to.
    pub core: Option<usize>,
    /// Queues (pipes).
    pub queues: u32,
    /// One thread for TX and RX (as chosen: see `threads`).
    pub single_core: bool,
    /// How many threads send and receive, and why.
    #[serde(default)]
    pub threads: ThreadChoice,
    /// What the receiver does while no frame comes.
    #[serde(default)]
    pub idle: Idle,
    /// RTT measured.
    pub rtt: bool,
    /// RTT histogram file.
    pub rtt_hist: Option<PathBuf>,
    /// First cycle of the RTT histogram's array.
    #[serde(default = "default_hist_offset")]
    pub rtt_hist_offset: u32,
    /// Cycles the RTT histogram's array covers.
    #[serde(default = "default_hist_len")]
    pub rtt_hist_len: u32,
    /// The PCIe address given (EnsōGen's; not used to find the NIC).
    #[serde(default)]
    pub pcie_addr: Option<String>,
    /// Time between statistics samples.
    #[serde(rename = "stats_delay_ns", with = "duration_ns")]
    pub stats_delay: Duration,
    /// Offset of the NIC timestamp.
    pub timestamp_offset: u8,
    /// EnsōGen's CSV file (whole numbers).
    pub save: Option<PathBuf>,
    /// The CSV file with fractional values.
    #[serde(default)]
    pub save_detailed: Option<PathBuf>,
    /// JSON report file.
    pub json: Option<PathBuf>,
    /// Capture file.
    pub capture: Option<PathBuf>,
    /// The zero-loss search, if asked for.
    pub zero_loss: Option<SearchConfig>,
    /// NIC name.
    pub device: String,
    /// NIC directory.
    pub dir: Option<PathBuf>,
    /// Port to send and receive on.
    #[serde(default)]
    pub port: u32,
    /// Run against a NIC and echo server started in this process.
    #[serde(default)]
    pub in_process: bool,
}

fn default_hist_offset() -> u32 {
    crate::stats::DEFAULT_HIST_OFFSET
}

fn default_hist_len() -> u32 {
    crate::stats::DEFAULT_HIST_LEN
}

/// Checks a PCIe address as EnsōGen reads one: `DDDD:BB:DD.F` or
/// `BB:DD.F`, hexadecimal fields.
pub fn check_pcie_addr(addr: &str) -> Result<(), ConfigError> {
    let bad = || ConfigError::PcieAddr(addr.to_string());
    let (head, func) = addr.rsplit_once('.').ok_or_else(bad)?;
    let parts: Vec<&str> = head.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(bad());
    }
    let hex = |p: &str| !p.is_empty() && p.len() <= 4 && p.chars().all(|c| c.is_ascii_hexdigit());
    if !parts.iter().copied().chain([func]).all(hex) {
        return Err(bad());
    }
    Ok(())
}

impl Config {
    /// Whether the JSON report goes to standard output.
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_deref() == Some(std::path::Path::new(STDOUT))
    }
}

/// Longest zero-loss trial or warm-up, ms: an hour.
pub const MAX_SEARCH_MS: u64 = 3_600_000;

/// Parses a whole number for a numeric option. A negative one gets a
/// message saying so (clap would otherwise take `-1` for an option, or say
/// only "invalid digit").
pub fn whole<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let t = s.trim();
    if t.starts_with('-') {
        return Err("must not be negative".into());
    }
    t.parse()
        .map_err(|e| format!("not a whole number in range ({e})"))
}

/// Checks that the NIC's 4-byte timestamp at `offset` fits in a frame of
/// `min_len` bytes (the smallest sent, without FCS): otherwise those frames
/// carry no timestamp and give no RTT.
pub fn check_stamp_fits(offset: u8, min_len: usize) -> Result<(), ConfigError> {
    if usize::from(offset) + 4 > min_len {
        return Err(ConfigError::StampPastFrame {
            offset,
            len: min_len,
            most: min_len.checked_sub(4),
        });
    }
    Ok(())
}

/// Bytes of a synthetic (IPv4/UDP test) frame that hold its test payload.
pub const TEST_PAYLOAD: std::ops::Range<usize> = {
    let k = nic_emu::testframe::FrameKind::Ipv4Udp;
    k.payload_offset()..k.echo_offset() + 1
};

/// Checks the NIC's 4-byte timestamp at `offset` in synthetic frames of at
/// least `min_len` bytes (without FCS): it must fit, and leave the test
/// payload alone. Over its magic, sequence number or flow the returned
/// frames are no longer recognised; over its echo byte the echo server's
/// increment changes the timestamp, and with it the RTT.
pub fn check_synthetic_stamp(offset: u8, min_len: usize) -> Result<(), ConfigError> {
    let o = usize::from(offset);
    if o + 4 > TEST_PAYLOAD.start && o < TEST_PAYLOAD.end {
        return Err(ConfigError::StampOverPayload { offset });
    }
    if o + 4 > min_len {
        let m = min_len.checked_sub(4);
        return Err(ConfigError::StampPastFrame {
            offset,
            len: min_len,
            most: m.map(|m| {
                if m >= TEST_PAYLOAD.end {
                    m
                } else {
                    m.min(TEST_PAYLOAD.start - 4)
                }
            }),
        });
    }
    Ok(())
}

pub use nic_emu::cores::{usable_cores, CPU_SET_SIZE};

/// Checks `--core`: the receive thread goes to `core` and, unless
/// `single_core`, the transmit thread to `core + 1`; both must be among
/// `usable` (from [`usable_cores`]; if that is empty, below
/// [`CPU_SET_SIZE`]).
pub fn check_cores(core: usize, single_core: bool, usable: &[usize]) -> Result<(), ConfigError> {
    let ok = |c: usize| nic_emu::cores::can_pin(c, usable);
    let have = nic_emu::cores::pinnable_list(usable);
    if !ok(core) {
        return Err(ConfigError::Core(format!(
            "--core {core} is not a core this process can run on (cores: {have})"
        )));
    }
    // `core` is below CPU_SET_SIZE here, so `core + 1` cannot overflow.
    if !single_core && !ok(core + 1) {
        return Err(ConfigError::Core(format!(
            "--core {core} puts the transmit thread on core {}, which this process cannot run on \
             (cores: {have}); give a lower --core, or --single-core",
            core + 1
        )));
    }
    Ok(())
}

/// Parses and validates a command line (the first item is the program name).
pub fn parse<I, T>(args: I) -> Result<Config, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = Args::try_parse_from(args)?;
    Ok(args.validate()?)
}

fn out_of_range(what: &'static str, range: &'static str, value: impl ToString) -> ConfigError {
    ConfigError::OutOfRange {
        what,
        range,
        value: value.to_string(),
    }
}

impl Args {
    /// Checks that the arguments go together and the pcap is usable, and
    /// resolves defaults.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let positional = match (self.rate_num, self.rate_den) {
            (Some(num), Some(den)) => Some(Rate::Flits(crate::rate::RateLimit::new(num, den)?)),
            (Some(_), None) => {
                // `pktgen 744 1000`: clap took 744 for the pcap.
                if let Some(p) = &self.pcap {
                    let s = p.to_string_lossy();
                    if s.parse::<u32>().is_ok() && !p.exists() {
                        return Err(ConfigError::RateWithoutPcap(s.into()));
                    }
                }
                return Err(ConfigError::MissingRateDen);
            }
            _ => None,
        };
        if positional.is_some() && self.rate.is_some() {
            return Err(ConfigError::TwoRates);
        }
        let rate = positional.or(self.rate).unwrap_or_else(Rate::line);
        // `-` is standard output for --json only: for the other outputs it
        // would silently make a file called `-`.
        let stdout = std::path::Path::new(STDOUT);
        for (flag, p) in [
            ("--capture", &self.capture),
            ("--save", &self.save),
            ("--save-detailed", &self.save_detailed),
            ("--rtt-hist", &self.rtt_hist),
        ] {
            if p.as_deref() == Some(stdout) {
                return Err(ConfigError::NotStdout(flag));
            }
        }
        // Every file named is a different file: an output must not replace
        // the pcap being replayed, nor another output.
        let files = [
            ("PCAP", self.pcap.as_deref()),
            ("--json", self.json.as_deref().filter(|p| *p != stdout)),
            ("--capture", self.capture.as_deref()),
            ("--save", self.save.as_deref()),
            ("--save-detailed", self.save_detailed.as_deref()),
            ("--rtt-hist", self.rtt_hist.as_deref()),
        ];
        for (i, (a, pa)) in files.iter().enumerate() {
            for (b, pb) in &files[i + 1..] {
                if let (Some(pa), Some(pb)) = (pa, pb) {
                    if same_file(pa, pb) {
                        return Err(ConfigError::SameFile(a, b, pa.display().to_string()));
                    }
                }
            }
        }

        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(out_of_range("--queues", "1..=8192", self.queues));
        }
        if self.stats_delay == 0 {
            return Err(out_of_range("--stats-delay", "at least 1 ms", 0));
        }
        if self.count == Some(0) {
            return Err(out_of_range("--count", "at least 1", 0));
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err(out_of_range("--duration", "above zero", "0"));
        }
        let asked = match (self.single_core, self.multicore) {
            (true, _) => Some(true),
            (false, true) => Some(false),
            (false, false) => None,
        };
        let threads = choose_threads(
            asked,
            usable_core_count(),
            other_busy_threads(self.in_process),
        );
        if let Some(c) = self.core {
            check_cores(c, threads.single(), &usable_cores())?;
        }
        if let Some(a) = &self.pcie_addr {
            check_pcie_addr(a)?;
        }
        if self.rtt_hist_len > crate::stats::MAX_HIST_LEN {
            return Err(out_of_range(
                "--rtt-hist-len",
                "at most 100000000",
                self.rtt_hist_len,
            ));
        }

        let synthetic_flags: [(&'static str, bool); 6] = [
            ("--size", self.size.is_some()),
            ("--flows", self.flows.is_some()),
            ("--src-ip", self.src_ip.is_some()),
            ("--dst-ip", self.dst_ip.is_some()),
            ("--src-port", self.src_port.is_some()),
            ("--dst-port", self.dst_port.is_some()),
        ];
        let traffic = match &self.pcap {
            Some(path) => {
                if let Some((flag, _)) = synthetic_flags.iter().find(|(_, set)| *set) {
                    return Err(ConfigError::NotForPcap(flag));
                }
                if self.sizes.is_some() {
                    return Err(ConfigError::NotForPcap("--sizes"));
                }
                pcap::check_header(path)?;
                TrafficSource::Pcap { path: path.clone() }
            }
            None => {
                let spec = TrafficSpec {
                    sizes: self.size.clone().unwrap_or(SizeSpec::Fixed(64)),
                    flows: self.flows,
                    src_ip: self.src_ip,
                    dst_ip: self.dst_ip,
                    src_port: self.src_port,
                    dst_port: self.dst_port,
                    seed: self.seed,
                    stream: 0,
                };
                // Builds nothing; checks sizes and flows.
                Traffic::new(spec.clone())?;
                // A pcap's frames are checked once read (app::execute).
                if self.rtt || self.rtt_hist.is_some() {
                    let smallest = usize::from(spec.sizes.smallest()) - FCS_LEN;
                    check_synthetic_stamp(self.timestamp_offset, smallest)?;
                }
                TrafficSource::Synthetic(spec)
            }
        };

        if self.in_process {
            let outside = [
                ("--device", self.device.is_some()),
                ("--dir", self.dir.is_some()),
                ("--port", self.port.is_some()),
            ];
            if let Some((flag, _)) = outside.iter().find(|(_, set)| *set) {
                return Err(ConfigError::NotForInProcess(flag));
            }
        }

        let zero_loss = if self.zero_loss {
            Some(self.search_config(&rate)?)
        } else {
            let search_flags = [
                ("--precision", self.precision.is_some()),
                ("--trial-ms", self.trial_ms.is_some()),
                ("--warmup-ms", self.warmup_ms.is_some()),
                ("--sizes", self.sizes.is_some()),
            ];
            if let Some((flag, _)) = search_flags.iter().find(|(_, set)| *set) {
                return Err(ConfigError::NeedsZeroLoss(flag));
            }
            None
        };

        Ok(Config {
            traffic,
            rate,
            count: self.count,
            duration: self.duration,
            core: self.core,
            queues: self.queues,
            single_core: threads.single(),
            threads,
            idle: self.idle,
            rtt: self.rtt || self.rtt_hist.is_some(),
            rtt_hist: self.rtt_hist.clone(),
            rtt_hist_offset: self.rtt_hist_offset,
            rtt_hist_len: self.rtt_hist_len,
            pcie_addr: self.pcie_addr.clone(),
            stats_delay: Duration::from_millis(self.stats_delay),
            timestamp_offset: self.timestamp_offset,
            save: self.save.clone(),
            save_detailed: self.save_detailed.clone(),
            json: self.json.clone(),
            capture: self.capture.clone(),
            zero_loss,
            device: self
                .device
                .clone()
                .unwrap_or_else(|| DEFAULT_DEVICE.to_string()),
            dir: self.dir.clone(),
            port: self.port.unwrap_or(0),
            in_process: self.in_process,
        })
    }

    fn search_config(&self, rate: &Rate) -> Result<SearchConfig, ConfigError> {
        // Outputs of one run, which a search does not make.
        let run_only = [
            ("--capture", self.capture.is_some(), "it captures no frames"),
            (
                "--save",
                self.save.is_some(),
                "it writes no per-interval CSV",
            ),
            (
                "--save-detailed",
                self.save_detailed.is_some(),
                "it writes no per-interval CSV",
            ),
            ("--rtt-hist", self.rtt_hist.is_some(), "it measures no RTT"),
            ("--rtt", self.rtt, "it measures no RTT"),
        ];
        if let Some((flag, _, why)) = run_only.iter().find(|(_, set, _)| *set) {
            return Err(ConfigError::NotInSearch(flag, why));
        }
        if self.count.is_some() {
            return Err(ConfigError::NotForZeroLoss("--count"));
        }
        if self.duration.is_some() {
            return Err(ConfigError::NotForZeroLoss("--duration"));
        }
        if self.rate_num.is_some() {
            return Err(ConfigError::NotForZeroLoss("RATE_NUM RATE_DEN"));
        }
        let bps = match *rate {
            Rate::Bps(bps) => bps,
            Rate::Line => crate::rate::LINE_RATE_GBPS * 1e9,
            _ => return Err(ConfigError::SearchRateUnit),
        };
        if self.size.is_some() && self.sizes.is_some() {
            return Err(ConfigError::SizeAndSizes);
        }
        let sizes = match (&self.sizes, &self.size, &self.pcap) {
            (Some(s), _, _) => s.clone(),
            // The traffic's own sizes: a pcap, or one --size mix.
            (None, Some(_), _) | (None, None, Some(_)) => Vec::new(),
            (None, None, None) => RFC2544_SIZES.to_vec(),
        };
        if let Some(p) = self.precision.filter(|p| !(p.is_finite() && *p > 0.0)) {
            return Err(out_of_range("--precision", "above 0 Gb/s", p));
        }
        if let Some(t) = self.trial_ms.filter(|t| !(1..=MAX_SEARCH_MS).contains(t)) {
            return Err(out_of_range("--trial-ms", "1..=3600000 (an hour)", t));
        }
        if let Some(t) = self.warmup_ms.filter(|t| *t > MAX_SEARCH_MS) {
            return Err(out_of_range("--warmup-ms", "0..=3600000 (an hour)", t));
        }
        let d = SearchConfig::default();
        let cfg = SearchConfig {
            max_rate_gbps: bps / 1e9,
            precision_gbps: self.precision.unwrap_or(d.precision_gbps),
            trial: self.trial_ms.map_or(d.trial, Duration::from_millis),
            warmup: self.warmup_ms.map_or(d.warmup, Duration::from_millis),
            sizes,
            ..d
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Parses a duration: `10s`, `500ms`, `100us`, `2m`, `1h`, or a number of
/// seconds (`2.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad duration '{t}'; write e.g. 10s or 500ms"))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => {
            return Err(format!(
                "unknown unit '{u}' in duration '{t}'; use ns, us, ms, s, m or h"
            ))
        }
    };
    let secs = v * scale;
    if secs < 0.0 {
        return Err(format!("duration '{t}' is negative"));
    }
    if !(0.0..=1e9).contains(&secs) {
        return Err(format!("duration '{t}' is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Whether `a` and `b` name the same file: the same path, or the same file
/// once both exist (links, `./x` and `x`).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if a == b {
        return true;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        _ => {
            // A file not made yet: compare the absolute paths.
            let abs = |p: &std::path::Path| std::path::absolute(p).ok();
            abs(a).is_some_and(|x| Some(x) == abs(b))
        }
    }
}
