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
    let q = "SELECT COUNT(*), COALESCE(SUM(value), 0.0) FROM metric_samples";
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

/// A remote-write request built here (the wire format is checked against Python's encoder in
/// the test above); `series` are (labels, value).
pub fn write_request(series: Vec<(Vec<(&str, String)>, f64)>) -> Vec<u8> {
    use prost::Message;
    use trainscaler::ingest::remote_write::{Label, Sample, TimeSeries, WriteRequest};
    let now = trainscaler::timefmt::now_ms() - 1_000;
    let req = WriteRequest {
        timeseries: series
            .into_iter()
            .map(|(labels, value)| TimeSeries {
                labels: labels
                    .into_iter()
                    .map(|(name, value)| Label {
                        name: name.into(),
                        value,
                    })
                    .collect(),
                samples: vec![Sample {
                    value,
                    timestamp: now,
                }],
            })
            .collect(),
    };
    snap::raw::Encoder::new()
        .compress_vec(&req.encode_to_vec())
        .unwrap()
}

pub fn gpu_util(pool: &str, host: &str, percent: f64) -> (Vec<(&'static str, String)>, f64) {
    (
        vec![
            ("__name__", "DCGM_FI_DEV_GPU_UTIL".into()),
            ("pool", pool.into()),
            ("Hostname", host.into()),
            ("gpu", "0".into()),
        ],
        percent,
    )
}

/// `trainscaler_samples_dropped_total{reason="<reason>"}` from `/metrics` (0 when absent).
async fn dropped_metric(app: &TestApp, reason: &str) -> u64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    let prefix = format!("trainscaler_samples_dropped_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// One request cannot give a pool more series than it can have workers, nor carry more series
/// than the limit, nor store a value no queue can have; what is dropped is said, by reason, in
/// the answer and in `/metrics`.
async fn remote_write_is_bounded_and_says_what_it_dropped(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "p", &t4_policy()).await; // max_workers 4, no registered workers

    // Too many series: refused whole, naming the limit.
    let flood: Vec<_> = (0..trainscaler::ingest::limits::MAX_SERIES_PER_REQUEST + 1)
        .map(|i| gpu_util("p", &format!("h{i}"), 50.0))
        .collect();
    let r = remote_write(&app, write_request(flood), "application/x-protobuf").await;
    assert_problem(r, 413, "series").await;
    assert_eq!(stored(&app).await.0, 0);

    // Ten hosts for a pool of at most four workers, and an unbelievable queue.
    let mut series: Vec<_> = (0..10)
        .map(|i| gpu_util("p", &format!("h{i}"), 50.0))
        .collect();
    series.push((
        vec![
            ("__name__", "trainscaler_queue_depth".into()),
            ("pool", "p".into()),
        ],
        1e308,
    ));
    let r = remote_write(&app, write_request(series), "application/x-protobuf").await;
    assert_eq!(r.status(), 200);
    let out: Value = r.json().await.unwrap();
    assert_eq!(out["accepted"], 4, "{out}");
    assert_eq!(
        out["dropped"],
        json!({"out_of_range": 1, "too_many_workers": 6}),
        "{out}"
    );
    assert_eq!(stored(&app).await.0, 4);
    assert_eq!(dropped_metric(&app, "too_many_workers").await, 6);
    assert_eq!(dropped_metric(&app, "out_of_range").await, 1);

    // Once the pool has registered workers, only those are taken.
    create_pool(&app, "w", &t4_policy()).await;
    crate::http_pools::add_workers(&app, "w", 1, "spot").await; // worker `spot-0`
    let series = vec![
        gpu_util("w", "spot-0", 40.0),
        gpu_util("w", "stranger", 40.0),
    ];
    let out: Value = remote_write(&app, write_request(series), "application/x-protobuf")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["accepted"], 1, "{out}");
    assert_eq!(out["dropped"], json!({"unknown_worker": 1}), "{out}");
    assert_eq!(dropped_metric(&app, "unknown_worker").await, 1);
}

/// JSON samples: values no metric can have and overlong worker names are 422s naming the
/// field; nothing of the batch is stored.
async fn json_samples_are_bounded(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "p", &t4_policy()).await;
    let post = |samples: Value| {
        app.client
            .post(app.url("/v1/webhooks/metrics"))
            .json(&json!({ "samples": samples }))
            .send()
    };
    let r = post(json!([
        {"pool": "p", "name": "queue_depth", "value": 3},
        {"pool": "p", "name": "queue_depth", "value": 1e308}
    ]))
    .await
    .unwrap();
    assert_problem(r, 422, "samples[1].value").await;
    let long = "w".repeat(trainscaler::ingest::limits::MAX_WORKER_LEN + 1);
    let r = post(json!([{"pool": "p", "worker": long, "name": "gpu_utilization", "value": 0.5}]))
        .await
        .unwrap();
    assert_problem(r, 422, "samples[0].worker").await;
    assert_eq!(stored(&app).await.0, 0);
}

