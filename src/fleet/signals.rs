//! Turns stored latest samples into the core's inputs: each worker's utilisation and GPU
//! memory, the pool's queue signals, and since when the pool has been idle.

use std::collections::HashMap;

use crate::core::idle::{SeriesIdle, idle_by_memory, pool_idle_since};
use crate::core::policy::Policy;
use crate::core::scale::{Signals, Worker};
use crate::ingest::remote_write::{
    GPU_MEMORY_USED_GIB, GPU_UTILIZATION, PENDING_JOBS, QUEUE_DEPTH, RUNNING_JOBS,
};
use crate::store::LatestSignal;

/// Fills in each live worker's utilisation and GPU memory and sums the pool's queue signals.
///
/// A pool-level value (no worker) wins over per-worker values of the same name, which are
/// summed otherwise: a scheduler reports the queue once, node agents report their own jobs.
/// A pool-level utilisation stands in for workers that report none of their own.
pub fn apply(
    policy: &Policy,
    latest: &[LatestSignal],
    series_idle: &[SeriesIdle],
    workers: &mut [Worker],
) -> Signals {
    let pool_level = |name: &str| {
        latest
            .iter()
            .find(|s| s.worker.is_empty() && s.name == name)
            .map(|s| s.value)
    };
    let summed = |name: &str| {
        pool_level(name).or_else(|| {
            let mut it = latest
                .iter()
                .filter(|s| !s.worker.is_empty() && s.name == name)
                .peekable();
            it.peek().is_some().then(|| it.map(|s| s.value).sum())
        })
    };
    let pool_util = pool_level(GPU_UTILIZATION);
    // By worker id, so a pool of hundreds of workers is not a quadratic scan.
    let per_worker = |name: &str| -> HashMap<&str, f64> {
        latest
            .iter()
            .filter(|s| s.name == name && !s.worker.is_empty())
            .map(|s| (s.worker.as_str(), s.value))
            .collect()
    };
    let util = per_worker(GPU_UTILIZATION);
    let memory = per_worker(GPU_MEMORY_USED_GIB);
    for w in workers.iter_mut() {
        w.utilization = util.get(w.id.as_str()).copied().or(pool_util);
        w.gpu_memory_gib = memory.get(w.id.as_str()).copied();
    }
    let memory_idle = |worker: &str| idle_by_memory(policy, memory.get(worker).copied());
    Signals {
        queue_depth: summed(QUEUE_DEPTH),
        pending_jobs: summed(PENDING_JOBS),
        running_jobs: summed(RUNNING_JOBS),
        idle_since_ms: pool_idle_since(policy, series_idle, memory_idle),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::catalog::Market;
    use crate::core::idle::SeriesActivity;
    use crate::core::policy::test_policy;

    const T: i64 = 1_800_000_000_000;

    fn sample(worker: &str, name: &str, value: f64) -> LatestSignal {
        LatestSignal {
            worker: worker.into(),
            name: name.into(),
            value,
            at_ms: T,
        }
    }

    fn series(worker: &str, name: &str, busy: Option<i64>, idle: Option<i64>) -> SeriesIdle {
        SeriesIdle {
            worker: worker.into(),
            name: name.into(),
            activity: SeriesActivity {
                last_busy_at_ms: busy,
                idle_since_ms: idle,
            },
        }
    }

    fn worker(id: &str) -> Worker {
        Worker {
            id: id.into(),
            instance_type: "g4dn.12xlarge".into(),
            market: Market::OnDemand,
            zone: None,
            started_at_ms: T - 3_600_000,
            stopped_at_ms: None,
            warning: None,
            utilization: None,
            gpu_memory_gib: None,
        }
    }

    #[test]
    fn a_worker_idle_by_memory_does_not_hold_the_pool_busy_with_utilisation_blips() {
        let mut p = test_policy();
        p.idle_gpu_memory_gib = Some(2.0);
        let latest = [
            sample("", QUEUE_DEPTH, 0.0),
            sample("w1", GPU_UTILIZATION, 0.4),
            sample("w1", GPU_MEMORY_USED_GIB, 0.5),
        ];
        let idle = [
            series("", QUEUE_DEPTH, Some(T - 600_000), Some(T - 540_000)),
            series("w1", GPU_UTILIZATION, Some(T), None),
            series("w1", GPU_MEMORY_USED_GIB, None, Some(T - 900_000)),
        ];
        let mut workers = [worker("w1"), worker("w2")];
        let s = apply(&p, &latest, &idle, &mut workers);
        assert_eq!(workers[0].utilization, Some(0.4));
        assert_eq!(workers[0].gpu_memory_gib, Some(0.5));
        assert_eq!(workers[1].gpu_memory_gib, None);
        assert_eq!(s.queue_depth, Some(0.0));
        assert_eq!(
            s.idle_since_ms,
            Some(T - 540_000),
            "the queue's zero, not w1's blip"
        );
        // Without the rule, the blip is work.
        p.idle_gpu_memory_gib = None;
        let s = apply(&p, &latest, &idle, &mut workers);
        assert_eq!(s.idle_since_ms, Some(T));
    }
}
