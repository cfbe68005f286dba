//! PCIe transaction-layer accounting and the closed-form bytes-per-packet
//! model of a NIC interface.
//!
//! A NIC's throughput for small packets is often bounded not by Ethernet
//! but by PCIe: every transfer is cut into TLPs, each TLP carries 20-24
//! bytes of headers and framing, and a descriptor-ring interface adds
//! descriptor fetches, write-backs and doorbells around each packet. This
//! crate counts those bytes, following the model of pcie-bench
//! (Neugebauer et al., SIGCOMM'18).
//!
//! # The model
//!
//! * **Link** ([`LinkConfig`]): generation, width, MPS, MRRS, RCB. Its raw
//!   rate is GT/s x lanes x 128/130; ACK and flow-control DLLPs and SKIP
//!   ordered sets take a further share, leaving [`LinkConfig::tlp_gbps`]
//!   (113.7 Gb/s per direction for Gen3 x16) for TLPs.
//! * **TLPs** ([`tlp`]): a memory write or read request with a 64-bit
//!   address costs 24 B beyond its payload, a completion with data 20 B
//!   (both including 6 B of data-link layer and 2 B of framing). DMA writes
//!   are cut at MPS boundaries, read requests at MRRS boundaries and
//!   completions at RCB boundaries, all aligned to the host address. A
//!   doorbell is a 4 B register write: 28 B.
//! * **Directions** ([`Direction`]): *up* is device to host (DMA writes and
//!   read requests), *down* is host to device (read completions and the
//!   CPU's register writes). PCIe is full duplex, so each direction has the
//!   whole TLP bandwidth and the busier one limits the packet rate.
//! * **Classes** ([`TrafficClass`]): data, notifications (Ensō),
//!   descriptors (descriptor rings) and registers. Everything but data is
//!   *metadata*; [`PcieCounters::metadata_fraction`] is the share of link
//!   bytes it takes. [`PcieCounters::overhead_bytes`] additionally counts
//!   the headers of data TLPs.
//!
//! # Two ways to use it
//!
//! 1. **Accounting.** A NIC model owns a [`PcieCounters`] built for its link
//!    and calls [`record_dma_write`](PcieCounters::record_dma_write),
//!    [`record_dma_read`](PcieCounters::record_dma_read) and
//!    [`record_mmio_write`](PcieCounters::record_mmio_write) for every
//!    transfer it performs or receives, with the real host address and
//!    length. This is integer arithmetic only, cheap enough for every
//!    transfer on the datapath.
//! 2. **Closed form** ([`model`]): [`PacketizedParams`] and [`EnsoParams`]
//!    give average link bytes per packet in steady state, and
//!    [`max_rate_mpps`] the rate that PCIe and Ethernet allow.
//!
//! The two agree exactly when the accounting is fed the transfers the
//! closed form assumes (see the crate's tests), so the closed form is a
//! check on the emulator and the emulator measures what the closed form
//! cannot: the actual batching (`k_rx`) that arises under a given load.
//!
//! # Predicting real hardware
//!
//! Run a workload on the emulated NIC, divide the counters by the number
//! of packets ([`PcieCounters::per_packet`]) and feed the result to
//! [`pcie_max_rate_mpps`] for the link of interest: that is the rate at
//! which the real interface would saturate PCIe, independently of how fast
//! the emulation itself runs. [`PcieCounters::utilisation`] tells whether a
//! measured rate would have fitted on the real link at all.
//!
//! Frame sizes in the closed form are host bytes, i.e. without the 4 B FCS
//! the NIC strips and appends (a 64 B packet is 60 B on PCIe); see
//! [`model`].
//!
//! Known simplifications, shared with pcie-bench: payloads are counted in
//! bytes, not rounded to 4 B words (at most 3 B per TLP at each end);
//! completers are assumed to return one completion per RCB block, never
//! merging them; no ECRC, no replays, no interrupts (Ensō and DPDK poll);
//! DLLPs are paced at the specification's recommended rate. Memory-side
//! counters (e.g. Intel PCM's "PCIe read/write bandwidth") count payload,
//! usually in 64 B lines, not link bytes; compare them with
//! [`ClassCounters::payload_bytes`].

#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod counters;
pub mod link;
pub mod model;
pub mod tlp;

pub use counters::{ClassCounters, Direction, DirectionCounters, PcieCounters, TrafficClass};
pub use link::{LinkConfig, LinkConfigError, ParseLinkError, PcieGen};
pub use model::{
    ethernet_max_rate_mpps, host_frame_bytes, max_rate_mpps, max_rate_mpps_100g,
    pcie_max_rate_mpps, BytesPerPacket, EnsoParams, PacketizedParams, ETH_100G_GBPS,
};
pub use tlp::{COMPLETION_OVERHEAD, DOORBELL_BYTES, MEM_REQUEST_OVERHEAD};
