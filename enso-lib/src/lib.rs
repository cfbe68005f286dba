//! The application side of the Ensō streaming interface, over the emulated
//! NIC of `nic-emu`.
//!
//! A [`Device`] is one thread's handle: it owns a notification buffer and the
//! pipes it allocates. RX pipes receive frames back to back in a ring
//! ([`Device::recv`] returns them as one contiguous [`RxBatch`], even when the
//! data wraps); RX/TX pipes send received bytes back in place
//! ([`Device::send_and_free`]); TX pipes send from a ring of their own.
//! Traffic reaches a pipe through flow rules ([`Device::bind`]) or as a
//! fallback pipe. [`Device::next_pipe_with_data`] walks pipes in notification
//! order and can prefetch notifications.
//!
//! ```no_run
//! use enso::{Device, DeviceOptions};
//! let mut dev = Device::open("dev0", DeviceOptions::default())?;
//! let pipe = dev.alloc_rxtx_pipe(true)?;
//! loop {
//!     let n = {
//!         let mut batch = dev.recv(pipe)?;
//!         for pkt in batch.packets_mut() {
//!             pkt[42] = pkt[42].wrapping_add(1);
//!         }
//!         batch.len()
//!     };
//!     dev.send_and_free(pipe, n)?;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod app;
pub mod batch;
pub mod device;
pub mod error;
pub mod hint;
pub mod packetized;

pub use app::{DriverStats, EnsoDriver, PacketHandler, PacketizedDriver, Verdict};
pub use batch::{Packets, PacketsMut, RxBatch};
pub use device::{Device, DeviceOptions, DeviceStats, FlowRule, RxPipe, RxTxPipe, TxPipe};
pub use error::*;
pub use nic_emu;
pub use packetized::{Mbuf, QueueId, QueueStats};
