//! What running a device can fail with.

use std::path::PathBuf;

use crate::engine::{AttachError, EngineError};

/// Why a running device did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum NicError {
    /// The device was stopped before the request reached it.
    #[error("device stopped")]
    DeviceStopped,
    /// The engine did not answer an attach in time (an attachment it makes
    /// later is undone).
    #[error("device did not answer within {0} ms")]
    AttachTimeout(u128),
    /// The engine refused the attach.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// The engine thread has stopped.
    #[error("the NIC engine has stopped")]
    EngineStopped,
    /// The engine thread did not answer in time.
    #[error("the NIC engine did not answer")]
    NoAnswer,
    /// The engine thread panicked.
    #[error("the NIC engine thread failed")]
    EngineFailed,
    /// The counters could not be written as JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

impl From<NicError> for String {
    fn from(e: NicError) -> Self {
        e.to_string()
    }
}

/// Why a device did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The control socket's path is too long for a Unix socket.
    #[error("{}: too long for a Unix socket path ({len} bytes; shorten the device name or its directory)", .path.display())]
    SocketPath {
        /// The socket's path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
    },
    /// Binding the control socket failed.
    #[error("{}: {source}", .path.display())]
    Bind {
        /// The socket's path.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// Setting up the control socket or starting a thread failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The engine was not made.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<StartError> for String {
    fn from(e: StartError) -> Self {
        e.to_string()
    }
}
