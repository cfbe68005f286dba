//! A log monitor in the style of AWS CloudWatch Logs filters or fail2ban:
//! scan a stream of log text line by line with a set of regular
//! expressions and count, per pattern, the lines that match.
//!
//! # Design
//!
//! * [`LogPatterns`] compiles a list of [`Pattern`]s (the built-in
//!   fail2ban-style ones in [`patterns::BUILTIN`], or your own) into one
//!   multi-pattern automaton that reports *which* patterns match a line in a
//!   single pass, like `regex::bytes::RegexSet`. It is the very engine behind
//!   `RegexSet` (regex-automata's meta regex, built with the same options),
//!   used directly because `RegexSet::matches` allocates its result on every
//!   call; here the search cache and the result set are allocated once per
//!   scanner and reused (the lazy DFA's state cache still grows while it
//!   warms up on the first lines, then stays within its bound).
//! * [`LogScanner::scan`] is for a contiguous bytestream such as an Ensō
//!   pipe: it processes every complete (`\n`-terminated) line in the text
//!   and returns how many bytes it consumed (up to and including the last
//!   newline). The caller frees exactly that much and leaves the unfinished
//!   tail in place; the next call sees the tail followed by new data, so
//!   nothing is copied.
//! * [`LineAssembler`] is for packetized input, where a line can be split
//!   across packets held in unrelated buffers: it copies the unfinished tail
//!   of one packet into a fixed buffer and completes it with the start of the
//!   next.
//! * [`LogMonitor`] wraps both as an application: a bytestream entry point
//!   and a per-packet entry point that scans UDP payloads.
//! * A line longer than `max_line` bytes (4096 by default) is not matched
//!   and is counted in [`ScanStats::overlong_lines`]; this bounds both the
//!   tail a stream reader must keep and the assembler's buffer. Both paths
//!   classify every line identically, whatever the chunking.
//!
//! # Deviations from the paper's application
//!
//! * The paper's monitor used fail2ban's own filter files; these patterns
//!   are written for this crate in the same spirit (same services and
//!   events) and ship inside it.
//! * Lines are counted per pattern; there is no per-client ban state or
//!   time window (fail2ban's jail), which is policy rather than scanning.

mod generator;
pub mod patterns;

use std::fmt;

use regex_automata::meta::{self, Regex};
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternSet};

use crate::Verdict;
use enso::app::PacketHandler;

pub use generator::{generate_log, LogGenerator};
pub use patterns::{Pattern, BUILTIN};

/// Longest line matched by default.
pub const DEFAULT_MAX_LINE: usize = 4096;

/// A pattern failed to compile.
#[derive(Debug, thiserror::Error)]
#[error("cannot compile log patterns: {0}")]
pub struct PatternError(#[from] Box<meta::BuildError>);

/// A compiled set of patterns.
#[derive(Clone)]
pub struct LogPatterns {
    names: Vec<String>,
    regex: Regex,
}

impl fmt::Debug for LogPatterns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogPatterns")
            .field("names", &self.names)
            .finish()
    }
}

impl LogPatterns {
    /// The built-in patterns ([`patterns::BUILTIN`]).
    pub fn builtin() -> Self {
        Self::new(BUILTIN).expect("built-in patterns compile")
    }

    /// Compiles `patterns`, matched byte-wise with ASCII character classes.
    pub fn new(patterns: &[Pattern]) -> Result<Self, PatternError> {
        let regex = Regex::builder()
            .configure(
                Regex::config()
                    .match_kind(MatchKind::All)
                    .utf8_empty(false)
                    .which_captures(regex_automata::nfa::thompson::WhichCaptures::None),
            )
            .syntax(syntax::Config::new().utf8(false).unicode(false))
            .build_many(&patterns.iter().map(|p| p.regex).collect::<Vec<_>>())
            .map_err(Box::new)?;
        Ok(LogPatterns {
            names: patterns.iter().map(|p| p.name.to_string()).collect(),
            regex,
        })
    }

