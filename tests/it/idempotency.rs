//! `Idempotency-Key` on ingestion batches, over HTTP against both backends: replays, reuse
//! with another body, malformed keys, racing duplicates, keys of other callers, failed
//! requests and expiry.
//!
//! Samples, prices and notices are deduplicated by their own identity too, so a second write
//! of a batch would not add rows; what shows that a retry did not write again is its answer:
//! a replay repeats the first answer (`duplicates: 0`), a second write would count duplicates.

use std::sync::Arc;

use serde_json::{Value, json};
use sqlx::Connection;

use crate::common::{
    Backend, TestApp, TestDb, assert_problem, client_with_key, header_text, serve_config,
};
use crate::http_pools::{create_pool, rfc3339_ago, t4_policy};
use crate::on_both_backends;

const METRICS: &str = "/v1/webhooks/metrics";

fn batch(value: f64, at: &str) -> Value {
    json!({"samples": [{"pool": "p", "name": "queue_depth", "value": value, "at": at}]})
}

async fn post(
    app: &TestApp,
    client: &reqwest::Client,
    path: &str,
    key: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut req = client.post(app.url(path)).json(body);
    if let Some(key) = key {
        req = req.header("idempotency-key", key);
    }
    req.send().await.expect("POST")
}

fn replayed(r: &reqwest::Response) -> bool {
    r.headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

/// One number read straight from the database.
async fn count(app: &TestApp, sql: &str) -> i64 {
    let url = &app.db.url;
    if url.starts_with("sqlite:") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
    }
}

async fn samples_stored(app: &TestApp) -> i64 {
    count(app, "SELECT COUNT(*) FROM metric_samples").await
}

async fn keys_stored(app: &TestApp) -> i64 {
    count(app, "SELECT COUNT(*) FROM idempotency_keys").await
}

async fn app_with_pool(backend: Backend) -> TestApp {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "p", &t4_policy()).await;
    app
}

/// Makes a key with the ingest scope over HTTP; returns a client that sends it.
async fn ingest_client(app: &TestApp) -> reqwest::Client {
    let r = app
        .post_json("/v1/keys", &json!({"name": "ingest", "scopes": ["ingest"]}))
        .await;
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    client_with_key(body["token"].as_str().unwrap())
}

async fn a_retry_replays_the_first_answer_and_writes_nothing(backend: Backend) {
    let app = app_with_pool(backend).await;
    let body = batch(3.0, &rfc3339_ago(5));
    let first = post(&app, &app.client, METRICS, Some("batch-1"), &body).await;
    assert_eq!(first.status(), 200);
    assert!(!replayed(&first));
    let first_body = first.bytes().await.unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&first_body).unwrap(),
        json!({"accepted": 1, "duplicates": 0})
    );
    for _ in 0..2 {
        let again = post(&app, &app.client, METRICS, Some("batch-1"), &body).await;
        assert_eq!(again.status(), 200);
        assert!(replayed(&again));
        assert_eq!(
            again.headers().get("content-type").unwrap(),
            "application/json"
        );
        // The same bytes: a second write would have answered `duplicates: 1`.
        assert_eq!(again.bytes().await.unwrap(), first_body);
    }
    assert_eq!(samples_stored(&app).await, 1);
    assert_eq!(keys_stored(&app).await, 1);
    // Without a key the same batch is written again (and found duplicate), as before.
    let plain = post(&app, &app.client, METRICS, None, &body).await;
    assert!(!replayed(&plain));
    assert_eq!(
        plain.json::<Value>().await.unwrap(),
        json!({"accepted": 1, "duplicates": 1})
    );
    // The quoted form of the draft names the same key.
    let quoted = post(&app, &app.client, METRICS, Some("\"batch-1\""), &body).await;
    assert!(replayed(&quoted));
}

