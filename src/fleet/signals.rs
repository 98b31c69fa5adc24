//! Turns stored latest samples into the core's inputs: each worker's utilisation and the
//! pool's queue signals.

use std::collections::HashMap;

use crate::core::scale::{Signals, Worker};
use crate::ingest::remote_write::{GPU_UTILIZATION, PENDING_JOBS, QUEUE_DEPTH, RUNNING_JOBS};
use crate::store::LatestSignal;

/// Fills in each live worker's utilisation and sums the pool's queue signals.
///
/// A pool-level value (no worker) wins over per-worker values of the same name, which are
/// summed otherwise: a scheduler reports the queue once, node agents report their own jobs.
/// A pool-level utilisation stands in for workers that report none of their own.
pub fn apply(
    latest: &[LatestSignal],
    workers: &mut [Worker],
    last_busy_at_ms: Option<i64>,
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
    let by_worker: HashMap<&str, f64> = latest
        .iter()
        .filter(|s| s.name == GPU_UTILIZATION && !s.worker.is_empty())
        .map(|s| (s.worker.as_str(), s.value))
        .collect();
    for w in workers.iter_mut() {
        w.utilization = by_worker.get(w.id.as_str()).copied().or(pool_util);
    }
    Signals {
        queue_depth: summed(QUEUE_DEPTH),
        pending_jobs: summed(PENDING_JOBS),
        running_jobs: summed(RUNNING_JOBS),
        last_busy_at_ms,
    }
}
