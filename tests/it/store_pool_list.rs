//! The pool list on PostgreSQL and SQLite alike: every pool with its live workers read in one
//! statement gives what reading the pools and then each pool's workers gave, which is how
//! `GET /v1/pools` counted before.

use trainscaler::core::policy::Policy;
use trainscaler::store::Store;

use crate::common::{Backend, fresh_store, g5_spot_policy, g5_spot_worker};
use crate::on_both_backends;

const T0: i64 = 1_796_112_000_000; // 2026-12-01T08:00:00Z

/// What the list showed of a pool: name, policy, target, times and live workers.
type Listed = (String, Policy, Option<u32>, i64, i64, u64);

/// The list the way it was read before: the pools, then each pool's live workers.
async fn one_query_per_pool(store: &Store) -> Vec<Listed> {
    let mut out = Vec::new();
    for row in store.pools().await.expect("pools") {
        let live = store.workers(&row.name, i64::MAX).await.expect("workers");
        out.push((
            row.name,
            row.policy,
            row.state.desired,
            row.created_at_ms,
            row.updated_at_ms,
            live.len() as u64,
        ));
    }
    out
}

async fn one_query_for_all(store: &Store) -> Vec<Listed> {
    store
        .pools_with_live_workers()
        .await
        .expect("pools with live workers")
        .into_iter()
        .map(|(row, live)| {
            (
                row.name,
                row.policy,
                row.state.desired,
                row.created_at_ms,
                row.updated_at_ms,
                live,
            )
        })
        .collect()
}

async fn several_pools_list_as_they_did_with_a_query_per_pool(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    assert!(one_query_for_all(&store).await.is_empty());

    // Created out of name order, with different policies and times.
    for (i, name) in ["gpu-b", "gpu-a", "idle", "gpu-c"].into_iter().enumerate() {
        let at = T0 + i as i64 * 1_000;
        store
            .put_pool(name, &g5_spot_policy(4 + i as u32), at)
            .await
            .expect("pool");
    }
    // gpu-a: two live, one stopped; gpu-b: one live; gpu-c: only stopped ones; idle: none.
    // The same worker id in two pools counts in each.
    for (pool, id) in [
        ("gpu-a", "w-1"),
        ("gpu-a", "w-2"),
        ("gpu-a", "w-3"),
        ("gpu-b", "w-1"),
        ("gpu-c", "w-9"),
    ] {
        store
            .put_worker(pool, &g5_spot_worker(id, &[], T0), T0 + 10_000)
            .await
            .expect("worker")
            .expect("the pool exists");
    }
    for (pool, id) in [("gpu-a", "w-3"), ("gpu-c", "w-9")] {
        assert!(
            store
                .stop_worker(pool, id, T0 + 20_000)
                .await
                .expect("stop")
        );
    }

    let all = one_query_for_all(&store).await;
    assert_eq!(all, one_query_per_pool(&store).await);
    let counts: Vec<(&str, u64)> = all.iter().map(|l| (l.0.as_str(), l.5)).collect();
    assert_eq!(
        counts,
        [("gpu-a", 2), ("gpu-b", 1), ("gpu-c", 0), ("idle", 0)]
    );
    assert_eq!(all[0].1.max_workers, 5);
    assert_eq!(all[0].3, T0 + 1_000);
}

on_both_backends!(several_pools_list_as_they_did_with_a_query_per_pool);
