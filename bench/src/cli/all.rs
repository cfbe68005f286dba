//! `bench all`: every experiment, quickly, into one results directory.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use bench::results::ResultsDir;

use super::{cache, echo, latency, parse_words, pcie, Given};
use crate::{print_json, Common};

/// What `--json` prints.
const JSON_HELP: &str = "Print one JSON object on stdout, each experiment's JSON under its \
    name, its errors under `errors`, and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct AllArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Each experiment's default (longer) settings instead of the quick
    /// ones.
    #[arg(long)]
    pub(crate) full: bool,
    /// Write under results/all-<time>/ (the default without --out).
    #[arg(long)]
    pub(crate) save: bool,
    /// Write the results here: one subdirectory per experiment and an
    /// index (summary.md).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

/// The argument words of one experiment.
pub(crate) fn words(common: &Common, out: &Path, name: &str, extra: &[&str]) -> Vec<String> {
    let mut w: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    if let Some(c) = &common.cores {
        w.push("--cores".into());
        w.push(c.clone());
    }
    if common.json {
        w.push("--json".into());
    }
    w.push("--out".into());
    w.push(out.join(name).display().to_string());
    w
}

/// The quick settings (`--full` drops them).
const QUICK_ECHO: &[&str] = &[
    "--sizes",
    "64,128,256,512,1024,1518",
    "--duration-ms",
    "800",
    "--trial-ms",
    "80",
];
const QUICK_RX: &[&str] = &["--duration-ms", "800", "--trial-ms", "80"];
/// What the echo and rx runs always measure (quick or full).
const ECHO_ARGS: &[&str] = &["--interface", "both"];
const RX_ARGS: &[&str] = &["--interface", "both", "--mode", "rx"];

/// `always` followed by `extra`.
fn with(always: &[&'static str], extra: &[&'static str]) -> Vec<&'static str> {
    always.iter().chain(extra).copied().collect()
}
pub(crate) const QUICK_LATENCY: &[&str] = &[
    "--trial-ms",
    "100",
    "--search-trial-ms",
    "80",
    "--warmup-ms",
    "20",
    "--precision",
    "0.05",
    "--attempts",
    "1",
];

#[derive(Serialize, Default)]
struct AllJson {
    echo: Option<serde_json::Value>,
    echo_rx: Option<serde_json::Value>,
    pcie: Option<serde_json::Value>,
    cache: Option<serde_json::Value>,
    latency: Option<serde_json::Value>,
    errors: std::collections::BTreeMap<String, String>,
    results: String,
}

/// What the index says while experiments remain (and after a run stopped
/// part way, by Ctrl-C for one).
const UNFINISHED: &str = "_The experiments not listed above did not finish (the run was \
    stopped, or is still running)._\n";

/// The index, `summary.md`, written again after each experiment, so that
/// a run stopped part way has one for the experiments that finished.
struct Index<'a> {
    dir: &'a ResultsDir,
    text: String,
}

impl<'a> Index<'a> {
    fn new(dir: &'a ResultsDir) -> Self {
        Index {
            dir,
            text: String::from("# All experiments\n\n"),
        }
    }

    /// Adds an experiment's section. Writing the partial index may fail:
    /// [`Index::finish`] then reports it.
    fn add(&mut self, section: &str) {
        self.text.push_str(section);
        let _ = self
            .dir
            .write_summary(&format!("{}{UNFINISHED}", self.text));
    }

    /// Writes the whole index.
    fn finish(self) -> Result<std::path::PathBuf, bench::results::ResultsError> {
        self.dir.write_summary(&self.text)
    }
}

