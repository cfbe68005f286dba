//! PCIe accounting: in controlled scenarios the emulator's link-byte counts
//! equal the closed-form model of FACTS §3 exactly, for both interfaces.

use enso::{Device, PacketizedDriver};
use enso_tests::*;
use nic_emu::{Engine, GeneratorConfig, SizeSpec, VerifyLevel};
use pcie_model::{EnsoParams, LinkConfig, PacketizedParams};

/// Expected totals for `packets` packets at `bpp` bytes per packet.
fn close(measured: u64, per_packet: f64, packets: u64) -> bool {
    (measured as f64 - per_packet * packets as f64).abs() < 1e-6 * measured as f64 + 0.5
}

#[test]
fn enso_echo_with_k_packets_per_notification_matches_the_model() {
    for k in [1u64, 4, 8, 32] {
        let rounds = 400;
        let g = GeneratorConfig {
            count: Some(k * (rounds + 3)),
            sizes: SizeSpec::Fixed(64),
            burst: k as usize,
            verify: VerifyLevel::Sequence,
            paused: true,
            ..Default::default()
        };
        let (mut cfg, _d) = generator_device("pcie-enso", g);
        // The scenario needs every register write applied in the next step.
        cfg.tuning.register_poll_flits = 0;
        let mut e = Engine::new(cfg).unwrap();
        let mut dev = Device::attach_engine(&mut e, opts(1)).unwrap();
        dev.set_prefetch(false);
        let pipe = dev.alloc_rxtx_pipe(true).unwrap();
        e.run_until_idle(10);
        e.set_generators_paused(false);
        // Each round: (A) k frames arrive while the previous batch's
        // notification is still outstanding (no notification), and the NIC
        // sends the previous batch back; the application reclaims that
        // completion and writes the pipe head; (B) the head write finds the
        // new k frames pending and notifies them at once: k per RX
        // notification; the application sends them in one TX notification.
        let round = |e: &mut Engine, dev: &mut Device, check: bool| {
            e.set_generators_paused(false);
            e.step();
            e.set_generators_paused(true);
            dev.reap_completions().unwrap();
            e.step();
            let n = echo_pipe(dev, pipe) as u64;
            if check {
                assert_eq!(n, k, "k={k}: {:?}", e.stats().drops());
            }
        };
        for _ in 0..3 {
            round(&mut e, &mut dev, false);
        }
        e.reset_pcie();
        for _ in 0..rounds {
            round(&mut e, &mut dev, true);
        }
        // The first measured step sent the warm-up's last batch back; the
        // last round's batch would go back in one more step.
        let s = e.stats();
        let packets = k * rounds;
        let model = EnsoParams {
            k_rx: k as f64,
            k_tx: k as f64,
            notification_bytes: 64,
        }
        .bytes_per_packet(&LinkConfig::default(), 64);
        let (up, down) = (s.pcie.up.total().link_bytes, s.pcie.down.total().link_bytes);
        assert!(
            close(up, model.up, packets),
            "k={k}: up {up} vs {}",
            model.up * packets as f64
        );
        assert!(
            close(down, model.down, packets),
            "k={k}: down {down} vs {}",
            model.down * packets as f64
        );
    }
}

#[test]
fn packetized_echo_with_full_bursts_matches_the_model() {
    for w in [1u32, 4] {
        let rounds = 300u64;
        let g = GeneratorConfig {
            count: Some(32 * (rounds + 40)),
            sizes: SizeSpec::Fixed(64),
            burst: 32,
            verify: VerifyLevel::Sequence,
            paused: true,
            ..Default::default()
        };
        let (mut cfg, _d) = generator_device("pcie-pkt", g);
        cfg.desc_writeback = w;
        cfg.desc_fetch = 4;
        // The scenario needs every doorbell applied in the next step.
        cfg.tuning.register_poll_flits = 0;
        let mut e = Engine::new(cfg).unwrap();
        let dev = Device::attach_engine(&mut e, pkt_opts(1, 1024)).unwrap();
        let mut d = PacketizedDriver::new(dev, 32);
        d.add_rss_queues_on(0, 1).unwrap();
        e.run_until_idle(10);
        e.set_generators_paused(false);
        let mut h = echo_handler;
        let mut round = |e: &mut Engine, d: &mut PacketizedDriver| {
            e.step();
            assert_eq!(d.poll(&mut h).unwrap(), 32);
        };
        // Warm up until the TX ring has wrapped into RS-driven reclaim.
        for _ in 0..40 {
            round(&mut e, &mut d);
        }
        e.reset_pcie();
        for _ in 0..rounds {
            round(&mut e, &mut d);
        }
        // The doorbells of the last round would be applied by one more step,
        // just as the first measured step applied the warm-up's last ones.
        let s = e.stats();
        let packets = 32 * rounds;
        let model = PacketizedParams {
            d_rx: 16,
            d_tx: 16,
            w,
            f_rx: 4,
            f_tx: 4,
            refill_threshold: 32,
            tx_burst: 32,
            rs_threshold: 32,
        }
        .bytes_per_packet(&LinkConfig::default(), 64);
        let (up, down) = (s.pcie.up.total().link_bytes, s.pcie.down.total().link_bytes);
        assert!(
            close(up, model.up, packets),
            "w={w}: up {up} vs {}",
            model.up * packets as f64
        );
        assert!(
            close(down, model.down, packets),
            "w={w}: down {down} vs {}",
            model.down * packets as f64
        );
        // Metadata is a large share for the packetized interface.
        assert!(
            s.pcie.metadata_fraction() > 0.25,
            "{}",
            s.pcie.metadata_fraction()
        );
    }
}
