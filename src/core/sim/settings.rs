//! The knobs of a simulation that are not the policy's: the window replayed, the decision
//! interval, how long instances take to start, the spot notice, what a restart costs a job,
//! and how the provider bills.

use crate::core::cost::DAY_MS;
use crate::core::policy::secs_to_ms;
pub use crate::core::terms::Billing;

/// Seconds between two decisions when not given: the reconciler's usual pace is 15-60 s.
pub const DEFAULT_TICK_SEC: u64 = 60;
/// From launch to a worker that runs jobs: boot, GPU driver, image pull.
pub const DEFAULT_STARTUP_SEC: u64 = 120;
/// AWS gives two minutes' notice before it reclaims a spot instance.
pub const DEFAULT_NOTICE_SEC: u64 = 120;
/// Loading a checkpoint and warming up again after an interruption.
pub const DEFAULT_RESTART_OVERHEAD_SEC: u64 = 300;

/// Everything about a run that is not the trace or the policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The replayed window: every policy is billed over the same one.
    pub start_ms: i64,
    pub end_ms: i64,
    pub tick_ms: i64,
    pub startup_ms: i64,
    pub notice_ms: i64,
    pub restart_overhead_ms: i64,
    /// `None`: the policy's provider's billing.
    pub billing: Option<Billing>,
    /// At most this many timeline points per policy (the chart's resolution).
    pub timeline_points: usize,
}

impl Settings {
    /// Defaults for a window.
    pub fn new(start_ms: i64, end_ms: i64) -> Self {
        Self {
            start_ms,
            end_ms,
            tick_ms: secs_to_ms(DEFAULT_TICK_SEC),
            startup_ms: secs_to_ms(DEFAULT_STARTUP_SEC),
            notice_ms: secs_to_ms(DEFAULT_NOTICE_SEC),
            restart_overhead_ms: secs_to_ms(DEFAULT_RESTART_OVERHEAD_SEC),
            billing: None,
            timeline_points: 1500,
        }
    }

    /// Decisions one policy's run makes: one at the start and every tick before the end.
    pub fn ticks(&self) -> u64 {
        let span = (self.end_ms - self.start_ms).max(0);
        let tick = self.tick_ms.max(1);
        u64::try_from((span + tick - 1) / tick).unwrap_or(u64::MAX)
    }
}

/// The default window end for a trace: the end of the UTC day by which the last submitted job
/// could have run its length, so a trace of whole days is replayed as whole days.
pub fn default_end_ms(last_event_ms: i64, longest_job_ms: i64) -> i64 {
    let t = last_event_ms.saturating_add(longest_job_ms.max(0));
    t - t.rem_euclid(DAY_MS) + DAY_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_end_is_a_day_boundary_after_the_last_job() {
        let day = 20_000 * DAY_MS;
        assert_eq!(default_end_ms(day + 3_600_000, 7_200_000), day + DAY_MS);
        assert_eq!(
            default_end_ms(day + 23 * 3_600_000, 7_200_000),
            day + 2 * DAY_MS
        );
    }
}
