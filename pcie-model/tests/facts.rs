//! The published PCIe figures (pcie-bench and the Ensō paper) reproduced by
//! the model, and the accumulator checked against the closed form.

use pcie_model::{
    ethernet_max_rate_mpps, host_frame_bytes, max_rate_mpps, pcie_max_rate_mpps, BytesPerPacket,
    EnsoParams, LinkConfig, PacketizedParams, PcieCounters, TrafficClass, ETH_100G_GBPS,
};

/// Relative tolerance for published figures, which are rounded.
const REL: f64 = 0.01;

#[track_caller]
fn assert_close(actual: f64, expected: f64) {
    let err = ((actual - expected) / expected).abs();
    assert!(
        err <= REL,
        "{actual} is {:.2}% away from {expected}",
        err * 100.0
    );
}

#[track_caller]
fn assert_exact(actual: BytesPerPacket, expected: BytesPerPacket) {
    assert!(
        (actual.up - expected.up).abs() < 1e-9 && (actual.down - expected.down).abs() < 1e-9,
        "accumulated {actual:?} != closed form {expected:?}"
    );
}

/// Host bytes of a 64 B Ethernet frame.
const S_64: u32 = host_frame_bytes(64);

#[test]
fn tlp_bandwidth_per_direction() {
    assert_close(LinkConfig::GEN3_X16.tlp_gbps(), 113.7);
    assert_close(LinkConfig::GEN3_X8.tlp_gbps(), 57.9);
    assert_close(LinkConfig::GEN4_X16.tlp_gbps(), 227.4);
}

#[test]
fn pcie_limit_for_64_byte_transfers() {
    let link = LinkConfig::GEN3_X16;
    assert_eq!(link.dma_write_bytes(0, 64), 88);
    assert_eq!(link.dma_read_completion_bytes(0, 64), 84);
    assert_close(link.write_payload_gbps(64), 82.7);
    assert_close(link.read_payload_gbps(64), 86.6);
}

#[test]
fn ethernet_100g_at_64_bytes() {
    assert_close(ethernet_max_rate_mpps(ETH_100G_GBPS, S_64), 148.81);
    assert!((ethernet_max_rate_mpps(ETH_100G_GBPS, S_64) - 148.8095).abs() < 1e-3);
}

/// The worked example quotes about 177 B up / 145 B down for a 64 B packet.
/// Those are the formulas evaluated with S = 60: the frame as it crosses
/// PCIe, without the FCS. The same convention makes `(S + 24) * 8` give
/// 100 GbE's 148.81 Mpps.
#[test]
fn worked_example_packetized() {
    let link = LinkConfig::GEN3_X16;
    let b = PacketizedParams::DPDK_DEFAULT.bytes_per_packet(&link, S_64);
    assert_close(b.up, 177.0);
    assert_close(b.down, 145.0);
    assert_close(b.pcie_max_mpps(&link), 80.0);
    assert_close(
        max_rate_mpps(&link, ETH_100G_GBPS, S_64, b.up, b.down),
        80.0,
    );
}

/// Evaluating the formulas with S = 64 (FCS included) misses the quoted
/// figures by more than the tolerance, which is why S is host bytes.
#[test]
fn worked_example_does_not_hold_with_fcs_counted() {
    let link = LinkConfig::GEN3_X16;
    let b = PacketizedParams::DPDK_DEFAULT.bytes_per_packet(&link, 64);
    assert_eq!(b.as_tuple(), (181.25, 148.75));
    assert!((b.up - 177.0) / 177.0 > REL);
    assert!((80.0 - b.pcie_max_mpps(&link)) / 80.0 > REL);
    assert!((148.81 - ethernet_max_rate_mpps(ETH_100G_GBPS, 64)) / 148.81 > REL);
}

#[test]
fn worked_example_enso() {
    let link = LinkConfig::GEN3_X16;
    // S64 is 64 for both conventions, so Ensō's figures do not depend on it.
    for s in [S_64, 64] {
        let b = EnsoParams::BATCH_32.bytes_per_packet(&link, s);
        assert_close(b.up, 97.0);
        assert_close(b.down, 89.0);
        assert_close(b.pcie_max_mpps(&link), 146.1);
        // Ethernet is not the bottleneck at k = 32 ...
        let rate = max_rate_mpps(&link, ETH_100G_GBPS, S_64, b.up, b.down);
        assert_close(rate, 146.1);
    }
    // ... but is at k = 64, where PCIe alone would allow 151 Mpps.
    let b = EnsoParams::batched(64.0).bytes_per_packet(&link, S_64);
    let rate = max_rate_mpps(&link, ETH_100G_GBPS, S_64, b.up, b.down);
    assert_close(rate, 148.81);
}

