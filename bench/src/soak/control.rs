//! The controller of a soak run: samples, the stop and drain, and the final accounting of every frame.

#[allow(unused_imports)]
use super::*;

/// What the controlling thread measured.
#[derive(Debug, Default)]
pub(super) struct Control {
    pub(super) elapsed: Duration,
    pub(super) timeline: Vec<Sample>,
    pub(super) drained: bool,
    pub(super) drain: Duration,
}

pub(super) fn sample(s: &Stats, t: Duration, cycles: u64) -> Sample {
    let g = |f: fn(&nic_emu::counters::GeneratorCounters) -> u64| {
        s.ports
            .iter()
            .filter_map(|p| p.generator.as_ref())
            .map(f)
            .sum::<u64>()
    };
    Sample {
        t_s: t.as_secs_f64(),
        frames: g(|c| c.sent),
        verified: g(|c| c.returned),
        nic_dropped: s.total_drops(),
        applications: s.apps.len(),
        attach_cycles: cycles,
    }
}

/// The controlling thread: waits for the applications, releases the
/// generators for the run, pauses them, waits for the drain.
pub(super) fn control(
    nic: &Nic,
    cfg: &SoakConfig,
    shared: &Shared,
    expected_fallback: usize,
    expected_rules: usize,
    tick: &mut impl FnMut(&Tick),
) -> Result<Control, String> {
    let failed = || shared.failed.load(Ordering::Relaxed);
    let t0 = Instant::now();
    loop {
        if failed() {
            return Err("an application failed while attaching".into());
        }
        let s = nic.try_stats()?;
        if shared.ready.load(Ordering::Relaxed) == HOSTS
            && s.fallback_pipes >= expected_fallback
            && s.flow_rules >= expected_rules
        {
            break;
        }
        if t0.elapsed() > SETUP_TIMEOUT {
            return Err(format!(
                "the applications did not set up within {} s ({} of {HOSTS} threads ready, \
                 {} of {expected_fallback} fallback targets, {} of {expected_rules} flow rules)",
                SETUP_TIMEOUT.as_secs(),
                shared.ready.load(Ordering::Relaxed),
                s.fallback_pipes,
                s.flow_rules
            ));
        }
        thread::sleep(Duration::from_millis(2));
    }
    let start = nic.try_with_engine(|e| {
        e.set_generators_paused(false);
        Instant::now()
    })?;
    let mut c = Control::default();
    let end_at = start + cfg.duration;
    let mut next = start + Duration::from_secs(1);
    loop {
        let now = Instant::now();
        if failed() {
            // The error comes from the thread that failed.
            return Ok(c);
        }
        if now >= end_at {
            break;
        }
        thread::sleep(
            next.min(end_at)
                .saturating_duration_since(now)
                .min(Duration::from_millis(100)),
        );
        if Instant::now() >= next && Instant::now() < end_at {
            let t = start.elapsed();
            let s = sample(&nic.try_stats()?, t, shared.cycles.load(Ordering::Relaxed));
            tick(&Tick {
                elapsed_s: t.as_secs_f64(),
                sample: s.clone(),
            });
            c.timeline.push(s);
            next += Duration::from_secs(1);
        }
    }
    let end = nic.try_with_engine(|e| {
        e.set_generators_paused(true);
        Instant::now()
    })?;
    c.elapsed = end - start;
    // SYNC POINT: Release pairs with the Acquire load of `phase` in
    // `host`: the generators were paused before DRAIN is seen.
    shared.phase.store(DRAIN, Ordering::Release);
    // Drain: the applications keep echoing until nothing moves (what the
    // generators sent has come back, or was dropped, or waits in a pipe of
    // an application that detached without reading it).
    let d0 = Instant::now();
    let mut last = None;
    let mut last_change = Instant::now();
    while d0.elapsed() < DRAIN_TIMEOUT && !failed() {
        thread::sleep(Duration::from_millis(10));
        let s = nic.try_stats()?;
        let handled: u64 = shared
            .handled
            .iter()
            .map(|h| h.load(Ordering::Relaxed))
            .sum();
        let now = Some((sample(&s, Duration::ZERO, 0), handled));
        if now != last {
            last = now;
            last_change = Instant::now();
        } else if last_change.elapsed() >= SETTLED {
            c.drained = true;
            break;
        }
    }
    c.drain = d0.elapsed();
    let s = sample(
        &nic.try_stats()?,
        c.elapsed,
        shared.cycles.load(Ordering::Relaxed),
    );
    c.timeline.push(s);
    Ok(c)
}

