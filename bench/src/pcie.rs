//! Experiment: PCIe bytes per packet, data vs metadata, per interface and
//! size, measured on the emulated NIC and predicted by the closed-form model.
//!
//! The datapath is the deterministic stepped echo ([`crate::stepped`]): the
//! same counts on every run. The NIC counts every DMA transfer and register
//! write as PCIe Gen3 x16 TLPs; dividing by the packets echoed gives link
//! bytes per packet, which [`pcie_model`]'s closed form predicts from a few
//! parameters (for Ensō: packets per RX and TX notification, measured here;
//! for the packetized interface: descriptor sizes, fetch and write-back
//! batching, thresholds). From bytes per packet follows the packet rate a
//! real PCIe Gen3 x16 link and 100 GbE would allow, whatever the speed of
//! the emulation.
//!
//! Frame sizes: `pkt_size` is the wire size with FCS (64..1518); the frame
//! crossing PCIe is 4 B shorter (`frame_bytes`, the model's `s`: 60 for a
//! 64 B packet), which is exactly what the generator sends.

use serde::{Deserialize, Serialize};

use pcie_model::{
    ethernet_max_rate_mpps, max_rate_mpps_100g, pcie_max_rate_mpps, BytesPerPacket, EnsoParams,
    LinkConfig, PacketizedParams, ETH_100G_GBPS,
};

use crate::emu::Interface;
use crate::frames;
use crate::stepped::{Stepped, SteppedConfig};

/// Target from the paper (64 B, saturation): at least this share of the
/// packetized interface's PCIe bytes is metadata.
pub const PACKETIZED_METADATA_TARGET: f64 = 0.30;
/// Target from the paper: at most this share of Ensō's is metadata.
pub const ENSO_METADATA_TARGET: f64 = 0.05;

/// How to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PciePlan {
    /// Stepped datapath settings (interface and size are filled per run).
    pub stepped: SteppedConfig,
    /// Packets echoed before counting (the TX ring wraps, pipes settle).
    pub warmup_packets: u64,
    /// Packets counted.
    pub packets: u64,
}

impl Default for PciePlan {
    /// Saturation: the NIC offers two bursts of 32 frames per application
    /// pass, 1 pipe or queue, window 1024.
    fn default() -> Self {
        let mut stepped = SteppedConfig::new(Interface::Enso, 64);
        stepped.steps_per_poll = 2;
        stepped.window = 1024;
        PciePlan {
            stepped,
            warmup_packets: 20_000,
            packets: 100_000,
        }
    }
}

/// Link bytes per packet split by direction and kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Device to host, all.
    pub up: f64,
    /// Host to device, all.
    pub down: f64,
    /// Data TLPs (payload and their headers, read requests for data
    /// included), both directions.
    pub data: f64,
    /// Everything else (notifications, descriptors, registers).
    pub metadata: f64,
}

impl Split {
    /// `metadata / (up + down)`.
    pub fn metadata_fraction(&self) -> f64 {
        self.metadata / (self.up + self.down)
    }
}

/// The model's data bytes per packet (both directions) for the packetized
/// interface: RX data write, TX data read requests and completions. The
/// rest of [`PacketizedParams::bytes_per_packet`] is metadata.
pub fn packetized_data_bytes(link: &LinkConfig, s: u32) -> f64 {
    let s64 = u64::from(s);
    let req = f64::from(pcie_model::MEM_REQUEST_OVERHEAD);
    let cpl = f64::from(pcie_model::COMPLETION_OVERHEAD);
    let up = s as f64
        + s64.div_ceil(u64::from(link.mps)) as f64 * req
        + s64.div_ceil(u64::from(link.mrrs)) as f64 * req;
    let down = s as f64 + s64.div_ceil(u64::from(link.rcb)) as f64 * cpl;
    up + down
}

/// The model's data bytes per packet (both directions) for Ensō with `k_tx`
/// packets per TX notification: RX data write, TX data read requests and
/// completions (frames padded to 64 B flits).
pub fn enso_data_bytes(link: &LinkConfig, s: u32, k_tx: f64) -> f64 {
    let s64 = u64::from(s).div_ceil(64) * 64;
    let req = f64::from(pcie_model::MEM_REQUEST_OVERHEAD);
    let cpl = f64::from(pcie_model::COMPLETION_OVERHEAD);
    let span = k_tx * s64 as f64;
    let up = s64 as f64
        + s64.div_ceil(u64::from(link.mps)) as f64 * req
        + (span / f64::from(link.mrrs)).ceil() * req / k_tx;
    let down = s64 as f64 + (span / f64::from(link.rcb)).ceil() * cpl / k_tx;
    up + down
}

