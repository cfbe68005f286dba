//! One error type per operation.

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
    /// Every RX (or RX/TX) pipe reserved at attach time is in use.
    #[error("no free RX pipe (attached with {0}; see DeviceOptions::pipes)")]
    NoPipes(u32),
    /// Every TX pipe reserved at attach time is in use.
    #[error("no free TX pipe (attached with {0}; see DeviceOptions::tx_pipes)")]
    NoTxPipes(u32),
    /// Every descriptor queue reserved at attach time is in use.
    #[error("no free descriptor queue (attached with {0}; see DeviceOptions::queues)")]
    NoQueues(u32),
    /// The handle was attached without a packet buffer pool.
    #[error("no packet buffer pool (attached with DeviceOptions::pool_buffers 0)")]
    NoPool,
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
    /// The device is gone: a standalone device closed the attachment (its
    /// process exited or was killed), or an in-process one was stopped (see
    /// [`crate::Device::check_alive`]).
    #[error("device gone: it was stopped or its process exited")]
    Gone,
}

/// Handing received bytes back failed; nothing was freed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FreeError {
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    #[error("{asked} bytes asked for, but only {available} are there (received and not yet freed, confirmed or returned)")]
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
    /// [`crate::Device::send`] of more bytes than the last
    /// [`crate::Device::tx_buf`] span (0 after a send).
    #[error(
        "sending {asked} bytes but only {reserved} were reserved with tx_buf since the last send"
    )]
    NotReserved { asked: usize, reserved: usize },
    #[error("no port {0}")]
    NoPort(u32),
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
