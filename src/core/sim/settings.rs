//! The knobs of a simulation that are not the policy's: the window replayed, the decision
//! interval, how long instances take to start, the spot notice, what a restart costs a job,
//! and how the provider bills.

use crate::core::cost::DAY_MS;
use crate::core::policy::secs_to_ms;

/// Seconds between two decisions when not given: the reconciler's usual pace is 15-60 s.
pub const DEFAULT_TICK_SEC: u64 = 60;
/// From launch to a worker that runs jobs: boot, GPU driver, image pull.
pub const DEFAULT_STARTUP_SEC: u64 = 120;
/// AWS gives two minutes' notice before it reclaims a spot instance.
pub const DEFAULT_NOTICE_SEC: u64 = 120;
/// Loading a checkpoint and warming up again after an interruption.
pub const DEFAULT_RESTART_OVERHEAD_SEC: u64 = 300;

/// How a provider turns run time into a bill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Billing {
    /// Run time is rounded up to a whole number of these.
    pub increment_ms: i64,
    /// A started instance is billed at least this long.
    pub minimum_ms: i64,
}

impl Billing {
    /// What each provider of the bundled catalog documents for Linux GPU instances; others
    /// bill by the second without a minimum.
    pub fn for_provider(provider: &str) -> Self {
        let (increment_s, minimum_s) = match provider {
            // EC2 per-second billing with a 60-second minimum; GCE the same.
            "aws" | "gcp" => (1, 60),
            // Lambda Cloud bills in one-minute increments.
            "lambda" => (60, 60),
            // Azure, Alibaba pay-as-you-go, Nebius and Vast bill by the second.
            _ => (1, 0),
        };
        Self {
            increment_ms: increment_s * 1000,
            minimum_ms: minimum_s * 1000,
        }
    }

    /// Milliseconds billed for `ran_ms` of run time.
    pub fn billed_ms(&self, ran_ms: i64) -> i64 {
        let inc = self.increment_ms.max(1);
        let rounded = (ran_ms.max(0) + inc - 1) / inc * inc;
        rounded.max(self.minimum_ms)
    }
}

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
    fn billing_rounds_up_and_has_a_minimum() {
        let aws = Billing::for_provider("aws");
        assert_eq!(aws.billed_ms(30_000), 60_000, "one-minute minimum");
        assert_eq!(aws.billed_ms(90_400), 91_000, "whole seconds, rounded up");
        let lambda = Billing::for_provider("lambda");
        assert_eq!(lambda.billed_ms(61_000), 120_000);
        assert_eq!(Billing::for_provider("azure").billed_ms(500), 1000);
    }

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
