//! Device settings.

use std::path::PathBuf;

use netview::mix64;
use serde::{Deserialize, Serialize};

use crate::testframe::FrameKind;

pub use enso_abi::control::NotificationMode;

/// Why a device's settings were refused; each message names the setting.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A size mix without sizes.
    #[error("empty size mix")]
    EmptySizeMix,
    /// A size range whose low end is above its high end.
    #[error("size range lo > hi")]
    SizeRange,
    /// A generator rate that is not a finite number above zero.
    #[error("generator rate {0} pps: must be a finite number above 0")]
    Rate(f64),
    /// A generator burst outside `1..=`[`MAX_GENERATOR_BURST`].
    #[error("generator burst {0}: must be in 1..={MAX_GENERATOR_BURST} frames per engine step")]
    Burst(usize),
    /// A delay above [`MAX_DELAY_NS`].
    #[error("{what} must be in 0..={MAX_DELAY_NS} ns (at most 1 s), not {ns}")]
    Delay {
        /// Which delay.
        what: String,
        /// The value given.
        ns: u64,
    },
    /// A replay without frames.
    #[error("replay without frames")]
    NoReplayFrames,
    /// A replayed frame that is not a whole Ethernet frame.
    #[error(
        "replay frame {index}: {len} bytes, not in {}..={}",
        crate::wire::MIN_FRAME,
        crate::wire::MAX_FRAME
    )]
    ReplayFrameSize {
        /// Its position among the frames.
        index: usize,
        /// Its length.
        len: usize,
    },
    /// A generator without frame kinds.
    #[error("generator without frame kinds")]
    NoFrameKinds,
    /// A generator with zero flows.
    #[error("generator flows 0: must be at least 1")]
    NoFlows,
    /// A generator that would send no frame.
    #[error("generator count 0 sends nothing (leave it out for no limit)")]
    CountZero,
    /// A generator whose in-flight window lets no frame out.
    #[error("generator in-flight window 0 sends nothing (leave it out for no limit)")]
    InFlightZero,
    /// Timestamps asked of replayed frames.
    #[error("generator timestamps need its own test frames, not replayed ones")]
    ReplayTimestamps,
    /// A pipe size that is not a power of two of at least a page.
    #[error("pipe size {0} must be a power of two of at least 4096")]
    PipeSize(usize),
    /// A pipe size above 1 GiB.
    #[error("pipe size above 1 GiB")]
    PipeTooLarge,
    /// Notification ring entries that are not a power of two of at least 64.
    #[error("notification ring entries must be a power of two >= 64")]
    RingEntries,
    /// Notification rings too large for the device's DMA limit.
    #[error(
        "notification rings of {entries} entries with one pipe need a DMA region of {need} bytes, above the device limit of {limit} bytes{hint}"
    )]
    RingsTooLarge {
        /// Entries asked for.
        entries: u32,
        /// Bytes the smallest region needs.
        need: usize,
        /// The device's limit (bytes).
        limit: usize,
        /// The largest ring that fits, when one does (or nothing).
        hint: String,
    },
    /// A device name that cannot name a device directory.
    #[error("{0}")]
    Name(String),
    /// A port's own setting, refused.
    #[error("port {port}: {error}")]
    Port {
        /// The port.
        port: usize,
        /// What is wrong with it.
        error: Box<ConfigError>,
    },
    /// A cable to a port that does not exist.
    #[error(
        "port {port}: cable to port {peer}, which does not exist (ports are 0..={last}, one per --port)"
    )]
    NoPeer {
        /// The port.
        port: usize,
        /// The port it is cabled to.
        peer: usize,
        /// The last port there is.
        last: usize,
    },
    /// Evicting further ahead than half a pipe.
    #[error("evicting {lines} lines ahead: at most half a pipe ({most} lines)")]
    EvictAhead {
        /// Lines asked for.
        lines: u32,
        /// The most allowed.
        most: usize,
    },
    /// A descriptor batch of zero.
    #[error("desc_fetch and desc_writeback must be at least 1")]
    DescBatch,
    /// More ports than the device has.
    #[error("at most 16 ports")]
    TooManyPorts,
    /// No port.
    #[error("a device needs at least one port")]
    NoPorts,
    /// A PCIe link no real device could negotiate.
    #[error("PCIe link: {0}")]
    Link(pcie_model::LinkConfigError),
}

