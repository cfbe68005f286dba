//! The emulated NIC.
