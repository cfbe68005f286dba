//! Shared helpers for the integration tests: devices in temporary
//! directories, and a stepped echo loop (engine step, then application poll)
//! that makes runs deterministic.

pub mod procs;

use enso::{Device, DeviceOptions, RxTxPipe};
use nic_emu::testframe::TestFrames;
use nic_emu::{DeviceConfig, Engine, GeneratorConfig, WireConfig};

/// A device config with one generator port, small pipes, in a fresh
/// temporary directory (returned so it outlives the device).
pub fn generator_device(name: &str, g: GeneratorConfig) -> (DeviceConfig, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = DeviceConfig::new(name, WireConfig::Generator(g));
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 64 << 10;
    cfg.notif_ring_entries = 4096;
    (cfg, dir)
}

/// Increments the echo byte of every test frame in the batch and sends the
/// batch back in place. Returns the frames echoed.
pub fn echo_pipe(dev: &mut Device, pipe: RxTxPipe) -> usize {
    try_echo_pipe(dev, pipe).unwrap_or_else(|e| panic!("{e}"))
}

/// [`echo_pipe`], returning the device's errors (with what failed) instead
/// of panicking.
pub fn try_echo_pipe(dev: &mut Device, pipe: RxTxPipe) -> Result<usize, String> {
    let (n, bytes) = {
        let mut b = dev.recv(pipe).map_err(|e| format!("recv: {e}"))?;
        let mut n = 0;
        for pkt in b.packets_mut() {
            if let Some(v) = TestFrames::peek(pkt) {
                let e = v.kind.echo_offset();
                pkt[e] = pkt[e].wrapping_add(1);
            }
            n += 1;
        }
        (n, b.len())
    };
    if bytes > 0 {
        dev.send_and_free(pipe, bytes)
            .map_err(|e| format!("send: {e}"))?;
    }
    Ok(n)
}

/// Serves every pipe that has data once. Returns the frames echoed.
pub fn echo_ready(dev: &mut Device) -> usize {
    try_echo_ready(dev).unwrap_or_else(|e| panic!("{e}"))
}

/// [`echo_ready`], returning the device's errors (with what failed)
/// instead of panicking.
pub fn try_echo_ready(dev: &mut Device) -> Result<usize, String> {
    let mut n = 0;
    while let Some(p) = dev
        .next_pipe_with_data()
        .map_err(|e| format!("poll: {e}"))?
    {
        let p = dev
            .as_rxtx(p)
            .ok_or("poll: data on a pipe that is not an RX/TX pipe")?;
        n += try_echo_pipe(dev, p)?;
    }
    Ok(n)
}

/// Runs engine and echo alternately until the generator has sent everything
/// and nothing is in flight, or `max_steps` pass. Returns the steps taken.
pub fn run_stepped_echo(engine: &mut Engine, dev: &mut Device, max_steps: usize) -> usize {
    for i in 0..max_steps {
        engine.step();
        echo_ready(dev);
        dev.reap_completions().expect("reap");
        if i % 64 == 0 && engine.generators_finished() {
            let s = engine.stats();
            let g = s.generator(0).expect("generator port");
            if g.in_flight() <= s.total_drops() && dev.tx_in_flight() == 0 {
                // Let the last completions and head writes settle.
                engine.run_until_idle(1000);
                return i;
            }
        }
    }
    max_steps
}

/// Options for tests: `pipes` pipes, small TX pipe.
pub fn opts(pipes: u32) -> DeviceOptions {
    DeviceOptions {
        pipes,
        tx_pipes: 1,
        tx_pipe_size: 64 << 10,
        ..Default::default()
    }
}

/// Options for packetized tests: `queues` queue pairs with `ring`-entry
/// rings and a pool that fills them all twice over.
pub fn pkt_opts(queues: u32, ring: u32) -> DeviceOptions {
    DeviceOptions {
        pipes: 0,
        tx_pipes: 0,
        queues,
        rx_ring: ring,
        tx_ring: ring,
        pool_buffers: queues * ring * 2 + 256,
        ..Default::default()
    }
}

/// Increments the echo byte of test frames (other frames unchanged).
pub fn echo_handler(f: &mut [u8]) -> enso::Verdict {
    if let Some(v) = TestFrames::peek(f) {
        let e = v.kind.echo_offset();
        f[e] = f[e].wrapping_add(1);
    }
    enso::Verdict::Forward
}