impl From<ConfigError> for String {
    fn from(e: ConfigError) -> Self {
        e.to_string()
    }
}

/// Frame sizes the built-in generator sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeSpec {
    /// Every frame of this many bytes.
    Fixed(usize),
    /// Chosen per frame, pseudo-randomly from the sequence number.
    Mix(Vec<usize>),
    /// Uniform in `[lo, hi]`, pseudo-randomly from the sequence number.
    Range(usize, usize),
}

impl SizeSpec {
    /// The size of frame number `seq`.
    #[inline]
    pub fn size_for(&self, seq: u64) -> usize {
        match self {
            SizeSpec::Fixed(n) => *n,
            SizeSpec::Mix(v) => v[(mix64(seq) % v.len() as u64) as usize],
            SizeSpec::Range(lo, hi) => lo + (mix64(seq) % (hi - lo + 1) as u64) as usize,
        }
    }
    /// Checks the sizes; the error names what is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            SizeSpec::Fixed(_) => Ok(()),
            SizeSpec::Mix(v) if v.is_empty() => Err(ConfigError::EmptySizeMix),
            SizeSpec::Mix(_) => Ok(()),
            SizeSpec::Range(lo, hi) if lo > hi => Err(ConfigError::SizeRange),
            SizeSpec::Range(..) => Ok(()),
        }
    }
}

/// Checks a generator rate (frames per second): it must be a finite number
/// above zero (pacing computes from it the frames due so far).
pub fn check_rate_pps(pps: f64) -> Result<f64, ConfigError> {
    if pps.is_finite() && pps > 0.0 {
        Ok(pps)
    } else {
        Err(ConfigError::Rate(pps))
    }
}

/// Most frames a generator sends in one engine step (`burst`). The
/// generator sends its whole burst inside one step, with no other budget
/// (other ports move at most 64 frames per step): a larger burst only makes
/// steps long, and a huge one makes a step that never ends, so the device can
/// neither apply register writes nor stop. 4096 is what a port's wire FIFO
/// holds ([`crate::port::WIRE_FIFO_FRAMES`]; the engine checks at compile
/// time that the two agree, so the configuration does not depend on the
/// ports).
pub const MAX_GENERATOR_BURST: usize = 4096;

/// Longest emulated one-way interconnect latency and cable delay (ns): 1 s.
/// Software waits a few seconds for the device to apply a register write,
/// and a delay near `u64::MAX` would overflow the time a frame or write
/// becomes visible.
pub const MAX_DELAY_NS: u64 = 1_000_000_000;

/// Checks a generator burst (frames per engine step): in
/// `1..=`[`MAX_GENERATOR_BURST`].
pub fn check_burst(burst: usize) -> Result<usize, ConfigError> {
    if (1..=MAX_GENERATOR_BURST).contains(&burst) {
        Ok(burst)
    } else {
        Err(ConfigError::Burst(burst))
    }
}

/// Checks a delay in ns (`what` names it): at most [`MAX_DELAY_NS`].
pub fn check_delay_ns(what: &str, ns: u64) -> Result<u64, ConfigError> {
    if ns <= MAX_DELAY_NS {
        Ok(ns)
    } else {
        Err(ConfigError::Delay {
            what: what.to_string(),
            ns,
        })
    }
}

/// How thoroughly the generator checks frames that come back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyLevel {
    /// Every byte, and duplicates (when the count is bounded).
    #[default]
    Full,
    /// Magic, sequence number and duplicates only.
    Sequence,
}

