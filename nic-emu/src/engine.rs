//! The engine: the emulated NIC's hardware, as a state machine that runs one
//! bounded slice of work per [`Engine::step`].
//!
//! The engine only touches memory that applications handed it (their DMA
//! region and their posted-write queue) and only through the structures of
//! [`crate::layout`]. Every address an application gives it is checked
//! against that application's region first (the emulated IOMMU); anything
//! out of range is refused and counted, never followed.

use std::sync::atomic::Ordering;

use memmap2::MmapRaw;
use pcie_model::{PcieCounters, TrafficClass};

use crate::config::DeviceConfig;
use crate::counters::*;
use crate::layout::{self, config, reg, signal, MmioQueue, RxNotification, TxNotification};
use crate::port::{self, Port, Wire};
use crate::shm;
use crate::steering::{self, Fallback, FlowTable};
use crate::wire::{self, FiveTuple, FrameError, FLIT, MAX_FRAME};

mod desc;
mod evict;
use desc::DescQueue;

// A generator's burst is sent inside one step into its port's wire FIFO:
// the configuration's limit is what the FIFO holds.
const _: () = assert!(crate::config::MAX_GENERATOR_BURST == port::WIRE_FIFO_FRAMES);

/// Frames moved per port per step at most.
const RX_BUDGET: usize = 64;
/// A step that did at least this much work means the engine is saturated:
/// only then does it defer looking at posted register writes.
const SATURATED_STEP_WORK: usize = 32;
/// Frames transmitted per application per step at most.
const TX_BUDGET: usize = 64;
/// Posted register writes applied per application per step at most.
const MMIO_BUDGET: u32 = 256;
/// Rounds of register writes and TX work the engine runs for an
/// application that detaches, to send what it had handed over
/// ([`Engine::detach`]).
const DETACH_DRAIN_ROUNDS: usize = 1024;
/// TX notifications the NIC fetches in one read request at most.
const TX_FETCH_MAX: u32 = 256;
/// A notification slot's size as the byte count of a DMA access.
const NOTIF_BYTES: u64 = layout::NOTIF_SLOT as u64;

pub use enso_abi::control::{AttachInfo, AttachRequest};

/// Why an attach was refused.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("not enough free pipe ids for {0} pipes")]
    NoPipes(u32),
    #[error("no free notification buffer")]
    NoNbuf,
    #[error("not enough free descriptor queues for {0}")]
    NoQueues(u32),
    #[error(
        "a DMA region of {asked} bytes was asked for; this device accepts {min}..={max} bytes"
    )]
    BadRegionSize {
        asked: usize,
        min: usize,
        max: usize,
    },
    #[error("creating shared memory: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Debug, Default, Clone, Copy)]
struct PipeState {
    /// Offset of the buffer in the owner's region; 0 = disabled.
    base: usize,
    owner: u32,
    /// The port it receives from.
    port: u16,
    /// A stream pipe (positions in bytes).
    stream: bool,
    head: u32,
    tail: u32,
    outstanding: bool,
    pending_low: u32,
}

#[derive(Debug, Default)]
struct Nbuf {
    rx_ring: usize,
    rx_low: u32,
    rx_head: u32,
    rx_tail: u32,
    tx_ring: usize,
    tx_low: u32,
    /// Next TX notification the NIC will read.
    tx_head: u32,
    /// Software's tail.
    tx_tail: u32,
    /// TX notifications already fetched (accounted) by the NIC.
    tx_fetched: u32,
}

/// A TX notification being transmitted.
#[derive(Debug, Clone, Copy)]
struct TxCursor {
    addr: usize,
    len: usize,
    off: usize,
    port: usize,
    /// Evict the data's lines once it is all read (see `Core::evict_tx`).
    evict: bool,
}

/// Reassembles frames from the TX byte stream; a frame may continue in the
/// next notification (a batch split at the end of a ring).
#[derive(Debug)]
struct TxAssembler {
    buf: Box<[u8]>,
    fill: usize,
    /// Bytes of the current frame incl. marker once known (0: unknown).
    need: usize,
    start: usize,
    /// Padding bytes still to skip in the current notification.
    pad: usize,
}

impl TxAssembler {
    fn new() -> Self {
        Self {
            buf: vec![0u8; FLIT + MAX_FRAME + FLIT].into_boxed_slice(),
            fill: 0,
            need: 0,
            start: 0,
            pad: 0,
        }
    }
    fn reset(&mut self) {
        self.fill = 0;
        self.need = 0;
        self.start = 0;
        self.pad = 0;
    }
}

/// One attached application.
#[derive(Debug)]
struct App {
    id: u32,
    region: MmapRaw,
    region_len: usize,
    mmio: MmapRaw,
    mmio_consumer: u32,
    /// Step in which the engine last looked at this application's posted
    /// writes because a frame was about to be dropped.
    looked_step: u64,
    pipe_base: u32,
    pipe_count: u32,
    desc_base: u32,
    desc_count: u32,
    nbuf_id: u32,
    nb: Nbuf,
    tx: Option<TxCursor>,
    asm: TxAssembler,
    /// Region spans (start, end) of its enabled RX pipes, sorted by start.
    rx_spans: Vec<(usize, usize)>,
    /// Pipes owed a notification: software wrote their head while data was
    /// pending and the notification ring was full. Announced as soon as
    /// software frees ring slots, so no data waits unannounced.
    owed: Vec<u32>,
    counters: AppCounters,
    /// The shared files, kept open (and so reachable by their paths) while
    /// the application is attached.
    _files: [shm::SealedFile; 2],
}

impl App {
    fn owns_pipe(&self, pipe: u32) -> bool {
        pipe.wrapping_sub(self.pipe_base) < self.pipe_count
    }
    fn owns_queue(&self, q: u32) -> bool {
        q.wrapping_sub(self.desc_base) < self.desc_count
    }
    /// Whether a steering target (pipe or descriptor queue) is its own.
    fn owns_target(&self, t: u32) -> bool {
        if t < layout::DESC_TARGET_BASE {
            self.owns_pipe(t)
        } else {
            self.owns_queue(t - layout::DESC_TARGET_BASE)
        }
    }
    #[inline]
    fn mmio_queue(&self) -> &MmioQueue {
        // SAFETY: the mapping is MMIO_FILE_LEN >= size_of::<MmioQueue>() bytes,
        // page aligned, lives as long as `self`, and every field of MmioQueue
        // is an atomic, so shared access from both sides is sound.
        unsafe { &*(self.mmio.as_ptr() as *const MmioQueue) }
    }
    /// `len` bytes at `off` lie inside the region.
    #[inline]
    fn in_region(&self, off: usize, len: usize) -> bool {
        off >= layout::DMA_RESERVED && off.checked_add(len).is_some_and(|e| e <= self.region_len)
    }
    #[inline]
    fn rx_notif(&self, ring: usize, i: u32) -> &RxNotification {
        let off = ring + i as usize * layout::NOTIF_SLOT;
        debug_assert!(self.in_region(off, layout::NOTIF_SLOT));
        // SAFETY: `ring` was checked to hold the whole ring inside the region when enabled
        // and `i` is masked to it: the 64 B slot is in bounds and 64 B aligned (the ring
        // is page aligned). All fields are atomics.
        unsafe { &*(self.region.as_ptr().add(off) as *const RxNotification) }
    }
    #[inline]
    fn tx_notif(&self, ring: usize, i: u32) -> &TxNotification {
        let off = ring + i as usize * layout::NOTIF_SLOT;
        debug_assert!(self.in_region(off, layout::NOTIF_SLOT));
        // SAFETY: as for `rx_notif`: checked ring, masked index, atomics only.
        unsafe { &*(self.region.as_ptr().add(off) as *const TxNotification) }
    }
    /// Copies `src` into the region at `off`.
    #[inline]
    fn write(&self, off: usize, src: &[u8]) {
        // Callers pass ranges inside a pipe or buffer checked to lie in the
        // region; this backstop (two compares) keeps a slip in that from
        // writing outside it.
        if !self.in_region(off, src.len()) {
            debug_assert!(false, "write outside the region: {off}+{}", src.len());
            return;
        }
        // SAFETY: the range was just checked to lie in the region. The
        // application may read it concurrently; the bytes are plain data
        // published by the notification's (or descriptor's) Release store.
        unsafe { copy_bytes(src.as_ptr(), self.region.as_mut_ptr().add(off), src.len()) };
    }
    /// Writes `src`, a frame of at most [`evict::MAX_FLITS`] lines, at the
    /// line-aligned `off` with non-temporal stores (see
    /// [`evict::stream_lines`]); the caller fences before publishing it.
    #[inline(always)]
    fn stream(&self, off: usize, src: &[u8]) {
        let lines = src.len().div_ceil(FLIT);
        // As in `write`: the callers checked the range; this is a backstop.
        if lines > evict::MAX_FLITS
            || !off.is_multiple_of(FLIT)
            || !self.in_region(off, lines * FLIT)
        {
            debug_assert!(false, "stream outside the region: {off}+{}", src.len());
            return;
        }
        // SAFETY: the whole lines were just checked to lie in the region,
        // and `off` (like the region's base, page-aligned) is a line start;
        // the engine streams only when `evict::non_temporal_supported`. The
        // bytes are plain data, published as in `write` after the fence.
        unsafe { evict::stream_lines(self.region.as_mut_ptr().add(off), src) };
    }
    /// Evicts from the engine's caches the lines of the ring of `size` bytes
    /// (a power of two) at `base` that start at ring positions in
    /// `[from + ahead, to + ahead)` (bytes, wrapping; `to` may have wrapped
    /// past `from`): called as the tail moves from `from` to `to`, it evicts
    /// every line once per lap, `ahead` bytes before the tail reaches it.
    /// `op` says whether to evict them or prefetch them for writing. See
    /// [`evict`].
    #[inline(always)]
    fn ahead_ring(
        &self,
        base: usize,
        size: usize,
        from: usize,
        to: usize,
        ahead: usize,
        op: LinesAhead,
    ) {
        let prefetch = match op {
            LinesAhead::Evict => false,
            LinesAhead::Prefetch { free } if free >= ahead + FLIT => true,
            LinesAhead::Prefetch { .. } => return,
        };
        for p in evict::lines_ahead(size, from, to, ahead) {
            let line = self.region.as_ptr().wrapping_add(base + p);
            if prefetch {
                evict::prefetch_for_write(line);
            } else {
                evict::evict_line(line);
            }
        }
    }
    /// Whether `len` bytes at `off` start in or overlap one of its RX
    /// pipes (frames sent back in place). Only a performance hint rides on
    /// it: a hostile layout of overlapping pipes can make it answer wrong,
    /// which costs time, never correctness.
    fn in_rx_pipes(&self, off: usize, len: usize) -> bool {
        overlaps_sorted(&self.rx_spans, off, len)
    }
    /// Evicts the lines of `len` bytes at `off` from this core's caches.
    fn evict_span(&self, off: usize, len: usize) {
        let mut a = off & !(FLIT - 1);
        while a < off + len {
            evict::evict_line(self.region.as_ptr().wrapping_add(a));
            a += FLIT;
        }
    }
    /// Copies `dst.len()` bytes from the region at `off`.
    #[inline]
    fn read(&self, off: usize, dst: &mut [u8]) {
        // As in `write`: the callers checked the range; this is a backstop.
        if !self.in_region(off, dst.len()) {
            debug_assert!(false, "read outside the region: {off}+{}", dst.len());
            dst.fill(0);
            return;
        }
        read_region(&self.region, off, dst);
    }
}

/// Whether `len > 0` bytes at `off` overlap one of `spans` ((start, end),
/// sorted by start, not overlapping each other).
fn overlaps_sorted(spans: &[(usize, usize)], off: usize, len: usize) -> bool {
    let i = spans.partition_point(|&(s, _)| s < off + len);
    i > 0 && spans[i - 1].1 > off
}

