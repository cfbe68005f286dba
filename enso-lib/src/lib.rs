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
//! # Concepts
//!
//! * A **flit** is 64 bytes, the unit pipes count in; frames start on flit
//!   boundaries.
//! * A **pipe** is a ring the NIC writes received frames into, back to
//!   back. The NIC writes at its **tail**; software reads from its **head**
//!   and hands bytes back by writing the head ([`Device::free`]). One flit
//!   is kept free; a full pipe drops whole frames (counted).
//! * The **notification buffer** of a handle holds its RX notifications
//!   ("pipe P's tail is now T", at most one outstanding per pipe, the next
//!   one brought by a head write) and its TX notifications (what to send,
//!   and configuration). [`Device::prefetch`] asks for a pipe's latest tail.
//! * **RX/TX pipes** send received bytes back in place
//!   ([`Device::send_and_free`]); **TX pipes** are rings to build frames in.
//! * **Fallback** pipes receive what no flow rule ([`Device::bind`])
//!   matches, shared by flow hash or round robin.
//! * [`RxBatch`] is what [`Device::recv`] returns: the bytes count as
//!   consumed and stay unfreed until freed or sent (see its documentation:
//!   dropping it frees nothing).
//! * Every operation has its own error type; all convert into [`Error`], so
//!   an application can use `?` with `Result<_, enso::Error>`.
//!
//! # A first application
//!
//! An echo server against a device in another process, started with
//! `nic-emu run --name dev0 --port generator:echo=0,inflight=256`:
//!
//! ```no_run
//! use enso::{Device, DeviceOptions};
//!
//! fn main() -> Result<(), enso::Error> {
//!     let mut dev = Device::open("dev0", DeviceOptions::default())?;
//!     let pipe = dev.alloc_rxtx_pipe(true)?; // a fallback pipe: all traffic
//!     loop {
//!         let bytes = dev.recv(pipe)?.len(); // everything received, as one slice
//!         if bytes == 0 {
//!             dev.check_alive()?;
//!             continue;
//!         }
//!         dev.send_and_free(pipe, bytes)?; // back out in place; freed on completion
//!     }
//! }
//! ```
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
//! # Examples
//!
//! `enso-lib/examples/` (each takes `--device NAME` or `--in-process`, and
//! `--json`; `enso-lib/README.md` says more): `echo` (RX/TX pipes,
//! [`Device::next_rxtx_pipe_with_data`]), `l2_forward` (port 0 to port 1
//! with MAC addresses swapped), `capture` (to a pcap file),
//! `flow_and_fallback` (a bound flow and a fallback pipe), `rate` (a rate
//! loop at full speed) and `stepped` (a stepped engine, which runs the NIC
//! only when the caller steps it: deterministic, for tests and profiles).

#![warn(missing_docs)]

pub mod app;
pub mod batch;
pub mod device;
pub mod error;
pub mod hint;
pub mod packetized;
mod shared;
pub mod socket;

pub use app::{DriverError, DriverStats, EnsoDriver, PacketHandler, PacketizedDriver, Verdict};
pub use batch::{FrameSpan, Frames, Packets, PacketsMut, RxBatch};
pub use device::{
    Device, DeviceOptions, DeviceStats, FlowRule, PipeDrops, PortDrops, PortStats, RxPipe,
    RxTxPipe, TxHalf, TxPipe, MAX_FLOW_RULES, PARK_AFTER,
};
pub use enso_abi::timestamp::{TsFormat, NS_PER_CYCLE};
pub use error::*;
pub use packetized::{Mbuf, QueueId, QueueStats};

/// Ensō's default timestamp offset (`kDefaultRttOffset`, what its
/// `enable_device_timestamp` uses when given none): bytes 18..22 of a frame,
/// the IPv4 identification and fragment fields.
pub const DEFAULT_RTT_OFFSET: u8 = 18;

/// The round-trip time, in nanoseconds, that a port with timestamping on
/// wrote into `frame` at `offset` in `format`; `None` if the frame is too
/// short to hold it. With [`TsFormat::Enso`] this is Ensō's `get_pkt_rtt`
/// (a big-endian count of 5 ns cycles) converted to nanoseconds.
pub fn rtt_ns(frame: &[u8], offset: usize, format: TsFormat) -> Option<u64> {
    let b: [u8; 4] = frame.get(offset..offset.checked_add(4)?)?.try_into().ok()?;
    Some(format.rtt_ns(b))
}