/// The built-in traffic generator and sink of a port (the "hardware
/// tester"): sends test frames into the NIC and checks what the NIC sends back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GeneratorConfig {
    /// Frame sizes.
    pub sizes: SizeSpec,
    /// Frame kinds, chosen per frame from the sequence number.
    pub kinds: Vec<FrameKind>,
    /// Flows the frames are spread over.
    pub flows: u32,
    /// Frames per second; `None` sends as fast as the engine can.
    pub rate_pps: Option<f64>,
    /// Total frames to send; `None` for no limit.
    pub count: Option<u64>,
    /// Most frames sent but not yet back; `None` for no limit.
    pub max_in_flight: Option<u64>,
    /// How thoroughly frames that come back are checked.
    pub verify: VerifyLevel,
    /// What an echo server adds to the echo byte.
    pub echo_increment: u8,
    /// Frames per engine step at most.
    pub burst: usize,
    /// Distinguishes generators in frames they send.
    pub stream: u8,
    /// Start without sending until [`crate::Engine::set_generators_paused`]
    /// releases it (so traffic starts once applications are ready).
    #[serde(default)]
    pub paused: bool,
    /// Stamp IPv4 frames with their send time (bytes 18..22, the IPv4
    /// identification and flags, as the real NIC's timestamping does) and
    /// record round-trip times of the frames that come back.
    #[serde(default)]
    pub timestamps: bool,
    /// Send these frames, in order and over and over, instead of test
    /// frames (`sizes`, `kinds` and `flows` are then unused): a captured or
    /// prepared workload, e.g. a log cut into UDP packets or a request
    /// trace. Frames that come back are counted as returned, not checked.
    /// Set through the API only (not serialized).
    #[serde(skip)]
    pub replay: Option<ReplayFrames>,
}

/// Frames a generator replays (see [`GeneratorConfig::replay`]); cheap to
/// clone (shared).
#[derive(Clone, PartialEq, Eq)]
pub struct ReplayFrames(std::sync::Arc<[Box<[u8]>]>);

impl ReplayFrames {
    /// The frames, checked: at least one, each a whole Ethernet frame of
    /// [`crate::wire::MIN_FRAME`]..=[`crate::wire::MAX_FRAME`] bytes (without FCS).
    pub fn new(frames: Vec<Box<[u8]>>) -> Result<Self, ConfigError> {
        if frames.is_empty() {
            return Err(ConfigError::NoReplayFrames);
        }
        if let Some((i, f)) = frames
            .iter()
            .enumerate()
            .find(|(_, f)| !(crate::wire::MIN_FRAME..=crate::wire::MAX_FRAME).contains(&f.len()))
        {
            return Err(ConfigError::ReplayFrameSize {
                index: i,
                len: f.len(),
            });
        }
        Ok(Self(frames.into()))
    }

    /// The frames, in sending order.
    pub fn frames(&self) -> &[Box<[u8]>] {
        &self.0
    }
}

impl std::fmt::Debug for ReplayFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bytes: usize = self.0.iter().map(|b| b.len()).sum();
        write!(f, "ReplayFrames({} frames, {bytes} bytes)", self.0.len())
    }
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            sizes: SizeSpec::Fixed(64),
            kinds: vec![FrameKind::Ipv4Udp],
            flows: 1,
            rate_pps: None,
            count: None,
            max_in_flight: None,
            verify: VerifyLevel::Full,
            echo_increment: 1,
            burst: 32,
            stream: 0,
            paused: false,
            timestamps: false,
            replay: None,
        }
    }
}

impl GeneratorConfig {
    /// Checks the settings; the error names the offending one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.sizes.validate()?;
        if self.kinds.is_empty() {
            return Err(ConfigError::NoFrameKinds);
        }
        if self.flows == 0 {
            return Err(ConfigError::NoFlows);
        }
        check_burst(self.burst)?;
        if self.count == Some(0) {
            return Err(ConfigError::CountZero);
        }
        if self.max_in_flight == Some(0) {
            return Err(ConfigError::InFlightZero);
        }
        if let Some(r) = self.rate_pps {
            check_rate_pps(r)?;
        }
        if self.replay.is_some() && self.timestamps {
            return Err(ConfigError::ReplayTimestamps);
        }
        Ok(())
    }
}

/// What is at the other end of a port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireConfig {
    /// Frames sent on the port are dropped (and counted).
    Null,
    /// Frames sent on the port come back into it.
    Loopback,
    /// A cable to another port of the same device (or to itself: a
    /// loopback), with a propagation delay.
    Cable {
        /// The port at the other end.
        peer: usize,
        /// One-way delay of the cable (ns).
        #[serde(default)]
        delay_ns: u64,
    },
    /// The built-in traffic generator and sink.
    Generator(GeneratorConfig),
    /// Capture files: frames replayed in, frames sent written out.
    Pcap(crate::backend::pcap::PcapWire),
    /// A TAP device the NIC creates: the kernel's network stack.
    Tap(crate::backend::tap::TapWire),
    /// An existing Linux interface, through AF_PACKET rings.
    AfPacket(crate::backend::afpacket::AfPacketWire),
    /// DPDK's or VPP's shared-memory packet interface.
    Memif(crate::backend::memif::MemifWire),
}

