//! Scanner tests: counts against a per-pattern reference loop, and
//! independence from how the stream is cut.

use super::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use regex::bytes::{RegexBuilder, RegexSetBuilder};

/// The reference: every pattern applied to every line separately, with the
/// `regex` crate's own byte regexes (same ASCII/byte semantics).
fn reference_counts(log: &[u8], max_line: usize) -> (Vec<u64>, ScanStats) {
    let regexes: Vec<_> = BUILTIN
        .iter()
        .map(|p| RegexBuilder::new(p.regex).unicode(false).build().unwrap())
        .collect();
    let mut counts = vec![0u64; BUILTIN.len()];
    let mut stats = ScanStats::default();
    let body = log.strip_suffix(b"\n").expect("logs end with a newline");
    for line in body.split(|&b| b == b'\n') {
        stats.lines += 1;
        if line.len() > max_line {
            stats.overlong_lines += 1;
            continue;
        }
        let mut any = false;
        for (c, re) in counts.iter_mut().zip(&regexes) {
            if re.is_match(line) {
                *c += 1;
                any = true;
            }
        }
        stats.matched_lines += u64::from(any);
    }
    (counts, stats)
}

/// Feeds `log` as a contiguous stream that grows to each cut in turn, the
/// way a reader of an Ensō pipe sees it: each call gets the unconsumed tail
/// plus the newly arrived bytes.
fn scan_stream(scanner: &mut LogScanner, log: &[u8], cuts: &[usize]) {
    let mut consumed = 0;
    for &end in cuts.iter().chain(std::iter::once(&log.len())) {
        let end = end.max(consumed);
        let used = scanner.scan(&log[consumed..end]);
        assert!(used <= end - consumed);
        consumed += used;
    }
    assert_eq!(
        consumed,
        log.len(),
        "a log ending in a newline is consumed entirely"
    );
}

/// Feeds `log` as separate packets cut at `cuts`.
fn scan_packets(scanner: &mut LogScanner, log: &[u8], cuts: &[usize]) {
    let mut asm = LineAssembler::new(scanner.max_line());
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&log.len())) {
        asm.push(scanner, &log[start..end]);
        assert!(asm.pending() <= scanner.max_line());
        start = end;
    }
    assert_eq!(asm.pending(), 0);
    asm.finish(scanner);
}

fn counts_of(scanner: &LogScanner) -> (Vec<u64>, ScanStats) {
    (scanner.counts().to_vec(), *scanner.stats())
}

#[test]
fn counts_equal_the_reference_loop() {
    let log = generate_log(7, 2 << 20);
    let patterns = LogPatterns::builtin();
    let mut s = LogScanner::new(&patterns);
    assert_eq!(s.scan(&log), log.len());
    let (counts, stats) = reference_counts(&log, DEFAULT_MAX_LINE);
    assert_eq!(s.counts(), &counts[..]);
    assert_eq!(*s.stats(), stats);
    // The log exercises every pattern and has plenty of lines matching none.
    assert!(counts.iter().all(|&c| c > 100), "{counts:?}");
    let share = stats.matched_lines as f64 / stats.lines as f64;
    assert!((0.25..0.35).contains(&share), "matched share {share}");
    assert_eq!(patterns.names().len(), BUILTIN.len());
}

#[test]
fn the_set_engine_agrees_with_regex_set() {
    // Line by line against regex::bytes::RegexSet, which shares the engine
    // but goes through its public, allocating API.
    let log = generate_log(8, 200_000);
    let set = RegexSetBuilder::new(BUILTIN.iter().map(|p| p.regex))
        .unicode(false)
        .build()
        .unwrap();
    let mut s = LogScanner::new(&LogPatterns::builtin());
    for line in log.strip_suffix(b"\n").unwrap().split(|&b| b == b'\n') {
        s.reset();
        s.scan_line(line);
        let ours: Vec<usize> = (0..BUILTIN.len()).filter(|&i| s.counts()[i] == 1).collect();
        let theirs: Vec<usize> = set.matches(line).into_iter().collect();
        assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(line));
    }
}

