//! Fuzz targets: each a function that takes arbitrary bytes, must never
//! panic or hang on any of them, and panics when an invariant it checks
//! does not hold (which is how a fuzzer, or a regression test replaying a
//! finding, sees the bug).
//!
//! The same functions serve three callers: the AFL++ entry point
//! (`src/bin/afl.rs`, built by `cargo afl build --features afl`), the
//! replayer (`enso-fuzz-replay TARGET FILE...`), and the regression tests
//! in `tests/`, which replay the checked-in seed corpora and every input
//! that once found a bug.

pub mod engine;
pub mod frames;
pub mod input;
pub mod kv;
pub mod memif;
pub mod pcap;
pub mod seeds;
pub mod steering;

/// A fuzz target: its name (the corpus directory under `fuzz/corpus/`)
/// and its harness.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, in the order `fuzz/run.sh` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "frames",
        run: frames::run,
    },
    Target {
        name: "steering",
        run: steering::run,
    },
    Target {
        name: "pcap",
        run: pcap::run,
    },
    Target {
        name: "kv",
        run: kv::run,
    },
    Target {
        name: "engine",
        run: engine::run,
    },
    Target {
        name: "memif",
        run: memif::run,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
