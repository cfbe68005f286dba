//! The applications of the Ensō experiments: their logic, independent of
//! the NIC, and the code that runs it on either NIC interface.
//!
//! The paper evaluates four applications on both NIC interfaces: the Maglev load balancer, NitroSketch telemetry, a MICA-like
//! key-value store and a log monitor. For the comparison to be fair their
//! processing logic must be the same on both sides; only the code that
//! receives and sends changes. The application modules are that shared
//! logic and know nothing about pipes, descriptors or the emulated NIC:
//! every entry point takes bytes and says what to do with them. [`nic`]
//! runs them on the emulated NIC (Ensō pipes or descriptor queues),
//! [`load`] sends them traffic through TX pipes, and [`cli`] is what the
//! binaries share. The threaded throughput trials of the experiments
//! (`bench::app_trial`, and its binary `app-trial`) are in the `bench`
//! crate.
//!
//! # Entry points
//!
//! | application | per-packet entry point | result |
//! |---|---|---|
//! | [`maglev`] | [`Maglev::process`](maglev::Maglev::process)`(&mut [u8])` | frame rewritten in place, [`Verdict::Forward`] |
//! | [`telemetry`] | [`Telemetry::process`](telemetry::Telemetry::process)`(&[u8])` | [`Verdict::Consume`] |
//! | [`kv`] | [`KvServer::handle`](kv::KvServer::handle)`(&[u8], &mut [u8])` | response frame written into the caller's buffer (up to 1536 B), its length |
//! | [`logmon`] | [`LogMonitor::process`](logmon::LogMonitor::process)`(&[u8])` per packet, or [`LogScanner::scan`](logmon::LogScanner::scan)`(&[u8]) -> usize` on a bytestream | [`Verdict::Consume`] / bytes consumed |
//!
//! Frames are whole Ethernet frames without FCS. A handler that cannot use
//! a frame (too short, not IPv4, bad lengths) counts it and returns
//! [`Verdict::Drop`] or an error; it never panics. The per-packet paths do
//! not allocate, lock or make system calls: tables, logs, sketches and
//! scratch buffers are sized when the application is built.
//!
//! Each module also carries the traffic side of its experiment: Maglev's
//! "16 flows" and "SYN flood" workloads, the KV client (Zipf 0.99, 95% or
//! 50% GET) with response checking, Zipf flow traces for the sketch, and a
//! seeded log generator.
//!
//! # Modules
//!
//! * [`echo`]: the echo server of the microbenchmarks.
//! * [`packet`]: zero-copy Ethernet/IPv4/UDP/TCP views, 5-tuples, address
//!   rewriting with incremental checksums, frame building.
//! * [`net`]: checked views of Ethernet, ARP, IPv4, IPv6, UDP, ICMP and
//!   ICMPv6 (the `netview` crate's, re-exported), the host logic that
//!   answers ARP, neighbour discovery and pings for a server's addresses,
//!   and UDP reflection (`echo --reflect`).
//! * [`maglev`], [`kv`], [`telemetry`], [`logmon`]: the applications; each
//!   module's documentation gives its design and where it departs from the
//!   system the paper used.
//! * [`hash`], [`zipf`]: seeded hashing and an exact Zipf sampler shared by
//!   the applications and their workloads.
//! * [`nic`]: the drivers (`PacketHandler` ones come from `enso`; reply and
//!   stream drivers are here) and the [`nic::AppDriver`] trait over all.
//! * [`load`]: TX-pipe clients: the KV workload with latency, a log source.
//! * [`cli`]: flags, device opening and the serving loop of the binaries.
//!
//! # Binaries
//!
//! `maglev`, `telemetry`, `kv`, `logmon` serve a port of a running
//! `nic-emu` device on either interface (`--interface enso|packetized`);
//! `kv-client` and `log-client` send their traffic from another port;
//! `echo` is the echo server. The demonstration, which runs the emulated
//! NIC in its own process, is the `enso-demo` crate's binary.

#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod cli;
pub mod echo;
pub mod hash;
pub mod kv;
pub mod load;
pub mod logmon;
pub mod maglev;
pub mod net;
pub mod nic;
pub mod packet;
pub mod telemetry;
pub mod zipf;

/// What to do with a frame after an application handled it in place (the
/// same type the interface drivers of `enso` act on).
pub use enso::app::Verdict;

#[cfg(test)]
mod tests {
    /// Handlers are built on one thread and run on a worker core.
    #[test]
    fn handlers_can_move_to_worker_threads() {
        fn assert_send<T: Send>() {}
        assert_send::<crate::maglev::Maglev>();
        assert_send::<crate::kv::KvServer>();
        assert_send::<crate::kv::KvClient>();
        assert_send::<crate::telemetry::Telemetry>();
        assert_send::<crate::logmon::LogMonitor>();
        fn assert_sync<T: Sync>() {}
        assert_sync::<crate::maglev::BackendPool>();
        assert_sync::<crate::logmon::LogPatterns>();
    }
}
