//! The device handle: one per thread, owning one notification buffer, its
//! pipes, and the posted-write queue through which it writes registers.
//!
//! The shared-memory protocol (who writes what, with which ordering) is
//! documented in [`enso_abi::layout`]; the SYNC POINT comments here name the
//! NIC-side partner of each Release/Acquire.

use std::fs::File;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use enso_abi::control::{AttachInfo, AttachRequest, LocalNic, NotificationMode, SteppedNic};
use enso_abi::layout::{
    self, config, reg, reg_addr, signal, MmioQueue, RxNotification, TxNotification, DESC_SLOT,
    MMIO_QUEUE_LEN, NOTIF_SLOT,
};
use enso_abi::shm::{self, MirrorMap};
use enso_abi::wire::{FiveTuple, FLIT};
use memmap2::MmapRaw;

use crate::batch::RxBatch;
use crate::error::*;

/// Notifications consumed per poll at most (then one head write).
const NOTIF_BATCH: u32 = 64;
/// How long to wait for the device before calling it stalled.
const STALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest TX notification the library sends (as the real library).
const TX_CHUNK: usize = 128 << 10;

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// Settings of a device handle.
#[derive(Clone, Debug)]
pub struct DeviceOptions {
    /// RX (and RX/TX) pipes this handle may allocate.
    pub pipes: u32,
    /// TX pipes this handle may allocate.
    pub tx_pipes: u32,
    /// Bytes per TX pipe (power of two, at least 4096).
    pub tx_pipe_size: usize,
    /// In-flight TX notifications at most (the real NIC's default: 500).
    pub tx_credits: u32,
    /// Prefetch the next pipe's notification in [`Device::next_pipe_with_data`];
    /// `None` follows the device's notification mode.
    pub prefetch: Option<bool>,
    /// Descriptor queue pairs (packetized interface) this handle may use;
    /// 0 (the default) for none. With queues, set `pool_buffers` too.
    pub queues: u32,
    /// RX descriptor ring entries per queue (a power of two, at least 64).
    pub rx_ring: u32,
    /// TX descriptor ring entries per queue (a power of two, at least 64).
    pub tx_ring: u32,
    /// 2 KiB packet buffers in the handle's pool: at least `queues x
    /// rx_ring`, plus what the application holds and the TX rings keep.
    pub pool_buffers: u32,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        Self {
            pipes: 16,
            tx_pipes: 1,
            tx_pipe_size: 2 << 20,
            tx_credits: 500,
            prefetch: None,
            queues: 0,
            rx_ring: 1024,
            tx_ring: 1024,
            pool_buffers: 0,
        }
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
}

#[derive(Clone, Copy, Debug, Default)]
enum TxRecord {
    #[default]
    None,
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
    pub notifications: u64,
    pub notification_polls: u64,
    pub head_writes: u64,
    pub prefetches: u64,
    pub tx_notifications: u64,
    pub completions: u64,
    pub mmio_writes: u64,
    /// Notifications naming a pipe this handle does not own, or moving a
    /// pipe's tail backwards (ignored).
    pub bogus_notifications: u64,
}

/// Keeps an attachment alive; detaches when dropped.
enum Keepalive {
    /// Standalone device: the control connection (non-blocking); closing
    /// it detaches, and the device closing it means the device is gone.
    Socket(UnixStream),
    /// In-process threaded device: its handle, and our application id.
    Control(Box<dyn LocalNic + Send>, u32),
    /// Stepped engine: the caller detaches (or drops the engine).
    None,
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
    pub(crate) pkt: crate::packetized::PktState,
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

/// Bytes of DMA region a handle with options `o` needs, for pipes of
/// `pipe_size` bytes and notification rings of `entries` slots. Saturates
/// (no region is that large) rather than overflow on sizes a device sent.
fn region_bytes(o: &DeviceOptions, pipe_size: usize, entries: u32) -> usize {
    let page = |n: usize| n.next_multiple_of(layout::PAGE);
    let queue = page(o.rx_ring as usize * DESC_SLOT) + page(o.tx_ring as usize * DESC_SLOT);
    [
        layout::DMA_RESERVED,
        2 * layout::notif_ring_bytes(entries),
        (o.pipes as usize).saturating_mul(pipe_size),
        (o.tx_pipes as usize).saturating_mul(o.tx_pipe_size),
        (o.queues as usize).saturating_mul(queue),
        page(o.pool_buffers as usize * layout::desc::BUF_SIZE),
        layout::PAGE,
    ]
    .into_iter()
    .fold(0, usize::saturating_add)
}

fn request(o: &DeviceOptions, pipe_size: usize, entries: u32) -> AttachRequest {
    AttachRequest {
        pipes: o.pipes,
        dma_bytes: region_bytes(o, pipe_size, entries),
        desc_queues: o.queues,
    }
}

fn check_options(o: &DeviceOptions) -> Result<(), AttachError> {
    for (n, what) in [(o.rx_ring, "rx_ring"), (o.tx_ring, "tx_ring")] {
        if o.queues > 0 && (!n.is_power_of_two() || !(64..=65536).contains(&n)) {
            return Err(AttachError::Options(format!(
                "{what} must be a power of two in 64..=65536"
            )));
        }
    }
    if o.queues > 0 && (o.pool_buffers as u64) < o.queues as u64 * o.rx_ring as u64 {
        return Err(AttachError::Options(
            "pool_buffers must at least fill every RX ring (queues x rx_ring)".into(),
        ));
    }
    if o.tx_credits == 0 {
        return Err(AttachError::Options("tx_credits must be at least 1".into()));
    }
    if o.tx_pipes > 0 && (!o.tx_pipe_size.is_power_of_two() || o.tx_pipe_size < layout::PAGE) {
        return Err(AttachError::Options(
            "tx_pipe_size must be a power of two of at least 4096".into(),
        ));
    }
    Ok(())
}

/// Largest pipe the library handles (stream pipes count positions in bytes,
/// in a `u32`).
const MAX_PIPE_SIZE: usize = 1 << 31;

fn bad_answer(what: impl std::fmt::Display) -> AttachError {
    AttachError::Device(format!("bad attach answer: {what}"))
}

/// Checks what the device answered at attach time before anything is mapped
/// or indexed with it. The device is another process, possibly buggy or
/// hostile; the datapath then uses the rings, pipe sizes and ids without
/// further checks.
fn check_info(info: &AttachInfo, opts: &DeviceOptions) -> Result<(), AttachError> {
    let entries = info.notif_ring_entries;
    let (_, tx_ring) = layout::notif_rings(entries);
    let rings_end = tx_ring + layout::notif_ring_bytes(entries);
    let ps = info.pipe_size;
    let ids = |base: u32, n: u32, max: u32| base as u64 + n as u64 <= max as u64;
    let what = if !entries.is_power_of_two() || entries < 2 {
        format!("{entries} notification ring entries (a power of two of at least 2 is needed)")
    } else if !ps.is_power_of_two() || !(layout::PAGE..=MAX_PIPE_SIZE).contains(&ps) {
        format!("pipe size {ps} (a power of two in 4096..=2^31 is needed)")
    } else if !ids(info.pipe_base, info.pipe_count, layout::MAX_PIPES) {
        format!(
            "pipes {} + {} beyond the pipe ids",
            info.pipe_base, info.pipe_count
        )
    } else if info.nbuf_id >= layout::MAX_NBUFS {
        format!("notification buffer {} beyond the ids", info.nbuf_id)
    } else if !ids(
        info.desc_queue_base,
        info.desc_queue_count,
        layout::MAX_DESC_QUEUES,
    ) {
        format!(
            "descriptor queues {} + {} beyond the queue ids",
            info.desc_queue_base, info.desc_queue_count
        )
    } else if info.ports > layout::desc::PORT_BITS as usize + 1 {
        format!("{} ports (registers name at most 16)", info.ports)
    } else if rings_end > info.dma_len {
        format!(
            "DMA region of {} bytes does not hold the notification rings ({rings_end} bytes)",
            info.dma_len
        )
    } else if region_bytes(opts, ps, entries) > info.dma_len {
        format!(
            "DMA region of {} bytes, {} needed for these options",
            info.dma_len,
            region_bytes(opts, ps, entries)
        )
    } else {
        return Ok(());
    };
    Err(bad_answer(what))
}

/// Opens a shared-memory file the device named, checking that it holds `len`
/// bytes (touching a mapping beyond the end of its file faults).
fn open_shared(path: &Path, len: usize) -> Result<File, AttachError> {
    let file = shm::open_file(path)?;
    let have = file.metadata()?.len();
    if have < len as u64 {
        return Err(bad_answer(format!(
            "{} holds {have} bytes, not {len}",
            path.display()
        )));
    }
    Ok(file)
}

impl Device {
    /// Attaches to the standalone device `name` under `/dev/shm`.
    pub fn open(name: &str, opts: DeviceOptions) -> Result<Self, AttachError> {
        Self::open_in(Path::new("/dev/shm"), name, opts)
    }

