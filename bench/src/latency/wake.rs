//! The lowest load of `bench latency`: what waking a parked NIC and echo
//! server adds to a round trip ([`wake_cost`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{LatencyPlan, Strategy};
use crate::emu::{Rig, RigIdle, RigTrial};
use crate::placement::Placement;
use crate::progress::Progress;

/// The lowest load, where the NIC and the echo server sleep between
/// frames: what waking them adds to a round trip. Rigs with
/// [`RigIdle::Spin`] (neither sleeps) and [`RigIdle::Park`] (both park as
/// the servers' `--idle park`) take turns, the order switched every
/// round, a probe before each round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WakeCost {
    /// Generator rate, frames per second (below one frame per
    /// [`enso::PARK_AFTER`], so a parked side sleeps before each frame).
    pub rate_pps: f64,
    /// Each round's pair of trials.
    pub rounds: Vec<WakeRound>,
    /// Medians over the rounds, ns.
    pub spin_p50_ns: u64,
    /// See `spin_p50_ns`.
    pub spin_p99_ns: u64,
    /// See `spin_p50_ns`.
    pub park_p50_ns: u64,
    /// See `spin_p50_ns`.
    pub park_p99_ns: u64,
    /// `park - spin`, medians of the rounds' differences, ns.
    pub added_p50_ns: i64,
    /// See `added_p50_ns`.
    pub added_p99_ns: i64,
    /// Times the engine parked in the parking trials, and how many of
    /// those sleeps a wake-up (not a timeout) ended: evidence that it did.
    pub engine_parks: u64,
    /// See `engine_parks`.
    pub engine_park_wakeups: u64,
    /// Trials that shared their cores with other work (of `2 * rounds`):
    /// there a spinning thread waits for its turn on the core while a
    /// sleeping one is woken ahead of it, so spinning can lose.
    pub contended_trials: usize,
    /// Frames sent, and frames that did not come back, over all trials.
    pub sent: u64,
    /// See `sent`.
    pub lost: u64,
}

/// One round of [`WakeCost`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WakeRound {
    /// Cross-core probe before the round, ns.
    pub probe_rtt_ns: f64,
    /// Round trips with both sides spinning: p50, p99, samples.
    pub spin: (u64, u64, u64),
    /// Round trips with both sides parking: p50, p99, samples.
    pub park: (u64, u64, u64),
}

/// Measures [`WakeCost`] with the reactive strategy's rig: `rounds`
/// rounds of one `trial` per idle mode at `rate_pps`.
pub fn wake_cost(
    plan: &LatencyPlan,
    placement: &Placement,
    rate_pps: f64,
    rounds: u32,
    trial: Duration,
    progress: &mut Progress,
) -> Result<WakeCost, String> {
    let rig = |idle: RigIdle| -> Result<Rig, String> {
        let mut cfg = Strategy::Reactive.rig(&plan.rig);
        cfg.rate_pps = Some(rate_pps);
        cfg.window = None;
        cfg.timestamps = true;
        cfg.idle = idle;
        let mut r = Rig::start(&format!("wake-{idle:?}"), cfg, placement)?;
        if !plan.warmup.is_zero() {
            r.trial(plan.warmup)?;
        }
        Ok(r)
    };
    let mut spin = rig(RigIdle::Spin)?;
    let mut park = rig(RigIdle::Park)?;
    let pct = |t: &RigTrial| {
        t.latency
            .as_ref()
            .map_or((0, 0, 0), |l| (l.p50_ns, l.p99_ns, l.count))
    };
    let mut out = Vec::new();
    let (mut parks, mut wakeups, mut sent, mut lost, mut contended) = (0, 0, 0, 0, 0);
    for i in 0..rounds {
        let probe_rtt_ns = crate::probe::measure(placement, crate::probe::DEFAULT_DURATION).rtt_ns;
        let mut one = |r: &mut Rig, parking: bool| -> Result<(u64, u64, u64), String> {
            let t = r.trial(trial)?;
            sent += t.sent;
            contended += usize::from(t.to_trial().contended());
            lost += t.drops.values().sum::<u64>() + t.unaccounted.max(0) as u64;
            if parking {
                if let Some(s) = &t.stats {
                    parks += s.1.engine.parks - s.0.engine.parks;
                    wakeups += s.1.engine.park_wakeups - s.0.engine.park_wakeups;
                }
            }
            Ok(pct(&t))
        };
        let (s, p) = if i % 2 == 0 {
            let s = one(&mut spin, false)?;
            (s, one(&mut park, true)?)
        } else {
            let p = one(&mut park, true)?;
            (one(&mut spin, false)?, p)
        };
        progress.step(
            2,
            &format!(
                "wake round {}: p99 {:.1} us spinning, {:.1} us parking",
                i + 1,
                s.1 as f64 / 1e3,
                p.1 as f64 / 1e3
            ),
        );
        out.push(WakeRound {
            probe_rtt_ns,
            spin: s,
            park: p,
        });
    }
    spin.stop();
    park.stop();
    let med = |mut v: Vec<i64>| -> i64 {
        v.sort_unstable();
        if v.is_empty() {
            0
        } else {
            v[v.len() / 2]
        }
    };
    let col = |f: &dyn Fn(&WakeRound) -> i64| med(out.iter().map(f).collect());
    Ok(WakeCost {
        rate_pps,
        spin_p50_ns: col(&|r| r.spin.0 as i64) as u64,
        spin_p99_ns: col(&|r| r.spin.1 as i64) as u64,
        park_p50_ns: col(&|r| r.park.0 as i64) as u64,
        park_p99_ns: col(&|r| r.park.1 as i64) as u64,
        added_p50_ns: col(&|r| r.park.0 as i64 - r.spin.0 as i64),
        added_p99_ns: col(&|r| r.park.1 as i64 - r.spin.1 as i64),
        engine_parks: parks,
        engine_park_wakeups: wakeups,
        contended_trials: contended,
        sent,
        lost,
        rounds: out,
    })
}

impl WakeCost {
    /// The result in a few lines.
    pub fn text(&self) -> String {
        let us = |ns: i64| ns as f64 / 1e3;
        let probes: Vec<f64> = self.rounds.iter().map(|r| r.probe_rtt_ns).collect();
        let (lo, hi) = probes
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &p| (a.min(p), b.max(p)));
        format!(
            "wake: at {:.0} frames/s (the lowest load: the NIC and the echo server sleep between \
             frames), {} rounds of both idle modes alternated:\n\
             wake:   spinning p50 {:.1} us, p99 {:.1} us\n\
             wake:   parking  p50 {:.1} us, p99 {:.1} us\n\
             wake: waking adds {:.1} us at p50 and {:.1} us at p99 (medians of the rounds' \
             differences); the engine parked {} times in the parking trials, {} ended by a \
             wake-up; {} of {} frames did not come back; {} of {} trials contended; probe \
             {:.0}-{:.0} ns\n",
            self.rate_pps,
            self.rounds.len(),
            us(self.spin_p50_ns as i64),
            us(self.spin_p99_ns as i64),
            us(self.park_p50_ns as i64),
            us(self.park_p99_ns as i64),
            us(self.added_p50_ns),
            us(self.added_p99_ns),
            self.engine_parks,
            self.engine_park_wakeups,
            self.lost,
            self.sent,
            self.contended_trials,
            2 * self.rounds.len(),
            lo,
            hi
        )
    }
}