async fn replays_keep_the_status_of_other_ingestion_routes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let benchmark = json!({
        "workload": "resnet50", "provider": "aws", "instance_type": "g5.xlarge",
        "gpus": 1, "nodes": 1, "steps": 1000, "samples_per_sec": 900.0,
        "measured_at": "2026-11-01T00:00:00Z"
    });
    let first = post(&app, &app.client, "/v1/benchmarks", Some("b1"), &benchmark).await;
    assert_eq!(first.status(), 201);
    let again = post(&app, &app.client, "/v1/benchmarks", Some("b1"), &benchmark).await;
    assert_eq!(
        again.status(),
        201,
        "the stored status, not 200 for a duplicate"
    );
    assert!(replayed(&again));
    assert_eq!(
        again.json::<Value>().await.unwrap(),
        json!({"inserted": true})
    );

    let prices = json!({"observations": [{
        "provider": "aws", "region": "us-east-1", "zone": "use1-az1",
        "instance_type": "p4d.24xlarge", "market": "spot",
        "price": 3.25, "observed_at": "2026-12-01T10:00:00Z"
    }]});
    let first = post(&app, &app.client, "/v1/prices", Some("b1"), &prices).await;
    assert_eq!(first.status(), 200);
    assert!(
        !replayed(&first),
        "keys are per route: b1 on benchmarks is another key"
    );
    let again = post(&app, &app.client, "/v1/prices", Some("b1"), &prices).await;
    assert!(replayed(&again));
    assert_eq!(
        again.json::<Value>().await.unwrap(),
        json!({"inserted": 1, "duplicates": 0})
    );

    let events = json!({"events": [{"kind": "interruption_warning", "worker": "vm-gone", "at": rfc3339_ago(1)}]});
    let first = post(
        &app,
        &app.client,
        "/v1/webhooks/events",
        Some("e1"),
        &events,
    )
    .await;
    assert_eq!(first.status(), 200);
    let first_body = first.bytes().await.unwrap();
    let again = post(
        &app,
        &app.client,
        "/v1/webhooks/events",
        Some("e1"),
        &events,
    )
    .await;
    assert!(replayed(&again));
    assert_eq!(again.bytes().await.unwrap(), first_body);
    assert_eq!(keys_stored(&app).await, 3);
}

async fn the_same_key_with_another_body_is_422_and_writes_nothing(backend: Backend) {
    let app = app_with_pool(backend).await;
    let at = rfc3339_ago(5);
    let first = post(&app, &app.client, METRICS, Some("k"), &batch(3.0, &at)).await;
    assert_eq!(first.status(), 200);
    let other = batch(4.0, &rfc3339_ago(4));
    let r = post(&app, &app.client, METRICS, Some("k"), &other).await;
    assert!(!replayed(&r));
    let problem = assert_problem(r, 422, "idempotency-key").await;
    assert_eq!(problem["type"], "/problems/idempotency-key-reused");
    assert_eq!(samples_stored(&app).await, 1);
    // The same key on another route is another key.
    let events = json!({"events": []});
    let r = post(&app, &app.client, "/v1/webhooks/events", Some("k"), &events).await;
    assert_eq!(r.status(), 200);
}

/// A keyed body is read under its route's own limit: the webhooks' 16 MiB, the JSON routes'
/// 1 MiB (the test server's settings), as it would be without a key.
async fn keyed_bodies_meet_their_routes_own_limit(backend: Backend) {
    let app = app_with_pool(backend).await;
    let padding = " ".repeat(2 * 1024 * 1024);
    let body = format!("{}{padding}", batch(3.0, &rfc3339_ago(5)));
    let r = app
        .client
        .post(app.url(METRICS))
        .header("content-type", "application/json")
        .header("idempotency-key", "big")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let r = app
        .client
        .post(app.url("/v1/prices"))
        .header("content-type", "application/json")
        .header("idempotency-key", "big")
        .body(format!("{{\"prices\": []}}{padding}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(keys_stored(&app).await, 1);
}

async fn malformed_keys_are_400_naming_the_header(backend: Backend) {
    let app = app_with_pool(backend).await;
    let body = batch(3.0, &rfc3339_ago(5));
    let long = "k".repeat(256);
    for key in ["", "\"\"", long.as_str()] {
        let r = post(&app, &app.client, METRICS, Some(key), &body).await;
        let problem = assert_problem(r, 400, "idempotency-key").await;
        assert_eq!(problem["type"], "/problems/bad-idempotency-key", "{key:?}");
    }
    let latin1 = reqwest::header::HeaderValue::from_bytes(b"caf\xe9").unwrap();
    let r = app
        .client
        .post(app.url(METRICS))
        .header("idempotency-key", latin1)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_problem(r, 400, "idempotency-key").await;
    let r = app
        .client
        .post(app.url(METRICS))
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_problem(r, 400, "idempotency-key").await;
    assert_eq!(samples_stored(&app).await, 0);
    assert_eq!(keys_stored(&app).await, 0);
    // 255 characters is still a key.
    let longest = "k".repeat(255);
    let r = post(&app, &app.client, METRICS, Some(&longest), &body).await;
    assert_eq!(r.status(), 200);
}

async fn racing_duplicates_write_once_and_all_get_the_first_answer(backend: Backend) {
    let app = Arc::new(app_with_pool(backend).await);
    let body = Arc::new(batch(3.0, &rfc3339_ago(5)));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (app, body) = (app.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let r = post(&app, &app.client, METRICS, Some("race"), &body).await;
            let was_replayed = replayed(&r);
            (
                r.status().as_u16(),
                was_replayed,
                r.json::<Value>().await.unwrap(),
            )
        }));
    }
    let mut fresh = 0;
    for task in tasks {
        let (status, was_replayed, out) = task.await.unwrap();
        assert_eq!(status, 200, "{out}");
        // Had two of them written, one would count the other's sample as a duplicate.
        assert_eq!(out, json!({"accepted": 1, "duplicates": 0}));
        fresh += usize::from(!was_replayed);
    }
    assert_eq!(fresh, 1, "exactly one request wrote the batch");
    assert_eq!(samples_stored(&app).await, 1);
    assert_eq!(keys_stored(&app).await, 1);
}

