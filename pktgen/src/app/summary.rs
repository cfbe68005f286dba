//! What a run reports: the summary lines, the zero-loss search's result,
//! and the NIC's counters over the run.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use nic_emu::counters::PortCounters;
use nic_emu::Stats;

use crate::rate::{Rate, RateLimit};
use crate::report::{DeviceReport, NicLimit, PortReport, Report};
use crate::search::SearchResult;
use crate::session::RunOutcome;
use crate::stats::{summary_line, Sample};
use crate::stream::TxStream;
use crate::zeroloss::MIN_OFFERED;

/// Frames per second sent and asked for, when the NIC sent clearly less
/// than the rate asked for, by the same rate the summary prints (over the
/// send time of the totals).
pub(super) fn short_rate(
    totals: &Sample,
    interrupted: bool,
    limit: Option<RateLimit>,
    stream: &TxStream,
) -> Option<(f64, f64)> {
    let want = Rate::Flits(limit?).pps(&stream.profile());
    let secs = totals.send_ns.unwrap_or(totals.interval).as_secs_f64();
    if interrupted || secs < 0.1 {
        return None;
    }
    let got = totals.tx.pkt_rate_kpps * 1e3;
    (got < MIN_OFFERED * want).then_some((got, want))
}

/// A note when the NIC sent clearly less than the rate asked for
/// ([`short_rate`]).
pub(super) fn shortfall(
    totals: &Sample,
    interrupted: bool,
    limit: Option<RateLimit>,
    stream: &TxStream,
) -> Option<String> {
    short_rate(totals, interrupted, limit, stream).map(|(got, want)| {
        format!(
            "sent {:.3} Mpps, {:.1}% of the {:.3} Mpps asked for: the generator or the emulated NIC could not keep up",
            got / 1e6,
            got / want * 100.0,
            want / 1e6
        )
    })
}

/// Whether the emulated NIC (or the generator's receiver), rather than the
/// wire, set the limit of a run: the NIC dropped frames (by its own
/// counters, `device`) or sent less than [`MIN_OFFERED`] of the rate asked
/// for (`short`: sent and asked, frames per second). `None` when neither.
/// Drops all in the generator's own RX pipes are the receiver's doing: it
/// did not free them in time, and the line says so.
pub fn nic_limit(device: Option<&DeviceReport>, short: Option<(f64, f64)>) -> Option<NicLimit> {
    let (dropped, causes, mine) = match device {
        Some(d) => (
            d.total_drops,
            d.drops
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (k.clone(), *n))
                .collect(),
            d.generator_drops.values().sum(),
        ),
        None => (0, BTreeMap::new(), 0),
    };
    let sent_fraction = short.map(|(got, want)| got / want);
    if dropped == 0 && sent_fraction.is_none() {
        return None;
    }
    let mut parts = Vec::new();
    if dropped > 0 {
        let why: Vec<String> = causes
            .iter()
            .map(|(k, n): (&String, &u64)| format!("{} {n}", k.replace('_', " ")))
            .collect();
        let whose = if mine == dropped {
            "all in the generator's RX pipes".to_string()
        } else if mine > 0 {
            format!("{mine} in the generator's RX pipes")
        } else {
            "none in the generator's RX pipes".to_string()
        };
        parts.push(format!(
            "the NIC dropped {dropped} frames ({}; {whose})",
            why.join(", ")
        ));
    }
    if let Some(f) = sent_fraction {
        parts.push(format!("sent {:.1}% of the rate asked for", f * 100.0));
    }
    let receiver = dropped > 0 && mine == dropped;
    let who = match (receiver, sent_fraction.is_some()) {
        (true, false) => "the generator's receiver, not the NIC or the wire, was",
        (true, true) => "the generator's receiver and the emulated NIC, not the wire, were",
        (false, _) => "the emulated NIC, not the wire, was",
    };
    let line = format!("{}: {who} the limit at this rate", parts.join(" and "));
    Some(NicLimit {
        dropped,
        causes,
        in_generator_pipes: mine,
        generator_receiver: receiver,
        sent_fraction,
        line,
    })
}

