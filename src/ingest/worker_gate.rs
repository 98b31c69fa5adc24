//! Which workers a pool takes samples about, so that no sender can give a pool more series
//! than it can have workers, in one request or over many.
//!
//! A pool with registered workers (trainscaler runs them, or a scheduler registered them) takes
//! samples about those and their aliases only. A pool with none (KEDA or another scheduler runs
//! its workers) takes samples about at most `max_workers` distinct workers at a time: the
//! workers whose series are fresh (reported within the pool's `signal_max_age_sec`) count
//! against the bound, so a worker replaced by a new one frees its place once its series go
//! stale, and the background pruning deletes series silent for longer (see
//! [`stale_after_ms`]). Each sample names a worker; a series per worker
//! exists per metric name, so the series a pool holds are bounded by `max_workers` times the
//! few metric names this service reads.

use std::collections::{HashMap, HashSet};

use super::limits::{self, DropReason};
use crate::core::policy::Policy;
use crate::store::{PoolRow, Store, StoreResult};

/// Per request: what each pool it touches allows, read once.
#[derive(Debug, Default)]
pub struct WorkerGate {
    /// Every pool's live workers and aliases, read in one statement on first use.
    registered: Option<HashMap<String, HashSet<String>>>,
    pools: HashMap<String, PoolWorkers>,
}

#[derive(Debug)]
struct PoolWorkers {
    /// Registered live workers and their aliases; empty when the pool registers none.
    known: HashSet<String>,
    /// For a pool without registered workers: the workers with fresh series, and those this
    /// request added.
    live: HashSet<String>,
    max_workers: usize,
}

impl PoolWorkers {
    fn admit(&mut self, worker: &str) -> Option<DropReason> {
        if !self.known.is_empty() {
            return (!limits::worker_belongs(&self.known, worker))
                .then_some(DropReason::UnknownWorker);
        }
        if self.live.contains(worker) {
            return None;
        }
        if self.live.len() >= self.max_workers {
            return Some(DropReason::TooManyWorkers);
        }
        self.live.insert(worker.to_string());
        None
    }
}

impl WorkerGate {
    /// Why a sample about `worker` of `pool` is not kept, if it is not.
    pub async fn admit(
        &mut self,
        store: &Store,
        pool: &PoolRow,
        worker: &str,
        now_ms: i64,
    ) -> StoreResult<Option<DropReason>> {
        if !self.pools.contains_key(&pool.name) {
            let registered = match &mut self.registered {
                Some(r) => r,
                None => self.registered.insert(registered(store).await?),
            };
            let known = registered.remove(&pool.name).unwrap_or_default();
            let loaded = load(store, pool, known, now_ms).await?;
            self.pools.insert(pool.name.clone(), loaded);
        }
        Ok(self.pools.get_mut(&pool.name).and_then(|p| p.admit(worker)))
    }
}

async fn registered(store: &Store) -> StoreResult<HashMap<String, HashSet<String>>> {
    let mut by_pool: HashMap<String, HashSet<String>> = HashMap::new();
    // A live worker's aliases name it too (dcgm-exporter's `Hostname` is a private DNS name
    // where the pool knows instance ids).
    for (pool, name) in store.live_worker_names().await? {
        by_pool.entry(pool).or_default().insert(name);
    }
    Ok(by_pool)
}

async fn load(
    store: &Store,
    pool: &PoolRow,
    known: HashSet<String>,
    now_ms: i64,
) -> StoreResult<PoolWorkers> {
    let mut live = HashSet::new();
    if known.is_empty() {
        let max_age_ms =
            i64::try_from(pool.policy.signal_max_age_sec.saturating_mul(1_000)).unwrap_or(i64::MAX);
        live = store
            .latest_signals(&pool.name, now_ms.saturating_sub(max_age_ms))
            .await?
            .into_iter()
            .filter(|s| !s.worker.is_empty())
            .map(|s| s.worker)
            .collect();
    }
    Ok(PoolWorkers {
        known,
        live,
        max_workers: pool.policy.max_workers.max(1) as usize,
    })
}

/// How long a worker series may stay silent before it is deleted: long enough that no decision
/// could still read it (twice the freshness window) and that idle-to-zero timing, which reads
/// every series' last busy time, has run its course; at least an hour.
pub fn stale_after_ms(policy: &Policy) -> i64 {
    let secs = (2 * policy.signal_max_age_sec)
        .max(policy.idle_to_zero_after_sec + policy.signal_max_age_sec)
        .max(3_600);
    i64::try_from(secs.saturating_mul(1_000)).unwrap_or(i64::MAX)
}

/// Deletes every pool's worker series silent past [`stale_after_ms`]; the count deleted.
pub async fn prune_stale_series(store: &Store, now_ms: i64) -> StoreResult<u64> {
    let mut deleted = 0;
    for pool in store.pools().await? {
        let before = now_ms.saturating_sub(stale_after_ms(&pool.policy));
        deleted += store.prune_worker_series(&pool.name, before).await?;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(known: &[&str], live: &[&str], max_workers: usize) -> PoolWorkers {
        PoolWorkers {
            known: known.iter().map(|s| s.to_string()).collect(),
            live: live.iter().map(|s| s.to_string()).collect(),
            max_workers,
        }
    }

    #[test]
    fn registered_workers_are_the_only_ones_taken() {
        let mut p = gate(&["i-1", "ip-10-0-0-1"], &[], 4);
        assert_eq!(p.admit("i-1"), None);
        assert_eq!(p.admit("ip-10-0-0-1"), None);
        assert_eq!(p.admit("i-2"), Some(DropReason::UnknownWorker));
    }

    #[test]
    fn fresh_series_count_against_max_workers() {
        let mut p = gate(&[], &["a", "b"], 3);
        assert_eq!(p.admit("a"), None);
        assert_eq!(p.admit("c"), None);
        assert_eq!(p.admit("d"), Some(DropReason::TooManyWorkers));
        // Workers already in keep reporting.
        assert_eq!(p.admit("b"), None);
        assert_eq!(p.admit("c"), None);
    }

    #[test]
    fn series_outlive_freshness_and_idle_timing_before_they_go() {
        let mut policy = crate::core::policy::test_policy();
        policy.signal_max_age_sec = 300;
        policy.idle_to_zero_after_sec = 600;
        assert_eq!(stale_after_ms(&policy), 3_600_000);
        policy.idle_to_zero_after_sec = 7_200;
        assert_eq!(stale_after_ms(&policy), 7_500_000);
        policy.signal_max_age_sec = 5_000;
        assert_eq!(stale_after_ms(&policy), 12_200_000);
    }
}
