//! Counters: per port, per pipe and per application. Every frame the NIC does
//! not deliver is counted under exactly one named cause.
//!
//! The engine thread is the only writer, so counters are plain integers;
//! other threads and processes see snapshots ([`Stats`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Per-port counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCounters {
    /// Frames that arrived from the wire.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames sent onto the wire.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Drops of arriving frames, by cause: no pipe, queue or fallback
    /// matched.
    pub drop_no_match: u64,
    /// Arriving frames whose headers could not be parsed.
    pub drop_malformed: u64,
    /// Arriving frames longer than the largest frame a port carries.
    pub drop_oversize: u64,
    /// Frames sent to a `null` wire.
    pub tx_discarded: u64,
    /// Frames lost because the receiving port's inbound FIFO was full.
    pub drop_wire_fifo_full: u64,
}

/// Per-pipe counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipeCounters {
    /// Frames delivered into the pipe.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames dropped whole because they did not fit (CPU_PKT_BUF_FULL).
    pub drop_pipe_full: u64,
    /// Frames dropped because the notification ring was full (CPU_DSC_BUF_FULL).
    pub drop_notif_ring_full: u64,
    /// Notifications written for the pipe.
    pub notifications: u64,
    /// Head writes (new frames announced to software).
    pub head_writes: u64,
    /// Head writes that carried no new head (notification prefetches).
    pub head_rewrites: u64,
    /// Frames a stream pipe could not carry (not UDP over IPv4/IPv6).
    #[serde(default)]
    pub drop_not_udp: u64,
}

/// Per-queue counters of the packetized interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounters {
    /// Frames delivered to the queue.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames dropped because software had posted no RX descriptor.
    pub drop_no_descriptor: u64,
    /// Frames dropped because the RX descriptor pointed outside the region.
    pub drop_bad_descriptor: u64,
    /// Frames sent from the queue.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// TX descriptors refused (bad address, length or flags).
    pub tx_bad_descriptor: u64,
}

impl QueueCounters {
    /// Adds `o` to these counters.
    pub fn add(&mut self, o: &QueueCounters) {
        self.rx_frames += o.rx_frames;
        self.rx_bytes += o.rx_bytes;
        self.drop_no_descriptor += o.drop_no_descriptor;
        self.drop_bad_descriptor += o.drop_bad_descriptor;
        self.tx_frames += o.tx_frames;
        self.tx_bytes += o.tx_bytes;
        self.tx_bad_descriptor += o.tx_bad_descriptor;
    }
}

/// Per-application counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppCounters {
    /// Register writes taken from the posted-write queue.
    pub mmio_writes: u64,
    /// RX notifications written.
    pub rx_notifications: u64,
    /// TX notifications taken.
    pub tx_notifications: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Configuration notifications taken.
    pub config_notifications: u64,
    /// Register writes outside the application's own queues, or to no
    /// register.
    pub reject_foreign_register: u64,
    /// Register values out of range (head beyond the ring, head outside
    /// `[head, tail]`, misaligned or out-of-region addresses), and
    /// posted-write queue producers more than the queue's length ahead of
    /// the consumer (or behind it).
    pub reject_bad_register_value: u64,
    /// TX notifications pointing outside the region, too long, or with an
    /// unknown signal.
    pub reject_bad_tx_notification: u64,
    /// Frames in TX data whose headers could not be delimited.
    pub reject_bad_tx_frame: u64,
    /// TX bytes dropped with such a frame: its own and the rest of its
    /// notification, where the NIC cannot find where the next frame starts.
    #[serde(default)]
    pub tx_bytes_discarded: u64,
    /// Configuration notifications that were refused.
    pub reject_bad_config: u64,
    /// Descriptors (RX or TX) refused.
    pub reject_bad_descriptor: u64,
    /// Notifications not written because the RX notification ring was full
    /// when a head write asked for one.
    pub notif_ring_full: u64,
    /// TX notifications not carried out when the application detached (a
    /// rate limit or a full cable held them back).
    #[serde(default)]
    pub tx_notifications_discarded: u64,
    /// TX descriptors not transmitted when the application detached.
    #[serde(default)]
    pub tx_descriptors_discarded: u64,
}

