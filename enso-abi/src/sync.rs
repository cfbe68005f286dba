//! The atomics the shared-memory protocol is written with.
//!
//! Normally these are `core`'s. Built with `--cfg loom` they are the `loom`
//! crate's instead, so that the protocol's steps (the methods of the
//! [`crate::layout`] types) run unchanged under loom's model checker, which
//! tries every interleaving and every value the memory model allows a load
//! to see (`enso-abi/tests/loom.rs`):
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test --release -p enso-abi --test loom
//! ```
//!
//! Under loom the layout types are loom's larger atomics, not the shared
//! layout: only the models build them then, on the heap.

#[cfg(not(loom))]
pub use core::hint::spin_loop;
#[cfg(not(loom))]
pub use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Under loom a spin loop yields to the model's other threads.
#[cfg(loom)]
pub use loom::hint::spin_loop;
#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
