//! A pcap port's capture file (`tx=`), where others can write (`/tmp`):
//! a link planted at its path is refused, never followed; what the port
//! makes is 0644.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nic_emu::backend::pcap::PcapWire;
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

fn start(dir: &Path, tx: &Path) -> Result<Nic, String> {
    let mut cfg = DeviceConfig::new(
        "cap",
        WireConfig::Pcap(PcapWire::parse(&format!("tx={}", tx.display()))?),
    );
    cfg.dir = dir.to_path_buf();
    cfg.pipe_size = 64 << 10;
    cfg.notif_ring_entries = 256;
    Ok(Nic::start(cfg, RunOptions::default())?)
}

/// The process's umask, read without changing it.
fn umask() -> u32 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(l["Umask:".len()..].trim(), 8).unwrap()
}

#[test]
fn a_symlink_planted_at_the_capture_path_is_refused_and_its_target_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("precious");
    std::fs::write(&target, b"keep me").unwrap();
    let link = tmp.path().join("out.pcap");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = start(tmp.path(), &link).expect_err("wrote through a link");
    assert!(e.contains("symbolic link"), "{e}");
    assert!(e.contains(link.to_str().unwrap()), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 7);
    // A link to where nothing is yet makes nothing there either.
    std::fs::remove_file(&link).unwrap();
    let nowhere = tmp.path().join("nowhere");
    std::os::unix::fs::symlink(&nowhere, &link).unwrap();
    let e = start(tmp.path(), &link).expect_err("wrote through a dangling link");
    assert!(e.contains("symbolic link"), "{e}");
    assert!(!nowhere.exists());
    // The device left nothing behind, and starts once the path is clear.
    std::fs::remove_file(&link).unwrap();
    let nic = start(tmp.path(), &link).unwrap();
    nic.stop();
    let m = std::fs::metadata(&link).unwrap();
    assert!(m.file_type().is_file());
    assert_eq!(m.mode() & 0o7777, 0o644 & !umask());
    assert_eq!(m.len(), 24, "a pcap header and no frames");
}
