//! The host the emulated NIC runs on: pinning a thread to a core
//! ([`cores`]), which cores the NIC engine and the
//! application get ([`placement`]), how close those cores are right now
//! ([`probe`], a cross-core cache-line round trip), whether other work
//! shared them ([`contention`]), and the small helpers these need.
//!
//! The host may move two vCPUs between physical placements (two hardware
//! threads of one core, one core complex, different complexes) while a run
//! goes on, which moves absolute rates by up to 4x: every result that
//! compares rates prints a probe beside them.

pub mod contention;
pub use cli_common::cores;
pub mod placement;
pub mod probe;
pub mod stats;
pub mod wait;

/// Serde helpers: a `Duration` as whole nanoseconds.
pub mod duration_ns {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises as nanoseconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Deserialises from nanoseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_nanos(u64::deserialize(d)?))
    }
}