    /// Attaches to the standalone device `name` under `dir`.
    pub fn open_in(dir: &Path, name: &str, opts: DeviceOptions) -> Result<Self, AttachError> {
        check_options(&opts)?;
        let devdir = enso_abi::devname::path(dir, name).map_err(AttachError::Options)?;
        // Sizes are device settings; ask with the real NIC's defaults first,
        // then retry with the device's own if they differ. Either answer is
        // checked (`check_info`) before it is used.
        let guess = request(&opts, 2 << 20, 16384);
        let (info, sock) =
            enso_abi::control::attach_remote(&devdir, guess).map_err(AttachError::Device)?;
        let want = region_bytes(&opts, info.pipe_size, info.notif_ring_entries);
        let (info, sock) = if want > info.dma_len {
            drop(sock);
            enso_abi::control::attach_remote(
                &devdir,
                request(&opts, info.pipe_size, info.notif_ring_entries),
            )
            .map_err(AttachError::Device)?
        } else {
            (info, sock)
        };
        // The device sends nothing after its answer: `check_alive` reads
        // the connection without waiting, to see whether it was closed.
        sock.set_nonblocking(true)?;
        Self::from_info(info, opts, Keepalive::Socket(sock))
    }

    /// Attaches to a device running in this process, whose pipes are
    /// `pipe_size` bytes and notification rings `notif_entries` long.
    pub fn attach(
        nic: &dyn LocalNic,
        pipe_size: usize,
        notif_entries: u32,
        opts: DeviceOptions,
    ) -> Result<Self, AttachError> {
        check_options(&opts)?;
        let info = nic
            .attach(request(&opts, pipe_size, notif_entries))
            .map_err(AttachError::Device)?;
        let id = info.app_id;
        Self::from_info(info, opts, Keepalive::Control(nic.handle(), id))
    }

    /// Attaches to a device running in this process (the emulator's
    /// `nic_emu::Nic`, or its control handle), with its own sizes.
    pub fn attach_nic(nic: &dyn LocalNic, opts: DeviceOptions) -> Result<Self, AttachError> {
        let (ps, ne) = nic.ring_sizes().map_err(AttachError::Device)?;
        Self::attach(nic, ps, ne, opts)
    }

    /// Attaches to a stepped engine (the caller runs `engine.step()`).
    pub fn attach_engine(
        engine: &mut dyn SteppedNic,
        opts: DeviceOptions,
    ) -> Result<Self, AttachError> {
        check_options(&opts)?;
        let (ps, ne) = engine.ring_sizes();
        let req = request(&opts, ps, ne);
        let info = engine.attach(&req).map_err(AttachError::Device)?;
        Self::from_info(info, opts, Keepalive::None)
    }

    fn from_info(
        info: AttachInfo,
        opts: DeviceOptions,
        keep: Keepalive,
    ) -> Result<Self, AttachError> {
        check_info(&info, &opts)?;
        let file = open_shared(&info.dma_path, info.dma_len)?;
        let region = shm::map(&file, info.dma_len)?;
        let mmio_file = open_shared(&info.mmio_path, layout::MMIO_FILE_LEN)?;
        let mmio = shm::map(&mmio_file, layout::MMIO_FILE_LEN)?;
        let entries = info.notif_ring_entries;
        let ring_bytes = layout::notif_ring_bytes(entries);
        let (rx_ring, tx_ring) = layout::notif_rings(entries);
        let pipes = info.pipe_count.min(opts.pipes) as usize;
        let prefetch = opts
            .prefetch
            .unwrap_or(info.notification_mode == NotificationMode::ReactivePrefetch);
        let credits = opts.tx_credits.min(entries - 1);
        let mut d = Self {
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            stamp: info.interconnect_latency_ns > 0,
            ring_mask: entries - 1,
            rx_ring,
            rx_head: 0,
            tx_ring,
            tx_tail: 0,
            tx_done: 0,
            tx_inflight: 0,
            tx_credits: credits,
            tx_records: vec![TxRecord::None; entries as usize].into_boxed_slice(),
            tx_unflushed: false,
            pipes: Vec::with_capacity(pipes),
            tx_pipes: Vec::with_capacity(opts.tx_pipes as usize),
            ready: vec![0; pipes.max(1)].into_boxed_slice(),
            ready_head: 0,
            ready_len: 0,
            last_ready: None,
            dirty: Vec::with_capacity(pipes),
            next_off: tx_ring + ring_bytes,
            prefetch,
            mmio_prod: 0,
            mmio_cons: 0,
            file,
            region,
            mmio,
            info,
            opts,
            stats: DeviceStats::default(),
            pkt: Default::default(),
            _keep: keep,
        };
        // Enable both notification rings: writing the high address half
        // enables a ring.
        let nb = layout::NBUF_QUEUE_BASE + d.info.nbuf_id;
        d.mmio_write(reg_addr(nb, reg::RX_MEM_LOW), rx_ring as u32)?;
        d.mmio_write(reg_addr(nb, reg::RX_MEM_HIGH), (rx_ring >> 32) as u32)?;
        d.mmio_write(reg_addr(nb, reg::TX_MEM_LOW), tx_ring as u32)?;
        d.mmio_write(reg_addr(nb, reg::TX_MEM_HIGH), (tx_ring >> 32) as u32)?;
        Ok(d)
    }

    /// What the device said at attach time.
    pub fn info(&self) -> &AttachInfo {
        &self.info
    }

    /// Software-side counters.
    pub fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    /// Whether automatic notification prefetching is on.
    pub fn prefetching(&self) -> bool {
        self.prefetch
    }

