//! Unit tests of the entry points' failure handling.

use std::ffi::{CStr, CString};

use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

use super::*;
use crate::error::Failure;
use crate::guard::{guard, with_dev};

fn last_error_text() -> String {
    // SAFETY: a NUL-terminated string, valid until this thread's next failure.
    unsafe { CStr::from_ptr(enso_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_panic_becomes_an_error_code_with_its_message() {
    assert_eq!(guard(|| panic!("boom")), ENSO_ERR_INTERNAL);
    assert_eq!(last_error_text(), "internal error: boom");
    assert_eq!(guard(|| Ok(7)), 7);
    // A message with a NUL keeps what comes before it.
    assert_eq!(
        guard(|| Err(Failure::new(ENSO_ERR_INVALID, "bad\0tail"))),
        ENSO_ERR_INVALID
    );
    assert_eq!(last_error_text(), "bad");
}

#[test]
fn a_device_whose_call_panicked_refuses_further_calls_but_closes() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("c-poison-{}", std::process::id());
    let mut cfg = DeviceConfig::new(&name, WireConfig::Loopback);
    cfg.dir = dir.path().into();
    let nic = Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )
    .unwrap();
    let cname = CString::new(name).unwrap();
    let cdir = CString::new(dir.path().to_str().unwrap()).unwrap();
    let mut dev = std::ptr::null_mut();
    // SAFETY: valid strings and out pointer; `dev` is then a live
    // handle used by this thread only.
    unsafe {
        let rc = enso_device_open(cname.as_ptr(), cdir.as_ptr(), std::ptr::null(), &mut dev);
        assert_eq!(rc, ENSO_OK, "{}", last_error_text());
        assert_eq!(enso_device_port_count(dev), 1);
        let rc = with_dev(dev, |_| panic!("in the middle of something"));
        assert_eq!(rc, ENSO_ERR_INTERNAL);
        assert_eq!(enso_device_port_count(dev), ENSO_ERR_INTERNAL);
        assert!(last_error_text().contains("close it"));
        assert_eq!(enso_device_close(dev), ENSO_OK);
    }
    nic.stop();
}
