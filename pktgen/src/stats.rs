//! Statistics: counters sampled once per interval, EnsōGen's CSV, a one-line
//! live display, HDR latency histograms with EnsōGen's histogram file, and
//! loss.
//!
//! Rates follow EnsōGen: goodput counts frame bytes as they sit in memory,
//! throughput adds 24 B per frame (FCS, preamble, inter-frame gap). In a
//! sample the rates and the mean RTT are over the interval; bytes and
//! packets are running totals.
//!
//! A run ends with a wait for frames still in flight (the drain), during
//! which nothing is sent and, mostly, nothing arrives. The last interval and
//! the totals ([`Recorder::finish`]) therefore compute TX rates over the time
//! sending took and RX rates over the time receiving took ([`TrafficSpan`]),
//! not over a time that includes the drain.

use std::fmt;
use std::io::{self, Write};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::rate::ETH_OVERHEAD;
use crate::serde_util::{duration_ns, option_duration_ns};

mod histogram;
#[cfg(test)]
mod tests;

pub use self::histogram::{
    CycleHistogram, HistFileError, LatencyHistogram, DEFAULT_HIST_LEN, DEFAULT_HIST_OFFSET,
    MAX_HIST_LEN, NS_PER_TIMESTAMP_CYCLE,
};

/// Cumulative counters of a run, read at the end of each interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Frame bytes received (no FCS).
    pub rx_bytes: u64,
    /// Frames received.
    pub rx_packets: u64,
    /// Frame bytes sent (no FCS).
    pub tx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Sum of the RTTs measured, in ns.
    pub rtt_sum_ns: u64,
    /// RTTs measured.
    pub rtt_samples: u64,
}

impl Counters {
    /// What changed since `earlier` (zero where a counter went backwards).
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            rtt_sum_ns: self.rtt_sum_ns.saturating_sub(earlier.rtt_sum_ns),
            rtt_samples: self.rtt_samples.saturating_sub(earlier.rtt_samples),
        }
    }
}

/// One direction of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionSample {
    /// Frame bytes per second over the interval, Mb/s.
    pub goodput_mbps: f64,
    /// Goodput plus 24 B per frame, Mb/s.
    pub tput_mbps: f64,
    /// Frames per second over the interval, thousands.
    pub pkt_rate_kpps: f64,
    /// Frame bytes since the start.
    pub bytes: u64,
    /// Frames since the start.
    pub packets: u64,
}

impl DirectionSample {
    fn new(bytes: u64, packets: u64, secs: f64, total_bytes: u64, total_packets: u64) -> Self {
        let per_sec = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let wire = bytes as f64 + packets as f64 * ETH_OVERHEAD as f64;
        Self {
            goodput_mbps: per_sec(bytes as f64 * 8.0) / 1e6,
            tput_mbps: per_sec(wire * 8.0) / 1e6,
            pkt_rate_kpps: per_sec(packets as f64) / 1e3,
            bytes: total_bytes,
            packets: total_packets,
        }
    }
}

/// The statistics of one interval (or, from [`Recorder::totals`], of the
/// whole run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Time from the start of the run to the end of the interval (for the
    /// totals and the last interval: the end of the run, drain included).
    #[serde(rename = "t_ns", with = "duration_ns")]
    pub at: Duration,
    /// Length of the interval (for the totals: the whole run, drain
    /// included).
    #[serde(rename = "interval_ns", with = "duration_ns")]
    pub interval: Duration,
    /// Received.
    pub rx: DirectionSample,
    /// Sent.
    pub tx: DirectionSample,
    /// Mean RTT of the frames received in the interval, if any were timed.
    pub mean_rtt_ns: Option<f64>,
    /// The time the TX rates are over, when it is not `interval`: for the
    /// totals, from the first frame handed to the NIC to the last one the
    /// NIC sent; for the last interval, from its start to the last frame
    /// sent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "option_duration_ns"
    )]
    pub send_ns: Option<Duration>,
    /// The time the RX rates are over, when it is not `interval`: for the
    /// totals, from the first frame handed to the NIC to the last frame
    /// received; for the last interval, from its start to the last frame
    /// received.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "option_duration_ns"
    )]
    pub receive_ns: Option<Duration>,
}

impl Sample {
    /// The sample of the interval from `prev` to `now`, which lasted
    /// `interval` and ended `at` after the start.
    pub fn between(prev: &Counters, now: &Counters, interval: Duration, at: Duration) -> Self {
        Self::over(prev, now, interval, at, interval, interval)
    }