/// What had no room for a frame.
#[derive(Clone, Copy, Debug)]
enum Full {
    Pipe,
    NotificationRing,
}

/// An event of the notification protocol, recorded when tracing is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A frame was written to a pipe.
    Frame { pipe: u32 },
    /// The NIC wrote an RX notification.
    Notify { pipe: u32, tail: u32 },
    /// Software's head write reached the NIC.
    HeadWrite { pipe: u32, head: u32 },
}

/// Everything but the ports, so the RX path can borrow it while a port's wire
/// produces frames.
#[derive(Debug)]
struct Core {
    pipes: Vec<PipeState>,
    pipe_counters: Vec<PipeCounters>,
    apps: Vec<Option<App>>,
    flows: FlowTable,
    /// Fallback pipes of each port.
    fallback: Vec<Fallback>,
    /// Per port: timestamp offset when timestamping is on.
    ts_offset: Vec<Option<usize>>,
    /// Per port: TX rate limiter.
    limiter: Vec<Option<TokenBucket>>,
    clock: Clock,
    latency: u64,
    per_packet: bool,
    /// Bytes ahead of a frame pipe's tail whose lines are evicted from this
    /// core's caches before a frame of at most [`evict::MAX_FLITS`] lines
    /// is written (0: off, or off for now: see [`Engine::ahead`]). See
    /// [`evict`].
    evict_ahead: usize,
    /// Whether runs write frames of at most [`evict::MAX_FLITS`] lines into
    /// frame pipes with non-temporal stores (and so skip evicting ahead).
    non_temporal: bool,
    /// Whether the lines ahead of short frames are prefetched for writing
    /// rather than evicted (with `evict_ahead` their distance).
    prefetch_ahead: bool,
    /// The way short frames are written now (what the three above say).
    pipe_writes: PipeWriteMode,
    /// Whether non-temporal stores were made since the last store fence.
    unfenced: bool,
    /// Frames of at most [`evict::MAX_FLITS`] lines written into frame
    /// pipes, ever (the frames `evict_ahead` is for).
    short_frames: u64,
    /// Whether the lines of TX data outside the application's RX pipes are
    /// evicted from this core's caches once transmitted. The engine reads
    /// them as a device's DMA read would, but unlike a device it keeps a
    /// shared copy, and the application's next write to the line (a TX
    /// pipe's, one lap later) must invalidate it first: with the vCPUs in
    /// different core complexes that held the KV server on Ensō at 125 ns
    /// per request against 68 with eviction (`bench apps --apps kv`: 0.77x
    /// the packetized side instead of 1.32-1.39x; no change with them
    /// close). Frames sent back in place from an RX pipe are left alone: the
    /// engine itself writes those lines next (see `evict_ahead`).
    evict_tx: bool,
    pipe_flits: u32,
    pipe_size: usize,
    ring_mask: u32,
    detached_pipes: PipeCounters,
    detached_apps: AppCounters,
    dqs: Vec<DescQueue>,
    dq_counters: Vec<QueueCounters>,
    detached_queues: QueueCounters,
    desc_fetch: u32,
    desc_writeback: u32,
    /// The NIC's buffer for a frame read from a TX descriptor.
    txbuf: Box<[u8]>,
    /// Posted writes copied out of a queue before they are applied (kept
    /// here, not on the stack, so no step pays for zeroing it).
    mmio_batch: Vec<(u32, u32)>,
    pcie: PcieCounters,
    frames: u64,
    /// Of `frames`, those written by runs (see [`Run`]).
    run_frames: u64,
    /// The generator's open runs, and whether any may be open.
    runs: [Run; RUN_SLOTS],
    runs_open: bool,
    trace: Option<Vec<TraceEvent>>,
    /// The current step's time and number (see [`Core::look_before_drop`]).
    now: u64,
    step_no: u64,
    /// Flits written into pipes and packet buffers, ever.
    flits_in: u64,
}

/// What [`App::ahead_ring`] does to the pipe lines ahead of the tail.
#[derive(Clone, Copy, Debug)]
enum LinesAhead {
    /// Evicts them from the engine's caches.
    Evict,
    /// Prefetches them for writing, but only when the pipe has `free`
    /// bytes of room after the tail that reach past them: taking a line
    /// the application is still to read would slow it, and a full pipe
    /// would keep it so.
    Prefetch { free: usize },
}

/// Evicting ahead, and whether it pays at the moment.
#[derive(Debug)]
struct Ahead {
    /// The configured distance (bytes).
    bytes: usize,
    /// Decides whether to evict at all; `None`: always.
    chooser: Option<evict::AheadChooser>,
}

pub use crate::clock::Clock;

/// The emulated NIC.
#[derive(Debug)]
pub struct Engine {
    cfg: DeviceConfig,
    core: Core,
    ports: Vec<Port>,
    counters: EngineCounters,
    last_step_ns: u64,
    /// Work (frames, register writes) done by the last step; 0: it was idle.
    last_step_work: usize,
    /// `Core::flits_in` and the time when the engine last looked at posted
    /// register writes (see [`DeviceConfig::register_poll_flits`]), and how
    /// many flits it may write before it looks again.
    flits_at_poll: u64,
    last_poll_ns: u64,
    poll_flits: u64,
    pipe_used: Vec<bool>,
    nbuf_used: Vec<bool>,
    desc_used: Vec<bool>,
    next_app_id: u32,
    /// `None` when the engine never evicts ahead (configured so, or the
    /// CPU cannot).
    ahead: Option<Ahead>,
}

impl Engine {
    /// A device with `cfg`; creates its directory (owner-only) inside
    /// `cfg.dir`, which must exist.
    pub fn new(cfg: DeviceConfig) -> Result<Self, String> {
        cfg.validate()?;
        // Only the device's own directory is made (a mistyped `dir` is an
        // error, not a new directory tree), and never through a link.
        crate::devdir::create(&cfg.dir, &cfg.name)?;
        let ports = cfg
            .ports
            .iter()
            .enumerate()
            .map(|(i, w)| Port::new(w, &cfg.ports, i))
            .collect();
        let pipe_flits = (cfg.pipe_size / FLIT) as u32;
        let core = Core {
            pipes: vec![PipeState::default(); layout::MAX_PIPES as usize],
            pipe_counters: vec![PipeCounters::default(); layout::MAX_PIPES as usize],
            apps: Vec::new(),
            flows: FlowTable::default(),
            fallback: (0..cfg.ports.len()).map(|_| Fallback::default()).collect(),
            ts_offset: vec![None; cfg.ports.len()],
            limiter: vec![None; cfg.ports.len()],
            clock: Clock::Monotonic,
            latency: cfg.interconnect_latency_ns,
            per_packet: cfg.notification_mode.per_packet(),
            evict_ahead: if evict::supported() {
                cfg.evict_ahead_lines as usize * FLIT
            } else {
                0
            },
            non_temporal: false,
            prefetch_ahead: false,
            pipe_writes: PipeWriteMode::Plain,
            unfenced: false,
            short_frames: 0,
            evict_tx: cfg.evict_tx_lines && evict::supported(),
            pipe_flits,
            pipe_size: cfg.pipe_size,
            ring_mask: cfg.notif_ring_entries - 1,
            detached_pipes: PipeCounters::default(),
            detached_apps: AppCounters::default(),
            dqs: vec![DescQueue::default(); layout::MAX_DESC_QUEUES as usize],
            dq_counters: vec![QueueCounters::default(); layout::MAX_DESC_QUEUES as usize],
            detached_queues: QueueCounters::default(),
            desc_fetch: cfg.desc_fetch,
            desc_writeback: cfg.desc_writeback,
            txbuf: vec![0u8; layout::desc::BUF_SIZE].into_boxed_slice(),
            mmio_batch: Vec::with_capacity(MMIO_BUDGET as usize),
            pcie: PcieCounters::new(cfg.pcie),
            frames: 0,
            run_frames: 0,
            runs: [Run::CLOSED; RUN_SLOTS],
            runs_open: false,
            trace: None,
            now: 0,
            step_no: 0,
            flits_in: 0,
        };
        let ahead = (core.evict_ahead != 0).then(|| Ahead {
            bytes: core.evict_ahead,
            // Where the CPU prefetches for writing, that is the way
            // throughout (see `evict`); elsewhere the engine chooses.
            chooser: (cfg.evict_ahead_adaptive && !evict::prefetch_for_write_supported()).then(
                || {
                    let modes = if evict::non_temporal_supported() {
                        evict::MODES
                    } else {
                        evict::MODES_CACHED
                    };
                    evict::AheadChooser::new(crate::monotonic_ns(), modes)
                },
            ),
        });
        let fixed = cfg.pipe_writes;
        let mut engine = Self {
            ahead,
            core,
            ports,
            counters: EngineCounters::default(),
            last_step_ns: crate::monotonic_ns(),
            last_step_work: 0,
            flits_at_poll: 0,
            last_poll_ns: 0,
            poll_flits: poll_flits(&cfg),
            pipe_used: vec![false; layout::MAX_PIPES as usize],
            nbuf_used: vec![false; layout::MAX_NBUFS as usize],
            desc_used: vec![false; layout::MAX_DESC_QUEUES as usize],
            next_app_id: 1,
            cfg,
        };
        match (fixed, &engine.ahead) {
            (Some(m), _) => engine.set_pipe_writes(m),
            (None, Some(a)) => {
                let mode = match &a.chooser {
                    Some(c) => c.mode(),
                    None if engine.cfg.evict_ahead_adaptive => PipeWriteMode::PrefetchAhead,
                    None => PipeWriteMode::EvictAhead,
                };
                engine.core.set_pipe_writes(mode, a.bytes);
            }
            (None, None) => {}
        }
        Ok(engine)
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.cfg
    }

    pub fn set_clock(&mut self, clock: Clock) {
        self.core.clock = clock;
    }

