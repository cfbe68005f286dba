//! `tap:NAME`: a port whose peer is the kernel's network stack, through a
//! TAP device the NIC creates (no packet-info header, no offloads). The
//! interface exists while the device runs; it is created up, in the
//! network namespace the NIC runs in (a test may move it to another).
//! A TAP device takes one system call a frame (about 1 Mpps a core), so
//! its reads and writes run on an I/O thread of their own
//! ([`super::io_thread::tap_thread`]).

use serde::{Deserialize, Serialize};

use super::io_thread::{FrameQueue, FrameSource, IoCounters, IoThread};
use super::{Backend, BackendError};
use crate::wire::MAX_FRAME;

/// Frames each queue between the engine and the TAP thread holds.
const QUEUE_FRAMES: usize = 4096;

/// A port wired to a TAP device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TapWire {
    /// The interface's name (at most 15 bytes).
    pub name: String,
}

/// A port wired to a TAP device.
#[derive(Debug)]
pub struct TapPort {
    name: String,
    to_tap: FrameQueue,
    from_tap: FrameSource,
    thread: Option<IoThread>,
    counters: std::sync::Arc<IoCounters>,
    buf: Box<[u8]>,
    tx_queue_full: u64,
    /// The port's MAC (the kernel's end has its own).
    pub mac: [u8; 6],
}

impl TapPort {
    /// Creates the TAP device and brings it up.
    pub fn open(w: &TapWire, mac: [u8; 6]) -> Result<Self, BackendError> {
        let tap = rawsock::Tap::create(&w.name)
            .map_err(|e| BackendError::Open(format!("tap:{}: {e}", w.name)))?;
        tap.set_up()
            .map_err(|e| BackendError::Open(format!("tap:{}: {e}", w.name)))?;
        let name = tap.name().to_string();
        let (to_tap, from_tap, thread, counters) = super::io_thread::tap_thread(tap, QUEUE_FRAMES)?;
        Ok(Self {
            name,
            to_tap,
            from_tap,
            thread: Some(thread),
            counters,
            buf: vec![0u8; MAX_FRAME].into_boxed_slice(),
            tx_queue_full: 0,
            mac,
        })
    }
}

impl Backend for TapPort {
    fn describe(&self) -> String {
        format!("tap:{}", self.name)
    }

    fn receive(&mut self, _now: u64, budget: usize, deliver: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < budget {
            let Some((len, _)) = self.from_tap.pop(&mut self.buf) else {
                break;
            };
            deliver(&self.buf[..len]);
            n += 1;
        }
        n
    }

    fn transmit(&mut self, frame: &[u8], now: u64) {
        if !self.to_tap.push(frame, now) {
            self.tx_queue_full += 1;
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("kernel_rx_frames", self.counters.in_frames()),
            ("kernel_tx_frames", self.counters.frames()),
        ]
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("tx_queue_full", self.tx_queue_full),
            ("rx_queue_full", self.counters.in_queue_full()),
            ("io_errors", self.counters.errors()),
        ]
    }

    fn finish(&mut self) {
        if let Some(t) = self.thread.take() {
            t.join();
        }
    }
}
