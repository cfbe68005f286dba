//! The JSON report of a run: the full configuration, the clock, every
//! interval sample, totals, loss next to latency percentiles, and the
//! zero-loss search if one ran. It deserialises too, so experiments can read
//! reports back.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nic_emu::counters::PortCounters;
use serde::{Deserialize, Serialize};

use crate::cli::Config;
use crate::rate::{FrameProfile, RateLimit, NIC_CLOCK_HZ};
use crate::search::SearchResult;
use crate::stats::{LatencyHistogram, LatencySummary, Loss, Recorder, Sample};

/// The clock that timed the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    /// What it is (e.g. `nic-200mhz`, `clock_monotonic`).
    pub name: String,
    /// Its resolution, ns.
    pub resolution_ns: f64,
}

impl ClockInfo {
    /// A named clock.
    pub fn new(name: impl Into<String>, resolution_ns: f64) -> Self {
        Self {
            name: name.into(),
            resolution_ns,
        }
    }

    /// The real NIC's timestamp clock: 200 MHz, 5 ns.
    pub fn nic() -> Self {
        Self::new("nic-200mhz", 1e9 / NIC_CLOCK_HZ)
    }

    /// The emulated NIC's timestamp clock: CLOCK_MONOTONIC in ns (Linux
    /// high-resolution timers: 1 ns), stamped as its low 32 bits.
    pub fn emulated_nic() -> Self {
        Self::new("clock_monotonic", 1.0)
    }
}

/// What the NIC counted while the run went on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// The NIC's name.
    pub name: String,
    /// The port the generator used.
    pub port: u32,
    /// Frames the NIC did not deliver during the run, by cause (every port
    /// and pipe of the device, so the device under test's drops are here
    /// too).
    pub drops: BTreeMap<String, u64>,
    /// Sum of `drops`.
    pub total_drops: u64,
    /// Of `drops`, those in the generator's own RX pipes: frames that came
    /// back but that the generator did not take in time.
    #[serde(default)]
    pub generator_drops: BTreeMap<String, u64>,
    /// Per port, what changed during the run.
    pub ports: Vec<PortReport>,
}

/// The pipes the generator sends and receives on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipeReport {
    /// RX pipes (`--queues`, raised to hold enough bytes of frames).
    pub rx: usize,
    /// Bytes per RX pipe (the device's pipe size).
    pub rx_pipe_bytes: usize,
    /// Bytes of the TX pipe (the generator sends on one).
    pub tx_pipe_bytes: usize,
    /// The frames were laid out once in the TX pipe and sent in place
    /// (false: a set too large for the pipe, copied into it per send).
    pub tx_in_place: bool,
}

/// The emulated NIC (or the generator's receiver), not the wire, set the
/// limit of a run: the NIC dropped frames, or sent clearly less than the
/// rate asked for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NicLimit {
    /// Frames the NIC dropped during the run (its counters).
    pub dropped: u64,
    /// Of them, by cause (those above zero).
    pub causes: BTreeMap<String, u64>,
    /// Of them, in the generator's own RX pipes.
    pub in_generator_pipes: u64,
    /// Every drop was in the generator's RX pipes: its receiver, not the
    /// NIC, fell behind.
    #[serde(default)]
    pub generator_receiver: bool,
    /// Frames sent over frames the rate asked for, when below 95%.
    pub sent_fraction: Option<f64>,
    /// The summary's line saying so.
    pub line: String,
}

/// One port's counters over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortReport {
    /// Port number.
    pub port: usize,
    /// What is at the other end (e.g. `cable:1`).
    pub wire: String,
    /// Counters over the run.
    pub counters: PortCounters,
}

/// Everything a run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `pktgen`.
    pub tool: String,
    /// Crate version.
    pub version: String,
    /// When the run started, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// The configuration, defaults resolved.
    pub config: Config,
    /// The clock of the RTTs.
    pub clock: ClockInfo,
    /// Mean frame length and flits of the traffic, once known.
    pub frames: Option<FrameProfile>,
    /// What the NIC's rate limiter was set to for the run (a search sets
    /// it per trial).
    #[serde(default)]
    pub limiter: Option<RateLimit>,
    /// One sample per statistics interval.
    pub samples: Vec<Sample>,
    /// The whole run as one sample.
    pub totals: Sample,
    /// Frames sent and not received.
    pub loss: Loss,
    /// RTT percentiles, when RTT was measured and at least one frame came
    /// back timed (`null` otherwise, not zeros).
    pub latency: Option<LatencySummary>,
    /// The zero-loss search, when one ran.
    pub zero_loss: Option<SearchResult>,
    /// What the NIC counted, when its counters could be read.
    #[serde(default)]
    pub device: Option<DeviceReport>,
    /// The pipes of the run, once attached.
    #[serde(default)]
    pub pipes: Option<PipeReport>,
    /// Whether the emulated NIC set the limit of the run (it dropped
    /// frames or sent less than asked), `null` when it did not.
    #[serde(default)]
    pub nic_limit: Option<NicLimit>,
    /// Anything a reader must know to trust the numbers (e.g. more busy
    /// threads than cores).
    pub notes: Vec<String>,
    /// The run or search was stopped from outside (Ctrl-C) before its end;
    /// the numbers are those until then.
    #[serde(default)]
    pub interrupted: bool,
    /// The device went away during the run (stopped, or its process
    /// exited); the numbers are those until the generator noticed.
    #[serde(default)]
    pub device_gone: bool,
}

