//! Catalog changes made elsewhere reach a running server's in-memory catalog: another replica
//! on PostgreSQL (LISTEN/NOTIFY), and another process on the SQLite file (version polling).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Backend, TestApp, aws_fixture, p4d_use1_az1_spot, serve_config};

/// Polls `app` until p4d's listed spot price is `expected`, within a generous bound.
async fn wait_for_spot(app: &TestApp, expected: f64, within: Duration) {
    let deadline = Instant::now() + within;
    while p4d_use1_az1_spot(app).await != Some(expected) {
        assert!(
            Instant::now() < deadline,
            "the server never listed spot price {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_posted_to_one_replica_reaches_the_other_by_notification() {
    let a = TestApp::spawn(Backend::Postgres).await;
    // Replica B polls only once an hour, so only a notification can tell it in time.
    let mut slow = serve_config(false);
    slow.catalog_poll_ms = 3_600_000;
    let b = TestApp::spawn_with(Arc::clone(&a.db), slow).await;
    assert_eq!(p4d_use1_az1_spot(&b).await, Some(2.4655));
    let batch = json!({"observations": [{
        "provider": "aws", "region": "us-east-1", "zone": "use1-az1",
        "instance_type": "p4d.24xlarge", "market": "spot", "price": 4.5,
        "observed_at": "2026-12-01T10:00:00Z"
    }]});
    assert_eq!(a.post_json("/v1/prices", &batch).await.status(), 200);
    assert_eq!(
        p4d_use1_az1_spot(&a).await,
        Some(4.5),
        "the writing replica reads its own write"
    );
    wait_for_spot(&b, 4.5, Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_import_into_the_sqlite_file_reaches_the_running_server() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vms.csv");
    std::fs::write(&file, aws_fixture("7.77")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trainscaler"))
        .args([
            "catalog",
            "import",
            "--provider",
            "aws",
            file.to_str().unwrap(),
        ])
        .env("DATABASE_URL", &app.db.url)
        .env("TRAINSCALER_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The test server polls every 200 ms.
    wait_for_spot(&app, 7.77, Duration::from_secs(20)).await;
}
