//! Every number the performance model uses, each with where it comes from.
//!
//! None of these is fitted to the paper's results (its Table 1, its echo
//! and notification figures, its PCIe measurements): those are held out
//! and only compared with at the end. What the paper contributes here is
//! the description of its testbed (clock, PCIe generation and width,
//! Ethernet rate). `pcie_model::PacketizedParams::E810_FIT` is fitted to
//! the paper's PCIe measurements, so it is deliberately *not* used.

use pcie_model::{LinkConfig, PacketizedParams};
use serde::Serialize;

/// One named parameter: value, unit, source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Param {
    /// Short name, as in the model's code.
    pub name: &'static str,
    /// Its value.
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
    /// Where it comes from.
    pub source: &'static str,
}

/// The PCIe link of both NICs in the paper: PCIe 3.0 x16 (the Ensō NIC
/// is a Stratix 10 MX board with a Gen3 x16 interface; the E810 is a Gen4
/// card but the server's slots are PCIe 3.0), MPS 256, MRRS 512, RCB 64.
pub const LINK: LinkConfig = LinkConfig::GEN3_X16;

/// 100 Gb Ethernet, both NICs.
pub const LINE_RATE_GBPS: f64 = 100.0;

/// Wire bytes per frame beyond the frame in host memory: FCS 4, preamble
/// and start delimiter 8, minimum inter-frame gap 12.
pub const ETH_OVERHEAD_BYTES: f64 = 24.0;

/// The paper's application core: Intel Core i9-9960X at 3.1 GHz base,
/// frequency scaling off.
pub const PAPER_CPU_GHZ: f64 = 3.1;

/// Nanoseconds of application time measured on the development machine
/// are taken as nanoseconds on the paper's core (scale 1.0). Not measured:
/// the virtual machines do not expose a reliable clock, and no paper
/// result is used to set it.
pub const HOST_NS_SCALE: f64 = 1.0;

/// Ensō notifications and TX completions are 64 B (one flit).
pub const NOTIFICATION_BYTES: u32 = 64;

/// Per-packet notification mode forces one RX notification per packet
/// (a hardware switch on the real NIC); TX batching stays as measured.
pub const PER_PACKET_K_RX: f64 = 1.0;

/// The packetized baseline as the paper ran it: DPDK's defaults on the
/// E810 (32 B RX descriptors, 16 B TX descriptors, descriptors fetched
/// four at a time, each RX descriptor written back on its own, refill,
/// TX burst and RS thresholds of 32). The pcie-bench worked example.
pub const PACKETIZED: PacketizedParams = PacketizedParams::DPDK_DEFAULT;

/// Goodput bytes of a 64 B packet: the frame without its FCS, 60 B, as
/// EnsōGen counts it (148.8 Mpps of 64 B frames is 100 Gb/s with 24 B of
/// overhead each).
pub const GOODPUT_BYTES_64: f64 = 60.0;

/// Application costs are taken from threaded runs whose cross-core probe
/// says the two cores share a last-level cache but not a physical core
/// (round trip in this range, ns): a line the emulated NIC writes then
/// reaches the application from the shared cache, as a DDIO write does on
/// the paper's server. Below it the two are hyperthreads of one core,
/// above it they are on different dies.
pub const SHARED_LLC_PROBE_NS: (f64, f64) = (60.0, 150.0);

/// KV rows: the paper's MICA client batches requests; the row with 4
/// requests per frame (the bench's default) stands for it.
pub const KV_BATCH: u64 = 4;

/// Where the application costs come from by default (under
/// `docs/results/`): the newest checked-in runs whose rows were measured
/// with the cores sharing a last-level cache ([`SHARED_LLC_PROBE_NS`]).
pub const ECHO_COSTS: &str = "echo-2026-11-25a";
/// See [`ECHO_COSTS`].
pub const APPS_COSTS: &str = "apps-2026-11-22h";

