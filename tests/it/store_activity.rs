//! Ingestion tells the other replicas which pools have work (PostgreSQL NOTIFY on
//! `trainscaler_activity`), after its commit and never for a batch that was refused.

use std::time::Duration;

use sqlx::postgres::PgListener;
use trainscaler::store::{NewSample, Store};

use crate::common::{Backend, TestDb, fresh_store, g5_spot_policy};

const T0: i64 = 1_796_112_000_000; // 2026-12-01T08:00:00Z

fn queue(pool: &str, value: f64) -> NewSample {
    NewSample {
        pool: pool.into(),
        worker: String::new(),
        name: "queue_depth",
        value,
        at_ms: T0,
    }
}

async fn ingest(store: &Store, samples: &[NewSample]) -> trainscaler::store::StoreResult<()> {
    store
        .ingest(samples.to_vec(), |_, s| s.value > 0.0, T0 + 1_000)
        .await
        .map(|_| ())
}

async fn listener(db: &TestDb) -> PgListener {
    let mut listener = PgListener::connect(&db.url).await.expect("listen");
    listener
        .listen("trainscaler_activity")
        .await
        .expect("listen on the activity channel");
    listener
}

/// The pool named by the next notification, waiting at most five seconds.
async fn next_pool(listener: &mut PgListener) -> String {
    tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("a notification within 5 s")
        .expect("the listener")
        .payload()
        .to_string()
}

#[tokio::test]
async fn ingestion_announces_each_pool_once_and_refused_batches_not_at_all() {
    let (db, store) = fresh_store(Backend::Postgres).await;
    let pools: Vec<String> = (1..=20).map(|i| format!("p{i}")).collect();
    for pool in &pools {
        store
            .put_pool(pool, &g5_spot_policy(8), T0)
            .await
            .expect("pool");
    }
    let mut heard = listener(&db).await;

    // Refused as a whole (the second pool does not exist): nothing committed, nothing said.
    let refused = ingest(&store, &[queue("p1", 5.0), queue("ghost", 5.0)]).await;
    assert!(
        refused.is_err(),
        "a batch naming an unknown pool is refused"
    );

    // One batch over twenty pools, three samples each: every pool is named exactly once, and
    // the refused batch's `p1` did not come first.
    let batch: Vec<NewSample> = pools
        .iter()
        .flat_map(|p| [queue(p, 1.0), queue(p, 2.0), queue(p, 3.0)])
        .enumerate()
        .map(|(i, mut s)| {
            s.at_ms += i as i64;
            s
        })
        .collect();
    ingest(&store, &batch).await.expect("ingest");
    let mut named = Vec::new();
    for _ in 0..pools.len() {
        named.push(next_pool(&mut heard).await);
    }
    let mut sorted = named.clone();
    sorted.sort();
    let mut expected = pools.clone();
    expected.sort();
    assert_eq!(sorted, expected, "every pool once, in {named:?}");
    let extra = tokio::time::timeout(Duration::from_millis(500), heard.recv()).await;
    assert!(extra.is_err(), "nothing more: {extra:?}");
}
