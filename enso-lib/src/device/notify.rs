//! Notifications: polling the RX notification ring, the queue of pipes
//! with data, and notification prefetching.

use enso_abi::layout::{self, reg, reg_addr, RxNotification, TxNotification, NOTIF_SLOT};

use super::{Device, RxPipe, RxTxPipe, NOTIF_BATCH};
use crate::error::{DeviceError, RecvError};

impl Device {
    #[inline]
    pub(super) fn rx_notif(&self, i: u32) -> &RxNotification {
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
    pub(super) fn tx_notif(&self, i: u32) -> &TxNotification {
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
            // SYNC POINT C (Acquire, in `take`): the pipe bytes up to
            // `tail` are visible after it.
            let Some((pid, tail)) = self.rx_notif(self.rx_head).take(self.stamp.then_some(now))
            else {
                break; // none, or still crossing the emulated interconnect
            };
            self.rx_head = (self.rx_head + 1) & self.ring_mask;
            n += 1;
            let idx = pid.wrapping_sub(self.info.pipe_base) as usize;
            let Some(p) = self.pipes.get_mut(idx) else {
                self.stats.bogus_notifications += 1;
                continue;
            };
            if p.free {
                // Written before the NIC took the pipe's disabling.
                continue;
            }
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
    ///
    /// A pipe returned and not fully consumed (by [`Device::recv`]) before
    /// the next call is returned again later: it stays ready. For a pipe of
    /// either kind; [`Device::as_rxtx`] tells an RX/TX pipe, or see
    /// [`Device::next_rxtx_pipe_with_data`].
    pub fn next_pipe_with_data(&mut self) -> Result<Option<RxPipe>, DeviceError> {
        let idx = self.next_ready(false)?;
        Ok(idx.map(|idx| RxPipe { dev: self.uid, idx }))
    }

    /// As [`Device::next_pipe_with_data`], but only RX/TX pipes: for
    /// applications that send what they receive in place
    /// ([`Device::send_and_free`]) and want the pipe as an [`RxTxPipe`]
    /// without converting it. RX-only pipes with data are passed over and
    /// stay ready, in their order, for [`Device::next_pipe_with_data`]:
    /// nothing is lost by mixing the two calls. If every ready pipe is
    /// RX-only it polls once more for RX/TX pipes before returning `None`.
    pub fn next_rxtx_pipe_with_data(&mut self) -> Result<Option<RxTxPipe>, DeviceError> {
        let idx = self.next_ready(true)?;
        Ok(idx.map(|idx| RxTxPipe(RxPipe { dev: self.uid, idx })))
    }

    /// The index of the next ready pipe with data (RX/TX pipes only if
    /// `rxtx_only`); see [`Device::next_pipe_with_data`].
    fn next_ready(&mut self, rxtx_only: bool) -> Result<Option<u32>, DeviceError> {
        // A pipe returned before but not fully consumed stays ready: its NIC
        // notification was used up, so nothing else would bring it back.
        if let Some(i) = self.last_ready.take() {
            self.enqueue_ready(i);
        }
        let mut polled = self.ready_len == 0;
        if polled {
            self.poll()?;
        }
        loop {
            // One lap of the ready pipes: RX-only pipes passed over go back
            // to the end, so the lap ends where it started.
            let mut lap = self.ready_len;
            while lap > 0 {
                lap -= 1;
                let idx = self.ready[self.ready_head] as usize;
                self.ready_head = (self.ready_head + 1) % self.ready.len();
                self.ready_len -= 1;
                let p = &mut self.pipes[idx];
                p.queued = false;
                if p.tail.wrapping_sub(p.consumed) & p.mask == 0 {
                    continue;
                }
                if rxtx_only && !p.rxtx {
                    self.enqueue_ready(idx);
                    continue;
                }
                if self.prefetch {
                    let next = (idx + 1) % self.pipes.len();
                    self.prefetch_idx(next)?;
                }
                self.last_ready = Some(idx);
                return Ok(Some(idx as u32));
            }
            // Only RX-only pipes were ready: new notifications may name an
            // RX/TX pipe.
            if !rxtx_only || polled {
                return Ok(None);
            }
            polled = true;
            self.poll()?;
        }
    }

    /// Queues pipe `idx` for `next_pipe_with_data` if it has unconsumed data
    /// and is not queued yet.
    #[inline]
    pub(super) fn enqueue_ready(&mut self, idx: usize) {
        let p = &mut self.pipes[idx];
        let mask = p.mask;
        if !p.queued && p.tail.wrapping_sub(p.consumed) & mask != 0 {
            p.queued = true;
            let cap = self.ready.len();
            self.ready[(self.ready_head + self.ready_len) % cap] = idx as u32;
            self.ready_len += 1;
        }
    }

    pub(super) fn prefetch_idx(&mut self, idx: usize) -> Result<(), DeviceError> {
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
}

impl Device {
    /// Blocks until one of this handle's pipes or descriptor queues has
    /// data, or a send this handle posted completes, or `timeout` passes;
    /// returns whether there is something to take (then call
    /// [`Device::poll`], [`Device::recv`] or `rx_burst`, which never
    /// block). A loop that would otherwise spin on an idle NIC calls it
    /// between empty polls (C: `enso_wait`).
    ///
    /// The NIC wakes the handle after any step that did work while the
    /// handle sleeps (the protocol of `enso_abi::wake`), so a wait ends at
    /// most one engine step after the data is there; the wake-up may also
    /// come for another handle's data, when this returns `false` early. A
    /// NIC driven by hand (`Device::attach_engine`) wakes nobody: the wait
    /// then lasts `timeout`, or ends at once when data is already there.
    pub fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, DeviceError> {
        // Completions already there are taken now, so that they do not
        // count as something to wake for.
        self.reap_completions()?;
        if self.has_work() {
            return Ok(true);
        }
        let seq = self.app_sleeper().prepare();
        // After the announcement (fence W1): work the NIC wrote before it
        // saw the announcement is seen here; work it writes after, it
        // wakes us for.
        if self.has_work() {
            self.app_sleeper().done();
            return Ok(true);
        }
        self.stats.waits += 1;
        enso_abi::wake::wait(self.app_sleeper().word(), seq, timeout);
        self.app_sleeper().done();
        Ok(self.has_work())
    }

    /// Whether a poll would find something: pipes already known to have
    /// data, an RX notification, a completed send, or a received frame in
    /// one of its descriptor queues. Only loads; nothing is consumed.
    fn has_work(&self) -> bool {
        if self.ready_len > 0 {
            return true;
        }
        // Acquire as in `take` (SYNC POINT C): whatever it names is visible.
        if self
            .rx_notif(self.rx_head)
            .signal
            .load(std::sync::atomic::Ordering::Acquire)
            == enso_abi::layout::signal::DATA
        {
            return true;
        }
        if self.tx_inflight > 0 && self.tx_notif(self.tx_done).completed(None) {
            return true;
        }
        self.pkt_rx_ready()
    }
}