/// Round-trip times the built-in generator measured (ns).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Round trips measured.
    pub count: u64,
    /// Shortest.
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Longest.
    pub max_ns: u64,
    /// Mean.
    pub mean_ns: u64,
}

/// Counters of a built-in generator port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratorCounters {
    /// Frames sent.
    pub sent: u64,
    /// Bytes of those frames.
    pub sent_bytes: u64,
    /// Frames that came back and verified.
    pub returned: u64,
    /// Bytes of the frames that came back and verified.
    pub returned_bytes: u64,
    /// Frames that came back with wrong bytes.
    pub corrupt: u64,
    /// Frames that came back more than once.
    pub duplicate: u64,
    /// Frames that came back but were not this generator's test frames.
    pub foreign: u64,
    /// Frames the NIC dropped as they arrived from this generator (no pipe
    /// or queue matched, no room, ...; counted by cause in the port's and
    /// pipes' counters too). They will not come back, so they leave the
    /// in-flight window.
    #[serde(default)]
    pub dropped_on_arrival: u64,
    /// Round-trip times since the last reset, when timestamping is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
}

impl GeneratorCounters {
    /// Frames sent and not yet accounted for (back, corrupt, duplicate or dropped).
    pub fn in_flight(&self) -> u64 {
        self.sent
            .saturating_sub(self.returned + self.corrupt + self.duplicate + self.dropped_on_arrival)
    }
}

/// The counters of one port.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PortStats {
    /// The port number.
    pub port: usize,
    /// How it is wired.
    pub wire: String,
    /// Its counters.
    pub counters: PortCounters,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Its generator's counters, for a generator port.
    pub generator: Option<GeneratorCounters>,
    /// A backend wire's own counters (not drops), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub wire_stats: BTreeMap<String, u64>,
    /// Frames a backend wire lost, by cause; summed as `wire` in
    /// [`Stats::drops`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub wire_drops: BTreeMap<String, u64>,
}

/// The counters of one pipe.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PipeStats {
    /// The pipe's number.
    pub pipe_id: u32,
    /// Its counters.
    pub counters: PipeCounters,
}

/// The counters of one descriptor queue.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QueueStats {
    /// The queue's number.
    pub queue_id: u32,
    /// Its counters.
    pub counters: QueueCounters,
}

/// The counters of one attached application.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AppStats {
    /// The application's id.
    pub app_id: u32,
    /// Its counters.
    pub counters: AppCounters,
    /// Its pipes' counters.
    pub pipes: Vec<PipeStats>,
    /// Its descriptor queues' counters.
    #[serde(default)]
    pub queues: Vec<QueueStats>,
}

/// Engine activity.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineCounters {
    /// Engine steps taken.
    pub steps: u64,
    /// Steps that found work.
    pub busy_steps: u64,
    /// Time spent in steps that found work.
    pub busy_ns: u64,
    /// Frames the engine moved into pipes or onto the wire.
    pub frames: u64,
    /// Whether the engine evicts pipe lines ahead of the tail at the
    /// moment ([`crate::HostTuning::evict_ahead_lines`]).
    #[serde(default)]
    pub evict_ahead_on: bool,
    /// How the engine writes frames of one or two lines into frame pipes
    /// at the moment (see [`PipeWriteMode`]).
    #[serde(default)]
    pub pipe_writes: PipeWriteMode,
    /// Times the engine changed its mind about evicting ahead
    /// ([`crate::HostTuning::evict_ahead_adaptive`]).
    #[serde(default)]
    pub evict_ahead_switches: u64,
    /// Of `frames`, those the generator's runs wrote (frames that follow
    /// one to the same pipe or queue, written without deciding again what
    /// the first needed decided): a measure of the emulator's own work,
    /// not of the NIC's.
    #[serde(default)]
    pub run_frames: u64,
    /// Times the engine thread slept for want of work (parked), and of
    /// those, the sleeps a wake-up ended (an application's register
    /// write, a command) rather than their time limit.
    #[serde(default)]
    pub parks: u64,
    /// Parks a wake-up ended (see `parks`).
    #[serde(default)]
    pub park_wakeups: u64,
    /// Wake-ups the engine sent to applications waiting for their pipes.
    #[serde(default)]
    pub app_wakeups: u64,
}

