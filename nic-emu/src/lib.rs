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
//! What it implements (see `FACTS.md` of the project for the real NIC):
//! Ensō pipes (64 B flits, frames back to back, one flit kept free, whole-frame
//! drops), notification buffers with RX and TX notification rings, reactive
//! and per-packet notifications, notification prefetching by head rewrite,
//! TX completions by overwriting the notification, configuration
//! notifications (flow binding, fallback pipes), flow steering, ports wired to
//! a loopback, a cable or a built-in traffic generator, counters for every
//! drop, and PCIe transaction accounting.

pub mod args;
pub mod cleanup;
pub mod config;
pub mod cores;
pub mod counters;
pub mod devdir;
pub mod device;
pub mod engine;
pub mod host;
pub mod layout;
pub mod port;
pub mod shm;
pub mod spec;
pub mod steering;
pub mod testframe;
pub mod wire;

pub use config::{
    DeviceConfig, GeneratorConfig, NotificationMode, ReplayFrames, SizeSpec, VerifyLevel,
    WireConfig,
};
pub use counters::{PipeWriteMode, Stats};
pub use device::{Nic, NicControl, RunOptions};
pub use engine::{AttachInfo, AttachRequest, Clock, Engine};

/// Resolution of CLOCK_MONOTONIC in nanoseconds (what timestamps and
/// round-trip times are measured with).
pub fn clock_resolution_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    if unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 1;
    }
    (ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64).max(1)
}

/// CLOCK_MONOTONIC in nanoseconds (comparable across processes).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to; CLOCK_MONOTONIC always
    // exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
