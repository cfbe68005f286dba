//! The structures the header declares, shared by value with C.

/// Settings of a device handle ([`enso_device_options_default`](crate::enso_device_options_default) fills in
/// the library's defaults).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EnsoDeviceOptions {
    /// RX and RX/TX pipes the handle may allocate (at most 65535).
    pub pipes: u32,
    /// TX pipes the handle may allocate (at most 65535).
    pub tx_pipes: u32,
    /// Bytes per TX pipe: a power of two of at least 4096.
    pub tx_pipe_size: u64,
    /// TX notifications in flight at most (at least 1).
    pub tx_credits: u32,
    /// Notification prefetching: -1 follows the device's mode, 0 off, 1 on.
    pub prefetch: i32,
}

/// Received bytes of one pipe: `len` bytes at `data`, frames back to back
/// on 64 B boundaries. `next` is the iteration cursor of
/// [`enso_batch_next`](crate::enso_batch_next) (0 after a receive).
#[repr(C)]
#[derive(Debug)]
pub struct EnsoBatch {
    pub data: *mut u8,
    pub len: usize,
    pub next: usize,
}

/// A flow rule: IPv4 addresses and ports in host byte order (10.1.0.1 is
/// 0x0a010001), protocol 6 (TCP) or 17 (UDP); zero fields are wildcards
/// as the NIC's matching rules define.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EnsoFlowRule {
    pub src_ip: u32,
    pub dst_ip: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
}

/// What the library counted (software's view of one device handle).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EnsoDeviceStats {
    pub notifications: u64,
    pub notification_polls: u64,
    pub head_writes: u64,
    pub prefetches: u64,
    pub tx_notifications: u64,
    pub completions: u64,
    pub mmio_writes: u64,
    pub bogus_notifications: u64,
}

/// The NIC's counters of a port ([`enso_port_stats`](crate::enso_port_stats)): frames and bytes
/// each way, the port's drops by cause, and the drops of the handle's
/// pipes summed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EnsoPortStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub drop_no_match: u64,
    pub drop_malformed: u64,
    pub drop_oversize: u64,
    pub drop_wire_fifo_full: u64,
    pub drop_wire: u64,
    pub tx_discarded: u64,
    pub pipe_full: u64,
    pub notif_ring_full: u64,
    pub not_udp: u64,
}
