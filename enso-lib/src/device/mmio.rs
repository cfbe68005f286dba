//! Register writes: the ordered posted-write queue through which the
//! handle writes the NIC's registers.

use enso_abi::layout::MmioQueue;

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
        if !<MmioQueue>::has_room(self.mmio_prod, self.mmio_cons) {
            let mut wait = Wait::new();
            loop {
                self.mmio_cons = self.mmio_queue().acquire_consumer();
                if <MmioQueue>::has_room(self.mmio_prod, self.mmio_cons) {
                    break;
                }
                wait.check(self, DeviceError::MmioStalled)?;
                std::hint::spin_loop();
            }
        }
        let prod = self.mmio_prod;
        let stamp = self.stamp.then(enso_abi::monotonic_ns).unwrap_or(0);
        self.mmio_queue().post(prod, addr, value, stamp);
        self.mmio_prod = prod.wrapping_add(1);
        self.stats.mmio_writes += 1;
        Ok(())
    }
}