/// The bound on a pool's workers holds across requests, not only within one: workers whose
/// series are fresh count against `max_workers`, by remote write and JSON alike, and a worker
/// whose series went stale frees its place.
async fn a_pools_workers_are_bounded_across_requests(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "p", &t4_policy()).await; // max_workers 4, no registered workers
    let hosts = |range: std::ops::Range<usize>| -> Vec<_> {
        range
            .map(|i| gpu_util("p", &format!("h{i}"), 50.0))
            .collect()
    };
    let out: Value = remote_write(&app, write_request(hosts(0..4)), "application/x-protobuf")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["accepted"], 4, "{out}");
    // A later request: the four hosts keep reporting, two new ones would be six.
    let out: Value = remote_write(&app, write_request(hosts(2..6)), "application/x-protobuf")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["accepted"], 2, "{out}");
    assert_eq!(out["dropped"], json!({"too_many_workers": 2}), "{out}");
    // JSON is stored all or nothing: the batch is refused, naming the sample.
    let post = |samples: Value| {
        app.client
            .post(app.url("/v1/webhooks/metrics"))
            .json(&json!({ "samples": samples }))
            .send()
    };
    let before = stored(&app).await.0;
    let r = post(json!([
        {"pool": "p", "worker": "h1", "name": "gpu_utilization", "value": 0.5},
        {"pool": "p", "worker": "h9", "name": "gpu_utilization", "value": 0.5}
    ]))
    .await
    .unwrap();
    let body = assert_problem(r, 422, "samples[1].worker").await;
    assert!(body.to_string().contains("max_workers"), "{body}");
    assert_eq!(stored(&app).await.0, before);

    // A second pool whose four workers last reported ten minutes ago (stale against the
    // default signal_max_age_sec of 300): four new workers take their places.
    create_pool(&app, "q", &t4_policy()).await;
    let old = trainscaler::core::timestamp::rfc3339(trainscaler::timefmt::now_ms() - 600_000);
    let stale: Vec<Value> = (0..4)
        .map(|i| json!({"pool": "q", "worker": format!("old{i}"), "name": "gpu_utilization", "value": 0.5, "at": old}))
        .collect();
    assert_eq!(post(Value::Array(stale)).await.unwrap().status(), 200);
    let fresh: Vec<Value> = (0..4)
        .map(|i| json!({"pool": "q", "worker": format!("new{i}"), "name": "gpu_utilization", "value": 0.5}))
        .collect();
    let r = post(Value::Array(fresh)).await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}

/// A JSON sample about a worker a pool with registered workers does not have is refused,
/// naming the sample.
async fn json_samples_of_unknown_workers_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "w", &t4_policy()).await;
    crate::http_pools::add_workers(&app, "w", 1, "spot").await; // worker `spot-0`
    let r = app
        .client
        .post(app.url("/v1/webhooks/metrics"))
        .json(&json!({"samples": [
            {"pool": "w", "worker": "spot-0", "name": "gpu_utilization", "value": 0.5},
            {"pool": "w", "name": "queue_depth", "value": 2},
            {"pool": "w", "worker": "stranger", "name": "gpu_utilization", "value": 0.5}
        ]}))
        .send()
        .await
        .unwrap();
    let body = assert_problem(r, 422, "samples[2].worker").await;
    assert!(body.to_string().contains("stranger"), "{body}");
    assert_eq!(stored(&app).await.0, 0);
}

/// Worker series silent past their pool's horizon are deleted by the pruning pass; fresh ones
/// and the pool-level series stay.
async fn stale_worker_series_are_pruned(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "p", &t4_policy()).await;
    let now = trainscaler::timefmt::now_ms();
    let two_hours_ago = trainscaler::core::timestamp::rfc3339(now - 7_200_000);
    let r = app
        .client
        .post(app.url("/v1/webhooks/metrics"))
        .json(&json!({"samples": [
            {"pool": "p", "worker": "gone", "name": "gpu_utilization", "value": 0.5, "at": two_hours_ago},
            {"pool": "p", "worker": "here", "name": "gpu_utilization", "value": 0.5},
            {"pool": "p", "name": "queue_depth", "value": 2, "at": two_hours_ago}
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let deleted = trainscaler::ingest::worker_gate::prune_stale_series(&app.state.store, now)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let left = app.state.store.latest_signals("p", 0).await.unwrap();
    let mut workers: Vec<&str> = left.iter().map(|s| s.worker.as_str()).collect();
    workers.sort();
    assert_eq!(workers, ["", "here"]);
}

/// Ingestion is rate-limited in samples as well as requests: a key with 10 samples a second
/// stores a batch of 8, is told to wait for the next 8, and a batch of 11 (more than a
/// second's worth) is a 413 naming the limit.
async fn ingestion_is_rate_limited_in_samples(backend: Backend) {
    let db = std::sync::Arc::new(crate::common::TestDb::new(backend).await);
    let mut serve = crate::common::serve_config(false);
    serve.ingest_samples_per_sec = 10;
    let app = TestApp::spawn_with(db, serve).await;
    create_pool(&app, "p", &t4_policy()).await;
    let batch = |n: usize| {
        let samples: Vec<Value> = (0..n)
            .map(|i| json!({"pool": "p", "worker": format!("w{}", i % 4), "name": "gpu_utilization", "value": 0.5}))
            .collect();
        app.client
            .post(app.url("/v1/webhooks/metrics"))
            .json(&json!({ "samples": samples }))
            .send()
    };
    assert_eq!(batch(8).await.unwrap().status(), 200);
    let r = batch(8).await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    let r = batch(11).await.unwrap();
    assert_problem(r, 413, "samples").await;
}

on_both_backends!(
    remote_write_is_bounded_and_says_what_it_dropped,
    a_pools_workers_are_bounded_across_requests,
    json_samples_of_unknown_workers_are_refused,
    stale_worker_series_are_pruned,
    json_samples_are_bounded,
    ingestion_is_rate_limited_in_samples,
    dcgm_payload_is_stored_per_worker_once,
    bad_remote_write_bodies_are_refused
);