async fn keys_of_other_callers_are_independent(backend: Backend) {
    let app = app_with_pool(backend).await;
    let other = ingest_client(&app).await;
    let mine = batch(3.0, &rfc3339_ago(5));
    let theirs = batch(4.0, &rfc3339_ago(4));
    let r = post(&app, &app.client, METRICS, Some("shared"), &mine).await;
    assert_eq!(r.status(), 200);
    // Another key, another body, the same Idempotency-Key: neither a replay nor a 422.
    let r = post(&app, &other, METRICS, Some("shared"), &theirs).await;
    assert_eq!(r.status(), 200);
    assert!(!replayed(&r));
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"accepted": 1, "duplicates": 0})
    );
    // And the first caller's key still answers its own batch.
    let r = post(&app, &app.client, METRICS, Some("shared"), &mine).await;
    assert!(replayed(&r));
    assert_eq!(samples_stored(&app).await, 2);
    assert_eq!(keys_stored(&app).await, 2);
}

async fn a_failed_request_leaves_the_key_free(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = batch(3.0, &rfc3339_ago(5));
    // No pool `p` yet: 422, and the key is not kept.
    let r = post(&app, &app.client, METRICS, Some("fix-me"), &body).await;
    assert_problem(r, 422, "samples[0].pool").await;
    assert_eq!(keys_stored(&app).await, 0);
    create_pool(&app, "p", &t4_policy()).await;
    let r = post(&app, &app.client, METRICS, Some("fix-me"), &body).await;
    assert_eq!(r.status(), 200);
    assert!(!replayed(&r));
    assert_eq!(samples_stored(&app).await, 1);
    // A corrected body under the same key after a failure is accepted as well.
    let bad = batch(-1.0, &rfc3339_ago(5));
    let r = post(&app, &app.client, METRICS, Some("second"), &bad).await;
    assert_problem(r, 422, "samples[0].value").await;
    let fixed = batch(1.0, &rfc3339_ago(3));
    let r = post(&app, &app.client, METRICS, Some("second"), &fixed).await;
    assert_eq!(r.status(), 200);
    assert!(!replayed(&r));
}

async fn keys_expire_after_their_ttl(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let mut serve = serve_config(false);
    serve.idempotency_ttl_sec = 1;
    let app = TestApp::spawn_with(db, serve).await;
    create_pool(&app, "p", &t4_policy()).await;
    let body = batch(3.0, &rfc3339_ago(5));
    let r = post(&app, &app.client, METRICS, Some("short"), &body).await;
    assert_eq!(r.status(), 200);
    let r = post(&app, &app.client, METRICS, Some("short"), &body).await;
    assert!(replayed(&r), "within the TTL");
    app.state
        .clock
        .advance(std::time::Duration::from_millis(1100));
    // Expired: the key is free again, even for another body.
    let other = batch(4.0, &rfc3339_ago(4));
    let r = post(&app, &app.client, METRICS, Some("short"), &other).await;
    assert_eq!(r.status(), 200);
    assert!(!replayed(&r));
    assert_eq!(samples_stored(&app).await, 2);
    assert_eq!(keys_stored(&app).await, 1, "the expired row was replaced");
    app.state
        .clock
        .advance(std::time::Duration::from_millis(1100));
    let pruned = app
        .state
        .store
        .prune_idempotency_keys(app.state.clock.now_ms())
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    assert_eq!(keys_stored(&app).await, 0);
}