    /// Attaches an application: reserves pipe ids and a notification buffer
    /// and creates its DMA region and posted-write queue (mode 0600).
    pub fn attach(&mut self, req: &AttachRequest) -> Result<AttachInfo, AttachError> {
        let (min, max) = (layout::DMA_RESERVED + layout::PAGE, self.cfg.max_dma_bytes);
        if !(min..=max).contains(&req.dma_bytes) {
            return Err(AttachError::BadRegionSize {
                asked: req.dma_bytes,
                min,
                max,
            });
        }
        let n = req.pipes as usize;
        let pipe_base =
            first_free_run(&self.pipe_used, n).ok_or(AttachError::NoPipes(req.pipes))?;
        let nbuf = first_free_run(&self.nbuf_used, 1).ok_or(AttachError::NoNbuf)?;
        let nq = req.desc_queues as usize;
        let desc_base =
            first_free_run(&self.desc_used, nq).ok_or(AttachError::NoQueues(req.desc_queues))?;
        let id = self.next_app_id;
        let dma_len = req.dma_bytes.next_multiple_of(layout::PAGE);
        let name = &self.cfg.name;
        let dma_file = shm::SealedFile::create(&format!("enso-{name}-app-{id}.dma"), dma_len)?;
        let mmio_file =
            shm::SealedFile::create(&format!("enso-{name}-app-{id}.mmio"), layout::MMIO_FILE_LEN)?;
        let (dma_path, mmio_path) = (dma_file.path().into(), mmio_file.path().into());
        let region = shm::map(dma_file.file(), dma_len)?;
        let mmio = shm::map(mmio_file.file(), layout::MMIO_FILE_LEN)?;
        self.next_app_id += 1;
        self.pipe_used[pipe_base..pipe_base + n].fill(true);
        self.nbuf_used[nbuf] = true;
        self.desc_used[desc_base..desc_base + nq].fill(true);
        for p in pipe_base..pipe_base + n {
            self.core.pipes[p] = PipeState::default();
            self.core.pipe_counters[p] = PipeCounters::default();
        }
        let app = App {
            id,
            region,
            region_len: dma_len,
            mmio,
            mmio_consumer: 0,
            looked_step: u64::MAX,
            pipe_base: pipe_base as u32,
            pipe_count: n as u32,
            desc_base: desc_base as u32,
            desc_count: nq as u32,
            nbuf_id: nbuf as u32,
            nb: Nbuf::default(),
            tx: None,
            asm: TxAssembler::new(),
            rx_spans: Vec::new(),
            owed: Vec::new(),
            counters: AppCounters::default(),
            _files: [dma_file, mmio_file],
        };
        let slot = match self.core.apps.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                self.core.apps.push(None);
                self.core.apps.len() - 1
            }
        };
        for p in pipe_base..pipe_base + n {
            self.core.pipes[p].owner = slot as u32;
        }
        for q in desc_base..desc_base + nq {
            self.core.dqs[q] = DescQueue::default();
            self.core.dqs[q].owner = slot as u32;
            self.core.dq_counters[q] = QueueCounters::default();
        }
        self.core.apps[slot] = Some(app);
        Ok(AttachInfo {
            app_id: id,
            device: self.cfg.name.clone(),
            dma_path,
            dma_len,
            mmio_path,
            pipe_base: pipe_base as u32,
            pipe_count: n as u32,
            nbuf_id: nbuf as u32,
            pipe_size: self.cfg.pipe_size,
            notif_ring_entries: self.cfg.notif_ring_entries,
            notification_mode: self.cfg.notification_mode,
            ports: self.ports.len(),
            interconnect_latency_ns: self.cfg.interconnect_latency_ns,
            desc_queue_base: desc_base as u32,
            desc_queue_count: nq as u32,
        })
    }

    /// Detaches application `app_id`: disables its pipes, removes its flow
    /// rules and fallback entries, deletes its files. Its counters are kept in
    /// the device totals.
    pub fn detach(&mut self, app_id: u32) -> bool {
        let Some(slot) = self
            .core
            .apps
            .iter()
            .position(|a| a.as_ref().is_some_and(|a| a.id == app_id))
        else {
            return false;
        };
        self.drain_before_detach(slot);
        let app = self.core.apps[slot].take().expect("slot found above");
        self.core.detached_apps.add(&app.counters);
        let range = app.pipe_base as usize..(app.pipe_base + app.pipe_count) as usize;
        for p in range.clone() {
            let c = std::mem::take(&mut self.core.pipe_counters[p]);
            self.core.detached_pipes.add(&c);
            self.core.pipes[p] = PipeState::default();
        }
        let qrange = app.desc_base as usize..(app.desc_base + app.desc_count) as usize;
        for q in qrange.clone() {
            let c = std::mem::take(&mut self.core.dq_counters[q]);
            self.core.detached_queues.add(&c);
            self.core.dqs[q] = DescQueue::default();
        }
        self.desc_used[qrange].fill(false);
        let owned = |t: u32| app.owns_target(t);
        self.core.flows.retain(owned);
        for f in &mut self.core.fallback {
            f.retain(|p| !owned(p));
        }
        self.pipe_used[range].fill(false);
        self.nbuf_used[app.nbuf_id as usize] = false;
        true
    }

    /// Sends what application `slot` handed the NIC before it detached:
    /// the register writes it had posted, then the TX notifications and
    /// descriptors they published, as a device finishes the work a queue
    /// was given before the queue is disabled. Without this, frames the
    /// application counted as sent were lost uncounted whenever a detach
    /// came between its last tail write and the engine's next look at its
    /// registers (an echo server ending a run: 16 736 frames of 86.5
    /// million once). What a port's rate limit or a full cable still holds
    /// back after [`DETACH_DRAIN_ROUNDS`] rounds is counted:
    /// `tx_notifications_discarded` and `tx_descriptors_discarded`.
    fn drain_before_detach(&mut self, slot: usize) {
        // Writes still crossing the emulated interconnect arrive by then.
        let now = self.core.now.saturating_add(self.core.latency);
        for _ in 0..DETACH_DRAIN_ROUNDS {
            let Self { core, ports, .. } = self;
            let mut work = core.drain_mmio(slot, now);
            work += core.process_tx(slot, ports, now);
            work += core.process_desc_tx(slot, ports, now);
            core.flush_desc_writebacks(slot);
            if work == 0 {
                break;
            }
        }
        let core = &mut self.core;
        let mask = core.ring_mask;
        let app = core.apps[slot].as_mut().expect("caller checked");
        let nb = &app.nb;
        let mut left = u64::from(nb.tx_tail.wrapping_sub(nb.tx_head) & mask);
        if app.tx.is_some() && left == 0 {
            left = 1;
        }
        app.counters.tx_notifications_discarded += left;
        for q in app.desc_base..app.desc_base + app.desc_count {
            let dq = &core.dqs[q as usize];
            app.counters.tx_descriptors_discarded += u64::from(dq.tx_pending());
        }
    }

    /// Ids of attached applications.
    pub fn app_ids(&self) -> Vec<u32> {
        self.core.apps.iter().flatten().map(|a| a.id).collect()
    }

    /// Runs one bounded slice of work; returns how much was done (0: idle).
    pub fn step(&mut self) -> usize {
        let t = crate::monotonic_ns();
        if self.last_step_work > 0 {
            self.counters.busy_ns += t.saturating_sub(self.last_step_ns);
        }
        self.last_step_ns = t;
        let now = match &self.core.clock {
            Clock::Monotonic => t,
            c => c.now_ns(),
        };
        let mut work = 0;
        self.core.now = now;
        self.core.step_no = self.counters.steps;
        // Posted register writes are looked at every step while the engine
        // keeps up (its last step did less than SATURATED_STEP_WORK), and
        // after `register_poll_flits` flits of frames (or `register_poll_ns`)
        // while it is saturated. Looking at them, and the notification a
        // head update triggers, cost this core cross-core misses; with an
        // application that keeps up, batches stayed at ~16 frames and that
        // per-batch cost dominated (64 B rx: 54 ns per frame at 16 frames
        // per notification, 25 ns at 500). A step that finds no other work
        // always looks, and so does a frame about to be dropped for lack of
        // room, so deferring never costs a frame.
        let poll = self.last_step_work < SATURATED_STEP_WORK
            || self.core.flits_in - self.flits_at_poll >= self.poll_flits
            || now.saturating_sub(self.last_poll_ns) >= self.cfg.register_poll_ns;
        if poll {
            work += self.poll_registers(now);
        }
        let Self { core, ports, .. } = self;
        for slot in 0..core.apps.len() {
            if core.apps[slot].is_some() {
                work += core.process_tx(slot, ports, now);
                work += core.process_desc_tx(slot, ports, now);
            }
        }
        for (i, p) in ports.iter_mut().enumerate() {
            // Timestamping is configured through TX notifications, which
            // are not read while frames are received: one look per port.
            let ts = core.ts_offset[i];
            if let Some(fifo) = p.inbound.as_mut() {
                let mut n = 0;
                while n < RX_BUDGET {
                    let Some(f) = fifo.front_ready(now) else {
                        break;
                    };
                    p.counters.rx_frames += 1;
                    p.counters.rx_bytes += f.len() as u64;
                    let _ = core.deliver(i, ts, &mut p.counters, f, None);
                    fifo.pop();
                    n += 1;
                }
                work += n;
            }
            if let Wire::Generator(g) = &mut p.wire {
                let clock = core.clock.clone();
                let mut sink = RxSink {
                    core: &mut *core,
                    port: i,
                    ts,
                    counters: &mut p.counters,
                    dropped: 0,
                };
                let (sent, sent_bytes) = (g.counters.sent, g.counters.sent_bytes);
                work += g.emit_to(now, &clock, &mut sink);
                g.counters.dropped_on_arrival += sink.dropped;
                core.close_runs();
                // Every frame the generator sent arrived at the port.
                p.counters.rx_frames += g.counters.sent - sent;
                p.counters.rx_bytes += g.counters.sent_bytes - sent_bytes;
            }
        }
        for slot in 0..core.apps.len() {
            core.flush_desc_writebacks(slot);
        }
        if work == 0 && !poll {
            work += self.poll_registers(now);
        }
        if let Some(Ahead {
            bytes,
            chooser: Some(c),
        }) = &mut self.ahead
        {
            let core = &self.core;
            c.update(t, self.counters.busy_ns, core.short_frames, || {
                core.frame_pipe_flits()
            });
            let (mode, bytes) = (c.mode(), *bytes);
            self.core.set_pipe_writes(mode, bytes);
        }
        for tb in self.core.limiter.iter_mut().flatten() {
            tb.end_step(now);
        }
        self.counters.steps += 1;
        self.last_step_work = work;
        if work > 0 {
            self.counters.busy_steps += 1;
        }
        work
    }

    /// Applies every application's posted register writes that have
    /// arrived by `now`.
    fn poll_registers(&mut self, now: u64) -> usize {
        self.flits_at_poll = self.core.flits_in;
        self.last_poll_ns = now;
        let mut n = 0;
        for slot in 0..self.core.apps.len() {
            if self.core.apps[slot].is_some() {
                n += self.core.drain_mmio(slot, now);
            }
        }
        n
    }

    /// Runs steps until one finds nothing to do (at most `max` steps).
    pub fn run_until_idle(&mut self, max: usize) -> usize {
        let mut total = 0;
        for _ in 0..max {
            let w = self.step();
            total += w;
            if w == 0 {
                break;
            }
        }
        total
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> Stats {
        let mut engine = self.counters.clone();
        engine.frames = self.core.frames;
        engine.run_frames = self.core.run_frames;
        engine.evict_ahead_on = self.core.evict_ahead != 0;
        engine.pipe_writes = self.core.pipe_writes;
        engine.evict_ahead_switches = self
            .ahead
            .as_ref()
            .and_then(|a| a.chooser.as_ref())
            .map_or(0, evict::AheadChooser::switches);
        Stats {
            device: self.cfg.name.clone(),
            engine,
            ports: self
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| PortStats {
                    port: i,
                    wire: p.describe(),
                    counters: p.counters.clone(),
                    generator: p.generator().map(|g| {
                        let mut c = g.counters.clone();
                        c.latency = g.latency();
                        c
                    }),
                })
                .collect(),
            apps: self
                .core
                .apps
                .iter()
                .flatten()
                .map(|a| AppStats {
                    app_id: a.id,
                    counters: a.counters.clone(),
                    pipes: (a.pipe_base..a.pipe_base + a.pipe_count)
                        .filter(|&p| {
                            self.core.pipes[p as usize].base != 0
                                || self.core.pipe_counters[p as usize] != PipeCounters::default()
                        })
                        .map(|p| PipeStats {
                            pipe_id: p,
                            counters: self.core.pipe_counters[p as usize].clone(),
                        })
                        .collect(),
                    queues: (a.desc_base..a.desc_base + a.desc_count)
                        .map(|q| QueueStats {
                            queue_id: q,
                            counters: self.core.queue_counters(q as usize).clone(),
                        })
                        .collect(),
                })
                .collect(),
            detached_pipes: self.core.detached_pipes.clone(),
            detached_apps: self.core.detached_apps.clone(),
            detached_queues: self.core.detached_queues.clone(),
            pcie: self.core.pcie.clone(),
            flow_rules: self.core.flows.len(),
            fallback_pipes: self.core.fallback.iter().map(Fallback::len).sum(),
        }
    }

    /// Pauses or releases every generator port (a paused generator sends
    /// nothing; its rate clock restarts when released).
    pub fn set_generators_paused(&mut self, paused: bool) {
        for p in &mut self.ports {
            if let Wire::Generator(g) = &mut p.wire {
                g.paused = paused;
                g.restart_clock();
            }
        }
    }

    /// Forgets the round-trip times the generators recorded so far.
    pub fn reset_generator_latency(&mut self) {
        for p in &mut self.ports {
            if let Wire::Generator(g) = &mut p.wire {
                g.reset_latency();
            }
        }
    }

    /// Whether every generator port has sent all it was asked to.
    pub fn generators_finished(&self) -> bool {
        self.ports
            .iter()
            .all(|p| p.generator().is_none_or(|g| g.finished()))
    }

    /// Fixes how frames of one or two lines are written into frame pipes
    /// (see [`PipeWriteMode`]) and stops the engine choosing it as it runs:
    /// for experiments and tests that need the same way throughout
    /// ([`DeviceConfig::pipe_writes`] calls it at the start).
    /// `EvictAhead` and `PrefetchAhead` do nothing ahead where the device
    /// evicts nothing (`evict_ahead_lines` 0, or no `clflushopt`);
    /// `NonTemporal` writes with ordinary stores on CPUs without
    /// non-temporal ones, and `PrefetchAhead` evicts on CPUs without
    /// `prefetchw`.
    pub fn set_pipe_writes(&mut self, mode: PipeWriteMode) {
        let bytes = self.ahead.as_ref().map_or(0, |a| a.bytes);
        self.ahead = Some(Ahead {
            bytes,
            chooser: None,
        });
        self.core.set_pipe_writes(mode, bytes);
    }

    /// Starts recording [`TraceEvent`]s (tests; costs memory per event).
    pub fn enable_trace(&mut self) {
        self.core.trace = Some(Vec::new());
    }

    /// Takes the events recorded so far.
    pub fn take_trace(&mut self) -> Vec<TraceEvent> {
        self.core
            .trace
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Clears the PCIe counters (to measure a steady state).
    pub fn reset_pcie(&mut self) {
        self.core.pcie.reset();
    }

    /// Removes every application's files and the control socket.
    pub fn cleanup(&mut self) {
        for id in self.app_ids() {
            self.detach(id);
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.cleanup();
        crate::cleanup::unregister(&self.cfg.device_dir());
    }
}

impl enso_abi::control::SteppedNic for Engine {
    fn ring_sizes(&self) -> (usize, u32) {
        (self.cfg.pipe_size, self.cfg.notif_ring_entries)
    }
    fn attach(&mut self, req: &AttachRequest) -> Result<AttachInfo, String> {
        Engine::attach(self, req).map_err(|e| e.to_string())
    }
}

fn first_free_run(used: &[bool], n: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    let mut run = 0;
    for (i, &u) in used.iter().enumerate() {
        run = if u { 0 } else { run + 1 };
        if run == n {
            return Some(i + 1 - n);
        }
    }
    None
}

/// The NIC's TX rate limiter: bursts of `num` flits every `den` cycles of a
/// 200 MHz clock, as a token bucket in flits. The engine works in steps of a
/// few microseconds and its thread can be descheduled for longer, so the
/// bucket holds up to 1 ms of tokens (or one burst, if larger): after a gap
/// the port catches up with at most 1 ms worth of frames, and the long-run
/// rate is exact.
#[derive(Debug, Clone, Copy)]
struct TokenBucket {
    /// Flits per ns.
    rate: f64,
    depth: f64,
    tokens: f64,
    last_ns: u64,
    /// Whether the port had frames to send this step.
    backlogged: bool,
}

impl TokenBucket {
    fn new(num: u64, den: u64, now: u64) -> Self {
        let rate = num as f64 / (den as f64 * 5.0);
        // Empty at first: traffic starts at the rate, not with a burst of
        // the whole depth (a limiter widened to bank 10 ms of credit sent
        // its first 10 ms of frames at line rate).
        Self {
            rate,
            depth: (num as f64).max(rate * 1_000_000.0),
            tokens: 0.0,
            last_ns: now,
            backlogged: false,
        }
    }
    /// Adds the tokens earned since the last refill; true if any are left.
    /// Called when the port has a frame to send.
    #[inline]
    fn refill(&mut self, now: u64) -> bool {
        self.backlogged = true;
        self.earn(now);
        self.tokens > 0.0
    }
    #[inline]
    fn earn(&mut self, now: u64) {
        if now > self.last_ns {
            self.tokens = (self.tokens + (now - self.last_ns) as f64 * self.rate).min(self.depth);
            self.last_ns = now;
        }
    }
    /// Spends `flits` (a frame may overdraw); true if any are left.
    #[inline]
    fn take(&mut self, flits: u64) -> bool {
        self.tokens -= flits as f64;
        self.tokens > 0.0
    }
    /// At the end of a step. Credit banks only while frames wait: a port
    /// that had frames to send and did not get to them (its engine thread
    /// descheduled, say) catches up to its rate within the depth, but one
    /// with nothing to send only pays off what it overdrew, so a sender
    /// that pauses (or starts) goes on at the rate, not with a burst.
    #[inline]
    fn end_step(&mut self, now: u64) {
        if !std::mem::take(&mut self.backlogged) {
            self.earn(now);
            self.tokens = self.tokens.min(0.0);
        }
    }
}

/// Where the TX path hands the frames it reassembled, with their send
/// times: a type whose method is always inlined into the loop (a closure's
/// body called from more than one place is not).
trait TxSink {
    fn send(&mut self, frame: &[u8], now: u64);
}

/// The port's generator, which checks the frames.
struct ToGenerator<'a>(&'a mut port::Generator);