pub(super) fn write_summary(
    w: &mut dyn Write,
    report: &Report,
    outcome: Option<&RunOutcome>,
) -> io::Result<()> {
    if let Some(z) = &report.zero_loss {
        return write_search(w, z);
    }
    let t = &report.totals;
    let secs = |d: Option<Duration>| d.unwrap_or(t.interval).as_secs_f64();
    writeln!(
        w,
        "TX {} frames, {} bytes in {:.3} s of sending: {:.3} Gb/s, {:.3} Mpps",
        t.tx.packets,
        t.tx.bytes,
        secs(t.send_ns),
        t.tx.tput_mbps / 1e3,
        t.tx.pkt_rate_kpps / 1e3
    )?;
    writeln!(
        w,
        "RX {} frames, {} bytes in {:.3} s to the last received: {:.3} Gb/s, {:.3} Mpps",
        t.rx.packets,
        t.rx.bytes,
        secs(t.receive_ns),
        t.rx.tput_mbps / 1e3,
        t.rx.pkt_rate_kpps / 1e3
    )?;
    writeln!(w, "{}", summary_line(&report.loss, report.latency.as_ref()))?;
    if let Some(d) = &report.device {
        if d.total_drops > 0 {
            let causes: Vec<String> = d
                .drops
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let mine: u64 = d.generator_drops.values().sum();
            writeln!(
                w,
                "NIC drops during the run: {} ({}); {mine} of them in the generator's RX pipes",
                d.total_drops,
                causes.join(", ")
            )?;
        }
    }
    if let Some(l) = &report.nic_limit {
        writeln!(w, "{}", l.line)?;
    }
    if outcome.is_some_and(|o| o.interrupted) {
        writeln!(w, "interrupted")?;
    }
    Ok(())
}

/// Exit status of a search: 130 when interrupted (what finished is still
/// reported), 1 when a size found no rate without loss, else 0.
pub(super) fn search_status(z: &SearchResult) -> u8 {
    if z.interrupted {
        130
    } else if z.sizes.iter().any(|s| s.rate_gbps.is_none()) {
        1
    } else {
        0
    }
}

pub(super) fn write_search(w: &mut dyn Write, z: &SearchResult) -> io::Result<()> {
    for s in &z.sizes {
        let size = s.size.map_or("traffic".to_string(), |s| format!("{s} B"));
        let n = s.trials.len();
        let trials = format!("{n} trial{}", if n == 1 { "" } else { "s" });
        if !s.finished {
            let best = s
                .rate_gbps
                .map_or(String::new(), |r| format!(", best so far {r:.3} Gb/s"));
            writeln!(w, "zero-loss {size}: interrupted after {trials}{best}")?;
            continue;
        }
        match s.rate_gbps {
            Some(rate) => {
                let mpps = s
                    .rate_mpps
                    .map_or(String::new(), |m| format!(" ({m:.3} Mpps)"));
                writeln!(
                    w,
                    "zero-loss {size}: {rate:.3} Gb/s{mpps}, {trials}{}",
                    if s.converged { "" } else { ", not converged" }
                )?;
            }
            None => writeln!(
                w,
                "zero-loss {size}: no lossless rate found (lowest tried {:.3} Gb/s), {trials}",
                s.lowest_tried_gbps().unwrap_or(0.0)
            )?,
        }
    }
    if z.interrupted {
        writeln!(w, "interrupted")?;
    }
    Ok(())
}

/// What changed in the device's counters between two snapshots; the
/// generator's RX pipes belong to application `rx_app`.
pub fn device_report(
    name: String,
    port: u32,
    rx_app: u32,
    before: Option<&Stats>,
    after: &Stats,
) -> DeviceReport {
    let zero = Stats::default();
    let before = before.unwrap_or(&zero);
    let app_drops = |s: &Stats| {
        let pipes = s
            .apps
            .iter()
            .filter(|a| a.app_id == rx_app)
            .flat_map(|a| &a.pipes);
        pipes.fold((0u64, 0u64), |(f, n), p| {
            (
                f + p.counters.drop_pipe_full,
                n + p.counters.drop_notif_ring_full,
            )
        })
    };
    let (a, b) = (app_drops(after), app_drops(before));
    let generator_drops = BTreeMap::from([
        ("pipe_full".to_string(), a.0.saturating_sub(b.0)),
        ("notif_ring_full".to_string(), a.1.saturating_sub(b.1)),
    ]);
    let old = before.drops();
    let drops: BTreeMap<String, u64> = after
        .drops()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                v.saturating_sub(old.get(k).copied().unwrap_or(0)),
            )
        })
        .collect();
    let ports = after
        .ports
        .iter()
        .map(|p| {
            let b = before
                .ports
                .iter()
                .find(|q| q.port == p.port)
                .map(|q| q.counters.clone())
                .unwrap_or_default();
            PortReport {
                port: p.port,
                wire: p.wire.clone(),
                counters: port_delta(&p.counters, &b),
            }
        })
        .collect();
    DeviceReport {
        name,
        port,
        total_drops: drops.values().sum(),
        drops,
        generator_drops,
        ports,
    }
}

/// `a - b` for every counter (saturating), whatever counters a port has.
fn port_delta(a: &PortCounters, b: &PortCounters) -> PortCounters {
    let (Ok(serde_json::Value::Object(mut av)), Ok(serde_json::Value::Object(bv))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return a.clone();
    };
    for (k, v) in av.iter_mut() {
        if let (Some(x), Some(y)) = (v.as_u64(), bv.get(k).and_then(serde_json::Value::as_u64)) {
            *v = x.saturating_sub(y).into();
        }
    }
    serde_json::from_value(serde_json::Value::Object(av)).unwrap_or_else(|_| a.clone())
}