/// Accounts for every frame: the report of a finished soak.
pub(super) fn account(
    cfg: &SoakConfig,
    stats: &Stats,
    control: &Control,
    hosts: &[HostReport],
    applications: usize,
) -> SoakReport {
    let ports: Vec<PortReport> = stats
        .ports
        .iter()
        .filter_map(|p| {
            let g = p.generator.as_ref()?;
            Some(PortReport {
                port: p.port,
                frames: g.sent,
                verified: g.returned,
                corrupt: g.corrupt,
                duplicates: g.duplicate,
                foreign: g.foreign,
                dropped_on_arrival: g.dropped_on_arrival,
            })
        })
        .collect();
    let mut roles: BTreeMap<Role, RoleReport> = BTreeMap::new();
    let mut notes = Vec::new();
    let (mut cycles, mut graceful, mut abrupt) = (0, 0, 0);
    for h in hosts {
        for (role, r) in &h.roles {
            let e = roles.entry(*role).or_insert_with(|| RoleReport {
                role: *role,
                ..Default::default()
            });
            e.attached += r.attached;
            e.handled += r.handled;
            e.unread_on_detach += r.unread_on_detach;
            e.app_dropped += r.app_dropped;
        }
        cycles += h.cycles;
        graceful += h.graceful;
        abrupt += h.abrupt;
        notes.extend(h.overcounts.iter().cloned());
    }
    let roles: Vec<RoleReport> = roles.into_values().collect();
    let unread: u64 = roles.iter().map(|r| r.unread_on_detach).sum();
    let app_dropped: u64 = roles.iter().map(|r| r.app_dropped).sum();
    let accounted = Accounting::of(stats, unread, app_dropped);
    let secs = control.elapsed.as_secs_f64().max(1e-9);
    let verified_bytes: u64 = stats
        .ports
        .iter()
        .filter_map(|p| p.generator.as_ref())
        .map(|g| g.returned_bytes)
        .sum();
    if !control.drained {
        notes.push(format!(
            "the drain did not settle within {} s",
            DRAIN_TIMEOUT.as_secs()
        ));
    }
    let rejected_config = stats.app_sum(|c| c.reject_bad_config);
    let passed = accounted.passes() && control.drained && notes.is_empty();
    if accounted.unexplained_loss != 0 {
        notes.push(format!(
            "{} frames neither verified nor counted under a drop cause",
            accounted.unexplained_loss
        ));
    }
    if accounted.verified == 0 {
        notes.push("no frame came back verified".into());
    }
    if rejected_config > 0 {
        notes.push(format!(
            "the NIC refused {rejected_config} configuration notifications"
        ));
    }
    if ports.iter().any(|p| p.frames >= GENERATOR_COUNT) {
        notes.push(format!(
            "a generator sent all {GENERATOR_COUNT} frames it may and stopped before the end"
        ));
    }
    SoakReport {
        duration_s: cfg.duration.as_secs_f64(),
        elapsed_s: secs,
        frames: accounted.frames,
        verified: accounted.verified,
        dropped_total: accounted.dropped.values().sum(),
        dropped: accounted.dropped,
        unexplained_loss: accounted.unexplained_loss,
        corrupt: accounted.corrupt,
        duplicates: accounted.duplicates,
        foreign: accounted.foreign,
        attach_cycles: cycles,
        graceful_detaches: graceful,
        abrupt_detaches: abrupt,
        applications,
        offered_mpps: accounted.frames as f64 / secs / 1e6,
        verified_mpps: accounted.verified as f64 / secs / 1e6,
        verified_gbps: (verified_bytes
            + accounted.verified * (crate::frames::FCS_LEN + crate::frames::WIRE_GAP) as u64)
            as f64
            * 8.0
            / secs
            / 1e9,
        verified_fraction: accounted.verified as f64 / accounted.frames.max(1) as f64,
        ports,
        roles,
        rejected_config,
        drained: control.drained,
        drain_ms: control.drain.as_secs_f64() * 1e3,
        passed,
        notes,
    }
}

/// Every frame the generators sent, by what became of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Frames sent.
    pub frames: u64,
    /// Frames verified back.
    pub verified: u64,
    /// Frames not verified, by cause.
    pub dropped: BTreeMap<String, u64>,
    /// Frames back with wrong bytes.
    pub corrupt: u64,
    /// Frames back more than once.
    pub duplicates: u64,
    /// Frames back that were not test frames.
    pub foreign: u64,
    /// Frames sent, less those verified, dropped by a cause, corrupt or
    /// duplicated.
    pub unexplained_loss: i64,
}

impl Accounting {
    /// The accounting of the NIC's final counters `s`, with the frames
    /// applications left unread when they detached (`unread`) and those
    /// they dropped (`app_dropped`).
    pub fn of(s: &Stats, unread: u64, app_dropped: u64) -> Accounting {
        let gens = || s.ports.iter().filter_map(|p| p.generator.as_ref());
        let mut dropped: BTreeMap<String, u64> = s
            .drops()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        dropped.insert(UNREAD_ON_DETACH.to_string(), unread);
        dropped.insert(APP_TX_RING_FULL.to_string(), app_dropped);
        let frames: u64 = gens().map(|g| g.sent).sum();
        let verified: u64 = gens().map(|g| g.returned).sum();
        let corrupt: u64 = gens().map(|g| g.corrupt).sum();
        let duplicates: u64 = gens().map(|g| g.duplicate).sum();
        let foreign: u64 = gens().map(|g| g.foreign).sum();
        let total: u64 = dropped.values().sum();
        let unexplained_loss = frames as i128
            - verified as i128
            - total as i128
            - corrupt as i128
            - duplicates as i128;
        Accounting {
            frames,
            verified,
            dropped,
            corrupt,
            duplicates,
            foreign,
            unexplained_loss: unexplained_loss.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        }
    }

    /// Whether every frame is accounted for and none came back wrong,
    /// twice or from elsewhere, and some came back.
    pub fn passes(&self) -> bool {
        self.unexplained_loss == 0
            && self.corrupt == 0
            && self.duplicates == 0
            && self.foreign == 0
            && self.verified > 0
    }
}
