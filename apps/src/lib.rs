//! Application logic for the Ensō experiments, independent of the NIC.
//!
//! (crate docs being written)

#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod hash;
pub mod maglev;
pub mod packet;

/// What to do with a frame after an application handled it in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Transmit the frame as it now is in the buffer.
    Forward,
    /// The frame was handled and nothing is to be sent.
    Consume,
    /// The frame was unacceptable; the handler has counted it.
    Drop,
}
pub mod kv;
pub mod logmon;
pub mod telemetry;
pub mod zipf;
