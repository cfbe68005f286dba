//! The experiments' command lines: arguments, printing, results directories.

use std::path::PathBuf;

use clap::ArgMatches;

use bench::frames;
use bench::results::ResultsDir;
use nic_emu::PipeWriteMode;

pub(crate) mod all;
pub(crate) mod apps;
pub(crate) mod breakdown;
pub(crate) mod cache;
pub(crate) mod costcheck;
pub(crate) mod echo;
pub(crate) mod isolation;
pub(crate) mod latency;
pub(crate) mod pcie;
pub(crate) mod predict;
pub(crate) mod report;
pub(crate) mod scaling;
pub(crate) mod soak;
pub(crate) mod wire;

/// The options given on the command line (clap ids), as opposed to left at
/// their defaults: an option given where it has no effect is refused, not
/// silently ignored.
#[derive(Clone, Debug, Default)]
pub(crate) struct Given(Vec<String>);

impl Given {
    /// The options given in `m`.
    pub(crate) fn of(m: &ArgMatches) -> Self {
        Given(nic_emu::args::given_on_command_line(m))
    }

    /// Whether the option `id` (its field name) was given.
    pub(crate) fn has(&self, id: &str) -> bool {
        self.0.iter().any(|g| g == id)
    }
}

/// Parses an experiment's arguments from words (no program name), with its
/// own defaults, and which of its options the words give.
pub(crate) fn parse_words<T: clap::Args>(words: &[String]) -> Result<(T, Given), String> {
    use clap::{CommandFactory, FromArgMatches, Parser};
    #[derive(Parser)]
    struct Wrap<T: clap::Args> {
        #[command(flatten)]
        inner: T,
    }
    let m = Wrap::<T>::command()
        .try_get_matches_from(std::iter::once("bench".to_string()).chain(words.iter().cloned()))
        .map_err(|e| nic_emu::args::usage_line(&e))?;
    let w = Wrap::<T>::from_arg_matches(&m).map_err(|e| nic_emu::args::usage_line(&e))?;
    Ok((w.inner, Given::of(&m)))
}

/// Refuses the options of the emulated NIC's pipe writes that the others
/// given make ineffective (see `nic-emu run --help`): `--pipe-writes`
/// overrides `--evict-ahead-always`; with `--evict-ahead-lines 0` nothing
/// is evicted, always or not, and the ways that work ahead write plainly;
/// `--pipe-writes plain` evicts nothing, however many lines.
pub(crate) fn check_pipe_writes(
    given: &Given,
    lines: u32,
    always: bool,
    pipe_writes: Option<PipeWriteMode>,
) -> Result<(), String> {
    if always {
        if let Some(m) = pipe_writes {
            return Err(format!(
                "--evict-ahead-always has no effect with --pipe-writes {}, which fixes how \
                 frames are written into pipes",
                mode_flag(m)
            ));
        }
        if lines == 0 {
            return Err(
                "--evict-ahead-always has no effect with --evict-ahead-lines 0, which never \
                 evicts"
                    .into(),
            );
        }
    }
    match pipe_writes {
        Some(m @ (PipeWriteMode::EvictAhead | PipeWriteMode::PrefetchAhead)) if lines == 0 => {
            Err(format!(
                "--pipe-writes {} works --evict-ahead-lines ahead of the tail, and with 0 \
                 lines it writes plainly: give --pipe-writes plain, or lines ahead",
                mode_flag(m)
            ))
        }
        Some(PipeWriteMode::Plain) if given.has("evict_ahead_lines") => Err(
            "--evict-ahead-lines has no effect with --pipe-writes plain, which evicts nothing"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// A pipe-write mode as `--pipe-writes` takes it.
fn mode_flag(m: PipeWriteMode) -> String {
    use clap::ValueEnum;
    m.to_possible_value()
        .map_or_else(|| format!("{m:?}"), |v| v.get_name().to_string())
}

/// Refuses a list (of `flag`) that names one item twice: each would be
/// measured twice, one row or point after the other.
pub(crate) fn check_unique<T: PartialEq + std::fmt::Display>(
    flag: &str,
    items: &[T],
) -> Result<(), String> {
    for (i, x) in items.iter().enumerate() {
        if items[..i].contains(x) {
            return Err(format!("{flag}: {x} is given twice"));
        }
    }
    Ok(())
}

/// Where a run's results go: nowhere, a fresh `results/<experiment>-<time>/`
/// (`--save`), or a given directory (`--out`).
pub(crate) fn results_dir(
    experiment: &str,
    save: bool,
    out: &Option<PathBuf>,
) -> Result<Option<ResultsDir>, String> {
    match out {
        Some(p) => ResultsDir::at(experiment, p.clone()).map(Some),
        None if save => ResultsDir::create(experiment, None).map(Some),
        None => Ok(None),
    }
    .map_err(|e| e.to_string())
}

/// Checks up front that `--out` can become the results directory: the
/// nearest part of the path that exists is a directory in which this
/// process can make one. Otherwise a bad path would fail only after the whole
/// experiment ran.
pub(crate) fn check_out(out: &Option<PathBuf>) -> Result<(), String> {
    let Some(p) = out else {
        return Ok(());
    };
    let mut at = p.as_path();
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => break,
            Ok(_) if at == p => {
                return Err(format!(
                    "--out {}: exists and is not a directory",
                    p.display()
                ))
            }
            Ok(_) => {
                return Err(format!(
                    "--out {}: {} is not a directory",
                    p.display(),
                    at.display()
                ))
            }
            // Missing, or under a file (ENOTDIR): look further up.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                at = match at.parent() {
                    Some(q) if !q.as_os_str().is_empty() => q,
                    _ => std::path::Path::new("."),
                };
            }
            Err(e) => return Err(format!("--out {}: {e}", p.display())),
        }
    }
    // Whether a directory can be made there: what writing the results
    // needs. The probe is removed at once.
    // Named by process and call, so checks running at once (tests) differ.
    static CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = at.join(format!(".bench-out-check-{}-{n}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| {
        format!(
            "--out {}: cannot write in {}: {e}",
            p.display(),
            at.display()
        )
    })?;
    let _ = std::fs::remove_dir(&probe);
    Ok(())
}

