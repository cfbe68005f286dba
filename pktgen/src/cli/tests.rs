//! Tests of parsing and validating command lines.

use std::io::Write as _;

use nic_emu::cores::core_list;

use super::*;
use crate::rate::RateLimit;

fn run(args: &[&str]) -> Result<Config, CliError> {
    parse(std::iter::once("pktgen").chain(args.iter().copied()))
}

fn err(args: &[&str]) -> String {
    let e = run(args).expect_err("should be refused");
    let m = e.message();
    assert!(!m.is_empty() && !m.contains('\n'), "{m:?}");
    m
}

/// A tiny valid pcap with one 64 B frame.
fn pcap_file(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("one.pcap");
    let mut w = pcap::CaptureWriter::create(&path).unwrap();
    let tf = nic_emu::testframe::TestFrames::new(1, 0);
    let mut f = [0u8; 64];
    let n = tf.build(nic_emu::testframe::FrameKind::Ipv4Udp, 0, 0, 60, &mut f);
    w.write(Duration::ZERO, &f[..n]).unwrap();
    w.finish().unwrap();
    path
}

#[test]
fn ensogen_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = pcap_file(&dir);
    let ps = p.to_str().unwrap();
    let c = run(&[
        ps,
        "744",
        "1000",
        "--count",
        "1000000",
        "--rtt-hist",
        "h.txt",
        "--save",
        "s.csv",
        "--pipes",
        "2",
        "--stats-delay",
        "500",
    ])
    .unwrap();
    assert_eq!(c.traffic, TrafficSource::Pcap { path: p.clone() });
    assert_eq!(
        c.rate,
        Rate::Flits(RateLimit {
            num: 744,
            den: 1000
        })
    );
    assert_eq!(c.count, Some(1_000_000));
    assert!(c.rtt, "--rtt-hist implies --rtt");
    assert_eq!(c.queues, 2);
    assert_eq!(c.stats_delay, Duration::from_millis(500));
    assert_eq!(c.timestamp_offset, 18);
    assert!(c.zero_loss.is_none());
}

#[test]
fn synthetic_defaults_and_options() {
    let c = run(&[]).unwrap();
    assert_eq!(c.rate, Rate::line());
    assert_eq!(c.queues, 4);
    assert_eq!(c.stats_delay, Duration::from_secs(1));
    let TrafficSource::Synthetic(spec) = &c.traffic else {
        panic!("synthetic expected");
    };
    assert_eq!(spec, &TrafficSpec::default());
    let c = run(&[
        "--rate",
        "5Mpps",
        "--size",
        "imix",
        "--flows",
        "100",
        "--src-ip",
        "10.0.0.0/16",
        "--dst-port",
        "80-90",
        "--duration",
        "2.5s",
        "--timestamp-offset",
        "60",
    ])
    .unwrap();
    assert_eq!(c.rate, Rate::Pps(5e6));
    assert_eq!(c.duration, Some(Duration::from_millis(2500)));
    assert_eq!(c.timestamp_offset, 60);
    let TrafficSource::Synthetic(spec) = &c.traffic else {
        panic!("synthetic expected");
    };
    assert_eq!(spec.sizes, SizeSpec::imix());
    assert_eq!(spec.flows, Some(100));
    assert_eq!(spec.src_ip.unwrap().count(), 65536);
}

#[test]
fn zero_loss_options() {
    let c = run(&["--zero-loss"]).unwrap();
    let z = c.zero_loss.unwrap();
    assert_eq!(z.sizes, RFC2544_SIZES.to_vec());
    assert_eq!(z.max_rate_gbps, 100.0);
    assert_eq!(z.precision_gbps, 0.1);
    assert_eq!(z.trial, Duration::from_secs(1));
    assert_eq!(z.warmup, Duration::from_secs(5));
    // --help states these defaults.
    let help = <Args as clap::CommandFactory>::command()
        .render_help()
        .to_string();
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "precision, Gb/s (default 0.1)",
        "trial length, ms (default 1000,",
        "before each size, ms (default 5000,",
    ] {
        assert!(flat.contains(want), "{want}: {help}");
    }
    let c = run(&[
        "--zero-loss",
        "--rate",
        "40G",
        "--precision",
        "0.5",
        "--trial-ms",
        "200",
        "--warmup-ms",
        "0",
        "--sizes",
        "64,1518",
    ])
    .unwrap();
    let z = c.zero_loss.unwrap();
    assert_eq!(z.sizes, vec![64, 1518]);
    assert_eq!(z.max_rate_gbps, 40.0);
    assert_eq!(
        (z.precision_gbps, z.trial, z.warmup),
        (0.5, Duration::from_millis(200), Duration::ZERO)
    );
    // One mix searched as a whole.
    let z = run(&["--zero-loss", "--size", "imix"])
        .unwrap()
        .zero_loss
        .unwrap();
    assert!(z.sizes.is_empty());
}

