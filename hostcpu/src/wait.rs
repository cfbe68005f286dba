//! Busy-waiting that survives sharing a core.

use std::hint;
use std::thread;

/// Polls between checks before the waiter gives its core away. On two
/// dedicated cores a wait never gets near this; on one shared core it lets
/// the other side run instead of spinning for a whole time slice.
pub const POLLS_BEFORE_YIELD: u32 = 1 << 12;

/// Spin-wait state for one waiting episode: a pause per poll, and a yield to
/// the scheduler every [`POLLS_BEFORE_YIELD`] polls.
#[derive(Debug, Default)]
pub struct Spin {
    polls: u32,
}

impl Spin {
    /// One poll of a wait loop.
    #[inline]
    pub fn poll(&mut self) {
        self.polls += 1;
        if self.polls >= POLLS_BEFORE_YIELD {
            self.polls = 0;
            thread::yield_now();
        } else {
            hint::spin_loop();
        }
    }

    /// The awaited thing happened: the next wait starts afresh.
    #[inline]
    pub fn reset(&mut self) {
        self.polls = 0;
    }
}