fn split(total: BytesPerPacket, data: f64) -> Split {
    Split {
        up: total.up,
        down: total.down,
        data,
        metadata: total.up + total.down - data,
    }
}

/// What one interface at one size measured and what the model says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieResult {
    /// `enso` or `packetized`.
    pub interface: String,
    /// Wire size with FCS.
    pub pkt_size: usize,
    /// Frame bytes on PCIe (no FCS): the model's `s`.
    pub frame_bytes: u32,
    /// Packets counted.
    pub packets: u64,
    /// Measured link bytes per packet, device to host.
    pub up_bytes_per_pkt: f64,
    /// Measured, host to device.
    pub down_bytes_per_pkt: f64,
    /// Measured data bytes per packet (both directions).
    pub data_bytes_per_pkt: f64,
    /// Measured metadata bytes per packet (both directions).
    pub metadata_bytes_per_pkt: f64,
    /// Measured metadata share of all link bytes.
    pub metadata_fraction: f64,
    /// Ensō: packets per RX notification (measured), the model's k_rx.
    pub k_rx: Option<f64>,
    /// Ensō: packets per TX notification (measured), the model's k_tx.
    pub k_tx: Option<f64>,
    /// The model's bytes per packet, with the parameters in `model_params`.
    pub model_up_bytes_per_pkt: f64,
    /// See `model_up_bytes_per_pkt`.
    pub model_down_bytes_per_pkt: f64,
    /// The model's data bytes per packet.
    pub model_data_bytes_per_pkt: f64,
    /// The model's metadata bytes per packet.
    pub model_metadata_bytes_per_pkt: f64,
    /// The model's metadata share.
    pub model_metadata_fraction: f64,
    /// Measured / model - 1, up and down.
    pub model_error: [f64; 2],
    /// The parameters the model was given.
    pub model_params: serde_json::Value,
    /// Max packet rate on PCIe Gen3 x16 + 100 GbE with the measured bytes.
    pub max_mpps_measured: f64,
    /// The same with the model's bytes.
    pub max_mpps_model: f64,
    /// PCIe Gen3 x16 alone with the measured bytes (no Ethernet limit).
    pub pcie_max_mpps_measured: f64,
    /// 100 GbE line rate at this size.
    pub line_rate_mpps: f64,
    /// The paper's reference parameters at this size: packetized as fitted
    /// to the E810 (d_rx 16, w 4, f 4).
    pub max_mpps_e810_fit: f64,
    /// Packetized with DPDK defaults (d_rx 32, w 1, f 4).
    pub max_mpps_dpdk_default: f64,
    /// Ensō with 32 packets per notification.
    pub max_mpps_enso_k32: f64,
    /// Metadata share of those three reference configurations.
    pub metadata_fraction_e810_fit: f64,
    /// See `metadata_fraction_e810_fit`.
    pub metadata_fraction_dpdk_default: f64,
    /// See `metadata_fraction_e810_fit`.
    pub metadata_fraction_enso_k32: f64,
    /// NIC drops during the run (should be 0).
    pub drops: u64,
}

/// The model's bytes and data split for a packetized configuration.
pub fn packetized_model(link: &LinkConfig, s: u32, p: &PacketizedParams) -> Split {
    split(p.bytes_per_packet(link, s), packetized_data_bytes(link, s))
}

/// The model's bytes and data split for Ensō.
pub fn enso_model(link: &LinkConfig, s: u32, p: &EnsoParams) -> Split {
    split(
        p.bytes_per_packet(link, s),
        enso_data_bytes(link, s, p.k_tx),
    )
}

/// The packetized parameters our NIC and driver use: 16 B descriptors,
/// the device's fetch and write-back batching, DPDK's thresholds of 32.
pub fn our_packetized_params(cfg: &SteppedConfig) -> PacketizedParams {
    PacketizedParams {
        d_rx: 16,
        d_tx: 16,
        w: cfg.desc_writeback,
        f_rx: cfg.desc_fetch,
        f_tx: cfg.desc_fetch,
        refill_threshold: enso::packetized::RX_FREE_THRESH,
        tx_burst: cfg.app_burst as u32,
        rs_threshold: enso::packetized::TX_RS_THRESH,
    }
}

