//! The experiment harness for the emulated Ensō NIC.
//!
//! Every experiment on this project runs on a 2-vCPU machine whose cores the
//! host moves between physical placements, so absolute rates swing by up to
//! 4x from one minute to the next. The harness is built around that fact:
//!
//! - [`placement`] picks two distinct cores and pins threads to them;
//! - [`probe`] measures the cross-core cache-line round trip, printed next to
//!   every result so a reader can see which placement it was measured on;
//! - [`refring`] is the reference datapath: a well-built SPSC byte ring that
//!   carries frames between the two cores the way an Ensō pipe does. It is
//!   the physical limit of this machine for that datapath;
//! - [`interleave`] runs short trials of several variants alternately and
//!   reports per-round ratios, the only comparison that survives the swings;
//! - [`results`] writes a results directory (configuration, machine, commit,
//!   JSON, CSV, summary, plots) and shows progress;
//! - [`plot`] draws line and grouped bar charts as SVG;
//! - [`contention`] tells whether a run had its cores to itself (thread
//!   preemptions, host steal time);
//! - [`frames`] builds the Ethernet/IPv4/UDP template frames the datapaths
//!   carry and finds a frame's length from its header.
//!
//! # How an experiment plugs in
//!
//! An experiment is a module that implements [`interleave::Variant`] for each
//! thing it compares (or wraps a closure with [`interleave::variant`]), runs
//! them with [`interleave::Interleave`], and hands the report to a
//! [`results::ResultsDir`]. The reference datapath is itself a variant
//! ([`refring::RefVariant`]), so any datapath can be reported as a fraction of
//! the machine's limit measured in the same rounds.
//!
//! ```
//! use std::time::Duration;
//! use bench::interleave::{variant, Interleave, TrialResult};
//! use bench::placement::Placement;
//! use bench::plot::BarChart;
//! use bench::progress::Progress;
//! use bench::results::ResultsDir;
//!
//! // Two stand-in datapaths; a real one starts its threads on the
//! // placement's cores, runs for `d`, stops them and reports.
//! let trial = |pps: u64| move |d: Duration| TrialResult {
//!     packets: pps * d.as_millis() as u64 / 1000,
//!     bytes: 60 * pps * d.as_millis() as u64 / 1000,
//!     elapsed: d,
//!     busy_ns: [("app".to_string(), d.as_nanos() as u64)].into(),
//!     ..Default::default()
//! };
//! let mut baseline = variant("packetized", trial(1_000_000));
//! let mut streaming = variant("enso", trial(3_000_000));
//!
//! let placement = Placement::pick();
//! let plan = Interleave::new(Duration::from_millis(5)).rounds(3).no_probe();
//! let mut progress = Progress::new("example", plan.expected_rounds(2) as u64, true);
//! let report = plan.run_with(&placement, &mut [&mut baseline, &mut streaming], &mut progress);
//! assert_eq!(report.ratio("enso", "packetized").unwrap().median, 3.0);
//!
//! let tmp = tempfile::tempdir().unwrap();
//! let dir = ResultsDir::create("example", Some(tmp.path()))?;
//! dir.write_config(&plan)?;
//! dir.write_json("report.json", &report)?;
//! dir.write_table("trials.csv", &report.trial_table())?;
//! dir.write_summary(&report.markdown())?;
//! let rates = report.variants.iter().map(|v| v.median_mpps).collect();
//! dir.bar_chart("rate.svg", &BarChart::new("64 B", "Mpps", ["echo"]).series("median", rates))?;
//! # Ok::<(), bench::results::ResultsError>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod app_trial;
pub mod breakdown;
pub mod cache;
pub use hostcpu::{contention, placement, probe, stats, wait};
pub mod echo;
pub mod emu;
pub mod frames;
pub mod interleave;
pub mod isolation;
pub mod latency;
pub mod pcie;
// perf_event_open needs a system call and ioctls on its descriptors.
#[allow(unsafe_code)]
pub mod perf;
pub mod plot;
pub mod predict;
pub mod progress;
pub mod refring;
pub mod results;
pub mod scaling;
pub mod soak;
pub mod stepped;
pub mod wire;