impl TxSink for ToGenerator<'_> {
    #[inline(always)]
    fn send(&mut self, frame: &[u8], now: u64) {
        self.0.on_return(frame, now);
    }
}

/// Whatever else is at the other end of port `port`'s wire.
struct ToWire<'a> {
    ports: &'a mut [Port],
    port: usize,
}

impl TxSink for ToWire<'_> {
    #[inline(always)]
    fn send(&mut self, frame: &[u8], now: u64) {
        port::transmit_uncounted(self.ports, self.port, frame, now);
    }
}

/// The RX path of one port as the destination of its generator's frames.
/// The caller calls [`Core::close_runs`] when the generator is done.
struct RxSink<'a> {
    core: &'a mut Core,
    port: usize,
    /// The port's timestamp offset (see [`Core::deliver`]).
    ts: Option<usize>,
    counters: &'a mut PortCounters,
    /// Frames the NIC dropped as they arrived.
    dropped: u64,
}

/// Frames the generator sends to a target (a frame pipe or a descriptor
/// queue) it sent a frame to before in the same step, written without
/// deciding again for each what [`Core::deliver`] decided for the first:
/// the steering (a remembered decision still current), that the target is
/// enabled and its owner attached, and for a pipe that no notification is
/// due (one is outstanding and notifications are not per packet) and the
/// room left. The bytes, the tail or descriptor, and the PCIe cut stay per
/// frame; counters are added when the run closes. What the NIC does is
/// unchanged: the same bytes at the same places, the same counts and
/// notifications; the emulator saves the repeated decisions, on the
/// engine's core, which limits trials of cheap applications. Both
/// interfaces get runs, a few targets at a time (`RUN_SLOTS`, by target),
/// so frames spread over a few pipes or queues keep theirs.
///
/// A pipe's run holds its tail: the run must close before anything else
/// looks at the pipe. [`RxSink::frame`] closes a target's run before
/// delivering to it the whole way, [`Core::look_before_drop`] closes every
/// run before applying register writes, and the caller closes them all at
/// the end of the generator's turn.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// The steering target (`NONE`: no run open).
    target: u32,
    /// Versions of the flow table and of the port's fallback the run was
    /// opened under (a frame's remembered steering must be for them).
    flows_version: u64,
    fallback_version: u64,
    /// A pipe's tail, in flits.
    tail: u32,
    /// Flits a pipe's run may still write before the end of the ring or the
    /// pipe's head, whichever comes first.
    room: u32,
    counts: RunCounts,
}

/// Runs open at once, one per slot (`target % RUN_SLOTS`); a power of two.
const RUN_SLOTS: usize = 4;

/// What a run wrote, added to the counters when it closes.
#[derive(Clone, Copy, Debug, Default)]
struct RunCounts {
    frames: u64,
    /// Of `frames`, those of at most [`evict::MAX_FLITS`] lines (see
    /// `evict_ahead`).
    short: u64,
    bytes: u64,
    /// Flits of the frames, and the bytes and TLPs of their DMA writes.
    flits: u64,
    dma_bytes: u64,
    tlps: u64,
}

impl Run {
    const NONE: u32 = u32::MAX;
    const CLOSED: Run = Run {
        target: Run::NONE,
        flows_version: 0,
        fallback_version: 0,
        tail: 0,
        room: 0,
        counts: RunCounts {
            frames: 0,
            short: 0,
            bytes: 0,
            flits: 0,
            dma_bytes: 0,
            tlps: 0,
        },
    };
}

impl Core {
    /// Closes every open run.
    #[inline]
    fn close_runs(&mut self) {
        if self.runs_open {
            for slot in 0..RUN_SLOTS {
                self.close_run(slot);
            }
            self.runs_open = false;
        }
    }

    /// Writes short frames `mode`'s way from now on, `bytes` ahead of the
    /// tail for the ways that work ahead (falling back where the CPU lacks
    /// an instruction: see [`Engine::set_pipe_writes`]).
    fn set_pipe_writes(&mut self, mode: PipeWriteMode, bytes: usize) {
        use PipeWriteMode::*;
        let mode = match mode {
            NonTemporal if !evict::non_temporal_supported() => Plain,
            PrefetchAhead if !evict::prefetch_for_write_supported() => EvictAhead,
            m => m,
        };
        // Streaming covers the frames of runs; frames that go the whole
        // way, and stream pipes, keep evicting ahead.
        self.evict_ahead = if mode == Plain { 0 } else { bytes };
        self.non_temporal = mode == NonTemporal;
        self.prefetch_ahead = mode == PrefetchAhead;
        self.pipe_writes = match mode {
            EvictAhead | PrefetchAhead if bytes == 0 => Plain,
            m => m,
        };
    }

    /// Gives a pipe its tail back and adds the run's counts.
    #[inline]
    fn close_run(&mut self, slot: usize) {
        let target = self.runs[slot].target;
        if target == Run::NONE {
            return;
        }
        let run = std::mem::replace(&mut self.runs[slot], Run::CLOSED);
        if self.unfenced {
            // The run's non-temporal stores are weakly ordered: this fence
            // puts them before every later store, among them the
            // notification's or tail's Release store that publishes the
            // tail set below (its Acquire partner is the application's
            // load of that notification or tail).
            evict::store_fence();
            self.unfenced = false;
        }
        let c = run.counts;
        if target >= layout::DESC_TARGET_BASE {
            let qc = &mut self.dq_counters[(target - layout::DESC_TARGET_BASE) as usize];
            qc.rx_frames += c.frames;
            qc.rx_bytes += c.bytes;
        } else {
            let pid = target as usize;
            self.pipes[pid].tail = run.tail;
            let pcs = &mut self.pipe_counters[pid];
            pcs.rx_frames += c.frames;
            pcs.rx_bytes += c.bytes;
            self.short_frames += c.short;
        }
        self.frames += c.frames;
        self.run_frames += c.frames;
        self.flits_in += c.flits;
        self.pcie
            .record_dma_writes(TrafficClass::Data, c.frames, c.dma_bytes, c.tlps);
    }