/// Runs one interface at one size.
pub fn measure(
    plan: &PciePlan,
    interface: Interface,
    wire_size: usize,
) -> Result<PcieResult, String> {
    let cfg = SteppedConfig {
        interface,
        wire_size,
        ..plan.stepped.clone()
    };
    let mut s = Stepped::new(cfg.clone())?;
    s.run_packets(plan.warmup_packets)?;
    s.reset_pcie();
    let before = s.stats();
    let packets = s.run_packets(plan.packets)?;
    let after = s.stats();
    let link = after.pcie.link;
    let frame = frames::frame_len_for_wire_size(wire_size) as u32;
    let n = packets as f64;
    let pc = &after.pcie;
    let measured = Split {
        up: pc.up.total().link_bytes as f64 / n,
        down: pc.down.total().link_bytes as f64 / n,
        data: (pc.up.data.link_bytes + pc.down.data.link_bytes) as f64 / n,
        metadata: pc.metadata_bytes() as f64 / n,
    };
    let rx_notif = after.pipe_sum(|c| c.notifications) - before.pipe_sum(|c| c.notifications);
    let tx_notif = after.app_sum(|c| c.tx_notifications) - before.app_sum(|c| c.tx_notifications);
    let (k_rx, k_tx, model, params) = match interface {
        Interface::Enso => {
            let k_rx = n / rx_notif.max(1) as f64;
            let k_tx = n / tx_notif.max(1) as f64;
            let p = EnsoParams {
                k_rx,
                k_tx,
                notification_bytes: 64,
            };
            (
                Some(k_rx),
                Some(k_tx),
                enso_model(&link, frame, &p),
                serde_json::to_value(p).unwrap_or_default(),
            )
        }
        Interface::Packetized => {
            let p = our_packetized_params(&cfg);
            (
                None,
                None,
                packetized_model(&link, frame, &p),
                serde_json::to_value(p).unwrap_or_default(),
            )
        }
    };
    let gen3 = LinkConfig::GEN3_X16;
    let rate = |b: &Split| {
        max_rate_mpps_100g(
            &gen3,
            frame,
            BytesPerPacket {
                up: b.up,
                down: b.down,
            },
        )
    };
    let e810 = packetized_model(&gen3, frame, &PacketizedParams::E810_FIT);
    let dpdk = packetized_model(&gen3, frame, &PacketizedParams::DPDK_DEFAULT);
    let k32 = enso_model(&gen3, frame, &EnsoParams::BATCH_32);
    Ok(PcieResult {
        interface: interface.name().to_string(),
        pkt_size: wire_size,
        frame_bytes: frame,
        packets,
        up_bytes_per_pkt: measured.up,
        down_bytes_per_pkt: measured.down,
        data_bytes_per_pkt: measured.data,
        metadata_bytes_per_pkt: measured.metadata,
        metadata_fraction: measured.metadata_fraction(),
        k_rx,
        k_tx,
        model_up_bytes_per_pkt: model.up,
        model_down_bytes_per_pkt: model.down,
        model_data_bytes_per_pkt: model.data,
        model_metadata_bytes_per_pkt: model.metadata,
        model_metadata_fraction: model.metadata_fraction(),
        model_error: [
            measured.up / model.up - 1.0,
            measured.down / model.down - 1.0,
        ],
        model_params: params,
        max_mpps_measured: rate(&measured),
        max_mpps_model: rate(&model),
        pcie_max_mpps_measured: pcie_max_rate_mpps(&gen3, measured.up, measured.down),
        line_rate_mpps: ethernet_max_rate_mpps(ETH_100G_GBPS, frame),
        max_mpps_e810_fit: rate(&e810),
        max_mpps_dpdk_default: rate(&dpdk),
        max_mpps_enso_k32: rate(&k32),
        metadata_fraction_e810_fit: e810.metadata_fraction(),
        metadata_fraction_dpdk_default: dpdk.metadata_fraction(),
        metadata_fraction_enso_k32: k32.metadata_fraction(),
        drops: after.total_drops(),
    })
}