impl Report {
    /// An empty report of a run starting now.
    pub fn new(config: Config, clock: ClockInfo) -> Self {
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Self {
            tool: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            started_unix_ns: u64::try_from(started.as_nanos()).unwrap_or(u64::MAX),
            config,
            clock,
            frames: None,
            limiter: None,
            samples: Vec::new(),
            totals: Sample::default(),
            loss: Loss::default(),
            latency: None,
            zero_loss: None,
            device: None,
            pipes: None,
            nic_limit: None,
            notes: Vec::new(),
            interrupted: false,
            device_gone: false,
        }
    }

    /// Fills samples, totals, loss and latency from a finished run.
    pub fn finish(&mut self, recorder: &Recorder, rtt: Option<&LatencyHistogram>) {
        self.samples = recorder.samples().to_vec();
        self.totals = recorder.totals();
        self.loss = recorder.loss();
        self.latency = rtt.filter(|h| !h.is_empty()).map(LatencyHistogram::summary);
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| unreachable!("a report always serialises: {e}"))
    }

    /// Writes the JSON to `path` (never through a symbolic link:
    /// [`nic_emu::outfile::create`]).
    pub fn write(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let mut json = self.to_json();
        json.push('\n');
        io::Write::write_all(
            &mut nic_emu::outfile::create(path.as_ref())?,
            json.as_bytes(),
        )
    }

    /// Reads a report back.
    pub fn read(path: impl AsRef<Path>) -> io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{search, SearchConfig, Trial, TrialOutcome, TrialSpec};
    use crate::stats::Counters;

    fn config(args: &[&str]) -> Config {
        crate::cli::parse(std::iter::once("pktgen").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn report_holds_everything_and_reads_back() {
        let cfg = config(&["--rate", "10G", "--rtt", "--size", "128", "--flows", "4"]);
        let mut r = Report::new(cfg.clone(), ClockInfo::nic());
        r.frames = Some(FrameProfile::fixed(124));
        let mut rec = Recorder::new();
        let mut rtt = LatencyHistogram::new();
        for i in 1..=3u64 {
            let c = Counters {
                tx_packets: i * 1000,
                tx_bytes: i * 124_000,
                rx_packets: i * 1000 - i,
                rx_bytes: (i * 1000 - i) * 124,
                rtt_sum_ns: i * 1_000_000,
                rtt_samples: i * 1000,
            };
            rec.record(c, Duration::from_secs(i));
            rtt.record_n(1000 + i, 1000);
        }
        r.finish(&rec, Some(&rtt));
        r.notes.push("2 busy threads on 2 cores".into());
        assert_eq!(r.samples.len(), 3);
        assert_eq!((r.loss.sent, r.loss.lost), (3000, 3));
        assert_eq!(r.latency.unwrap().count, 3000);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        r.write(&path).unwrap();
        let back = Report::read(&path).unwrap();
        assert_eq!(back, r);

        let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(j["tool"], "pktgen");
        assert_eq!(j["clock"]["name"], "nic-200mhz");
        assert_eq!(j["clock"]["resolution_ns"], 5.0);
        assert_eq!(j["config"]["rate"], "10Gbps");
        assert_eq!(j["config"]["rtt"], true);
        assert_eq!(j["config"]["traffic"]["synthetic"]["flows"], 4);
        assert_eq!(j["samples"][2]["t_ns"], 3_000_000_000u64);
        assert_eq!(j["samples"][2]["tx"]["packets"], 3000);
        assert_eq!(j["totals"]["rx"]["packets"], 2997);
        assert_eq!(j["loss"]["lost"], 3);
        assert_eq!(j["latency"]["p50_ns"], 1002);
        assert!(j["zero_loss"].is_null());
        // RTT on but nothing timed came back: no latency, not zeros.
        r.finish(&rec, Some(&LatencyHistogram::new()));
        assert_eq!(r.latency, None);
        let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert!(j["latency"].is_null(), "{}", j["latency"]);
    }

    #[test]
    fn report_carries_a_search() {
        struct Capacity(f64);
        impl Trial for Capacity {
            type Error = ();
            fn run(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, ()> {
                let sent = 1000;
                let received = if spec.rate_gbps <= self.0 { sent } else { 900 };
                Ok(TrialOutcome {
                    sent,
                    received,
                    ..TrialOutcome::default()
                })
            }
        }
        let cfg = config(&["--zero-loss", "--sizes", "64,512", "--warmup-ms", "0"]);
        let search_cfg: SearchConfig = cfg.zero_loss.clone().unwrap();
        let mut r = Report::new(cfg, ClockInfo::new("clock_monotonic", 1.0));
        r.zero_loss = Some(search(&search_cfg, &mut Capacity(33.0)).unwrap());
        let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        let sizes = j["zero_loss"]["sizes"].as_array().unwrap();
        assert_eq!(sizes.len(), 2);
        assert_eq!(sizes[1]["size"], 512);
        let rate = sizes[0]["rate_gbps"].as_f64().unwrap();
        assert_eq!(sizes[0]["finished"], true);
        assert!(rate <= 33.0 && rate > 32.9);
        let t0 = &sizes[0]["trials"][0];
        assert_eq!(t0["rate_gbps"], 100.0);
        assert_eq!(t0["sent"], 1000);
        assert_eq!(t0["lossless"], false);
        assert_eq!(serde_json::from_value::<Report>(j).unwrap(), r);
    }
}
