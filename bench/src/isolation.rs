//! Experiment: whether one application's flow rules slow another
//! application's lookups.
//!
//! One device, two applications. Application B is a [`Rig`]'s echo server
//! with [`RigConfig::flow_rules`]: one rule per generator flow and no
//! fallback pipe, so every frame it echoes was looked up in the NIC's flow
//! table. Application A attaches beside it and binds distinct UDP rules to
//! one pipe until far past its quota ([`fill_quota`]): the NIC applies
//! exactly [`enso::MAX_FLOW_RULES`] and refuses every further bind with
//! [`ConfigError::QuotaReached`]. Then B's echo rate is measured with A
//! detached (no foreign rule in the table) and with A attached holding its
//! full quota, alternating trial by trial ([`Interleave`]): the NIC's
//! bounded probe ([`nic_emu::steering::MAX_PROBE`]) is meant to keep the
//! two rates equal.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use enso::{ConfigError, Device, DeviceOptions, FlowRule, RxPipe};
use nic_emu::wire::PROTO_UDP;
use nic_emu::Nic;
use serde::{Deserialize, Serialize};

use crate::emu::{Rig, RigConfig};
use crate::interleave::{Interleave, InterleaveReport, Order, TrialResult, Variant};
use crate::placement::Placement;
use crate::progress::Progress;

/// Name of the trials with application A detached.
pub const ALONE: &str = "alone";
/// Name of the trials with application A attached, holding its quota.
pub const CROWDED: &str = "crowded";

/// Destination address of A's rule `i`: outside the generator's
/// addresses, so none of A's rules claims B's frames.
const FOREIGN_BASE_IP: u32 = 0x0b00_0000;
/// Destination UDP port of A's rules.
const FOREIGN_PORT: u16 = 4000;

/// A's rule number `i` (distinct for every `i` below 2^24).
pub fn foreign_rule(i: u32) -> FlowRule {
    FlowRule {
        src_ip: 0,
        dst_ip: FOREIGN_BASE_IP + i,
        src_port: 0,
        dst_port: FOREIGN_PORT,
        protocol: PROTO_UDP,
    }
}

/// What binding past the quota returned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaReport {
    /// Bind calls made, each with a distinct rule.
    pub tries: u64,
    /// Calls the NIC applied.
    pub applied: u64,
    /// Refused calls by answer (`QuotaReached(2048)`: the quota it names).
    pub refused: BTreeMap<String, u64>,
    /// Index of the first refused call, if any.
    pub first_refused: Option<u64>,
    /// The NIC's quota of rules per application.
    pub quota: u32,
    /// Rules the NIC holds after the calls, every application's.
    pub nic_rules_after: usize,
    /// Of those, the ones this application added (the NIC's count after
    /// less its count before).
    pub nic_rules_added: usize,
    /// How long the calls took, ms.
    pub elapsed_ms: f64,
}

impl QuotaReport {
    /// Whether the NIC applied exactly its quota and refused every other
    /// call as over the quota, naming it.
    pub fn holds(&self) -> bool {
        let named = format!("{:?}", ConfigError::QuotaReached(self.quota));
        let expected = self.tries.min(u64::from(self.quota));
        self.applied == expected
            && self.nic_rules_added as u64 == expected
            && self.refused.len() <= 1
            && self.refused.get(&named).copied().unwrap_or(0) == self.tries - expected
            && self.first_refused.is_none_or(|i| i == expected)
    }
}

/// Binds `tries` distinct rules ([`foreign_rule`]) to `pipe` of `dev`, one
/// call at a time, counting the NIC's answers; `nic` reads its rule count
/// before and after.
pub fn fill_quota(nic: &Nic, dev: &mut Device, pipe: RxPipe, tries: u32) -> QuotaReport {
    let before = nic.stats().flow_rules;
    let t0 = Instant::now();
    let mut applied = 0;
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    let mut first_refused = None;
    for i in 0..tries {
        match dev.bind(pipe, foreign_rule(i)) {
            Ok(()) => applied += 1,
            Err(e) => {
                first_refused.get_or_insert(u64::from(i));
                *refused.entry(format!("{e:?}")).or_insert(0) += 1;
            }
        }
    }
    let elapsed_ms = t0.elapsed().as_secs_f64() * 1e3;
    let after = nic.stats().flow_rules;
    QuotaReport {
        tries: u64::from(tries),
        applied,
        refused,
        first_refused,
        quota: nic_emu::engine::MAX_RULES_PER_APP,
        nic_rules_after: after,
        nic_rules_added: after.saturating_sub(before),
        elapsed_ms,
    }
}