    /// As [`Sample::between`], with TX rates over `send` and RX rates over
    /// `receive` (recorded as `send_ns` and `receive_ns`).
    fn over(
        prev: &Counters,
        now: &Counters,
        interval: Duration,
        at: Duration,
        send: Duration,
        receive: Duration,
    ) -> Self {
        let d = now.since(prev);
        let (tx_secs, rx_secs) = (send.as_secs_f64(), receive.as_secs_f64());
        let differs = |x: Duration| (x != interval).then_some(x);
        Self {
            at,
            interval,
            rx: DirectionSample::new(
                d.rx_bytes,
                d.rx_packets,
                rx_secs,
                now.rx_bytes,
                now.rx_packets,
            ),
            tx: DirectionSample::new(
                d.tx_bytes,
                d.tx_packets,
                tx_secs,
                now.tx_bytes,
                now.tx_packets,
            ),
            mean_rtt_ns: (d.rtt_samples > 0).then(|| d.rtt_sum_ns as f64 / d.rtt_samples as f64),
            send_ns: differs(send),
            receive_ns: differs(receive),
        }
    }
}

/// When a run's traffic went, as times since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficSpan {
    /// The first frame was handed to the NIC (`None`: nothing was).
    pub first_sent: Option<Duration>,
    /// The NIC completed the last frame sent.
    pub last_sent: Option<Duration>,
    /// The last frame was received.
    pub last_received: Option<Duration>,
}

impl TrafficSpan {
    /// From the first frame handed to the NIC to the last one it sent.
    pub fn send_time(&self) -> Duration {
        match (self.first_sent, self.last_sent) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        }
    }

    /// From the first frame handed to the NIC to the last one received.
    pub fn receive_time(&self) -> Duration {
        match (self.first_sent, self.last_received) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        }
    }
}

/// Turns counters read at the end of each interval into samples.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    last: Counters,
    last_at: Duration,
    samples: Vec<Sample>,
    span: Option<TrafficSpan>,
}

impl Recorder {
    /// A recorder whose counters start at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the interval that ends now, `at` after the start, with the
    /// counters read now.
    pub fn record(&mut self, now: Counters, at: Duration) -> &Sample {
        let interval = at.saturating_sub(self.last_at);
        let s = Sample::between(&self.last, &now, interval, at);
        self.last = now;
        self.last_at = at;
        self.samples.push(s);
        &self.samples[self.samples.len() - 1]
    }

    /// Records the run's last interval, which ends `at` after the start
    /// with the final counters `now`, after the drain: its TX rates are
    /// over the part of it before the last frame was sent, its RX rates
    /// over the part before the last frame was received. The totals are
    /// then over `span` too. Nothing is recorded for an empty interval.
    pub fn finish(&mut self, now: Counters, at: Duration, span: TrafficSpan) -> Option<&Sample> {
        self.span = Some(span);
        if at <= self.last_at {
            return None;
        }
        let interval = at - self.last_at;
        // The part of the interval before `end`; all of it if `end` is not
        // inside it (the frames were then counted late: use the interval).
        let part = |end: Option<Duration>| match end {
            Some(e) if e > self.last_at && e < at => e - self.last_at,
            _ => interval,
        };
        let s = Sample::over(
            &self.last,
            &now,
            interval,
            at,
            part(span.last_sent),
            part(span.last_received),
        );
        self.last = now;
        self.last_at = at;
        self.samples.push(s);
        self.samples.last()
    }

    /// Every sample so far.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// The counters last recorded.
    pub fn counters(&self) -> &Counters {
        &self.last
    }

    /// The whole run as one sample. After [`Recorder::finish`], its TX
    /// rates are over the send time and its RX rates over the receive time
    /// of the run's [`TrafficSpan`] (`send_ns`, `receive_ns`); before, over
    /// the time to the last sample.
    pub fn totals(&self) -> Sample {
        let zero = Counters::default();
        match self.span {
            Some(span) => {
                let mut s = Sample::over(
                    &zero,
                    &self.last,
                    self.last_at,
                    self.last_at,
                    span.send_time(),
                    span.receive_time(),
                );
                // Always stated for the totals, even when equal.
                s.send_ns = Some(span.send_time());
                s.receive_ns = Some(span.receive_time());
                s
            }
            None => Sample::between(&zero, &self.last, self.last_at, self.last_at),
        }
    }

    /// Loss so far.
    pub fn loss(&self) -> Loss {
        Loss::new(self.last.tx_packets, self.last.rx_packets)
    }
}

/// EnsōGen's CSV columns, in order; [`RTT_COLUMN`] follows when RTT is on.
pub const CSV_COLUMNS: [&str; 10] = [
    "rx_goodput_mbps",
    "rx_tput_mbps",
    "rx_pkt_rate_kpps",
    "rx_bytes",
    "rx_packets",
    "tx_goodput_mbps",
    "tx_tput_mbps",
    "tx_pkt_rate_kpps",
    "tx_bytes",
    "tx_packets",
];
/// The last CSV column when RTT is measured.
pub const RTT_COLUMN: &str = "mean_rtt_ns";

