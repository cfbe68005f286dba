//! Application logic for the Ensō experiments, independent of the NIC.
//!
//! (crate docs being written)

#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod hash;
pub mod packet;
