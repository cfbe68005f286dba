//! How the engine tells time for rate control. Its own small module: the
//! engine and the ports' generators (which pace and timestamp frames) both
//! use it, and neither should depend on the other for it.

use std::sync::atomic::Ordering;

/// How the engine tells time for rate control.
#[derive(Debug, Clone)]
pub enum Clock {
    /// CLOCK_MONOTONIC.
    Monotonic,
    /// Set by the caller (deterministic tests).
    Manual(std::sync::Arc<std::sync::atomic::AtomicU64>),
}

impl Clock {
    /// The time now, in ns.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        match self {
            Clock::Monotonic => crate::monotonic_ns(),
            Clock::Manual(t) => t.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn a_manual_clock_reads_what_the_caller_set() {
        let t = Arc::new(AtomicU64::new(5));
        let c = Clock::Manual(t.clone());
        assert_eq!(c.now_ns(), 5);
        t.store(1_000, Ordering::Relaxed);
        assert_eq!(c.clone().now_ns(), 1_000);
    }

    #[test]
    fn the_monotonic_clock_does_not_go_back() {
        let a = Clock::Monotonic.now_ns();
        let b = Clock::Monotonic.now_ns();
        assert!(a > 0 && b >= a, "{a} then {b}");
    }
}
