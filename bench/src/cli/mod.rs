//! The experiments' command lines: arguments, printing, results directories.

use std::path::PathBuf;

use bench::frames;
use bench::results::ResultsDir;

pub(crate) mod cache;
pub(crate) mod echo;
pub(crate) mod pcie;

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

/// Parses `64,128,1518` into wire sizes, each checked against 64..=1518.
pub(crate) fn parse_sizes(text: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n: usize = part
            .parse()
            .map_err(|_| format!("packet size {part:?} is not a number"))?;
        if !(frames::MIN_WIRE_SIZE..=frames::MAX_WIRE_SIZE).contains(&n) {
            return Err(format!(
                "packet size {n} outside {}..={} (wire size with FCS)",
                frames::MIN_WIRE_SIZE,
                frames::MAX_WIRE_SIZE
            ));
        }
        if !v.contains(&n) {
            v.push(n);
        }
    }
    if v.is_empty() {
        return Err("no packet sizes given".into());
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
        assert!(parse_sizes(",").is_err());
    }
}