/// Device settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceConfig {
    /// The device's name (its directory is `enso-<name>`).
    pub name: String,
    /// Directory under which the device directory `<dir>/<name>` is made.
    pub dir: PathBuf,
    /// Bytes per pipe (power of two, at least one page). Real NIC: 2 MiB.
    pub pipe_size: usize,
    /// Entries per notification ring (power of two). Real NIC: 16384.
    pub notif_ring_entries: u32,
    /// When the NIC writes RX notifications.
    pub notification_mode: NotificationMode,
    /// Each port's wiring, in port order.
    pub ports: Vec<WireConfig>,
    /// Emulated one-way interconnect latency in ns (0: none).
    pub interconnect_latency_ns: u64,
    /// Largest DMA region an application may ask for.
    pub max_dma_bytes: usize,
    /// PCIe link used for transaction accounting.
    pub pcie: pcie_model::LinkConfig,
    /// Packetized interface: descriptors the NIC fetches per read.
    pub desc_fetch: u32,
    /// Packetized interface: RX descriptor write-backs per TLP at most.
    pub desc_writeback: u32,
    /// How the engine works around running on a CPU core rather than in
    /// silicon (see [`HostTuning`]); serialised flat, beside the NIC's
    /// own settings.
    #[serde(flatten)]
    pub tuning: HostTuning,
}

/// Settings that exist only because this NIC is emulated on a CPU core
/// that shares caches, and a memory system built for CPUs, with the
/// application's core. A device writes into host memory over PCIe: its
/// writes invalidate the CPU's copies and it keeps no cache lines of its
/// own; it reads registers when they are written. A core does neither by
/// itself, so the engine (a) applies posted register writes in batches
/// rather than after every frame, since looking costs it cache-line
/// transfers a device does not pay, and (b) evicts, prefetches or
/// bypasses cache lines so that its writes into pipes and its reads of
/// TX data leave the lines where a device's DMA would. None of these
/// changes what an application sees; they change how fast the emulation
/// runs, and which way is fastest depends on where the host places the
/// two cores. `docs/design/host-tuning.md` explains each and how its
/// default was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTuning {
    /// While the engine is busy it applies posted register writes (head and
    /// tail updates, doorbells) after writing this many flits of frames (at
    /// most an eighth of a pipe)...
    #[serde(default = "default_register_poll_flits")]
    pub register_poll_flits: u32,
    /// ...or after this many ns, whichever comes first. When it has nothing
    /// else to do it looks every step. Like the interconnect latency of a
    /// real NIC, this only delays when a register write takes effect; 0 for
    /// either makes the engine look every step.
    #[serde(default = "default_register_poll_ns")]
    pub register_poll_ns: u64,
    /// For each single-line (64 B) frame written into a frame pipe, the
    /// engine evicts from its own caches the pipe line this many lines
    /// ahead, so that its write there, like a device's, does not find a
    /// stale copy of its own (0: never; a no-op on CPUs without
    /// `clflushopt`). Stream pipes get the same, four times further
    /// ahead. See the engine's `evict` module for why and when.
    #[serde(default = "default_evict_ahead_lines")]
    pub evict_ahead_lines: u32,
    /// Whether the engine picks how to write short frames itself (true:
    /// where the CPU has `prefetchw` it prefetches the lines ahead for
    /// writing; elsewhere it compares, while it runs, its cost per frame
    /// with and without evicting ahead, and with non-temporal stores, and
    /// keeps the cheapest), or always evicts (false: the same work on every
    /// run, for instruction and cache profiles). Which is cheaper depends on where the host places
    /// the engine's and the application's CPUs, and can change during a
    /// run. See the engine's `evict` module.
    #[serde(default = "default_true")]
    pub evict_ahead_adaptive: bool,
    /// Fixes how frames of one or two lines are written into frame pipes
    /// (`None`: as `evict_ahead_adaptive` says). For experiments that
    /// compare the ways, or need the same one throughout; overrides
    /// `evict_ahead_adaptive`. See [`crate::PipeWriteMode`].
    #[serde(default)]
    pub pipe_writes: Option<crate::PipeWriteMode>,
    /// After transmitting a TX notification's data that lies outside every
    /// RX pipe of the application (a TX pipe's, not frames sent back in
    /// place), the engine evicts those lines from its own caches, so that
    /// the application's next write there, as after a device's DMA read,
    /// does not have to invalidate a copy in the engine's core (a no-op on
    /// CPUs without `clflushopt`). See the engine's `evict` module.
    #[serde(default = "default_true")]
    pub evict_tx_lines: bool,
}

