//! Prometheus remote-write over HTTP, with a payload encoded by Python's protobuf and cramjam
//! (`scripts/make_remote_write_fixture.py`), not by our own code.

use serde_json::{Value, json};
use sqlx::Connection;

use crate::common::{Backend, TestApp, assert_problem};
use crate::http_pools::{create_pool, t4_policy};
use crate::on_both_backends;

const PAYLOAD: &[u8] = include_bytes!("../fixtures/remote_write/dcgm.snappy");
const EXPECTED: &str = include_str!("../fixtures/remote_write/dcgm.expected.json");

async fn remote_write(app: &TestApp, body: Vec<u8>, content_type: &str) -> reqwest::Response {
    app.client
        .post(app.url("/v1/webhooks/prometheus"))
        .header("content-type", content_type)
        .header("content-encoding", "snappy")
        .header("x-prometheus-remote-write-version", "0.1.0")
        .body(body)
        .send()
        .await
        .expect("POST")
}

/// (count, sum of values) of the stored samples, read straight from the database.
async fn stored(app: &TestApp) -> (i64, f64) {
    let url = &app.db.url;
    let q = "SELECT COUNT(*), COALESCE(SUM(value), 0) FROM metric_samples";
    if url.starts_with("sqlite:") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_as::<_, (i64, f64)>(q)
            .fetch_one(&mut c)
            .await
            .unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_as::<_, (i64, f64)>(q)
            .fetch_one(&mut c)
            .await
            .unwrap()
    }
}

async fn dcgm_payload_is_stored_per_worker_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let expected: Value = serde_json::from_str(EXPECTED).unwrap();
    let rows = expected["samples"].as_array().unwrap();
    // Only one of the fixture's two pools exists here: the other's samples are dropped.
    create_pool(&app, "a100-train", &t4_policy()).await;
    let r = remote_write(&app, PAYLOAD.to_vec(), "application/x-protobuf").await;
    assert_eq!(r.status(), 200);
    let out: Value = r.json().await.unwrap();
    let ours: Vec<&Value> = rows.iter().filter(|s| s["pool"] == "a100-train").collect();
    assert_eq!(out["series"], expected["series_total"]);
    assert_eq!(
        out["skipped_no_pool_label"],
        expected["series_skipped_no_pool"]
    );
    assert_eq!(
        out["skipped_unknown_metric"],
        expected["series_skipped_unknown_metric"]
    );
    assert_eq!(out["accepted"], json!(ours.len()));
    assert_eq!(out["skipped_unknown_pool"], json!(rows.len() - ours.len()));
    let (count, sum) = stored(&app).await;
    let want: f64 = ours.iter().map(|s| s["value"].as_f64().unwrap()).sum();
    assert_eq!(count as usize, ours.len());
    assert!((sum - want).abs() < 1e-9, "{sum} vs {want}");
    // Prometheus retries a batch it is unsure of: nothing is counted twice.
    let out: Value = remote_write(&app, PAYLOAD.to_vec(), "application/x-protobuf")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["duplicates"], out["accepted"]);
    assert_eq!(stored(&app).await.0 as usize, ours.len());
}

async fn bad_remote_write_bodies_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let r = remote_write(&app, PAYLOAD.to_vec(), "application/json").await;
    assert_problem(r, 415, "content-type").await;
    let r = remote_write(
        &app,
        b"not snappy at all".to_vec(),
        "application/x-protobuf",
    )
    .await;
    assert_problem(r, 400, "body").await;
    // Valid snappy whose content is not a WriteRequest.
    let junk = snap::raw::Encoder::new().compress_vec(&[0xff; 64]).unwrap();
    let r = remote_write(&app, junk, "application/x-protobuf").await;
    assert_problem(r, 400, "body").await;
    // A snappy header that claims far more than the limit is refused before decompressing.
    let mut bomb = Vec::new();
    let mut n: u64 = 1 << 31;
    while n >= 0x80 {
        bomb.push((n as u8) | 0x80);
        n >>= 7;
    }
    bomb.push(n as u8);
    let r = remote_write(&app, bomb, "application/x-protobuf").await;
    assert_problem(r, 413, "body").await;
}

on_both_backends!(
    dcgm_payload_is_stored_per_worker_once,
    bad_remote_write_bodies_are_refused
);
