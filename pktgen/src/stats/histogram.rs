//! Latency histograms: HDR percentiles of RTTs, and EnsōGen's RTT
//! histogram file in timestamp cycles.

use std::io::{self, BufRead, Write};

use hdrhistogram::Histogram;

use super::LatencySummary;

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
