//! Register writes: the ordered posted-write queue through which the
//! handle writes the NIC's registers.

use std::sync::atomic::Ordering;

use enso_abi::layout::{MmioQueue, MMIO_QUEUE_LEN};

use super::{Device, Wait};
use crate::error::DeviceError;

impl Device {
    #[inline]
    pub(super) fn mmio_queue(&self) -> &MmioQueue {
        // SAFETY: the mapping holds MMIO_FILE_LEN >= size_of::<MmioQueue>()
        // bytes, is page aligned, lives as long as `self`; all fields atomics.
        unsafe { &*(self.mmio.as_ptr() as *const MmioQueue) }
    }

    /// Posts a register write. Waits (bounded) if the queue is full: a write
    /// is never dropped.
    #[inline]
    pub(crate) fn mmio_write(&mut self, addr: u32, value: u32) -> Result<(), DeviceError> {
        if self.mmio_prod.wrapping_sub(self.mmio_cons) as usize >= MMIO_QUEUE_LEN {
            let mut wait = Wait::new();
            loop {
                // SYNC POINT B (Acquire): pairs with the NIC's Release store
                // of `consumer` after it copied the entries out.
                self.mmio_cons = self.mmio_queue().consumer.0.load(Ordering::Acquire);
                if (self.mmio_prod.wrapping_sub(self.mmio_cons) as usize) < MMIO_QUEUE_LEN {
                    break;
                }
                wait.check(self, DeviceError::MmioStalled)?;
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
}
