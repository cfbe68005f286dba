//! Device handles: options, attaching and closing, counters, port MACs,
//! and the handle table that maps pipe handles to the library's pipes.

use std::ffi::{c_char, c_int, CStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use enso::{Device, DeviceOptions, RxPipe, RxTxPipe, TxPipe};

use crate::error::Failure;
use crate::guard::{flag, guard, put};
use crate::structs::{EnsoDeviceOptions, EnsoDeviceStats, EnsoPortStats};
use crate::{
    ENSO_ERR_BAD_HANDLE, ENSO_ERR_INTERNAL, ENSO_ERR_INVALID, ENSO_ERR_NO_PORT, ENSO_ERR_OPTIONS,
    ENSO_OK, TX_HANDLE_BASE,
};

/// An RX pipe and, if it was allocated as one, its RX/TX view.
#[derive(Clone, Copy, Debug)]
struct RxEntry {
    pipe: RxPipe,
    rxtx: Option<RxTxPipe>,
}

/// The device behind an `enso_device_t *`.
pub struct EnsoDevice {
    pub(crate) dev: Device,
    /// Indexed by RX handle; `None`: freed (the handle is given again).
    rx: Vec<Option<RxEntry>>,
    /// Indexed by TX handle - [`TX_HANDLE_BASE`]; `None`: freed.
    tx: Vec<Option<TxPipe>>,
    /// The RX handle `enso_next_pipe_with_data` returned last (looked at
    /// first when mapping the next pipe back to its handle).
    last: usize,
    /// A call on this device panicked: its state may be inconsistent.
    pub(crate) poisoned: bool,
}

impl EnsoDevice {
    fn rx_entry(&self, h: c_int) -> Result<RxEntry, Failure> {
        usize::try_from(h)
            .ok()
            .and_then(|i| self.rx.get(i))
            .copied()
            .flatten()
            .ok_or_else(|| {
                Failure::new(
                    ENSO_ERR_BAD_HANDLE,
                    format!("{h}: not an RX pipe of this device"),
                )
            })
    }

    pub(crate) fn rx(&self, h: c_int) -> Result<RxPipe, Failure> {
        self.rx_entry(h).map(|e| e.pipe)
    }

    pub(crate) fn rxtx(&self, h: c_int) -> Result<RxTxPipe, Failure> {
        self.rx_entry(h)?
            .rxtx
            .ok_or_else(|| Failure::new(ENSO_ERR_BAD_HANDLE, format!("{h}: not an RX/TX pipe")))
    }

    pub(crate) fn tx(&self, h: c_int) -> Result<TxPipe, Failure> {
        h.checked_sub(TX_HANDLE_BASE)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.tx.get(i))
            .copied()
            .flatten()
            .ok_or_else(|| {
                Failure::new(
                    ENSO_ERR_BAD_HANDLE,
                    format!("{h}: not a TX pipe of this device"),
                )
            })
    }

    pub(crate) fn port(&self, port: u32) -> Result<(), Failure> {
        if (port as usize) < self.dev.info().ports {
            Ok(())
        } else {
            Err(Failure::new(
                ENSO_ERR_NO_PORT,
                format!("no port {port} (the device has {})", self.dev.info().ports),
            ))
        }
    }

    /// A handle for a new RX pipe: the lowest free one, as file
    /// descriptors are given.
    pub(crate) fn add_rx(&mut self, pipe: RxPipe, rxtx: Option<RxTxPipe>) -> c_int {
        lowest_free(&mut self.rx, RxEntry { pipe, rxtx })
    }

    /// A handle for a new TX pipe: the lowest free one.
    pub(crate) fn add_tx(&mut self, pipe: TxPipe) -> c_int {
        TX_HANDLE_BASE + lowest_free(&mut self.tx, pipe)
    }

    /// Frees RX handle `h` (its pipe was freed).
    pub(crate) fn remove_rx(&mut self, h: c_int) {
        if let Some(e) = usize::try_from(h).ok().and_then(|i| self.rx.get_mut(i)) {
            *e = None;
        }
    }

    /// Frees TX handle `h` (its pipe was freed).
    pub(crate) fn remove_tx(&mut self, h: c_int) {
        let i = h
            .checked_sub(TX_HANDLE_BASE)
            .and_then(|i| usize::try_from(i).ok());
        if let Some(e) = i.and_then(|i| self.tx.get_mut(i)) {
            *e = None;
        }
    }

    /// The handle of `pipe` (one of ours: `Device` hands out only pipes
    /// it allocated, and this device allocated them all through `rx`).
    pub(crate) fn handle_of(&mut self, pipe: RxPipe) -> Result<c_int, Failure> {
        let is = |e: &Option<RxEntry>| e.is_some_and(|e| e.pipe == pipe);
        if self.rx.get(self.last).is_some_and(is) {
            return Ok(self.last as c_int);
        }
        let i = self.rx.iter().position(is).ok_or_else(|| {
            Failure::new(
                ENSO_ERR_INTERNAL,
                "the device returned a pipe with no handle",
            )
        })?;
        self.last = i;
        Ok(i as c_int)
    }
}

