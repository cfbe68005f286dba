//! The closed-form bytes-per-packet model of a descriptor-ring NIC and of
//! Ensō, and the packet rate a link can carry.
//!
//! # Frame size convention
//!
//! `s` everywhere below is the frame as it crosses PCIe: the Ethernet frame
//! *without* its 4 B FCS, which the NIC strips on receive and appends on
//! transmit. A "64 B packet" is therefore `s = 60`; use
//! [`host_frame_bytes`] to convert. The Ethernet limit adds the FCS back,
//! with the preamble and inter-frame gap: `s + 24` bytes of wire time.

use serde::{Deserialize, Serialize};

use crate::link::LinkConfig;
use crate::tlp::{COMPLETION_OVERHEAD, DOORBELL_BYTES, MEM_REQUEST_OVERHEAD};

/// Ethernet frame check sequence, present on the wire but not in host
/// memory.
pub const ETH_FCS_BYTES: u32 = 4;

/// Wire bytes per frame beyond the host-visible frame: FCS (4), preamble
/// and start delimiter (8), minimum inter-frame gap (12).
pub const ETH_OVERHEAD_BYTES: u32 = 24;

/// 100 Gigabit Ethernet line rate in Gb/s.
pub const ETH_100G_GBPS: f64 = 100.0;

/// Bytes of a frame in host memory (and on PCIe) for a wire frame of
/// `wire_frame_bytes` including the FCS: 64 gives 60.
pub const fn host_frame_bytes(wire_frame_bytes: u32) -> u32 {
    wire_frame_bytes.saturating_sub(ETH_FCS_BYTES)
}

/// Average link bytes per packet in each direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BytesPerPacket {
    /// Device to host.
    pub up: f64,
    /// Host to device.
    pub down: f64,
}

impl BytesPerPacket {
    /// `(up, down)`.
    pub const fn as_tuple(self) -> (f64, f64) {
        (self.up, self.down)
    }

    /// Packet rate (Mpps) the link sustains in the busier direction,
    /// ignoring Ethernet: `min(B_tlp/up, B_tlp/down)`.
    pub fn pcie_max_mpps(self, link: &LinkConfig) -> f64 {
        pcie_max_rate_mpps(link, self.up, self.down)
    }
}

impl From<BytesPerPacket> for (f64, f64) {
    fn from(b: BytesPerPacket) -> (f64, f64) {
        b.as_tuple()
    }
}

fn ceil_div(a: u64, b: u32) -> f64 {
    a.div_ceil(u64::from(b)) as f64
}

/// Parameters of a descriptor-ring ("packetized") NIC and its driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketizedParams {
    /// RX descriptor size in bytes (`d_rx`).
    pub d_rx: u32,
    /// TX descriptor size in bytes (`d_tx`).
    pub d_tx: u32,
    /// RX descriptors written back per TLP (`w`).
    pub w: u32,
    /// RX descriptors fetched per read (`f_rx`).
    pub f_rx: u32,
    /// TX descriptors fetched per read (`f_tx`).
    pub f_tx: u32,
    /// Free RX descriptors the driver collects before one RX tail write
    /// (`F`, DPDK's rx_free_thresh).
    pub refill_threshold: u32,
    /// Packets per TX tail write (`T`, the TX burst).
    pub tx_burst: u32,
    /// TX descriptors per "report status" write-back (`R`, DPDK's
    /// tx_rs_thresh).
    pub rs_threshold: u32,
}

impl PacketizedParams {
    /// DPDK defaults on a NIC that writes back every RX descriptor on its
    /// own: 32 B RX and 16 B TX descriptors, 4 descriptors per fetch,
    /// thresholds of 32. The paper's worked example.
    pub const DPDK_DEFAULT: PacketizedParams = PacketizedParams {
        d_rx: 32,
        d_tx: 16,
        w: 1,
        f_rx: 4,
        f_tx: 4,
        refill_threshold: 32,
        tx_burst: 32,
        rs_threshold: 32,
    };

