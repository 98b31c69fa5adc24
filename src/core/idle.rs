//! When a pool became idle, from what its signals said and when.
//!
//! A sender that reports only on change (queue 2 at 10:00, queue 0 at 10:01:30) must not make
//! the pool look idle since 10:00: the pool was busy until a signal said otherwise. So each
//! series remembers the time of its last busy observation and of the first non-busy one after
//! it; the series has been idle since the latter, and the pool since the latest of its series.
//! A series that never reported idle (silent since it was busy) counts as idle no earlier
//! than its last busy observation: silence is unknown, not idle.

use super::policy::Policy;

/// The activity of one series, as stored beside its newest value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeriesActivity {
    /// The latest observation that showed work.
    pub last_busy_at_ms: Option<i64>,
    /// The first observation after `last_busy_at_ms` that showed none.
    pub idle_since_ms: Option<i64>,
}

impl SeriesActivity {
    /// Takes in one observation, in any order: a busy one newer than the last moves the busy
    /// time and forgets an idle time before it; an idle one after the last busy one keeps the
    /// earliest such time.
    pub fn observe(&mut self, at_ms: i64, busy: bool) {
        if busy {
            if self.last_busy_at_ms.is_none_or(|b| at_ms > b) {
                self.last_busy_at_ms = Some(at_ms);
                if self.idle_since_ms.is_some_and(|i| i <= at_ms) {
                    self.idle_since_ms = None;
                }
            }
        } else if self.last_busy_at_ms.is_none_or(|b| at_ms > b) {
            self.idle_since_ms = Some(self.idle_since_ms.map_or(at_ms, |i| i.min(at_ms)));
        }
    }

