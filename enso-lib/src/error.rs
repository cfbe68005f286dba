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
    /// The device stalled while the handle was set up, or is gone.
    #[error(transparent)]
    Stalled(#[from] DeviceError),
}

/// Allocating a pipe failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    /// Every RX (or RX/TX) pipe reserved at attach time is in use, and
    /// the handle cannot ask for more (a stepped engine's).
    #[error("no free RX pipe (attached with {0}; a stepped engine grants no more)")]
    NoPipes(u32),
    /// The device grants no more pipe ids: the ids after the handle's are
    /// another application's, or past the device's
    /// [`MAX_PIPES`](enso_abi::layout::MAX_PIPES).
    #[error("no more RX pipes: {0}")]
    NoMorePipes(String),
    /// Not returned: TX pipes are allocated while the DMA region has room
    /// ([`AllocError::NoMemory`] once it has none). Kept for code that
    /// names it.
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
    /// The device stalled or is gone.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The NIC refused to make the new pipe or queue a fallback one (it
    /// stays allocated and enabled).
    #[error("the NIC refused the fallback entry: {0}")]
    Refused(String),
}

impl From<ConfigError> for AllocError {
    fn from(e: ConfigError) -> Self {
        match e {
            ConfigError::Device(d) => AllocError::Device(d),
            e => AllocError::Refused(e.to_string()),
        }
    }
}

/// The device stopped taking register writes or completing notifications,
/// or is gone.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum DeviceError {
    /// The NIC stopped taking register writes (the posted-write queue
    /// did not drain).
    #[error("device stalled: posted-write queue did not drain")]
    MmioStalled,
    /// The NIC stopped completing TX notifications.
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
    /// The pipe (or queue) belongs to another device handle.
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    /// More bytes than the pipe holds in the state the call needs.
    #[error("{asked} bytes asked for, but only {available} are there (received and not yet freed, confirmed or returned)")]
    MoreThanReceived {
        /// Bytes asked for.
        asked: usize,
        /// Bytes there.
        available: usize,
    },
    /// A byte count that is not a whole number of flits (64 B).
    #[error("{0} bytes is not a multiple of 64")]
    Unaligned(usize),
    /// Bytes of the pipe are still being sent: a free must wait for their
    /// completions ([`crate::Device::discard`] frees in order behind them).
    #[error("bytes of this pipe are still being sent")]
    InFlight,
    /// The device stalled or is gone.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// Sending failed; nothing was sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    /// The pipe (or queue) belongs to another device handle.
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    /// More bytes than the pipe holds in the state the call needs.
    #[error("sending {asked} bytes but only {available} were received and not sent")]
    MoreThanReceived {
        /// Bytes asked for.
        asked: usize,
        /// Bytes there.
        available: usize,
    },
    /// A byte count that is not a whole number of flits (64 B).
    #[error("{0} bytes is not a multiple of 64")]
    Unaligned(usize),
    /// More bytes than the TX pipe holds.
    #[error("{asked} bytes do not fit in a TX pipe of {capacity}")]
    TooLarge {
        /// Bytes asked for.
        asked: usize,
        /// The TX pipe's size.
        capacity: usize,
    },
    /// [`crate::Device::send`] of more bytes than the last
    /// [`crate::Device::tx_buf`] span (0 after a send).
    #[error(
        "sending {asked} bytes but only {reserved} were reserved with tx_buf since the last send"
    )]
    NotReserved {
        /// Bytes to send.
        asked: usize,
        /// Bytes the last `tx_buf` reserved.
        reserved: usize,
    },
    /// The device has no such port.
    #[error("no port {0}")]
    NoPort(u32),
    /// A frame to copy in that cannot be written as a frame
    /// ([`crate::batch::write_frame`]).
    #[error("cannot send the frame: {0}")]
    Frame(#[from] enso_abi::wire::FrameError),
    /// The device stalled or is gone.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A receive call failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecvError {
    /// The pipe (or queue) belongs to another device handle.
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    /// The device stalled or is gone.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A configuration call failed: before reaching the NIC (a foreign pipe,
/// a value out of range, the device gone), or refused by it (the reason).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// The pipe (or queue) belongs to another device handle.
    #[error("the pipe belongs to another device")]
    ForeignPipe,
    /// A port, offset or rate out of range.
    #[error("value out of range")]
    BadValue,
    /// The device stalled or is gone.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The NIC refused it: an argument out of range, an unknown
    /// configuration, or a pipe or queue that is not enabled.
    #[error("the NIC refused the configuration (bad argument, or a pipe not enabled)")]
    Refused,
    /// The NIC's flow table has no free slot for this flow (the rule was
    /// not installed).
    #[error("the NIC's flow table has no room for this flow")]
    TableFull,
    /// This application already holds as many flow rules as the NIC gives
    /// one application (the rule was not installed).
    #[error("flow rule quota reached: the NIC gives one application at most {0} rules")]
    QuotaReached(u32),
    /// The flow's rule belongs to another application: it is neither
    /// replaced nor removed.
    #[error("the flow's rule belongs to another application")]
    NotOwner,
    /// No rule for this flow to remove.
    #[error("no rule is bound for this flow")]
    NotBound,
}

/// Reading the NIC's counters ([`crate::Device::port_stats`]) failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StatsError {
    /// The device has no such port.
    #[error("no port {0}")]
    NoPort(u32),
    /// The device gives no counters (a stepped engine: ask it directly),
    /// or they could not be read or understood.
    #[error("NIC counters: {0}")]
    Unavailable(String),
}

/// Any error of the library. Every per-operation error converts into it
/// (`From`), so a function returning `Result<_, enso::Error>` can use `?`
/// on every call; the per-operation error is kept inside, unchanged, and
/// [`Error::device`] says whether the device itself failed.
///
/// ```
/// use enso::{Device, DeviceOptions, RxTxPipe};
///
/// fn setup(dev: &mut Device) -> Result<RxTxPipe, enso::Error> {
///     let pipe = dev.alloc_rxtx_pipe(true)?; // an AllocError
///     dev.set_fallback_round_robin(pipe, true)?; // a ConfigError
///     Ok(pipe)
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening or attaching failed.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// Allocating a pipe or queue failed.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// A receive call failed.
    #[error(transparent)]
    Recv(#[from] RecvError),
    /// Handing received bytes back failed.
    #[error(transparent)]
    Free(#[from] FreeError),
    /// Sending failed.
    #[error(transparent)]
    Send(#[from] SendError),
    /// A configuration request failed.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The device stalled or is gone.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A packet handler's driver failed.
    #[error(transparent)]
    Driver(#[from] crate::app::DriverError),
    /// Reading the NIC's counters failed.
    #[error(transparent)]
    Stats(#[from] StatsError),
}

impl Error {
    /// The device's own failure behind this error (it stalled or is gone),
    /// if that is what it was, whichever operation reported it.
    pub fn device(&self) -> Option<DeviceError> {
        use crate::app::DriverError as Dr;
        match self {
            Error::Device(e)
            | Error::Attach(AttachError::Stalled(e))
            | Error::Alloc(AllocError::Device(e))
            | Error::Recv(RecvError::Device(e))
            | Error::Free(FreeError::Device(e))
            | Error::Send(SendError::Device(e))
            | Error::Config(ConfigError::Device(e))
            | Error::Driver(Dr::Device(e))
            | Error::Driver(Dr::Recv(RecvError::Device(e)))
            | Error::Driver(Dr::Send(SendError::Device(e)))
            | Error::Driver(Dr::Free(FreeError::Device(e))) => Some(*e),
            _ => None,
        }
    }
}
