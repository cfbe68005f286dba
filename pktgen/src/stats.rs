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
use std::io::{self, BufRead, Write};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::rate::ETH_OVERHEAD;
use crate::serde_util::{duration_ns, option_duration_ns};

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

/// Why an RTT histogram file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistFileError {
    /// Reading failed.
    #[error("read error: {0}")]
    Io(#[from] io::Error),
    /// A line that is not `rtt_ns,count`.
    #[error("line {0}: expected rtt_ns,count")]
    BadLine(usize),
}

/// An HDR histogram of latencies in ns: 3 significant digits (values are
/// exact up to 2048 ns and within 0.1% above), from 0 to 60 s. Larger values
/// are counted at 60 s and reported by [`LatencyHistogram::saturated`].
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
    saturated: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// Largest value tracked, ns.
    pub const MAX_NS: u64 = 60_000_000_000;

    /// An empty histogram.
    pub fn new() -> Self {
        let h = Histogram::new_with_bounds(1, Self::MAX_NS, 3)
            .unwrap_or_else(|e| unreachable!("constant bounds are valid: {e}"));
        Self { h, saturated: 0 }
    }

    /// Records one latency.
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Records `n` equal latencies.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if ns > Self::MAX_NS {
            self.saturated += n;
        }
        self.h.saturating_record_n(ns.min(Self::MAX_NS), n);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for v in other.h.iter_recorded() {
            self.h
                .saturating_record_n(v.value_iterated_to(), v.count_at_value());
        }
        self.saturated += other.saturated;
    }

    /// Forgets every value.
    pub fn reset(&mut self) {
        self.h.reset();
        self.saturated = 0;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// Values that were above [`Self::MAX_NS`].
    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    /// The latency at quantile `q` (0 to 1).
    pub fn quantile(&self, q: f64) -> u64 {
        self.h.value_at_quantile(q)
    }

    /// Count, min, mean, p50, p90, p99, p99.9 and max.
    pub fn summary(&self) -> LatencySummary {
        if self.h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.h.len(),
            min_ns: self.h.min(),
            mean_ns: self.h.mean(),
            p50_ns: self.quantile(0.50),
            p90_ns: self.quantile(0.90),
            p99_ns: self.quantile(0.99),
            p999_ns: self.quantile(0.999),
            max_ns: self.h.max(),
        }
    }

    /// Writes EnsōGen's RTT histogram file: one `rtt_ns,count` line per
    /// recorded bucket, in increasing order, no header. Above 2048 ns a
    /// bucket is named by the largest value it holds.
    pub fn write_rtt_hist<W: Write>(&self, mut w: W) -> io::Result<()> {
        for v in self.h.iter_recorded() {
            writeln!(w, "{},{}", v.value_iterated_to(), v.count_at_value())?;
        }
        w.flush()
    }

    /// Reads an RTT histogram file (ours or EnsōGen's).
    pub fn read_rtt_hist<R: BufRead>(r: R) -> Result<Self, HistFileError> {
        let mut h = Self::new();
        for (i, line) in r.lines().enumerate() {
            let line = line?;
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            let (v, n) = t
                .split_once(',')
                .and_then(|(v, n)| Some((v.trim().parse().ok()?, n.trim().parse().ok()?)))
                .ok_or(HistFileError::BadLine(i + 1))?;
            h.record_n(v, n);
        }
        Ok(h)
    }
}

/// ns per cycle of the real NIC's timestamp clock (200 MHz), the unit of
/// EnsōGen's histogram array.
pub const NS_PER_TIMESTAMP_CYCLE: u64 = 5;

/// EnsōGen's default `--rtt-hist-offset`, cycles.
pub const DEFAULT_HIST_OFFSET: u32 = 400;
/// EnsōGen's default `--rtt-hist-len`, cycles.
pub const DEFAULT_HIST_LEN: u32 = 1_000_000;
/// Largest `--rtt-hist-len` (an array of 8 B counts, allocated lazily).
pub const MAX_HIST_LEN: u32 = 100_000_000;

/// EnsōGen's RTT histogram (`--rtt-hist`): exact counts per 5 ns cycle in
/// an array covering `offset..offset + len` cycles, and the RTTs outside
/// it counted apart. Its file holds one `rtt_ns,count` line per cycle with
/// a count, those of the array first in increasing order, then those
/// outside it (EnsōGen writes these in no order; here in increasing order
/// too), RTTs in ns as multiples of 5.
#[derive(Clone, Debug)]
pub struct CycleHistogram {
    offset: u64,
    counts: Vec<u64>,
    outside: std::collections::BTreeMap<u64, u64>,
}

