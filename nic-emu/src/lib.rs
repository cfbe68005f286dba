//! An emulated Ensō NIC over shared memory.
//!
//! The NIC is an [`Engine`]: a state machine that behaves like the hardware.
//! It only touches shared memory that applications handed it — their DMA
//! region and their posted-write (register) queue — through the structures of
//! [`layout`], which the application library uses too. Run it stepped (call
//! [`Engine::step`]; deterministic tests), on a thread ([`Nic::start`]), or as
//! the standalone `nic-emu` process that applications in other processes
//! attach to through a Unix socket in the device directory.
//!
//! What it implements (the README says how each part follows the real NIC):
//! Ensō pipes (64 B flits, frames back to back, one flit kept free, whole-frame
//! drops), notification buffers with RX and TX notification rings, reactive
//! and per-packet notifications, notification prefetching by head rewrite,
//! TX completions by overwriting the notification, configuration
//! notifications (flow binding, fallback pipes), flow steering, ports wired to
//! a loopback, a cable, the built-in traffic generator or a real wire
//! ([`backend`]: pcap files, TAP, AF_PACKET, memif), counters for every
//! drop, and PCIe transaction accounting.

#![deny(missing_docs)]

pub use enso_abi::{layout, shm, testframe, wire};
/// Pinning threads to cores (the engine's thread, when asked).
pub use hostcpu::cores;

pub mod args;
pub mod backend;
pub mod cleanup;
mod clock;
pub mod config;
pub mod counters;
pub mod devdir;
pub mod device;
pub mod engine;
pub mod outfile;
pub mod port;
pub mod spec;
pub mod steering;

pub use config::{
    DeviceConfig, GeneratorConfig, HostTuning, NotificationMode, ReplayFrames, SizeSpec,
    VerifyLevel, WireConfig,
};
pub use counters::{PipeWriteMode, Stats};
pub use device::{ControlCounters, ControlLimits, EngineLoop, Nic, NicControl, RunOptions};
pub use engine::{AttachInfo, AttachRequest, Clock, Engine};

pub use enso_abi::{clock_resolution_ns, monotonic_ns};
