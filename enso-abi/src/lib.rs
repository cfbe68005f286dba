//! The contract between the emulated Ensō NIC and the applications that
//! use it, and nothing else: both sides depend on this crate, and the
//! application library depends on no part of the emulator.
//!
//! * [`layout`]: the shared-memory structures (register blocks, posted
//!   register writes, RX and TX notifications, descriptors), their sizes
//!   and who writes what with which ordering.
//! * [`shm`]: mapping the shared regions, the pipes' mirrored mapping.
//! * [`sync`]: the atomics the protocol is written with (loom's under
//!   `--cfg loom`, for the models in `tests/loom.rs`).
//! * [`wire`]: units (64 B flits) and frame delimiting (IPv4, IPv6, ARP,
//!   802.3, VLAN tags and opaque frames), steering keys.
//! * [`control`]: the attach protocol over the device's control socket,
//!   and the traits through which a device in the same process is attached.
//! * [`devname`]: device names and where a device's directory is.
//! * [`testframe`]: the self-checking test frames the NIC's traffic
//!   generator sends and the echo server returns.
//! * [`wake`]: parking without losing a wake-up (the engine's, an
//!   application's).
//!
//! # Models of the protocol
//!
//! `tests/loom.rs` holds loom models of the shared-memory protocol: the
//! posted register writes, RX notifications with pipe data and the
//! reactive rule, TX notifications, and the descriptor rings' write-backs,
//! each a NIC thread and a software thread running the [`layout`] types'
//! own steps under every interleaving loom explores. They need the atomics
//! swapped for loom's, so a build of their own (CI runs it, `.ci/run`):
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test --release -p enso-abi --test loom
//! ```

pub mod control;
pub mod devname;
pub mod layout;
pub mod shm;
pub mod sync;
pub mod testframe;
pub mod timestamp;
pub mod wake;
pub mod wire;

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