/// Attaches application A to `nic` with one RX pipe.
pub fn attach_foreign(nic: &Nic) -> Result<(Device, RxPipe), String> {
    let mut dev = Device::attach_nic(
        nic,
        DeviceOptions {
            pipes: 1,
            tx_pipes: 0,
            ..Default::default()
        },
    )
    .map_err(|e| format!("application A cannot attach: {e}"))?;
    let pipe = dev
        .alloc_rx_pipe(false)
        .map_err(|e| format!("application A has no pipe: {e}"))?;
    Ok((dev, pipe))
}

/// How to run the experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IsolationPlan {
    /// Application B's echo rig (Ensō, with flow rules).
    pub rig: RigConfig,
    /// Bind calls application A makes in the quota phase.
    pub binds: u32,
    /// Length of one trial.
    pub trial: Duration,
    /// Measured rounds (one trial of each state per round).
    pub rounds: usize,
    /// Warm-up rounds, left out of the medians.
    pub warmup: usize,
}

/// Everything one run measured.
#[derive(Debug, Serialize, Deserialize)]
pub struct IsolationRun {
    /// The quota phase.
    pub quota: QuotaReport,
    /// B's rules, as the NIC counted them before A attached.
    pub own_rules: usize,
    /// The interleaved trials: [`ALONE`] and [`CROWDED`].
    pub report: InterleaveReport,
    /// Median over rounds of crowded / alone.
    pub ratio: Option<f64>,
    /// Smallest and largest per-round ratio.
    pub ratio_range: Option<[f64; 2]>,
    /// Switches into the crowded state during the trials (attach and a
    /// full quota of binds each), and their median time, ms.
    pub fills: usize,
    /// See `fills`.
    pub fill_ms: Option<f64>,
}

/// The device with B running and A attached or not.
struct Shared {
    rig: Rig,
    foreign: Option<(Device, RxPipe)>,
    own_rules: usize,
    quota: u32,
    fill_ms: Vec<f64>,
    error: Option<String>,
}

