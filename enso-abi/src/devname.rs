//! Device names, and where a device's directory is.
//!
//! A device `name` lives in `<dir>/enso-<name>` (`/dev/shm` by default).
//! The name is one path component, so no name can reach outside `<dir>`
//! (`nm/../enso-x` and `..` are refused): every program that takes a name
//! goes through [`path`].

use std::path::{Path, PathBuf};

/// Longest device name (bytes): `enso-<name>` stays well within a path
/// component's 255. (A device that listens for other processes also needs
/// its socket path within 107 bytes, which is checked where it listens.)
pub const MAX_NAME: usize = 200;

/// Checks a device name: one path component of `[A-Za-z0-9._-]`, starting
/// with a letter, digit or `_`, 1 to [`MAX_NAME`] bytes.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok_first = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let ok = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.');
    let b = name.as_bytes();
    if b.is_empty() || b.len() > MAX_NAME || !ok_first(b[0]) || !b.iter().all(|&c| ok(c)) {
        return Err(format!(
            "bad device name {name:?}: use 1 to {MAX_NAME} letters, digits, '.', '_' or '-', starting with a letter, digit or '_'"
        ));
    }
    Ok(())
}

/// The directory of device `name` under `parent`, once the name is checked.
pub fn path(parent: &Path, name: &str) -> Result<PathBuf, String> {
    check_name(name)?;
    Ok(parent.join(entry_name(name)))
}

/// The directory entry of device `name`: `enso-<name>`.
pub fn entry_name(name: &str) -> String {
    format!("enso-{name}")
}

/// The MAC address of port `port` of device `name`: locally administered
/// and unicast (`02:45:` then three bytes of a hash of the name, then the
/// port), the same on both sides and in every run, so a peer's neighbour
/// table stays right across restarts.
pub fn port_mac(name: &str, port: usize) -> [u8; 6] {
    // FNV-1a: small, stable across releases (std's hashers are not).
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    [
        0x02,
        0x45,
        (h >> 16) as u8,
        (h >> 8) as u8,
        h as u8,
        port as u8,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_macs_are_local_unicast_and_differ_by_device_and_port() {
        let a = port_mac("dev0", 0);
        assert_eq!(a[0] & 0b11, 0b10, "locally administered, unicast");
        assert_eq!(a, port_mac("dev0", 0));
        assert_ne!(a, port_mac("dev0", 1));
        assert_ne!(a, port_mac("dev1", 0));
        assert_eq!(port_mac("dev0", 1)[5], 1);
    }

    #[test]
    fn names_are_one_safe_component() {
        for ok in ["dev0", "a", "_x", "bench-12-3.a_b", &"n".repeat(MAX_NAME)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "nm/../enso-nm",
            "a/b",
            "-x",
            ".hidden",
            "a b",
            "a\0b",
            "é",
            &"n".repeat(MAX_NAME + 1),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.starts_with("bad device name"), "{bad}: {e}");
        }
    }
}
