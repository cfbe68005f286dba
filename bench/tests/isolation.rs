//! The quota phase of `bench isolation`: an application binding far past
//! its quota has exactly the quota applied and every other call refused,
//! naming the quota.

use bench::isolation::{attach_foreign, fill_quota, foreign_rule};
use enso::{ConfigError, MAX_FLOW_RULES};
use nic_emu::{Nic, RunOptions, WireConfig};

fn idle_nic(name: &str) -> (Nic, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = nic_emu::DeviceConfig::new(name, WireConfig::Null);
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 64 << 10;
    cfg.notif_ring_entries = 1024;
    (Nic::start(cfg, RunOptions::default()).unwrap(), dir)
}

#[test]
fn the_quota_phase_applies_exactly_the_quota_and_refuses_the_rest_naming_it() {
    let (nic, _dir) = idle_nic("isoquota");
    // Another application's rule is in the table first: the count of
    // added rules is A's alone.
    let (mut b, pb) = attach_foreign(&nic).unwrap();
    b.bind(pb, foreign_rule(1_000_000)).unwrap();
    let (mut a, pa) = attach_foreign(&nic).unwrap();
    let tries = MAX_FLOW_RULES + 700;
    let q = fill_quota(&nic, &mut a, pa, tries);
    assert_eq!(q.quota, MAX_FLOW_RULES);
    assert_eq!(q.tries, u64::from(tries));
    assert_eq!(q.applied, u64::from(MAX_FLOW_RULES));
    let named = format!("{:?}", ConfigError::QuotaReached(MAX_FLOW_RULES));
    assert_eq!(q.refused.len(), 1, "{:?}", q.refused);
    assert_eq!(q.refused[&named], 700);
    assert_eq!(q.first_refused, Some(u64::from(MAX_FLOW_RULES)));
    assert_eq!(q.nic_rules_added, MAX_FLOW_RULES as usize);
    assert_eq!(q.nic_rules_after, MAX_FLOW_RULES as usize + 1);
    assert!(q.holds());
    // Fewer calls than the quota: all applied, none refused.
    let (mut c, pc) = attach_foreign(&nic).unwrap();
    let few = fill_quota(&nic, &mut c, pc, 10);
    assert_eq!(few.applied, 0, "A's rules are taken: {:?}", few.refused);
    assert_eq!(few.refused.get("NotOwner").copied(), Some(10));
    assert!(!few.holds());
}
