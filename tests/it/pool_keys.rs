//! API keys restricted to pools (`pools` in `POST /v1/keys`, `--pool` on the command line):
//! such a key reaches its pools and no other, whether the pool is in the path, in the body or
//! in a listing, on both backends.

use reqwest::Method;
use serde_json::{Value, json};
use sqlx::Connection;

use crate::common::{
    Backend, TestApp, assert_problem, client_with_key, trainscaler, trainscaler_ok,
};
use crate::http_pools::{create_pool, put, rfc3339_ago, t4_policy};
use crate::http_remote_write::{gpu_util, write_request};
use crate::on_both_backends;

/// The key's pool and another one.
const OWN: &str = "team-a";
const OTHER: &str = "team-b";

/// Two pools, each with one worker, and a key restricted to `pools` with `scopes`.
async fn setup(backend: Backend, scopes: &[&str], pools: &[&str]) -> (TestApp, reqwest::Client) {
    let app = TestApp::spawn(backend).await;
    for pool in [OWN, OTHER] {
        create_pool(&app, pool, &t4_policy()).await;
        let worker = json!({"instance_type": "g4dn.12xlarge", "market": "on_demand", "started_at": rfc3339_ago(600)});
        let r = put(&app, &format!("/v1/pools/{pool}/workers/{pool}-w"), &worker).await;
        assert_eq!(r.status(), 201);
    }
    let r = app
        .post_json(
            "/v1/keys",
            &json!({"name": "restricted", "scopes": scopes, "pools": pools}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    let client = client_with_key(body["token"].as_str().unwrap());
    (app, client)
}

/// Samples stored for `pool`, read straight from the database.
async fn stored_samples(app: &TestApp, pool: &str) -> i64 {
    let url = &app.db.url;
    let q = "SELECT COUNT(*) FROM metric_samples WHERE pool = $1";
    if url.starts_with("sqlite:") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        let q = q.replace("$1", "?1");
        sqlx::query_scalar(&q)
            .bind(pool)
            .fetch_one(&mut c)
            .await
            .unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar(q)
            .bind(pool)
            .fetch_one(&mut c)
            .await
            .unwrap()
    }
}

/// Events in `pool`'s log, as the admin key sees it.
async fn event_count(app: &TestApp, pool: &str) -> usize {
    let log = app.get_json(&format!("/v1/pools/{pool}/events")).await;
    log["items"].as_array().unwrap().len()
}

/// Sends `body` as JSON to `path` with `method`, as `key`.
async fn send(
    key: &reqwest::Client,
    app: &TestApp,
    method: Method,
    path: &str,
    body: &Value,
) -> reqwest::Response {
    key.request(method, app.url(path))
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn post(key: &reqwest::Client, app: &TestApp, path: &str, body: Value) -> reqwest::Response {
    send(key, app, Method::POST, path, &body).await
}

async fn get(client: &reqwest::Client, app: &TestApp, path: &str) -> reqwest::Response {
    client.get(app.url(path)).send().await.unwrap()
}

/// Posts `samples` (a JSON array) to the metrics webhook as `key`.
async fn post_samples(key: &reqwest::Client, app: &TestApp, samples: Value) -> reqwest::Response {
    post(
        key,
        app,
        "/v1/webhooks/metrics",
        json!({ "samples": samples }),
    )
    .await
}

/// Posts `events` (a JSON array) to the events webhook as `key`.
async fn post_events(key: &reqwest::Client, app: &TestApp, events: Value) -> reqwest::Response {
    post(key, app, "/v1/webhooks/events", json!({ "events": events })).await
}

/// The `name` of each item of a JSON array.
fn names(items: &Value) -> Vec<&str> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect()
}

fn sample(pool: &str) -> Value {
    json!({"pool": pool, "name": "queue_depth", "value": 2})
}

fn notice(pool: &str) -> Value {
    json!({"kind": "rebalance_recommendation", "pool": pool, "worker": format!("{pool}-w"), "at": rfc3339_ago(5)})
}

async fn a_restricted_key_writes_and_decides_for_its_own_pools_only(backend: Backend) {
    let (app, key) = setup(backend, &["ingest", "decide"], &[OWN]).await;
    // Samples.
    let r = post_samples(&key, &app, json!([sample(OTHER)])).await;
    assert_problem(r, 403, "samples[0].pool").await;
    let r = post_samples(&key, &app, json!([sample(OWN)])).await;
    assert_eq!(r.status(), 200);
    assert_eq!(stored_samples(&app, OTHER).await, 0);
    assert_eq!(stored_samples(&app, OWN).await, 1);
    // Events, named by pool.
    let before = event_count(&app, OTHER).await;
    let r = post_events(&key, &app, json!([notice(OTHER)])).await;
    assert_problem(r, 403, "events[0].pool").await;
    assert_eq!(event_count(&app, OTHER).await, before);
    let r = post_events(&key, &app, json!([notice(OWN)])).await;
    assert_eq!(r.status(), 200);
    let out: Value = r.json().await.unwrap();
    assert_eq!(out["recorded"], 1, "{out}");
    // Decisions.
    let r = post(&key, &app, "/decide", json!({"pool": OTHER})).await;
    assert_problem(r, 403, "pool").await;
    let r = post(&key, &app, "/decide", json!({"pool": OWN})).await;
    assert_eq!(r.status(), 200);
    // A job decision names no pool: any key with `decide` may ask.
    let job = json!({"job": {"gpu_memory_gib": 10, "gpus": 1, "hours": 1}});
    let r = post(&key, &app, "/decide", job.clone()).await;
    let admin = app.post_json("/decide", &job).await.status();
    assert_eq!(r.status(), admin);
    // Remote write: one series of another pool refuses the whole request.
    let mixed = write_request(vec![
        gpu_util(OWN, "team-a-w", 50.0),
        gpu_util(OTHER, "team-b-w", 50.0),
    ]);
    let remote_write = |body: Vec<u8>| {
        key.post(app.url("/v1/webhooks/prometheus"))
            .header("content-type", "application/x-protobuf")
            .header("content-encoding", "snappy")
            .body(body)
            .send()
    };
    assert_problem(remote_write(mixed).await.unwrap(), 403, "pool").await;
    assert_eq!(
        stored_samples(&app, OWN).await,
        1,
        "nothing of the request kept"
    );
    let own = write_request(vec![gpu_util(OWN, "team-a-w", 50.0)]);
    assert_eq!(remote_write(own).await.unwrap().status(), 200);
    assert_eq!(stored_samples(&app, OWN).await, 2);
}

async fn a_batch_that_touches_another_pool_is_refused_whole(backend: Backend) {
    let (app, key) = setup(backend, &["ingest"], &[OWN]).await;
    let r = post_samples(&key, &app, json!([sample(OWN), sample(OWN), sample(OTHER)])).await;
    assert_problem(r, 403, "samples[2].pool").await;
    assert_eq!(stored_samples(&app, OWN).await, 0, "nothing half-written");
    // A notice that names only its worker is checked against the worker's pool, and one of
    // another pool's workers refuses the batch with the notices before it.
    let own_before = event_count(&app, OWN).await;
    let other_before = event_count(&app, OTHER).await;
    let by_worker = |pool: &str| json!({"kind": "rebalance_recommendation", "worker": format!("{pool}-w"), "at": rfc3339_ago(5)});
    let r = post_events(&key, &app, json!([by_worker(OWN), by_worker(OTHER)])).await;
    assert_problem(r, 403, "events[1]").await;
    assert_eq!(
        event_count(&app, OWN).await,
        own_before,
        "nothing half-written"
    );
    assert_eq!(event_count(&app, OTHER).await, other_before);
    let r = post_events(&key, &app, json!([by_worker(OWN)])).await;
    assert_eq!(r.status(), 200);
    assert_eq!(event_count(&app, OWN).await, own_before + 1);
}

async fn a_restricted_key_reads_and_lists_its_own_pools_only(backend: Backend) {
    let (app, key) = setup(backend, &["read"], &[OWN]).await;
    for (path, field) in [
        (format!("/v1/pools/{OTHER}"), "name"),
        (format!("/v1/pools/{OTHER}/workers"), "name"),
        (format!("/v1/pools/{OTHER}/events"), "name"),
        (format!("/fleet/{OTHER}"), "pool"),
        (format!("/v1/keda/pools/{OTHER}"), "pool"),
        // A pool that does not exist is refused the same way: no probing for names.
        ("/v1/pools/nobody".to_string(), "name"),
    ] {
        assert_problem(get(&key, &app, &path).await, 403, field).await;
    }
    for path in [
        format!("/v1/pools/{OWN}"),
        format!("/v1/pools/{OWN}/workers"),
        format!("/v1/pools/{OWN}/events"),
        format!("/fleet/{OWN}"),
        format!("/v1/keda/pools/{OWN}"),
        "/v1/offerings?gpu=T4".to_string(),
    ] {
        assert_eq!(get(&key, &app, &path).await.status(), 200, "{path}");
    }
    let pools: Value = get(&key, &app, "/v1/pools").await.json().await.unwrap();
    assert_eq!(names(&pools["items"]), [OWN]);
    let fleet: Value = get(&key, &app, "/fleet").await.json().await.unwrap();
    assert_eq!(names(&fleet["pools"]), [OWN]);
    assert_eq!(fleet["totals"]["pools"], 1);
    assert_eq!(
        fleet["totals"]["workers"], 1,
        "totals count the key's pools only"
    );
    let page = get(&key, &app, "/").await.text().await.unwrap();
    assert!(
        page.contains(OWN) && !page.contains(OTHER),
        "the fleet page shows the key's pools only"
    );
    // `/metrics` labels series with every pool: it needs a key that reaches every pool.
    assert_problem(get(&key, &app, "/metrics").await, 403, "Authorization").await;
    // The admin key still sees both.
    let all = app.get_json("/v1/pools").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 2);
}

