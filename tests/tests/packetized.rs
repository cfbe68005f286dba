//! The packetized (descriptor-ring) interface end to end.

use std::sync::atomic::Ordering;

use enso::{Device, PacketizedDriver};
use enso_tests::*;
use nic_emu::engine::AttachRequest;
use nic_emu::layout::{self, config, desc, reg};
use nic_emu::testframe::FrameKind;
use nic_emu::{Engine, GeneratorConfig, SizeSpec, WireConfig};

fn run(e: &mut Engine, d: &mut PacketizedDriver, max_steps: usize) {
    let mut h = echo_handler;
    for i in 0..max_steps {
        e.step();
        for _ in 0..4 {
            d.poll(&mut h).unwrap();
        }
        if i % 64 == 0 && e.generators_finished() {
            let s = e.stats();
            if s.generator(0).unwrap().in_flight() <= s.total_drops() {
                e.run_until_idle(100);
                d.dev.tx_reclaim_all();
                return;
            }
        }
    }
}

#[test]
fn packetized_echo_mixed_sizes_four_rss_queues() {
    let g = GeneratorConfig {
        count: Some(300_000),
        sizes: SizeSpec::Range(60, 1518),
        kinds: vec![FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw],
        flows: 64,
        max_in_flight: Some(256),
        ..Default::default()
    };
    let (cfg, _d) = generator_device("pkt-echo", g);
    let mut e = Engine::new(cfg).unwrap();
    let dev = Device::attach_engine(&mut e, pkt_opts(4, 512)).unwrap();
    let mut d = PacketizedDriver::new(dev, 32);
    let qs = d.add_rss_queues_on(0, 4).unwrap();
    run(&mut e, &mut d, 10_000_000);
    let s = e.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(s.total_drops(), 0, "{:?}", s.drops());
    assert_eq!(
        (g.sent, g.returned, g.corrupt, g.duplicate),
        (300_000, 300_000, 0, 0)
    );
    // Every queue carried traffic; software and NIC agree on the counts.
    let nic_rx: u64 = s.queue_sum(|q| q.rx_frames);
    assert_eq!(nic_rx, 300_000);
    for q in &qs {
        assert!(d.dev.queue_stats(*q).unwrap().rx_packets > 30_000);
    }
    // No buffer leaked: every one is free or posted in a ring.
    let (free, total) = d.dev.pool_usage();
    assert_eq!(free + d.dev.buffers_in_rings(), total);
}

#[test]
fn small_rings_wrap_many_times_without_leaks() {
    let g = GeneratorConfig {
        count: Some(200_000),
        sizes: SizeSpec::Fixed(64),
        max_in_flight: Some(32),
        burst: 16,
        ..Default::default()
    };
    let (cfg, _d) = generator_device("pkt-wrap", g);
    let mut e = Engine::new(cfg).unwrap();
    let dev = Device::attach_engine(&mut e, pkt_opts(1, 64)).unwrap();
    let mut d = PacketizedDriver::new(dev, 32);
    d.add_rss_queues_on(0, 1).unwrap();
    run(&mut e, &mut d, 10_000_000);
    let s = e.stats();
    let g = s.generator(0).unwrap();
    assert_eq!((g.returned, g.corrupt, s.total_drops()), (200_000, 0, 0));
    let (free, total) = d.dev.pool_usage();
    assert_eq!(free + d.dev.buffers_in_rings(), total);
    assert!(
        d.stats.frames / 64 > 3000,
        "rings wrapped {} times",
        d.stats.frames / 64
    );
}

