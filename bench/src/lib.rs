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
//! An experiment is a module that implements [`interleave::Variant`] for each
//! thing it compares, runs them with [`interleave::Interleave`], and hands the
//! report to a [`results::ResultsDir`].

#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod contention;
pub mod frames;
pub mod interleave;
pub mod placement;
pub mod plot;
pub mod probe;
pub mod progress;
pub mod refring;
pub mod results;
pub mod stats;
mod wait;