impl EngineCounters {
    /// Whether the engine evicts ahead and how often it changed its mind,
    /// for reports: `on (0 changes)`.
    pub fn pipe_writes_summary(&self) -> String {
        format!(
            "{} ({} changes)",
            self.pipe_writes.name(),
            self.evict_ahead_switches
        )
    }
}

/// How the engine writes frames of one or two lines into a frame pipe.
/// Which is cheapest depends on where the host places the engine's and
/// the application's CPUs; by default the engine measures and keeps the
/// cheapest (see the engine's `evict` module). What the application reads
/// is the same either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PipeWriteMode {
    /// Ordinary stores.
    #[default]
    Plain,
    /// Ordinary stores, with the pipe's lines evicted from the engine's
    /// caches some way ahead of the tail.
    EvictAhead,
    /// Non-temporal stores, which bypass the caches as a DMA write does.
    NonTemporal,
    /// Ordinary stores, with the pipe's lines prefetched for writing
    /// (`prefetchw`) some way ahead of the tail, so that taking them from
    /// the application's caches is under way before the store.
    PrefetchAhead,
}

impl PipeWriteMode {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            PipeWriteMode::Plain => "plain",
            PipeWriteMode::EvictAhead => "evict ahead",
            PipeWriteMode::NonTemporal => "non-temporal",
            PipeWriteMode::PrefetchAhead => "prefetch ahead",
        }
    }
}

/// A snapshot of all counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    /// The device's name.
    pub device: String,
    /// The engine's own activity.
    pub engine: EngineCounters,
    /// Each port's counters.
    pub ports: Vec<PortStats>,
    /// Each attached application's counters.
    pub apps: Vec<AppStats>,
    /// Counters of pipes whose application has gone, kept so totals add up.
    pub detached_pipes: PipeCounters,
    /// Counters of applications that have gone.
    pub detached_apps: AppCounters,
    /// Counters of descriptor queues whose application has gone.
    #[serde(default)]
    pub detached_queues: QueueCounters,
    /// PCIe transactions, by direction and kind.
    pub pcie: pcie_model::PcieCounters,
    /// Installed flow rules and fallback pipes.
    pub flow_rules: usize,
    /// Fallback pipes installed.
    pub fallback_pipes: usize,
}