    pub fn set_prefetch(&mut self, on: bool) {
        self.prefetch = on;
    }

    /// The global (device) id of a pipe.
    pub fn pipe_id(&self, p: RxPipe) -> Option<u32> {
        (p.dev == self.uid).then(|| self.pipes.get(p.idx as usize).map(|s| s.id))?
    }

    #[inline]
    fn mmio_queue(&self) -> &MmioQueue {
        // SAFETY: the mapping holds MMIO_FILE_LEN >= size_of::<MmioQueue>()
        // bytes, is page aligned, lives as long as `self`; all fields atomics.
        unsafe { &*(self.mmio.as_ptr() as *const MmioQueue) }
    }

    /// Posts a register write. Waits (bounded) if the queue is full: a write
    /// is never dropped.
    #[inline]
    pub(crate) fn mmio_write(&mut self, addr: u32, value: u32) -> Result<(), DeviceError> {
        if self.mmio_prod.wrapping_sub(self.mmio_cons) as usize >= MMIO_QUEUE_LEN {
            let start = Instant::now();
            loop {
                // SYNC POINT B (Acquire): pairs with the NIC's Release store
                // of `consumer` after it copied the entries out.
                self.mmio_cons = self.mmio_queue().consumer.0.load(Ordering::Acquire);
                if (self.mmio_prod.wrapping_sub(self.mmio_cons) as usize) < MMIO_QUEUE_LEN {
                    break;
                }
                if start.elapsed() > STALL_TIMEOUT {
                    return Err(self.stalled(DeviceError::MmioStalled));
                }
                std::hint::spin_loop();
            }
        }
        let prod = self.mmio_prod;
        let stamp = self.stamp.then(enso_abi::monotonic_ns).unwrap_or(0);
        let q = self.mmio_queue();
        let e = &q.entries[prod as usize & (MMIO_QUEUE_LEN - 1)];
        e.word
            .store((addr as u64) << 32 | value as u64, Ordering::Relaxed);
        e.issued_ns.store(stamp, Ordering::Relaxed);
        // SYNC POINT A (Release): pairs with the NIC's Acquire load of
        // `producer`; the entry and any TX notification written before are
        // visible to it.
        q.producer.0.store(prod.wrapping_add(1), Ordering::Release);
        self.mmio_prod = prod.wrapping_add(1);
        self.stats.mmio_writes += 1;
        Ok(())
    }

