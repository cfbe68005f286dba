//! The attach protocol: how an application gets its share of a device.
//!
//! A device listens on a Unix socket, [`CONTROL_SOCKET`], in its directory
//! (`<dir>/enso-<name>`, see [`crate::devname`]). An application sends one
//! JSON line, a [`ControlRequest`], and reads one back, a
//! [`ControlResponse`]: on success an [`AttachInfo`] naming its shared-memory
//! files, its pipe ids, its notification buffer and the device's sizes. It
//! keeps the connection open for as long as it is attached; closing it (or
//! exiting) detaches it. A device in the same process is attached through
//! [`LocalNic`] instead, with the same request and answer.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Name of the control socket in the device directory.
pub const CONTROL_SOCKET: &str = "control.sock";
/// Name of the stats snapshot in the device directory.
pub const STATS_FILE: &str = "stats.json";

/// How long an application waits for the device to answer an attach.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(10);

/// When the NIC writes RX notifications.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationMode {
    /// At most one outstanding notification per pipe (the default).
    #[default]
    Reactive,
    /// One notification for every frame (the paper's baseline).
    PerPacket,
    /// Reactive at the NIC; the library rewrites heads to prefetch the next
    /// pipe's notification (the library reads this setting).
    ReactivePrefetch,
}

impl NotificationMode {
    pub fn per_packet(self) -> bool {
        self == NotificationMode::PerPacket
    }
}

impl std::str::FromStr for NotificationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reactive" => Ok(Self::Reactive),
            "per-packet" | "per_packet" => Ok(Self::PerPacket),
            "prefetch" | "reactive-prefetch" | "reactive_prefetch" => Ok(Self::ReactivePrefetch),
            _ => Err(format!(
                "unknown notification mode '{s}' (reactive, per-packet, reactive-prefetch)"
            )),
        }
    }
}

/// What an application asks for when it attaches.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttachRequest {
    /// Pipe ids to reserve for it.
    pub pipes: u32,
    /// Size of its DMA region (sparse; pages are allocated when touched).
    pub dma_bytes: usize,
    /// Descriptor queue pairs (packetized interface) to reserve for it.
    #[serde(default)]
    pub desc_queues: u32,
}

/// What an attached application asks for when it needs more pipes than it
/// reserved at attach ([`ControlRequest::Extend`], [`LocalNic::extend`]).
/// Its pipe ids stay one range: the device grants the ids that follow it,
/// if no other application holds them. Its DMA region does not change:
/// the pipes must fit in the region it asked for at attach.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtendRequest {
    /// The application (its [`AttachInfo::app_id`]).
    pub app_id: u32,
    /// Pipe ids it holds in all after the extension (more than it holds).
    pub pipes: u32,
}

/// What an application gets when it attaches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttachInfo {
    pub app_id: u32,
    pub device: String,
    pub dma_path: PathBuf,
    pub dma_len: usize,
    pub mmio_path: PathBuf,
    /// Its pipes are `pipe_base .. pipe_base + pipe_count`.
    pub pipe_base: u32,
    pub pipe_count: u32,
    /// Its notification buffer.
    pub nbuf_id: u32,
    pub pipe_size: usize,
    pub notif_ring_entries: u32,
    pub notification_mode: NotificationMode,
    pub ports: usize,
    pub interconnect_latency_ns: u64,
    /// Its descriptor queues are `desc_queue_base .. + desc_queue_count`.
    pub desc_queue_base: u32,
    pub desc_queue_count: u32,
    /// The device's wake file ([`crate::layout::WAKE_FILE_LEN`] bytes):
    /// the engine's wake block, which the application's register writes
    /// wake when the engine is parked. `None`: an engine that never parks.
    #[serde(default)]
    pub wake_path: Option<PathBuf>,
}

/// A request on the control socket (one JSON line).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ControlRequest {
    Attach(AttachRequest),
    /// More pipe ids for an application attached through the same
    /// connection; answered with its [`AttachInfo`] as it now stands.
    Extend(ExtendRequest),
}

/// The answer (one JSON line).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlResponse {
    Attached(AttachInfo),
    Error(String),
}

