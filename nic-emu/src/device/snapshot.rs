//! The counters snapshot a device writes to its directory, read back.

use std::path::{Path, PathBuf};

use super::STATS_FILE;
use crate::counters::Stats;

/// Why a device's counters snapshot could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {what}", .path.display())]
pub struct StatsFileError {
    /// The snapshot file.
    pub path: PathBuf,
    /// What is wrong.
    pub what: String,
}

impl From<StatsFileError> for String {
    fn from(e: StatsFileError) -> Self {
        e.to_string()
    }
}

/// Reads the stats snapshot of the device in `dir`. The snapshot outlives
/// a device whose process was killed: see [`check_running`](super::check_running).
pub fn read_stats(dir: &Path) -> Result<Stats, StatsFileError> {
    let p = dir.join(STATS_FILE);
    let err = |e: &dyn std::fmt::Display| StatsFileError {
        path: p.clone(),
        what: e.to_string(),
    };
    // The NIC writes a regular file; anything else (a FIFO would block the
    // read forever) is refused, as is a file far larger than any snapshot.
    let meta = std::fs::metadata(&p).map_err(|e| err(&e))?;
    if !meta.is_file() {
        return Err(err(&"not a regular file"));
    }
    if meta.len() > MAX_STATS_FILE {
        return Err(err(&format!("larger than {MAX_STATS_FILE} bytes")));
    }
    let s = std::fs::read(&p).map_err(|e| err(&e))?;
    serde_json::from_slice(&s).map_err(|e| {
        // serde quotes the offending value whole: keep the line short.
        let mut m = e.to_string();
        if m.len() > 200 {
            let cut = (0..=200)
                .rev()
                .find(|&i| m.is_char_boundary(i))
                .unwrap_or(0);
            m.truncate(cut);
            m.push_str("...");
        }
        err(&m)
    })
}

/// Largest `stats.json` read (a snapshot of thousands of pipes is far
/// smaller).
const MAX_STATS_FILE: u64 = 64 << 20;
