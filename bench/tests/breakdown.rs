//! `bench breakdown` on one application, both interfaces, small counts:
//! every part is there and the parts add up. Needs valgrind; without it
//! the test records why (test-skips) and passes, except under `CI=true`.

use std::process::Command;

#[test]
fn maglev_breakdown_on_both_interfaces_adds_up() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        test_skips::missing("valgrind is not installed (apt-get install valgrind)");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["breakdown", "--app", "maglev", "--interface", "both"])
        .args(["--warm", "2000", "--units", "2000", "--json"])
        .output()
        .expect("run bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    let mut ifaces = Vec::new();
    for r in results {
        ifaces.push(r["interface"].as_str().unwrap().to_string());
        assert_eq!(r["app"], "maglev");
        // Each run stops at the first whole batch past its count.
        let units = r["units"].as_u64().unwrap();
        assert!((1900..=2100).contains(&units), "{units}");
        let part = |p: &str| r["parts"][p].as_f64().unwrap_or_else(|| panic!("{p}: {r}"));
        let app_total = r["app_total"].as_f64().unwrap();
        assert!(
            (50.0..=5000.0).contains(&app_total),
            "application side {app_total} instructions per packet: {r}"
        );
        let sum = part("receive") + part("application") + part("response") + part("send");
        assert!(
            (sum - app_total).abs() <= 0.05 * app_total,
            "parts {sum} against total {app_total}: {r}"
        );
        for p in ["receive", "application", "send"] {
            assert!(
                part(p) > 1.0 && part(p) < app_total,
                "{p}: {} of {app_total}: {r}",
                part(p)
            );
        }
        // The NIC does the work of the hardware: there is some, and less
        // than ten times the application's.
        assert!(
            part("engine") > 10.0 && part("engine") < 10.0 * app_total,
            "engine {}: {r}",
            part("engine")
        );
        let total = r["total"].as_f64().unwrap();
        assert!(total >= app_total && total < 20.0 * app_total, "{r}");
    }
    ifaces.sort();
    assert_eq!(ifaces, ["enso", "packetized"]);
    let ratios = v["app_side_ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 1);
    let ratio = ratios[0][1].as_f64().unwrap();
    assert!(ratio > 0.05 && ratio < 2.0, "Ensō/packetized {ratio}");
}
