//! Attaching a handle to a device: the options, what the library asks
//! for, and the checks on what the device answers before anything is
//! mapped or indexed with it.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use enso_abi::control::{AttachInfo, AttachRequest, LocalNic, NotificationMode, SteppedNic};
use enso_abi::layout::{self, reg, reg_addr, DESC_SLOT};
use enso_abi::shm;

use super::liveness::Keepalive;
use super::{Device, DeviceStats, TxRecord};
use crate::error::AttachError;

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// Settings of a device handle.
#[derive(Clone, Debug)]
pub struct DeviceOptions {
    /// RX (and RX/TX) pipe ids reserved at attach. A handle allocating
    /// more asks the device for the ids after its own, up to the device's
    /// [`MAX_PIPES`](enso_abi::layout::MAX_PIPES) (see [`Device::alloc_rx_pipe`]).
    pub pipes: u32,
    /// TX pipes the DMA region is sized for at attach. More are allocated
    /// while the region has room, which it has for as many pipes as the
    /// device has pipe ids (see [`Device::alloc_tx_pipe`]).
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

/// Bytes of DMA region a handle with options `o` needs, for pipes of
/// `pipe_size` bytes and notification rings of `entries` slots. Saturates
/// (no region is that large) rather than overflow on sizes a device sent.
pub(super) fn region_bytes(o: &DeviceOptions, pipe_size: usize, entries: u32) -> usize {
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

/// Bytes a handle's DMA region holds beyond what its options need: room
/// for as many pipes as the device has pipe ids, RX pipes allocated past
/// [`DeviceOptions::pipes`] and TX pipes past [`DeviceOptions::tx_pipes`]
/// alike. The region is sparse: pages are allocated when touched.
pub(super) fn growth_room(pipe_size: usize) -> usize {
    (layout::MAX_PIPES as usize).saturating_mul(pipe_size)
}

/// The attach request for options `o`; `room`: with [`growth_room`] (a
/// device that accepts no region that large is asked again without).
pub(super) fn request(
    o: &DeviceOptions,
    pipe_size: usize,
    entries: u32,
    room: bool,
) -> AttachRequest {
    let need = region_bytes(o, pipe_size, entries);
    AttachRequest {
        pipes: o.pipes,
        dma_bytes: if room {
            need.saturating_add(growth_room(pipe_size))
        } else {
            need
        },
        desc_queues: o.queues,
    }
}

/// Asks `attach` for a region with growth room, and if refused, again
/// for what the options need (the second refusal is the one returned).
fn attach_with_room<T>(
    mut attach: impl FnMut(AttachRequest) -> Result<T, String>,
    o: &DeviceOptions,
    pipe_size: usize,
    entries: u32,
) -> Result<T, String> {
    attach(request(o, pipe_size, entries, true))
        .or_else(|_| attach(request(o, pipe_size, entries, false)))
}

pub(super) fn check_options(o: &DeviceOptions) -> Result<(), AttachError> {
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

pub(super) fn bad_answer(what: impl std::fmt::Display) -> AttachError {
    AttachError::Device(format!("bad attach answer: {what}"))
}

/// Checks what the device answered at attach time before anything is mapped
/// or indexed with it. The device is another process, possibly buggy or
/// hostile; the datapath then uses the rings, pipe sizes and ids without
/// further checks.
pub(super) fn check_info(info: &AttachInfo, opts: &DeviceOptions) -> Result<(), AttachError> {
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
pub(super) fn open_shared(path: &Path, len: usize) -> Result<File, AttachError> {
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
        let remote = |req| enso_abi::control::attach_remote(&devdir, req);
        let (info, sock) =
            attach_with_room(remote, &opts, 2 << 20, 16384).map_err(AttachError::Device)?;
        // Room for growth was sized by the guess; what the options need,
        // by the device's own sizes.
        let want = region_bytes(&opts, info.pipe_size, info.notif_ring_entries);
        let (info, sock) = if want > info.dma_len {
            drop(sock);
            attach_with_room(remote, &opts, info.pipe_size, info.notif_ring_entries)
                .map_err(AttachError::Device)?
        } else {
            (info, sock)
        };
        // The device sends nothing after its answer: `check_alive` reads
        // the connection without waiting, to see whether it was closed.
        sock.set_nonblocking(true)?;
        let mut d = Self::from_info(info, opts, Keepalive::Socket(sock))?;
        d.devdir = Some(devdir);
        Ok(d)
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
        let local = |req| nic.attach(req).map_err(|e| e.to_string());
        let info = attach_with_room(local, &opts, pipe_size, notif_entries)
            .map_err(AttachError::Device)?;
        let id = info.app_id;
        Self::from_info(info, opts, Keepalive::Control(nic.handle(), id))
    }

    /// Attaches to a device running in this process (the emulator's
    /// `nic_emu::Nic`, or its control handle), with its own sizes.
    pub fn attach_nic(nic: &dyn LocalNic, opts: DeviceOptions) -> Result<Self, AttachError> {
        let (ps, ne) = nic
            .ring_sizes()
            .map_err(|e| AttachError::Device(e.to_string()))?;
        Self::attach(nic, ps, ne, opts)
    }

    /// Attaches to a stepped engine (the caller runs `engine.step()`).
    pub fn attach_engine(
        engine: &mut dyn SteppedNic,
        opts: DeviceOptions,
    ) -> Result<Self, AttachError> {
        check_options(&opts)?;
        let (ps, ne) = engine.ring_sizes();
        let stepped = |req: AttachRequest| engine.attach(&req).map_err(|e| e.to_string());
        let info = attach_with_room(stepped, &opts, ps, ne).map_err(AttachError::Device)?;
        Self::from_info(info, opts, Keepalive::None)
    }

    pub(super) fn from_info(
        info: AttachInfo,
        opts: DeviceOptions,
        keep: Keepalive,
    ) -> Result<Self, AttachError> {
        check_info(&info, &opts)?;
        let file = open_shared(&info.dma_path, info.dma_len)?;
        let region = shm::map(&file, info.dma_len)?;
        let mmio_file = open_shared(&info.mmio_path, layout::MMIO_FILE_LEN)?;
        let mmio = shm::map(&mmio_file, layout::MMIO_FILE_LEN)?;
        let engine_wake = match &info.wake_path {
            Some(p) => {
                let f = open_shared(p, layout::WAKE_FILE_LEN)?;
                Some(shm::map(&f, layout::WAKE_FILE_LEN)?)
            }
            None => None,
        };
        let entries = info.notif_ring_entries;
        let ring_bytes = layout::notif_ring_bytes(entries);
        let (rx_ring, tx_ring) = layout::notif_rings(entries);
        let pipes = info.pipe_count as usize;
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
            devdir: None,
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
            engine_wake,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::test_support::{answer, create_files, fake_device, opts};
    use std::sync::atomic::Ordering;

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
}