/// Attaches over the control socket of the device in `dir`; the returned
/// stream must stay open for as long as the attachment is used.
pub fn attach_remote(dir: &Path, req: AttachRequest) -> Result<(AttachInfo, UnixStream), String> {
    let sock = dir.join(CONTROL_SOCKET);
    let mut s = UnixStream::connect(&sock)
        .map_err(|e| format!("cannot reach device at {}: {e}", sock.display()))?;
    let info = ask(&mut s, &ControlRequest::Attach(req))?;
    Ok((info, s))
}

/// Asks for more pipe ids over the connection an application attached
/// through ([`attach_remote`]); the answer is its attachment as it now
/// stands. The answer is waited for (at most [`ATTACH_TIMEOUT`]); the
/// connection is left non-blocking, as an attached library keeps it to
/// see, without waiting, whether the device closed it.
pub fn extend_remote(s: &mut UnixStream, req: ExtendRequest) -> Result<AttachInfo, String> {
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    let r = ask(s, &ControlRequest::Extend(req));
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    r
}

/// Sends one request line on `s` and reads one answer line.
fn ask(s: &mut UnixStream, req: &ControlRequest) -> Result<AttachInfo, String> {
    let mut line = serde_json::to_string(req).map_err(|e| e.to_string())?;
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(ATTACH_TIMEOUT))
        .map_err(|e| e.to_string())?;
    // Byte by byte: the device sends nothing after its answer line, and
    // nothing may be left buffered here that a later read should see.
    let mut resp = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match (&*s).read(&mut byte) {
            Ok(0) => return Err("device closed the connection".into()),
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if resp.len() >= MAX_ANSWER => return Err("answer too long".into()),
            Ok(_) => resp.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("device did not answer: {e}")),
        }
    }
    let resp = String::from_utf8_lossy(&resp);
    match serde_json::from_str::<ControlResponse>(resp.trim()) {
        Ok(ControlResponse::Attached(info)) => Ok(info),
        Ok(ControlResponse::Error(e)) => Err(e),
        Err(e) => Err(format!("bad answer from device: {e}")),
    }
}

/// Longest answer line read (bytes).
const MAX_ANSWER: usize = 64 << 10;

/// Whether a device runs in `dir`: something answers on its control
/// socket (what applications attach through). Otherwise the connection's
/// error (no socket: the device never ran or stopped cleanly; refused: its
/// process died and left the directory behind).
pub fn check_running(dir: &Path) -> std::io::Result<()> {
    UnixStream::connect(dir.join(CONTROL_SOCKET)).map(drop)
}

/// Why a device in this process refused a request: the device's own
/// error, whose message is what a standalone device would answer.
pub type LocalNicError = Box<dyn std::error::Error + Send + Sync>;

/// A device running in this process, attached to without a socket.
///
/// The emulated NIC implements it (its running device and the handle to
/// it); the library takes it without depending on the emulator.
pub trait LocalNic {
    /// The device's pipe size (bytes) and notification ring entries, which
    /// an attach request is sized by.
    fn ring_sizes(&self) -> Result<(usize, u32), LocalNicError>;
    /// Attaches an application.
    fn attach(&self, req: AttachRequest) -> Result<AttachInfo, LocalNicError>;
    /// Detaches application `app_id`; false if the device did not answer.
    fn detach(&self, app_id: u32) -> bool;
    /// Grants an attached application more pipe ids (see
    /// [`ExtendRequest`]); its attachment as it now stands. A device that
    /// grants nothing after attach says so.
    fn extend(&self, req: ExtendRequest) -> Result<AttachInfo, LocalNicError> {
        let _ = req;
        Err("this device grants no pipes after attach".into())
    }
    /// Whether the device still runs: false once it is being stopped.
    fn is_running(&self) -> bool;
    /// A handle an attached application keeps, to detach and to ask
    /// whether the device runs.
    fn handle(&self) -> Box<dyn LocalNic + Send>;
    /// The device's counters now, as the JSON a standalone device writes
    /// to [`STATS_FILE`] in its directory. A device that keeps none says
    /// why.
    fn stats_json(&self) -> Result<String, LocalNicError> {
        Err("this device gives no counters".into())
    }
}

/// A device that runs only when its caller steps it (deterministic tests
/// and profiles), attached to in place.
pub trait SteppedNic {
    /// The device's pipe size (bytes) and notification ring entries.
    fn ring_sizes(&self) -> (usize, u32);
    /// Attaches an application.
    fn attach(&mut self, req: &AttachRequest) -> Result<AttachInfo, LocalNicError>;
}
