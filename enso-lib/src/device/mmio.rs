//! Register writes: the ordered posted-write queue through which the
//! handle writes the NIC's registers.

use enso_abi::layout::{self, MmioQueue};
use enso_abi::wake::Sleeper;

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
        self.wake_engine();
        Ok(())
    }

    /// Wakes the engine if it is parked, after a register write was
    /// posted: a fence and a load; the system call only when the engine
    /// said it sleeps (never at saturation).
    #[inline]
    fn wake_engine(&mut self) {
        if let Some(s) = self.engine_sleeper() {
            if s.should_wake() {
                enso_abi::wake::wake(s.word());
                self.stats.engine_wakeups += 1;
            }
        }
    }

    /// The engine's wake block, if the device has one.
    #[inline]
    fn engine_sleeper(&self) -> Option<&Sleeper> {
        self.engine_wake.as_ref().map(|m| {
            // SAFETY: the wake file is mapped WAKE_FILE_LEN (a page) >=
            // size_of::<Sleeper>() bytes, page aligned, for as long as
            // `self` lives; Sleeper's fields are atomics.
            unsafe { &*(m.as_ptr() as *const Sleeper) }
        })
    }

    /// This handle's own wake block, in its register file.
    #[inline]
    pub(super) fn app_sleeper(&self) -> &Sleeper {
        // SAFETY: the register file is mapped MMIO_FILE_LEN = APP_WAKE_OFFSET
        // + PAGE bytes; APP_WAKE_OFFSET is page aligned; the mapping lives as
        // long as `self`; Sleeper's fields are atomics.
        unsafe { &*(self.mmio.as_ptr().add(layout::APP_WAKE_OFFSET) as *const Sleeper) }
    }
}