    /// After [`Core::deliver`] wrote a frame for `target` (no run open
    /// for it): opens a run there if the frames that follow need nothing
    /// decided again. `ts` as for `deliver`.
    #[inline]
    fn open_run(&mut self, port: usize, ts: Option<usize>, target: u32) {
        if ts.is_some() || self.trace.is_some() {
            return;
        }
        let mut run = Run {
            target,
            flows_version: self.flows.version(),
            fallback_version: self.fallback[port].version(),
            ..Run::CLOSED
        };
        if target < layout::DESC_TARGET_BASE {
            let p = &self.pipes[target as usize];
            if self.per_packet || !p.outstanding || p.stream || p.base == 0 {
                return;
            }
            let Some(app) = self.apps[p.owner as usize].as_ref() else {
                return;
            };
            // The whole ring lies in the region (as every enabled pipe's
            // does; checked again so the run can rely on it).
            if !app.in_region(p.base, self.pipe_size) {
                return;
            }
            let free = p.head.wrapping_sub(p.tail).wrapping_sub(1) & (self.pipe_flits - 1);
            run.tail = p.tail;
            run.room = free.min(self.pipe_flits - p.tail);
        } else {
            // A queue's frames are stamped by its own port's setting.
            let dq = &self.dqs[(target - layout::DESC_TARGET_BASE) as usize];
            if self.ts_offset[dq.port as usize].is_some() {
                return;
            }
        }
        let slot = target as usize & (RUN_SLOTS - 1);
        self.close_run(slot);
        self.runs[slot] = run;
        self.runs_open = true;
    }

    /// Writes a frame of `flits` lines (no marker) into the pipe of the run
    /// in `slot`, which has room for them before the end of its ring.
    #[inline(always)]
    fn pipe_run_frame(&mut self, slot: usize, data: &[u8], flits: u32) {
        let run = &mut self.runs[slot];
        let p = &self.pipes[run.target as usize];
        let app = self.apps[p.owner as usize].as_ref().expect("run open");
        let off = p.base + run.tail as usize * FLIT;
        let short = flits as usize <= evict::MAX_FLITS;
        if short && self.non_temporal {
            app.stream(off, data);
            self.unfenced = true;
        } else {
            app.write(off, data);
        }
        let c = &mut run.counts;
        let dma = u64::from(flits) * FLIT as u64;
        c.tlps += self.pcie.link.dma_write_tlps(off as u64, dma);
        c.dma_bytes += dma;
        let from = run.tail as usize * FLIT;
        run.tail = (run.tail + flits) & (self.pipe_flits - 1);
        // As in `deliver`: short frames only (and streamed ones need none).
        if short {
            c.short += 1;
            if self.evict_ahead != 0 && !self.non_temporal {
                let to = run.tail as usize * FLIT;
                // `room` is the free space, or less near the ring's end,
                // where a few lines then go without.
                let op = if self.prefetch_ahead {
                    LinesAhead::Prefetch {
                        free: (run.room - flits) as usize * FLIT,
                    }
                } else {
                    LinesAhead::Evict
                };
                app.ahead_ring(p.base, self.pipe_size, from, to, self.evict_ahead, op);
            }
        }
        run.room -= flits;
        c.frames += 1;
        c.bytes += data.len() as u64;
        c.flits += u64::from(flits);
    }
}

impl port::FrameSink for &mut RxSink<'_> {
    #[inline(always)]
    fn frame(&mut self, frame: &[u8], pre: Option<port::Precomputed<'_>>) {
        let core = &mut *self.core;
        if let Some((c, memo)) = &pre {
            let t = memo.remembered();
            let s = t as usize & (RUN_SLOTS - 1);
            let run = &core.runs[s];
            if run.target == t && memo.target_at(run.flows_version, run.fallback_version) == Some(t)
            {
                if t >= layout::DESC_TARGET_BASE {
                    if core.desc_run_frame(s, frame, c.hash) {
                        return;
                    }
                } else if !c.place.marker && run.room as usize >= c.place.flits {
                    core.pipe_run_frame(s, &frame[..c.place.len], c.place.flits as u32);
                    return;
                }
            }
        }
        // The whole way. First close the run in the slot of the frame's
        // target (it may be the target's own), or every run if the target
        // is not known yet (no current remembered steering).
        let current = pre.as_ref().and_then(|(_, memo)| {
            memo.target_at(core.flows.version(), core.fallback[self.port].version())
        });
        match current {
            Some(t) => core.close_run(t as usize & (RUN_SLOTS - 1)),
            None => core.close_runs(),
        }
        match core.deliver(self.port, self.ts, self.counters, frame, pre) {
            Some(t) => core.open_run(self.port, self.ts, t),
            None => self.dropped += 1,
        }
    }
}

impl Core {
    /// The RX path: steer a frame that arrived from the wire and write it into
    /// its pipe, or count why not. The caller counts the frame's arrival in
    /// `pc` (`rx_frames`, `rx_bytes`) and passes the port's timestamp offset
    /// `ts` (`ts_offset[port]`, which only TX notifications change).
    /// Returns its steering target (a frame pipe or a descriptor queue) if
    /// it was written there.
    #[inline(always)]
    fn deliver(
        &mut self,
        port: usize,
        ts: Option<usize>,
        pc: &mut PortCounters,
        frame: &[u8],
        pre: Option<crate::port::Precomputed<'_>>,
    ) -> Option<u32> {
        let fallback = &mut self.fallback[port];
        let (place, hash, target) = match pre {
            Some((c, memo)) => (
                c.place,
                c.hash,
                steering::steer_memo(&self.flows, fallback, port as u16, c, memo),
            ),
            None => match wire::classify_full(frame) {
                Ok(c) => (
                    c.place,
                    c.hash,
                    steering::steer_classified(&self.flows, fallback, port as u16, &c),
                ),
                Err(FrameError::Oversize) => {
                    pc.drop_oversize += 1;
                    return None;
                }
                Err(_) => {
                    pc.drop_malformed += 1;
                    return None;
                }
            },
        };
        let Some(pid) = target else {
            pc.drop_no_match += 1;
            return None;
        };
        if pid >= layout::DESC_TARGET_BASE {
            let q = (pid - layout::DESC_TARGET_BASE) as usize;
            return self.deliver_desc(q, pc, frame, hash).then_some(pid);
        }
        let pid = pid as usize;
        // Where it goes and whether it fits; if not, apply the application's
        // posted writes (it may have freed room) and decide again, once.
        let mut looked = false;
        let (owner, notify) = loop {
            let p = &self.pipes[pid];
            let owner = p.owner as usize;
            if p.base == 0 || self.apps[owner].is_none() {
                pc.drop_no_match += 1;
                return None;
            }
            if p.stream {
                // Applying the posted writes may disable the pipe or make it
                // a frame pipe: decide again from the top after looking.
                if !looked && self.stream_lacks_room(pid, frame.len()) {
                    looked = true;
                    self.look_before_drop(owner);
                    continue;
                }
                self.deliver_stream(pid, frame);
                return None;
            }
            let notify = self.per_packet || !p.outstanding;
            match self.lacks_room(pid, owner, place.flits, notify) {
                None => break (owner, notify),
                Some(_) if !looked => {
                    looked = true;
                    self.look_before_drop(owner);
                }
                Some(full) => {
                    let pcs = &mut self.pipe_counters[pid];
                    match full {
                        Full::Pipe => pcs.drop_pipe_full += 1,
                        Full::NotificationRing => pcs.drop_notif_ring_full += 1,
                    }
                    return None;
                }
            }
        };
        let pipe = &mut self.pipes[pid];
        let pcs = &mut self.pipe_counters[pid];
        let app = self.apps[owner].as_mut().expect("checked above");
        let mask = self.pipe_flits - 1;
        // DMA the frame: bursts never cross the end of the ring.
        let mut tail = pipe.tail;
        if place.marker {
            let mut m = [0u8; FLIT];
            wire::write_marker(&mut m, place.len);
            let off = pipe.base + tail as usize * FLIT;
            app.write(off, &m);
            self.pcie
                .record_dma_write(TrafficClass::Data, off as u64, FLIT as u64);
            tail = (tail + 1) & mask;
        }
        let pos = tail as usize * FLIT;
        write_ring(
            app,
            &mut self.pcie,
            pipe.base,
            self.pipe_size,
            pos,
            &frame[..place.len],
            FLIT,
        );
        if let Some(off) = ts {
            if off + 4 <= place.len {
                // Replace the send time with the round-trip time.
                let sent = u32::from_le_bytes(frame[off..off + 4].try_into().expect("4 bytes"));
                let rtt = (self.clock.now_ns() as u32).wrapping_sub(sent);
                let at = (pos + off) % self.pipe_size;
                let b = rtt.to_le_bytes();
                let first = 4.min(self.pipe_size - at);
                app.write(pipe.base + at, &b[..first]);
                if first < 4 {
                    app.write(pipe.base, &b[first..]);
                }
            }
        }
        let from = pipe.tail as usize * FLIT;
        pipe.tail = (tail + wire::flits(place.len) as u32) & mask;
        // Short frames only: see [`evict`] for where it pays.
        if place.flits <= evict::MAX_FLITS {
            self.short_frames += 1;
            if self.evict_ahead != 0 {
                let to = pipe.tail as usize * FLIT;
                let op = if self.prefetch_ahead {
                    let free = pipe.head.wrapping_sub(pipe.tail).wrapping_sub(1) & mask;
                    LinesAhead::Prefetch {
                        free: free as usize * FLIT,
                    }
                } else {
                    LinesAhead::Evict
                };
                app.ahead_ring(pipe.base, self.pipe_size, from, to, self.evict_ahead, op);
            }
        }
        pcs.rx_frames += 1;
        pcs.rx_bytes += place.len as u64;
        self.frames += 1;
        self.flits_in += place.flits as u64;
        if let Some(t) = self.trace.as_mut() {
            t.push(TraceEvent::Frame { pipe: pid as u32 });
        }
        if notify {
            let vis = visible_at(&self.clock, self.latency);
            let (pcie, trace) = (&mut self.pcie, &mut self.trace);
            notify_pipe(app, pcie, trace, self.ring_mask, pid, pipe, pcs, vis);
        }
        Some(pid as u32)
    }

    /// Flits of all enabled frame pipes: what single-line frames (the
    /// shortest the chooser counts) take to go once round each of them.
    fn frame_pipe_flits(&self) -> u64 {
        let n = self
            .pipes
            .iter()
            .filter(|p| p.base != 0 && !p.stream)
            .count();
        n as u64 * u64::from(self.pipe_flits)
    }

    /// What a frame of `flits` for enabled frame pipe `pid` of application
    /// `owner` finds full, if anything (the notification ring only matters
    /// when the frame is to be `notify`-ed).
    #[inline]
    fn lacks_room(&self, pid: usize, owner: usize, flits: usize, notify: bool) -> Option<Full> {
        let p = &self.pipes[pid];
        let free = p.head.wrapping_sub(p.tail).wrapping_sub(1) & (self.pipe_flits - 1);
        if flits as u32 > free {
            return Some(Full::Pipe);
        }
        if notify {
            let nb = &self.apps[owner].as_ref()?.nb;
            if nb.rx_ring == 0 || (nb.rx_tail + 1) & self.ring_mask == nb.rx_head {
                return Some(Full::NotificationRing);
            }
        }
        None
    }

    /// A frame for application `slot` is about to be dropped for lack of
    /// room: apply the head updates it has posted first (once per step), as
    /// the engine may have deferred looking at them while busy.
    pub(super) fn look_before_drop(&mut self, slot: usize) {
        let now = self.now;
        let step = self.step_no;
        let Some(app) = self.apps.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if app.looked_step != step {
            app.looked_step = step;
            // Register writes may change the pipes runs hold the tails of.
            self.close_runs();
            self.drain_mmio(slot, now);
        }
    }