#[test]
fn wrong_combinations_get_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = pcap_file(&dir);
    let ps = p.to_str().unwrap();
    assert!(err(&[ps, "744"]).contains("RATE_NUM needs RATE_DEN"));
    assert!(err(&["744", "1000"]).contains("'744' is not a pcap file"));
    assert!(err(&[ps, "744", "1000", "--rate", "10G"]).contains("give the rate once"));
    assert!(err(&[ps, "0", "1000"]).contains("RATE_NUM must be at least 1"));
    assert!(err(&[ps, "2000", "1000"]).contains("above one flit per cycle"));
    assert!(err(&[ps, "--size", "64"]).contains("--size does not apply to pcap replay"));
    assert!(err(&[ps, "--dst-ip", "1.2.3.4"]).contains("--dst-ip does not apply"));
    assert!(err(&["--sizes", "64"]).contains("--sizes needs --zero-loss"));
    assert!(err(&["--precision", "1"]).contains("--precision needs --zero-loss"));
    assert!(err(&["--zero-loss", "--count", "5"]).contains("--count does not apply to --zero-loss"));
    assert!(err(&["--zero-loss", "--rate", "5Mpps"]).contains("bits per second"));
    assert!(err(&["--zero-loss", "--size", "64", "--sizes", "64"]).contains("not both"));
    assert!(err(&["--zero-loss", "--sizes", "64,9000"]).contains("9000"));
    assert!(err(&["--zero-loss", "--precision", "0"]).contains("precision"));
    assert!(err(&["--queues", "0"]).contains("--queues must be 1..=8192"));
    assert!(err(&["--stats-delay", "0"]).contains("--stats-delay"));
    assert!(err(&["--flows", "0"]).contains("number of flows"));
    assert!(err(&["--count", "0"]).contains("--count must be at least 1"));
}

#[test]
fn bad_values_get_one_line_errors() {
    let m = err(&["--timestamp-offset", "61"]);
    assert!(
        m.contains("--timestamp-offset") && m.contains("0..=60"),
        "{m}"
    );
    assert!(err(&["--timestamp-offset", "-1"]).contains("-1"));
    assert!(err(&["--timestamp-offset", "x"]).contains("--timestamp-offset"));
    assert!(err(&["--rate", "10"]).contains("no unit"));
    assert!(err(&["--rate", "fast"]).contains("bad number"));
    assert!(err(&["--size", "10"]).contains("outside 64..=1540"));
    assert!(err(&["--src-ip", "10.0.0.1/24"]).contains("did you mean 10.0.0.0/24"));
    assert!(err(&["--dst-port", "99999"]).contains("bad port"));
    assert!(err(&["--duration", "5 parsecs"]).contains("unknown unit"));
    assert!(err(&["--bogus"]).contains("--bogus"));
    assert!(err(&["a.pcap", "1", "2", "3"]).contains("unexpected argument"));
}

#[test]
fn zero_loss_refuses_what_only_a_run_makes() {
    for (flag, why) in [
        ("--capture", "it captures no frames"),
        ("--save", "it writes no per-interval CSV"),
        ("--rtt-hist", "it measures no RTT"),
    ] {
        assert_eq!(
            err(&["--zero-loss", flag, "out.file"]),
            format!("{flag} does not apply to --zero-loss ({why})")
        );
        // Without --zero-loss they are fine.
        assert!(run(&[flag, "out.file"]).is_ok(), "{flag}");
    }
    assert_eq!(
        err(&["--zero-loss", "--rtt"]),
        "--rtt does not apply to --zero-loss (it measures no RTT)"
    );
}