    /// The parameters that best fit the paper's E810 measurements: 16 B RX
    /// descriptors, four written back per TLP (the E810 coalesces
    /// write-backs); the rest as [`PacketizedParams::DPDK_DEFAULT`].
    pub const E810_FIT: PacketizedParams = PacketizedParams {
        d_rx: 16,
        w: 4,
        ..PacketizedParams::DPDK_DEFAULT
    };

    /// An ixgbe-style NIC: 16 B RX descriptors, each written back alone;
    /// the rest as [`PacketizedParams::DPDK_DEFAULT`].
    pub const IXGBE: PacketizedParams = PacketizedParams {
        d_rx: 16,
        ..PacketizedParams::DPDK_DEFAULT
    };

    /// Link bytes per packet for frames of `s` host bytes (no FCS) on
    /// `link`, when a core both receives and sends every packet (echo):
    ///
    /// ```text
    /// up   = S + ceil(S/MPS)*24                          RX data write
    ///      + (d_rx*w + 24)/w                             RX write-back
    ///      + 24/f_rx + 24/f_tx                           descriptor fetch requests
    ///      + ceil(S/MRRS)*24                             TX data read request
    ///      + (d_tx + 24)/R                               TX write-back
    /// down = (d_rx*f_rx + ceil(d_rx*f_rx/RCB)*20)/f_rx   RX descriptor fetch
    ///      + (d_tx*f_tx + ceil(d_tx*f_tx/RCB)*20)/f_tx   TX descriptor fetch
    ///      + S + ceil(S/RCB)*20                          TX data completions
    ///      + 28/F + 28/T                                 RX and TX tail doorbells
    /// ```
    ///
    /// with MPS, MRRS and RCB taken from `link` (256, 512, 64 by default).
    /// Where a batch of descriptors could exceed one TLP (`d_rx*w > MPS`,
    /// `d*f > MRRS`) the single 24 B header generalises to one per TLP, so
    /// the formula above is exact whenever those batches fit, as they do
    /// for every preset.
    pub fn bytes_per_packet(&self, link: &LinkConfig, s: u32) -> BytesPerPacket {
        let s64 = u64::from(s);
        let s_f = f64::from(s);
        let req = f64::from(MEM_REQUEST_OVERHEAD);
        let cpl = f64::from(COMPLETION_OVERHEAD);
        let bell = f64::from(DOORBELL_BYTES);
        let (d_rx, d_tx) = (u64::from(self.d_rx), u64::from(self.d_tx));
        let (w, f_rx, f_tx) = (self.w, self.f_rx, self.f_tx);

        let rx_data = s_f + ceil_div(s64, link.mps) * req;
        let wb_bytes = d_rx * u64::from(w);
        let rx_writeback = (wb_bytes as f64 + ceil_div(wb_bytes, link.mps) * req) / f64::from(w);
        let rx_fetch_bytes = d_rx * u64::from(f_rx);
        let tx_fetch_bytes = d_tx * u64::from(f_tx);
        let fetch_requests = ceil_div(rx_fetch_bytes, link.mrrs) * req / f64::from(f_rx)
            + ceil_div(tx_fetch_bytes, link.mrrs) * req / f64::from(f_tx);
        let tx_data_request = ceil_div(s64, link.mrrs) * req;
        let tx_writeback =
            (d_tx as f64 + ceil_div(d_tx, link.mps) * req) / f64::from(self.rs_threshold);
        let up = rx_data + rx_writeback + fetch_requests + tx_data_request + tx_writeback;

        let rx_fetch =
            (rx_fetch_bytes as f64 + ceil_div(rx_fetch_bytes, link.rcb) * cpl) / f64::from(f_rx);
        let tx_fetch =
            (tx_fetch_bytes as f64 + ceil_div(tx_fetch_bytes, link.rcb) * cpl) / f64::from(f_tx);
        let tx_data = s_f + ceil_div(s64, link.rcb) * cpl;
        let doorbells = bell / f64::from(self.refill_threshold) + bell / f64::from(self.tx_burst);
        let down = rx_fetch + tx_fetch + tx_data + doorbells;

        BytesPerPacket { up, down }
    }
}

