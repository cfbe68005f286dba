//! Parking: when the engine may sleep and for how long, the device's wake
//! file through which applications wake it, and the applications' own
//! wake blocks through which the engine wakes them.
//!
//! The protocol is [`enso_abi::wake`]'s. The engine thread's loop
//! ([`crate::EngineLoop`]) parks after a spell without work; here is what
//! bounds the sleep: the engine must be awake again when something it
//! does not hear about becomes due (a generator's next frame, a frame on
//! a delay line, a rate limiter's tokens, a wire it polls).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use enso_abi::layout;
use enso_abi::shm;
use enso_abi::wake::{self, Sleeper};
use memmap2::MmapRaw;

use super::shared::App;
use super::step::Engine;
use crate::port::Wire;

/// The longest sleep: commands and the stop flag wake the engine, so this
/// only bounds what a lost wake-up could cost.
pub const MAX_PARK: Duration = Duration::from_millis(10);

/// The longest sleep while a port's wire is a backend the engine polls
/// (pcap, TAP, AF_PACKET, memif): their frames are looked for this often.
pub const BACKEND_PARK: Duration = Duration::from_millis(1);

/// The longest sleep while a rate limiter is set: frames held back by it
/// are sent this late at most.
pub const LIMITER_PARK: Duration = Duration::from_micros(50);

/// The device's wake file: the engine's [`Sleeper`], mapped by every
/// application (its path is in each [`crate::engine::AttachInfo`]).
#[derive(Debug)]
pub struct WakeFile {
    file: shm::SealedFile,
    map: MmapRaw,
}

impl WakeFile {
    pub(super) fn create(device: &str) -> std::io::Result<Arc<Self>> {
        let file = shm::SealedFile::create(&format!("enso-{device}.wake"), layout::WAKE_FILE_LEN)?;
        let map = shm::map(file.file(), layout::WAKE_FILE_LEN)?;
        Ok(Arc::new(Self { file, map }))
    }

    /// Where applications open it.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The engine's wake block.
    pub fn sleeper(&self) -> &Sleeper {
        // SAFETY: the mapping is WAKE_FILE_LEN (a page) >= size_of::<Sleeper>()
        // bytes, page aligned (Sleeper needs 64), lives as long as `self`,
        // and Sleeper's fields are atomics, so shared access is sound.
        unsafe { &*(self.map.as_ptr() as *const Sleeper) }
    }

    /// Wakes the engine if it is parked (after a command or the stop flag
    /// was published).
    pub fn kick(&self) {
        let s = self.sleeper();
        if s.should_wake() {
            wake::wake(s.word());
        }
    }
}

impl App {
    /// The application's wake block (in its register file).
    #[inline]
    pub(super) fn sleeper(&self) -> &Sleeper {
        // SAFETY: the register file is MMIO_FILE_LEN = APP_WAKE_OFFSET + PAGE
        // bytes, APP_WAKE_OFFSET is page aligned, the mapping lives as long
        // as `self`, and Sleeper's fields are atomics.
        unsafe { &*(self.mmio.as_ptr().add(layout::APP_WAKE_OFFSET) as *const Sleeper) }
    }
}

impl Engine {
    /// The device's wake file.
    pub fn wake_file(&self) -> &Arc<WakeFile> {
        &self.wake
    }

    /// Wakes every application waiting in [`enso`'s `Device::wait`] (after
    /// a step that did work: notifications, completions). A fence and a
    /// load per application; a system call only for one that sleeps.
    #[inline]
    pub fn wake_waiters(&mut self) {
        for app in self.core.apps.iter().flatten() {
            let s = app.sleeper();
            if s.should_wake() {
                wake::wake(s.word());
                self.counters.app_wakeups += 1;
            }
        }
    }

    /// How long the engine may sleep now (at `now`, ns of its clock), or
    /// `None` when something is due at once. Called after steps that found
    /// no work.
    pub fn park_limit(&self) -> Option<Duration> {
        let now = self.core.clock.now_ns();
        let mut limit = MAX_PARK;
        let mut at_most = |d: Duration| limit = limit.min(d);
        for app in self.core.apps.iter().flatten() {
            // Register writes still crossing an emulated interconnect.
            if app.mmio_queue().pending() {
                return None;
            }
        }
        for p in &self.ports {
            if let Some(due) = p.inbound.as_ref().and_then(|f| f.front_ready_at()) {
                if due <= now {
                    return None;
                }
                at_most(Duration::from_nanos(due - now));
            }
            match &p.wire {
                Wire::Generator(g) => match g.next_due_ns(now) {
                    Some(due) if due <= now => return None,
                    Some(due) => at_most(Duration::from_nanos(due - now)),
                    None => {}
                },
                Wire::Backend(_) => at_most(BACKEND_PARK),
                Wire::Null | Wire::Loopback | Wire::Cable(..) => {}
            }
        }
        if self.core.limiter.iter().any(Option::is_some) {
            at_most(LIMITER_PARK);
        }
        Some(limit)
    }

    /// Counts a sleep of the engine thread (`woken`: ended by a wake-up,
    /// not by its time limit).
    pub fn note_park(&mut self, woken: bool) {
        self.counters.parks += 1;
        if woken {
            self.counters.park_wakeups += 1;
        }
    }
}