#[test]
fn scan_consumes_through_the_last_newline_only() {
    let patterns = LogPatterns::builtin();
    let mut s = LogScanner::new(&patterns);
    assert_eq!(s.scan(b""), 0);
    assert_eq!(s.scan(b"no newline yet"), 0);
    assert_eq!(s.scan(b"one\ntwo\nthr"), 8);
    assert_eq!(s.stats().lines, 2);
    assert_eq!(s.scan(b"\n"), 1);
    assert_eq!(s.stats().lines, 3);
}

#[test]
fn every_two_way_split_of_a_small_log_gives_the_same_counts() {
    let log = generate_log(3, 4000);
    let patterns = LogPatterns::builtin();
    let mut whole = LogScanner::new(&patterns);
    whole.scan(&log);
    let expected = counts_of(&whole);
    assert!(expected.1.matched_lines > 5);
    let mut s = LogScanner::new(&patterns);
    for cut in 0..=log.len() {
        s.reset();
        scan_stream(&mut s, &log, &[cut]);
        assert_eq!(counts_of(&s), expected, "stream cut at {cut}");
        s.reset();
        scan_packets(&mut s, &log, &[cut]);
        assert_eq!(counts_of(&s), expected, "packets cut at {cut}");
    }
}

#[test]
fn every_fixed_chunk_size_gives_the_same_counts() {
    let log = generate_log(4, 6000);
    let patterns = LogPatterns::builtin();
    let mut whole = LogScanner::new(&patterns);
    whole.scan(&log);
    let expected = counts_of(&whole);
    let mut s = LogScanner::new(&patterns);
    for size in 1..=300 {
        let cuts: Vec<usize> = (size..log.len()).step_by(size).collect();
        s.reset();
        scan_stream(&mut s, &log, &cuts);
        assert_eq!(counts_of(&s), expected, "stream chunks of {size}");
        s.reset();
        scan_packets(&mut s, &log, &cuts);
        assert_eq!(counts_of(&s), expected, "packets of {size}");
    }
}

#[test]
fn random_splits_of_a_large_log_give_the_same_counts() {
    let log = generate_log(5, 4 << 20);
    let patterns = LogPatterns::builtin();
    let mut whole = LogScanner::new(&patterns);
    whole.scan(&log);
    let expected = counts_of(&whole);
    assert_eq!(expected, reference_counts(&log, DEFAULT_MAX_LINE));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    for max_chunk in [64usize, 1500, 9000] {
        let mut cuts = Vec::new();
        let mut at = 0;
        loop {
            at += rng.gen_range(1..=max_chunk);
            if at >= log.len() {
                break;
            }
            cuts.push(at);
        }
        let mut s = LogScanner::new(&patterns);
        scan_stream(&mut s, &log, &cuts);
        assert_eq!(counts_of(&s), expected, "stream, chunks up to {max_chunk}");
        let mut s = LogScanner::new(&patterns);
        scan_packets(&mut s, &log, &cuts);
        assert_eq!(counts_of(&s), expected, "packets, chunks up to {max_chunk}");
    }
}

#[test]
fn overlong_lines_are_skipped_identically_on_both_paths() {
    // A small limit, and lines of every length around it, some of them
    // detectable events that must not be counted when too long.
    let max_line = 120;
    let mut log = Vec::new();
    let mut g = LogGenerator::with_match_share(9, 0.5);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(10);
    for i in 0..400 {
        g.write_line(&mut log);
        if i % 3 == 0 {
            // Stretch the line just written to a length near or past the limit.
            log.pop();
            let pad = rng.gen_range(0..300);
            log.extend(std::iter::repeat_n(b'x', pad));
            log.push(b'\n');
        }
    }
    let expected = reference_counts(&log, max_line);
    assert!(
        expected.1.overlong_lines > 50 && expected.1.matched_lines > 20,
        "{expected:?}"
    );
    let patterns = LogPatterns::builtin();
    let mut whole = LogScanner::with_max_line(&patterns, max_line);
    assert_eq!(whole.scan(&log), log.len());
    assert_eq!(counts_of(&whole), expected);
    for size in [1usize, 7, 50, 119, 120, 121, 250, 1000] {
        let cuts: Vec<usize> = (size..log.len()).step_by(size).collect();
        let mut s = LogScanner::with_max_line(&patterns, max_line);
        scan_stream(&mut s, &log, &cuts);
        assert_eq!(counts_of(&s), expected, "stream chunks of {size}");
        let mut s = LogScanner::with_max_line(&patterns, max_line);
        scan_packets(&mut s, &log, &cuts);
        assert_eq!(counts_of(&s), expected, "packets of {size}");
    }
}

