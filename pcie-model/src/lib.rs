//! PCIe transaction-layer accounting and the closed-form bytes-per-packet model.
//!
//! Not implemented yet: this crate is being written.
