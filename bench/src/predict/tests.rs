use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn ethernet_and_wire_rates_match_the_standard() {
    // 100 Gb/s over (60 + 24) * 8 bits.
    assert!(close(ethernet_mpps(60), 148.809_5, 1e-3));
    assert!(close(wire_gbps(ethernet_mpps(60), 60), 100.0, 1e-9));
    // 1518 B: 100e3 / (1538 * 8).
    assert!(close(ethernet_mpps(1514), 8.127_4, 1e-3));
}

#[test]
fn the_pcie_bench_worked_example() {
    // Packetized, DPDK defaults, 64 B (s = 60): ~177 B up, ~145 B down.
    let p = packetized_bytes(60);
    assert_eq!(p.up, 177.25);
    assert_eq!(p.down, 144.75);
    let (rate, dir) = pcie_mpps(p);
    // 113.7 Gb/s / 8 / 177.25 B = 80.2 Mpps, bound by the up direction.
    assert!((79.5..81.0).contains(&rate), "{rate}");
    assert_eq!(dir, "pcie_up");
    // Ensō, k = 32: up 64+24 + 88/32 + 24/32 + 4*24/32 + 88/32 = 97.25;
    // down 84/32 + 64 + 32*20/32 + 28*3/32 = 89.25.
    let e = enso_bytes(32.0, 32.0, 60);
    assert_eq!(e.up, 97.25);
    assert_eq!(e.down, 89.25);
    let (rate, dir) = pcie_mpps(e);
    assert!((145.0..149.0).contains(&rate), "{rate}");
    assert_eq!(dir, "pcie_up");
}

#[test]
fn memory_side_bytes_are_payloads_only() {
    // Packetized: written 60 + 32 + 16/32; read 32 + 16 + 60 + 4/32 + 4/32.
    assert_eq!(packetized_payload(60), (92.5, 108.25));
    // Ensō k = 32: written 64 + 64/32 + 64/32; read 64/32 + 64 + 4*3/32.
    assert_eq!(enso_payload(32.0, 32.0, 60), (68.0, 66.375));
}

#[test]
fn the_lowest_limit_wins_and_names_itself() {
    assert_eq!(
        lowest(&[
            (148.8, "ethernet"),
            (80.2, "pcie_up"),
            (f64::INFINITY, "core")
        ]),
        (80.2, "pcie_up".to_string())
    );
    assert_eq!(core_rate(10.0), 100.0);
}

fn inputs() -> Inputs {
    Inputs {
        sizes: vec![SizeCounts {
            wire_size: 64,
            frame_bytes: 60,
            k_rx: 128.0,
            k_tx: 32.0,
            enso_measured: enso_bytes(128.0, 32.0, 60),
            packetized_measured: packetized_bytes(60),
        }],
        echo: Some(EchoCost {
            enso_ns: 5.0,
            packetized_ns: 20.0,
            probe_rtt_ns: 80.0,
            source: "x".into(),
        }),
        apps: vec![AppCost {
            app: "maglev".into(),
            variant: "16 flows".into(),
            unit: "packets".into(),
            enso_ns: 10.0,
            packetized_ns: 50.0,
            bits_per_unit: 512.0,
            probe_rtt_ns: 80.0,
            source: "x".into(),
        }],
        skipped: vec![],
    }
}

#[test]
fn predictions_take_the_lowest_limit_and_compare_with_the_paper() {
    let r = report(inputs());
    let get = |m: &str| r.rows.iter().find(|x| x.metric == m).unwrap().clone();
    // Ensō echo: Ethernet (148.8) below PCIe (k = 128) and core (200).
    let e = get("echo_enso_64B_1core");
    assert_eq!(e.bound_by, "ethernet");
    assert!(close(e.error.unwrap(), 148.8095 / 148.8 - 1.0, 1e-4));
    // Packetized echo: the core (50 Mpps) below PCIe (80.2).
    let p = get("echo_packetized_64B_1core");
    assert_eq!((p.predicted, p.bound_by.as_str()), (50.0, "core"));
    assert!(close(p.error.unwrap(), 50.0 / 59.0 - 1.0, 1e-12));
    // Maglev: Ensō 100 Mpps (core), packetized 20 (core).
    assert_eq!(get("maglev_enso_1core").predicted, 100.0);
    assert_eq!(get("maglev_packetized_1core").predicted, 20.0);
    // Per-packet notifications at 64 B: PCIe-bound well below line rate
    // and above the k = 1 rate of both directions batched by one.
    let pp = get("per_packet_ceiling_64B");
    assert!(pp.bound_by.starts_with("pcie"), "{pp:?}");
    assert!((30.0..70.0).contains(&pp.predicted), "{pp:?}");
    assert!(close(get("reactive_ceiling_64B").predicted, 100.0, 1e-9));
    // The misses list names exactly the rows more than 15% off.
    let off = r
        .rows
        .iter()
        .filter(|x| x.within_15pct == Some(false))
        .count();
    assert_eq!(off, r.misses.len());
    assert!(r.misses.iter().any(|m| m.starts_with("maglev_enso_1core")));
    assert!(r.rows.iter().filter(|x| x.paper.is_some()).count() >= 8);
    assert_eq!(
        r.held_out.len(),
        r.rows.iter().filter(|x| x.paper.is_some()).count()
    );
}

#[test]
fn the_k_sweep_follows_the_papers_values() {
    let r = report(inputs());
    for (k, paper) in PAPER_ENSO_RATE_VS_K {
        let row = r
            .rows
            .iter()
            .find(|x| x.metric == format!("pcie_enso_64B_k{k}"))
            .unwrap();
        assert_eq!(row.paper, Some(paper));
        assert!(row.error.unwrap().abs() < 0.15, "{row:?}");
    }
}

#[test]
fn every_parameter_names_a_source() {
    for p in params::all() {
        assert!(p.source.len() > 10, "{p:?}");
        assert!(p.value.is_finite(), "{p:?}");
    }
}