impl Default for HostTuning {
    fn default() -> Self {
        Self {
            register_poll_flits: default_register_poll_flits(),
            register_poll_ns: default_register_poll_ns(),
            evict_ahead_lines: default_evict_ahead_lines(),
            evict_ahead_adaptive: true,
            pipe_writes: None,
            evict_tx_lines: true,
        }
    }
}

fn default_true() -> bool {
    true
}

/// Default of [`HostTuning::evict_ahead_lines`]: 1 KiB ahead (the best
/// of 4..=1024 for 64 B echo and rx on the development machine; 4 and 8
/// were much slower with the vCPUs apart, 64 and more ~5-15% slower).
pub const DEFAULT_EVICT_AHEAD_LINES: u32 = 16;

fn default_evict_ahead_lines() -> u32 {
    DEFAULT_EVICT_AHEAD_LINES
}

/// Default of [`HostTuning::register_poll_flits`].
pub const DEFAULT_REGISTER_POLL_FLITS: u32 = 1024;
/// Default of [`HostTuning::register_poll_ns`].
pub const DEFAULT_REGISTER_POLL_NS: u64 = 50_000;

fn default_register_poll_flits() -> u32 {
    DEFAULT_REGISTER_POLL_FLITS
}

fn default_register_poll_ns() -> u64 {
    DEFAULT_REGISTER_POLL_NS
}

impl DeviceConfig {
    /// A device with the real NIC's sizes and one port wired to `wire`.
    pub fn new(name: impl Into<String>, wire: WireConfig) -> Self {
        Self {
            name: name.into(),
            dir: PathBuf::from("/dev/shm"),
            pipe_size: 2 << 20,
            notif_ring_entries: 16384,
            notification_mode: NotificationMode::Reactive,
            ports: vec![wire],
            interconnect_latency_ns: 0,
            max_dma_bytes: 64 << 30,
            pcie: pcie_model::LinkConfig::default(),
            desc_fetch: 4,
            desc_writeback: 1,
            tuning: HostTuning::default(),
        }
    }

    /// The device's own directory.
    pub fn device_dir(&self) -> PathBuf {
        self.dir.join(format!("enso-{}", self.name))
    }

    /// Checks the settings; the error names the offending one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.pipe_size.is_power_of_two() || self.pipe_size < crate::layout::PAGE {
            return Err(ConfigError::PipeSize(self.pipe_size));
        }
        if self.pipe_size > 1 << 30 {
            return Err(ConfigError::PipeTooLarge);
        }
        if !self.notif_ring_entries.is_power_of_two() || self.notif_ring_entries < 64 {
            return Err(ConfigError::RingEntries);
        }
        self.check_rings_fit()?;
        // The engine counts TLPs with shifts: MPS, MRRS and RCB are powers
        // of two on every link a device negotiates.
        self.pcie.validate().map_err(ConfigError::Link)?;
        check_delay_ns("interconnect latency", self.interconnect_latency_ns)?;
        crate::devdir::check_name(&self.name).map_err(ConfigError::Name)?;
        for (i, w) in self.ports.iter().enumerate() {
            let in_port = |e| ConfigError::Port {
                port: i,
                error: Box::new(e),
            };
            match w {
                WireConfig::Cable { peer, .. } if *peer >= self.ports.len() => {
                    return Err(ConfigError::NoPeer {
                        port: i,
                        peer: *peer,
                        last: self.ports.len() - 1,
                    })
                }
                WireConfig::Cable { delay_ns, .. } => {
                    check_delay_ns("cable delay", *delay_ns).map_err(in_port)?;
                }
                WireConfig::Generator(g) => g.validate().map_err(in_port)?,
                _ => {}
            }
        }
        if self.tuning.evict_ahead_lines as usize > self.pipe_size / 64 / 2 {
            return Err(ConfigError::EvictAhead {
                lines: self.tuning.evict_ahead_lines,
                most: self.pipe_size / 64 / 2,
            });
        }
        if self.desc_fetch == 0 || self.desc_writeback == 0 {
            return Err(ConfigError::DescBatch);
        }
        if self.ports.len() > 16 {
            return Err(ConfigError::TooManyPorts);
        }
        if self.ports.is_empty() {
            return Err(ConfigError::NoPorts);
        }
        Ok(())
    }
}

