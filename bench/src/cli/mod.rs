//! The experiments' command lines: arguments, printing, results directories.

use std::path::PathBuf;

use bench::frames;
use bench::results::ResultsDir;

pub(crate) mod all;
pub(crate) mod apps;
pub(crate) mod cache;
pub(crate) mod echo;
pub(crate) mod latency;
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

/// Parses a comma-separated list of numbers (loads, percentages).
pub(crate) fn parse_list(text: &str, what: &str) -> Result<Vec<f64>, String> {
    let v: Vec<f64> = text
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
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
        assert!(parse_sizes(",").is_err());
    }

    #[test]
    fn lists_of_numbers() {
        assert_eq!(
            parse_list("1, 10,99.5", "load").unwrap(),
            vec![1.0, 10.0, 99.5]
        );
        assert!(parse_list("1,nan", "load").is_err());
        assert!(parse_list("", "load").is_err());
    }
}
