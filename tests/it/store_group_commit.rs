//! Concurrent sample batches that report the same series are written in group commits: each
//! sender's answer must be what writing the batches one after another would have given, and
//! the stored series what every sample together says, on both backends; `/metrics` counts
//! the size of each batch's group.

use std::collections::{BTreeMap, BTreeSet};

use trainscaler::store::{NewSample, Store};

use crate::common::{Backend, fresh_store, g5_spot_policy};

const T0: i64 = 1_796_112_000_000; // 2026-12-01T08:00:00Z
const POOLS: [&str; 3] = ["a", "b", "c"];
const SENDERS: usize = 48;

/// Sender `i`'s batch: every pool's queue depth and the utilisation of four workers, at
/// times that overlap the neighbouring senders' (a re-sent sample carries the same value).
fn batch(i: usize) -> Vec<NewSample> {
    let mut samples = Vec::new();
    for pool in POOLS {
        for k in 0..6 {
            let at = T0 + ((i + k) as i64) * 1_000;
            samples.push(NewSample {
                pool: pool.into(),
                worker: String::new(),
                name: "queue_depth",
                value: value_at(pool, "", at),
                at_ms: at,
            });
            for w in ["w1", "w2", "w3", "w4"] {
                samples.push(NewSample {
                    pool: pool.into(),
                    worker: w.into(),
                    name: "gpu_utilization",
                    value: value_at(pool, w, at),
                    at_ms: at,
                });
            }
        }
    }
    samples
}

/// The one value a series has at a time: work in some seconds, none in others.
fn value_at(pool: &str, worker: &str, at: i64) -> f64 {
    let second = (at - T0) / 1_000;
    let seed = second + pool.len() as i64 * 7 + worker.len() as i64 * 3;
    if seed % 5 < 2 { 0.0 } else { (seed % 9) as f64 }
}

fn busy(_: &trainscaler::core::policy::Policy, s: &NewSample) -> bool {
    s.value > 0.0
}

async fn check(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    for pool in POOLS {
        store
            .put_pool(pool, &g5_spot_policy(8), T0)
            .await
            .expect("pool");
    }
    let batches: Vec<Vec<NewSample>> = (0..SENDERS).map(batch).collect();
    let sends = batches.iter().map(|b| {
        let store: Store = store.clone();
        async move { store.ingest(b.clone(), busy, T0 + 100_000).await }
    });
    let reports = futures_util::future::join_all(sends).await;

    // Every sample once, whichever batch brought it first.
    let mut keys = BTreeSet::new();
    let mut accepted = 0;
    let mut duplicates = 0;
    for (i, report) in reports.into_iter().enumerate() {
        let report = report.unwrap_or_else(|e| panic!("batch {i}: {e}"));
        assert_eq!(report.accepted, batches[i].len() as u64, "batch {i}");
        accepted += report.accepted;
        duplicates += report.duplicates;
        let pools: BTreeSet<&str> = report.active_pools.iter().map(String::as_str).collect();
        let busy_pools: BTreeSet<&str> = batches[i]
            .iter()
            .filter(|s| s.value > 0.0)
            .map(|s| s.pool.as_str())
            .collect();
        assert_eq!(pools, busy_pools, "batch {i}: pools with work");
    }
    for b in &batches {
        for s in b {
            keys.insert((s.pool.clone(), s.worker.clone(), s.name, s.at_ms));
        }
    }
    assert_eq!(
        accepted - duplicates,
        keys.len() as u64,
        "each distinct sample is new to exactly one batch"
    );

    // Each series' newest value, from all the batches together.
    let mut newest: BTreeMap<(String, String, &str), (i64, f64)> = BTreeMap::new();
    for s in batches.iter().flatten() {
        let e = newest
            .entry((s.pool.clone(), s.worker.clone(), s.name))
            .or_insert((s.at_ms, s.value));
        if s.at_ms > e.0 {
            *e = (s.at_ms, s.value);
        }
    }
    for pool in POOLS {
        let stored = store.latest_signals(pool, 0).await.expect("latest");
        assert_eq!(stored.len(), 5, "pool {pool}: queue depth and four workers");
        for l in stored {
            let (at, value) = newest[&(pool.to_string(), l.worker.clone(), l.name.as_str())];
            assert_eq!(
                (l.at_ms, l.value),
                (at, value),
                "{pool}/{}/{}",
                l.worker,
                l.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_batches_of_shared_series_commit_as_if_in_turn_postgres() {
    check(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_batches_of_shared_series_commit_as_if_in_turn_sqlite() {
    check(Backend::Sqlite).await;
}

/// The value of the sample `name` (no labels) in a Prometheus text scrape.
fn scraped(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the scrape:\n{text}"))
}

/// `/metrics` tells the size of the group commit each stored batch was written in: batches
/// sent one after another are each written alone, concurrent ones together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_each_batch_with_the_size_of_its_group() {
    let app = crate::common::TestApp::spawn(Backend::Sqlite).await;
    crate::http_pools::create_pool(&app, "m", &crate::http_pools::t4_policy()).await;
    let batch = |i: usize| {
        serde_json::json!([{"pool": "m", "name": "queue_depth", "value": i,
            "at": crate::http_pools::rfc3339_ago(100 - i as i64)}])
    };
    for i in 0..3 {
        crate::http_pools::samples(&app, batch(i)).await;
    }
    let text = app.get("/metrics").await.text().await.expect("scrape");
    assert_eq!(
        scraped(&text, "trainscaler_ingest_group_batches_count"),
        3.0
    );
    assert_eq!(scraped(&text, "trainscaler_ingest_group_batches_sum"), 3.0);
    let sends = (3..40).map(|i| crate::http_pools::samples(&app, batch(i)));
    futures_util::future::join_all(sends).await;
    let text = app.get("/metrics").await.text().await.expect("scrape");
    let (count, sum) = (
        scraped(&text, "trainscaler_ingest_group_batches_count"),
        scraped(&text, "trainscaler_ingest_group_batches_sum"),
    );
    assert_eq!(count, 40.0);
    // Concurrent batches share a commit or not, as the writers happen to be free; each batch
    // counts its whole group (a group of n adds n × n), so the sum lies between every batch
    // alone and all 37 in one group.
    assert!((40.0..=3.0 + 37.0 * 37.0).contains(&sum), "sum {sum}");
}