    /// Whether stream pipe `pid` may lack room for a frame of `len` bytes
    /// (a quick bound on its payload; [`Core::deliver_stream`] decides).
    #[inline]
    fn stream_lacks_room(&self, pid: usize, len: usize) -> bool {
        let p = &self.pipes[pid];
        let used = p.tail.wrapping_sub(p.head) & (self.pipe_size as u32 - 1);
        used as usize + len + FLIT > self.pipe_size
    }

    /// The RX path of a stream pipe (enabled, owner attached: the caller
    /// checked, with no register write applied since): append the frame's
    /// UDP payload.
    fn deliver_stream(&mut self, pid: usize, frame: &[u8]) {
        let pipe = &mut self.pipes[pid];
        let pcs = &mut self.pipe_counters[pid];
        let Some(payload) = udp_payload(frame) else {
            pcs.drop_not_udp += 1;
            return;
        };
        let app = self.apps[pipe.owner as usize]
            .as_mut()
            .expect("caller checked");
        let mask = self.pipe_size as u32 - 1;
        // One flit's worth of bytes is kept free, as in a frame pipe.
        let used = pipe.tail.wrapping_sub(pipe.head) & mask;
        let free = (mask + 1 - FLIT as u32).saturating_sub(used);
        if payload.len() as u32 > free {
            pcs.drop_pipe_full += 1;
            return;
        }
        let notify = self.per_packet || !pipe.outstanding;
        if notify {
            let nb = &app.nb;
            if nb.rx_ring == 0 || (nb.rx_tail + 1) & self.ring_mask == nb.rx_head {
                pcs.drop_notif_ring_full += 1;
                return;
            }
        }
        let pos = pipe.tail as usize;
        write_ring(
            app,
            &mut self.pcie,
            pipe.base,
            self.pipe_size,
            pos,
            payload,
            1,
        );
        let from = pipe.tail as usize;
        pipe.tail = (pipe.tail + payload.len() as u32) & mask;
        if self.evict_ahead != 0 {
            // Further ahead than in frame pipes: one write may fill many
            // lines (see [`evict`]).
            let ahead = self.evict_ahead * evict::STREAM_AHEAD_FACTOR;
            let to = pipe.tail as usize;
            app.ahead_ring(
                pipe.base,
                self.pipe_size,
                from,
                to,
                ahead,
                LinesAhead::Evict,
            );
        }
        pcs.rx_frames += 1;
        pcs.rx_bytes += payload.len() as u64;
        self.frames += 1;
        self.flits_in += wire::flits(payload.len()) as u64;
        if let Some(t) = self.trace.as_mut() {
            t.push(TraceEvent::Frame { pipe: pid as u32 });
        }
        if notify {
            let vis = visible_at(&self.clock, self.latency);
            let (pcie, trace) = (&mut self.pcie, &mut self.trace);
            notify_pipe(app, pcie, trace, self.ring_mask, pid, pipe, pcs, vis);
        }
    }

    /// Applies posted register writes of application `slot`, in order.
    ///
    /// A producer more than [`layout::MMIO_QUEUE_LEN`] entries ahead of the
    /// consumer (or behind it) claims entries the queue cannot hold: only
    /// hostile software publishes one. It is counted once under
    /// `reject_bad_register_value` and the consumer is moved to it, leaving
    /// the queue empty: none of the claimed entries is applied, and writes
    /// posted after it from there on are applied as usual. Replaying the
    /// queue up to such a producer would cost up to 2^32 entries of engine
    /// time and hold the application's later writes behind them.
    fn drain_mmio(&mut self, slot: usize, now: u64) -> usize {
        let latency = self.latency;
        let app = self.apps[slot].as_mut().expect("caller checked");
        let q = app.mmio_queue();
        // SYNC POINT A (Acquire): pairs with software's Release store of
        // `producer`; the entries and any TX notification slots written before
        // it are visible after this load.
        let prod = q.producer.0.load(Ordering::Acquire);
        let mut cons = app.mmio_consumer;
        if prod.wrapping_sub(cons) as usize > layout::MMIO_QUEUE_LEN {
            // SYNC POINT B (Release): pairs with software's Acquire load of
            // `consumer`; nothing was read from the entries it frees.
            q.consumer.0.store(prod, Ordering::Release);
            app.mmio_consumer = prod;
            app.counters.reject_bad_register_value += 1;
            return 0;
        }
        // Copy the entries out first: applying one needs the whole core.
        let mut batch = std::mem::take(&mut self.mmio_batch);
        batch.clear();
        let mut n = 0;
        while cons != prod && n < MMIO_BUDGET as usize {
            let e = &q.entries[cons as usize & (layout::MMIO_QUEUE_LEN - 1)];
            if latency > 0 && e.issued_ns.load(Ordering::Relaxed).saturating_add(latency) > now {
                break; // still on its way over the interconnect
            }
            let w = e.word.load(Ordering::Relaxed);
            batch.push(((w >> 32) as u32, w as u32));
            cons = cons.wrapping_add(1);
            n += 1;
        }
        if n == 0 {
            self.mmio_batch = batch;
            return 0;
        }
        // SYNC POINT B (Release): pairs with software's Acquire load of
        // `consumer` before it reuses these entries (they are copied out).
        q.consumer.0.store(cons, Ordering::Release);
        app.mmio_consumer = cons;
        for &(addr, value) in &batch {
            self.apply_register(slot, addr, value);
        }
        self.mmio_batch = batch;
        if self.apps[slot].as_ref().is_some_and(|a| !a.owed.is_empty()) {
            self.notify_owed(slot);
        }
        n
    }

    fn apply_register(&mut self, slot: usize, addr: u32, value: u32) {
        self.pcie.record_mmio_write(TrafficClass::Register, 4);
        let app = self.apps[slot].as_mut().expect("caller checked");
        app.counters.mmio_writes += 1;
        let Some((q, r)) = layout::split_reg_addr(addr) else {
            app.counters.reject_foreign_register += 1;
            return;
        };
        if q < layout::MAX_PIPES {
            if !app.owns_pipe(q) {
                app.counters.reject_foreign_register += 1;
                return;
            }
            match r {
                // The enabling order of the real NIC's software zeroes head
                // and tail before writing the address: harmless, accepted.
                reg::RX_HEAD | reg::RX_TAIL if value == 0 && self.pipes[q as usize].base == 0 => {}
                reg::RX_HEAD => self.pipe_head_write(slot, q, value),
                reg::RX_MEM_LOW => self.pipes[q as usize].pending_low = value,
                reg::RX_MEM_HIGH => {
                    self.pipe_enable(slot, q, value);
                    self.refresh_rx_spans(slot);
                }
                _ => app.counters.reject_foreign_register += 1,
            }
        } else if q >= layout::DESC_QUEUE_BASE {
            let dq = q - layout::DESC_QUEUE_BASE;
            if app.owns_queue(dq) {
                self.desc_register(slot, dq as usize, r, value);
            } else {
                app.counters.reject_foreign_register += 1;
            }
        } else if q == layout::NBUF_QUEUE_BASE + app.nbuf_id {
            let entries = self.ring_mask + 1;
            let ring_bytes = entries as usize * layout::NOTIF_SLOT;
            let nb = &mut app.nb;
            match r {
                // Zeroing before enabling, as for pipes.
                reg::RX_HEAD | reg::RX_TAIL if value == 0 && nb.rx_ring == 0 => {}
                reg::TX_HEAD | reg::TX_TAIL if value == 0 && nb.tx_ring == 0 => {}
                reg::RX_HEAD if value < entries && nb.rx_ring != 0 => {
                    // The head may only move over notifications the NIC wrote.
                    let used = nb.rx_tail.wrapping_sub(nb.rx_head) & self.ring_mask;
                    let adv = value.wrapping_sub(nb.rx_head) & self.ring_mask;
                    if adv <= used {
                        nb.rx_head = value;
                    } else {
                        app.counters.reject_bad_register_value += 1;
                    }
                }
                reg::TX_TAIL if value < entries && nb.tx_ring != 0 => {
                    let old = nb.tx_tail;
                    nb.tx_tail = value;
                    // The NIC fetches the new notifications in as few reads as
                    // it can (at most TX_FETCH_MAX each, not across the end).
                    let mut i = old;
                    while i != value {
                        let till_end = entries - i;
                        let n = (value.wrapping_sub(i) & self.ring_mask)
                            .min(till_end)
                            .min(TX_FETCH_MAX);
                        self.pcie.record_dma_read(
                            TrafficClass::Notification,
                            (nb.tx_ring + i as usize * layout::NOTIF_SLOT) as u64,
                            n as u64 * NOTIF_BYTES,
                        );
                        i = (i + n) & self.ring_mask;
                    }
                    nb.tx_fetched = value;
                }
                reg::RX_MEM_LOW => nb.rx_low = value,
                reg::TX_MEM_LOW => nb.tx_low = value,
                reg::RX_MEM_HIGH | reg::TX_MEM_HIGH => {
                    let low = if r == reg::RX_MEM_HIGH {
                        nb.rx_low
                    } else {
                        nb.tx_low
                    };
                    let off = (value as usize) << 32 | low as usize;
                    let ok = off == 0
                        || (off.is_multiple_of(layout::PAGE) && app.in_region(off, ring_bytes));
                    let nb = &mut app.nb;
                    if !ok {
                        app.counters.reject_bad_register_value += 1;
                    } else if r == reg::RX_MEM_HIGH {
                        (nb.rx_ring, nb.rx_head, nb.rx_tail) = (off, 0, 0);
                    } else {
                        (nb.tx_ring, nb.tx_head, nb.tx_tail, nb.tx_fetched) = (off, 0, 0, 0);
                        app.tx = None;
                        app.asm.reset();
                    }
                }
                _ => app.counters.reject_bad_register_value += 1,
            }
        } else {
            app.counters.reject_foreign_register += 1;
        }
    }

    /// Recomputes application `slot`'s RX pipe spans (after a pipe was
    /// enabled, moved or disabled; rare, so a full pass is fine).
    fn refresh_rx_spans(&mut self, slot: usize) {
        let size = self.pipe_size;
        let app = self.apps[slot].as_mut().expect("caller checked");
        let (from, n) = (app.pipe_base as usize, app.pipe_count as usize);
        app.rx_spans.clear();
        app.rx_spans.extend(
            self.pipes[from..from + n]
                .iter()
                .filter(|p| p.base != 0)
                .map(|p| (p.base, p.base + size)),
        );
        app.rx_spans.sort_unstable();
    }

    fn pipe_enable(&mut self, slot: usize, pid: u32, high: u32) {
        let app = self.apps[slot].as_mut().expect("caller checked");
        let p = &mut self.pipes[pid as usize];
        let port = (p.pending_low & layout::PIPE_PORT_MASK) as usize;
        let stream = p.pending_low & layout::PIPE_STREAM != 0;
        let off = (high as usize) << 32 | (p.pending_low & !layout::PIPE_LOW_BITS) as usize;
        if off == 0 {
            p.base = 0;
            p.outstanding = false;
            self.flows.retain(|x| x == pid);
            for f in &mut self.fallback {
                f.remove(pid);
            }
            return;
        }
        if !app.in_region(off, self.pipe_size) || port >= self.fallback.len() {
            app.counters.reject_bad_register_value += 1;
            return;
        }
        if p.base != 0 && p.port as usize != port {
            // Moving to another port: its old port's steering forgets it.
            self.flows.retain(|x| x == pid);
            self.fallback[p.port as usize].remove(pid);
        }
        (p.base, p.head, p.tail, p.outstanding, p.port) = (off, 0, 0, false, port as u16);
        p.stream = stream;
    }

