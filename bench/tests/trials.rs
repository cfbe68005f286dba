//! The threaded throughput trials the experiments call: each application
//! on each interface runs, handles traffic, and reports consistent numbers.

use std::time::Duration;

use bench::app_trial::{run_trial, AppKind, KvLoad, LogLoad, TrialError, TrialOptions};
use enso_apps::load::{LoadError, MAX_WINDOW_FRAMES};
use enso_apps::nic::Interface;

#[test]
fn every_app_runs_a_short_trial_on_both_interfaces() {
    let opts = TrialOptions {
        duration: Duration::from_millis(150),
        warmup: Duration::from_millis(50),
        kv_keys: 4096,
        log_bytes: 256 << 10,
        // Unpinned: tests share the machine's cores.
        nic_core: None,
        app_core: None,
        ..Default::default()
    };
    for app in AppKind::ALL {
        for iface in Interface::ALL {
            let r = run_trial(app, iface, &opts).unwrap_or_else(|e| panic!("{app} {iface}: {e}"));
            eprintln!(
                "{app:>9} {iface:<10} {:>8.3} M{}/s {:>7.1} ns/unit (app) {:>7.1} ns/unit (NIC) {:?} drops {:?}",
                r.rate / 1e6,
                r.unit,
                r.app_busy_ns_per_unit,
                r.nic_busy_ns_per_unit,
                r.latency.map(|l| l.p50_ns),
                r.nic_drops
            );
            assert!(r.units > 0, "{app} {iface}: {r:?}");
            assert!(r.rate > 0.0 && r.app_busy_ns_per_unit > 0.0);
            assert!(r.seconds >= 0.15);
            assert_eq!(r.app_dropped, 0, "{app} {iface}");
            if app == AppKind::Kv {
                // The generator replays requests with a window: every one
                // it sent was answered, but for those still in flight.
                let g = r.nic.ports[0]
                    .generator
                    .as_ref()
                    .expect("the generator replays requests");
                assert!(g.returned > 0 && g.returned <= g.sent, "{g:?}");
                assert!(g.sent - g.returned <= opts.kv_window as u64, "{g:?}");
                assert!(r.load.contains("replaying"), "{}", r.load);
                assert!(r.latency.is_none());
            }
            if matches!(app, AppKind::Maglev | AppKind::Kv) {
                // Closed loops: the NIC never has to drop.
                assert!(r.nic_drops.is_empty(), "{app} {iface}: {:?}", r.nic_drops);
            }
            if app == AppKind::Logmon {
                // The replayed log (open loop): every frame reached the
                // port; what the monitor could not take is counted.
                let port = &r.nic.ports[0];
                let g = port
                    .generator
                    .as_ref()
                    .expect("the generator replays the log");
                assert_eq!(port.counters.rx_frames, g.sent);
                let dropped: u64 = r.nic.drops().values().sum();
                assert!(dropped < g.sent, "{dropped} of {}", g.sent);
                assert!(r.load.contains("replaying the log"), "{}", r.load);
            }
        }
    }
}

#[test]
fn the_log_monitor_also_runs_behind_a_client_without_drops() {
    let opts = TrialOptions {
        duration: Duration::from_millis(150),
        warmup: Duration::from_millis(50),
        log_bytes: 256 << 10,
        log_load: LogLoad::Client,
        nic_core: None,
        app_core: None,
        ..Default::default()
    };
    for iface in Interface::ALL {
        let r = run_trial(AppKind::Logmon, iface, &opts).unwrap_or_else(|e| panic!("{iface}: {e}"));
        assert!(r.units > 0, "{iface}: {r:?}");
        assert!(r.load.contains("log client"), "{}", r.load);
        // A credit window: nothing is dropped anywhere.
        assert!(r.nic_drops.is_empty(), "{iface}: {:?}", r.nic_drops);
        assert_eq!(r.app_dropped, 0);
    }
}

#[test]
fn the_kv_store_also_runs_behind_a_client_that_measures_latency() {
    let opts = TrialOptions {
        duration: Duration::from_millis(150),
        warmup: Duration::from_millis(50),
        kv_keys: 4096,
        kv_load: KvLoad::Client,
        nic_core: None,
        app_core: None,
        ..Default::default()
    };
    for iface in Interface::ALL {
        let r = run_trial(AppKind::Kv, iface, &opts).unwrap_or_else(|e| panic!("{iface}: {e}"));
        assert!(r.units > 0, "{iface}: {r:?}");
        assert!(r.load.contains("KV client"), "{}", r.load);
        assert!(r.latency.is_some_and(|l| l.count > 0 && l.p50_ns > 0));
        assert!(r.nic_drops.is_empty(), "{iface}: {:?}", r.nic_drops);
        assert_eq!(r.app_dropped, 0);
    }
}