#[test]
fn enso_pcie_rate_versus_batch() {
    let link = LinkConfig::GEN3_X16;
    let table = [
        (1.0, 45.6),
        (2.0, 71.1),
        (4.0, 98.7),
        (8.0, 122.5),
        (16.0, 137.3),
        (32.0, 146.1),
        (64.0, 151.0),
    ];
    for (k, mpps) in table {
        let b = EnsoParams::batched(k).bytes_per_packet(&link, S_64);
        let rate = pcie_max_rate_mpps(&link, b.up, b.down);
        assert_close(rate, mpps);
        // Up (data and notification writes) is the binding direction.
        assert!(b.up > b.down, "k={k}: {b:?}");
    }
    assert_eq!(EnsoParams::PER_PACKET, EnsoParams::batched(1.0));
}

#[test]
fn packetized_spends_a_far_larger_share_on_metadata() {
    let link = LinkConfig::GEN3_X16;
    let mut pk = PcieCounters::new(link);
    packetized_scenario(&mut pk, &PacketizedParams::DPDK_DEFAULT, S_64, 64);
    let mut enso = PcieCounters::new(link);
    enso_scenario(&mut enso, 32, 64, S_64, 2);
    // Descriptor traffic: up 56 + 6 + 6 + 1.25, down 42 + 21 + 1.75,
    // out of 177.25 + 144.75 per packet.
    assert!((pk.metadata_fraction() - 134.0 / 322.0).abs() < 1e-12);
    // Notifications and registers: up 200/32, down 168/32, out of
    // 97.25 + 89.25 per packet.
    assert!((enso.metadata_fraction() - 11.5 / 186.5).abs() < 1e-12);
}

/// Feeds `counters` the transfers a descriptor-ring NIC makes while it
/// receives and echoes `packets` frames of `s` host bytes, in the steady
/// state the closed form describes. `packets` must be a multiple of every
/// batching parameter.
fn packetized_scenario(counters: &mut PcieCounters, p: &PacketizedParams, s: u32, packets: u64) {
    const RX_RING: u64 = 0x1000_0000;
    const TX_RING: u64 = 0x2000_0000;
    const MBUFS: u64 = 0x4000_0000;
    const MBUF_SIZE: u64 = 2048;
    let (d_rx, d_tx) = (u64::from(p.d_rx), u64::from(p.d_tx));
    let s = u64::from(s);
    for i in 0..packets {
        let mbuf = MBUFS + i * MBUF_SIZE;
        let n = i + 1; // packets handled so far, this one included
                       // Receive: descriptors are fetched ahead, in groups of f_rx.
        if i % u64::from(p.f_rx) == 0 {
            let len = d_rx * u64::from(p.f_rx);
            counters.record_dma_read(TrafficClass::Descriptor, RX_RING + i * d_rx, len);
        }
        counters.record_dma_write(TrafficClass::Data, mbuf, s);
        if n % u64::from(p.w) == 0 {
            let first = n - u64::from(p.w);
            let len = d_rx * u64::from(p.w);
            counters.record_dma_write(TrafficClass::Descriptor, RX_RING + first * d_rx, len);
        }
        if n % u64::from(p.refill_threshold) == 0 {
            counters.record_mmio_write(TrafficClass::Register, 4);
        }
        // Transmit the same buffer back.
        if i % u64::from(p.tx_burst) == 0 {
            // The driver posts a burst and rings the TX tail once.
            counters.record_mmio_write(TrafficClass::Register, 4);
        }
        if i % u64::from(p.f_tx) == 0 {
            let len = d_tx * u64::from(p.f_tx);
            counters.record_dma_read(TrafficClass::Descriptor, TX_RING + i * d_tx, len);
        }
        counters.record_dma_read(TrafficClass::Data, mbuf, s);
        if n % u64::from(p.rs_threshold) == 0 {
            counters.record_dma_write(TrafficClass::Descriptor, TX_RING + i * d_tx, d_tx);
        }
    }
}

