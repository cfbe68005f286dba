//! The log monitor's matching alone, without a NIC: the built-in patterns
//! over a generated log held in memory, scanned with the literal prefilter
//! and with the multi-pattern automaton on every line, and, as the
//! packetized interface delivers it, cut into payloads (`--packet-bytes`)
//! whose split lines are reassembled. All must count the same; the rates
//! show what the scan costs per line and per byte, and what cutting the
//! text into packets adds.
//!
//! `cargo run --release -p enso-apps --example logscan_rate -- --mib 32`
//! (`--event-share 0` for a log with no detectable events; `--json`).
//! Under valgrind, `--toggle-collect='*LogScanner::scan*'` counts the scan
//! only.

use std::time::Instant;

use clap::Parser;
use enso_apps::logmon::{builtin_for, LineAssembler, LogGenerator, LogPatterns, LogScanner};

#[derive(Parser)]
struct Args {
    /// MiB of log to scan.
    #[arg(long, default_value_t = 32)]
    mib: usize,
    /// Share of lines that are events the patterns detect (0..=1).
    #[arg(long, default_value_t = 0.3)]
    event_share: f64,
    /// Services whose patterns are matched (default: all).
    #[arg(long, value_delimiter = ',')]
    services: Vec<String>,
    /// Also feed the prefiltered scanner the log cut into payloads of this
    /// many bytes, as the packetized interface delivers it (lines split
    /// across packets reassembled by a `LineAssembler`); 0: do not.
    #[arg(long, default_value_t = 1024)]
    packet_bytes: usize,
    /// One JSON object per engine instead of text.
    #[arg(long)]
    json: bool,
}

fn main() {
    let a: Args = nic_emu::args::parse_or_exit("logscan_rate");
    if !(0.0..=1.0).contains(&a.event_share) {
        eprintln!("error: --event-share must be within 0..=1");
        std::process::exit(2);
    }
    let patterns = match builtin_for(&a.services) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let log = LogGenerator::with_match_share(7, a.event_share).generate(a.mib.max(1) << 20);
    let prefiltered = LogPatterns::new(&patterns).expect("built-in patterns compile");
    let mut engines = vec![
        ("prefilter", prefiltered.clone(), 0),
        (
            "automaton",
            LogPatterns::without_prefilter(&patterns).expect("built-in patterns compile"),
            0,
        ),
    ];
    if a.packet_bytes > 0 {
        engines.push(("packets", prefiltered, a.packet_bytes));
    }
    let mut first: Option<Vec<u64>> = None;
    for (name, compiled, packet) in engines {
        let mut s = LogScanner::new(&compiled);
        // Warm the scanner (and the caches of any lazy automaton) first.
        s.scan(&log[..log.len().min(1 << 20)]);
        s.reset();
        let t = Instant::now();
        if packet == 0 {
            s.scan(&log);
        } else {
            // The packetized path: each payload on its own, the line split
            // between two of them reassembled by copying.
            let mut asm = LineAssembler::new(s.max_line());
            for chunk in log.chunks(packet) {
                asm.push(&mut s, chunk);
            }
            asm.finish(&mut s);
        }
        let secs = t.elapsed().as_secs_f64();
        let lines = s.stats().lines;
        let (ns_line, gbps) = (
            secs * 1e9 / lines as f64,
            log.len() as f64 * 8.0 / secs / 1e9,
        );
        if a.json {
            let o = serde_json::json!({
                "engine": name, "bytes": log.len(), "lines": lines,
                "matched_lines": s.stats().matched_lines, "ns_per_line": ns_line,
                "gbps": gbps, "counts": s.counts(),
            });
            println!("{o}");
        } else {
            println!(
                "{name:>9}: {lines} lines, {:.1} ns/line, {gbps:.2} Gb/s, {} matched",
                ns_line,
                s.stats().matched_lines
            );
        }
        match &first {
            None => first = Some(s.counts().to_vec()),
            Some(c) if c.as_slice() != s.counts() => {
                eprintln!(
                    "error: the two engines counted differently: {c:?} vs {:?}",
                    s.counts()
                );
                std::process::exit(1);
            }
            Some(_) => {}
        }
    }
}