    /// Reserves `len` bytes (page aligned) of the DMA region.
    pub(crate) fn alloc_region_bytes(&mut self, len: usize) -> Result<usize, AllocError> {
        self.alloc_region(len)
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

    pub(crate) fn config_raw(&mut self, id: u32, args: [u64; 5]) -> Result<(), DeviceError> {
        self.config(id, args)
    }

    fn alloc_region(&mut self, len: usize) -> Result<usize, AllocError> {
        let off = self.next_off.next_multiple_of(layout::PAGE);
        if off + len > self.info.dma_len {
            return Err(AllocError::NoMemory);
        }
        self.next_off = off + len;
        Ok(off)
    }

    fn alloc_pipe(&mut self, fallback: bool, rxtx: bool, port: u32) -> Result<RxPipe, AllocError> {
        self.alloc_pipe_kind(fallback, rxtx, false, port)
    }

    fn alloc_pipe_kind(
        &mut self,
        fallback: bool,
        rxtx: bool,
        stream: bool,
        port: u32,
    ) -> Result<RxPipe, AllocError> {
        if port as usize >= self.info.ports {
            return Err(AllocError::NoPort(port));
        }
        let idx = self.pipes.len() as u32;
        if idx >= self.info.pipe_count.min(self.opts.pipes) {
            return Err(AllocError::NoPipes(self.info.pipe_count));
        }
        let size = self.info.pipe_size;
        let off = self.alloc_region(size)?;
        let map =
            MirrorMap::new(&self.file, off, size).map_err(|e| AllocError::Map(e.to_string()))?;
        let id = self.info.pipe_base + idx;
        self.pipes.push(PipeSw {
            id,
            map,
            off,
            tail: 0,
            consumed: 0,
            sent: 0,
            freed: 0,
            rxtx,
            queued: false,
            dirty: false,
            shift: if stream { 0 } else { FLIT.trailing_zeros() },
            mask: if stream {
                size as u32 - 1
            } else {
                (size / FLIT) as u32 - 1
            },
        });
        // Enable: head and tail start at zero; the high address half enables.
        // The low 12 bits of the (page aligned) address name the port.
        let flags = if stream { layout::PIPE_STREAM } else { 0 };
        self.mmio_write(reg_addr(id, reg::RX_MEM_LOW), off as u32 | port | flags)?;
        self.mmio_write(reg_addr(id, reg::RX_MEM_HIGH), (off >> 32) as u32)?;
        let p = RxPipe { dev: self.uid, idx };
        if fallback {
            self.config(config::FALLBACK, [config::FALLBACK_ADD, id as u64, 0, 0, 0])?;
        }
        Ok(p)
    }

    /// Allocates an RX pipe; `fallback` makes it receive traffic that no
    /// flow rule matches.
    pub fn alloc_rx_pipe(&mut self, fallback: bool) -> Result<RxPipe, AllocError> {
        self.alloc_pipe(fallback, false, 0)
    }

    /// Allocates an RX pipe that receives from `port`.
    pub fn alloc_rx_pipe_on(&mut self, port: u32, fallback: bool) -> Result<RxPipe, AllocError> {
        self.alloc_pipe(fallback, false, port)
    }

    /// Allocates a *stream pipe* on `port`: the NIC appends the UDP payload
    /// of each frame, back to back with byte granularity, so a message
    /// stream split over frames is contiguous in the pipe. [`Device::recv`]
    /// returns those bytes ([`RxBatch::bytes`]); [`Device::free`] takes any
    /// byte count (leave an unfinished message in place). Notifications are
    /// reactive: the NIC tells software about new bytes when the head is
    /// written, so a reader that frees nothing (it holds only part of a
    /// message) asks for the latest tail with [`Device::prefetch`].
    pub fn alloc_stream_pipe_on(
        &mut self,
        port: u32,
        fallback: bool,
    ) -> Result<RxPipe, AllocError> {
        self.alloc_pipe_kind(fallback, false, true, port)
    }

    /// Allocates an RX/TX pipe (received bytes can be sent in place).
    pub fn alloc_rxtx_pipe(&mut self, fallback: bool) -> Result<RxTxPipe, AllocError> {
        self.alloc_pipe(fallback, true, 0).map(RxTxPipe)
    }

    /// Allocates an RX/TX pipe that receives from `port`.
    pub fn alloc_rxtx_pipe_on(
        &mut self,
        port: u32,
        fallback: bool,
    ) -> Result<RxTxPipe, AllocError> {
        self.alloc_pipe(fallback, true, port).map(RxTxPipe)
    }

    /// The RX/TX view of a pipe, if it was allocated as one.
    pub fn as_rxtx(&self, p: RxPipe) -> Option<RxTxPipe> {
        (p.dev == self.uid && self.pipes.get(p.idx as usize)?.rxtx).then_some(RxTxPipe(p))
    }

    /// Allocates a TX pipe of `opts.tx_pipe_size` bytes.
    pub fn alloc_tx_pipe(&mut self) -> Result<TxPipe, AllocError> {
        if self.tx_pipes.len() as u32 >= self.opts.tx_pipes {
            return Err(AllocError::NoTxPipes(self.opts.tx_pipes));
        }
        let size = self.opts.tx_pipe_size;
        let off = self.alloc_region(size)?;
        let map =
            MirrorMap::new(&self.file, off, size).map_err(|e| AllocError::Map(e.to_string()))?;
        self.tx_pipes.push(TxPipeSw {
            map,
            off,
            size,
            tail: 0,
            done: 0,
            reserved: 0,
        });
        Ok(TxPipe {
            dev: self.uid,
            idx: self.tx_pipes.len() as u32 - 1,
        })
    }

    /// Sends a configuration notification (about `port` where that
    /// matters).
    fn config_on(&mut self, id: u32, args: [u64; 5], port: u32) -> Result<(), DeviceError> {
        let slot = self.tx_slot()?;
        let n = self.tx_notif(slot);
        n.config_id.store(id, Ordering::Relaxed);
        n.port.store(port, Ordering::Relaxed);
        for (a, v) in n.args.iter().zip(args) {
            a.store(v, Ordering::Relaxed);
        }
        n.signal.store(signal::CONFIG, Ordering::Relaxed);
        self.tx_commit(slot, TxRecord::None);
        self.flush_tx()
    }

    fn config(&mut self, id: u32, args: [u64; 5]) -> Result<(), DeviceError> {
        self.config_on(id, args, 0)
    }

    /// Timestamping on `port`: with `Some(offset)`, frames sent on the port
    /// carry their 32-bit send time (ns, CLOCK_MONOTONIC) at byte `offset`
    /// (0..=60), and frames received on it carry the round-trip time (ns)
    /// there instead. `None` turns it off.
    pub fn set_timestamping(&mut self, port: u32, offset: Option<u8>) -> Result<(), ConfigError> {
        if port as usize >= self.info.ports || offset.is_some_and(|o| o > 60) {
            return Err(ConfigError::BadValue);
        }
        let args = [offset.is_some() as u64, offset.unwrap_or(0) as u64, 0, 0, 0];
        self.config_on(config::TIMESTAMP, args, port)?;
        Ok(())
    }

    /// Rate limit of what is sent on `port`: bursts of `num` flits every
    /// `den` cycles of the NIC's 200 MHz clock (the real NIC's limiter; 64 B
    /// line rate at 100 Gb/s is 744/1000). `None` removes the limit.
    pub fn set_rate_limit(
        &mut self,
        port: u32,
        limit: Option<(u32, u32)>,
    ) -> Result<(), ConfigError> {
        if port as usize >= self.info.ports || limit.is_some_and(|(n, d)| n == 0 || d == 0) {
            return Err(ConfigError::BadValue);
        }
        let (n, d) = limit.unwrap_or((0, 0));
        self.config_on(config::RATE_LIMIT, [n as u64, d as u64, 0, 0, 0], port)?;
        Ok(())
    }

    /// Steers traffic matching `rule` to `pipe`.
    pub fn bind(&mut self, pipe: impl Into<RxPipe>, rule: FlowRule) -> Result<(), ConfigError> {
        let id = self.pipe_id(pipe.into()).ok_or(ConfigError::ForeignPipe)?;
        self.config(config::FLOW_BIND, rule_args(&rule, id))?;
        Ok(())
    }

    /// Removes a binding made with [`Device::bind`].
    pub fn unbind(&mut self, pipe: impl Into<RxPipe>, rule: FlowRule) -> Result<(), ConfigError> {
        let id = self.pipe_id(pipe.into()).ok_or(ConfigError::ForeignPipe)?;
        self.config(config::FLOW_UNBIND, rule_args(&rule, id))?;
        Ok(())
    }

    /// Makes the NIC choose among the fallback pipes (and RSS queues) of
    /// `pipe`'s port by round robin (`true`) or by flow hash (`false`, the
    /// default). The policy is the port's: it holds for pipes added later,
    /// and for other applications' fallback pipes on that port. It does not
    /// make `pipe` a fallback pipe.
    pub fn set_fallback_round_robin(
        &mut self,
        pipe: impl Into<RxPipe>,
        rr: bool,
    ) -> Result<(), ConfigError> {
        let id = self.pipe_id(pipe.into()).ok_or(ConfigError::ForeignPipe)?;
        self.config(
            config::FALLBACK,
            [config::FALLBACK_POLICY, id as u64, rr as u64, 0, 0],
        )?;
        Ok(())
    }

    #[inline]
    fn rx_notif(&self, i: u32) -> &RxNotification {
        // SAFETY: the RX ring is `entries * NOTIF_SLOT` bytes at `rx_ring`,
        // inside the mapped region (`check_info` at attach); `i` is masked to
        // the ring; all fields are atomics.
        unsafe {
            &*(self
                .region
                .as_ptr()
                .add(self.rx_ring + i as usize * NOTIF_SLOT)
                as *const RxNotification)
        }
    }

    #[inline]
    fn tx_notif(&self, i: u32) -> &TxNotification {
        // SAFETY: as `rx_notif`, for the TX ring.
        unsafe {
            &*(self
                .region
                .as_ptr()
                .add(self.tx_ring + i as usize * NOTIF_SLOT)
                as *const TxNotification)
        }
    }

    /// Consumes up to 64 RX notifications and reclaims TX completions.
    /// Returns the number of RX notifications.
    pub fn poll(&mut self) -> Result<usize, DeviceError> {
        self.stats.notification_polls += 1;
        let now = if self.stamp {
            enso_abi::monotonic_ns()
        } else {
            0
        };
        let mut n = 0;
        while n < NOTIF_BATCH {
            let slot = self.rx_notif(self.rx_head);
            // SYNC POINT C (Acquire): pairs with the NIC's Release store of
            // `signal`; the pipe bytes up to `tail` are visible after it.
            if slot.signal.load(Ordering::Acquire) != signal::DATA {
                break;
            }
            if self.stamp && slot.visible_ns.load(Ordering::Relaxed) > now {
                break; // still crossing the emulated interconnect
            }
            let pid = slot.pipe_id.load(Ordering::Relaxed);
            let tail = slot.tail.load(Ordering::Relaxed);
            slot.signal.store(signal::EMPTY, Ordering::Relaxed);
            self.rx_head = (self.rx_head + 1) & self.ring_mask;
            n += 1;
            let idx = pid.wrapping_sub(self.info.pipe_base) as usize;
            let Some(p) = self.pipes.get_mut(idx) else {
                self.stats.bogus_notifications += 1;
                continue;
            };
            // The NIC only ever moves a pipe's tail forwards, into the room
            // software has freed. A tail behind the current one would hand
            // out again bytes software has already taken or given back
            // (which `take` turns into a slice): only a faulty or hostile
            // device sends one.
            let tail = tail & p.mask;
            if tail.wrapping_sub(p.freed) & p.mask < p.tail.wrapping_sub(p.freed) & p.mask {
                self.stats.bogus_notifications += 1;
                continue;
            }
            p.tail = tail;
            self.enqueue_ready(idx);
        }
        if n > 0 {
            self.stats.notifications += n as u64;
            let nb = layout::NBUF_QUEUE_BASE + self.info.nbuf_id;
            self.mmio_write(reg_addr(nb, reg::RX_HEAD), self.rx_head)?;
        }
        self.reap_completions()?;
        Ok(n as usize)
    }

    /// A pipe that has received data, in notification order (polls first).
    /// With prefetching on, also asks the NIC for the next pipe's latest
    /// notification.
    pub fn next_pipe_with_data(&mut self) -> Result<Option<RxPipe>, DeviceError> {
        // A pipe returned before but not fully consumed stays ready: its NIC
        // notification was used up, so nothing else would bring it back.
        if let Some(i) = self.last_ready.take() {
            self.enqueue_ready(i);
        }
        if self.ready_len == 0 {
            self.poll()?;
        }
        while self.ready_len > 0 {
            let idx = self.ready[self.ready_head] as usize;
            self.ready_head = (self.ready_head + 1) % self.ready.len();
            self.ready_len -= 1;
            let p = &mut self.pipes[idx];
            p.queued = false;
            if p.tail.wrapping_sub(p.consumed) & p.mask == 0 {
                continue;
            }
            if self.prefetch {
                let next = (idx + 1) % self.pipes.len();
                self.prefetch_idx(next)?;
            }
            self.last_ready = Some(idx);
            return Ok(Some(RxPipe {
                dev: self.uid,
                idx: idx as u32,
            }));
        }
        Ok(None)
    }

    /// Queues pipe `idx` for `next_pipe_with_data` if it has unconsumed data
    /// and is not queued yet.
    #[inline]
    fn enqueue_ready(&mut self, idx: usize) {
        let p = &mut self.pipes[idx];
        let mask = p.mask;
        if !p.queued && p.tail.wrapping_sub(p.consumed) & mask != 0 {
            p.queued = true;
            let cap = self.ready.len();
            self.ready[(self.ready_head + self.ready_len) % cap] = idx as u32;
            self.ready_len += 1;
        }
    }

    fn prefetch_idx(&mut self, idx: usize) -> Result<(), DeviceError> {
        let p = &self.pipes[idx];
        let (id, head) = (p.id, p.freed);
        self.stats.prefetches += 1;
        self.mmio_write(reg_addr(id, reg::RX_HEAD), head)
    }

    /// Notification prefetching: rewrites the pipe's head with its unchanged
    /// value, so the NIC sends a notification with its latest tail now.
    pub fn prefetch(&mut self, pipe: impl Into<RxPipe>) -> Result<(), RecvError> {
        let p = pipe.into();
        if p.dev != self.uid {
            return Err(RecvError::ForeignPipe);
        }
        self.prefetch_idx(p.idx as usize)?;
        Ok(())
    }

    fn pipe_mut(&mut self, p: RxPipe) -> Option<&mut PipeSw> {
        if p.dev != self.uid {
            return None;
        }
        self.pipes.get_mut(p.idx as usize)
    }

    /// Received bytes not yet handed out, without consuming them.
    pub fn peek(&mut self, pipe: impl Into<RxPipe>) -> Result<RxBatch<'_>, RecvError> {
        self.take(pipe.into(), false)
    }

