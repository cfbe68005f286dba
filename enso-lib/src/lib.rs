//! Ensō application library.