    /// Pattern names, in count order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Number of patterns.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Line counters of a scanner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScanStats {
    /// Complete lines seen, including overlong ones.
    pub lines: u64,
    /// Lines that matched at least one pattern.
    pub matched_lines: u64,
    /// Lines longer than `max_line`, not matched.
    pub overlong_lines: u64,
}

/// Counts matching lines per pattern.
#[derive(Clone)]
pub struct LogScanner {
    patterns: LogPatterns,
    cache: meta::Cache,
    hits: PatternSet,
    counts: Vec<u64>,
    stats: ScanStats,
    max_line: usize,
    /// Inside an overlong line (already counted) until its newline.
    discarding: bool,
}

impl fmt::Debug for LogScanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogScanner")
            .field("patterns", &self.patterns.names)
            .field("counts", &self.counts)
            .field("stats", &self.stats)
            .field("max_line", &self.max_line)
            .finish()
    }
}

impl LogScanner {
    /// A scanner for `patterns` with the default line limit.
    pub fn new(patterns: &LogPatterns) -> Self {
        Self::with_max_line(patterns, DEFAULT_MAX_LINE)
    }

    /// A scanner that skips lines longer than `max_line` bytes.
    pub fn with_max_line(patterns: &LogPatterns, max_line: usize) -> Self {
        LogScanner {
            cache: patterns.regex.create_cache(),
            hits: PatternSet::new(patterns.len()),
            counts: vec![0; patterns.len()],
            patterns: patterns.clone(),
            stats: ScanStats::default(),
            max_line,
            discarding: false,
        }
    }

    /// The patterns.
    pub fn patterns(&self) -> &LogPatterns {
        &self.patterns
    }

    /// Matching lines per pattern, in [`LogPatterns::names`] order.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Line counters.
    pub fn stats(&self) -> &ScanStats {
        &self.stats
    }

    /// The line length limit.
    pub fn max_line(&self) -> usize {
        self.max_line
    }

    /// Zeroes the counts (the line in progress, if any, is unaffected).
    pub fn reset_counts(&mut self) {
        self.counts.fill(0);
        self.stats = ScanStats::default();
    }

    /// Zeroes the counts and forgets any line in progress: the next byte
    /// scanned starts a new line.
    pub fn reset(&mut self) {
        self.reset_counts();
        self.discarding = false;
    }

    /// Processes every complete line of `text` and returns the bytes
    /// consumed: up to and including the last newline, or all of `text` if
    /// its unfinished tail is already longer than `max_line` (that line is
    /// then skipped through its newline in later calls).
    pub fn scan(&mut self, text: &[u8]) -> usize {
        let mut start = 0;
        if self.discarding {
            match memchr::memchr(b'\n', text) {
                Some(i) => {
                    self.discarding = false;
                    start = i + 1;
                }
                None => return text.len(),
            }
        }
        let base = start;
        for nl in memchr::memchr_iter(b'\n', &text[base..]) {
            let end = base + nl;
            self.scan_line(&text[start..end]);
            start = end + 1;
        }
        if text.len() - start > self.max_line {
            self.start_overlong();
            return text.len();
        }
        start
    }

    /// Classifies one complete line (without its newline).
    #[inline]
    pub fn scan_line(&mut self, line: &[u8]) {
        self.stats.lines += 1;
        if line.len() > self.max_line {
            self.stats.overlong_lines += 1;
            return;
        }
        self.hits.clear();
        self.patterns.regex.which_overlapping_matches_with(
            &mut self.cache,
            &Input::new(line),
            &mut self.hits,
        );
        if self.hits.is_empty() {
            return;
        }
        self.stats.matched_lines += 1;
        for pid in self.hits.iter() {
            self.counts[pid.as_usize()] += 1;
        }
    }

    /// Notes that the line in progress is overlong and skips the rest of it.
    fn start_overlong(&mut self) {
        self.stats.lines += 1;
        self.stats.overlong_lines += 1;
        self.discarding = true;
    }
}

/// Reassembles lines split across packets: holds the unfinished tail of the
/// last packet (at most `max_line` bytes, allocated once).
#[derive(Clone, Debug)]
pub struct LineAssembler {
    partial: Vec<u8>,
}