    /// Received bytes not yet handed out; they count as consumed (free them
    /// or send them later).
    pub fn recv(&mut self, pipe: impl Into<RxPipe>) -> Result<RxBatch<'_>, RecvError> {
        self.take(pipe.into(), true)
    }

    fn take(&mut self, pipe: RxPipe, consume: bool) -> Result<RxBatch<'_>, RecvError> {
        if pipe.dev != self.uid || pipe.idx as usize >= self.pipes.len() {
            return Err(RecvError::ForeignPipe);
        }
        let idx = pipe.idx as usize;
        // `recv` polls only when it has nothing; `peek` always does, since
        // its caller may be waiting for more after an unfinished message.
        if !consume || self.pipes[idx].tail == self.pipes[idx].consumed {
            self.poll()?;
        }
        let p = &mut self.pipes[idx];
        let (mask, unit) = (p.mask, p.unit());
        let flits = p.tail.wrapping_sub(p.consumed) & mask;
        let start = p.consumed as usize * unit;
        if consume {
            p.consumed = p.tail;
        }
        let len = flits as usize * unit;
        // SAFETY: `start, len < pipe size`: inside the doubly mapped pipe. The NIC does not
        // write between software's head and the notified tail (`poll` refuses a tail that
        // moves backwards, which would put taken or freed bytes in the span), and the span
        // is handed out only while `self` is mutably borrowed, so the slice is not aliased.
        let data = unsafe { std::slice::from_raw_parts_mut(p.map.as_ptr().add(start), len) };
        Ok(RxBatch { data })
    }

    /// [`Device::recv`] and, in the same borrow, the free span at the end of
    /// TX pipe `tx` (at most `max` bytes; no waiting, so it may be shorter
    /// or empty; completions are not reaped here: [`Device::tx_space`] does,
    /// and callers ask it first). For applications that answer what they
    /// receive: write the answers straight into the TX pipe while reading
    /// the requests, then [`Device::send`] the bytes written at the start of
    /// the span.
    pub fn recv_with_tx_span(
        &mut self,
        pipe: impl Into<RxPipe>,
        tx: TxPipe,
        max: usize,
    ) -> Result<(RxBatch<'_>, &mut [u8]), RecvError> {
        if tx.dev != self.uid || tx.idx as usize >= self.tx_pipes.len() {
            return Err(RecvError::ForeignPipe);
        }
        let (at, len, base) = {
            let t = &self.tx_pipes[tx.idx as usize];
            let free = t.size - (t.tail - t.done) as usize;
            (
                (t.tail % t.size as u64) as usize,
                free.min(max),
                t.map.as_ptr(),
            )
        };
        // The span is what the next `send` may send.
        self.tx_pipes[tx.idx as usize].reserved = len;
        let batch = self.take(pipe.into(), true)?;
        // SAFETY: `at < size` and `len <= size - in flight`: inside the doubly mapped TX
        // pipe, in bytes the NIC is not reading (completed or never sent). The TX pipe is
        // a mapping of its own, disjoint from every RX pipe, so the span does not alias
        // `batch`; both live only while `self` is mutably borrowed.
        let span = unsafe { std::slice::from_raw_parts_mut(base.add(at), len) };
        Ok((batch, span))
    }

    /// Marks `bytes` of a peeked batch as consumed.
    pub fn confirm(&mut self, pipe: impl Into<RxPipe>, bytes: usize) -> Result<(), FreeError> {
        let p = self.pipe_mut(pipe.into()).ok_or(FreeError::ForeignPipe)?;
        let n = p.units_within(bytes, p.consumed, p.tail)?;
        p.consumed = (p.consumed + n) & p.mask;
        Ok(())
    }

    /// Returns the last `bytes` of consumed data to the pipe: the next
    /// `recv` hands them out again.
    pub fn unconsume(&mut self, pipe: impl Into<RxPipe>, bytes: usize) -> Result<(), FreeError> {
        let p = self.pipe_mut(pipe.into()).ok_or(FreeError::ForeignPipe)?;
        let n = p.units_within(bytes, p.sent, p.consumed)?;
        p.consumed = p.consumed.wrapping_sub(n) & p.mask;
        Ok(())
    }

    /// Skips `bytes` of received data of an RX/TX pipe without sending them;
    /// they are handed back to the NIC in order, after any sends before them
    /// complete.
    pub fn discard(&mut self, pipe: RxTxPipe, bytes: usize) -> Result<(), FreeError> {
        let pr = pipe.0;
        let p = self.pipe_mut(pr).ok_or(FreeError::ForeignPipe)?;
        let flits = p.units_within(bytes, p.sent, p.consumed)?;
        if flits == 0 {
            return Ok(());
        }
        let (mask, unit) = (p.mask, p.unit());
        if p.sent == p.freed {
            // Nothing in flight: free at once.
            return self.free(pr, bytes);
        }
        // Behind sends in flight: an empty TX notification whose completion
        // frees the skipped bytes keeps the frees in order.
        let addr = p.off + p.sent as usize * unit;
        p.sent = (p.sent + flits) & mask;
        self.push_data(
            addr,
            0,
            0,
            TxRecord::RxTx {
                pipe: pr.idx,
                flits,
            },
        )?;
        self.flush_tx()?;
        Ok(())
    }

    /// Hands `bytes` of received data back to the NIC (one head write).
    pub fn free(&mut self, pipe: impl Into<RxPipe>, bytes: usize) -> Result<(), FreeError> {
        let p = self.pipe_mut(pipe.into()).ok_or(FreeError::ForeignPipe)?;
        if !bytes.is_multiple_of(p.unit()) {
            return Err(FreeError::Unaligned(bytes));
        }
        if p.sent != p.freed {
            return Err(FreeError::InFlight);
        }
        let n = p.units_within(bytes, p.freed, p.consumed)?;
        if n == 0 {
            return Ok(());
        }
        p.freed = (p.freed + n) & p.mask;
        p.sent = p.freed;
        let (id, head) = (p.id, p.freed);
        self.stats.head_writes += 1;
        self.mmio_write(reg_addr(id, reg::RX_HEAD), head)?;
        Ok(())
    }

    /// Frees everything consumed so far.
    pub fn free_all(&mut self, pipe: impl Into<RxPipe>) -> Result<(), FreeError> {
        let pipe = pipe.into();
        let p = self.pipe_mut(pipe).ok_or(FreeError::ForeignPipe)?;
        let (mask, unit) = (p.mask, p.unit());
        let n = (p.consumed.wrapping_sub(p.freed) & mask) as usize * unit;
        self.free(pipe, n)
    }

    /// Takes a TX notification slot, reclaiming completions (and waiting,
    /// bounded) when all credits are in use.
    fn tx_slot(&mut self) -> Result<u32, DeviceError> {
        if self.tx_inflight >= self.tx_credits {
            self.flush_tx()?;
            let start = Instant::now();
            loop {
                self.reap_completions()?;
                if self.tx_inflight < self.tx_credits {
                    break;
                }
                if start.elapsed() > STALL_TIMEOUT {
                    return Err(self.stalled(DeviceError::TxStalled));
                }
                std::hint::spin_loop();
            }
        }
        Ok(self.tx_tail)
    }

    fn tx_commit(&mut self, slot: u32, rec: TxRecord) {
        self.tx_records[slot as usize] = rec;
        self.tx_tail = (slot + 1) & self.ring_mask;
        self.tx_inflight += 1;
        self.tx_unflushed = true;
        self.stats.tx_notifications += 1;
    }

    fn push_data(
        &mut self,
        addr: usize,
        len: usize,
        port: u32,
        rec: TxRecord,
    ) -> Result<(), DeviceError> {
        let slot = self.tx_slot()?;
        let n = self.tx_notif(slot);
        n.address.store(addr as u64, Ordering::Relaxed);
        n.length.store(len as u32, Ordering::Relaxed);
        n.port.store(port, Ordering::Relaxed);
        n.signal.store(signal::DATA, Ordering::Relaxed);
        self.tx_commit(slot, rec);
        Ok(())
    }

    /// One TX tail write for everything queued since the last one.
    fn flush_tx(&mut self) -> Result<(), DeviceError> {
        if self.tx_unflushed {
            self.tx_unflushed = false;
            let nb = layout::NBUF_QUEUE_BASE + self.info.nbuf_id;
            self.mmio_write(reg_addr(nb, reg::TX_TAIL), self.tx_tail)?;
        }
        Ok(())
    }

    /// Reclaims completed TX notifications in order: frees RX/TX pipe bytes
    /// (one head write per pipe) and TX pipe space.
    pub fn reap_completions(&mut self) -> Result<usize, DeviceError> {
        let mut n = 0;
        let now = if self.stamp && self.tx_inflight > 0 {
            enso_abi::monotonic_ns()
        } else {
            0
        };
        while self.tx_inflight > 0 {
            let slot = self.tx_done;
            let tn = self.tx_notif(slot);
            // SYNC POINT D (Acquire): pairs with the NIC's Release store of
            // `signal = EMPTY`; it has finished reading the data.
            if tn.signal.load(Ordering::Acquire) != signal::EMPTY {
                break;
            }
            if self.stamp && tn.args[layout::TX_VISIBLE_ARG].load(Ordering::Relaxed) > now {
                break; // the completion is still on its way
            }
            match std::mem::take(&mut self.tx_records[slot as usize]) {
                TxRecord::None => {}
                TxRecord::RxTx { pipe, flits } => {
                    let p = &mut self.pipes[pipe as usize];
                    p.freed = (p.freed + flits) & p.mask;
                    if !p.dirty {
                        p.dirty = true;
                        self.dirty.push(pipe);
                    }
                }
                TxRecord::Tx { pipe, bytes } => self.tx_pipes[pipe as usize].done += bytes as u64,
            }
            self.tx_done = (slot + 1) & self.ring_mask;
            self.tx_inflight -= 1;
            n += 1;
        }
        self.stats.completions += n as u64;
        while let Some(i) = self.dirty.pop() {
            let p = &mut self.pipes[i as usize];
            p.dirty = false;
            let (id, head) = (p.id, p.freed);
            self.stats.head_writes += 1;
            self.mmio_write(reg_addr(id, reg::RX_HEAD), head)?;
        }
        Ok(n)
    }

    /// Sends the first `bytes` of received-but-unsent data of an RX/TX pipe
    /// in place (port 0); they are freed when the NIC completes the send.
    pub fn send_and_free(&mut self, pipe: RxTxPipe, bytes: usize) -> Result<(), SendError> {
        self.send_and_free_on(pipe, bytes, 0)
    }

    /// As [`Device::send_and_free`], on port `port`.
    pub fn send_and_free_on(
        &mut self,
        pipe: RxTxPipe,
        bytes: usize,
        port: u32,
    ) -> Result<(), SendError> {
        let p = pipe.0;
        if p.dev != self.uid || p.idx as usize >= self.pipes.len() {
            return Err(SendError::ForeignPipe);
        }
        if port as usize >= self.info.ports {
            return Err(SendError::NoPort(port));
        }
        if !bytes.is_multiple_of(FLIT) {
            return Err(SendError::Unaligned(bytes));
        }
        let size = self.info.pipe_size;
        let ps = &self.pipes[p.idx as usize];
        let mask = ps.mask;
        let avail = (ps.consumed.wrapping_sub(ps.sent) & mask) as usize * FLIT;
        if bytes > avail {
            return Err(SendError::MoreThanReceived {
                asked: bytes,
                available: avail,
            });
        }
        let mut pos = ps.sent as usize * FLIT;
        let base = ps.off;
        let mut left = bytes;
        while left > 0 {
            // Never cross the end of the pipe or exceed one chunk.
            let n = left.min(size - pos).min(TX_CHUNK);
            let rec = TxRecord::RxTx {
                pipe: p.idx,
                flits: (n / FLIT) as u32,
            };
            self.push_data(base + pos, n, port, rec)?;
            pos = (pos + n) % size;
            left -= n;
        }
        let ps = &mut self.pipes[p.idx as usize];
        ps.sent = (ps.sent + (bytes / FLIT) as u32) & mask;
        self.flush_tx()?;
        Ok(())
    }

    /// Bytes free in a TX pipe (after reclaiming completions).
    pub fn tx_space(&mut self, pipe: TxPipe) -> Result<usize, SendError> {
        if pipe.dev != self.uid {
            return Err(SendError::ForeignPipe);
        }
        self.reap_completions()?;
        let t = &self.tx_pipes[pipe.idx as usize];
        Ok(t.size - (t.tail - t.done) as usize)
    }

    /// A writable span of `len` bytes at the end of a TX pipe, waiting
    /// (bounded) for space. Fill it, then call [`Device::send`].
    pub fn tx_buf(&mut self, pipe: TxPipe, len: usize) -> Result<&mut [u8], SendError> {
        if pipe.dev != self.uid || pipe.idx as usize >= self.tx_pipes.len() {
            return Err(SendError::ForeignPipe);
        }
        let cap = self.tx_pipes[pipe.idx as usize].size;
        if len > cap {
            return Err(SendError::TooLarge {
                asked: len,
                capacity: cap,
            });
        }
        let start = Instant::now();
        while self.tx_space(pipe)? < len {
            self.flush_tx()?;
            if start.elapsed() > STALL_TIMEOUT {
                return Err(self.stalled(DeviceError::TxStalled).into());
            }
            std::hint::spin_loop();
        }
        let t = &mut self.tx_pipes[pipe.idx as usize];
        t.reserved = len;
        let at = (t.tail % t.size as u64) as usize;
        // SAFETY: `at < size`, `len <= size`: inside the doubly mapped TX pipe; the NIC is
        // not reading bytes between `tail` and `done + size` (completed or never sent),
        // and the slice lives only while `self` is mutably borrowed.
        Ok(unsafe { std::slice::from_raw_parts_mut(t.map.as_ptr().add(at), len) })
    }

    /// Sends `len` bytes written at the start of the last [`Device::tx_buf`]
    /// span (frames on 64 B boundaries; `len` a multiple of 64, except that
    /// the last frame's padding may be left out). `len` may be less than
    /// the span, not more ([`SendError::NotReserved`]); a send ends the
    /// span, so each send needs its own `tx_buf` (or
    /// [`Device::recv_with_tx_span`]).
    pub fn send(&mut self, pipe: TxPipe, len: usize, port: u32) -> Result<(), SendError> {
        if pipe.dev != self.uid || pipe.idx as usize >= self.tx_pipes.len() {
            return Err(SendError::ForeignPipe);
        }
        if port as usize >= self.info.ports {
            return Err(SendError::NoPort(port));
        }
        let (size, off, tail, done) = {
            let t = &self.tx_pipes[pipe.idx as usize];
            (t.size, t.off, t.tail, t.done)
        };
        let padded = len.next_multiple_of(FLIT);
        let reserved = self.tx_pipes[pipe.idx as usize].reserved;
        // `tx_buf` waited for `reserved` bytes of space; space comes in
        // whole flits, so the padding fits too (checked all the same).
        if len > reserved || padded > size - (tail - done) as usize {
            return Err(SendError::NotReserved {
                asked: len,
                reserved,
            });
        }
        self.tx_pipes[pipe.idx as usize].reserved = 0;
        let mut pos = (tail % size as u64) as usize;
        let mut left = len;
        while left > 0 {
            let n = left.min(size - pos).min(TX_CHUNK);
            // The padding of the last piece is freed with it.
            let freed = if n == left { padded - (len - left) } else { n };
            self.push_data(
                off + pos,
                n,
                port,
                TxRecord::Tx {
                    pipe: pipe.idx,
                    bytes: freed as u32,
                },
            )?;
            pos = (pos + n) % size;
            left -= n;
        }
        self.tx_pipes[pipe.idx as usize].tail += padded as u64;
        self.flush_tx()?;
        Ok(())
    }

    /// Whether the device is still there: for a standalone device (opened
    /// with [`Device::open`] or [`Device::open_in`]), [`DeviceError::Gone`]
    /// once it has closed the attachment, as its process does when it exits
    /// or is killed. A device that is gone completes nothing and delivers
    /// nothing, so a loop that may wait for traffic indefinitely should call
    /// this now and then (it is one non-blocking read of the control
    /// connection). An in-process device ([`Device::attach_nic`]) is gone
    /// once it is stopped or dropped. A stepped engine
    /// lives as long as its owner: always `Ok`.
    pub fn check_alive(&self) -> Result<(), DeviceError> {
        let s = match &self._keep {
            Keepalive::Socket(s) => s,
            Keepalive::Control(c, _) if !c.is_running() => return Err(DeviceError::Gone),
            Keepalive::Control(..) | Keepalive::None => return Ok(()),
        };
        let mut byte = [0u8; 1];
        match (&*s).read(&mut byte) {
            // End of stream: the device closed its end.
            Ok(0) => Err(DeviceError::Gone),
            // The protocol has the device send nothing after its answer;
            // whatever it sent does not say it is gone.
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            // A reset connection (or any other failure of it).
            Err(_) => Err(DeviceError::Gone),
        }
    }

    /// The error for a wait that timed out: [`DeviceError::Gone`] if the
    /// device is gone (the usual reason), else `stall`.
    #[cold]
    fn stalled(&self, stall: DeviceError) -> DeviceError {
        match self.check_alive() {
            Err(gone) => gone,
            Ok(()) => stall,
        }
    }

    /// TX notifications sent but not completed.
    pub fn tx_in_flight(&self) -> u32 {
        self.tx_inflight
    }
}

