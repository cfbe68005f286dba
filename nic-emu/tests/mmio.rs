//! The posted-write (register) queue under hostile producer values: the
//! engine refuses a producer the queue cannot hold, in bounded time, and
//! keeps applying the application's writes after it.

use std::sync::atomic::Ordering;

use nic_emu::layout::{self, MmioQueue, MMIO_QUEUE_LEN};
use nic_emu::{AttachRequest, DeviceConfig, Engine, WireConfig};

/// An address outside the register window: applying a write to it counts
/// one `mmio_writes` and one `reject_foreign_register`.
const NO_REGISTER: u32 = u32::MAX;

/// The engine, and an application's posted-write queue mapped as raw
/// shared memory (no library), to publish any producer value.
struct Raw {
    engine: Engine,
    app_id: u32,
    mmio: memmap2::MmapRaw,
    _dir: tempfile::TempDir,
}

impl Raw {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = DeviceConfig::new("mmio", WireConfig::Null);
        cfg.dir = dir.path().to_path_buf();
        cfg.pipe_size = 64 << 10;
        cfg.notif_ring_entries = 1024;
        let mut engine = Engine::new(cfg).unwrap();
        let info = engine
            .attach(&AttachRequest {
                pipes: 1,
                dma_bytes: 1 << 20,
                desc_queues: 0,
            })
            .unwrap();
        let file = nic_emu::shm::open_file(&info.mmio_path).unwrap();
        let mmio = nic_emu::shm::map(&file, layout::MMIO_FILE_LEN).unwrap();
        Self {
            engine,
            app_id: info.app_id,
            mmio,
            _dir: dir,
        }
    }

    fn queue(&self) -> &MmioQueue {
        // SAFETY: the mapping holds a whole MmioQueue (MMIO_FILE_LEN bytes,
        // page aligned) for as long as `self`; all its fields are atomics.
        unsafe { &*(self.mmio.as_ptr() as *const MmioQueue) }
    }

    /// Writes entry `i` (modulo the queue length) without publishing it.
    fn put(&self, i: u32, addr: u32, value: u32) {
        let e = &self.queue().entries[i as usize % MMIO_QUEUE_LEN];
        e.word
            .store((addr as u64) << 32 | value as u64, Ordering::Relaxed);
    }

    fn publish(&self, producer: u32) {
        // SYNC POINT A (Release): pairs with the engine's Acquire load of
        // `producer`; the entries stored before are visible to it.
        self.queue().producer.0.store(producer, Ordering::Release);
    }

    fn consumer(&self) -> u32 {
        // SYNC POINT B (Acquire): pairs with the engine's Release store of
        // `consumer`.
        self.queue().consumer.0.load(Ordering::Acquire)
    }

    /// (mmio_writes, reject_foreign_register, reject_bad_register_value).
    fn counts(&self) -> (u64, u64, u64) {
        let s = self.engine.stats();
        let a = s.apps.iter().find(|a| a.app_id == self.app_id).unwrap();
        let c = &a.counters;
        (
            c.mmio_writes,
            c.reject_foreign_register,
            c.reject_bad_register_value,
        )
    }

    fn steps(&mut self, n: usize) {
        for _ in 0..n {
            self.engine.step();
        }
    }
}

#[test]
fn a_producer_beyond_the_queue_is_refused_and_later_writes_still_apply() {
    let mut raw = Raw::new();
    // Every entry holds a write that would be counted if it were applied.
    for i in 0..MMIO_QUEUE_LEN as u32 {
        raw.put(i, NO_REGISTER, 0);
    }
    // Far ahead of the consumer (0): refused once, nothing replayed, and
    // the queue is left empty at the producer.
    let far = 0x8000_0000;
    raw.publish(far);
    raw.steps(100);
    assert_eq!(raw.counts(), (0, 0, 1));
    assert_eq!(raw.consumer(), far);
    // Writes posted after it are applied as usual.
    raw.put(far, NO_REGISTER, 1);
    raw.publish(far + 1);
    raw.steps(10);
    assert_eq!(raw.counts(), (1, 1, 1));
    assert_eq!(raw.consumer(), far + 1);
    // A producer behind the consumer claims 2^32 - 1 entries: refused too.
    raw.publish(far);
    raw.steps(10);
    assert_eq!(raw.counts(), (1, 1, 2));
    assert_eq!(raw.consumer(), far);
    // Just past a full queue: refused.
    raw.publish(far + MMIO_QUEUE_LEN as u32 + 1);
    raw.steps(10);
    assert_eq!(raw.counts(), (1, 1, 3));
    // A full queue is not hostile: every entry is applied, in order, and
    // the queue wraps (the producer runs past 2^32).
    let start = u32::MAX - 100;
    raw.publish(start);
    raw.steps(1);
    assert_eq!(raw.counts(), (1, 1, 4));
    let full = start.wrapping_add(MMIO_QUEUE_LEN as u32);
    raw.publish(full);
    raw.engine.run_until_idle(1000);
    let n = MMIO_QUEUE_LEN as u64;
    assert_eq!(raw.counts(), (1 + n, 1 + n, 4));
    assert_eq!(raw.consumer(), full);
}