impl DeviceConfig {
    /// Bytes of the smallest DMA region an application using pipes asks
    /// for: the reserved page, the RX and TX notification rings, one pipe
    /// and a page of buffers.
    fn min_region_bytes(&self, entries: u32) -> usize {
        use crate::layout::{notif_ring_bytes, DMA_RESERVED, PAGE};
        [
            DMA_RESERVED,
            2 * notif_ring_bytes(entries),
            self.pipe_size,
            PAGE,
        ]
        .into_iter()
        .fold(0, usize::saturating_add)
    }

    /// The notification rings (with one pipe) must fit in a DMA region the
    /// device accepts, or every attach fails.
    fn check_rings_fit(&self) -> Result<(), ConfigError> {
        let need = self.min_region_bytes(self.notif_ring_entries);
        if need <= self.max_dma_bytes {
            return Ok(());
        }
        let mut most = self.notif_ring_entries;
        while most > 64 && self.min_region_bytes(most) > self.max_dma_bytes {
            most /= 2;
        }
        let hint = if self.min_region_bytes(most) <= self.max_dma_bytes {
            format!(" (at most {most} entries with this pipe size)")
        } else {
            String::new()
        };
        Err(ConfigError::RingsTooLarge {
            entries: self.notif_ring_entries,
            need,
            limit: self.max_dma_bytes,
            hint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_no_device_could_negotiate_is_refused() {
        let mut c = DeviceConfig::new("link", WireConfig::Loopback);
        assert_eq!(c.validate(), Ok(()));
        c.pcie.mps = 200;
        let e = c.validate().expect_err("MPS 200 accepted");
        assert_eq!(e, ConfigError::Link(pcie_model::LinkConfigError::Mps(200)));
        assert!(e.to_string().starts_with("PCIe link: "), "{e}");
        c.pcie.mps = 512;
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn generator_rates_must_be_finite_and_positive() {
        let with_rate = |pps| {
            DeviceConfig::new(
                "rate",
                WireConfig::Generator(GeneratorConfig {
                    rate_pps: Some(pps),
                    ..Default::default()
                }),
            )
        };
        for bad in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -1.0, 0.0, -0.0] {
            let e = with_rate(bad)
                .validate()
                .expect_err("bad rate accepted")
                .to_string();
            assert!(e.contains("port 0") && e.contains("pps"), "{e}");
        }
        for good in [1.0, 1e6, 1e30, f64::MIN_POSITIVE] {
            assert_eq!(with_rate(good).validate(), Ok(()), "{good}");
        }
    }

    fn with_generator(f: impl FnOnce(&mut GeneratorConfig)) -> DeviceConfig {
        let mut g = GeneratorConfig::default();
        f(&mut g);
        DeviceConfig::new("gen", WireConfig::Generator(g))
    }

    /// A change to a generator's settings, and what refusing it says.
    type GeneratorCase = (fn(&mut GeneratorConfig), &'static str);

    #[test]
    fn generator_settings_that_send_nothing_or_never_finish_a_step_are_refused() {
        let cases: [GeneratorCase; 7] = [
            (|g| g.flows = 0, "flows 0"),
            (|g| g.burst = 0, "burst 0"),
            (|g| g.burst = MAX_GENERATOR_BURST + 1, "burst 4097"),
            (|g| g.burst = usize::MAX, "1..=4096"),
            (|g| g.count = Some(0), "count 0"),
            (|g| g.max_in_flight = Some(0), "in-flight window 0"),
            (|g| g.kinds.clear(), "frame kinds"),
        ];
        for (f, says) in cases {
            let e = with_generator(f).validate().expect_err(says).to_string();
            assert!(e.starts_with("port 0: ") && e.contains(says), "{e}");
        }
        let ok = with_generator(|g| {
            g.flows = 1;
            g.burst = MAX_GENERATOR_BURST;
            g.count = Some(1);
            g.max_in_flight = Some(1);
        });
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(check_burst(1), Ok(1));
        assert!(check_burst(0).is_err());
    }

    #[test]
    fn delays_are_at_most_a_second() {
        let mut cfg = DeviceConfig::new("lat", WireConfig::Loopback);
        cfg.interconnect_latency_ns = MAX_DELAY_NS;
        assert_eq!(cfg.validate(), Ok(()));
        for bad in [MAX_DELAY_NS + 1, u64::MAX] {
            cfg.interconnect_latency_ns = bad;
            let e = cfg
                .validate()
                .expect_err("huge latency accepted")
                .to_string();
            assert!(e.starts_with("interconnect latency"), "{e}");
        }
        let cable = |delay_ns| DeviceConfig::new("cable", WireConfig::Cable { peer: 0, delay_ns });
        assert_eq!(cable(MAX_DELAY_NS).validate(), Ok(()));
        let e = cable(u64::MAX)
            .validate()
            .expect_err("huge delay accepted")
            .to_string();
        assert_eq!(
            e,
            format!(
                "port 0: cable delay must be in 0..=1000000000 ns (at most 1 s), not {}",
                u64::MAX
            )
        );
        assert_eq!(check_delay_ns("x", 0), Ok(0));
        let e = DeviceConfig::new(
            "cable",
            WireConfig::Cable {
                peer: 3,
                delay_ns: 0,
            },
        )
        .validate()
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "port 0: cable to port 3, which does not exist (ports are 0..=0, one per --port)"
        );
    }

    #[test]
    fn notification_rings_must_fit_in_a_dma_region() {
        let mut cfg = DeviceConfig::new("rings", WireConfig::Loopback);
        // 64-byte slots, two rings: 2^31 entries need 256 GiB.
        cfg.notif_ring_entries = 1 << 31;
        let e = cfg
            .validate()
            .expect_err("rings above the DMA limit accepted")
            .to_string();
        assert!(
            e.contains("notification rings of 2147483648 entries")
                && e.contains("at most 268435456 entries"),
            "{e}"
        );
        // The largest that fits the default 64 GiB with a 2 MiB pipe.
        cfg.notif_ring_entries = 1 << 28;
        assert_eq!(cfg.validate(), Ok(()));
        cfg.notif_ring_entries = 1 << 29;
        assert!(cfg.validate().is_err());
        // A device limit too small for even the smallest rings.
        cfg.notif_ring_entries = 64;
        cfg.max_dma_bytes = 4096;
        let e = cfg
            .validate()
            .expect_err("tiny DMA limit accepted")
            .to_string();
        assert!(!e.contains("at most"), "{e}");
        cfg.max_dma_bytes = 64 << 30;
        assert_eq!(cfg.validate(), Ok(()));
    }

    #[test]
    fn eviction_distance_is_at_most_half_a_pipe() {
        let mut cfg = DeviceConfig::new("evict", WireConfig::Loopback);
        cfg.pipe_size = 4096; // 64 lines
        for ok in [0, 1, 32] {
            cfg.tuning.evict_ahead_lines = ok;
            assert_eq!(cfg.validate(), Ok(()), "{ok}");
        }
        for bad in [33, u32::MAX] {
            cfg.tuning.evict_ahead_lines = bad;
            let e = cfg
                .validate()
                .expect_err("distance beyond half a pipe")
                .to_string();
            assert!(e.contains("at most half a pipe (32 lines)"), "{e}");
        }
        // Configurations written before the setting existed get the default.
        let mut v = serde_json::to_value(DeviceConfig::new("old", WireConfig::Loopback)).unwrap();
        v.as_object_mut().unwrap().remove("evict_ahead_lines");
        let back: DeviceConfig = serde_json::from_value(v).unwrap();
        assert_eq!(back.tuning.evict_ahead_lines, DEFAULT_EVICT_AHEAD_LINES);
    }
}
