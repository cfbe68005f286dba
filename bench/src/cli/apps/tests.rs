use super::*;

#[test]
fn log_pattern_sets_name_services() {
    assert_eq!(services_of("all").unwrap(), Vec::<String>::new());
    assert_eq!(services_of("postfix").unwrap(), ["postfix"]);
    assert_eq!(services_of("sshd+apache").unwrap(), ["sshd", "apache"]);
    assert!(services_of("ftp").unwrap_err().contains("ftp"));
    assert!(services_of("sshd+").is_err());
}

fn round(placement: PlacementClass, speedup: f64) -> RoundOut {
    RoundOut {
        placement,
        probe_before_ns: 0.0,
        probe_after_ns: 0.0,
        enso_rate_m: speedup * 10.0,
        packetized_rate_m: 10.0,
        speedup,
    }
}

#[test]
fn rounds_group_by_placement_without_mixed_ones() {
    use PlacementClass::*;
    let rs = [
        round(Apart, 3.6),
        round(Close, 1.6),
        round(Mixed, 9.0),
        round(Close, 1.7),
        round(Apart, 3.2),
        round(Close, 1.8),
    ];
    let g = by_placement(&rs);
    assert_eq!(g.len(), 2);
    assert_eq!((g[0].placement, g[0].rounds), (Close, 3));
    assert!((g[0].speedup - 1.7).abs() < 1e-9);
    assert!((g[0].enso_rate_m - 17.0).abs() < 1e-9);
    assert_eq!((g[1].placement, g[1].rounds), (Apart, 2));
    assert!((g[1].speedup - 3.4).abs() < 1e-9);
    assert_eq!(placement_cell(&g), "close 1.70 (3), apart 3.40 (2)");
    assert_eq!(placement_cell(&by_placement(&[round(Mixed, 2.0)])), "-");
}

fn trial(latency: Option<(u64, u64)>) -> TrialResult {
    TrialResult {
        app: AppKind::Kv,
        interface: Interface::Enso,
        stream: false,
        seconds: 0.4,
        unit: "requests",
        units: 400,
        rate: 1000.0,
        packets: 100,
        gbps: 0.0,
        app_busy_ns_per_unit: 10.0,
        app_busy_fraction: 0.5,
        nic_busy_ns_per_unit: 5.0,
        rx_notifications_per_unit: 0.0,
        register_writes_per_unit: 0.0,
        app_dropped: 0,
        nic_drops: Default::default(),
        latency: latency.map(|(p50, p99)| enso_apps::load::LatencyStats {
            count: 10,
            p50_ns: p50,
            p99_ns: p99,
            ..Default::default()
        }),
        load: String::new(),
        busy_threads: 2,
        nic: Default::default(),
    }
}

#[test]
fn a_client_s_latency_is_reported() {
    let with = side(&[
        trial(Some((1000, 5000))),
        trial(Some((3000, 9000))),
        trial(Some((2000, 7000))),
    ]);
    assert_eq!(with.p50_latency_ns, Some(2000.0));
    assert_eq!(with.p99_latency_ns, Some(7000.0));
    let without = side(&[trial(None)]);
    assert_eq!(without.p50_latency_ns, None);
    let v = serde_json::to_value(&without).unwrap();
    assert!(v.get("p50_latency_ns").is_none(), "{v}");
    let mut row = AppOut {
        app: "kv",
        patterns: None,
        log_event_share: None,
        kv_batch: Some(4),
        flows: None,
        unit: "requests",
        enso: with.clone(),
        packetized: with,
        speedup: 1.0,
        app_cost_speedup: 1.0,
        target_speedup: 1.3,
        load: String::new(),
        probe_rtt_ns: 0.0,
        probe_after_rtt_ns: 0.0,
        rounds: Vec::new(),
        by_placement: Vec::new(),
    };
    assert_eq!(
        latency_lines(std::slice::from_ref(&row)),
        "\nkv (4 requests per frame): client round-trip latency (medians over trials): \
         enso p50 2000 ns, p99 7000 ns; packetized p50 2000 ns, p99 7000 ns.\n"
    );
    row.enso = without.clone();
    row.packetized = without;
    assert_eq!(latency_lines(&[row]), "");
}

#[test]
fn a_round_without_packetized_units_has_no_speedup() {
    assert_eq!(round_ratio(20.0, 10.0), 2.0);
    assert!(round_ratio(20.0, 0.0).is_nan());
    assert_eq!(speedup_of(vec![2.0, f64::NAN, 3.0, 2.5]), 2.5);
    assert!(speedup_of(vec![f64::NAN]).is_nan());
    assert!(speedup_of(Vec::new()).is_nan());
}

