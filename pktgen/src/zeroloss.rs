//! The zero-loss search against a device: a [`Trial`] that sets the NIC's
//! rate limiter to the trial's rate, sends for the trial's duration, waits
//! for frames in flight, and counts what was sent and what came back.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::cli::TrafficSource;
use crate::rate::{Rate, RateError};
use crate::search::{Trial, TrialOutcome, TrialSpec};
use crate::session::{Drain, Idle, RunError, RunPlan, Session};
use crate::stream::{StreamError, TxStream};
use crate::traffic::SizeSpec;

/// A trial whose generator sent fewer than this share of the frames its
/// rate and duration call for did not offer the load
/// ([`TrialOutcome::underrun`]).
pub const MIN_OFFERED: f64 = 0.95;

/// Why a trial could not be run.
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    /// The frames could not be built.
    #[error("{0}")]
    Stream(#[from] StreamError),
    /// The rate cannot be set on the NIC's limiter.
    #[error("{rate_gbps} Gb/s: {source}")]
    Rate {
        /// The trial's rate.
        rate_gbps: f64,
        /// Why.
        source: RateError,
    },
    /// The run failed.
    #[error("{0}")]
    Run(#[from] RunError),
    /// A frame size for pcap traffic.
    #[error("a pcap replay cannot be searched at a given frame size")]
    SizeOfPcap,
    /// Stopped from outside.
    #[error("interrupted")]
    Interrupted,
}

/// Trials on a [`Session`].
#[derive(Debug)]
pub struct DeviceTrial<'a> {
    session: &'a mut Session,
    traffic: TrafficSource,
    /// Frames per size (`None`: the traffic's own sizes), built once.
    streams: HashMap<Option<usize>, TxStream>,
    /// Threads as in a run.
    pub single_core: bool,
    /// First core to pin to.
    pub core: Option<usize>,
    /// What the receiver does while no frame comes.
    pub idle: Idle,
    /// Drain after each trial.
    pub drain: Drain,
    /// Set from outside (Ctrl-C) to stop the search.
    pub stop: Option<&'a AtomicBool>,
}

impl<'a> DeviceTrial<'a> {
    /// Trials of `traffic` on `session`; a trial at size `s` sends the
    /// synthetic spec with every frame `s` bytes.
    pub fn new(session: &'a mut Session, traffic: TrafficSource) -> Self {
        Self {
            session,
            traffic,
            streams: HashMap::new(),
            single_core: false,
            core: None,
            idle: Idle::Park,
            drain: Drain::TRIAL,
            stop: None,
        }
    }
}

/// The frames of a trial at `size`, built on first use.
fn stream_for<'s>(
    streams: &'s mut HashMap<Option<usize>, TxStream>,
    traffic: &TrafficSource,
    size: Option<usize>,
) -> Result<&'s TxStream, TrialError> {
    let v = match streams.entry(size) {
        Entry::Occupied(e) => return Ok(e.into_mut()),
        Entry::Vacant(v) => v,
    };
    let s = match (size, traffic) {
        (None, t) => TxStream::from_source(t)?,
        (Some(s), TrafficSource::Synthetic(spec)) => {
            let mut spec = spec.clone();
            spec.sizes = SizeSpec::Fixed(s as u16);
            TxStream::synthetic(&spec)?
        }
        (Some(_), TrafficSource::Pcap { .. }) => return Err(TrialError::SizeOfPcap),
    };
    Ok(v.insert(s))
}

impl Trial for DeviceTrial<'_> {
    type Error = TrialError;

    fn run(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, TrialError> {
        if self.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(TrialError::Interrupted);
        }
        let stream = stream_for(&mut self.streams, &self.traffic, spec.size)?;
        let limit = Rate::gbps(spec.rate_gbps)
            .limiter_setting(&stream.profile())
            .map_err(|source| TrialError::Rate {
                rate_gbps: spec.rate_gbps,
                source,
            })?;
        let plan = RunPlan {
            limit: Some(limit),
            duration: Some(spec.duration),
            single_core: self.single_core,
            core: self.core,
            idle: self.idle,
            drain: self.drain,
            stop: self.stop,
            stats_delay: Duration::from_secs(3600),
            ..RunPlan::new(stream)
        };
        let out = self.session.run(&plan, None, &mut |_, _| {})?;
        if out.device_gone {
            return Err(RunError::Device(enso::DeviceError::Gone).into());
        }
        if out.interrupted {
            return Err(TrialError::Interrupted);
        }
        let due = Rate::Flits(limit).pps(&stream.profile()) * spec.duration.as_secs_f64();
        let sent = out.counters.tx_packets;
        Ok(TrialOutcome {
            sent,
            received: out.counters.rx_packets,
            underrun: (sent as f64) < MIN_OFFERED * due,
        })
    }
}
