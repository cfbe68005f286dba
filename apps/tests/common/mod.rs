//! Helpers the binaries' integration tests share.

use nic_emu::{DeviceConfig, Nic, RunOptions};

/// Starts device `name` in `dir`, listening for applications, with these
/// port wirings (`nic-emu run --port` syntax).
pub fn listening_device(dir: &std::path::Path, name: &str, ports: &[&str]) -> Nic {
    let wires: Vec<_> = ports
        .iter()
        .map(|p| nic_emu::spec::parse_wire(p).unwrap())
        .collect();
    let mut cfg = DeviceConfig::new(name, wires[0].clone());
    cfg.ports = wires;
    cfg.dir = dir.into();
    Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )
    .expect("device starts")
}
