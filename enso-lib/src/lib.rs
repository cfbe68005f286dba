//! The application side of the Ensō streaming interface, and of the
//! packetized (descriptor-ring) baseline. It speaks to the NIC only
//! through the shared-memory contract of `enso-abi`, and links no part of
//! the emulator (`nic-emu`), which the examples below run in process.
//!
//! A [`Device`] is one thread's handle on a NIC: it owns a notification
//! buffer and the pipes (or descriptor queues) it allocates.
//!
//! * **Ensō pipes.** RX pipes receive frames back to back in a ring
//!   ([`Device::recv`] returns them as one contiguous [`RxBatch`], even when
//!   the data wraps); RX/TX pipes send received bytes back in place
//!   ([`Device::send_and_free`]); TX pipes send from a ring of their own
//!   ([`Device::tx_buf`], then [`Device::send`]). Traffic reaches a pipe
//!   through flow rules ([`Device::bind`]) or as a fallback pipe.
//!   [`Device::next_pipe_with_data`] walks pipes in notification order and
//!   can prefetch notifications.
//! * **Packetized queues** ([`packetized`]), shaped like DPDK: a pool of
//!   2 KiB buffers ([`Mbuf`]), [`Device::rx_burst`] and
//!   [`Device::tx_burst`] over descriptor rings. Set
//!   [`DeviceOptions::queues`] and [`DeviceOptions::pool_buffers`].
//! * **One body of logic on both** ([`app`]): a [`PacketHandler`] sees one
//!   frame at a time and returns a [`Verdict`]; [`EnsoDriver`] runs it over
//!   RX/TX pipes, [`PacketizedDriver`] over descriptor queues.
//!
//! A device runs in another process (`nic-emu run --name dev0`, then
//! [`Device::open`]) or in this one (`nic_emu::Nic::start`, then
//! [`Device::attach_nic`]). A device that stops (or whose process exits)
//! is reported by [`Device::check_alive`] as [`DeviceError::Gone`]; a loop
//! that may wait for traffic forever should call it now and then.
//!
//! # Echo over Ensō pipes
//!
//! An in-process NIC whose port 0 is its built-in generator: it sends
//! 64 B test frames and checks each one that comes back has its echo byte
//! (`nic_emu::testframe::FrameKind::echo_offset`, byte 58 of an IPv4/UDP
//! test frame) incremented. It starts paused, so that no frame arrives
//! before the pipe that receives it exists (the NIC would drop it as
//! matching nothing), and keeps at most 64 frames in flight.
//!
//! ```
//! use enso::{Device, DeviceOptions};
//! use nic_emu::testframe::FrameKind;
//! use nic_emu::{DeviceConfig, GeneratorConfig, Nic, RunOptions, WireConfig};
//!
//! let generator = GeneratorConfig {
//!     count: Some(1000),
//!     max_in_flight: Some(64),
//!     paused: true,
//!     ..Default::default()
//! };
//! let name = format!("doc-echo-{}", std::process::id());
//! let nic = Nic::start(DeviceConfig::new(name, WireConfig::Generator(generator)),
//!                      RunOptions::default())?;
//! let mut dev = Device::attach_nic(&nic, DeviceOptions::default())?;
//! let pipe = dev.alloc_rxtx_pipe(true)?; // a fallback pipe: gets all traffic
//! nic.with_engine(|e| e.set_generators_paused(false));
//! let echo = FrameKind::Ipv4Udp.echo_offset();
//! let mut echoed = 0;
//! while echoed < 1000 {
//!     let n = {
//!         let mut batch = dev.recv(pipe)?;
//!         for pkt in batch.packets_mut() {
//!             if let Some(b) = pkt.get_mut(echo) {
//!                 *b = b.wrapping_add(1);
//!             }
//!             echoed += 1;
//!         }
//!         batch.len()
//!     };
//!     dev.send_and_free(pipe, n)?;
//!     dev.check_alive()?;
//! }
//! drop(dev);
//! let stats = nic.stop();
//! let g = stats.generator(0).expect("port 0 is the generator");
//! assert_eq!((g.sent, g.corrupt), (1000, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # One handler on both interfaces
//!
//! ```
//! use enso::{Device, DeviceOptions, EnsoDriver, PacketizedDriver, Verdict};
//! use nic_emu::testframe::FrameKind;
//! use nic_emu::{DeviceConfig, GeneratorConfig, Nic, RunOptions, WireConfig};
//!
//! let echo = FrameKind::Ipv4Udp.echo_offset();
//! let mut handler = |frame: &mut [u8]| match frame.get_mut(echo) {
//!     Some(b) => {
//!         *b = b.wrapping_add(1);
//!         Verdict::Forward
//!     }
//!     None => Verdict::Drop,
//! };
//! for packetized in [false, true] {
//!     let generator = GeneratorConfig {
//!         count: Some(500),
//!         max_in_flight: Some(64),
//!         paused: true,
//!         ..Default::default()
//!     };
//!     let name = format!("doc-handler-{}-{packetized}", std::process::id());
//!     let nic = Nic::start(DeviceConfig::new(name, WireConfig::Generator(generator)),
//!                          RunOptions::default())?;
//!     let opts = DeviceOptions { queues: 1, rx_ring: 256, tx_ring: 256, pool_buffers: 1024,
//!                                ..Default::default() };
//!     let dev = Device::attach_nic(&nic, opts)?;
//!     let start = |nic: &Nic| nic.with_engine(|e| e.set_generators_paused(false));
//!     let frames = if packetized {
//!         let mut d = PacketizedDriver::new(dev, 32);
//!         d.add_rss_queues_on(0, 1)?;
//!         start(&nic);
//!         while d.stats.frames < 500 { d.poll(&mut handler)?; }
//!         d.stats.forwarded
//!     } else {
//!         let mut d = EnsoDriver::new(dev);
//!         d.add_fallback_pipes(1)?;
//!         start(&nic);
//!         while d.stats.frames < 500 { d.poll(&mut handler)?; }
//!         d.stats.forwarded
//!     };
//!     assert_eq!(frames, 500);
//!     nic.stop();
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The `examples` directory has a rate loop ([`Device::attach_nic`] with a
//! generator at full speed) and a stepped engine, which runs the NIC only
//! when the caller steps it (deterministic, for tests and profiles).

#![warn(missing_docs)]

pub mod app;
pub mod batch;
pub mod device;
pub mod error;
pub mod hint;
pub mod packetized;
mod shared;

pub use app::{DriverError, DriverStats, EnsoDriver, PacketHandler, PacketizedDriver, Verdict};
pub use batch::{Packets, PacketsMut, RxBatch};
pub use device::{Device, DeviceOptions, DeviceStats, FlowRule, RxPipe, RxTxPipe, TxPipe};
pub use error::*;
pub use packetized::{Mbuf, QueueId, QueueStats};
