//! The device handle: one per thread, owning one notification buffer, its
//! pipes, and the posted-write queue through which it writes registers.
//!
//! The shared-memory protocol (who writes what, with which ordering) is
//! documented in [`enso_abi::layout`]; the SYNC POINT comments here name the
//! NIC-side partner of each Release/Acquire.
//!
//! The handle's methods live beside what they do: attaching and
//! its checks (`attach.rs`), pipe allocation (`alloc.rs`), register writes
//! (`mmio.rs`), notifications (`notify.rs`), receiving (`rx.rs`), sending
//! (`tx.rs`), configuration (`config.rs`) and liveness (`liveness.rs`).

use std::fs::File;
use std::time::Duration;

use enso_abi::control::AttachInfo;
use enso_abi::shm::MirrorMap;
use enso_abi::wire::FiveTuple;
use memmap2::MmapRaw;

use crate::error::{DeviceError, FreeError};
use liveness::Keepalive;

mod alloc;
mod attach;
mod config;
mod counters;
mod liveness;
mod mmio;
mod notify;
mod rx;
mod split;
#[cfg(test)]
mod test_support;
mod tx;

pub use attach::DeviceOptions;
pub use config::MAX_FLOW_RULES;
pub use counters::{PipeDrops, PortDrops, PortStats};
pub use split::TxHalf;

/// How long a polling loop should find nothing before it sleeps in
/// [`Device::wait`]: short enough that an idle NIC costs almost nothing,
/// long enough that a loop at saturation never makes the call. The servers
/// and the packet generator park after it.
pub const PARK_AFTER: Duration = Duration::from_micros(500);

/// Notifications consumed per poll at most (then one head write).
const NOTIF_BATCH: u32 = 64;
/// How long to wait for a device that is still there before calling it
/// stalled: long enough for a device process that was stopped or
/// descheduled for seconds (job control, a debugger, a loaded host) to
/// resume, which is not a stall. A device that is gone is noticed within
/// [`ALIVE_EVERY`] of the wait ([`Wait`]).
const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a wait for the device checks that it is still there.
const ALIVE_EVERY: Duration = Duration::from_millis(10);

/// A bounded wait for the device: [`Wait::check`] in each round of the
/// wait fails once the device is gone, or after [`STALL_TIMEOUT`].
struct Wait {
    start: std::time::Instant,
    alive_at: std::time::Instant,
}

impl Wait {
    fn new() -> Self {
        let now = std::time::Instant::now();
        Self {
            start: now,
            alive_at: now,
        }
    }

    /// `Err(Gone)` once the device is gone, `Err(stall)` after the stall
    /// timeout, else `Ok` (go on waiting).
    fn check(&mut self, dev: &Device, stall: DeviceError) -> Result<(), DeviceError> {
        let now = std::time::Instant::now();
        if now - self.start > STALL_TIMEOUT {
            return Err(dev.stalled(stall));
        }
        if now - self.alive_at >= ALIVE_EVERY {
            self.alive_at = now;
            dev.check_alive()?;
        }
        Ok(())
    }
}

/// An RX pipe of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RxPipe {
    dev: u64,
    idx: u32,
}

/// An RX/TX pipe: received bytes can be sent back in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RxTxPipe(RxPipe);

impl RxTxPipe {
    /// The same pipe as an RX pipe (for calls that take any pipe).
    pub fn rx(self) -> RxPipe {
        self.0
    }
}

impl From<RxTxPipe> for RxPipe {
    fn from(p: RxTxPipe) -> RxPipe {
        p.0
    }
}

/// A TX pipe: a ring of bytes to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxPipe {
    dev: u64,
    idx: u32,
}

/// A flow rule: which traffic a pipe receives. Zero fields are wildcards as
/// the NIC's matching rules define (see `nic_emu::steering`).
///
/// Byte order: every field is a number in the host's byte order, not the
/// frame's network order: `src_ip`/`dst_ip` as `u32::from(Ipv4Addr)`
/// (10.1.0.1 is `0x0a01_0001`), `src_port`/`dst_port` as plain port
/// numbers (5000 is `5000`), `protocol` one byte (17 for UDP). Code ported
/// from C that fills them with `htonl`/`htons` must not.
///
/// ```
/// use std::net::Ipv4Addr;
/// let rule = enso::FlowRule {
///     dst_ip: u32::from(Ipv4Addr::new(10, 1, 0, 1)),
///     dst_port: 5000,
///     protocol: 17,
///     ..Default::default()
/// };
/// assert_eq!(rule.dst_ip, 0x0a01_0001);
/// ```
pub type FlowRule = FiveTuple;

#[derive(Debug)]
struct PipeSw {
    id: u32,
    map: MirrorMap,
    off: usize,
    /// Positions in flits, modulo the pipe size.
    tail: u32,
    consumed: u32,
    sent: u32,
    freed: u32,
    rxtx: bool,
    queued: bool,
    dirty: bool,
    /// Freed ([`Device::free_pipe`]): disabled at the NIC, its slot (and
    /// memory) kept for the next allocation.
    free: bool,
    /// log2 of the position unit: 6 (flits) or 0 (bytes, stream pipes).
    shift: u32,
    /// Position mask (pipe size in units - 1).
    mask: u32,
}

impl PipeSw {
    #[inline]
    fn unit(&self) -> usize {
        1 << self.shift
    }