#[test]
fn hostile_descriptors_are_refused_and_others_unaffected() {
    // Port 0 carries the victim's traffic, port 1 the attacker's.
    let victim_gen = GeneratorConfig {
        count: Some(100_000),
        max_in_flight: Some(128),
        ..Default::default()
    };
    let attacker_gen = GeneratorConfig {
        stream: 1,
        burst: 8,
        ..Default::default()
    };
    let (mut cfg, _d) = generator_device("pkt-hostile", victim_gen);
    cfg.ports.push(WireConfig::Generator(attacker_gen));
    let mut e = Engine::new(cfg).unwrap();
    let dev = Device::attach_engine(&mut e, pkt_opts(1, 256)).unwrap();
    let mut victim = PacketizedDriver::new(dev, 32);
    victim.add_rss_queues_on(0, 1).unwrap();

    // The attacker: raw shared memory, one descriptor queue on port 1.
    let mut raw = RawApp::attach(
        &mut e,
        AttachRequest {
            pipes: 0,
            dma_bytes: 4 << 20,
            desc_queues: 1,
        },
    );
    let info = raw.info.clone();
    let (tx_notif_ring, rx_ring, tx_ring) = (0x1000usize, 0x10000usize, 0x20000usize);
    let dq = layout::DESC_QUEUE_BASE + info.desc_queue_base;
    let nb = layout::NBUF_QUEUE_BASE + info.nbuf_id;
    let mut rng = Rng(77);
    // RX descriptors: half outside the region, half inside but hostile.
    for i in 0..256 {
        let addr = if i % 2 == 0 {
            rng.next_u64()
        } else {
            (rng.next_u64() % (info.dma_len as u64 - 4096)) + 64
        };
        raw.desc(rx_ring + i * 16)
            .qw0
            .store(addr, Ordering::Relaxed);
        raw.desc(rx_ring + i * 16).qw1.store(0, Ordering::Relaxed);
    }
    let bits = 1 | 8 << desc::LOG2_SHIFT; // port 1, 256 entries
    raw.write(layout::reg_addr(dq, reg::RX_MEM_LOW), rx_ring as u32 | bits);
    raw.write(layout::reg_addr(dq, reg::RX_MEM_HIGH), 0);
    raw.write(layout::reg_addr(dq, reg::RX_TAIL), 255);
    // Make the queue a fallback target of port 1 through a configuration
    // notification.
    raw.write(layout::reg_addr(nb, reg::TX_MEM_LOW), tx_notif_ring as u32);
    raw.write(layout::reg_addr(nb, reg::TX_MEM_HIGH), 0);
    let n = raw.tx_notif(tx_notif_ring);
    n.config_id.store(config::FALLBACK, Ordering::Relaxed);
    n.args[0].store(config::FALLBACK_ADD, Ordering::Relaxed);
    n.args[1].store(
        (layout::DESC_TARGET_BASE + info.desc_queue_base) as u64,
        Ordering::Relaxed,
    );
    n.signal.store(layout::signal::CONFIG, Ordering::Relaxed);
    raw.write(layout::reg_addr(nb, reg::TX_TAIL), 1);
    // TX descriptors with random addresses, lengths and flags.
    for i in 0..256 {
        raw.desc(tx_ring + i * 16).qw0.store(
            rng.next_u64() % (2 * info.dma_len as u64),
            Ordering::Relaxed,
        );
        raw.desc(tx_ring + i * 16)
            .qw1
            .store(rng.next_u64() & 0x0fff_ffff, Ordering::Relaxed);
    }
    raw.write(layout::reg_addr(dq, reg::TX_MEM_LOW), tx_ring as u32 | bits);
    raw.write(layout::reg_addr(dq, reg::TX_MEM_HIGH), 0);
    raw.write(layout::reg_addr(dq, reg::TX_TAIL), 255);

    run(&mut e, &mut victim, 5_000_000);
    let s = e.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(
        (g.returned, g.corrupt, g.duplicate),
        (100_000, 0, 0),
        "{:?}",
        s.drops()
    );
    let a = s.apps.iter().find(|a| a.app_id == info.app_id).unwrap();
    let qc = &a.queues[0].counters;
    assert!(qc.drop_bad_descriptor >= 100, "{qc:?}");
    assert!(qc.tx_bad_descriptor >= 100, "{qc:?}");
    assert_eq!(
        a.counters.reject_bad_descriptor,
        qc.drop_bad_descriptor + qc.tx_bad_descriptor
    );
    let v = s.apps.iter().find(|a| a.app_id != info.app_id).unwrap();
    assert_eq!(v.counters.reject_bad_descriptor, 0);
}

#[test]
fn rx_write_backs_carry_the_flow_hash() {
    let g = GeneratorConfig {
        count: Some(64),
        flows: 16,
        ..Default::default()
    };
    let (cfg, _d) = generator_device("pkt-hash", g);
    let mut e = Engine::new(cfg).unwrap();
    let mut dev = Device::attach_engine(&mut e, pkt_opts(1, 256)).unwrap();
    let q = dev.alloc_queue(0, true).unwrap();
    let mut got = Vec::new();
    for _ in 0..100 {
        e.step();
        dev.rx_burst(q, &mut got, 64).unwrap();
    }
    assert_eq!(got.len(), 64);
    let mut hashes = std::collections::HashSet::new();
    for m in &got {
        let nic_emu::wire::SteerKey::Ipv4 { tuple, .. } =
            nic_emu::wire::steer_key(dev.mbuf_data(m))
        else {
            panic!("an IPv4 test frame");
        };
        assert_eq!(m.rss_hash(), nic_emu::wire::hash_tuple(&tuple));
        hashes.insert(m.rss_hash());
    }
    assert_eq!(hashes.len(), 16, "one hash per flow");
    dev.free_mbufs(got);
}