async fn cors_allows_the_key_and_exposes_the_replay_header(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let r = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, app.url(METRICS))
        .header("origin", "https://dashboard.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "idempotency-key,content-type",
        )
        .send()
        .await
        .unwrap();
    let allowed = header_text(&r, "access-control-allow-headers").to_ascii_lowercase();
    assert!(allowed.contains("idempotency-key"), "{allowed}");
    let r = app
        .client
        .post(app.url("/v1/webhooks/events"))
        .header("origin", "https://dashboard.example")
        .json(&json!({"events": []}))
        .send()
        .await
        .unwrap();
    let exposed = header_text(&r, "access-control-expose-headers").to_ascii_lowercase();
    assert!(exposed.contains("idempotent-replayed"), "{exposed}");
}

/// The store's half of a race, made deterministic: a second claim of a live key fails and
/// writes nothing (the HTTP layer answers it with the first answer); an expired key is
/// claimed afresh.
async fn the_store_refuses_a_second_claim_of_a_live_key(backend: Backend) {
    use trainscaler::store::{IdempotencyClaim, IngestReport, NewSample, Once, StoreError};
    let app = app_with_pool(backend).await;
    let store = &app.state.store;
    let now = trainscaler::timefmt::now_ms();
    let sample = |at_ms| NewSample {
        pool: "p".into(),
        worker: String::new(),
        name: "queue_depth",
        value: 1.0,
        at_ms,
    };
    let claim = IdempotencyClaim {
        caller: "c".into(),
        route: METRICS.into(),
        key: "k".into(),
        request_hash: "h".into(),
        now_ms: now,
        expires_at_ms: now + 60_000,
    };
    let respond = |r: &IngestReport| trainscaler::store::StoredResponse {
        status: 200,
        content_type: "application/json".into(),
        body: r.accepted.to_string().into_bytes(),
    };
    let once = || {
        Some(Once {
            claim: &claim,
            respond: &respond,
        })
    };
    store
        .ingest_once(vec![sample(now - 2000)], |_, _| false, now, once())
        .await
        .unwrap();
    let second = store
        .ingest_once(vec![sample(now - 1000)], |_, _| false, now, once())
        .await;
    assert!(
        matches!(second, Err(StoreError::IdempotencyKeyTaken)),
        "{second:?}"
    );
    assert_eq!(
        samples_stored(&app).await,
        1,
        "the refused batch wrote nothing"
    );
    let kept = store
        .idempotency_key("c", METRICS, "k", now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.request_hash, "h");
    assert_eq!(kept.response.unwrap().body, b"1");
    // Past its expiry the same key is claimed again, with the new request's hash.
    let later = IdempotencyClaim {
        request_hash: "h2".into(),
        now_ms: now + 60_000,
        expires_at_ms: now + 120_000,
        ..claim.clone()
    };
    let again = Some(Once {
        claim: &later,
        respond: &respond,
    });
    store
        .ingest_once(vec![sample(now - 1000)], |_, _| false, now, again)
        .await
        .unwrap();
    assert_eq!(samples_stored(&app).await, 2);
    let renewed = store
        .idempotency_key("c", METRICS, "k", now + 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renewed.request_hash, "h2");
}

on_both_backends!(
    the_store_refuses_a_second_claim_of_a_live_key,
    a_retry_replays_the_first_answer_and_writes_nothing,
    replays_keep_the_status_of_other_ingestion_routes,
    the_same_key_with_another_body_is_422_and_writes_nothing,
    malformed_keys_are_400_naming_the_header,
    keyed_bodies_meet_their_routes_own_limit,
    racing_duplicates_write_once_and_all_get_the_first_answer,
    keys_of_other_callers_are_independent,
    a_failed_request_leaves_the_key_free,
    keys_expire_after_their_ttl,
    cors_allows_the_key_and_exposes_the_replay_header,
);
