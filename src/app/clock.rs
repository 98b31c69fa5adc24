//! The application's clock: the wall clock, plus an offset that only tests move. Pool
//! decisions, KEDA's wait until a decision's next evaluation, and idempotency keys' time to
//! live read the time from here, so a test of cooldowns, idle-to-zero or key expiry moves
//! time forward instead of sleeping through it. The reconciler, leases, timeouts and the
//! checks of outside credentials (signature timestamps, tokens, SNS envelopes) keep the real
//! clock: for them real time is the subject.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// The wall clock, moved forward by [`Clock::advance`].
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicI64,
}

impl Clock {
    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        crate::timefmt::now_ms().saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Moves this clock forward by `by`; only tests call it.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_now_forward_by_that_much() {
        let clock = Clock::default();
        let before = clock.now_ms();
        clock.advance(Duration::from_secs(3_600));
        let after = clock.now_ms();
        // The wall clock moves a little too between the reads; an hour is the bulk of it.
        assert!(after - before >= 3_600_000, "{before} -> {after}");
        assert!(after - before < 3_660_000, "{before} -> {after}");
    }
}