impl Shared {
    /// Attaches A and fills its quota, or detaches it and waits until its
    /// rules are gone.
    fn set_crowded(&mut self, crowded: bool) -> Result<(), String> {
        let own = self.own_rules;
        let want = own + if crowded { self.quota as usize } else { 0 };
        if crowded && self.foreign.is_none() {
            let quota = self.quota;
            let t0 = Instant::now();
            let a = self
                .rig
                .with_nic(|nic| -> Result<_, String> {
                    let (mut dev, pipe) = attach_foreign(nic)?;
                    for i in 0..quota {
                        dev.bind(pipe, foreign_rule(i))
                            .map_err(|e| format!("application A, rule {i}: {e}"))?;
                    }
                    Ok((dev, pipe))
                })
                .ok_or("the device has stopped")??;
            self.fill_ms.push(t0.elapsed().as_secs_f64() * 1e3);
            self.foreign = Some(a);
        } else if !crowded {
            if let Some(a) = self.foreign.take() {
                drop(a);
            }
        }
        let held = self
            .rig
            .with_nic(|nic| {
                let t0 = Instant::now();
                loop {
                    let n = nic.stats().flow_rules;
                    if n == want || t0.elapsed() > Duration::from_secs(10) {
                        return n;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
            .ok_or("the device has stopped")?;
        if held != want {
            return Err(format!("the NIC holds {held} rules, not {want}"));
        }
        Ok(())
    }
}

/// One of the two states, as an interleaved variant.
struct Phase {
    name: &'static str,
    crowded: bool,
    shared: Rc<RefCell<Shared>>,
}

impl Variant for Phase {
    fn name(&self) -> &str {
        self.name
    }

    fn run_trial(&mut self, duration: Duration) -> TrialResult {
        let mut s = self.shared.borrow_mut();
        let empty = TrialResult {
            elapsed: duration,
            ..Default::default()
        };
        if s.error.is_some() {
            return empty;
        }
        if let Err(e) = s.set_crowded(self.crowded) {
            s.error = Some(e);
            return empty;
        }
        match s.rig.trial(duration) {
            Ok(t) => {
                let mut r = t.to_trial();
                if let Some(st) = &t.stats {
                    r.extra.insert("flow_rules".into(), st.0.flow_rules as f64);
                }
                r
            }
            Err(e) => {
                s.error = Some(e);
                empty
            }
        }
    }
}

/// Runs the plan: B's rig starts, A fills its quota, then the two states
/// alternate.
pub fn run(
    plan: &IsolationPlan,
    placement: &Placement,
    progress: &mut Progress,
) -> Result<IsolationRun, String> {
    let rig_cfg = RigConfig {
        flow_rules: true,
        ..plan.rig.clone()
    };
    let mut rig = Rig::start("isolation", rig_cfg, placement)?;
    let own_rules = rig.stats().map_or(0, |s| s.flow_rules);
    let (quota, foreign) = rig
        .with_nic(|nic| -> Result<_, String> {
            let (mut dev, pipe) = attach_foreign(nic)?;
            let q = fill_quota(nic, &mut dev, pipe, plan.binds);
            Ok((q, (dev, pipe)))
        })
        .ok_or("the device has stopped")??;
    progress.note(&format!(
        "quota: {} of {} binds applied in {:.0} ms",
        quota.applied, quota.tries, quota.elapsed_ms
    ));
    let shared = Rc::new(RefCell::new(Shared {
        rig,
        foreign: Some(foreign),
        own_rules,
        quota: quota.quota,
        fill_ms: Vec::new(),
        error: None,
    }));
    // A is attached with exactly its quota after the quota phase when it
    // applied all of it; with fewer binds, it starts over.
    if quota.applied < u64::from(quota.quota) {
        shared.borrow_mut().foreign = None;
    }
    let mut alone = Phase {
        name: ALONE,
        crowded: false,
        shared: Rc::clone(&shared),
    };
    let mut crowded = Phase {
        name: CROWDED,
        crowded: true,
        shared: Rc::clone(&shared),
    };
    let report = Interleave::new(plan.trial)
        .rounds(plan.rounds)
        .warmup(plan.warmup)
        .order(Order::Rotate)
        .reference(ALONE)
        .run_with(placement, &mut [&mut alone, &mut crowded], progress);
    drop((alone, crowded));
    let shared = Rc::try_unwrap(shared)
        .map_err(|_| "the trials still hold the device")?
        .into_inner();
    if let Some(e) = shared.error {
        return Err(e);
    }
    let ratio = report.ratio(CROWDED, ALONE);
    let fill_ms = crate::stats::median(&shared.fill_ms);
    Ok(IsolationRun {
        quota,
        own_rules,
        ratio: ratio.as_ref().map(|r| r.median),
        ratio_range: ratio.as_ref().map(|r| [r.min, r.max]),
        fills: shared.fill_ms.len(),
        fill_ms,
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_rules_are_distinct_and_miss_the_generator() {
        assert_ne!(foreign_rule(0), foreign_rule(1));
        assert_ne!(foreign_rule(199_999).dst_ip, nic_emu::testframe::DST_IP);
        assert_ne!(foreign_rule(0).dst_ip, nic_emu::testframe::DST_IP);
    }

    fn report(applied: u64, refused: &[(&str, u64)], added: usize) -> QuotaReport {
        QuotaReport {
            tries: 3000,
            applied,
            refused: refused.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            first_refused: Some(applied),
            quota: 2048,
            nic_rules_after: added + 16,
            nic_rules_added: added,
            elapsed_ms: 1.0,
        }
    }

    #[test]
    fn the_quota_holds_only_with_exact_counts_and_the_named_answer() {
        assert!(report(2048, &[("QuotaReached(2048)", 952)], 2048).holds());
        assert!(!report(2047, &[("QuotaReached(2048)", 953)], 2047).holds());
        assert!(!report(2048, &[("QuotaReached(2048)", 952)], 2049).holds());
        assert!(!report(2048, &[("QuotaReached(1024)", 952)], 2048).holds());
        assert!(!report(2048, &[("QuotaReached(2048)", 951), ("TableFull", 1)], 2048).holds());
    }
}