impl Stats {
    /// Every frame the NIC dropped, by cause (stable names): arriving frames,
    /// frames software sent that it refused (`tx_bad_frame`,
    /// `tx_bad_descriptor`), and TX notifications and descriptors still
    /// held back (by a rate limit or a full cable) when their application
    /// detached (`tx_notifications_discarded_on_detach`,
    /// `tx_descriptors_discarded_on_detach`).
    pub fn drops(&self) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        // Saturating: a stats file from elsewhere may hold any values.
        let mut add = |k: &'static str, v: u64| {
            let e = m.entry(k).or_insert(0u64);
            *e = e.saturating_add(v);
        };
        for p in &self.ports {
            add("no_match", p.counters.drop_no_match);
            add("malformed", p.counters.drop_malformed);
            add("oversize", p.counters.drop_oversize);
            add("wire_fifo_full", p.counters.drop_wire_fifo_full);
            for v in p.wire_drops.values() {
                add("wire", *v);
            }
        }
        let mut pipe = |c: &PipeCounters| {
            add("pipe_full", c.drop_pipe_full);
            add("notif_ring_full", c.drop_notif_ring_full);
            add("stream_not_udp", c.drop_not_udp);
        };
        for a in &self.apps {
            for p in &a.pipes {
                pipe(&p.counters);
            }
        }
        pipe(&self.detached_pipes);
        // Frames software sent that the NIC refused, and TX work it had
        // handed over but that was still held back when it detached.
        for c in self
            .apps
            .iter()
            .map(|a| &a.counters)
            .chain([&self.detached_apps])
        {
            add("tx_bad_frame", c.reject_bad_tx_frame);
            add(
                "tx_notifications_discarded_on_detach",
                c.tx_notifications_discarded,
            );
            add(
                "tx_descriptors_discarded_on_detach",
                c.tx_descriptors_discarded,
            );
        }
        let mut queue = |c: &QueueCounters| {
            add("no_rx_descriptor", c.drop_no_descriptor);
            add("bad_descriptor", c.drop_bad_descriptor);
            add("tx_bad_descriptor", c.tx_bad_descriptor);
        };
        for a in &self.apps {
            for q in &a.queues {
                queue(&q.counters);
            }
        }
        queue(&self.detached_queues);
        m
    }

    /// Sum over descriptor queues of a queue counter.
    pub fn queue_sum(&self, f: impl Fn(&QueueCounters) -> u64) -> u64 {
        self.apps
            .iter()
            .flat_map(|a| a.queues.iter())
            .map(|q| f(&q.counters))
            .sum::<u64>()
            + f(&self.detached_queues)
    }

    /// Sum of [`Stats::drops`].
    pub fn total_drops(&self) -> u64 {
        self.drops().values().sum()
    }

    /// Sum over pipes of a pipe counter.
    pub fn pipe_sum(&self, f: impl Fn(&PipeCounters) -> u64) -> u64 {
        self.apps
            .iter()
            .flat_map(|a| a.pipes.iter())
            .map(|p| f(&p.counters))
            .sum::<u64>()
            + f(&self.detached_pipes)
    }

    /// Sum over applications of an application counter.
    pub fn app_sum(&self, f: impl Fn(&AppCounters) -> u64) -> u64 {
        self.apps.iter().map(|a| f(&a.counters)).sum::<u64>() + f(&self.detached_apps)
    }

    /// The counters of generator port `port`, if it has one.
    pub fn generator(&self, port: usize) -> Option<&GeneratorCounters> {
        self.ports.get(port)?.generator.as_ref()
    }
}

impl AppCounters {
    /// Adds `o` to these counters.
    pub fn add(&mut self, o: &AppCounters) {
        self.mmio_writes += o.mmio_writes;
        self.rx_notifications += o.rx_notifications;
        self.tx_notifications += o.tx_notifications;
        self.tx_frames += o.tx_frames;
        self.tx_bytes += o.tx_bytes;
        self.config_notifications += o.config_notifications;
        self.reject_foreign_register += o.reject_foreign_register;
        self.reject_bad_register_value += o.reject_bad_register_value;
        self.reject_bad_tx_notification += o.reject_bad_tx_notification;
        self.reject_bad_tx_frame += o.reject_bad_tx_frame;
        self.tx_bytes_discarded += o.tx_bytes_discarded;
        self.tx_notifications_discarded += o.tx_notifications_discarded;
        self.tx_descriptors_discarded += o.tx_descriptors_discarded;
        self.reject_bad_config += o.reject_bad_config;
        self.reject_bad_descriptor += o.reject_bad_descriptor;
        self.notif_ring_full += o.notif_ring_full;
    }
}

impl PipeCounters {
    /// Adds `o` to these counters.
    pub fn add(&mut self, o: &PipeCounters) {
        self.rx_frames += o.rx_frames;
        self.rx_bytes += o.rx_bytes;
        self.drop_pipe_full += o.drop_pipe_full;
        self.drop_notif_ring_full += o.drop_notif_ring_full;
        self.notifications += o.notifications;
        self.head_writes += o.head_writes;
        self.head_rewrites += o.head_rewrites;
        self.drop_not_udp += o.drop_not_udp;
    }
}
