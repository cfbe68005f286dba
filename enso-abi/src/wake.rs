//! Sleeping without losing a wake-up: how the NIC's engine parks when it
//! has nothing to do and an application's doorbell wakes it, and how an
//! application waits for its pipes and the NIC wakes it.
//!
//! One [`Sleeper`] block per sleeper, in memory both sides map (the
//! engine's in the device's wake file, an application's in its register
//! file at [`crate::layout::APP_WAKE_OFFSET`]). The sleeper announces
//! itself ([`Sleeper::prepare`]), looks once more for work, and only then
//! waits on the block's sequence word ([`wait`], a futex). A side that
//! publishes work calls [`Sleeper::should_wake`] after publishing, and the
//! wake-up system call ([`wake`]) only when that says the other side
//! sleeps: at saturation nobody sleeps, and the cost is a fence and a load
//! per batch, never a system call (the `need_wakeup` pattern of AF_XDP).
//!
//! Why no wake-up is lost: the sleeper's store of `parked` and the waker's
//! store of its work are each followed by a SeqCst fence and then a load
//! of the other's store, so at least one of the two loads sees the other
//! side's store (`tests/loom.rs` checks every interleaving). Either the
//! sleeper sees the work and does not sleep, or the waker sees `parked`,
//! moves the sequence word on and wakes: a futex wait on the old sequence
//! value then returns at once, whether it began before or after.

use crate::sync::{fence, AtomicU32, Ordering};

/// One sleeper's block (a cache line of its own).
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct Sleeper {
    /// 1 while the sleeper is (about to be) asleep.
    parked: AtomicU32,
    /// Moved on by every wake-up; what the sleeper waits on.
    seq: AtomicU32,
}

impl Sleeper {
    /// Sleeper, first: announces that it is about to sleep and returns the
    /// sequence value to wait on ([`wait`]). The caller then looks for
    /// work once more, and calls [`Sleeper::done`] whether or not it slept.
    #[inline]
    pub fn prepare(&self) -> u32 {
        let s = self.seq.load(Ordering::Acquire);
        self.parked.store(1, Ordering::Relaxed);
        // SYNC POINT W1 (SeqCst fence): orders the store of `parked`
        // before the sleeper's last look for work; pairs with the waker's
        // fence W2 in `should_wake` (one of the two sides sees the other).
        fence(Ordering::SeqCst);
        s
    }

    /// Sleeper, last: no longer asleep.
    #[inline]
    pub fn done(&self) {
        self.parked.store(0, Ordering::Relaxed);
    }

    /// Whether the sleeper has announced that it sleeps (diagnostics).
    #[inline]
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Relaxed) != 0
    }

    /// Waker, after publishing work (a register write, a notification):
    /// whether the sleeper sleeps, in which case its sequence word has been
    /// moved on and the caller is to issue [`wake`].
    #[inline]
    pub fn should_wake(&self) -> bool {
        // SYNC POINT W2 (SeqCst fence): orders the work published before
        // it before the load of `parked`; pairs with fence W1 in `prepare`.
        fence(Ordering::SeqCst);
        if self.parked.load(Ordering::Relaxed) == 0 {
            return false;
        }
        // Release: pairs with the Acquire load in `prepare` of a later
        // sleep (the sequence only orders wake-ups among themselves).
        self.seq.fetch_add(1, Ordering::Release);
        true
    }

    /// The word a sleeper waits on ([`wait`]) and a waker wakes.
    #[inline]
    pub fn word(&self) -> &AtomicU32 {
        &self.seq
    }
}

/// Sleeps until `word` is woken ([`wake`]) or `timeout` passes; returns at
/// once when `word` no longer holds `expected` (a wake-up came first). A
/// futex on shared memory: the two sides may be different processes.
#[cfg(not(loom))]
pub fn wait(word: &AtomicU32, expected: u32, timeout: std::time::Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a live, aligned 4-byte atomic for the call; FUTEX_WAIT
    // only reads it, and `ts` outlives the call. Errors (EAGAIN: the value
    // moved on; EINTR; ETIMEDOUT) all mean "look again", as the caller does.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes whoever [`wait`]s on `word`.
#[cfg(not(loom))]
pub fn wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned 4-byte atomic for the call; FUTEX_WAKE
    // does not access it. A failure wakes nobody; the sleeper's timeout
    // bounds that.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn a_waker_sees_a_prepared_sleeper_and_not_one_that_is_done() {
        let s = Sleeper::default();
        assert!(!s.should_wake());
        let before = s.prepare();
        assert!(s.is_parked());
        assert!(s.should_wake());
        assert_eq!(s.word().load(Ordering::Relaxed), before.wrapping_add(1));
        s.done();
        assert!(!s.should_wake());
    }

    #[test]
    fn a_wait_on_a_moved_sequence_returns_at_once_and_a_wake_ends_a_wait() {
        let s = Arc::new(Sleeper::default());
        let seq = s.prepare();
        assert!(s.should_wake());
        let t = Instant::now();
        wait(s.word(), seq, Duration::from_secs(10));
        assert!(t.elapsed() < Duration::from_secs(5));
        s.done();

        let seq = s.prepare();
        let s2 = s.clone();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            if s2.should_wake() {
                wake(s2.word());
            }
        });
        let t = Instant::now();
        wait(s.word(), seq, Duration::from_secs(10));
        let took = t.elapsed();
        s.done();
        waker.join().unwrap();
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn a_wait_without_a_wake_ends_at_its_timeout() {
        let s = Sleeper::default();
        let seq = s.prepare();
        let t = Instant::now();
        wait(s.word(), seq, Duration::from_millis(20));
        let took = t.elapsed();
        s.done();
        assert!(took >= Duration::from_millis(15), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
}