/// Where a run's two threads were, for a figure's title: `cores 0,1,
/// probe 85 ns (close)`, with the range when the probes of the rounds
/// spanned placements (`probe 85 ns, 80..390 (close to apart)`).
pub(crate) fn placement_short(
    placement: &bench::placement::Placement,
    median_ns: Option<f64>,
    range_ns: Option<(f64, f64)>,
) -> String {
    use bench::probe::PlacementClass;
    let cores = format!("cores {}", placement.label());
    let Some(m) = median_ns.filter(|m| m.is_finite()) else {
        return cores;
    };
    match range_ns {
        Some((lo, hi)) if PlacementClass::of(lo) != PlacementClass::of(hi) => format!(
            "{cores}, probe {m:.0} ns, {lo:.0}..{hi:.0} ({} to {})",
            PlacementClass::of(lo).name(),
            PlacementClass::of(hi).name()
        ),
        _ => format!(
            "{cores}, probe {m:.0} ns ({})",
            PlacementClass::of(m).name()
        ),
    }
}

/// Parses `64,128,1518` into wire sizes, each checked against 64..=1518
/// (a size given twice is measured once). An empty element (`64,,128`, a
/// comma at an end) is refused: it is a typo, not a size.
pub(crate) fn parse_sizes(text: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!(
                "packet sizes '{text}': an empty size (two commas, or one at an end)"
            ));
        }
        let n: usize = part
            .parse()
            .map_err(|_| format!("packet size {part:?} is not a number"))?;
        frames::check_wire_size(n)?;
        if !v.contains(&n) {
            v.push(n);
        }
    }
    if v.is_empty() {
        return Err("no packet sizes given".into());
    }
    Ok(v)
}

/// Checks that an interleaved run of `duration_ms` holds the shortest run
/// [`bench::interleave::Interleave`] makes with one warm-up round: that
/// round and one measured round, each one trial of `trial_ms` per variant.
/// A longer trial would silently stretch the run well past `duration_ms`.
pub(crate) fn check_trials_fit(
    trial_ms: u64,
    duration_ms: u64,
    variants: u64,
) -> Result<(), String> {
    let least = 2 * variants * trial_ms;
    if least > duration_ms {
        return Err(format!(
            "--trial-ms {trial_ms} does not fit in --duration-ms {duration_ms}: a run is at least \
             a warm-up and a measured round of one trial for each of its {variants} variants \
             ({least} ms); give --duration-ms of at least {least} or a shorter --trial-ms"
        ));
    }
    Ok(())
}