    /// `bytes` in position units, if it is a whole number of units and no
    /// more than the span `[from, to)` holds.
    #[inline]
    fn units_within(&self, bytes: usize, from: u32, to: u32) -> Result<u32, FreeError> {
        let unit = self.unit();
        if !bytes.is_multiple_of(unit) {
            return Err(FreeError::Unaligned(bytes));
        }
        let available = (to.wrapping_sub(from) & self.mask) as usize * unit;
        if bytes > available {
            return Err(FreeError::MoreThanReceived {
                asked: bytes,
                available,
            });
        }
        Ok((bytes / unit) as u32)
    }
}

#[derive(Debug)]
struct TxPipeSw {
    map: MirrorMap,
    off: usize,
    size: usize,
    /// Byte positions, free-running.
    tail: u64,
    done: u64,
    /// Bytes the last `tx_buf` handed out and no `send` has sent yet.
    reserved: usize,
    /// Freed ([`Device::free_tx_pipe`]): its slot and memory kept for the
    /// next allocation.
    free: bool,
}

#[derive(Clone, Copy, Debug, Default)]
enum TxRecord {
    #[default]
    None,
    /// A configuration notification: its completion is no send's, and
    /// is not counted among them.
    Config,
    RxTx {
        pipe: u32,
        flits: u32,
    },
    Tx {
        pipe: u32,
        bytes: u32,
    },
}

/// What the library counted (software's view).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceStats {
    /// RX notifications consumed.
    pub notifications: u64,
    /// Polls of the RX notification ring ([`Device::poll`]).
    pub notification_polls: u64,
    /// Pipe head writes that freed bytes.
    pub head_writes: u64,
    /// Head rewrites that asked for a notification (prefetching).
    pub prefetches: u64,
    /// TX notifications sent (data and configuration).
    pub tx_notifications: u64,
    /// Sends (TX notifications of data, not configuration) the NIC
    /// completed.
    pub completions: u64,
    /// Register writes posted.
    pub mmio_writes: u64,
    /// Register writes after which the engine was parked and had to be
    /// woken (a system call each).
    pub engine_wakeups: u64,
    /// Calls of [`Device::wait`] that slept.
    pub waits: u64,
    /// Notifications naming a pipe this handle does not own, or moving a
    /// pipe's tail backwards (ignored).
    pub bogus_notifications: u64,
}

/// A device handle (one notification buffer). Every datapath call takes
/// `&mut self`: one handle per thread (it is `Send`, so it can be moved to
/// the thread that uses it).
pub struct Device {
    uid: u64,
    info: AttachInfo,
    file: File,
    region: MmapRaw,
    mmio: MmapRaw,
    /// The device's wake file (the engine's wake block), if it has one.
    engine_wake: Option<MmapRaw>,
    mmio_prod: u32,
    mmio_cons: u32,
    stamp: bool,
    ring_mask: u32,
    rx_ring: usize,
    rx_head: u32,
    tx_ring: usize,
    tx_tail: u32,
    tx_done: u32,
    tx_inflight: u32,
    tx_credits: u32,
    tx_records: Box<[TxRecord]>,
    /// A standalone device's directory (where it writes its counters).
    devdir: Option<std::path::PathBuf>,
    tx_unflushed: bool,
    pipes: Vec<PipeSw>,
    tx_pipes: Vec<TxPipeSw>,
    ready: Box<[u32]>,
    ready_head: usize,
    ready_len: usize,
    /// The pipe `next_pipe_with_data` returned last.
    last_ready: Option<usize>,
    dirty: Vec<u32>,
    next_off: usize,
    prefetch: bool,
    opts: DeviceOptions,
    stats: DeviceStats,
    pub(crate) pkt: crate::shared::PktState,
    _keep: Keepalive,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("app_id", &self.info.app_id)
            .field("device", &self.info.device)
            .field("pipes", &self.pipes.len())
            .finish()
    }
}

impl Device {
    /// What the device said at attach time.
    pub fn info(&self) -> &AttachInfo {
        &self.info
    }

    /// The MAC address of port `port` of the device (what a server answers
    /// ARP and neighbour solicitations with), or `None` past its ports.
    pub fn port_mac(&self, port: u32) -> Option<[u8; 6]> {
        ((port as usize) < self.info.ports)
            .then(|| enso_abi::devname::port_mac(&self.info.device, port as usize))
    }

    /// Software-side counters.
    pub fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    /// Sends the NIC has completed so far, whoever reaped them: TX
    /// notifications of data ([`Device::send`], [`Device::send_and_free`],
    /// [`Device::discard`]), not of configuration. A running total.
    pub fn sends_completed(&self) -> u64 {
        self.stats.completions
    }

    /// Whether automatic notification prefetching is on.
    pub fn prefetching(&self) -> bool {
        self.prefetch
    }

    /// Turns automatic notification prefetching in
    /// [`Device::next_pipe_with_data`] on or off.
    pub fn set_prefetch(&mut self, on: bool) {
        self.prefetch = on;
    }

    /// The global (device) id of a pipe.
    pub fn pipe_id(&self, p: RxPipe) -> Option<u32> {
        (p.dev == self.uid).then(|| {
            self.pipes
                .get(p.idx as usize)
                .filter(|s| !s.free)
                .map(|s| s.id)
        })?
    }

    pub(crate) fn region_ptr(&self) -> *mut u8 {
        self.region.as_mut_ptr()
    }

    pub(crate) fn uid(&self) -> u64 {
        self.uid
    }

    /// The options the handle was opened with.
    pub fn options(&self) -> &DeviceOptions {
        &self.opts
    }
}