#[test]
fn plain_lines_at_the_length_limit_are_counted_exactly() {
    // Runs of lines holding no pattern's string, of every length around the
    // limit (exactly at it is not overlong, one more is), between events.
    let max_line = 64;
    let mut log = Vec::new();
    let mut g = LogGenerator::with_match_share(3, 1.0);
    for run in 0..40usize {
        g.write_line(&mut log);
        for k in 0..(run % 7) {
            let len = [
                0,
                1,
                max_line - 1,
                max_line,
                max_line + 1,
                2 * max_line + 1,
                3 * max_line,
            ][(run + k) % 7];
            log.extend(std::iter::repeat_n(b'z', len));
            log.push(b'\n');
        }
    }
    let expected = reference_counts(&log, max_line);
    assert!(expected.1.overlong_lines > 20, "{expected:?}");
    let patterns = LogPatterns::builtin();
    let mut s = LogScanner::with_max_line(&patterns, max_line);
    assert_eq!(s.scan(&log), log.len());
    assert_eq!(counts_of(&s), expected);
}

#[test]
fn non_utf8_bytes_are_scanned() {
    let patterns = LogPatterns::builtin();
    let mut s = LogScanner::new(&patterns);
    let line = b"Mar  3 14:07:21 gw sshd[22]: Invalid user \xff\xfe from 192.0.2.1 port 1\n";
    assert_eq!(s.scan(line), line.len());
    assert_eq!(s.counts()[1], 1);
}

#[test]
fn generator_is_seeded_and_sized() {
    let a = generate_log(1, 10_000);
    assert_eq!(a, generate_log(1, 10_000));
    assert_ne!(a, generate_log(2, 10_000));
    assert!(a.len() >= 10_000 && a.len() < 10_600);
    assert_eq!(a.last(), Some(&b'\n'));
    let none = LogGenerator::with_match_share(1, 0.0).generate(100_000);
    let (counts, stats) = reference_counts(&none, DEFAULT_MAX_LINE);
    assert_eq!(stats.matched_lines, 0, "{counts:?}");
    let all = LogGenerator::with_match_share(1, 1.0).generate(100_000);
    let (_, stats) = reference_counts(&all, DEFAULT_MAX_LINE);
    assert_eq!(stats.matched_lines, stats.lines);
}

#[test]
fn bad_patterns_are_an_error() {
    let bad = [Pattern {
        name: "broken",
        regex: "sshd[",
    }];
    assert!(LogPatterns::new(&bad).is_err());
}

#[test]
fn monitor_scans_udp_payloads_in_order() {
    use crate::packet::{emit_udp_frame, MAX_FRAME_LEN, UDP_PAYLOAD_OFFSET};
    let log = generate_log(12, 300_000);
    let patterns = LogPatterns::builtin();
    let mut whole = LogScanner::new(&patterns);
    whole.scan(&log);
    let ep = crate::kv::WorkloadConfig::default().endpoints;
    let mut m = LogMonitor::new(&patterns);
    let mut frame = [0u8; MAX_FRAME_LEN];
    for piece in log.chunks(MAX_FRAME_LEN - UDP_PAYLOAD_OFFSET) {
        let len = emit_udp_frame(&mut frame, &ep, piece).unwrap();
        assert_eq!(m.process(&frame[..len]), Verdict::Consume);
    }
    assert_eq!(m.process(&frame[..20]), Verdict::Drop);
    assert_eq!(counts_of(m.scanner()), counts_of(&whole));
    assert_eq!(m.stats().dropped, 1);
    // The bytestream entry point gives the same counts.
    let mut m = LogMonitor::new(&patterns);
    assert_eq!(m.scan_stream(&log), log.len());
    assert_eq!(counts_of(m.scanner()), counts_of(&whole));
}