/// A xorshift generator for hostile values.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// An application that attaches without the library: raw access to its own
/// DMA region and posted-write queue, for hostile-input tests.
pub struct RawApp {
    pub info: nic_emu::AttachInfo,
    region: memmap2::MmapRaw,
    mmio: memmap2::MmapRaw,
    prod: u32,
}

impl RawApp {
    pub fn attach(e: &mut Engine, req: nic_emu::AttachRequest) -> Self {
        // A fresh attachment's queue starts empty: `join` continues from 0.
        Self::join(&e.attach(&req).expect("attach"))
    }

    /// Raw access to an attachment someone else made (the library, through
    /// `Device::info`), continuing its posted-write queue from the last
    /// write it published: the owner must post nothing more.
    pub fn join(info: &nic_emu::AttachInfo) -> Self {
        use nic_emu::shm;
        let region = shm::map(&shm::open_file(&info.dma_path).unwrap(), info.dma_len).unwrap();
        let mmio_len = nic_emu::layout::MMIO_FILE_LEN;
        let mmio = shm::map(&shm::open_file(&info.mmio_path).unwrap(), mmio_len).unwrap();
        let mut raw = Self {
            info: info.clone(),
            region,
            mmio,
            prod: 0,
        };
        // Only this thread writes `producer` (the owner has stopped).
        raw.prod = raw
            .queue()
            .producer
            .0
            .load(std::sync::atomic::Ordering::Relaxed);
        raw
    }

    fn queue(&self) -> &nic_emu::layout::MmioQueue {
        // SAFETY: the mapping holds a whole MmioQueue (MMIO_FILE_LEN bytes,
        // page aligned) for as long as `self`; all its fields are atomics.
        unsafe { &*(self.mmio.as_ptr() as *const nic_emu::layout::MmioQueue) }
    }

    /// Stores a posted register write without publishing it; false (and
    /// nothing stored) when the queue is full.
    pub fn post(&mut self, addr: u32, value: u32) -> bool {
        use std::sync::atomic::Ordering;
        let len = nic_emu::layout::MMIO_QUEUE_LEN;
        let q = self.queue();
        // SYNC POINT B (Acquire): pairs with the NIC's Release store of
        // `consumer` after it copied the entries out, so the slot below is
        // free to overwrite.
        if self.prod.wrapping_sub(q.consumer.0.load(Ordering::Acquire)) as usize >= len - 1 {
            return false;
        }
        let e = &q.entries[self.prod as usize % len];
        e.word
            .store((addr as u64) << 32 | value as u64, Ordering::Relaxed);
        self.prod = self.prod.wrapping_add(1);
        true
    }

    /// Publishes the posted writes (the NIC's Acquire partner: SYNC POINT A).
    pub fn publish(&self) {
        self.queue()
            .producer
            .0
            .store(self.prod, std::sync::atomic::Ordering::Release);
    }

    /// A register write, posted and published.
    pub fn write(&mut self, addr: u32, value: u32) {
        assert!(self.post(addr, value), "posted-write queue full");
        self.publish();
    }

    fn check(&self, off: usize, size: usize, align: usize) {
        assert!(
            off.is_multiple_of(align) && off + size <= self.info.dma_len,
            "offset {off}"
        );
    }

    /// The TX notification at `off` in the region (64 B aligned).
    pub fn tx_notif(&self, off: usize) -> &nic_emu::layout::TxNotification {
        self.check(off, 64, 64);
        // SAFETY: `off` is in bounds and aligned (checked above); the fields
        // are atomics, so sharing the slot with the NIC is sound.
        unsafe { &*(self.region.as_ptr().add(off) as *const nic_emu::layout::TxNotification) }
    }

    /// The RX notification at `off` in the region (64 B aligned): what a
    /// device writes, for tests that play a faulty one.
    pub fn rx_notif(&self, off: usize) -> &nic_emu::layout::RxNotification {
        self.check(off, 64, 64);
        // SAFETY: as `tx_notif`: checked bounds and alignment, atomic fields.
        unsafe { &*(self.region.as_ptr().add(off) as *const nic_emu::layout::RxNotification) }
    }

    /// The descriptor at `off` in the region (16 B aligned).
    pub fn desc(&self, off: usize) -> &nic_emu::layout::Descriptor {
        self.check(off, 16, 16);
        // SAFETY: as `tx_notif`: checked bounds and alignment, atomic fields.
        unsafe { &*(self.region.as_ptr().add(off) as *const nic_emu::layout::Descriptor) }
    }
}
