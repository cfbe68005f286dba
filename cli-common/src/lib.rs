//! What every binary of the workspace does the same way on its command
//! line: a usage error is one line, seconds flags are checked, an
//! interrupt stops a run, and threads are pinned to cores that exist.
//! Shared by the emulator's binaries, the applications, the packet
//! generator and the benchmarks, none of which needs the others for it.

#![deny(missing_docs)]

pub mod args;
pub mod cores;
