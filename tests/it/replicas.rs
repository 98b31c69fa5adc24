//! Two replicas on one PostgreSQL database: a change through one reaches the other's in-memory
//! catalog through LISTEN/NOTIFY, without a request to the database per read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Backend, TestApp, p4d_use1_az1_spot};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_posted_to_one_replica_reaches_the_other() {
    let a = TestApp::spawn(Backend::Postgres).await;
    let b = TestApp::spawn_on(Arc::clone(&a.db), false).await;
    assert_eq!(p4d_use1_az1_spot(&b).await, Some(2.4655));
    let batch = json!({"observations": [{
        "provider": "aws", "region": "us-east-1", "zone": "use1-az1",
        "instance_type": "p4d.24xlarge", "market": "spot", "price": 4.5,
        "observed_at": "2026-12-01T10:00:00Z"
    }]});
    assert_eq!(a.post_json("/v1/prices", &batch).await.status(), 200);
    // Delivery is asynchronous: poll replica B until it has reloaded, within a generous bound.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if p4d_use1_az1_spot(&b).await == Some(4.5) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica B never saw the new price"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_seed_the_catalog_once() {
    let db = Arc::new(crate::common::TestDb::new(Backend::Postgres).await);
    let (a, b) = tokio::join!(
        TestApp::spawn_on(Arc::clone(&db), false),
        TestApp::spawn_on(Arc::clone(&db), false)
    );
    let count_a = a.get_json("/readyz").await["catalog_offerings"]
        .as_u64()
        .unwrap();
    let count_b = b.get_json("/readyz").await["catalog_offerings"]
        .as_u64()
        .unwrap();
    assert_eq!(count_a, count_b);
    let history = a
        .get_json("/v1/prices/history?provider=aws&instance_type=p5.48xlarge&limit=10000")
        .await;
    let items = history["items"].as_array().unwrap();
    let mut keys: Vec<String> = items
        .iter()
        .map(|i| format!("{}{}{}", i["zone"], i["region"], i["market"]))
        .collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "a bundled price was recorded twice");
}