async fn an_admin_key_with_pools_manages_those_pools_and_nothing_global(backend: Backend) {
    let (app, key) = setup(backend, &["admin"], &[OWN, "team-new"]).await;
    let policy = t4_policy();
    // Pools in its list it may create and change; others not, existing or not.
    let r = send(&key, &app, Method::PUT, "/v1/pools/team-new", &policy).await;
    assert_eq!(r.status(), 201);
    for path in ["/v1/pools/team-c".to_string(), format!("/v1/pools/{OTHER}")] {
        let r = send(&key, &app, Method::PUT, &path, &policy).await;
        assert_problem(r, 403, "name").await;
    }
    // Workers likewise.
    let worker = json!({"instance_type": "g4dn.12xlarge", "market": "on_demand", "started_at": rfc3339_ago(60)});
    let own_worker = format!("/v1/pools/{OWN}/workers/w2");
    let r = send(&key, &app, Method::PUT, &own_worker, &worker).await;
    assert_eq!(r.status(), 201);
    let none = json!({});
    for (method, path, body) in [
        (
            Method::PUT,
            format!("/v1/pools/{OTHER}/workers/w2"),
            &worker,
        ),
        (
            Method::DELETE,
            format!("/v1/pools/{OTHER}/workers/{OTHER}-w"),
            &none,
        ),
        (Method::DELETE, format!("/v1/pools/{OTHER}"), &none),
    ] {
        let r = send(&key, &app, method, &path, body).await;
        assert_problem(r, 403, "name").await;
    }
    assert_eq!(
        app.get(&format!("/v1/pools/{OTHER}")).await.status(),
        200,
        "still there"
    );
    // Keys and the catalog reach every pool: refused, so a restricted key cannot make itself
    // an unrestricted one.
    let unrestricted = json!({"name": "x", "scopes": ["admin"]});
    let r = post(&key, &app, "/v1/keys", unrestricted).await;
    assert_problem(r, 403, "Authorization").await;
    assert_problem(get(&key, &app, "/v1/keys").await, 403, "Authorization").await;
    let r = key
        .post(app.url("/v1/catalog/import?format=skypilot&provider=aws"))
        .header("content-type", "text/csv")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_problem(r, 403, "Authorization").await;
}

