//! The NIC's own counters of a port and of the handle's pipes (DPDK's
//! `rte_eth_stats_get`, AF_XDP's `XDP_STATISTICS`).
//!
//! The NIC keeps them, not the library: a device in this process answers
//! when asked (a call to its engine thread); a standalone device writes
//! them to `stats.json` in its directory every 200 ms, and that snapshot is
//! what a handle opened with [`Device::open`] reads (so it may be that
//! old). Not for the datapath: each call reads and parses the snapshot.

use std::io::Read;

use enso_abi::control::STATS_FILE;

use super::liveness::Keepalive;
use super::{Device, RxPipe};
use crate::error::StatsError;

/// A `stats.json` larger than this is refused (a snapshot of thousands of
/// pipes is far smaller).
const MAX_STATS_BYTES: u64 = 64 << 20;

/// Frames a port dropped, by cause (the NIC's counters).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortDrops {
    /// Arriving frames that matched no flow rule, with no fallback pipe.
    pub no_match: u64,
    /// Arriving frames the NIC could not parse.
    pub malformed: u64,
    /// Arriving frames longer than the NIC takes.
    pub oversize: u64,
    /// Arriving frames dropped because the port's wire queue was full.
    pub wire_fifo_full: u64,
    /// Frames the wire itself dropped (its backend's counts, summed).
    pub wire: u64,
    /// Frames to send that the port discarded.
    pub tx_discarded: u64,
}

/// What the NIC counted for one pipe of this handle.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PipeDrops {
    /// The pipe.
    #[serde(skip)]
    pub pipe: RxPipe,
    /// Its global (device) id.
    pub pipe_id: u32,
    /// Frames written into it.
    pub rx_frames: u64,
    /// Frames dropped because it was full (software did not free fast
    /// enough).
    pub pipe_full: u64,
    /// Frames dropped because the handle's notification ring was full.
    pub notif_ring_full: u64,
    /// Frames a stream pipe dropped for not being UDP.
    pub not_udp: u64,
}

/// A port's counters as the NIC keeps them, and the drops of each of the
/// handle's pipes ([`Device::port_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortStats {
    /// The port.
    pub port: u32,
    /// Frames received on the port.
    pub rx_frames: u64,
    /// Bytes received on the port.
    pub rx_bytes: u64,
    /// Frames sent on the port.
    pub tx_frames: u64,
    /// Bytes sent on the port.
    pub tx_bytes: u64,
    /// Frames the port dropped, by cause.
    pub drops: PortDrops,
    /// Each pipe of this handle, in allocation order (pipes of every port:
    /// the NIC counts them per pipe).
    pub pipes: Vec<PipeDrops>,
}

impl PortStats {
    /// Every frame dropped: the port's drops and its pipes'.
    pub fn dropped(&self) -> u64 {
        let d = &self.drops;
        let pipes: u64 = self
            .pipes
            .iter()
            .map(|p| p.pipe_full + p.notif_ring_full + p.not_udp)
            .sum();
        d.no_match + d.malformed + d.oversize + d.wire_fifo_full + d.wire + d.tx_discarded + pipes
    }
}