/// The model's parameters, for printing.
pub fn all() -> Vec<Param> {
    let gen3 = "paper's testbed: Ensō NIC and host on PCIe 3.0 x16";
    let pb = "pcie-bench (SIGCOMM'18) TLP accounting, as in pcie-model";
    let dpdk = "DPDK defaults on the E810 (the paper's baseline configuration)";
    vec![
        Param {
            name: "pcie_gen",
            value: 3.0,
            unit: "generation",
            source: gen3,
        },
        Param {
            name: "pcie_lanes",
            value: f64::from(LINK.lanes),
            unit: "lanes",
            source: gen3,
        },
        Param {
            name: "pcie_tlp_gbps",
            value: LINK.tlp_gbps(),
            unit: "Gb/s per direction",
            source: "8 GT/s x16, 128b/130b, less DLLP and SKIP overhead (pcie-bench)",
        },
        Param {
            name: "mps",
            value: f64::from(LINK.mps),
            unit: "B",
            source: "max payload size, typical host setting (pcie-bench)",
        },
        Param {
            name: "mrrs",
            value: f64::from(LINK.mrrs),
            unit: "B",
            source: "max read request size, typical host setting (pcie-bench)",
        },
        Param {
            name: "rcb",
            value: f64::from(LINK.rcb),
            unit: "B",
            source: "read completion boundary (pcie-bench)",
        },
        Param {
            name: "tlp_request_overhead",
            value: f64::from(pcie_model::MEM_REQUEST_OVERHEAD),
            unit: "B",
            source: pb,
        },
        Param {
            name: "tlp_completion_overhead",
            value: f64::from(pcie_model::COMPLETION_OVERHEAD),
            unit: "B",
            source: pb,
        },
        Param {
            name: "doorbell_bytes",
            value: f64::from(pcie_model::DOORBELL_BYTES),
            unit: "B",
            source: "4 B register write + 24 B request overhead (pcie-bench)",
        },
        Param {
            name: "line_rate",
            value: LINE_RATE_GBPS,
            unit: "Gb/s",
            source: "paper's testbed: 100 Gb Ethernet on both NICs",
        },
        Param {
            name: "eth_overhead",
            value: ETH_OVERHEAD_BYTES,
            unit: "B per frame",
            source: "IEEE 802.3: FCS 4 + preamble/SFD 8 + inter-frame gap 12",
        },
        Param {
            name: "cpu_clock",
            value: PAPER_CPU_GHZ,
            unit: "GHz",
            source: "paper's testbed: Core i9-9960X, 3.1 GHz base, no frequency scaling",
        },
        Param {
            name: "host_ns_scale",
            value: HOST_NS_SCALE,
            unit: "paper ns per measured ns",
            source: "assumption (the VM's clock is not exposed); not fitted",
        },
        Param {
            name: "notification_bytes",
            value: f64::from(NOTIFICATION_BYTES),
            unit: "B",
            source: "Ensō NIC: 64 B RX notifications and TX completions",
        },
        Param {
            name: "per_packet_k_rx",
            value: PER_PACKET_K_RX,
            unit: "packets per RX notification",
            source: "Ensō per-packet notification mode (hardware switch)",
        },
        Param {
            name: "packetized_d_rx",
            value: f64::from(PACKETIZED.d_rx),
            unit: "B",
            source: dpdk,
        },
        Param {
            name: "packetized_d_tx",
            value: f64::from(PACKETIZED.d_tx),
            unit: "B",
            source: dpdk,
        },
        Param {
            name: "packetized_writeback_per_tlp",
            value: f64::from(PACKETIZED.w),
            unit: "descriptors",
            source: dpdk,
        },
        Param {
            name: "packetized_fetch_per_read",
            value: f64::from(PACKETIZED.f_rx),
            unit: "descriptors",
            source: dpdk,
        },
        Param {
            name: "packetized_thresholds",
            value: f64::from(PACKETIZED.refill_threshold),
            unit: "packets (refill, TX burst, RS)",
            source: dpdk,
        },
        Param {
            name: "goodput_bytes_64",
            value: GOODPUT_BYTES_64,
            unit: "B per 64 B packet",
            source: "EnsōGen's goodput: frame without FCS (148.8 Mpps x 84 B = 100 Gb/s)",
        },
        Param {
            name: "shared_llc_probe_min",
            value: SHARED_LLC_PROBE_NS.0,
            unit: "ns",
            source: "placement rule for cost sources: below, the vCPUs are hyperthreads",
        },
        Param {
            name: "shared_llc_probe_max",
            value: SHARED_LLC_PROBE_NS.1,
            unit: "ns",
            source: "placement rule for cost sources: above, the vCPUs are on different dies",
        },
        Param {
            name: "kv_batch",
            value: KV_BATCH as f64,
            unit: "requests per frame",
            source: "MICA's client batches requests; the bench's default batch",
        },
    ]
}
