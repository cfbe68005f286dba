//! The engine: the emulated NIC's hardware, as a state machine that runs one
//! bounded slice of work per [`Engine::step`].
//!
//! The engine only touches memory that applications handed it (their DMA
//! region and their posted-write queue) and only through the structures of
//! [`crate::layout`]. Every address an application gives it is checked
//! against that application's region first (the emulated IOMMU); anything
//! out of range is refused and counted, never followed.
//!
//! # Rooms
//!
//! One module per job. [`Engine`] owns the ports and a `Core` (everything
//! else); each room below `step` adds the behaviour of its job to `Core` in
//! an `impl Core` block of its own. From the bottom up, each room using
//! (importing or calling) only rooms before it in this list, with the one
//! exception named after it:
//!
//! - `evict`: cache-line eviction, prefetching and streaming stores.
//! - `limiter`: a port's TX rate limiter (token bucket).
//! - `shared`: an attached application, its shared memory and the checked
//!   accessors to it; uses `evict`.
//! - `state`: `Core` and the per-pipe, per-run, per-queue state it holds;
//!   uses `shared`, `limiter`.
//! - `notify`: RX notifications (reactive, per packet, prefetching by head
//!   rewrite, owed); uses `state`, `shared`.
//! - `runs`: the fast path for runs of a generator's frames; uses `state`,
//!   `shared`, `evict`.
//! - `desc`: the packetized (descriptor-ring) interface, its registers, RX
//!   and TX; uses `state`, `shared`, `limiter`, the ports.
//! - `config_notif`: configuration notifications; uses `state`, `shared`,
//!   `limiter`, `desc`.
//! - `mmio`: posted register writes; uses `state`, `shared`, `notify`,
//!   `runs`, `desc`.
//! - `rx`: the RX path of pipes, and the generator's frames on their way in
//!   (to runs, or the whole way); uses `state`, `shared`, `evict`, `notify`,
//!   `runs`, `desc`, `mmio`.
//! - `tx`: the TX path of pipes; uses `state`, `shared`, `limiter`,
//!   `config_notif`, the ports.
//! - `step`: [`Engine`], its construction, the step loop, its controls and
//!   counters; uses the rooms above.
//! - `attach`: attaching and detaching applications; uses `step`, `state`,
//!   `shared`, `mmio`, `tx`, `desc`.
//! - `park`: when the engine may sleep, its wake file, and waking the
//!   applications that wait; uses `step`, `shared`.
//!
//! The exception is one call back up, by design: a frame for a descriptor
//! queue without a free descriptor applies its owner's posted register
//! writes first (`desc` calls `mmio`'s `Core::look_before_drop`, as `rx`
//! does for pipes), and applying them reaches `desc`'s register handler.
//! Both are methods of `Core`: no module imports the other, and the `use`
//! imports between rooms form no cycle.
//!
//! Outside the engine, the ports ([`crate::port`]) and the configuration
//! ([`crate::config`]) lie below it: the ports use [`crate::clock`] (still
//! named `engine::Clock` in `port.rs`), and the configuration uses neither
//! the ports nor the engine.

mod attach;
mod config_notif;
mod desc;
mod evict;
mod limiter;
mod mmio;
mod notify;
mod park;
mod runs;
mod rx;
mod shared;
mod state;
mod step;
mod tx;

pub use crate::clock::Clock;

/// Why an engine was not made.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The settings were refused.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The device directory was not made.
    #[error(transparent)]
    DevDir(#[from] crate::devdir::DevDirError),
    /// A port's backend could not be opened.
    #[error(transparent)]
    Port(#[from] crate::port::PortError),
    /// The device's wake file was not made.
    #[error("cannot make the device's wake file: {0}")]
    WakeFile(std::io::Error),
}

impl From<EngineError> for String {
    fn from(e: EngineError) -> Self {
        e.to_string()
    }
}
pub use attach::AttachError;
pub use config_notif::MAX_RULES_PER_APP;
pub use enso_abi::control::{AttachInfo, AttachRequest};
pub use park::{WakeFile, BACKEND_PARK, LIMITER_PARK, MAX_PARK};
pub use state::TraceEvent;
pub use step::Engine;

/// The cache-line instructions this CPU gives the engine, which choose
/// some of its code paths (and so its instruction counts): `clflushopt`,
/// `prefetchw`, non-temporal stores; e.g. `"clflushopt,prefetchw,nt"`.
pub fn line_ops() -> String {
    [
        (evict::supported(), "clflushopt"),
        (evict::prefetch_for_write_supported(), "prefetchw"),
        (evict::non_temporal_supported(), "nt"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| *name)
    .collect::<Vec<_>>()
    .join(",")
}