impl CycleHistogram {
    /// An empty histogram whose array covers `offset..offset + len` cycles
    /// (`len` at most [`MAX_HIST_LEN`]).
    pub fn new(offset: u32, len: u32) -> Self {
        Self {
            offset: u64::from(offset),
            counts: vec![0; len.min(MAX_HIST_LEN) as usize],
            outside: Default::default(),
        }
    }

    /// Records one RTT, in ns (rounded down to whole cycles, as the NIC
    /// counts them).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let cycle = ns / NS_PER_TIMESTAMP_CYCLE;
        match cycle
            .checked_sub(self.offset)
            .and_then(|i| self.counts.get_mut(i as usize))
        {
            Some(n) => *n += 1,
            None => *self.outside.entry(cycle).or_insert(0) += 1,
        }
    }

    /// RTTs recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.outside.values().sum::<u64>()
    }

    /// Distinct cycles recorded outside the array (EnsōGen warns of them
    /// as "rtt hist entries in backup").
    pub fn outside_entries(&self) -> usize {
        self.outside.len()
    }

    /// The array's range, ns.
    pub fn window_ns(&self) -> std::ops::Range<u64> {
        let c = NS_PER_TIMESTAMP_CYCLE;
        self.offset * c..(self.offset + self.counts.len() as u64) * c
    }

    /// Writes the histogram file.
    pub fn write<W: Write>(&self, mut w: W) -> io::Result<()> {
        let c = NS_PER_TIMESTAMP_CYCLE;
        for (i, &n) in self.counts.iter().enumerate() {
            if n != 0 {
                writeln!(w, "{},{n}", (i as u64 + self.offset) * c)?;
            }
        }
        for (&cycle, &n) in &self.outside {
            writeln!(w, "{},{n}", cycle * c)?;
        }
        w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(rx: (u64, u64), tx: (u64, u64), rtt: (u64, u64)) -> Counters {
        Counters {
            rx_bytes: rx.0,
            rx_packets: rx.1,
            tx_bytes: tx.0,
            tx_packets: tx.1,
            rtt_sum_ns: rtt.0,
            rtt_samples: rtt.1,
        }
    }

    #[test]
    fn samples_are_per_interval_and_totals_cumulative() {
        let mut r = Recorder::new();
        // 1 s of 1 M frames of 60 B each way: 480 Mb/s goodput, 672 tput.
        let c1 = counters(
            (60_000_000, 1_000_000),
            (60_000_000, 1_000_000),
            (5_000_000, 1000),
        );
        let s = *r.record(c1, Duration::from_secs(1));
        assert_eq!(s.rx.goodput_mbps, 480.0);
        assert_eq!(s.rx.tput_mbps, 672.0);
        assert_eq!(s.rx.pkt_rate_kpps, 1000.0);
        assert_eq!(s.mean_rtt_ns, Some(5000.0));
        // Half a second more, at half the rate: same rates, running totals.
        let c2 = counters(
            (75_000_000, 1_250_000),
            (75_000_000, 1_250_000),
            (5_000_000, 1000),
        );
        let s = *r.record(c2, Duration::from_millis(1500));
        assert_eq!(s.interval, Duration::from_millis(500));
        assert_eq!(s.tx.goodput_mbps, 240.0);
        assert_eq!(s.tx.pkt_rate_kpps, 500.0);
        assert_eq!((s.tx.bytes, s.tx.packets), (75_000_000, 1_250_000));
        assert_eq!(s.mean_rtt_ns, None);
        let t = r.totals();
        assert_eq!(t.rx.packets, 1_250_000);
        assert!((t.rx.pkt_rate_kpps - 1_250_000.0 / 1.5 / 1e3).abs() < 1e-9);
        assert_eq!(t.mean_rtt_ns, Some(5000.0));
        assert_eq!(r.samples().len(), 2);
        // Throughput is goodput plus 24 B per frame.
        for s in r.samples() {
            let extra = s.rx.pkt_rate_kpps * 1e3 * 24.0 * 8.0 / 1e6;
            assert!((s.rx.tput_mbps - s.rx.goodput_mbps - extra).abs() < 1e-6);
        }
    }

    #[test]
    fn the_drain_does_not_dilute_the_last_interval_or_the_totals() {
        let ms = Duration::from_millis;
        let mut r = Recorder::new();
        // 1 M frames of 60 B each way in the first second.
        r.record(
            counters((60_000_000, 1_000_000), (60_000_000, 1_000_000), (0, 0)),
            ms(1000),
        );
        // 50 k more sent by 1.05 s, received by 1.1 s; the drain waits until
        // 1.2 s.
        let end = counters((63_000_000, 1_050_000), (63_000_000, 1_050_000), (0, 0));
        let span = TrafficSpan {
            first_sent: Some(ms(0)),
            last_sent: Some(ms(1050)),
            last_received: Some(ms(1100)),
        };
        let s = *r.finish(end, ms(1200), span).unwrap();
        assert_eq!((s.at, s.interval), (ms(1200), ms(200)));
        assert_eq!((s.send_ns, s.receive_ns), (Some(ms(50)), Some(ms(100))));
        // 50 k frames in 50 ms and in 100 ms, not in 200 ms.
        assert!((s.tx.pkt_rate_kpps - 1000.0).abs() < 1e-6, "{s:?}");
        assert!((s.rx.pkt_rate_kpps - 500.0).abs() < 1e-6, "{s:?}");
        let t = r.totals();
        assert_eq!((t.at, t.interval), (ms(1200), ms(1200)));
        assert_eq!((t.send_ns, t.receive_ns), (Some(ms(1050)), Some(ms(1100))));
        assert!((t.tx.pkt_rate_kpps - 1000.0).abs() < 1e-6, "{t:?}");
        assert!((t.rx.pkt_rate_kpps - 1_050_000.0 / 1.1 / 1e3).abs() < 1e-6);
        let j = serde_json::to_value(t).unwrap();
        assert_eq!(j["send_ns"], 1_050_000_000u64);
        assert_eq!(j["receive_ns"], 1_100_000_000u64);
        assert_eq!(j["t_ns"], 1_200_000_000u64);
        assert_eq!(serde_json::from_value::<Sample>(j).unwrap(), t);
        // Interval samples carry neither.
        let j = serde_json::to_value(r.samples()[0]).unwrap();
        assert!(j.get("send_ns").is_none() && j.get("receive_ns").is_none());
        // Frames sent from 0.2 s on: the send time starts there.
        let span = TrafficSpan {
            first_sent: Some(ms(200)),
            ..span
        };
        assert_eq!(span.send_time(), ms(850));
        assert_eq!(TrafficSpan::default().send_time(), Duration::ZERO);
        // Nothing after the last sample: nothing recorded.
        let mut r = Recorder::new();
        r.record(end, ms(1200));
        assert!(r.finish(end, ms(1200), span).is_none());
        assert_eq!(r.totals().send_ns, Some(ms(850)));
    }

    #[test]
    fn csv_has_ensogen_columns() {
        let mut r = Recorder::new();
        r.record(
            counters((600, 10), (1200, 20), (1000, 10)),
            Duration::from_secs(1),
        );
        r.record(
            counters((600, 10), (1200, 20), (1000, 10)),
            Duration::from_secs(2),
        );
        let mut w = CsvWriter::new(Vec::new(), true, CsvFormat::Detailed).unwrap();
        for s in r.samples() {
            w.write(s).unwrap();
        }
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "rx_goodput_mbps,rx_tput_mbps,rx_pkt_rate_kpps,rx_bytes,rx_packets,\
             tx_goodput_mbps,tx_tput_mbps,tx_pkt_rate_kpps,tx_bytes,tx_packets,mean_rtt_ns"
        );
        assert_eq!(
            lines[1],
            "0.005,0.007,0.010,600,10,0.010,0.013,0.020,1200,20,100.0"
        );
        // No frames timed in the second interval: empty RTT field.
        assert_eq!(
            lines[2],
            "0.000,0.000,0.000,600,10,0.000,0.000,0.000,1200,20,"
        );
        let mut w = CsvWriter::new(Vec::new(), false, CsvFormat::Detailed).unwrap();
        w.write(&r.samples()[0]).unwrap();
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_COLUMNS.join(","));
        assert_eq!(
            lines[1],
            "0.005,0.007,0.010,600,10,0.010,0.013,0.020,1200,20"
        );
    }

    #[test]
    fn ensogen_csv_holds_whole_numbers_in_ensogen_units() {
        let mut r = Recorder::new();
        // 1.5 s: 1 000 000 frames of 60 B received, 1 000 001 sent, RTTs
        // summing to 1 234 567.8 ns per frame.
        r.record(
            counters(
                (60_000_000, 1_000_000),
                (60_000_060, 1_000_001),
                (1_234_567_800_000, 1_000_000),
            ),
            Duration::from_millis(1500),
        );
        r.record(
            counters(
                (60_000_000, 1_000_000),
                (60_000_060, 1_000_001),
                (1_234_567_800_000, 1_000_000),
            ),
            Duration::from_millis(2500),
        );
        let mut w = CsvWriter::new(Vec::new(), true, CsvFormat::EnsoGen).unwrap();
        for s in r.samples() {
            w.write(s).unwrap();
        }
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            [&CSV_COLUMNS[..], &[RTT_COLUMN]].concat().join(",")
        );
        // RX: 320 Mb/s of goodput, 448 with 24 B a frame, 666.67 kpps;
        // TX: 320.00032 Mb/s, 448.000448 and 666.667333 kpps; RTT 1234567.8.
        assert_eq!(
            lines[1],
            "320,448,666,60000000,1000000,320,448,666,60000060,1000001,1234567"
        );
        // Nothing in the second interval: zero rates, zero RTT, the totals.
        assert_eq!(lines[2], "0,0,0,60000000,1000000,0,0,0,60000060,1000001,0");
        for line in &lines[1..] {
            for v in line.split(',') {
                v.parse::<u64>().unwrap();
            }
        }
    }

    #[test]
    fn cycle_histogram_is_shaped_as_ensogens_file() {
        // The array covers cycles 10..20, i.e. 50..100 ns.
        let mut h = CycleHistogram::new(10, 10);
        assert_eq!(h.window_ns(), 50..100);
        for ns in [52, 54, 55, 99, 100, 49, 7, 1_000_000, 1_000_004] {
            h.record(ns);
        }
        assert_eq!(h.count(), 9);
        assert_eq!(h.outside_entries(), 4);
        let mut out = Vec::new();
        h.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "50,2\n55,1\n95,1\n5,1\n45,1\n100,1\n1000000,2\n"
        );
        // EnsōGen's defaults: 2 us up to 5 ms.
        let h = CycleHistogram::new(DEFAULT_HIST_OFFSET, DEFAULT_HIST_LEN);
        assert_eq!(h.window_ns(), 2_000..5_002_000);
    }

    #[test]
    fn live_line_is_one_line() {
        let s = Sample::between(
            &Counters::default(),
            &counters(
                (60_000_000, 1_000_000),
                (60_000_000, 1_000_000),
                (2_000_000, 1000),
            ),
            Duration::from_secs(1),
            Duration::from_secs(3),
        );
        let l = live_line(&s);
        assert!(!l.contains('\n'));
        assert!(l.contains("RX   0.672 Gb/s    1.000 Mpps"), "{l}");
        assert!(l.ends_with("RTT 2000 ns"), "{l}");
    }

    #[test]
    fn latency_percentiles_and_loss() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000u64 {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!((s.count, s.min_ns, s.max_ns), (1000, 1, 1000));
        assert_eq!(
            (s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns),
            (500, 900, 990, 999)
        );
        assert!((s.mean_ns - 500.5).abs() < 1e-9);
        // Large values are within 0.1%.
        h.record(1_234_567);
        assert!(h.summary().max_ns.abs_diff(1_234_567) <= 1235);
        h.record(u64::MAX);
        assert_eq!(h.saturated(), 1);
        assert_eq!(LatencyHistogram::new().summary(), LatencySummary::default());
        let loss = Loss::new(1000, 990);
        assert_eq!((loss.lost, loss.excess), (10, 0));
        assert!((loss.ratio - 0.01).abs() < 1e-12);
        let line = summary_line(&loss, Some(&s));
        assert!(
            line.starts_with("lost 10 of 1000 (1.0000%); RTT min 1 ns, p50 500 ns"),
            "{line}"
        );
        assert_eq!(Loss::new(5, 7).excess, 2);
        assert_eq!(Loss::new(0, 0).ratio, 0.0);
    }

    #[test]
    fn rtt_hist_file_round_trips_and_merges() {
        let mut a = LatencyHistogram::new();
        a.record_n(500, 3);
        a.record_n(1005, 2);
        a.record(10);
        let mut file = Vec::new();
        a.write_rtt_hist(&mut file).unwrap();
        assert_eq!(
            String::from_utf8(file.clone()).unwrap(),
            "10,1\n500,3\n1005,2\n"
        );
        let b = LatencyHistogram::read_rtt_hist(file.as_slice()).unwrap();
        assert_eq!(b.summary(), a.summary());
        let mut c = LatencyHistogram::new();
        c.record(20);
        c.merge(&b);
        assert_eq!(c.count(), 7);
        assert_eq!(c.summary().min_ns, 10);
        assert!(matches!(
            LatencyHistogram::read_rtt_hist(&b"10,1\nnope\n"[..]),
            Err(HistFileError::BadLine(2))
        ));
        c.reset();
        assert!(c.is_empty());
    }
}
