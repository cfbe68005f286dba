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

#[cfg(test)]
mod tests {
    use super::TokenBucket;

    /// `num` 5, `den` 1: 5 flits every 5 ns of the 200 MHz clock, 1 flit
    /// per ns exactly (no rounding in the arithmetic below).
    fn one_per_ns(now: u64) -> TokenBucket {
        TokenBucket::new(5, 1, now)
    }

    #[test]
    fn a_new_bucket_is_empty_and_fills_at_the_rate() {
        let mut tb = one_per_ns(1_000);
        assert!(!tb.refill(1_000), "a new limiter starts with a burst");
        assert!(tb.refill(1_010));
        // 10 flits earned: 9 leave some, the 10th spends the last.
        assert!(tb.take(9));
        assert!(!tb.take(1));
        // Time that goes backwards earns nothing.
        assert!(!tb.refill(1_005));
    }

    #[test]
    fn the_rate_is_num_flits_every_den_cycles_of_200_mhz() {
        // 1 flit every 5 cycles = 25 ns: 40 flits in 1000 ns.
        let mut tb = TokenBucket::new(1, 5, 0);
        assert!(tb.refill(1_000));
        assert!(tb.take(39));
        assert!(!tb.take(2));
    }

    #[test]
    fn the_bucket_holds_at_most_a_millisecond_of_tokens() {
        let mut tb = one_per_ns(0);
        // 10 s of waiting with frames queued: 1 ms (1e6 flits) banked.
        assert!(tb.refill(10_000_000_000));
        assert!(tb.take(999_990));
        assert!(!tb.take(20));
        // A burst larger than a millisecond at the rate is the depth.
        let mut big = TokenBucket::new(1_000_000, 1_000_000_000, 0);
        assert!(big.refill(u64::MAX / 2));
        assert!(big.take(999_999));
        assert!(!big.take(2));
    }

    #[test]
    fn credit_banks_only_while_frames_wait() {
        // Idle for a millisecond: nothing banked.
        let mut idle = one_per_ns(0);
        idle.end_step(1_000_000);
        assert!(!idle.refill(1_000_000));
        // Backlogged (descheduled) for the same time: catches up.
        let mut waiting = one_per_ns(0);
        assert!(!waiting.refill(0));
        waiting.end_step(0);
        assert!(waiting.refill(1_000_000));
        assert!(waiting.take(999_990));
    }

    #[test]
    fn an_overdraft_is_paid_off_while_idle_but_no_credit_is_kept() {
        let mut tb = one_per_ns(0);
        assert!(tb.refill(20));
        // A frame may overdraw: 20 tokens, 30 spent.
        assert!(!tb.take(30));
        tb.end_step(20);
        // An idle step pays off 4 of the 10 owed...
        tb.end_step(24);
        assert!(!tb.refill(29), "-6 + 5 is still no credit");
        assert!(tb.refill(31));
        // ...and a long idle time banks nothing beyond zero.
        let mut tb = one_per_ns(0);
        assert!(tb.refill(10));
        assert!(!tb.take(12));
        tb.end_step(10);
        tb.end_step(1_000_000);
        assert!(!tb.refill(1_000_000));
    }

    #[test]
    fn a_backlogged_sender_gets_the_rate_over_many_steps() {
        // 3 flits every 10 cycles: 0.06 flits per ns, 60 000 in 1 ms.
        let mut tb = TokenBucket::new(3, 10, 0);
        let mut sent = 0u64;
        let mut now = 0;
        while now < 1_000_000 {
            now += 1_000;
            // As the TX path does: one frame per token check, the last
            // frame may overdraw.
            if tb.refill(now) {
                loop {
                    sent += 1;
                    if !tb.take(1) {
                        break;
                    }
                }
            }
            tb.end_step(now);
        }
        assert!((59_990..=60_010).contains(&sent), "{sent} frames");
    }
}