// The part of the NIC's snapshot read here; anything else in it is ignored,
// and a counter it lacks reads 0.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Snapshot {
    ports: Vec<SnapPort>,
    apps: Vec<SnapApp>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SnapPort {
    port: usize,
    counters: SnapPortCounters,
    wire_drops: std::collections::BTreeMap<String, u64>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SnapPortCounters {
    rx_frames: u64,
    rx_bytes: u64,
    tx_frames: u64,
    tx_bytes: u64,
    drop_no_match: u64,
    drop_malformed: u64,
    drop_oversize: u64,
    tx_discarded: u64,
    drop_wire_fifo_full: u64,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SnapApp {
    app_id: u32,
    pipes: Vec<SnapPipe>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SnapPipe {
    pipe_id: u32,
    counters: SnapPipeCounters,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SnapPipeCounters {
    rx_frames: u64,
    drop_pipe_full: u64,
    drop_notif_ring_full: u64,
    drop_not_udp: u64,
}

/// Reads a standalone device's snapshot: a regular file of bounded size.
fn read_snapshot(dir: &std::path::Path) -> Result<String, String> {
    let p = dir.join(STATS_FILE);
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
    let meta = std::fs::metadata(&p).map_err(|e| err(&e))?;
    if !meta.is_file() {
        return Err(err(&"not a regular file"));
    }
    let mut s = String::new();
    std::fs::File::open(&p)
        .and_then(|f| f.take(MAX_STATS_BYTES + 1).read_to_string(&mut s))
        .map_err(|e| err(&e))?;
    if s.len() as u64 > MAX_STATS_BYTES {
        return Err(err(&format!("larger than {MAX_STATS_BYTES} bytes")));
    }
    Ok(s)
}

impl Device {
    /// The NIC's counters of `port`: frames and bytes each way, drops by
    /// cause, and the drops of each pipe of this handle (see the module's
    /// notes on how fresh they are). Not for the datapath: one call reads
    /// and parses the NIC's snapshot.
    pub fn port_stats(&self, port: u32) -> Result<PortStats, StatsError> {
        if port as usize >= self.info.ports {
            return Err(StatsError::NoPort(port));
        }
        let json = match (&self._keep, &self.devdir) {
            (Keepalive::Control(nic, _), _) => nic.stats_json().map_err(|e| e.to_string()),
            (_, Some(dir)) => read_snapshot(dir),
            _ => Err("a stepped engine: ask it for its counters".into()),
        }
        .map_err(StatsError::Unavailable)?;
        let snap: Snapshot = serde_json::from_str(&json).map_err(|e| {
            let mut m = e.to_string();
            // serde quotes the offending value whole: keep the line short.
            let cut = (0..=m.len().min(200))
                .rev()
                .find(|&i| m.is_char_boundary(i))
                .unwrap_or(0);
            m.truncate(cut);
            StatsError::Unavailable(format!("the NIC's counters: {m}"))
        })?;
        let sp = snap
            .ports
            .iter()
            .find(|p| p.port == port as usize)
            .ok_or_else(|| StatsError::Unavailable(format!("the NIC counted no port {port}")))?;
        let c = &sp.counters;
        let app = snap.apps.iter().find(|a| a.app_id == self.info.app_id);
        let pipes = self
            .pipes
            .iter()
            .enumerate()
            .map(|(i, sw)| {
                let pc = app
                    .and_then(|a| a.pipes.iter().find(|p| p.pipe_id == sw.id))
                    .map(|p| &p.counters);
                let get = |f: fn(&SnapPipeCounters) -> u64| pc.map_or(0, f);
                PipeDrops {
                    pipe: RxPipe {
                        dev: self.uid,
                        idx: i as u32,
                    },
                    pipe_id: sw.id,
                    rx_frames: get(|c| c.rx_frames),
                    pipe_full: get(|c| c.drop_pipe_full),
                    notif_ring_full: get(|c| c.drop_notif_ring_full),
                    not_udp: get(|c| c.drop_not_udp),
                }
            })
            .collect();
        Ok(PortStats {
            port,
            rx_frames: c.rx_frames,
            rx_bytes: c.rx_bytes,
            tx_frames: c.tx_frames,
            tx_bytes: c.tx_bytes,
            drops: PortDrops {
                no_match: c.drop_no_match,
                malformed: c.drop_malformed,
                oversize: c.drop_oversize,
                wire_fifo_full: c.drop_wire_fifo_full,
                wire: sp
                    .wire_drops
                    .values()
                    .fold(0u64, |a, v| a.saturating_add(*v)),
                tx_discarded: c.tx_discarded,
            },
            pipes,
        })
    }
}