#[test]
fn maglev_rows_name_their_workload() {
    let row = |flows| AppOut {
        app: "maglev",
        patterns: None,
        log_event_share: None,
        kv_batch: None,
        flows: Some(flows),
        unit: "packets",
        enso: side(&[]),
        packetized: side(&[]),
        speedup: 1.0,
        app_cost_speedup: 1.0,
        target_speedup: 2.5,
        load: String::new(),
        probe_rtt_ns: 0.0,
        probe_after_rtt_ns: 0.0,
        rounds: Vec::new(),
        by_placement: Vec::new(),
    };
    assert_eq!(label(&row(16)), "maglev (16 flows, cached)");
    assert_eq!(label(&row(1 << 20)), "maglev (1048576 flows, SYN flood)");
    assert_eq!(label(&row(1000)), "maglev (1000 flows)");
}

#[test]
fn event_shares_name_rows_as_percentages() {
    assert_eq!(percent(0.3), "30%");
    assert_eq!(percent(0.02), "2%");
    assert_eq!(percent(0.025), "2.5%");
    assert_eq!(percent(1.0), "100%");
}

fn check_words(w: &[&str]) -> Result<(), String> {
    let words: Vec<String> = w.iter().map(|s| s.to_string()).collect();
    let (a, given) = super::super::parse_words::<AppsArgs>(&words)?;
    check(&a, &given)
}

#[test]
fn options_of_the_applications_chosen_are_accepted() {
    for ok in [
        &[][..],
        &["--log-patterns", "sshd", "--kv-batch", "4"],
        &["--apps", "log_monitor", "--log-patterns", "sshd+nginx,all"],
        &[
            "--apps",
            "logmon",
            "--log-event-shares",
            "0.5",
            "--log-load",
            "client",
        ],
        &["--apps", "kv", "--kv-batch", "8,1", "--kv-load", "client"],
        &[
            "--apps",
            "kv,maglev",
            "--kv-load",
            "client",
            "--generator-burst",
            "64",
        ],
        &["--apps", "maglev", "--line-rate-gbps", "100"],
        &["--apps", "maglev", "--maglev-flows", "16,1048576,16777216"],
    ] {
        assert_eq!(check_words(ok), Ok(()), "{ok:?}");
    }
}

#[test]
fn options_no_application_chosen_uses_are_refused() {
    assert_eq!(
        check_words(&["--apps", "maglev", "--log-patterns", "sshd"]),
        Err("--log-patterns applies only to log_monitor, and --apps selects maglev".into())
    );
    assert_eq!(
        check_words(&["--apps", "maglev,telemetry", "--kv-batch", "4"]),
        Err("--kv-batch applies only to kv, and --apps selects maglev, telemetry".into())
    );
    for flag in [
        &["--maglev-flows", "16"][..],
        &["--log-event-shares", "0.1"],
        &["--log-load", "client"],
        &["--kv-load", "client"],
    ] {
        let mut w = vec!["--apps", "telemetry"];
        w.extend(flag);
        let e = check_words(&w).unwrap_err();
        assert!(
            e.starts_with(&format!("{} applies only to", flag[0])),
            "{e}"
        );
    }
    assert_eq!(
        check_words(&[
            "--apps",
            "kv",
            "--kv-load",
            "client",
            "--generator-burst",
            "64"
        ]),
        Err(
            "--generator-burst applies only to loads the NIC's generator makes, and every \
             application chosen takes its load from a client"
                .into()
        )
    );
    assert!(check_words(&[
        "--apps",
        "kv,logmon",
        "--kv-load",
        "client",
        "--log-load",
        "client",
        "--line-rate-gbps",
        "10"
    ])
    .is_err());
    assert!(check_words(&["--pipe-writes", "plain", "--evict-ahead-lines", "4"]).is_err());
}

#[test]
fn duplicates_and_bad_values_are_refused() {
    assert_eq!(
        check_words(&["--apps", "maglev,kv,maglev"]),
        Err("--apps: maglev is given twice".into())
    );
    assert_eq!(
        check_words(&["--apps", "log_monitor,logmon"]),
        Err("--apps: log_monitor is given twice".into())
    );
    assert!(check_words(&["--log-patterns", "sshd, sshd"]).is_err());
    assert!(check_words(&["--log-event-shares", "0.3,0.3"]).is_err());
    assert!(check_words(&["--kv-batch", "4,4"]).is_err());
    assert!(check_words(&["--maglev-flows", "16,16"]).is_err());
    assert!(check_words(&["--maglev-flows", "0"]).is_err());
    assert!(check_words(&["--maglev-flows", "16777217"]).is_err());
    assert_eq!(
        check_words(&["--log-event-shares", "1.5"]),
        Err("--log-event-shares: 1.5 is outside 0..=1".into())
    );
    assert!(check_words(&["--log-patterns", "ftp"])
        .unwrap_err()
        .contains("ftp"));
    assert!(check_words(&["--apps", "dns"]).is_err());
}
