//! The store contract for worker aliases, on PostgreSQL and SQLite alike: a sample naming a
//! worker by an alias is stored as that worker's, registration and cloud sync keep the
//! aliases, and an alias moves to the worker that claims it last.

use serde_json::json;
use trainscaler::app::open_store;
use trainscaler::core::catalog::Market;
use trainscaler::core::policy::Policy;
use trainscaler::store::{NewSample, NewWorker, Store};

use crate::common::{Backend, TestDb};
use crate::on_both_backends;

const T0: i64 = 1_796_112_000_000; // 2026-12-01T08:00:00Z

fn policy() -> Policy {
    serde_json::from_value(json!({
        "provider": "aws", "region": "us-east-1", "zones": [],
        "instance_types": [{"instance_type": "g5.xlarge", "markets": ["spot"]}],
        "gpus_per_worker": 1, "mode": "utilization", "target_utilization": 0.7,
        "tolerance": 0.1, "min_workers": 0, "max_workers": 8, "max_step_percent": 50.0,
        "min_step": 1, "scale_up_cooldown_sec": 0, "scale_down_cooldown_sec": 300,
        "stabilization_window_sec": 300, "idle_to_zero_after_sec": 600,
        "idle_utilization_threshold": 0.05, "on_demand_base": 0, "spot_percentage": 100,
        "daily_budget": null, "budget_action": "alarm", "signal_max_age_sec": 120,
        "capacity_error_backoff_sec": 600, "interruption_window_sec": 3600,
        "max_interruption_rate": 0.2
    }))
    .expect("a complete policy")
}

async fn store_with_pool(backend: Backend) -> (TestDb, Store) {
    let db = TestDb::new(backend).await;
    let store = open_store(&db.config()).await.expect("open store");
    store.put_pool("p", &policy(), T0).await.expect("pool");
    (db, store)
}

fn worker(id: &str, aliases: &[&str]) -> NewWorker {
    NewWorker {
        id: id.into(),
        instance_type: "g5.xlarge".into(),
        market: Market::Spot,
        zone: Some("us-east-1a".into()),
        started_at_ms: T0,
        aliases: aliases.iter().map(|a| (*a).to_string()).collect(),
    }
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
    store
        .put_worker(
            "p",
            &worker("i-1", &["ip-10-0-1-23.ec2.internal", "10.0.1.23"]),
            T0,
        )
        .await
        .unwrap();
    store
        .put_worker("p", &worker("i-2", &[]), T0)
        .await
        .unwrap();
    let report = store
        .ingest(
            &[
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
    store
        .put_worker("p", &worker("i-1", &["host-a", "10.0.0.5"]), T0)
        .await
        .unwrap();
    assert_eq!(
        store.worker_aliases("p").await.unwrap(),
        [
            ("i-1".to_string(), "10.0.0.5".to_string()),
            ("i-1".to_string(), "host-a".to_string()),
        ]
    );
    // i-2 now has the address i-1 had (a cloud reuses private IPs).
    store
        .put_worker("p", &worker("i-2", &["10.0.0.5"]), T0)
        .await
        .unwrap();
    assert_eq!(
        store.worker_aliases("p").await.unwrap(),
        [
            ("i-1".to_string(), "host-a".to_string()),
            ("i-2".to_string(), "10.0.0.5".to_string()),
        ]
    );
    store
        .ingest(
            &[utilisation("10.0.0.5", T0 + 1_000, 0.8)],
            |_, _| true,
            T0 + 2_000,
        )
        .await
        .unwrap();
    assert_eq!(latest(&store).await, [("i-2".to_string(), 0.8)]);
    // Registering again without aliases leaves none.
    store
        .put_worker("p", &worker("i-1", &[]), T0)
        .await
        .unwrap();
    assert_eq!(
        store.worker_aliases("p").await.unwrap(),
        [("i-2".to_string(), "10.0.0.5".to_string())]
    );
}

async fn an_alias_spelled_like_another_workers_id_does_not_take_its_series(backend: Backend) {
    let (_db, store) = store_with_pool(backend).await;
    store
        .put_worker("p", &worker("i-1", &["i-2"]), T0)
        .await
        .unwrap();
    store
        .put_worker("p", &worker("i-2", &[]), T0)
        .await
        .unwrap();
    store
        .ingest(
            &[utilisation("i-2", T0 + 1_000, 0.4)],
            |_, _| true,
            T0 + 2_000,
        )
        .await
        .unwrap();
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
        store.worker_aliases("p").await.unwrap(),
        [
            ("i-1".to_string(), "10.0.1.1".to_string()),
            ("i-1".to_string(), "ip-10-0-1-1.ec2.internal".to_string()),
        ]
    );
    // The same names in another order change nothing; i-2 got its address once it booted.
    let second = [
        worker("i-1", &["10.0.1.1", "ip-10-0-1-1.ec2.internal"]),
        worker("i-2", &["10.0.1.2"]),
    ];
    let report = store.sync_workers("p", &second, T0 + 1).await.unwrap();
    assert_eq!((report.added, report.updated, report.stopped), (0, 0, 0));
    assert_eq!(
        store.worker_aliases("p").await.unwrap(),
        [
            ("i-1".to_string(), "10.0.1.1".to_string()),
            ("i-1".to_string(), "ip-10-0-1-1.ec2.internal".to_string()),
            ("i-2".to_string(), "10.0.1.2".to_string()),
        ]
    );
    // Deleting the pool takes its aliases with it.
    assert!(store.delete_pool("p").await.unwrap());
    store.put_pool("p", &policy(), T0).await.unwrap();
    assert!(store.worker_aliases("p").await.unwrap().is_empty());
}

on_both_backends!(
    a_sample_naming_an_alias_is_stored_as_its_workers,
    registration_replaces_aliases_and_a_claimed_alias_moves,
    an_alias_spelled_like_another_workers_id_does_not_take_its_series,
    cloud_sync_records_aliases_and_follows_their_changes,
);
