//! Wire backends: what is at the other end of a port when it is not one of
//! the built-in wires (null, loopback, cable, generator), each in a file of
//! its own and behind one trait, [`Backend`]:
//!
//! | wiring | file | peer | I/O |
//! |---|---|---|---|
//! | `pcap:rx=FILE[,tx=FILE][,loop=N\|inf][,rate=R]` | `pcap.rs` | capture files | read whole before the port starts; TX written by an I/O thread |
//! | `tap:NAME` | `tap.rs` | the kernel's network stack | one system call a frame, on an I/O thread |
//! | `afpacket:IFACE` | `afpacket.rs` | an existing Linux interface | memory-mapped rings, polled |
//! | `memif:socket=PATH[,...]` | `memif.rs` | DPDK's or VPP's memif | shared-memory rings, polled |
//!
//! The engine never blocks on a backend: [`Backend::receive`] and
//! [`Backend::transmit`] take no lock and make no system call (a backend
//! that needs one per frame runs an I/O thread of its own, joined to the
//! engine by bounded single-producer single-consumer queues,
//! [`io_thread`]); [`Backend::flush`] may make one system call per step,
//! and [`Backend::maintain`] (a few times a millisecond at most) does the
//! control-plane work. Every frame a backend cannot deliver or send is
//! counted under a named cause ([`Backend::drops`]), shown per port in
//! `nic-emu stats` and summed as `wire` in the device's drops.
//!
//! The built-in wires stay variants of the engine's own [`crate::port::Wire`]
//! enum rather than trait objects: the engine's per-frame paths inline them
//! (a generator's frames go straight into the RX path), which a call
//! through a trait object would not allow.
//!
//! Adding a backend: one file here implementing [`Backend`], its variant
//! in [`crate::config::WireConfig`], its line in [`crate::spec::parse_wire`]
//! and in [`open`].

use crate::config::WireConfig;

/// Why a port's backend was refused or could not be opened; each message
/// is one line naming the wiring, file or interface.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// Wiring options that do not parse or do not fit together.
    #[error("{0}")]
    Options(String),
    /// A file the port reads or writes (a capture, an output file).
    #[error("{}: {what}", .path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// An interface, socket or thread the port needs could not be opened.
    #[error("{0}")]
    Open(String),
}

impl From<BackendError> for String {
    fn from(e: BackendError) -> Self {
        e.to_string()
    }
}

/// The error about `path` that says `what`.
pub(crate) fn file_err(path: &std::path::Path, what: &dyn std::fmt::Display) -> BackendError {
    BackendError::File {
        path: path.to_path_buf(),
        what: what.to_string(),
    }
}

pub mod afpacket;
pub mod io_thread;
pub mod memif;
pub mod pcap;
pub mod rate;
pub mod staging;
pub mod tap;

/// Counters by name, as a backend reports them.
pub type Named = Vec<(&'static str, u64)>;

/// How often [`Backend::maintain`] is called (ns of the engine's clock).
pub const MAINTAIN_EVERY_NS: u64 = 1_000_000;

/// The far end of a port's wire.
pub trait Backend: Send + std::fmt::Debug {
    /// The wiring as `nic-emu stats` shows it (`pcap:rx=in.pcap`).
    fn describe(&self) -> String;
    /// Frames that arrived from the wire by `now` (ns): at most `budget`,
    /// each handed to `deliver` (the NIC's RX path); returns how many.
    fn receive(&mut self, now: u64, budget: usize, deliver: &mut dyn FnMut(&[u8])) -> usize;
    /// A frame the port sends at `now`. A frame the backend cannot take is
    /// counted under a cause of [`Backend::drops`].
    fn transmit(&mut self, frame: &[u8], now: u64);
    /// Ends a step's transmissions (at most one system call).
    fn flush(&mut self, _now: u64) {}
    /// Control-plane work, every [`MAINTAIN_EVERY_NS`] or so: accepting a
    /// peer, reading kernel counters.
    fn maintain(&mut self, _now: u64) {}
    /// The port has somewhere to put frames (a fallback pipe or queue, or
    /// a flow rule); called every step while it has. A pcap replay starts
    /// then, so that no frame is dropped for want of a listener.
    fn receivers_ready(&mut self, _now: u64) {}
    /// Counters that are not drops, by name (`rx_frames`, `connects`...).
    fn stats(&self) -> Named;
    /// Frames lost on the wire side, by cause (`kernel_drops`,
    /// `ring_full`, `oversize`, `peer_gone`...).
    fn drops(&self) -> Named;
    /// Whether the backend has sent everything it will (a bounded pcap
    /// replay that has finished); others never finish.
    fn finished(&self) -> bool {
        false
    }
    /// Flushes files and stops I/O threads; the device is stopping.
    fn finish(&mut self) {}
}

/// Opens the backend of a port wired as `cfg`, for port `port` of device
/// `device`; `None` for the built-in wires. Files are read and devices
/// opened here, before the engine runs: a wiring that cannot work is one
/// error naming what and why.
pub fn open(
    cfg: &WireConfig,
    device: &str,
    port: usize,
) -> Result<Option<Box<dyn Backend>>, BackendError> {
    let mac = enso_abi::devname::port_mac(device, port);
    Ok(Some(match cfg {
        WireConfig::Null
        | WireConfig::Loopback
        | WireConfig::Cable { .. }
        | WireConfig::Generator(_) => return Ok(None),
        WireConfig::Pcap(p) => Box::new(pcap::PcapPort::open(p)?),
        WireConfig::Tap(t) => Box::new(tap::TapPort::open(t, mac)?),
        WireConfig::AfPacket(a) => Box::new(afpacket::AfPacketPort::open(a)?),
        WireConfig::Memif(m) => Box::new(memif::MemifPort::open(m, device, port)?),
    }))
}