/// Whether the 64 B results meet the paper's metadata targets, in words
/// (one line per interface measured at 64 B).
pub fn targets(results: &[PcieResult]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for r in results.iter().filter(|r| r.pkt_size == 64) {
        let (ok, want) = match r.interface.as_str() {
            "packetized" => (
                r.metadata_fraction >= PACKETIZED_METADATA_TARGET,
                format!(">= {PACKETIZED_METADATA_TARGET:.2}"),
            ),
            _ => (
                r.metadata_fraction <= ENSO_METADATA_TARGET,
                format!("<= {ENSO_METADATA_TARGET:.2}"),
            ),
        };
        let mut line = format!(
            "{} at 64 B: metadata fraction {:.3} (target {want}): {}",
            r.interface,
            r.metadata_fraction,
            if ok { "met" } else { "NOT met" }
        );
        if let Some(k) = r.k_rx {
            line.push_str(&format!(" with {k:.1} packets per RX notification"));
            let link = LinkConfig::default();
            let at = |k: f64| enso_model(&link, r.frame_bytes, &EnsoParams::batched(k));
            let need =
                (1..=1024).find(|&k| at(f64::from(k)).metadata_fraction() <= ENSO_METADATA_TARGET);
            line.push_str(&format!(
                " (model: {:.3} at k = 32{})",
                at(32.0).metadata_fraction(),
                need.map_or_else(String::new, |k| format!(
                    "; <= {ENSO_METADATA_TARGET:.2} needs k >= {k}"
                ))
            ));
        }
        out.push((line, ok));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_data_split_matches_the_worked_examples() {
        let link = LinkConfig::default();
        // DPDK default at 60 B: up 177.25 = 60+24 (data) + 56 + 6+6 + 24 (data
        // read request) + 1.25; down 144.75 = 42 + 21 + 60+20 (data) + 1.75.
        let d = packetized_model(&link, 60, &PacketizedParams::DPDK_DEFAULT);
        assert_eq!(d.up, 177.25);
        assert_eq!(d.data, 60.0 + 24.0 + 24.0 + 60.0 + 20.0);
        assert!((d.metadata - (56.0 + 12.0 + 1.25 + 42.0 + 21.0 + 1.75)).abs() < 1e-9);
        // Ensō k=32 at 60 B: data up 64+24+4*24/32, down 64+640/32.
        let e = enso_model(&link, 60, &EnsoParams::BATCH_32);
        assert_eq!(e.data, 64.0 + 24.0 + 3.0 + 64.0 + 20.0);
        assert!((e.metadata - (2.75 + 0.75 + 2.75 + 2.625 + 2.625)).abs() < 1e-9);
        assert!((e.metadata_fraction() - 11.5 / 186.5).abs() < 1e-12);
        assert!(d.metadata_fraction() > PACKETIZED_METADATA_TARGET);
    }

    #[test]
    fn targets_are_judged_at_64_bytes_only() {
        let mut r = PcieResult {
            interface: "enso".into(),
            pkt_size: 64,
            frame_bytes: 60,
            packets: 1,
            up_bytes_per_pkt: 0.0,
            down_bytes_per_pkt: 0.0,
            data_bytes_per_pkt: 0.0,
            metadata_bytes_per_pkt: 0.0,
            metadata_fraction: 0.04,
            k_rx: Some(64.0),
            k_tx: Some(64.0),
            model_up_bytes_per_pkt: 0.0,
            model_down_bytes_per_pkt: 0.0,
            model_data_bytes_per_pkt: 0.0,
            model_metadata_bytes_per_pkt: 0.0,
            model_metadata_fraction: 0.0,
            model_error: [0.0; 2],
            model_params: serde_json::Value::Null,
            max_mpps_measured: 0.0,
            max_mpps_model: 0.0,
            pcie_max_mpps_measured: 0.0,
            line_rate_mpps: 0.0,
            max_mpps_e810_fit: 0.0,
            max_mpps_dpdk_default: 0.0,
            max_mpps_enso_k32: 0.0,
            metadata_fraction_e810_fit: 0.0,
            metadata_fraction_dpdk_default: 0.0,
            metadata_fraction_enso_k32: 0.0,
            drops: 0,
        };
        let mut p = r.clone();
        p.interface = "packetized".into();
        p.metadata_fraction = 0.2;
        p.k_rx = None;
        let mut big = r.clone();
        big.pkt_size = 128;
        let t = targets(&[r.clone(), p, big]);
        assert_eq!(t.len(), 2);
        assert!(t[0].1 && t[0].0.contains("met with 64.0 packets"));
        assert!(t[0].0.contains("0.062 at k = 32"), "{}", t[0].0);
        assert!(!t[1].1 && t[1].0.contains("NOT met"));
        r.metadata_fraction = 0.06;
        assert!(!targets(&[r])[0].1);
    }
}