#[test]
fn a_kv_window_beyond_the_maximum_is_an_error() {
    // It made the client's tables overflow or the allocation abort.
    for kv_window in [MAX_WINDOW_FRAMES + 1, usize::MAX] {
        let opts = TrialOptions {
            kv_window,
            nic_core: None,
            app_core: None,
            ..Default::default()
        };
        for kv_load in [KvLoad::Generator, KvLoad::Client] {
            let opts = TrialOptions {
                kv_load,
                ..opts.clone()
            };
            let e = run_trial(AppKind::Kv, Interface::Enso, &opts).unwrap_err();
            assert!(
                matches!(e, TrialError::Load(LoadError::Window(w)) if w == kv_window),
                "{e}"
            );
        }
    }
}

#[test]
fn the_generator_sends_at_most_its_burst_per_engine_step() {
    // Telemetry's load is open loop: once running, the generator sends a
    // whole burst every step, so a burst that were not applied (the
    // default is 128) would put far more frames than 4 in each step.
    let opts = TrialOptions {
        duration: Duration::from_millis(100),
        warmup: Duration::from_millis(20),
        generator_burst: 4,
        nic_core: None,
        app_core: None,
        ..Default::default()
    };
    assert!(opts.generator_burst < bench::app_trial::DEFAULT_GENERATOR_BURST);
    for iface in Interface::ALL {
        let r = run_trial(AppKind::Telemetry, iface, &opts).expect("trial");
        let g = r.nic.ports[0].generator.as_ref().expect("generator");
        assert!(g.sent > 0, "{iface}: {g:?}");
        assert!(
            g.sent <= 4 * r.nic.engine.steps,
            "{iface}: {} frames in {} steps",
            g.sent,
            r.nic.engine.steps
        );
    }
}

#[test]
fn a_generator_setting_out_of_range_is_one_error_line() {
    for (flag, bad) in [
        ("--generator-burst", "0"),
        ("--generator-burst", "4097"),
        ("--generator-burst", "many"),
        ("--line-rate-gbps", "-1"),
        ("--line-rate-gbps", "inf"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_app-trial"))
            .args(["--app", "telemetry", &format!("{flag}={bad}")])
            .output()
            .expect("run app-trial");
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{bad}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{bad}: {err}");
    }
}

#[test]
fn a_paced_generator_sends_at_its_line_rate() {
    // 0.1 Gb/s of 64 B frames (88 B on the wire): about 142 000 frames a
    // second, where unpaced the engine makes millions.
    let pps = 0.1e9 / (88.0 * 8.0);
    let opts = TrialOptions {
        duration: Duration::from_millis(150),
        warmup: Duration::from_millis(30),
        line_rate_gbps: 0.1,
        nic_core: None,
        app_core: None,
        ..Default::default()
    };
    for iface in Interface::ALL {
        let t0 = std::time::Instant::now();
        let r = run_trial(AppKind::Telemetry, iface, &opts).expect("trial");
        let elapsed = t0.elapsed().as_secs_f64();
        let g = r.nic.ports[0].generator.as_ref().expect("generator");
        let most = pps * elapsed + opts.generator_burst as f64;
        // Loose below, since the tests share two cores and the engine can
        // be kept off its core for most of a trial: the bound only catches
        // a pacer that is orders of magnitude slow (a unit off).
        let least = pps * r.seconds * 0.01;
        assert!(
            (g.sent as f64) <= most && (g.sent as f64) >= least,
            "{iface}: {} frames sent in {elapsed:.3} s (measured {:.3} s), expected {least:.0}..={most:.0}",
            g.sent,
            r.seconds
        );
    }
}

#[test]
fn app_trial_json_has_the_trials_and_the_probes_around_them() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_app-trial"))
        .args([
            "--app",
            "telemetry",
            "--duration-s",
            "0.05",
            "--warmup-s",
            "0",
        ])
        .args(["--rounds", "2", "--json"])
        .output()
        .expect("run app-trial");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let trials = v["trials"].as_array().expect("trials");
    // Two rounds of each interface, alternating.
    let ifaces: Vec<&str> = trials
        .iter()
        .map(|t| t["interface"].as_str().unwrap())
        .collect();
    assert_eq!(ifaces, ["enso", "packetized", "enso", "packetized"]);
    for p in ["probe_before", "probe_after"] {
        let ns = v[p]["probe_rtt_ns"].as_f64().unwrap_or(f64::NAN);
        assert!(ns > 0.0 && ns.is_finite(), "{p}: {}", v[p]);
        assert!(v[p]["samples"].as_u64().unwrap_or(0) > 0, "{p}: {}", v[p]);
    }
}