/// Counts of `log` scanned whole with and without the prefilter.
fn both_ways(patterns: &[Pattern], log: &[u8]) -> [(Vec<u64>, ScanStats); 2] {
    let fast = LogPatterns::new(patterns).unwrap();
    let slow = LogPatterns::without_prefilter(patterns).unwrap();
    assert!(!slow.prefiltered());
    [fast, slow].map(|p| {
        let mut s = LogScanner::new(&p);
        assert_eq!(s.scan(log), log.len());
        counts_of(&s)
    })
}

#[test]
fn the_prefilter_agrees_with_scanning_every_line_for_every_service() {
    let log = generate_log(11, 1 << 20);
    assert!(LogPatterns::builtin().prefiltered());
    for service in ["", "sshd", "nginx", "postfix", "apache"] {
        let subset: Vec<Pattern> = BUILTIN
            .iter()
            .copied()
            .filter(|p| p.name.starts_with(service))
            .collect();
        let [fast, slow] = both_ways(&subset, &log);
        assert!(slow.1.matched_lines > 100, "{service}: {slow:?}");
        assert_eq!(fast, slow, "{service:?}");
    }
}

#[test]
fn overlapping_required_strings_are_all_verified() {
    // The strings "abcd" and "cdef" overlap in "abcdef", and "foobar" holds
    // "oba": a search without overlaps reports only one of each pair, so
    // the other pattern must be verified because of it.
    let patterns = [
        Pattern {
            name: "a",
            regex: r"abcd\d",
        },
        Pattern {
            name: "b",
            regex: r"cdef\d",
        },
        Pattern {
            name: "c",
            regex: r"x foobar",
        },
        Pattern {
            name: "d",
            regex: r"oba\S",
        },
    ];
    let log = b"abcdef1 x\nabcd1 cdef2\nz abcdef9\nx foobar\nfoobar\nabcd\n";
    let [fast, slow] = both_ways(&patterns, log);
    assert!(LogPatterns::new(&patterns).unwrap().prefiltered());
    assert_eq!(fast, slow);
    assert_eq!(fast.0, [1, 3, 1, 2]);
    assert_eq!(fast.1.matched_lines, 5);
}

#[test]
fn patterns_without_a_required_string_scan_every_line() {
    let patterns = [
        Pattern {
            name: "alt",
            regex: r"(?:error|fail)\d",
        },
        Pattern {
            name: "lit",
            regex: r"timeout \d+",
        },
    ];
    assert!(!LogPatterns::new(&patterns).unwrap().prefiltered());
    let log = b"fail1\nok\nerror22 timeout 5\n";
    let [fast, slow] = both_ways(&patterns, log);
    assert_eq!(fast, slow);
    assert_eq!(fast.0, [2, 1]);
}

#[test]
fn built_in_patterns_are_verified_from_their_strings() {
    let p = LogPatterns::builtin();
    let pf = p.prefilter.as_ref().expect("prefiltered");
    let unsplit: Vec<&str> = pf
        .splits
        .iter()
        .zip(p.names())
        .filter(|(s, _)| s.is_none())
        .map(|(_, n)| n.as_str())
        .collect();
    assert!(
        unsplit.is_empty(),
        "verified by their whole regex: {unsplit:?}"
    );
}

#[test]
fn patterns_whose_string_cannot_split_them_are_verified_whole() {
    // Each string lies inside a group or a repetition, not directly in the
    // top-level concatenation: these patterns keep their own regex.
    let patterns = [
        Pattern {
            name: "group",
            regex: r"(Failed password) \d+",
        },
        Pattern {
            name: "repeat",
            regex: r"x(?:Invalid)+y",
        },
        Pattern {
            name: "plain",
            regex: r"\d+ from host",
        },
    ];
    let compiled = LogPatterns::new(&patterns).unwrap();
    let pf = compiled.prefilter.as_ref().expect("prefiltered");
    let split: Vec<bool> = pf.splits.iter().map(Option::is_some).collect();
    assert_eq!(split, [false, false, true]);
    let log = b"Failed password 12\nFailed password x\nxInvalidInvalidy\nxInvalid\n7 from host\nfrom host\nFailed password 3 9 from host\n";
    let [fast, slow] = both_ways(&patterns, log);
    assert_eq!(fast, slow);
    assert_eq!(fast.0, [2, 1, 2]);
}