impl LineAssembler {
    /// An assembler for lines of up to `max_line` bytes (use the scanner's
    /// [`LogScanner::max_line`]).
    pub fn new(max_line: usize) -> Self {
        LineAssembler {
            partial: Vec::with_capacity(max_line),
        }
    }

    /// Bytes of an unfinished line held.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Feeds the next packet's bytes: completes the held line if this
    /// packet ends it, scans the complete lines in place, and keeps the new
    /// unfinished tail.
    pub fn push(&mut self, scanner: &mut LogScanner, chunk: &[u8]) {
        let mut rest = chunk;
        if !self.partial.is_empty() {
            let max = scanner.max_line;
            match memchr::memchr(b'\n', rest) {
                None => {
                    if self.partial.len() + rest.len() > max {
                        self.partial.clear();
                        scanner.start_overlong();
                    } else {
                        self.partial.extend_from_slice(rest);
                    }
                    return;
                }
                Some(i) => {
                    if self.partial.len() + i > max {
                        scanner.stats.lines += 1;
                        scanner.stats.overlong_lines += 1;
                    } else {
                        self.partial.extend_from_slice(&rest[..i]);
                        scanner.scan_line(&self.partial);
                    }
                    self.partial.clear();
                    rest = &rest[i + 1..];
                }
            }
        }
        let used = scanner.scan(rest);
        // scan() leaves at most max_line bytes, so this stays within the
        // capacity reserved at construction.
        self.partial.extend_from_slice(&rest[used..]);
    }

    /// Ends the stream: a held line without a final newline is scanned.
    pub fn finish(&mut self, scanner: &mut LogScanner) {
        if !self.partial.is_empty() {
            scanner.scan_line(&self.partial);
            self.partial.clear();
        }
    }
}

/// Counters of a [`LogMonitor`]'s packet path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MonitorStats {
    /// Frames whose UDP payload was scanned.
    pub frames: u64,
    /// Frames dropped because they were not IPv4/UDP.
    pub dropped: u64,
}

/// The log-monitor application: one ordered log stream, received either as
/// a contiguous bytestream ([`LogMonitor::scan_stream`]) or as UDP packets
/// whose payloads are consecutive pieces of the log
/// ([`LogMonitor::process`]). Packets of different streams must go to
/// different monitors (for example one pipe or queue per sender).
#[derive(Clone, Debug)]
pub struct LogMonitor {
    scanner: LogScanner,
    assembler: LineAssembler,
    stats: MonitorStats,
}

impl LogMonitor {
    /// A monitor for `patterns` with the default line limit.
    pub fn new(patterns: &LogPatterns) -> Self {
        let scanner = LogScanner::new(patterns);
        LogMonitor {
            assembler: LineAssembler::new(scanner.max_line()),
            scanner,
            stats: MonitorStats::default(),
        }
    }

    /// Scans the complete lines of a contiguous bytestream; returns the
    /// bytes consumed (see [`LogScanner::scan`]).
    #[inline]
    pub fn scan_stream(&mut self, text: &[u8]) -> usize {
        self.scanner.scan(text)
    }

    /// Scans the UDP payload of one frame as the next piece of the log. The
    /// monitor is a sink: the frame is consumed (or dropped and counted if
    /// it is not IPv4/UDP).
    #[inline]
    pub fn process(&mut self, frame: &[u8]) -> Verdict {
        match crate::packet::UdpDatagram::parse(frame) {
            Ok(d) => {
                self.stats.frames += 1;
                self.assembler.push(&mut self.scanner, d.payload);
                Verdict::Consume
            }
            Err(_) => {
                self.stats.dropped += 1;
                Verdict::Drop
            }
        }
    }

    /// The scanner and its counts.
    pub fn scanner(&self) -> &LogScanner {
        &self.scanner
    }

    /// Packet-path counters.
    pub fn stats(&self) -> &MonitorStats {
        &self.stats
    }
}

/// The packet path on either interface: each frame's UDP payload is the
/// next piece of the log; frames are consumed.
impl PacketHandler for LogMonitor {
    #[inline]
    fn handle(&mut self, frame: &mut [u8]) -> Verdict {
        self.process(frame)
    }
}

#[cfg(test)]
mod tests;
