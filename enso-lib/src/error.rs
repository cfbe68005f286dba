//! One error type per operation.

use nic_emu::wire::FrameError;

/// Opening or attaching to a device failed.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The device refused or could not be reached.
    #[error("device: {0}")]
    Device(String),
    /// Mapping its shared memory failed.
    #[error("mapping shared memory: {0}")]
    Io(#[from] std::io::Error),
    /// Options that cannot work (e.g. zero credits).
    #[error("bad options: {0}")]
    Options(String),
    #[error(transparent)]
    Stalled(#[from] DeviceError),
}

/// Allocating a pipe failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    /// Every pipe id reserved at attach time is in use.
    #[error("no free pipe (attached with {0} pipes)")]
    NoPipes(u32),
    /// The device has no such port.
    #[error("no port {0}")]
    NoPort(u32),
    /// The DMA region has no room left.
    #[error("DMA region exhausted")]
    NoMemory,
    /// Mapping the pipe failed.
    #[error("mapping the pipe: {0}")]
    Map(String),
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// The device stopped taking register writes or completing notifications,
/// or is gone.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum DeviceError {
    #[error("device stalled: posted-write queue did not drain")]
    MmioStalled,
    #[error("device stalled: TX notifications are not being completed")]
    TxStalled,
    /// The device closed the attachment: its process exited or was killed
    /// (see [`crate::Device::check_alive`]).
    #[error("device gone: it closed the attachment (its process exited)")]
    Gone,
}

/// Handing received bytes back failed; nothing was freed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FreeError {
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    #[error("freeing {asked} bytes but only {available} were received and not freed")]
    MoreThanReceived { asked: usize, available: usize },
    #[error("{0} bytes is not a multiple of 64")]
    Unaligned(usize),
    #[error("bytes of this pipe are still being sent")]
    InFlight,
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// Sending failed; nothing was sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    #[error("sending {asked} bytes but only {available} were received and not sent")]
    MoreThanReceived { asked: usize, available: usize },
    #[error("{0} bytes is not a multiple of 64")]
    Unaligned(usize),
    #[error("{asked} bytes do not fit in a TX pipe of {capacity}")]
    TooLarge { asked: usize, capacity: usize },
    #[error("no port {0}")]
    NoPort(u32),
    #[error("frame: {0}")]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A receive call failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecvError {
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A configuration request failed before reaching the NIC.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    /// A port, offset or rate out of range.
    #[error("value out of range")]
    BadValue,
    #[error(transparent)]
    Device(#[from] DeviceError),
}