/// Parameters of Ensō's interface.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnsoParams {
    /// Packets per RX notification (`k_rx`). Not a setting: whatever
    /// arrives between two head writes of a pipe (about 1 at low load,
    /// large at saturation; per-packet notification mode forces 1). May be
    /// fractional as an average.
    pub k_rx: f64,
    /// Packets per TX notification (`k_tx`).
    pub k_tx: f64,
    /// Notification size in bytes (`N`, 64 on the real NIC).
    pub notification_bytes: u32,
}

impl EnsoParams {
    /// Per-packet notifications in both directions (the paper's baseline
    /// notification mode).
    pub const PER_PACKET: EnsoParams = EnsoParams::batched(1.0);

    /// The paper's saturated operating point: 32 packets per notification.
    pub const BATCH_32: EnsoParams = EnsoParams::batched(32.0);

    /// `k` packets per RX and per TX notification, 64 B notifications.
    pub const fn batched(k: f64) -> EnsoParams {
        EnsoParams {
            k_rx: k,
            k_tx: k,
            notification_bytes: 64,
        }
    }

    /// Link bytes per packet for frames of `s` host bytes (no FCS) on
    /// `link`, echoing every packet. With `S64 = 64*ceil(S/64)` (each frame
    /// starts on a flit boundary) and `N` the notification size:
    ///
    /// ```text
    /// up   = S64 + ceil(S64/MPS)*24                  RX data write
    ///      + (N + 24)/k_rx                           RX notification
    ///      + 24/k_tx                                 TX notification read request
    ///      + ceil(k_tx*S64/MRRS)*24/k_tx             TX data read requests
    ///      + (N + 24)/k_tx                           TX completion write-back
    /// down = (N + ceil(N/RCB)*20)/k_tx               TX notification completion
    ///      + S64 + ceil(k_tx*S64/RCB)*20/k_tx        TX data completions
    ///      + 28*(2/k_rx + 1/k_tx)                    two head writes per RX batch,
    ///                                                one tail write per TX batch
    /// ```
    ///
    /// with MPS, MRRS and RCB from `link` (256, 512, 64 by default; the
    /// flit stays 64 B whatever the RCB). A notification larger than MPS
    /// (or MRRS) would need one header per TLP, which is taken into
    /// account; the formula above is exact for notifications up to MPS.
    pub fn bytes_per_packet(&self, link: &LinkConfig, s: u32) -> BytesPerPacket {
        let s64 = u64::from(s).div_ceil(64) * 64;
        let s64_f = s64 as f64;
        let n = u64::from(self.notification_bytes);
        let n_f = n as f64;
        let req = f64::from(MEM_REQUEST_OVERHEAD);
        let cpl = f64::from(COMPLETION_OVERHEAD);
        let bell = f64::from(DOORBELL_BYTES);
        let (k_rx, k_tx) = (self.k_rx, self.k_tx);
        let tx_span = k_tx * s64_f;

        let rx_data = s64_f + ceil_div(s64, link.mps) * req;
        let notification_write = n_f + ceil_div(n, link.mps) * req;
        let rx_notification = notification_write / k_rx;
        let tx_notification_request = ceil_div(n, link.mrrs) * req / k_tx;
        let tx_data_requests = (tx_span / f64::from(link.mrrs)).ceil() * req / k_tx;
        let tx_completion = notification_write / k_tx;
        let up =
            rx_data + rx_notification + tx_notification_request + tx_data_requests + tx_completion;

        let tx_notification_read = (n_f + ceil_div(n, link.rcb) * cpl) / k_tx;
        let tx_data = s64_f + (tx_span / f64::from(link.rcb)).ceil() * cpl / k_tx;
        let doorbells = bell * (2.0 / k_rx + 1.0 / k_tx);
        let down = tx_notification_read + tx_data + doorbells;

        BytesPerPacket { up, down }
    }
}