#[test]
fn the_timestamp_must_fit_in_the_smallest_frame() {
    assert!(check_stamp_fits(56, 60).is_ok());
    assert!(check_stamp_fits(0, 4).is_ok());
    assert_eq!(
        check_stamp_fits(57, 60).unwrap_err().to_string(),
        "--timestamp-offset 57 puts the 4-byte timestamp at bytes 57..61, past the end \
         of the smallest frame sent (60 B without FCS); give at most 56"
    );
    assert_eq!(
        check_stamp_fits(0, 3).unwrap_err().to_string(),
        "--timestamp-offset 0 puts the 4-byte timestamp at bytes 0..4, past the end \
         of the smallest frame sent (3 B without FCS); no offset suits every frame \
         sent: send the smaller frames separately, or leave out --rtt"
    );
    // Synthetic sizes are checked with the command line, with --rtt or
    // --rtt-hist; without them the offset is unused.
    for off in ["59", "60"] {
        let m = err(&["--rtt", "--timestamp-offset", off]);
        assert!(m.contains("(60 B without FCS); give at most 38"), "{m}");
        let m = err(&[
            "--rtt-hist",
            "h",
            "--timestamp-offset",
            off,
            "--size",
            "imix",
        ]);
        assert!(m.contains("(60 B without FCS)"), "{m}");
        assert!(run(&["--rtt", "--timestamp-offset", off, "--size", "128"]).is_ok());
        assert!(run(&["--timestamp-offset", off]).is_ok());
    }
    assert!(err(&["--rtt", "--timestamp-offset", "60", "--size", "64-1518"]).contains("60 B"));
    // Nor may it cover the synthetic frames' test payload (bytes
    // 42..59), whatever the size.
    for off in ["39", "45", "55", "56", "58"] {
        for size in ["64", "1518"] {
            let m = err(&["--rtt", "--timestamp-offset", off, "--size", size]);
            assert_eq!(
                m,
                format!(
                    "--timestamp-offset {off} puts the 4-byte timestamp at bytes {off}..{}, \
                     over the test payload (bytes 42..59: magic, sequence number, flow and \
                     the echo byte the echo server increments), which returned frames are \
                     recognised and checked by; give at most 38, or at least 59 with \
                     frames of 67 B or more with FCS",
                    off.parse::<u32>().unwrap() + 4
                )
            );
        }
        assert!(
            run(&["--timestamp-offset", off]).is_ok(),
            "unused without --rtt"
        );
    }
    assert!(run(&["--rtt", "--timestamp-offset", "38"]).is_ok());
    assert!(run(&["--rtt", "--timestamp-offset", "59", "--size", "67"]).is_ok());
    let m = err(&["--rtt", "--timestamp-offset", "59", "--size", "66"]);
    assert!(m.ends_with("(62 B without FCS); give at most 38"), "{m}");
}

#[test]
fn search_times_are_bounded() {
    let c = run(&[
        "--zero-loss",
        "--trial-ms",
        "3600000",
        "--warmup-ms",
        "3600000",
    ])
    .unwrap();
    let z = c.zero_loss.unwrap();
    assert_eq!(
        (z.trial, z.warmup),
        (Duration::from_secs(3600), Duration::from_secs(3600))
    );
    for v in ["3600001", "18446744073709551615"] {
        assert_eq!(
            err(&["--zero-loss", "--warmup-ms", v]),
            format!("--warmup-ms must be 0..=3600000 (an hour), not {v}")
        );
        assert_eq!(
            err(&["--zero-loss", "--trial-ms", v]),
            format!("--trial-ms must be 1..=3600000 (an hour), not {v}")
        );
    }
    assert_eq!(
        err(&["--zero-loss", "--trial-ms", "0"]),
        "--trial-ms must be 1..=3600000 (an hour), not 0"
    );
}

