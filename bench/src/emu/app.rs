//! The application thread of a rig: its drivers and handlers, and the polling loop that measures its busy time.

#[allow(unused_imports)]
use super::*;

/// The rx-mode application: reads each frame's first payload bytes and
/// frees it.
#[derive(Debug, Default, Clone)]
pub struct Touch {
    /// Sum of the 8 bytes at the payload's start of every frame.
    pub sum: u64,
}

impl PacketHandler for Touch {
    #[inline]
    fn handle(&mut self, frame: &mut [u8]) -> Verdict {
        let at = frames::SEQ_OFFSET;
        if let Some(b) = frame.get(at..at + 8) {
            let v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
            self.sum = self.sum.wrapping_add(v);
        }
        Verdict::Consume
    }
}

/// Either driver, with the loop an application thread runs.
#[derive(Debug)]
pub enum Driver {
    /// Ensō pipes.
    Enso(EnsoDriver),
    /// Descriptor rings.
    Packetized(PacketizedDriver),
}

impl Driver {
    /// One poll: the frames handled.
    #[inline]
    pub fn poll<H: PacketHandler>(&mut self, h: &mut H) -> Result<usize, DriverError> {
        match self {
            Driver::Enso(d) => d.poll(h),
            Driver::Packetized(d) => d.poll(h),
        }
    }

    /// Frames the driver dropped so far (the packetized driver drops what
    /// does not fit a full TX ring, as DPDK applications do).
    pub fn dropped(&self) -> u64 {
        match self {
            Driver::Enso(d) => d.stats.dropped,
            Driver::Packetized(d) => d.stats.dropped,
        }
    }

    /// Frame bytes the driver has handled so far.
    pub fn bytes(&self) -> u64 {
        match self {
            Driver::Enso(d) => d.stats.bytes,
            Driver::Packetized(d) => d.stats.bytes,
        }
    }

    /// The device handle.
    pub fn device(&self) -> &Device {
        match self {
            Driver::Enso(d) => &d.dev,
            Driver::Packetized(d) => &d.dev,
        }
    }

    /// The device handle, to wait on.
    pub fn device_mut(&mut self) -> &mut Device {
        match self {
            Driver::Enso(d) => &mut d.dev,
            Driver::Packetized(d) => &mut d.dev,
        }
    }
}

/// What an application thread does with each frame.
#[derive(Debug)]
pub enum Handler {
    /// Increment the echo byte and send the frame back.
    Echo(TestFrameEcho),
    /// Read it and free it.
    Touch(Touch),
}

/// Phases of a trial, as the application thread sees them.
pub(super) const RUN: u8 = 0;
/// The measured window has ended: snapshot the counters, keep draining.
pub(super) const END: u8 = 1;
/// Everything has drained: return.
pub(super) const EXIT: u8 = 2;

/// A drain in which nothing has moved for this long is over.
pub(super) const SETTLED: Duration = Duration::from_millis(50);

/// Drop cause for frames the application itself dropped (the packetized
/// driver when its TX ring is full).
pub const APP_DROPPED: &str = "app_tx_ring_full";

/// Polls between two looks at the phase flag.
pub(super) const PHASE_CHECK: u32 = 32;

/// What the application thread measured in one trial.
#[derive(Clone, Debug, Default)]
pub(super) struct AppReport {
    /// Frames handled before the window ended.
    pub(super) frames: u64,
    /// Their bytes.
    pub(super) bytes: u64,
    /// Time spent in polls that found work, until the window ended.
    pub(super) busy_ns: u64,
    /// Preemptions of the thread over the whole trial.
    pub(super) preempted: Preemption,
    pub(super) pinned: bool,
    pub(super) error: Option<String>,
    /// Hardware counters over the window, if asked for and available.
    pub(super) perf: Option<crate::perf::Counts>,
    /// Frames the application dropped over the whole trial.
    pub(super) dropped: u64,
}

/// Shared between the trial's controller and the application thread.
pub(super) struct Control {
    pub(super) phase: CachePadded<AtomicU8>,
    /// Frames handled so far, published at every phase check.
    pub(super) frames: CachePadded<AtomicU64>,
    /// Frames the application dropped so far (same cadence).
    pub(super) dropped: CachePadded<AtomicU64>,
    /// Set once the thread is pinned and polling.
    pub(super) started: CachePadded<AtomicU8>,
    /// Count hardware events in the application thread.
    pub(super) perf: bool,
    /// Wait for data ([`Device::wait`]) after [`enso::PARK_AFTER`]
    /// without any, as the servers do with `--idle park`.
    pub(super) park: bool,
}