/// Packet rate in Mpps that `link` can carry when each packet costs `up`
/// and `down` link bytes: `min(B_tlp/up, B_tlp/down)`.
pub fn pcie_max_rate_mpps(link: &LinkConfig, up: f64, down: f64) -> f64 {
    let per_sec = link.tlp_bytes_per_sec() / 1e6;
    (per_sec / up).min(per_sec / down)
}

/// Packet rate in Mpps of an Ethernet link of `line_rate_gbps` for frames
/// of `s` host bytes (no FCS): `line_rate / ((s + 24) * 8)`. 100 GbE with
/// 64 B frames (`s = 60`) gives 148.81 Mpps.
pub fn ethernet_max_rate_mpps(line_rate_gbps: f64, s: u32) -> f64 {
    line_rate_gbps * 1e3 / (f64::from(s + ETH_OVERHEAD_BYTES) * 8.0)
}

/// The rate both links allow, in Mpps:
/// `min(B_tlp/up, B_tlp/down, line_rate/((s + 24)*8))`, with `s` the
/// frame's host bytes (no FCS).
pub fn max_rate_mpps(link: &LinkConfig, line_rate_gbps: f64, s: u32, up: f64, down: f64) -> f64 {
    pcie_max_rate_mpps(link, up, down).min(ethernet_max_rate_mpps(line_rate_gbps, s))
}

/// [`max_rate_mpps`] on 100 GbE.
pub fn max_rate_mpps_100g(link: &LinkConfig, s: u32, per_packet: BytesPerPacket) -> f64 {
    max_rate_mpps(link, ETH_100G_GBPS, s, per_packet.up, per_packet.down)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_frame_drops_the_fcs() {
        assert_eq!(host_frame_bytes(64), 60);
        assert_eq!(host_frame_bytes(1518), 1514);
        assert_eq!(host_frame_bytes(2), 0);
    }

    #[test]
    fn exact_terms_for_dpdk_default_at_60_bytes() {
        let b = PacketizedParams::DPDK_DEFAULT.bytes_per_packet(&LinkConfig::default(), 60);
        // 60 + 24 + 56 + 6 + 6 + 24 + 40/32
        assert_eq!(b.up, 177.25);
        // 168/4 + 84/4 + 60 + 20 + 28/32 + 28/32
        assert_eq!(b.down, 144.75);
    }

    #[test]
    fn exact_terms_for_enso_batch_32() {
        let b = EnsoParams::BATCH_32.bytes_per_packet(&LinkConfig::default(), 60);
        // 64 + 24 + 88/32 + 24/32 + 4*24/32 + 88/32
        assert_eq!(b.up, 97.25);
        // 84/32 + 64 + 640/32 + 28*3/32
        assert_eq!(b.down, 89.25);
    }

    #[test]
    fn large_descriptor_batches_pay_one_header_per_tlp() {
        let link = LinkConfig::default();
        let small = PacketizedParams {
            w: 8,
            ..PacketizedParams::DPDK_DEFAULT
        };
        let big = PacketizedParams {
            w: 16, // 512 B of write-backs: two TLPs at MPS 256
            ..PacketizedParams::DPDK_DEFAULT
        };
        let diff = small.bytes_per_packet(&link, 60).up - big.bytes_per_packet(&link, 60).up;
        // w=8: (256+24)/8 = 35; w=16: (512+48)/16 = 35. No gain past MPS.
        assert!(diff.abs() < 1e-12, "{diff}");
    }

    #[test]
    fn tuple_conversion_keeps_order() {
        let b = BytesPerPacket { up: 1.0, down: 2.0 };
        let (up, down): (f64, f64) = b.into();
        assert_eq!((up, down), (1.0, 2.0));
    }
}
