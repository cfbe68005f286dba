//! Results directories: everything a run measured, in a form a reader (or a
//! script, or a later comparison) can use without rerunning it.
//!
//! A run writes `results/<experiment>-<UTC timestamp>/` (or a directory of
//! the caller's choosing) holding:
//! - `config.json`: the experiment, its configuration, the command line, the
//!   machine (CPU model, cores, kernel, clock source), the git commit and
//!   the rustc version;
//! - data as JSON and CSV ([`ResultsDir::write_json`], [`ResultsDir::write_csv`],
//!   [`ResultsDir::write_table`]);
//! - `summary.md`, a short human summary;
//! - plots as SVG ([`ResultsDir::line_chart`], [`ResultsDir::bar_chart`]).

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::plot::{BarChart, HBarChart, LineChart, PlotError};

/// Default parent directory of results directories (relative to the
/// working directory).
pub const DEFAULT_BASE: &str = "results";

/// A table of already formatted cells: CSV and markdown from one source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    /// Column names.
    pub headers: Vec<String>,
    /// Rows of cells, each as long as `headers`.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these columns.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn push<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) {
        self.rows.push(row.into_iter().map(Into::into).collect());
    }

    /// The table as GitHub-flavoured markdown.
    pub fn markdown(&self) -> String {
        let esc = |c: &str| c.replace('|', "\\|");
        let mut s = String::new();
        s.push_str(&format!(
            "| {} |\n",
            self.headers
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        s.push_str(&format!("|{}\n", "---|".repeat(self.headers.len())));
        for row in &self.rows {
            s.push_str(&format!(
                "| {} |\n",
                row.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        s
    }
}

/// The machine and build a run happened on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// Whether /proc/cpuinfo shows the `hypervisor` flag (a VM).
    pub virtualised: Option<bool>,
    /// Hardware threads the OS offers this process.
    pub cores: usize,
    /// Cores in this process's affinity mask.
    pub cores_available: Vec<usize>,
    /// Kernel release (/proc/sys/kernel/osrelease).
    pub kernel: Option<String>,
    /// Clock source behind `Instant` (tsc, kvm-clock, …).
    pub clocksource: Option<String>,
    /// `git rev-parse HEAD` of the source tree, if it is a git checkout.
    pub git_commit: Option<String>,
    /// Whether tracked files differ from that commit.
    pub git_dirty: Option<bool>,
    /// `rustc --version`, if rustc is on the PATH.
    pub rustc: Option<String>,
    /// Whether this binary was built with optimisations.
    pub optimised: bool,
}

fn read_trimmed(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Machine {
    /// Looks at /proc, git and rustc. Missing pieces are `None`.
    pub fn detect() -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        let cpu_model = field("model name");
        let virtualised = field("flags").map(|f| f.split_whitespace().any(|x| x == "hypervisor"));
        let src = env!("CARGO_MANIFEST_DIR");
        let git_commit = command_output("git", &["-C", src, "rev-parse", "HEAD"]);
        let git_dirty = git_commit.as_ref().and_then(|_| {
            command_output(
                "git",
                &["-C", src, "status", "--porcelain", "--untracked-files=no"],
            )
            .map(|s| !s.is_empty())
        });
        Machine {
            cpu_model,
            virtualised,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cores_available: crate::placement::Placement::pick().available,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            clocksource: read_trimmed(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ),
            git_commit,
            git_dirty,
            rustc: command_output("rustc", &["--version"]),
            optimised: !cfg!(debug_assertions),
        }
    }
}

/// Why writing results failed.
#[derive(Debug)]
pub enum ResultsError {
    /// Creating a directory or writing a file failed.
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A value could not be turned into JSON.
    Json {
        /// The file being written.
        path: PathBuf,
        /// The serialiser's error.
        source: serde_json::Error,
    },
    /// A row could not be written as CSV.
    Csv {
        /// The file being written.
        path: PathBuf,
        /// The CSV writer's error.
        source: csv::Error,
    },
    /// A plot could not be drawn.
    Plot {
        /// The file being written.
        path: PathBuf,
        /// The plotting error.
        source: PlotError,
    },
}

impl fmt::Display for ResultsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultsError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ResultsError::Json { path, source } => write!(f, "{}: {source}", path.display()),
            ResultsError::Csv { path, source } => write!(f, "{}: {source}", path.display()),
            ResultsError::Plot { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ResultsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResultsError::Io { source, .. } => Some(source),
            ResultsError::Json { source, .. } => Some(source),
            ResultsError::Csv { source, .. } => Some(source),
            ResultsError::Plot { source, .. } => Some(source),
        }
    }
}

/// UTC civil date and time of a Unix timestamp: (y, m, d, hh, mm, ss).
fn utc(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
    // days_from_civil inverse).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Current UTC time as `2024-05-01T12:00:00Z`.
pub fn utc_now_iso() -> String {
    let (y, mo, d, h, mi, s) = utc(now_secs());
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Current UTC time as `20240501-120000`, for directory names.
pub fn utc_now_compact() -> String {
    let (y, mo, d, h, mi, s) = utc(now_secs());
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

/// A results directory being written.
#[derive(Debug, Clone)]
pub struct ResultsDir {
    path: PathBuf,
    experiment: String,
}

#[derive(Serialize)]
struct ConfigFile<'a, C: Serialize> {
    experiment: &'a str,
    created_utc: String,
    command_line: Vec<String>,
    bench_version: &'static str,
    config: &'a C,
    machine: Machine,
}

impl ResultsDir {
    /// Creates `<base>/<experiment>-<UTC timestamp>/` (base defaults to
    /// [`DEFAULT_BASE`]); a numeric suffix is added if that exists already.
    pub fn create(experiment: &str, base: Option<&Path>) -> Result<Self, ResultsError> {
        let base = base.unwrap_or(Path::new(DEFAULT_BASE));
        let stem = format!("{experiment}-{}", utc_now_compact());
        let mut path = base.join(&stem);
        let mut n = 2;
        while path.exists() {
            path = base.join(format!("{stem}-{n}"));
            n += 1;
        }
        Self::at(experiment, path)
    }

    /// Uses exactly `path` (created if missing; files in it are replaced).
    pub fn at(experiment: &str, path: impl Into<PathBuf>) -> Result<Self, ResultsError> {
        let path = path.into();
        fs::create_dir_all(&path).map_err(|source| ResultsError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(ResultsDir {
            path,
            experiment: experiment.to_string(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Path of a file `name` in the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    fn write_bytes(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, ResultsError> {
        let path = self.file(name);
        fs::write(&path, bytes).map_err(|source| ResultsError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes `config.json`: the experiment's configuration plus the
    /// command line, the time, the machine and the build.
    pub fn write_config<C: Serialize>(&self, config: &C) -> Result<PathBuf, ResultsError> {
        let file = ConfigFile {
            experiment: &self.experiment,
            created_utc: utc_now_iso(),
            command_line: std::env::args().collect(),
            bench_version: env!("CARGO_PKG_VERSION"),
            config,
            machine: Machine::detect(),
        };
        self.write_json("config.json", &file)
    }

    /// Writes `value` as pretty JSON to `name`.
    pub fn write_json<T: Serialize + ?Sized>(
        &self,
        name: &str,
        value: &T,
    ) -> Result<PathBuf, ResultsError> {
        let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| ResultsError::Json {
            path: self.file(name),
            source,
        })?;
        bytes.push(b'\n');
        self.write_bytes(name, &bytes)
    }

    /// Writes `rows` (structs of plain fields) as CSV to `name`, with a
    /// header row from the field names.
    pub fn write_csv<R: Serialize>(&self, name: &str, rows: &[R]) -> Result<PathBuf, ResultsError> {
        let path = self.file(name);
        let csv_err = |source| ResultsError::Csv {
            path: path.clone(),
            source,
        };
        let mut w = csv::Writer::from_path(&path).map_err(csv_err)?;
        for row in rows {
            w.serialize(row).map_err(csv_err)?;
        }
        w.flush().map_err(|source| ResultsError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes a [`Table`] as CSV to `name`.
    pub fn write_table(&self, name: &str, table: &Table) -> Result<PathBuf, ResultsError> {
        let path = self.file(name);
        let csv_err = |source| ResultsError::Csv {
            path: path.clone(),
            source,
        };
        let mut w = csv::Writer::from_path(&path).map_err(csv_err)?;
        w.write_record(&table.headers).map_err(csv_err)?;
        for row in &table.rows {
            w.write_record(row).map_err(csv_err)?;
        }
        w.flush().map_err(|source| ResultsError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes `summary.md`.
    pub fn write_summary(&self, markdown: &str) -> Result<PathBuf, ResultsError> {
        self.write_bytes("summary.md", markdown.as_bytes())
    }

    /// Draws to `name` with `render`, naming the file in its error.
    fn draw(
        &self,
        name: &str,
        render: impl FnOnce(&Path) -> Result<(), PlotError>,
    ) -> Result<PathBuf, ResultsError> {
        let path = self.file(name);
        render(&path).map_err(|source| ResultsError::Plot {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Draws `chart` to `name` (an `.svg` file).
    pub fn line_chart(&self, name: &str, chart: &LineChart) -> Result<PathBuf, ResultsError> {
        self.draw(name, |path| chart.render_svg(path))
    }

    /// Draws `chart` to `name` (an `.svg` file).
    pub fn bar_chart(&self, name: &str, chart: &BarChart) -> Result<PathBuf, ResultsError> {
        self.draw(name, |path| chart.render_svg(path))
    }

    /// Draws `chart` to `name` (an `.svg` file).
    pub fn hbar_chart(&self, name: &str, chart: &HBarChart) -> Result<PathBuf, ResultsError> {
        self.draw(name, |path| chart.render_svg(path))
    }

    /// Renders the SVG `name` in this directory beside it as PNG (same
    /// name, `.png`), at 1.5 times its size; returns the PNG's path.
    pub fn png_of(&self, name: &str) -> Result<PathBuf, ResultsError> {
        let svg = self.file(name);
        let png = svg.with_extension("png");
        crate::plot::svg_to_png(&svg, &png, 1.5).map_err(|source| ResultsError::Plot {
            path: png.clone(),
            source,
        })?;
        Ok(png)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(utc(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(utc(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(utc(1_700_000_000), (2023, 11, 14, 22, 13, 20));
        assert_eq!(utc(4_107_542_399), (2100, 2, 28, 23, 59, 59));
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Row {
        size: u32,
        mpps: f64,
        name: String,
    }

    #[test]
    fn writes_parseable_json_and_csv() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ResultsDir::create("unit", Some(tmp.path())).unwrap();
        assert!(dir.path().starts_with(tmp.path()));
        assert!(dir
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("unit-"));
        let again = ResultsDir::create("unit", Some(tmp.path())).unwrap();
        assert_ne!(
            again.path(),
            dir.path(),
            "a second run gets its own directory"
        );

        #[derive(Serialize)]
        struct Cfg {
            size: u32,
        }
        let cfg = dir.write_config(&Cfg { size: 64 }).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&fs::read(cfg).unwrap()).unwrap();
        assert_eq!(v["experiment"], "unit");
        assert_eq!(v["config"]["size"], 64);
        assert!(v["machine"]["cores"].as_u64().unwrap() >= 1);
        assert!(v["created_utc"].as_str().unwrap().ends_with('Z'));

        let rows = vec![
            Row {
                size: 64,
                mpps: 55.5,
                name: "a,b".into(),
            },
            Row {
                size: 1518,
                mpps: 4.0,
                name: "c".into(),
            },
        ];
        let json = dir.write_json("data.json", &rows).unwrap();
        let back: Vec<Row> = serde_json::from_slice(&fs::read(json).unwrap()).unwrap();
        assert_eq!(back, rows);

        let csv_path = dir.write_csv("data.csv", &rows).unwrap();
        let mut r = csv::Reader::from_path(csv_path).unwrap();
        assert_eq!(r.headers().unwrap(), vec!["size", "mpps", "name"]);
        let back: Vec<Row> = r.deserialize().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, rows);

        let mut t = Table::new(["variant", "mpps"]);
        t.push(["x|y", "1.5"]);
        let tp = dir.write_table("table.csv", &t).unwrap();
        let mut r = csv::Reader::from_path(tp).unwrap();
        let rec: Vec<csv::StringRecord> = r.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(&rec[0][0], "x|y");
        assert!(t.markdown().contains("x\\|y"));

        let s = dir.write_summary("# hello\n").unwrap();
        assert_eq!(fs::read_to_string(s).unwrap(), "# hello\n");
    }
}