    /// This series' activity followed by a batch's: what the stores' upsert computes in SQL
    /// (`UPSERT_LATEST_TAIL`): the later busy time, and the earlier of the two idle times
    /// that fall after it. Each side's idle time is its earliest after its own busy time, so
    /// an idle observation of a late batch that falls before the stored busy time is not
    /// seen; senders deliver in order, and the next idle observation corrects it.
    pub fn merge(self, batch: SeriesActivity) -> SeriesActivity {
        let busy = self.last_busy_at_ms.max(batch.last_busy_at_ms);
        let after = |idle: Option<i64>| idle.filter(|i| busy.is_none_or(|b| *i > b));
        SeriesActivity {
            last_busy_at_ms: busy,
            idle_since_ms: match (after(self.idle_since_ms), after(batch.idle_since_ms)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// From when this series counts as idle: its first idle observation after the last busy
    /// one, or, when it has not reported since it was busy, that busy time.
    pub fn idle_from(&self) -> Option<i64> {
        self.idle_since_ms.or(self.last_busy_at_ms)
    }
}

/// A stored series' name and activity, as a pool decision reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesIdle {
    /// Empty for a pool-level series.
    pub worker: String,
    pub name: String,
    pub activity: SeriesActivity,
}

/// The sample names whose values say whether a pool has work.
pub mod names {
    /// Jobs waiting in the pool's queue.
    pub const QUEUE_DEPTH: &str = "queue_depth";
    /// Jobs accepted but not yet placed.
    pub const PENDING_JOBS: &str = "pending_jobs";
    /// Jobs running.
    pub const RUNNING_JOBS: &str = "running_jobs";
    /// GPU busy fraction, 0..1.
    pub const GPU_UTILIZATION: &str = "gpu_utilization";
    /// GPU memory in use, GiB (the fullest GPU of the worker).
    pub const GPU_MEMORY_USED_GIB: &str = "gpu_memory_used_gib";
}

/// Whether a series counts jobs (waiting, pending or running), so that its zero says the
/// pool has no work rather than that one GPU rests.
pub fn counts_jobs(name: &str) -> bool {
    matches!(
        name,
        names::QUEUE_DEPTH | names::PENDING_JOBS | names::RUNNING_JOBS
    )
}

/// Whether one sample shows work under the policy: jobs, a GPU at or above the idle
/// utilisation threshold, or (when `idle_gpu_memory_gib` is set) GPU memory at or above it.
pub fn shows_work(policy: &Policy, name: &str, value: f64) -> bool {
    match name {
        names::QUEUE_DEPTH | names::PENDING_JOBS | names::RUNNING_JOBS => value > 0.0,
        names::GPU_UTILIZATION => value >= policy.idle_utilization_threshold,
        names::GPU_MEMORY_USED_GIB => policy.idle_gpu_memory_gib.is_some_and(|t| value >= t),
        _ => false,
    }
}

/// Whether a worker's GPUs all hold less memory than the policy's idle threshold: no training
/// is running there, whatever its utilisation says.
pub fn idle_by_memory(policy: &Policy, gpu_memory_gib: Option<f64>) -> bool {
    policy
        .idle_gpu_memory_gib
        .is_some_and(|t| gpu_memory_gib.is_some_and(|m| m < t))
}

/// Since when the pool has been idle: the latest time any of its series became idle.
///
/// GPU memory series count only when the policy uses them; the utilisation series of a worker
/// idle by memory (`memory_idle(worker)`) is left out, since its blips are not work.
pub fn pool_idle_since(
    policy: &Policy,
    series: &[SeriesIdle],
    memory_idle: impl Fn(&str) -> bool,
) -> Option<i64> {
    series
        .iter()
        .filter(|s| match s.name.as_str() {
            names::QUEUE_DEPTH | names::PENDING_JOBS | names::RUNNING_JOBS => true,
            names::GPU_UTILIZATION => s.worker.is_empty() || !memory_idle(&s.worker),
            names::GPU_MEMORY_USED_GIB => policy.idle_gpu_memory_gib.is_some(),
            _ => false,
        })
        .filter_map(|s| s.activity.idle_from())
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::policy::test_policy;

    const T: i64 = 1_800_000_000_000;

    fn seen(observations: &[(i64, bool)]) -> SeriesActivity {
        let mut a = SeriesActivity::default();
        for (at, busy) in observations {
            a.observe(*at, *busy);
        }
        a
    }

    fn activity(busy: Option<i64>, idle: Option<i64>) -> SeriesActivity {
        SeriesActivity {
            last_busy_at_ms: busy,
            idle_since_ms: idle,
        }
    }

    #[test]
    fn a_sender_that_reports_on_change_is_idle_from_its_zero_not_its_last_busy_sample() {
        // queue 2 at 10:00, queue 0 at 10:01:30.
        let a = seen(&[(T, true), (T + 90_000, false)]);
        assert_eq!(a, activity(Some(T), Some(T + 90_000)));
        assert_eq!(a.idle_from(), Some(T + 90_000));
    }

    #[test]
    fn repeated_idle_samples_keep_the_first_and_work_forgets_it() {
        let a = seen(&[(T, true), (T + 10, false), (T + 20, false)]);
        assert_eq!(a.idle_since_ms, Some(T + 10));
        let b = seen(&[(T, true), (T + 10, false), (T + 20, true)]);
        assert_eq!(b, activity(Some(T + 20), None));
        assert_eq!(
            b.idle_from(),
            Some(T + 20),
            "silent since busy: from the busy time"
        );
    }

    #[test]
    fn late_observations_fall_where_their_time_puts_them() {
        // An idle sample older than the last busy one says nothing about now.
        let a = seen(&[(T + 50, true), (T + 10, false)]);
        assert_eq!(a, activity(Some(T + 50), None));
        // A late busy sample before the idle one leaves the idle time standing.
        let b = seen(&[(T + 60, false), (T + 50, true)]);
        assert_eq!(b, activity(Some(T + 50), Some(T + 60)));
        // An earlier idle sample after the busy one moves the idle time back.
        let c = seen(&[(T, true), (T + 60, false), (T + 30, false)]);
        assert_eq!(c.idle_since_ms, Some(T + 30));
    }

    #[test]
    fn a_series_that_never_showed_work_is_idle_from_its_first_sample() {
        assert_eq!(
            seen(&[(T + 5, false), (T + 9, false)]).idle_from(),
            Some(T + 5)
        );
        assert_eq!(SeriesActivity::default().idle_from(), None);
    }

    #[test]
    fn merging_a_batch_gives_what_observing_its_samples_one_by_one_gives() {
        let stored = [(T, true), (T + 100, false)];
        let batches: [&[(i64, bool)]; 6] = [
            &[(T + 200, false)],
            &[(T + 50, false)],
            &[(T + 150, true)],
            &[(T + 150, true), (T + 160, false)],
            &[(T + 50, true), (T + 300, false)],
            &[(T + 80, true)],
        ];
        for batch in batches {
            let mut all = stored.to_vec();
            all.extend_from_slice(batch);
            let merged = seen(&stored).merge(seen(batch));
            assert_eq!(merged, seen(&all), "batch {batch:?}");
        }
        // From nothing stored, a batch is taken as it is.
        let batch = seen(&[(T, true), (T + 5, false)]);
        assert_eq!(SeriesActivity::default().merge(batch), batch);
    }

    #[test]
    fn the_pool_is_idle_from_the_latest_series_and_memory_counts_only_when_set() {
        let mut p = test_policy();
        let series = vec![
            SeriesIdle {
                worker: String::new(),
                name: names::QUEUE_DEPTH.into(),
                activity: activity(Some(T), Some(T + 90_000)),
            },
            SeriesIdle {
                worker: "w1".into(),
                name: names::GPU_UTILIZATION.into(),
                activity: activity(Some(T + 120_000), Some(T + 130_000)),
            },
            SeriesIdle {
                worker: "w1".into(),
                name: names::GPU_MEMORY_USED_GIB.into(),
                activity: activity(None, Some(T + 10_000)),
            },
        ];
        assert_eq!(pool_idle_since(&p, &series, |_| false), Some(T + 130_000));
        p.idle_gpu_memory_gib = Some(2.0);
        // w1's memory says idle since T+10s: its utilisation blip at T+120s does not count.
        assert_eq!(
            pool_idle_since(&p, &series, |w| w == "w1"),
            Some(T + 90_000)
        );
        assert_eq!(pool_idle_since(&p, &series, |_| false), Some(T + 130_000));
    }

    #[test]
    fn memory_below_the_threshold_is_idle_and_memory_at_it_is_work() {
        let mut p = test_policy();
        assert!(!idle_by_memory(&p, Some(0.1)), "rule off by default");
        assert!(!shows_work(&p, names::GPU_MEMORY_USED_GIB, 70.0));
        p.idle_gpu_memory_gib = Some(2.0);
        assert!(idle_by_memory(&p, Some(1.5)));
        assert!(!idle_by_memory(&p, Some(2.0)));
        assert!(
            !idle_by_memory(&p, None),
            "no memory reported: nothing known"
        );
        assert!(shows_work(&p, names::GPU_MEMORY_USED_GIB, 2.0));
        assert!(!shows_work(&p, names::GPU_MEMORY_USED_GIB, 1.99));
    }
}
