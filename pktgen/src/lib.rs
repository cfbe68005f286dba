//! Packet generator for the emulated Ensō NIC: everything the real EnsōGen
//! does (pcap replay at a rate, RTT from NIC timestamps, RTT histogram file,
//! periodic statistics, CSV) plus what users of DPDK Pktgen, MoonGen and TRex
//! expect from a generator (synthetic traffic with size mixes and address or
//! port ranges, rates in Gb/s or Mpps, HDR latency percentiles next to loss,
//! JSON reports, an RFC 2544 zero-loss throughput search).
//!
//! The parts that do not touch the NIC:
//!
//! | module     | job                                                        |
//! |------------|------------------------------------------------------------|
//! | [`rate`]   | rate strings, pps ↔ Gb/s, the NIC rate limiter's num/den   |
//! | [`pcap`]   | reading replay sets, 64 B-aligned TX streams, writing captures |
//! | [`traffic`]| synthetic traffic: sizes, flows, address and port ranges   |
//! | [`stats`]  | counters, EnsōGen's CSV, live lines, latency histograms, loss |
//! | [`search`] | the zero-loss throughput search, over any [`search::Trial`] |
//! | [`report`] | the JSON report                                            |
//! | [`cli`]    | command-line arguments and their validation                |
//! | [`threads`]| one thread or two, from the cores the process may use      |
//!
//! The parts that run traffic through a NIC, with the `enso` library:
//!
//! | module        | job                                                     |
//! |---------------|---------------------------------------------------------|
//! | [`stream`]    | the frames of a run, laid out once for the NIC          |
//! | [`session`]   | device handles and pipes; one run: send, receive, count |
//! | [`zeroloss`]  | the zero-loss search's trials against a device          |
//! | [`inprocess`] | a NIC and an echo server in this process                |
//! | [`app`]       | the `pktgen` command                                    |
//!
//! # Sizes and rates: one convention
//!
//! A frame *length* is the frame as software sees it in memory (a pipe, a
//! pcap record): Ethernet header to the end of the payload, without the FCS.
//! A frame *size* is what RFC 2544 and the Ensō paper call a "64 B packet":
//! the Ethernet frame with its 4 B FCS. `size = length + 4`.
//!
//! Goodput counts frame lengths; throughput adds 24 B per frame (4 B FCS,
//! 8 B preamble, 12 B inter-frame gap), exactly as EnsōGen counts. A rate in
//! Gb/s is a throughput, so `line` (100 Gb/s) at size 64 is 148.81 Mpps.

#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod app;
pub mod cli;
pub mod image;
pub mod inprocess;
pub mod pcap;
pub mod rate;
pub mod report;
pub mod search;
pub mod session;
pub mod stats;
pub mod stream;
pub mod threads;
pub mod traffic;
pub mod zeroloss;

mod serde_util;