pub(crate) fn rule_args(r: &FlowRule, pipe: u32) -> [u64; 5] {
    [
        (r.dst_ip as u64) << 32 | r.src_ip as u64,
        (r.dst_port as u64) << 32 | (r.src_port as u64) << 16 | r.protocol as u64,
        pipe as u64,
        0,
        0,
    ]
}

impl Drop for Device {
    fn drop(&mut self) {
        if let Keepalive::Control(c, id) = &self._keep {
            c.detach(*id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn opts() -> DeviceOptions {
        DeviceOptions {
            pipes: 2,
            tx_pipes: 0,
            ..Default::default()
        }
    }

    /// An honest answer for `opts()` (64 KiB pipes, 256-entry rings), naming
    /// files `tag.dma` and `tag.mmio` in `dir` (not created).
    fn answer(dir: &Path, tag: &str) -> AttachInfo {
        let (pipe_size, entries) = (64 << 10, 256);
        AttachInfo {
            app_id: 1,
            device: "fake".into(),
            dma_path: dir.join(format!("{tag}.dma")),
            dma_len: region_bytes(&opts(), pipe_size, entries),
            mmio_path: dir.join(format!("{tag}.mmio")),
            pipe_base: 0,
            pipe_count: 2,
            nbuf_id: 0,
            pipe_size,
            notif_ring_entries: entries,
            notification_mode: NotificationMode::Reactive,
            ports: 1,
            interconnect_latency_ns: 0,
            desc_queue_base: 0,
            desc_queue_count: 0,
        }
    }

    #[test]
    fn check_info_refuses_impossible_answers() {
        let o = opts();
        let good = answer(Path::new("/nonexistent"), "x");
        assert!(check_info(&good, &o).is_ok());
        // What the refusal must say, and the change that makes it refusable.
        type Case = (&'static str, fn(&mut AttachInfo));
        let cases: [Case; 16] = [
            ("entries", |i| i.notif_ring_entries = 0),
            ("entries", |i| i.notif_ring_entries = 1),
            ("entries", |i| i.notif_ring_entries = 96),
            ("pipe size", |i| i.pipe_size = 0),
            ("pipe size", |i| i.pipe_size = 1000),
            ("pipe size", |i| i.pipe_size = 2048),
            ("pipe size", |i| i.pipe_size = 1 << 32),
            ("pipe ids", |i| i.pipe_base = u32::MAX),
            ("pipe ids", |i| i.pipe_count = layout::MAX_PIPES + 1),
            ("notification buffer", |i| i.nbuf_id = layout::MAX_NBUFS),
            ("queue ids", |i| {
                (i.desc_queue_base, i.desc_queue_count) = (layout::MAX_DESC_QUEUES, 1)
            }),
            ("queue ids", |i| i.desc_queue_count = u32::MAX),
            ("ports", |i| i.ports = 17),
            ("notification rings", |i| i.notif_ring_entries = 1 << 31),
            ("needed", |i| i.dma_len -= 1),
            ("needed", |i| i.pipe_size *= 2),
        ];
        for (want, hostile) in cases {
            let mut info = good.clone();
            hostile(&mut info);
            match check_info(&info, &o) {
                Err(AttachError::Device(m)) => {
                    assert!(m.contains(want), "'{m}' does not say '{want}'")
                }
                r => panic!("{info:?}: {r:?}, not a refusal"),
            }
        }
    }

    /// A device in `dir` whose control socket answers up to two attach
    /// requests with `info`; returns how many it answered so far.
    fn fake_device(dir: &Path, name: &str, info: AttachInfo) -> Arc<AtomicUsize> {
        let devdir = dir.join(format!("enso-{name}"));
        std::fs::create_dir_all(&devdir).expect("device dir");
        let l = UnixListener::bind(devdir.join(enso_abi::control::CONTROL_SOCKET)).expect("bind");
        let answered = Arc::new(AtomicUsize::new(0));
        let count = answered.clone();
        std::thread::spawn(move || {
            for s in l.incoming().take(2) {
                let mut s = s.expect("accept");
                let mut line = String::new();
                BufReader::new(&s).read_line(&mut line).expect("request");
                let resp = enso_abi::control::ControlResponse::Attached(info.clone());
                let mut out = serde_json::to_string(&resp).expect("json");
                out.push('\n');
                count.fetch_add(1, Ordering::SeqCst);
                s.write_all(out.as_bytes()).expect("answer");
            }
        });
        answered
    }

    /// Creates the files `info` names: the DMA file `dma_file_len` bytes
    /// long, the register file as long as it must be.
    fn create_files(info: &AttachInfo, dma_file_len: usize) {
        shm::create_file(&info.dma_path, dma_file_len).expect("dma file");
        shm::create_file(&info.mmio_path, layout::MMIO_FILE_LEN).expect("mmio file");
    }

    fn refused(r: Result<Device, AttachError>, want: &str) {
        match r {
            Err(AttachError::Device(m)) => {
                assert!(
                    m.starts_with("bad attach answer") && m.contains(want),
                    "{m}"
                )
            }
            r => panic!("{r:?}, not a refusal saying '{want}'"),
        }
    }

    #[test]
    fn open_refuses_names_that_leave_the_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        // `nm/../enso-nm` resolves to device `nm`'s directory: without the
        // check, this fake device would answer.
        let mut info = answer(d, "nm");
        info.dma_len = 12 * layout::PAGE;
        let asked = fake_device(d, "nm", info);
        for name in ["nm/../enso-nm", "..", "a/b", ""] {
            match Device::open_in(d, name, opts()) {
                Err(AttachError::Options(m)) => assert!(m.contains("bad device name"), "{m}"),
                r => panic!("{name}: {r:?}"),
            }
        }
        assert_eq!(asked.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn open_refuses_what_a_hostile_device_answers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();

        // A region that holds the notification rings but not the pipes,
        // twice: the device's sizes differ from the library's first guess,
        // so it asks again and must check the second answer too.
        let mut info = answer(d, "small");
        info.dma_len = 12 * layout::PAGE;
        create_files(&info, info.dma_len);
        let asked = fake_device(d, "small", info);
        refused(Device::open_in(d, "small", opts()), "needed");
        assert_eq!(asked.load(Ordering::SeqCst), 2);

        // No notification ring entries.
        let mut info = answer(d, "zero");
        info.notif_ring_entries = 0;
        create_files(&info, info.dma_len);
        fake_device(d, "zero", info);
        refused(Device::open_in(d, "zero", opts()), "entries");

        // A region longer than its file.
        let info = answer(d, "short");
        create_files(&info, layout::PAGE);
        fake_device(d, "short", info);
        refused(Device::open_in(d, "short", opts()), "holds");

        // The honest answer attaches.
        let info = answer(d, "honest");
        create_files(&info, info.dma_len);
        fake_device(d, "honest", info);
        let dev = Device::open_in(d, "honest", opts()).expect("honest answer");
        assert_eq!(dev.info().notif_ring_entries, 256);
    }

    #[test]
    fn check_alive_tells_when_the_device_closed_the_attachment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let info = answer(d, "held");
        create_files(&info, info.dma_len);
        let devdir = d.join("enso-held");
        std::fs::create_dir_all(&devdir).expect("device dir");
        let l = UnixListener::bind(devdir.join(enso_abi::control::CONTROL_SOCKET)).expect("bind");
        // A device that holds the connection until told to go.
        let (go, gone) = std::sync::mpsc::channel::<()>();
        let device = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).expect("request");
            let resp = enso_abi::control::ControlResponse::Attached(info);
            let mut out = serde_json::to_string(&resp).expect("json");
            out.push('\n');
            s.write_all(out.as_bytes()).expect("answer");
            let _ = gone.recv();
        });
        let dev = Device::open_in(d, "held", opts()).expect("attach");
        assert_eq!(dev.check_alive(), Ok(()));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(dev.check_alive(), Ok(()), "nothing to read is not gone");
        go.send(()).expect("device thread");
        device.join().expect("device thread");
        assert_eq!(dev.check_alive(), Err(DeviceError::Gone));
        assert_eq!(dev.check_alive(), Err(DeviceError::Gone), "and stays gone");
    }
}
