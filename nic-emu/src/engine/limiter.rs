//! The TX rate limiter of a port: a token bucket in flits.

/// The NIC's TX rate limiter: bursts of `num` flits every `den` cycles of a
/// 200 MHz clock, as a token bucket in flits. The engine works in steps of a
/// few microseconds and its thread can be descheduled for longer, so the
/// bucket holds up to 1 ms of tokens (or one burst, if larger): after a gap
/// the port catches up with at most 1 ms worth of frames, and the long-run
/// rate is exact.
#[derive(Debug, Clone, Copy)]
pub(super) struct TokenBucket {
    /// Flits per ns.
    rate: f64,
    depth: f64,
    tokens: f64,
    last_ns: u64,
    /// Whether the port had frames to send this step.
    backlogged: bool,
}

impl TokenBucket {
    pub(super) fn new(num: u64, den: u64, now: u64) -> Self {
        let rate = num as f64 / (den as f64 * 5.0);
        // Empty at first: traffic starts at the rate, not with a burst of
        // the whole depth (a limiter widened to bank 10 ms of credit sent
        // its first 10 ms of frames at line rate).
        Self {
            rate,
            depth: (num as f64).max(rate * 1_000_000.0),
            tokens: 0.0,
            last_ns: now,
            backlogged: false,
        }
    }
    /// Adds the tokens earned since the last refill; true if any are left.
    /// Called when the port has a frame to send.
    #[inline]
    pub(super) fn refill(&mut self, now: u64) -> bool {
        self.backlogged = true;
        self.earn(now);
        self.tokens > 0.0
    }
    #[inline]
    fn earn(&mut self, now: u64) {
        if now > self.last_ns {
            self.tokens = (self.tokens + (now - self.last_ns) as f64 * self.rate).min(self.depth);
            self.last_ns = now;
        }
    }
    /// Spends `flits` (a frame may overdraw); true if any are left.
    #[inline]
    pub(super) fn take(&mut self, flits: u64) -> bool {
        self.tokens -= flits as f64;
        self.tokens > 0.0
    }
    /// At the end of a step. Credit banks only while frames wait: a port
    /// that had frames to send and did not get to them (its engine thread
    /// descheduled, say) catches up to its rate within the depth, but one
    /// with nothing to send only pays off what it overdrew, so a sender
    /// that pauses (or starts) goes on at the rate, not with a burst.
    #[inline]
    pub(super) fn end_step(&mut self, now: u64) {
        if !std::mem::take(&mut self.backlogged) {
            self.earn(now);
            self.tokens = self.tokens.min(0.0);
        }
    }
}