    /// Software handed pipe bytes back (or rewrote the head to prefetch).
    fn pipe_head_write(&mut self, slot: usize, pid: u32, head: u32) {
        let app = self.apps[slot].as_mut().expect("caller checked");
        let p = &mut self.pipes[pid as usize];
        let mask = if p.stream {
            self.pipe_size as u32 - 1
        } else {
            self.pipe_flits - 1
        };
        if p.base == 0 || head > mask {
            app.counters.reject_bad_register_value += 1;
            return;
        }
        let used = p.tail.wrapping_sub(p.head) & mask;
        let adv = head.wrapping_sub(p.head) & mask;
        if adv > used {
            // A head beyond the tail would hand the NIC bytes software has
            // not read: refuse it.
            app.counters.reject_bad_register_value += 1;
            return;
        }
        let vis = visible_at(&self.clock, self.latency);
        let pc = &mut self.pipe_counters[pid as usize];
        pc.head_writes += 1;
        if let Some(t) = self.trace.as_mut() {
            t.push(TraceEvent::HeadWrite { pipe: pid, head });
        }
        if adv == 0 {
            pc.head_rewrites += 1;
        }
        p.head = head;
        if self.per_packet {
            return;
        }
        if head == p.tail {
            p.outstanding = false;
        } else if push_rx_notif(app, &mut self.pcie, self.ring_mask, pid, p.tail, vis) {
            // Reactive rule: data is still pending, so tell software now.
            p.outstanding = true;
            pc.notifications += 1;
            if let Some(t) = self.trace.as_mut() {
                t.push(TraceEvent::Notify {
                    pipe: pid,
                    tail: p.tail,
                });
            }
        } else {
            app.counters.notif_ring_full += 1;
            p.outstanding = false;
            if !app.owed.contains(&pid) {
                app.owed.push(pid);
            }
        }
    }

    /// Sends the notifications a full ring refused at head writes (see
    /// `App::owed`), while the ring has room.
    #[cold]
    fn notify_owed(&mut self, slot: usize) {
        let vis = visible_at(&self.clock, self.latency);
        let app = self.apps[slot].as_mut().expect("caller checked");
        while let Some(&pid) = app.owed.last() {
            let p = &mut self.pipes[pid as usize];
            // Still enabled, its own, with data and nothing announced since.
            if p.base != 0 && app.owns_pipe(pid) && !p.outstanding && p.head != p.tail {
                if !push_rx_notif(app, &mut self.pcie, self.ring_mask, pid, p.tail, vis) {
                    return;
                }
                p.outstanding = true;
                self.pipe_counters[pid as usize].notifications += 1;
                if let Some(t) = self.trace.as_mut() {
                    t.push(TraceEvent::Notify {
                        pipe: pid,
                        tail: p.tail,
                    });
                }
            }
            app.owed.pop();
        }
    }

    /// The TX path of application `slot`: read TX notifications, transmit the
    /// frames in their data, complete them.
    fn process_tx(&mut self, slot: usize, ports: &mut [Port], now: u64) -> usize {
        let mut frames = 0;
        let mut rounds = 0;
        while frames < TX_BUDGET && rounds < TX_BUDGET {
            rounds += 1;
            let app = self.apps[slot].as_mut().expect("caller checked");
            let cur = match app.tx {
                Some(c) => c,
                None => {
                    let nb = &app.nb;
                    if nb.tx_ring == 0 || nb.tx_head == nb.tx_tail {
                        break;
                    }
                    let slot_i = nb.tx_head;
                    let n = app.tx_notif(nb.tx_ring, slot_i);
                    let sig = n.signal.load(Ordering::Relaxed);
                    match sig {
                        signal::DATA => {
                            let addr = n.address.load(Ordering::Relaxed) as usize;
                            let len = n.length.load(Ordering::Relaxed) as usize;
                            let port = n.port.load(Ordering::Relaxed) as usize;
                            app.counters.tx_notifications += 1;
                            if len > layout::MAX_TX_LEN as usize
                                || !app.in_region(addr, len)
                                || port >= ports.len()
                            {
                                app.counters.reject_bad_tx_notification += 1;
                                self.complete_tx(slot);
                                continue;
                            }
                            self.pcie
                                .record_dma_read(TrafficClass::Data, addr as u64, len as u64);
                            let c = TxCursor {
                                addr,
                                len,
                                off: 0,
                                port,
                                evict: self.evict_tx && !app.in_rx_pipes(addr, len),
                            };
                            self.apps[slot].as_mut().expect("checked").tx = Some(c);
                            c
                        }
                        signal::CONFIG => {
                            let (id, args) = (
                                n.config_id.load(Ordering::Relaxed),
                                std::array::from_fn::<u64, 5, _>(|i| {
                                    n.args[i].load(Ordering::Relaxed)
                                }),
                            );
                            let port = n.port.load(Ordering::Relaxed) as usize;
                            app.counters.config_notifications += 1;
                            self.apply_config(slot, id, args, port, now);
                            self.complete_tx(slot);
                            continue;
                        }
                        _ => {
                            app.counters.reject_bad_tx_notification += 1;
                            self.complete_tx(slot);
                            continue;
                        }
                    }
                }
            };
            if let Some(tb) = self.limiter[cur.port].as_mut() {
                if !tb.refill(now) {
                    break; // the port's rate limit is used up for now
                }
            }
            frames += self.transmit_some(slot, cur, ports, TX_BUDGET - frames, now);
        }
        frames
    }

    /// Transmits frames of the current notification; completes it when done.
    fn transmit_some(
        &mut self,
        slot: usize,
        c: TxCursor,
        ports: &mut [Port],
        budget: usize,
        step_now: u64,
    ) -> usize {
        // What is at the other end of the port is looked at once per call:
        // a generator gets the frames straight into its checker.
        let (sent, bytes) = match &mut ports[c.port].wire {
            Wire::Generator(g) => self.transmit_frames(slot, c, budget, step_now, ToGenerator(g)),
            _ => {
                let to = ToWire {
                    ports: &mut *ports,
                    port: c.port,
                };
                self.transmit_frames(slot, c, budget, step_now, to)
            }
        };
        let pc = &mut ports[c.port].counters;
        pc.tx_frames += sent as u64;
        pc.tx_bytes += bytes;
        sent
    }

    /// The body of [`Core::transmit_some`]: reassembles frames from the
    /// notification's data and hands each to `to` with its send time;
    /// returns the frames and bytes sent (the caller counts them at the port).
    #[inline(always)]
    fn transmit_frames(
        &mut self,
        slot: usize,
        mut c: TxCursor,
        budget: usize,
        step_now: u64,
        mut to: impl TxSink,
    ) -> (usize, u64) {
        // Neither changes while a notification is transmitted (both are
        // configured through TX notifications, between them).
        let ts = self.ts_offset[c.port];
        let limited = self.limiter[c.port].is_some();
        let app = self.apps[slot].as_mut().expect("caller checked");
        let asm = &mut app.asm;
        let buf = &mut asm.buf[..];
        // The assembler's state, kept in locals while frames are read.
        let (mut fill, mut need, mut start, mut pad) = (asm.fill, asm.need, asm.start, asm.pad);
        let mut sent = 0;
        let mut bytes = 0u64;
        while c.off < c.len && sent < budget {
            let avail = c.len - c.off;
            if pad > 0 {
                let k = pad.min(avail);
                pad -= k;
                c.off += k;
                continue;
            }
            if need == 0 && fill == 0 && avail >= FLIT {
                // The usual case: a frame starts with a whole flit in this
                // notification, read with a fixed-size copy the compiler
                // inlines (no call into `memcpy`) and delimited without
                // length checks. In bounds: `addr..addr + len` was checked
                // when read.
                let flit: &mut [u8; FLIT] = (&mut buf[..FLIT]).try_into().expect("FLIT bytes");
                read_region(&app.region, c.addr + c.off, flit);
                c.off += FLIT;
                match wire::delimit(flit) {
                    Ok(d) if d.start + d.len <= FLIT => {
                        // The whole frame is in this flit (a marker is a
                        // flit of its own, so it starts at 0) and uses all
                        // of it: sent at once, no padding follows.
                        let frame = &mut flit[..d.len];
                        let now = stamp_tx(frame, ts, &self.clock, step_now);
                        to.send(frame, now);
                        bytes += d.len as u64;
                        sent += 1;
                        if limited {
                            if let Some(tb) = self.limiter[c.port].as_mut() {
                                if !tb.take(1) {
                                    break;
                                }
                            }
                        }
                        continue;
                    }
                    Ok(d) => {
                        fill = FLIT;
                        need = d.start + d.len;
                        start = d.start;
                    }
                    Err(_) => {
                        app.counters.reject_bad_tx_frame += 1;
                        // This flit and the rest of the notification.
                        app.counters.tx_bytes_discarded += (FLIT + c.len - c.off) as u64;
                        (fill, need, start, pad) = (0, 0, 0, 0);
                        c.off = c.len; // cannot resynchronise: drop the rest
                        break;
                    }
                }
            } else if need == 0 {
                // Less than a flit of the frame's start is here (the rest of
                // one, or the start of one, at a notification's end).
                let k = (FLIT - fill).min(avail);
                read_region(&app.region, c.addr + c.off, &mut buf[fill..fill + k]);
                fill += k;
                c.off += k;
                match wire::delimit(&buf[..fill]) {
                    Ok(d) => {
                        need = d.start + d.len;
                        start = d.start;
                    }
                    Err(FrameError::Truncated) if fill < FLIT => {
                        // Not enough header yet: wait for the next notification.
                        continue;
                    }
                    Err(_) => {
                        app.counters.reject_bad_tx_frame += 1;
                        // The frame's start and the rest of the notification.
                        app.counters.tx_bytes_discarded += (fill + c.len - c.off) as u64;
                        (fill, need, start, pad) = (0, 0, 0, 0);
                        c.off = c.len; // cannot resynchronise: drop the rest
                        break;
                    }
                }
            }
            if fill < need {
                let k = (need - fill).min(c.len - c.off);
                read_region(&app.region, c.addr + c.off, &mut buf[fill..fill + k]);
                fill += k;
                c.off += k;
            }
            if fill >= need {
                let len = need - start;
                let frame = &mut buf[start..need];
                let now = stamp_tx(frame, ts, &self.clock, step_now);
                to.send(frame, now);
                bytes += len as u64;
                let total = FLIT * wire::flits(len) + start;
                pad = total - fill;
                fill = 0;
                need = 0;
                start = 0;
                sent += 1;
                if limited {
                    if let Some(tb) = self.limiter[c.port].as_mut() {
                        if !tb.take(wire::flits(len) as u64) {
                            break;
                        }
                    }
                }
            }
        }
        app.counters.tx_frames += sent as u64;
        app.counters.tx_bytes += bytes;
        self.frames += sent as u64;
        if c.off >= c.len {
            // Padding never continues into the next notification.
            pad = 0;
        }
        let asm = &mut app.asm;
        (asm.fill, asm.need, asm.start, asm.pad) = (fill, need, start, pad);
        if c.off >= c.len {
            if c.evict {
                // Done with these bytes: drop this core's copies (see
                // `Core::evict_tx`).
                app.evict_span(c.addr, c.len);
            }
            app.tx = None;
            self.complete_tx(slot);
        } else {
            app.tx = Some(c);
        }
        (sent, bytes)
    }

