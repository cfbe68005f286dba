//! The threaded throughput trials the experiments call: each application
//! on each interface runs, handles traffic, and reports consistent numbers.

use std::time::Duration;

use enso_apps::bench_api::{run_trial, AppKind, TrialError, TrialOptions};
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
            assert!(r.units > 100, "{app} {iface}: {r:?}");
            assert!(r.rate > 0.0 && r.app_busy_ns_per_unit > 0.0);
            assert!(r.seconds >= 0.15);
            assert_eq!(r.app_dropped, 0, "{app} {iface}");
            if app == AppKind::Kv {
                assert!(r.latency.is_some_and(|l| l.count > 0 && l.p50_ns > 0));
            }
            if app != AppKind::Telemetry {
                // Closed loops: the NIC never has to drop.
                assert!(r.nic_drops.is_empty(), "{app} {iface}: {:?}", r.nic_drops);
            }
        }
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
        let e = run_trial(AppKind::Kv, Interface::Enso, &opts).unwrap_err();
        assert!(
            matches!(e, TrialError::Load(LoadError::Window(w)) if w == kv_window),
            "{e}"
        );
    }
}