#[test]
fn negative_numbers_reach_validation() {
    assert_eq!(whole::<u64>("7"), Ok(7));
    assert_eq!(whole::<u64>("-1"), Err("must not be negative".to_string()));
    assert!(whole::<u8>("300")
        .unwrap_err()
        .starts_with("not a whole number in range"));
    for (args, want) in [
        (&["--rate", "-5G"][..], "'-5G'"),
        (
            &["--count", "-1"][..],
            "invalid value '-1' for '--count <N>': must not be negative",
        ),
        (&["--duration", "-1"][..], "duration '-1' is negative"),
        (
            &["--core", "-1"][..],
            "invalid value '-1' for '--core <CORE>': must not be negative",
        ),
        (&["--queues", "-2"][..], "must not be negative"),
        (&["--stats-delay", "-1"][..], "must not be negative"),
        (&["--flows", "-3"][..], "must not be negative"),
        (&["--seed", "-3"][..], "must not be negative"),
        (&["--port", "-1"][..], "must not be negative"),
        (&["--timestamp-offset", "-1"][..], "-1 is not in 0..=60"),
        (
            &["--zero-loss", "--precision", "-1"][..],
            "--precision must be above 0 Gb/s, not -1",
        ),
        (
            &["--zero-loss", "--trial-ms", "-1"][..],
            "must not be negative",
        ),
        (
            &["--zero-loss", "--warmup-ms", "-1"][..],
            "must not be negative",
        ),
        (
            &["--zero-loss", "--sizes", "64,-128"][..],
            "must not be negative",
        ),
        (&["x.pcap", "-744", "1000"][..], "must not be negative"),
        (&["x.pcap", "744", "-1000"][..], "must not be negative"),
    ] {
        let m = err(args);
        assert!(m.contains(want), "{args:?}: {m}");
        assert!(!m.contains("unexpected argument"), "{args:?}: {m}");
    }
    let m = err(&["--rate", "-5G"]);
    assert!(m.contains("positive") || m.contains("negative"), "{m}");
}

#[test]
fn cores_that_cannot_be_pinned_to_are_refused() {
    assert_eq!(core_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    let two = [0, 1];
    assert!(check_cores(0, false, &two).is_ok());
    assert!(check_cores(1, true, &two).is_ok());
    let m = check_cores(1, false, &two).unwrap_err().to_string();
    assert_eq!(
        m,
        "--core 1 puts the transmit thread on core 2, which this process cannot run on \
         (cores: 0-1); give a lower --core, or --single-core"
    );
    for c in [2, 1023, 1024, 99_999, usize::MAX] {
        for single in [false, true] {
            let m = check_cores(c, single, &two).unwrap_err().to_string();
            assert_eq!(
                m,
                format!("--core {c} is not a core this process can run on (cores: 0-1)")
            );
        }
    }
    // An unreadable mask: what libc's CPU set holds.
    assert!(check_cores(1022, false, &[]).is_ok());
    assert!(check_cores(1023, true, &[]).is_ok());
    let m = check_cores(1023, false, &[]).unwrap_err().to_string();
    assert!(
        m.contains("core 1024") && m.contains("(cores: 0-1023)"),
        "{m}"
    );
    // From the command line, against this process's cores.
    let m = err(&["--core", "99999"]);
    assert!(m.starts_with("--core 99999 is not a core"), "{m}");
    let m = err(&["--core", "1023", "--in-process"]);
    assert!(m.starts_with("--core 1023 is not a core"), "{m}");
    if let Some(&c) = usable_cores().first() {
        let c = c.to_string();
        assert_eq!(
            run(&["--core", &c, "--single-core"]).unwrap().core,
            c.parse().ok()
        );
    }
}

#[test]
fn missing_and_bad_pcaps_are_errors_not_panics() {
    let m = err(&["/nonexistent/trace.pcap", "744", "1000"]);
    assert!(m.starts_with("/nonexistent/trace.pcap: cannot open"), "{m}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.pcap");
    std::fs::File::create(&bad)
        .unwrap()
        .write_all(b"this is not a capture file at all")
        .unwrap();
    let m = err(&[bad.to_str().unwrap()]);
    assert!(m.ends_with("not a pcap file (magic 0x74686973)"), "{m}");
    let short = dir.path().join("short.pcap");
    std::fs::write(&short, [0xd4, 0xc3, 0xb2, 0xa1, 2, 0]).unwrap();
    assert!(err(&[short.to_str().unwrap()]).contains("truncated file header"));
}

#[test]
fn durations() {
    assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
    assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration(" 1.5 s "), Ok(Duration::from_millis(1500)));
    assert!(parse_duration("").is_err());
    assert!(parse_duration("-1s").is_err());
    assert!(parse_duration("1e300s").is_err());
    assert!(parse_duration("3 weeks").is_err());
}