/// Puts `v` in the lowest free slot of `slots` (or a new one at the end);
/// its index.
fn lowest_free<T>(slots: &mut Vec<Option<T>>, v: T) -> c_int {
    match slots.iter().position(Option::is_none) {
        Some(i) => {
            slots[i] = Some(v);
            i as c_int
        }
        None => {
            slots.push(Some(v));
            slots.len() as c_int - 1
        }
    }
}

/// Fills `opts` with the library's defaults (16 pipes, 1 TX pipe of 2 MiB,
/// 500 TX credits, prefetching as the device says).
///
/// # Safety
/// `opts` is null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_device_options_default(opts: *mut EnsoDeviceOptions) -> c_int {
    guard(|| {
        let d = DeviceOptions::default();
        let o = EnsoDeviceOptions {
            pipes: d.pipes,
            tx_pipes: d.tx_pipes,
            tx_pipe_size: d.tx_pipe_size as u64,
            tx_credits: d.tx_credits,
            prefetch: -1,
        };
        // SAFETY: the caller's contract.
        unsafe { put(opts, o, "options") }?;
        Ok(ENSO_OK)
    })
}

pub(crate) fn options(o: &EnsoDeviceOptions) -> Result<DeviceOptions, Failure> {
    let bad = |what: &str| Err(Failure::new(ENSO_ERR_OPTIONS, what));
    if o.pipes > 0xffff || o.tx_pipes > 0xffff {
        return bad("pipes and tx_pipes must be at most 65535");
    }
    let Ok(tx_pipe_size) = usize::try_from(o.tx_pipe_size) else {
        return bad("tx_pipe_size too large");
    };
    let prefetch = match o.prefetch {
        -1 => None,
        0 => Some(false),
        1 => Some(true),
        _ => return bad("prefetch must be -1, 0 or 1"),
    };
    Ok(DeviceOptions {
        pipes: o.pipes,
        tx_pipes: o.tx_pipes,
        tx_pipe_size,
        tx_credits: o.tx_credits,
        prefetch,
        ..DeviceOptions::default()
    })
}

/// Attaches to the standalone device `name` in directory `dir` (null for
/// `/dev/shm`), with options `opts` (null for the defaults), and stores the
/// handle in `*out` (left untouched on failure).
///
/// # Safety
/// `name` and `dir` are null or NUL-terminated strings; `opts` is null or
/// points to options; `out` is null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_device_open(
    name: *const c_char,
    dir: *const c_char,
    opts: *const EnsoDeviceOptions,
    out: *mut *mut EnsoDevice,
) -> c_int {
    guard(|| {
        if name.is_null() || out.is_null() {
            return Err(Failure::new(
                ENSO_ERR_INVALID,
                "null name or handle pointer",
            ));
        }
        // SAFETY: non-null and, by the caller's contract, NUL-terminated.
        let name = unsafe { CStr::from_ptr(name) }
            .to_str()
            .map_err(|_| Failure::new(ENSO_ERR_INVALID, "device name is not UTF-8"))?;
        enso_abi::devname::check_name(name).map_err(|e| Failure::new(ENSO_ERR_INVALID, e))?;
        let dir = if dir.is_null() {
            Path::new("/dev/shm")
        } else {
            // SAFETY: as `name`.
            let d = unsafe { CStr::from_ptr(dir) };
            Path::new(std::ffi::OsStr::from_bytes(d.to_bytes()))
        };
        let opts = if opts.is_null() {
            DeviceOptions::default()
        } else {
            // SAFETY: non-null and, by the caller's contract, options.
            options(unsafe { &*opts })?
        };
        let dev = Device::open_in(dir, name, opts)?;
        let h = Box::new(EnsoDevice {
            dev,
            rx: Vec::new(),
            tx: Vec::new(),
            last: 0,
            poisoned: false,
        });
        // SAFETY: `out` is non-null (checked) and valid for writes.
        unsafe { out.write(Box::into_raw(h)) };
        Ok(ENSO_OK)
    })
}