async fn keys_show_their_pools_and_bad_pool_names_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let r = app
        .post_json(
            "/v1/keys",
            &json!({"name": "t", "scopes": ["ingest"], "pools": ["gpu-t4", "gpu-a100", "gpu-t4"]}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let made: Value = r.json().await.unwrap();
    assert_eq!(made["pools"], json!(["gpu-a100", "gpu-t4"]));
    let r = app
        .post_json(
            "/v1/keys",
            &json!({"name": "e", "scopes": ["read"], "pools": []}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let list = app.get_json("/v1/keys").await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(
        items[0]["pools"],
        json!([]),
        "the first admin key reaches every pool"
    );
    assert_eq!(items[1]["pools"], json!(["gpu-a100", "gpu-t4"]));
    assert_eq!(items[2]["pools"], json!([]), "an empty list is every pool");
    let r = app
        .post_json(
            "/v1/keys",
            &json!({"name": "b", "scopes": ["read"], "pools": ["gpu-t4", "GPU A100"]}),
        )
        .await;
    assert_problem(r, 422, "pools[1]").await;
    let r = app
        .post_json(
            "/v1/keys",
            &json!({"name": "b", "scopes": ["read"], "pools": [""]}),
        )
        .await;
    assert_problem(r, 422, "pools[0]").await;
    assert_eq!(
        app.get_json("/v1/keys").await["items"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

async fn a_key_made_with_pool_flags_on_the_command_line_is_restricted(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for pool in ["gpu-t4", "gpu-h100"] {
        create_pool(&app, pool, &t4_policy()).await;
    }
    let out = trainscaler_ok(
        &app.db,
        &[
            "keys", "create", "--scope", "ingest", "--pool", "gpu-t4", "--pool", "gpu-a100",
        ],
    );
    let key = client_with_key(String::from_utf8(out.stdout).unwrap().trim());
    let r = post_samples(&key, &app, json!([sample("gpu-h100")])).await;
    assert_problem(r, 403, "samples[0].pool").await;
    let r = post_samples(&key, &app, json!([sample("gpu-t4")])).await;
    assert_eq!(r.status(), 200);
    let list = String::from_utf8(trainscaler(&app.db, &["keys", "list"]).stdout).unwrap();
    assert!(list.contains("gpu-a100,gpu-t4"), "{list}");
    let bad = trainscaler(
        &app.db,
        &["keys", "create", "--scope", "read", "--pool", "GPU"],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("lowercase"));
}

on_both_backends!(
    a_restricted_key_writes_and_decides_for_its_own_pools_only,
    a_batch_that_touches_another_pool_is_refused_whole,
    a_restricted_key_reads_and_lists_its_own_pools_only,
    an_admin_key_with_pools_manages_those_pools_and_nothing_global,
    keys_show_their_pools_and_bad_pool_names_are_refused,
    a_key_made_with_pool_flags_on_the_command_line_is_restricted,
);