/// Parses a comma-separated list of numbers (loads, percentages). An
/// empty element (`10,,50`, a comma at an end) is refused, as in a list
/// of sizes: it is a typo, not a value.
pub(crate) fn parse_list(text: &str, what: &str) -> Result<Vec<f64>, String> {
    if text.trim().is_empty() {
        return Err(format!("no {what} given"));
    }
    let v: Vec<f64> = text
        .split(',')
        .map(str::trim)
        .map(|p| {
            if p.is_empty() {
                return Err(format!(
                    "{what}s '{text}': an empty {what} (two commas, or one at an end)"
                ));
            }
            p.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("{what} {p:?} is not a number"))
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(format!("no {what} given"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked_and_deduplicated() {
        assert_eq!(parse_sizes("64, 128,64,1518").unwrap(), vec![64, 128, 1518]);
        assert!(parse_sizes("60").is_err());
        assert!(parse_sizes("64,x").is_err());
        for bad in [",", "", "64,,128", "64,", ",64", "64, ,128"] {
            assert_eq!(
                parse_sizes(bad),
                Err(format!(
                    "packet sizes '{bad}': an empty size (two commas, or one at an end)"
                ))
            );
        }
    }

    #[test]
    fn trials_must_fit_in_the_run() {
        assert_eq!(check_trials_fit(100, 2000, 2), Ok(()));
        assert_eq!(check_trials_fit(500, 2000, 2), Ok(()));
        assert_eq!(check_trials_fit(80, 800, 3), Ok(()));
        assert_eq!(
            check_trials_fit(5000, 2000, 2),
            Err(
                "--trial-ms 5000 does not fit in --duration-ms 2000: a run is at least a \
                 warm-up and a measured round of one trial for each of its 2 variants \
                 (20000 ms); give --duration-ms of at least 20000 or a shorter --trial-ms"
                    .into()
            )
        );
        assert!(check_trials_fit(501, 2000, 2).is_err());
    }

    #[test]
    fn out_paths_are_checked_before_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let some = |p: PathBuf| Some(p);
        assert_eq!(check_out(&None), Ok(()));
        // An existing directory, or new ones under it.
        assert_eq!(check_out(&some(d.to_path_buf())), Ok(()));
        assert_eq!(check_out(&some(d.join("new/deeper"))), Ok(()));
        assert_eq!(check_out(&some("relative-new-dir".into())), Ok(()));
        let file = d.join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(
            check_out(&some(file.clone())),
            Err(format!(
                "--out {}: exists and is not a directory",
                file.display()
            ))
        );
        let under = file.join("sub");
        assert_eq!(
            check_out(&some(under.clone())),
            Err(format!(
                "--out {}: {} is not a directory",
                under.display(),
                file.display()
            ))
        );
        assert!(check_out(&some("bad\0path".into())).is_err());
        let e = check_out(&some("/proc/no/such/dir".into())).unwrap_err();
        assert!(
            e.starts_with("--out /proc/no/such/dir: cannot write in /proc: "),
            "{e}"
        );
        // Nothing was created or left behind.
        assert!(!d.join("new").exists());
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 1, "only the file");
    }

    #[test]
    fn duplicates_are_refused() {
        assert_eq!(check_unique("--loads", &[1.0, 50.0, 99.0]), Ok(()));
        assert_eq!(
            check_unique("--loads", &[1.0, 50.0, 50.0]),
            Err("--loads: 50 is given twice".into())
        );
        assert_eq!(
            check_unique("--apps", &["kv", "maglev", "kv"]),
            Err("--apps: kv is given twice".into())
        );
        assert_eq!(check_unique::<u64>("--kv-batch", &[]), Ok(()));
    }

    #[test]
    fn pipe_write_options_without_effect_are_refused() {
        use PipeWriteMode::*;
        let none = Given::default();
        let lines = Given(vec!["evict_ahead_lines".into()]);
        // What has an effect.
        assert_eq!(check_pipe_writes(&none, 64, false, None), Ok(()));
        assert_eq!(check_pipe_writes(&none, 64, true, None), Ok(()));
        assert_eq!(check_pipe_writes(&lines, 0, false, None), Ok(()));
        assert_eq!(
            check_pipe_writes(&lines, 8, false, Some(NonTemporal)),
            Ok(())
        );
        assert_eq!(
            check_pipe_writes(&lines, 0, false, Some(NonTemporal)),
            Ok(())
        );
        assert_eq!(
            check_pipe_writes(&lines, 8, false, Some(EvictAhead)),
            Ok(())
        );
        assert_eq!(check_pipe_writes(&none, 64, false, Some(Plain)), Ok(()));
        // What has none.
        assert_eq!(
            check_pipe_writes(&none, 64, true, Some(NonTemporal)),
            Err(
                "--evict-ahead-always has no effect with --pipe-writes non-temporal, which \
                 fixes how frames are written into pipes"
                    .into()
            )
        );
        assert_eq!(
            check_pipe_writes(&lines, 0, true, None),
            Err(
                "--evict-ahead-always has no effect with --evict-ahead-lines 0, which never \
                 evicts"
                    .into()
            )
        );
        assert_eq!(
            check_pipe_writes(&lines, 0, false, Some(PrefetchAhead)),
            Err(
                "--pipe-writes prefetch-ahead works --evict-ahead-lines ahead of the tail, \
                 and with 0 lines it writes plainly: give --pipe-writes plain, or lines ahead"
                    .into()
            )
        );
        assert!(check_pipe_writes(&lines, 0, false, Some(EvictAhead)).is_err());
        assert_eq!(
            check_pipe_writes(&lines, 8, false, Some(Plain)),
            Err(
                "--evict-ahead-lines has no effect with --pipe-writes plain, which evicts \
                 nothing"
                    .into()
            )
        );
    }

    #[test]
    fn lists_of_numbers() {
        assert_eq!(
            parse_list("1, 10,99.5", "load").unwrap(),
            vec![1.0, 10.0, 99.5]
        );
        assert!(parse_list("1,nan", "load").is_err());
        assert_eq!(parse_list("", "load"), Err("no load given".into()));
        for bad in ["10,,50", "10,", ",10", ",", "10, ,50"] {
            assert_eq!(
                parse_list(bad, "load"),
                Err(format!(
                    "loads '{bad}': an empty load (two commas, or one at an end)"
                )),
            );
        }
    }
}
