//! The store contract for worker aliases, on PostgreSQL and SQLite alike: a sample naming a
//! worker by an alias is stored as that worker's, registration and cloud sync keep the
//! aliases, and an alias moves to the worker that claims it last.

use trainscaler::store::{NewSample, NewWorker, Store};

use crate::common::{Backend, TestDb, fresh_store, g5_spot_policy, g5_spot_worker};
use crate::on_both_backends;

const T0: i64 = 1_796_112_000_000; // 2026-12-01T08:00:00Z

async fn store_with_pool(backend: Backend) -> (TestDb, Store) {
    let (db, store) = fresh_store(backend).await;
    store
        .put_pool("p", &g5_spot_policy(8), T0)
        .await
        .expect("pool");
    (db, store)
}

fn worker(id: &str, aliases: &[&str]) -> NewWorker {
    g5_spot_worker(id, aliases, T0)
}

/// Registers worker `id` going by `aliases` in pool `p`.
async fn register(store: &Store, id: &str, aliases: &[&str]) {
    store
        .put_worker("p", &worker(id, aliases), T0)
        .await
        .unwrap();
}

/// (worker, alias) of every alias in pool `p`.
async fn aliases(store: &Store) -> Vec<(String, String)> {
    store.worker_aliases("p").await.unwrap()
}

/// `pairs` as owned strings, to compare with [`aliases`].
fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect()
}

fn utilisation(worker: &str, at_ms: i64, value: f64) -> NewSample {
    NewSample {
        pool: "p".into(),
        worker: worker.into(),
        name: "gpu_utilization",
        value,
        at_ms,
    }
}

/// Stores one utilisation sample for `worker` taken at T0 + 1 s, a second before now.
async fn ingest_one(store: &Store, worker: &str, value: f64) {
    store
        .ingest(
            vec![utilisation(worker, T0 + 1_000, value)],
            |_, _| true,
            T0 + 2_000,
        )
        .await
        .unwrap();
}

/// (worker, value) of the pool's newest series.
async fn latest(store: &Store) -> Vec<(String, f64)> {
    store
        .latest_signals("p", 0)
        .await
        .expect("latest")
        .into_iter()
        .map(|s| (s.worker, s.value))
        .collect()
}

async fn a_sample_naming_an_alias_is_stored_as_its_workers(backend: Backend) {
    let (_db, store) = store_with_pool(backend).await;
    register(&store, "i-1", &["ip-10-0-1-23.ec2.internal", "10.0.1.23"]).await;
    register(&store, "i-2", &[]).await;
    let report = store
        .ingest(
            vec![
                utilisation("ip-10-0-1-23.ec2.internal", T0 + 1_000, 0.5),
                utilisation("10.0.1.23", T0 + 2_000, 0.9),
                utilisation("i-2", T0 + 1_000, 0.3),
                utilisation("ip-10-0-9-9.ec2.internal", T0 + 1_000, 0.1),
            ],
            |_, s| s.value > 0.05,
            T0 + 3_000,
        )
        .await
        .unwrap();
    assert_eq!(report.accepted, 4);
    // Both of i-1's names feed one series, whose newest value wins; a name no worker goes
    // by is kept as sent.
    assert_eq!(
        latest(&store).await,
        [
            ("i-1".to_string(), 0.9),
            ("i-2".to_string(), 0.3),
            ("ip-10-0-9-9.ec2.internal".to_string(), 0.1),
        ]
    );
}

async fn registration_replaces_aliases_and_a_claimed_alias_moves(backend: Backend) {
    let (_db, store) = store_with_pool(backend).await;
    register(&store, "i-1", &["host-a", "10.0.0.5"]).await;
    assert_eq!(
        aliases(&store).await,
        owned(&[("i-1", "10.0.0.5"), ("i-1", "host-a")])
    );
    // i-2 now has the address i-1 had (a cloud reuses private IPs).
    register(&store, "i-2", &["10.0.0.5"]).await;
    assert_eq!(
        aliases(&store).await,
        owned(&[("i-1", "host-a"), ("i-2", "10.0.0.5")])
    );
    ingest_one(&store, "10.0.0.5", 0.8).await;
    assert_eq!(latest(&store).await, [("i-2".to_string(), 0.8)]);
    // Registering again without aliases leaves none.
    register(&store, "i-1", &[]).await;
    assert_eq!(aliases(&store).await, owned(&[("i-2", "10.0.0.5")]));
}

async fn an_alias_spelled_like_another_workers_id_does_not_take_its_series(backend: Backend) {
    let (_db, store) = store_with_pool(backend).await;
    register(&store, "i-1", &["i-2"]).await;
    register(&store, "i-2", &[]).await;
    ingest_one(&store, "i-2", 0.4).await;
    assert_eq!(latest(&store).await, [("i-2".to_string(), 0.4)]);
}

async fn cloud_sync_records_aliases_and_follows_their_changes(backend: Backend) {
    let (_db, store) = store_with_pool(backend).await;
    let first = [
        worker("i-1", &["ip-10-0-1-1.ec2.internal", "10.0.1.1"]),
        worker("i-2", &[]),
    ];
    let report = store.sync_workers("p", &first, T0).await.unwrap();
    assert_eq!(report.added, 2);
    assert_eq!(
        aliases(&store).await,
        owned(&[("i-1", "10.0.1.1"), ("i-1", "ip-10-0-1-1.ec2.internal")])
    );
    // The same names in another order change nothing; i-2 got its address once it booted.
    let second = [
        worker("i-1", &["10.0.1.1", "ip-10-0-1-1.ec2.internal"]),
        worker("i-2", &["10.0.1.2"]),
    ];
    let report = store.sync_workers("p", &second, T0 + 1).await.unwrap();
    assert_eq!((report.added, report.updated, report.stopped), (0, 0, 0));
    assert_eq!(
        aliases(&store).await,
        owned(&[
            ("i-1", "10.0.1.1"),
            ("i-1", "ip-10-0-1-1.ec2.internal"),
            ("i-2", "10.0.1.2"),
        ])
    );
    // Deleting the pool takes its aliases with it.
    assert!(store.delete_pool("p").await.unwrap());
    store.put_pool("p", &g5_spot_policy(8), T0).await.unwrap();
    assert!(aliases(&store).await.is_empty());
}

on_both_backends!(
    a_sample_naming_an_alias_is_stored_as_its_workers,
    registration_replaces_aliases_and_a_claimed_alias_moves,
    an_alias_spelled_like_another_workers_id_does_not_take_its_series,
    cloud_sync_records_aliases_and_follows_their_changes,
);