/// Detaches and frees the handle (null is allowed and does nothing). Data
/// still being sent may be discarded by the device: wait for
/// `enso_tx_in_flight` to reach 0 first to have it all sent.
///
/// # Safety
/// `dev` is null or a handle from [`enso_device_open`], not closed yet and
/// not used by another thread; it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn enso_device_close(dev: *mut EnsoDevice) -> c_int {
    guard(|| {
        if !dev.is_null() {
            // SAFETY: made by `Box::into_raw` in `enso_device_open` and, by
            // the caller's contract, not freed yet.
            drop(unsafe { Box::from_raw(dev) });
        }
        Ok(ENSO_OK)
    })
}

/// The number of ports of the device.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_device_port_count(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| Ok(
        d.dev.info().ports.min(c_int::MAX as usize) as c_int
    ))
}

/// 0 while the device is there, [`ENSO_ERR_GONE`](crate::ENSO_ERR_GONE) once it has stopped (a
/// loop that may wait for traffic for long should call it now and then).
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_device_check_alive(dev: *mut EnsoDevice) -> c_int {
    on_device!(dev, |d| {
        d.dev.check_alive()?;
        Ok(ENSO_OK)
    })
}

/// Copies the handle's software counters into `*stats`.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `stats` is null
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_device_stats(
    dev: *mut EnsoDevice,
    stats: *mut EnsoDeviceStats,
) -> c_int {
    on_device!(dev, |d| {
        let s = d.dev.stats();
        let v = EnsoDeviceStats {
            notifications: s.notifications,
            notification_polls: s.notification_polls,
            head_writes: s.head_writes,
            prefetches: s.prefetches,
            tx_notifications: s.tx_notifications,
            completions: s.completions,
            mmio_writes: s.mmio_writes,
            bogus_notifications: s.bogus_notifications,
        };
        // SAFETY: the caller's contract.
        unsafe { put(stats, v, "stats") }?;
        Ok(ENSO_OK)
    })
}

/// Copies the NIC's counters of `port` into `*stats` (a standalone
/// device's are its latest snapshot, at most 200 ms old;
/// [`ENSO_ERR_IO`](crate::ENSO_ERR_IO) before its first). Not for the datapath.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `stats` is null
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn enso_port_stats(
    dev: *mut EnsoDevice,
    port: u32,
    stats: *mut EnsoPortStats,
) -> c_int {
    on_device!(dev, |d| {
        if stats.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null stats"));
        }
        let s = d.dev.port_stats(port)?;
        let sum = |f: fn(&enso::PipeDrops) -> u64| s.pipes.iter().map(f).sum::<u64>();
        let v = EnsoPortStats {
            rx_frames: s.rx_frames,
            rx_bytes: s.rx_bytes,
            tx_frames: s.tx_frames,
            tx_bytes: s.tx_bytes,
            drop_no_match: s.drops.no_match,
            drop_malformed: s.drops.malformed,
            drop_oversize: s.drops.oversize,
            drop_wire_fifo_full: s.drops.wire_fifo_full,
            drop_wire: s.drops.wire,
            tx_discarded: s.drops.tx_discarded,
            pipe_full: sum(|p| p.pipe_full),
            notif_ring_full: sum(|p| p.notif_ring_full),
            not_udp: sum(|p| p.not_udp),
        };
        // SAFETY: the caller's contract.
        unsafe { put(stats, v, "stats") }?;
        Ok(ENSO_OK)
    })
}

/// Turns automatic notification prefetching in
/// [`enso_next_pipe_with_data`](crate::enso_next_pipe_with_data) on (`on` non-zero) or off.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn enso_set_prefetch(dev: *mut EnsoDevice, on: c_int) -> c_int {
    on_device!(dev, |d| {
        d.dev.set_prefetch(flag(on));
        Ok(ENSO_OK)
    })
}

/// Writes the MAC address of `port` (6 bytes) to `mac`.
///
/// # Safety
/// `dev` is null or a live handle used by this thread only; `mac` is null
/// or valid for 6 bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn enso_port_mac(dev: *mut EnsoDevice, port: u32, mac: *mut u8) -> c_int {
    on_device!(dev, |d| {
        if mac.is_null() {
            return Err(Failure::new(ENSO_ERR_INVALID, "null MAC buffer"));
        }
        d.port(port)?;
        let m = d
            .dev
            .port_mac(port)
            .ok_or_else(|| Failure::new(ENSO_ERR_NO_PORT, format!("no port {port}")))?;
        // SAFETY: non-null and, by the caller's contract, 6 writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(m.as_ptr(), mac, 6) };
        Ok(ENSO_OK)
    })
}