#[test]
fn device_port_and_in_process() {
    let c = run(&[]).unwrap();
    assert_eq!(
        (c.device.as_str(), c.port, c.in_process),
        ("enso0", 0, false)
    );
    let c = run(&["--device", "dev0", "--dir", "/tmp", "--port", "1"]).unwrap();
    assert_eq!((c.device.as_str(), c.port), ("dev0", 1));
    assert_eq!(c.dir.as_deref(), Some(std::path::Path::new("/tmp")));
    assert!(run(&["--in-process"]).unwrap().in_process);
    for flag in ["--device", "--dir", "--port"] {
        let m = err(&["--in-process", flag, "1"]);
        assert!(
            m.starts_with(&format!("{flag} does not apply to --in-process")),
            "{m}"
        );
    }
    assert!(err(&["--port", "x"]).contains("--port"));
}

#[test]
fn outputs_must_not_overwrite_the_pcap_or_each_other() {
    let m = err(&["--save", "out.csv", "--rtt-hist", "out.csv"]);
    assert!(
        m.contains("--save and --rtt-hist name the same file"),
        "{m}"
    );
    let m = err(&["in.pcap", "--json", "./in.pcap"]);
    assert!(m.contains("PCAP and --json name the same file"), "{m}");
    // Standard output is not a file.
    assert!(run(&["--json", "-", "--save", "x.csv"]).is_ok());
}

#[test]
fn json_alone_means_standard_output() {
    let c = run(&["--json"]).unwrap();
    assert!(c.json_to_stdout());
    let c = run(&["--rtt", "--json", "-"]).unwrap();
    assert!(c.json_to_stdout());
    let c = run(&["--json", "r.json", "--rtt"]).unwrap();
    assert_eq!(c.json.as_deref(), Some(std::path::Path::new("r.json")));
    assert!(!c.json_to_stdout());
    let c = run(&["--json=r.json"]).unwrap();
    assert!(!c.json_to_stdout());
    assert!(run(&[]).unwrap().json.is_none());
}

#[test]
fn config_round_trips_through_json() {
    let c = run(&[
        "--zero-loss",
        "--size",
        "64-128",
        "--src-port",
        "1-9",
        "--single-core",
    ])
    .unwrap();
    let j = serde_json::to_value(&c).unwrap();
    assert_eq!(j["rate"], "line");
    assert_eq!(j["stats_delay_ns"], 1_000_000_000u64);
    assert_eq!(j["traffic"]["synthetic"]["sizes"], "64-128");
    assert_eq!(serde_json::from_value::<Config>(j).unwrap(), c);
}

#[test]
fn threads_come_from_the_cores_unless_the_command_line_chooses() {
    use crate::threads::{choose_threads, usable_core_count, ThreadSource};
    let cores = usable_core_count();
    for (args, others) in [(&[][..], 1), (&["--in-process"][..], 2)] {
        let c = run(args).unwrap();
        assert_eq!(c.threads, choose_threads(None, cores, others), "{args:?}");
        assert_eq!(c.threads.source, ThreadSource::Cores);
        assert_eq!(c.threads.usable_cores, cores);
        assert_eq!(
            c.single_core,
            cores < 2 + others,
            "{args:?}: {}",
            c.threads.why
        );
    }
    let c = run(&["--single-core"]).unwrap();
    assert!(c.single_core);
    assert_eq!(
        (c.threads.threads, c.threads.source),
        (1, ThreadSource::SingleCore)
    );
    let c = run(&["--multicore"]).unwrap();
    assert!(!c.single_core);
    assert_eq!(
        (c.threads.threads, c.threads.source),
        (2, ThreadSource::Multicore)
    );
    // The JSON report's configuration carries the choice and its reason.
    let j = serde_json::to_value(&c).unwrap();
    assert_eq!(j["threads"]["threads"], 2);
    assert_eq!(j["threads"]["source"], "multicore");
    assert!(j["threads"]["why"]
        .as_str()
        .unwrap()
        .ends_with("--multicore"));
}