    /// Completes the TX notification at the head by clearing its signal.
    fn complete_tx(&mut self, slot: usize) {
        let app = self.apps[slot].as_mut().expect("caller checked");
        let ring = app.nb.tx_ring;
        let i = app.nb.tx_head;
        if self.latency > 0 {
            let vis = self.clock.now_ns() + self.latency;
            app.tx_notif(ring, i).args[layout::TX_VISIBLE_ARG].store(vis, Ordering::Relaxed);
        }
        // SYNC POINT D (Release): pairs with software's Acquire load of
        // `signal` when it reclaims completions; the NIC no longer reads the
        // data once software sees EMPTY.
        app.tx_notif(ring, i)
            .signal
            .store(signal::EMPTY, Ordering::Release);
        self.pcie.record_dma_write(
            TrafficClass::Notification,
            (ring + i as usize * layout::NOTIF_SLOT) as u64,
            NOTIF_BYTES,
        );
        app.nb.tx_head = (i + 1) & self.ring_mask;
    }

    fn apply_config(&mut self, slot: usize, id: u32, a: [u64; 5], port: usize, now: u64) {
        // A steering target must be one of its own enabled pipes or queues;
        // its port.
        let target_port = |core: &Core, t: u64| -> Option<u16> {
            if t < layout::DESC_TARGET_BASE as u64 {
                let app = core.apps[slot].as_ref()?;
                let p = &core.pipes[t as usize];
                (app.owns_pipe(t as u32) && p.base != 0).then_some(p.port)
            } else {
                core.desc_target(slot, t)
            }
        };
        let t2 = target_port(self, a[2]);
        let t1 = target_port(self, a[1]);
        let app = self.apps[slot].as_mut().expect("caller checked");
        match id {
            config::FLOW_BIND | config::FLOW_UNBIND => {
                let t = FiveTuple {
                    dst_ip: (a[0] >> 32) as u32,
                    src_ip: a[0] as u32,
                    dst_port: (a[1] >> 32) as u16,
                    src_port: (a[1] >> 16) as u16,
                    protocol: a[1] as u8,
                };
                let Some(pport) = t2 else {
                    app.counters.reject_bad_config += 1;
                    return;
                };
                if id == config::FLOW_BIND {
                    // A rule another application owns is not replaced.
                    let theirs = self
                        .flows
                        .get(pport, &t)
                        .is_some_and(|p| !app.owns_target(p));
                    if theirs || self.flows.bind(pport, &t, a[2] as u32).is_err() {
                        app.counters.reject_bad_config += 1;
                    }
                } else {
                    // Only remove a rule that points to one of its own pipes.
                    match self.flows.unbind(pport, &t) {
                        Some(p) if app.owns_target(p) => {}
                        Some(p) => {
                            let _ = self.flows.bind(pport, &t, p);
                            app.counters.reject_bad_config += 1;
                        }
                        None => app.counters.reject_bad_config += 1,
                    }
                }
            }
            config::FALLBACK => {
                let Some(tport) = t1 else {
                    app.counters.reject_bad_config += 1;
                    return;
                };
                let f = &mut self.fallback[tport as usize];
                match (a[0], a[2]) {
                    (config::FALLBACK_ADD, _) => f.add(a[1] as u32),
                    (config::FALLBACK_REMOVE, _) => f.remove(a[1] as u32),
                    (config::FALLBACK_POLICY, rr @ (0 | 1)) => f.set_round_robin(rr == 1),
                    _ => app.counters.reject_bad_config += 1,
                }
            }
            config::TIMESTAMP if port < self.ts_offset.len() && (a[0] == 0 || a[1] <= 60) => {
                self.ts_offset[port] = (a[0] != 0).then_some(a[1] as usize);
            }
            config::RATE_LIMIT if port < self.limiter.len() => {
                self.limiter[port] = match (a[0], a[1]) {
                    (0, _) | (_, 0) => None,
                    (num, den) if num <= u32::MAX as u64 && den <= u32::MAX as u64 => {
                        Some(TokenBucket::new(num, den, now))
                    }
                    _ => {
                        app.counters.reject_bad_config += 1;
                        return;
                    }
                };
            }
            _ => app.counters.reject_bad_config += 1,
        }
    }
}

/// When a notification or completion written now reaches software: `now +
/// latency` with an emulated interconnect, 0 (at once) without.
#[inline]
fn visible_at(clock: &Clock, latency: u64) -> u64 {
    if latency > 0 {
        clock.now_ns() + latency
    } else {
        0
    }
}

/// DMA-writes `data` into a ring of `size` bytes at `base` (region offset),
/// starting at `pos`, in two bursts if it wraps (a burst never crosses the
/// end); each burst is accounted rounded up to `round` bytes (64 for a frame
/// pipe, whose frames occupy whole flits; 1 for a stream pipe).
#[inline(always)]
fn write_ring(
    app: &App,
    pcie: &mut PcieCounters,
    base: usize,
    size: usize,
    pos: usize,
    data: &[u8],
    round: usize,
) {
    let first = data.len().min(size - pos);
    app.write(base + pos, &data[..first]);
    pcie.record_dma_write(
        TrafficClass::Data,
        (base + pos) as u64,
        first.next_multiple_of(round) as u64,
    );
    if first < data.len() {
        let rest = data.len() - first;
        app.write(base, &data[first..]);
        pcie.record_dma_write(
            TrafficClass::Data,
            base as u64,
            rest.next_multiple_of(round) as u64,
        );
    }
}

/// Flits a saturated engine writes between looks at posted register writes:
/// the configured limit, but at most an eighth of a pipe (far from filling
/// one before head updates are applied) and a quarter of any generator's
/// in-flight window (a closed loop that waits on register writes for its
/// window to reopen would otherwise be paced by the looks, not the NIC).
fn poll_flits(cfg: &DeviceConfig) -> u64 {
    let mut n = u64::from(cfg.register_poll_flits).min((cfg.pipe_size / FLIT / 8) as u64);
    for w in &cfg.ports {
        if let crate::config::WireConfig::Generator(g) = w {
            if let Some(window) = g.max_in_flight {
                n = n.min(window / 4);
            }
        }
    }
    n
}

/// The UDP payload of an IPv4 or IPv6 frame (untagged).
fn udp_payload(frame: &[u8]) -> Option<&[u8]> {
    let ty = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let (start, end) = match ty {
        wire::ETHERTYPE_IPV4 => {
            let ip = frame.get(14..34)?;
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let tot = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if ip[9] != wire::PROTO_UDP || ihl < 20 || tot < ihl + 8 {
                return None;
            }
            (14 + ihl + 8, 14 + tot)
        }
        wire::ETHERTYPE_IPV6 => {
            let ip = frame.get(14..54)?;
            let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            if ip[6] != wire::PROTO_UDP || plen < 8 {
                return None;
            }
            (14 + 40 + 8, 14 + 40 + plen)
        }
        _ => return None,
    };
    frame.get(start..end)
}

#[inline(always)]
fn read_region<B: AsMut<[u8]> + ?Sized>(region: &MmapRaw, off: usize, dst: &mut B) {
    let dst = dst.as_mut();
    // SAFETY: callers pass ranges checked against the region: inside a TX
    // notification's `address..address + length` or a TX descriptor's buffer
    // (`desc.rs`, `in_region`), or through `App::read`, which checks again.
    // Bytes are untrusted plain data (see `App::read`).
    unsafe { copy_bytes(region.as_ptr().add(off), dst.as_mut_ptr(), dst.len()) };
}

/// Copies `n` bytes from `src` to `dst`: `copy_nonoverlapping`, with the
/// 32..=64-byte copies of minimum-size frames done inline as two
/// overlapping 32-byte moves. A copy whose length is not a constant is a
/// call to the C library's `memcpy`, which for a 60-byte frame cost as
/// many instructions again as the move itself, plus the register spills
/// around the call, on every frame the engine receives or sends.
///
/// # Safety
/// As for `std::ptr::copy_nonoverlapping(src, dst, n)`.
#[inline(always)]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    if (32..=64).contains(&n) {
        // SAFETY: both 32-byte moves lie inside the caller's `n` bytes at
        // `src` and `dst` (`n - 32 + 32 = n`); unaligned reads and writes
        // are what `copy_nonoverlapping` allows too.
        unsafe {
            let head = std::ptr::read_unaligned(src.cast::<[u8; 32]>());
            let tail = std::ptr::read_unaligned(src.add(n - 32).cast::<[u8; 32]>());
            std::ptr::write_unaligned(dst.cast::<[u8; 32]>(), head);
            std::ptr::write_unaligned(dst.add(n - 32).cast::<[u8; 32]>(), tail);
        }
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
}

/// The send time of a frame leaving at step time `step_now`; with
/// timestamping on (`ts`: the stamp's offset), the time of this very frame,
/// written into it when it is long enough.
#[inline(always)]
fn stamp_tx(frame: &mut [u8], ts: Option<usize>, clock: &Clock, step_now: u64) -> u64 {
    let Some(off) = ts else {
        return step_now;
    };
    let now = clock.now_ns();
    if off + 4 <= frame.len() {
        frame[off..off + 4].copy_from_slice(&(now as u32).to_le_bytes());
    }
    now
}

/// Notifies software that pipe `pid` now ends at its tail, and marks the
/// notification outstanding (the frame and stream RX paths share this).
#[allow(clippy::too_many_arguments)]
#[inline]
fn notify_pipe(
    app: &mut App,
    pcie: &mut PcieCounters,
    trace: &mut Option<Vec<TraceEvent>>,
    ring_mask: u32,
    pid: usize,
    pipe: &mut PipeState,
    pcs: &mut PipeCounters,
    visible_ns: u64,
) {
    push_rx_notif(app, pcie, ring_mask, pid as u32, pipe.tail, visible_ns);
    pipe.outstanding = true;
    pcs.notifications += 1;
    if let Some(t) = trace.as_mut() {
        t.push(TraceEvent::Notify {
            pipe: pid as u32,
            tail: pipe.tail,
        });
    }
}

/// Writes an RX notification; false if the ring is full or disabled.
#[inline]
fn push_rx_notif(
    app: &mut App,
    pcie: &mut PcieCounters,
    mask: u32,
    pipe: u32,
    tail: u32,
    visible_ns: u64,
) -> bool {
    let nb = &app.nb;
    if nb.rx_ring == 0 || (nb.rx_tail + 1) & mask == nb.rx_head {
        return false;
    }
    let (ring, i) = (nb.rx_ring, nb.rx_tail);
    let n = app.rx_notif(ring, i);
    n.pipe_id.store(pipe, Ordering::Relaxed);
    n.tail.store(tail, Ordering::Relaxed);
    n.visible_ns.store(visible_ns, Ordering::Relaxed);
    // SYNC POINT C (Release): pairs with software's Acquire load of `signal`;
    // the frame bytes up to `tail` and the fields above are visible to it.
    n.signal.store(signal::DATA, Ordering::Release);
    pcie.record_dma_write(
        TrafficClass::Notification,
        (ring + i as usize * layout::NOTIF_SLOT) as u64,
        NOTIF_BYTES,
    );
    app.nb.rx_tail = (i + 1) & mask;
    app.counters.rx_notifications += 1;
    true
}

#[cfg(test)]
mod tests {
    use super::overlaps_sorted;

    #[test]
    fn tx_data_is_placed_against_rx_pipe_spans() {
        let spans = [(4096, 8192), (16384, 20480)];
        // Inside, straddling either edge, or covering a pipe: overlaps.
        for (off, len) in [
            (4096, 64),
            (8128, 64),
            (4032, 128),
            (8000, 9000),
            (0, 30000),
        ] {
            assert!(overlaps_sorted(&spans, off, len), "{off}+{len}");
        }
        // Before, between (touching the ends) and after: apart.
        for (off, len) in [
            (0, 4096),
            (8192, 64),
            (12288, 4096),
            (20480, 64),
            (1 << 30, 64),
        ] {
            assert!(!overlaps_sorted(&spans, off, len), "{off}+{len}");
        }
        assert!(!overlaps_sorted(&[], 0, 64));
    }
}