/// An experiment's summary.md under the index's `## <experiment>`
/// heading: its headings two levels down (`#` becomes `###`), so that they
/// sit under that heading rather than beside it.
fn demoted(summary: &str) -> String {
    let mut s = String::new();
    for line in summary.lines() {
        if line.starts_with('#') {
            s.push_str("##");
        }
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// The experiments' arguments, each with the options its words give.
struct Runs {
    echo: (echo::EchoArgs, Given),
    echo_rx: (echo::EchoArgs, Given),
    pcie: (pcie::PcieArgs, Given),
    cache: (cache::CacheArgs, Given),
    latency: (latency::LatencyArgs, Given),
}

/// The experiments' arguments, writing under `root`.
fn runs(args: &AllArgs, root: &Path) -> Result<Runs, String> {
    let quick = |q: &'static [&'static str]| if args.full { &[][..] } else { q };
    let c = &args.common;
    let mut pcie = words(c, root, "pcie", &[]);
    // pcie has no --cores (it is single-threaded).
    if let Some(i) = pcie.iter().position(|x| x == "--cores") {
        pcie.drain(i..i + 2);
    }
    Ok(Runs {
        echo: parse_words(&words(c, root, "echo", &with(ECHO_ARGS, quick(QUICK_ECHO))))?,
        echo_rx: parse_words(&words(c, root, "echo-rx", &with(RX_ARGS, quick(QUICK_RX))))?,
        pcie: parse_words(&pcie)?,
        cache: parse_words(&words(c, root, "cache", &[]))?,
        latency: parse_words(&words(c, root, "latency", quick(QUICK_LATENCY)))?,
    })
}

/// Checks, before anything runs, every value the experiments will check:
/// otherwise a value only one of them refuses would fail it after the
/// others ran and wrote their results.
pub(crate) fn check(args: &AllArgs) -> Result<(), String> {
    args.common.check()?;
    super::check_out(&args.out)?;
    // Where the results go is checked above; the experiments' values do
    // not depend on it.
    let root = args.out.clone().unwrap_or_else(|| PathBuf::from("results"));
    let r = runs(args, &root)?;
    let named = |name: &str, c: Result<(), String>| c.map_err(|e| format!("{name}: {e}"));
    named("echo", echo::check(&r.echo.0, &r.echo.1))?;
    named("echo-rx", echo::check(&r.echo_rx.0, &r.echo_rx.1))?;
    named("pcie", pcie::check(&r.pcie.0))?;
    named("cache", cache::check(&r.cache.0, &r.cache.1))?;
    named("latency", latency::check(&r.latency.0))
}

pub(crate) fn run(args: &AllArgs) -> Result<(), String> {
    let dir = match &args.out {
        Some(p) => ResultsDir::at("all", p.clone()),
        None => ResultsDir::create("all", None),
    }
    .map_err(|e| e.to_string())?;
    dir.write_config(args).map_err(|e| e.to_string())?;
    let root = dir.path().to_path_buf();
    let runs = runs(args, &root)?;
    let json = args.common.json;
    let mut out = AllJson {
        results: root.display().to_string(),
        ..Default::default()
    };
    let mut index = Index::new(&dir);
    let mut note = |name: &str, r: Result<(), String>, out: &mut AllJson| match r {
        Ok(()) => {
            let summary =
                std::fs::read_to_string(root.join(name).join("summary.md")).unwrap_or_default();
            index.add(&format!("## {name} (`{name}/`)\n\n{}\n", demoted(&summary)));
        }
        Err(e) => {
            if !json {
                eprintln!("bench all: {name} failed: {e}");
            }
            index.add(&format!("## {name}\n\nFailed: {e}\n\n"));
            out.errors.insert(name.to_string(), e);
        }
    };

    let a = &runs.echo.0;
    let r = echo::measure(a).and_then(|o| {
        if !json {
            echo::print(a, &o);
        }
        out.echo = Some(o.json());
        let d = ResultsDir::at("echo", root.join("echo")).map_err(|e| e.to_string())?;
        echo::save(&d, a, &o).map_err(|e| e.to_string())
    });
    note("echo", r, &mut out);

    let a = &runs.echo_rx.0;
    let r = echo::measure(a).and_then(|o| {
        if !json {
            echo::print(a, &o);
        }
        out.echo_rx = Some(o.json());
        let d = ResultsDir::at("echo", root.join("echo-rx")).map_err(|e| e.to_string())?;
        echo::save(&d, a, &o).map_err(|e| e.to_string())
    });
    note("echo-rx", r, &mut out);

    let a = &runs.pcie.0;
    let r = pcie::progress(a)
        .and_then(|mut progress| {
            let res = pcie::measure_all(a, &mut progress);
            progress.finish();
            res
        })
        .and_then(|res| {
            if !json {
                pcie::print(&res);
            }
            out.pcie = serde_json::to_value(&res).ok();
            let d = ResultsDir::at("pcie", root.join("pcie")).map_err(|e| e.to_string())?;
            pcie::save(&d, a, &res).map_err(|e| e.to_string())
        });
    note("pcie", r, &mut out);

    let (a, given) = &runs.cache;
    // Cachegrind takes a while: its progress shows, as when run alone.
    let mut progress = cache::progress(a);
    let measured = cache::measure(a, given, &mut progress);
    progress.finish();
    let r = measured.and_then(|rep| {
        if !json {
            cache::print(&rep);
        }
        out.cache = serde_json::to_value(&rep).ok();
        let d = ResultsDir::at("cache", root.join("cache")).map_err(|e| e.to_string())?;
        cache::save(&d, a, &rep).map_err(|e| e.to_string())
    });
    note("cache", r, &mut out);

    let a = &runs.latency.0;
    let r = latency::measure(a).and_then(|o| {
        if !json {
            latency::print(&o);
        }
        out.latency = serde_json::to_value(&o.results).ok();
        let d = ResultsDir::at("latency", root.join("latency")).map_err(|e| e.to_string())?;
        latency::save(&d, a, &o).map_err(|e| e.to_string())
    });
    note("latency", r, &mut out);

    index.finish().map_err(|e| e.to_string())?;
    if json {
        print_json(&out)?;
    } else {
        eprintln!("results: {}", root.display());
    }
    if out.errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} experiment(s) failed: {}",
            out.errors.len(),
            out.errors.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<T: Args>(words: &[String]) -> Result<T, String> {
        parse_words(words).map(|(a, _)| a)
    }

    #[test]
    fn the_slow_experiments_show_progress_unless_json() {
        for (w, hidden) in [(&[][..], false), (&["--json"][..], true)] {
            let r = runs(&all_args(w), Path::new("/tmp/x")).unwrap();
            assert_eq!(cache::progress(&r.cache.0).is_hidden(), hidden, "{w:?}");
            assert_eq!(pcie::progress(&r.pcie.0).unwrap().is_hidden(), hidden);
        }
    }

    #[test]
    fn the_index_is_written_as_experiments_finish() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ResultsDir::at("all", tmp.path().join("all")).unwrap();
        let read = || std::fs::read_to_string(dir.file("summary.md")).unwrap();
        let mut index = Index::new(&dir);
        index.add("## echo (`echo/`)\n\nrates\n\n");
        let partial = read();
        assert!(
            partial.starts_with("# All experiments\n\n## echo"),
            "{partial}"
        );
        assert!(partial.ends_with(UNFINISHED), "{partial}");
        index.add("## pcie\n\nFailed: x\n\n");
        assert!(read().contains("Failed: x"));
        index.finish().unwrap();
        let whole = read();
        assert!(!whole.contains(UNFINISHED), "{whole}");
        assert!(whole.ends_with("Failed: x\n\n"), "{whole}");
    }

    #[test]
    fn experiment_headings_sit_under_the_index_headings() {
        assert_eq!(
            demoted("# Echo\n\ntext\n## More\n"),
            "### Echo\n\ntext\n#### More\n"
        );
    }

    #[test]
    fn experiment_arguments_parse_with_their_defaults() {
        let common = Common {
            cores: Some("0,1".into()),
            json: true,
        };
        let root = std::path::Path::new("/tmp/x");
        let a: echo::EchoArgs = parse(&words(&common, root, "echo", QUICK_ECHO)).unwrap();
        assert_eq!(a.trial_ms, 80);
        // Quick or full, the echo and rx runs compare both interfaces.
        for (always, mode) in [(ECHO_ARGS, "echo"), (RX_ARGS, "rx")] {
            let a: echo::EchoArgs = parse(&words(&common, root, "x", &with(always, &[]))).unwrap();
            assert!(matches!(a.interface, echo::Which::Both));
            assert_eq!(format!("{:?}", a.mode).to_lowercase(), mode);
        }
        assert_eq!(a.pipes, 2, "the default");
        assert!(a.common.json);
        assert_eq!(a.out.as_deref(), Some(std::path::Path::new("/tmp/x/echo")));
        let l: latency::LatencyArgs =
            parse(&words(&common, root, "latency", QUICK_LATENCY)).unwrap();
        assert_eq!(l.attempts, 1);
        assert_eq!(l.interconnect_latency_ns, 400);
        let c: cache::CacheArgs = parse(&words(&common, root, "cache", &[])).unwrap();
        assert_eq!(c.size, 64);
        assert!(
            parse::<pcie::PcieArgs>(&words(&common, root, "pcie", &[])).is_err(),
            "pcie takes no --cores: the caller removes it"
        );
    }

    fn all_args(w: &[&str]) -> AllArgs {
        let words: Vec<String> = w.iter().map(|s| s.to_string()).collect();
        parse_words::<AllArgs>(&words).unwrap().0
    }

    #[test]
    fn every_experiment_checks_its_settings_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("all");
        let o = out.to_str().unwrap();
        // The quick and the full settings pass every experiment's checks.
        assert_eq!(check(&all_args(&["--out", o])), Ok(()));
        assert_eq!(check(&all_args(&["--out", o, "--full"])), Ok(()));
        // A value one experiment would refuse is refused before any runs.
        assert_eq!(
            check(&all_args(&["--cores", "0,0", "--out", o])),
            Err("--cores 0,0: both sides on core 0: give two distinct cores".into())
        );
        assert!(check(&all_args(&["--cores", "0,x", "--out", o])).is_err());
        assert!(!out.exists(), "checking writes nothing");
    }

    #[test]
    fn the_experiments_get_their_own_given_options() {
        let a = all_args(&["--cores", "0,1"]);
        let r = runs(&a, Path::new("/tmp/x")).unwrap();
        assert!(r.echo.1.has("cores") && r.echo.1.has("sizes"));
        assert!(r.echo_rx.1.has("mode") && !r.echo_rx.1.has("window"));
        assert!(!r.pcie.1.has("json") && r.pcie.1.has("out"));
        assert!(r.cache.1.has("cores") && !r.cache.1.has("source"));
        assert_eq!(r.latency.0.attempts, 1);
        let full = runs(&all_args(&["--full"]), Path::new("/tmp/x")).unwrap();
        assert!(!full.echo.1.has("sizes") && !full.latency.1.has("attempts"));
    }

    #[test]
    fn bad_sizes_are_refused_before_anything_runs() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for size in ["0", "59", "1519", "18446744073709551615"] {
            let c: cache::CacheArgs = parse(&words(&["--size", size])).unwrap();
            let e = cache::measure(
                &c,
                &Given::default(),
                &mut bench::progress::Progress::hidden(),
            )
            .err()
            .unwrap();
            assert_eq!(
                e,
                format!("--size: packet size {size} outside 64..=1518 (wire size with FCS)")
            );
        }
        // One size or a sweep, not both.
        let e = parse::<echo::EchoArgs>(&words(&["--size", "64", "--sizes", "128"])).unwrap_err();
        assert!(e.contains("'--size <SIZE>' cannot be used with"), "{e}");
        let a: echo::EchoArgs = parse(&words(&["--sizes", "128"])).unwrap();
        assert_eq!(a.sizes.as_deref(), Some("128"));
    }
}
