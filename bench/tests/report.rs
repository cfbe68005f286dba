//! `bench report` end to end with its smallest (hidden, test-sized)
//! settings: the report has a section and a table per claim, its figures
//! exist as valid SVG and PNG; and its wrong arguments fail in one line.

use std::path::Path;
use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bench"))
}

/// The file is an SVG drawn by the plotting code, with its title's text.
fn assert_svg(path: &Path, title_has: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(text.starts_with("<svg"), "{}", path.display());
    assert!(text.trim_end().ends_with("</svg>"), "{}", path.display());
    assert!(
        text.contains(title_has),
        "{}: no {title_has:?}",
        path.display()
    );
}

/// The file is a PNG of the size a 900 px wide figure at 1.5x gives, with
/// more than a blank image's bytes.
fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
    // IHDR: width and height, big-endian, at bytes 16..24.
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!(w, 1350, "{}", path.display());
    assert!((450..=3000).contains(&h), "{}: height {h}", path.display());
    assert!(
        bytes.len() > 20_000 && bytes.len() < 2_000_000,
        "{}: {} bytes",
        path.display(),
        bytes.len()
    );
}

#[test]
fn the_smallest_report_has_every_claim_and_its_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    let run = bench()
        .args(["report", "--smoke", "--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let json: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    // On a busy machine an experiment can fail (the latency search finds no
    // loss-free rate): the run says which, and the report still has them all.
    let errors = json["errors"].as_object().unwrap();
    assert_eq!(run.status.success(), errors.is_empty(), "{stderr}");
    for name in errors.keys() {
        assert!(stderr.contains(name.as_str()), "{stderr}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let claims = [
        ("1. Throughput against packet size", "echo"),
        ("2. Echo speedup (Ensō / packetized)", "echo"),
        ("3. PCIe metadata share", "pcie"),
        ("4. Cache behaviour", "cache"),
        (
            "5. Notification strategies and prefetching against load",
            "latency",
        ),
        (
            "6. Scaling with pipes and queues (one application core)",
            "scaling",
        ),
        ("7. The applications", "apps"),
        ("8. Where the applications' instructions go", "breakdown"),
    ];
    let header =
        "| metric | unit | measured here | placement | predicted (paper's hardware) | paper |";
    let sections: Vec<&str> = md.split("\n## ").skip(1).collect();
    assert_eq!(sections.len(), claims.len(), "{md}");
    for (section, (title, experiment)) in sections.iter().zip(claims) {
        assert!(section.starts_with(title), "{section}");
        assert!(section.contains("**Paper:** "), "{section}");
        if errors.contains_key(experiment) {
            assert!(section.contains("_Not measured in this run: "), "{section}");
            continue;
        }
        assert!(section.contains(header), "{title}: {section}");
        // At least one row, every one with its six cells (the claim's
        // table: the first one; a paragraph may hold another).
        let rows: Vec<&str> = section
            .lines()
            .skip_while(|l| !l.starts_with("| metric"))
            .skip(2)
            .take_while(|l| l.starts_with("| "))
            .collect();
        assert!(!rows.is_empty(), "{section}");
        for r in &rows {
            assert_eq!(r.matches(" | ").count(), 5, "{r}");
        }
        // Every figure the section shows is there as PNG, beside its SVG.
        let figures: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("![")?.split_once("](")?.1.strip_suffix(')'))
            .collect();
        assert!(!figures.is_empty(), "{section}");
        for f in figures {
            assert!(f.ends_with(".png"), "{f}");
            assert_png(&out.join(f));
            assert!(out.join(f).with_extension("svg").exists(), "{f}");
        }
        assert!(
            section.trim_end().lines().last().unwrap().len() > 100,
            "a paragraph"
        );
    }
    // The report's own figures, titled with their unit and placement.
    if !errors.contains_key("echo") {
        assert_svg(&out.join("throughput.svg"), "Gb/s");
        assert_svg(&out.join("throughput.svg"), "probe");
        assert_svg(&out.join("echo_speedup.svg"), "speedup");
        assert!(
            md.contains("| speedup at 64 B (packet rate) | x | "),
            "{md}"
        );
    }
    if !errors.contains_key("scaling") {
        assert_svg(&out.join("scaling/scaling.svg"), "Mpps");
        assert!(md.contains("| enso x32: rate relative to x1 "), "{md}");
        assert!(
            md.contains("| packetized x32: rate relative to x1 "),
            "{md}"
        );
    }
    if !errors.contains_key("apps") {
        assert_svg(&out.join("apps/apps.svg"), "1x: no speedup");
    }
    // The JSON has the same claims, with numbers where measured.
    let claims_json = json["claims"].as_array().unwrap();
    assert_eq!(claims_json.len(), 8);
    assert_eq!(
        json["report"].as_str().map(Path::new),
        Some(out.join("report.md").as_path())
    );
    let measured = claims_json
        .iter()
        .flat_map(|c| c["rows"].as_array().unwrap())
        .filter(|r| r["measured"].is_number())
        .count();
    assert!(measured >= 10, "{measured}");
}

#[test]
fn wrong_report_and_scaling_arguments_fail_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("never");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["report", "--cores", "0,0", "--out", o],
            "bench: --cores 0,0: both sides on core 0: give two distinct cores",
        ),
        (
            &["report", "--quick", "--smoke", "--out", o],
            "bench: the argument '--quick' cannot be used with '--smoke'",
        ),
        (
            &["scaling", "--pipes", "1,2048"],
            "bench: --pipes: 2048 is outside 1..=1024",
        ),
        (
            &["scaling", "--pipes", "2,2"],
            "bench: --pipes: 2 is given twice",
        ),
        (
            &["scaling", "--rx-ring", "1000"],
            "bench: --rx-ring 1000: not a power of two",
        ),
    ];
    for (args, want) in cases {
        let run = bench().args(*args).output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with(want), "{args:?}: {stderr}");
        assert!(run.stdout.is_empty());
    }
    assert!(!out.exists(), "nothing is written");
}