/// Longest one wait of a parked application thread lasts, so that it sees
/// the end of a trial promptly.
const PARK_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// Busy time of a polling loop. While idle, the clock is read before each
/// poll, so an idle episode ends exactly where the poll that found work
/// began; while busy it is not read at all.
pub(super) struct BusyClock {
    pub(super) start: Instant,
    pub(super) idle: Duration,
    /// Start of the current idle episode.
    pub(super) since: Option<Instant>,
    /// Start of the poll in progress, while idle.
    pub(super) poll_start: Option<Instant>,
}

impl BusyClock {
    fn new() -> Self {
        BusyClock {
            start: Instant::now(),
            idle: Duration::ZERO,
            since: None,
            poll_start: None,
        }
    }
    /// Before each poll.
    #[inline]
    fn before_poll(&mut self) {
        if self.since.is_some() {
            self.poll_start = Some(Instant::now());
        }
    }
    /// The poll found nothing.
    #[inline]
    fn idle(&mut self) {
        if self.since.is_none() {
            self.since = Some(Instant::now());
        }
    }
    /// The poll found work.
    #[inline]
    fn work(&mut self) {
        if let Some(t) = self.since.take() {
            let end = self.poll_start.take().unwrap_or_else(Instant::now);
            self.idle += end.saturating_duration_since(t);
        }
    }
    fn busy_ns(&mut self) -> u64 {
        if let Some(t) = self.since.take() {
            self.idle += t.elapsed();
            self.since = Some(Instant::now());
        }
        (self.start.elapsed().saturating_sub(self.idle)).as_nanos() as u64
    }
}

pub(super) fn app_loop<H: PacketHandler>(
    driver: &mut Driver,
    h: &mut H,
    ctl: &Control,
    pinned: bool,
) -> AppReport {
    let preempted = PreemptionCounter::start();
    let bytes0 = driver.bytes();
    let dropped0 = driver.dropped();
    let mut frames = 0u64;
    let mut report = AppReport {
        pinned,
        ..Default::default()
    };
    let counters = if ctl.perf {
        crate::perf::Counters::open().ok()
    } else {
        None
    };
    if let Some(c) = &counters {
        c.start();
    }
    // SYNC POINT: Release pairs with the controller's Acquire load of
    // `started` in `trial_inner`: pinning and the counters' start happen
    // before it releases the generator.
    ctl.started.store(1, Ordering::Release);
    let mut clock = BusyClock::new();
    let mut measuring = true;
    let mut polls = 0u32;
    let mut idle_since: Option<Instant> = None;
    loop {
        clock.before_poll();
        match driver.poll(h) {
            Ok(0) => {
                clock.idle();
                if ctl.park {
                    let now = Instant::now();
                    if now - *idle_since.get_or_insert(now) >= enso::PARK_AFTER {
                        if let Err(e) = driver.device_mut().wait(PARK_WAIT) {
                            report.error = Some(e.to_string());
                            break;
                        }
                        // Look at the phase after every wait.
                        polls = PHASE_CHECK - 1;
                    }
                } else {
                    std::hint::spin_loop();
                }
            }
            Ok(n) => {
                clock.work();
                idle_since = None;
                frames += n as u64;
            }
            Err(e) => {
                report.error = Some(e.to_string());
                break;
            }
        }
        polls += 1;
        if polls == PHASE_CHECK {
            polls = 0;
            ctl.frames.store(frames, Ordering::Relaxed);
            ctl.dropped
                .store(driver.dropped() - dropped0, Ordering::Relaxed);
            // SYNC POINT: Acquire pairs with the controller's Release
            // stores of END and EXIT in `trial_inner`.
            let phase = ctl.phase.load(Ordering::Acquire);
            if measuring && phase >= END {
                measuring = false;
                if let Some(c) = &counters {
                    c.stop();
                    report.perf = Some(c.read());
                }
                report.busy_ns = clock.busy_ns();
                report.frames = frames;
                report.bytes = driver.bytes() - bytes0;
            }
            if phase == EXIT {
                break;
            }
        }
    }
    ctl.frames.store(frames, Ordering::Relaxed);
    report.dropped = driver.dropped() - dropped0;
    if measuring {
        if let Some(c) = &counters {
            c.stop();
            report.perf = Some(c.read());
        }
        report.busy_ns = clock.busy_ns();
        report.frames = frames;
        report.bytes = driver.bytes() - bytes0;
    }
    report.preempted = preempted.stop();
    report
}