/// How a [`CsvWriter`] writes its values (the columns are the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsvFormat {
    /// As EnsōGen writes them (`--save`), so that what reads EnsōGen's file
    /// (Ensō's Python frontend parses every value with `int()`) reads this
    /// one: whole numbers only, rates truncated towards zero in their
    /// column's unit, `mean_rtt_ns` 0 in an interval without timed frames.
    EnsoGen,
    /// Rates with three decimals, the mean RTT with one, and an empty
    /// `mean_rtt_ns` in an interval without timed frames
    /// (`--save-detailed`).
    Detailed,
}

/// Writes samples as EnsōGen's CSV: one header line, one row per interval,
/// nothing else.
#[derive(Debug)]
pub struct CsvWriter<W: Write> {
    w: W,
    rtt: bool,
    format: CsvFormat,
}

impl<W: Write> CsvWriter<W> {
    /// Writes the header.
    pub fn new(mut w: W, rtt: bool, format: CsvFormat) -> io::Result<Self> {
        let mut header = CSV_COLUMNS.join(",");
        if rtt {
            header.push(',');
            header.push_str(RTT_COLUMN);
        }
        writeln!(w, "{header}")?;
        Ok(Self { w, rtt, format })
    }

    /// Writes one row.
    pub fn write(&mut self, s: &Sample) -> io::Result<()> {
        let d = |d: &DirectionSample| match self.format {
            CsvFormat::EnsoGen => format!(
                "{},{},{},{},{}",
                whole(d.goodput_mbps),
                whole(d.tput_mbps),
                whole(d.pkt_rate_kpps),
                d.bytes,
                d.packets
            ),
            CsvFormat::Detailed => format!(
                "{:.3},{:.3},{:.3},{},{}",
                d.goodput_mbps, d.tput_mbps, d.pkt_rate_kpps, d.bytes, d.packets
            ),
        };
        write!(self.w, "{},{}", d(&s.rx), d(&s.tx))?;
        if self.rtt {
            match (self.format, s.mean_rtt_ns) {
                (CsvFormat::EnsoGen, r) => write!(self.w, ",{}", whole(r.unwrap_or(0.0)))?,
                (CsvFormat::Detailed, Some(r)) => write!(self.w, ",{r:.1}")?,
                (CsvFormat::Detailed, None) => write!(self.w, ",")?,
            }
        }
        writeln!(self.w)
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}

/// `x` truncated towards zero to a whole number, as EnsōGen's C++ stores
/// its rates in `uint64_t` (0 for what is not a non-negative number).
fn whole(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 {
        x as u64
    } else {
        0
    }
}

/// One line for a terminal: time, then RX and TX throughput and packet
/// rate, then the interval's mean RTT if there is one.
pub fn live_line(s: &Sample) -> String {
    let mut line = format!(
        "{:>8.3} s  RX {:>7.3} Gb/s {:>8.3} Mpps  TX {:>7.3} Gb/s {:>8.3} Mpps",
        s.at.as_secs_f64(),
        s.rx.tput_mbps / 1e3,
        s.rx.pkt_rate_kpps / 1e3,
        s.tx.tput_mbps / 1e3,
        s.tx.pkt_rate_kpps / 1e3,
    );
    if let Some(r) = s.mean_rtt_ns {
        line.push_str(&format!("  RTT {r:.0} ns"));
    }
    line
}

/// Frames sent and not received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Loss {
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// `sent - received`, or 0 if more came back than were sent.
    pub lost: u64,
    /// Frames received beyond those sent (duplicates or foreign frames).
    pub excess: u64,
    /// `lost / sent` (0 when nothing was sent).
    pub ratio: f64,
}

impl Loss {
    /// Loss of `received` frames out of `sent`.
    pub fn new(sent: u64, received: u64) -> Self {
        let lost = sent.saturating_sub(received);
        Self {
            sent,
            received,
            lost,
            excess: received.saturating_sub(sent),
            ratio: if sent > 0 {
                lost as f64 / sent as f64
            } else {
                0.0
            },
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lost {} of {} ({:.4}%)",
            self.lost,
            self.sent,
            self.ratio * 100.0
        )?;
        if self.excess > 0 {
            write!(f, ", {} unexpected", self.excess)?;
        }
        Ok(())
    }
}

/// Percentiles of a latency histogram, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Smallest.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl fmt::Display for LatencySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RTT min {} ns, p50 {} ns, p90 {} ns, p99 {} ns, p99.9 {} ns, max {} ns, mean {:.1} ns ({} samples)",
            self.min_ns, self.p50_ns, self.p90_ns, self.p99_ns, self.p999_ns, self.max_ns, self.mean_ns, self.count
        )
    }
}

/// Loss and latency on one line, as a run's summary ends.
pub fn summary_line(loss: &Loss, latency: Option<&LatencySummary>) -> String {
    match latency {
        Some(l) if l.count > 0 => format!("{loss}; {l}"),
        _ => loss.to_string(),
    }
}