/// Feeds `counters` the transfers Ensō makes while it receives and echoes
/// `batches` batches of `k` frames of `s` host bytes, with one RX and one
/// TX notification of `n` bytes per batch.
fn enso_scenario(counters: &mut PcieCounters, k: u64, n: u64, s: u32, batches: u64) {
    const RX_PIPE: u64 = 0x1000_0000;
    const TX_PIPE: u64 = 0x2000_0000;
    const RX_NOTIFICATIONS: u64 = 0x3000_0000;
    const TX_NOTIFICATIONS: u64 = 0x3800_0000;
    let s64 = u64::from(s).div_ceil(64) * 64;
    let mut rx_tail = RX_PIPE;
    for b in 0..batches {
        // k frames land back to back in the pipe, each padded to flits.
        for _ in 0..k {
            counters.record_dma_write(TrafficClass::Data, rx_tail, s64);
            rx_tail += s64;
        }
        // One notification for the batch; software then writes the
        // notification buffer's head and the pipe's head.
        counters.record_dma_write(TrafficClass::Notification, RX_NOTIFICATIONS + b * n, n);
        counters.record_mmio_write(TrafficClass::Register, 4);
        counters.record_mmio_write(TrafficClass::Register, 4);
        // Software posts one TX notification for the batch and writes the
        // TX tail; the NIC reads the notification, then the data, then
        // writes the notification slot back as the completion.
        let slot = TX_NOTIFICATIONS + b * n;
        counters.record_mmio_write(TrafficClass::Register, 4);
        counters.record_dma_read(TrafficClass::Notification, slot, n);
        counters.record_dma_read(TrafficClass::Data, TX_PIPE + b * k * s64, k * s64);
        counters.record_dma_write(TrafficClass::Notification, slot, n);
    }
}

const SIZES: [u32; 6] = [60, 124, 252, 508, 1020, 1514];

#[test]
fn accumulator_reproduces_packetized_closed_form() {
    let link = LinkConfig::GEN3_X16;
    let presets = [
        PacketizedParams::DPDK_DEFAULT,
        PacketizedParams::E810_FIT,
        PacketizedParams::IXGBE,
        PacketizedParams {
            w: 2,
            f_rx: 8,
            f_tx: 16,
            refill_threshold: 64,
            tx_burst: 16,
            rs_threshold: 64,
            ..PacketizedParams::DPDK_DEFAULT
        },
    ];
    for p in presets {
        for s in SIZES {
            let packets = 128;
            let mut c = PcieCounters::new(link);
            packetized_scenario(&mut c, &p, s, packets);
            assert_exact(c.per_packet(packets), p.bytes_per_packet(&link, s));
            // Every data byte crossed once in each direction.
            assert_eq!(c.up.data.payload_bytes, packets * u64::from(s));
            assert_eq!(c.down.data.payload_bytes, packets * u64::from(s));
        }
    }
}

#[test]
fn accumulator_reproduces_enso_closed_form() {
    for link in [LinkConfig::GEN3_X16, LinkConfig::GEN4_X16] {
        for k in [1u64, 2, 4, 8, 16, 32, 64] {
            for s in SIZES {
                let batches = 3;
                let mut c = PcieCounters::new(link);
                enso_scenario(&mut c, k, 64, s, batches);
                let closed = EnsoParams::batched(k as f64).bytes_per_packet(&link, s);
                assert_exact(c.per_packet(k * batches), closed);
            }
        }
    }
}

#[test]
fn accumulator_tracks_link_sizes() {
    // With MPS 128 and MRRS 256 both sides cut differently and still agree.
    let link = LinkConfig {
        mps: 128,
        mrrs: 256,
        ..LinkConfig::GEN3_X16
    };
    for s in SIZES {
        let mut c = PcieCounters::new(link);
        enso_scenario(&mut c, 8, 64, s, 2);
        let closed = EnsoParams::batched(8.0).bytes_per_packet(&link, s);
        assert_exact(c.per_packet(16), closed);

        let mut c = PcieCounters::new(link);
        packetized_scenario(&mut c, &PacketizedParams::DPDK_DEFAULT, s, 64);
        let closed = PacketizedParams::DPDK_DEFAULT.bytes_per_packet(&link, s);
        assert_exact(c.per_packet(64), closed);
    }
}

/// The closed form assumes every frame's flits stay within as few MPS
/// blocks as possible. Frames packed back to back in a pipe at sizes that
/// do not divide MPS straddle block boundaries and cost extra write TLPs,
/// which only the accumulator sees.
#[test]
fn packed_frames_straddling_mps_cost_more_than_closed_form() {
    let link = LinkConfig::GEN3_X16;
    let s = 190; // 192 B in the pipe: every other frame crosses a 256 B boundary
    let mut c = PcieCounters::new(link);
    enso_scenario(&mut c, 4, 64, s, 4);
    let measured = c.per_packet(16);
    let closed = EnsoParams::batched(4.0).bytes_per_packet(&link, s);
    assert!((measured.down - closed.down).abs() < 1e-9);
    // 16 frames over 3072 B, 8 of them split across two MPS blocks: 24
    // write TLPs. Up data also carries the TX reads' requests: 2 per batch.
    assert_eq!(c.up.data.tlps, 16 + 8 + 4 * 2);
    assert!((measured.up - closed.up - 8.0 * 24.0 / 16.0).abs() < 1e-9);
}
