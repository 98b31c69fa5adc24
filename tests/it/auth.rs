//! API keys, scopes, signed webhooks, ingestion rate limits and load shedding, against the real
//! server on both backends.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::common::{
    Backend, TestApp, TestDb, assert_problem, client_with_key, serve_config, trainscaler_ok,
};
use crate::http_pools::create_pool;
use crate::on_both_backends;
use trainscaler::auth::pools::PoolScope;
use trainscaler::auth::scope::{Scope, Scopes};
use trainscaler::auth::token::Token;
use trainscaler::auth::webhook_signature::sign;
use trainscaler::store::KeyRow;

const POOL: &str = r#"{"provider": "aws", "region": "us-east-1", "instance_types": ["g4dn.12xlarge"], "max_workers": 4}"#;

fn samples(at: &str) -> Value {
    json!({"samples": [{"pool": "p", "name": "queue_depth", "value": 3, "at": at}]})
}

async fn put_pool(app: &TestApp) {
    let policy: Value = serde_json::from_str(POOL).unwrap();
    create_pool(app, "p", &policy).await;
}

/// Sends `method url` with an empty JSON object as the body (ignored by routes without one).
async fn send(
    client: &reqwest::Client,
    method: &reqwest::Method,
    url: String,
) -> reqwest::Response {
    client
        .request(method.clone(), url)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap()
}

/// `GET /v1/pools` as `client`.
async fn get_pools(client: &reqwest::Client, app: &TestApp) -> reqwest::Response {
    client.get(app.url("/v1/pools")).send().await.unwrap()
}

/// Revokes key `id` over HTTP with the admin key; the answer.
pub async fn revoke_key(app: &TestApp, id: &str) -> reqwest::Response {
    app.client
        .delete(app.url(&format!("/v1/keys/{id}")))
        .send()
        .await
        .expect("DELETE /v1/keys/{id} answers")
}

/// Makes a key over HTTP with the admin key; returns its token and id.
pub async fn make_key(app: &TestApp, scopes: &[&str]) -> (String, String) {
    let r = app
        .post_json("/v1/keys", &json!({"name": "test", "scopes": scopes}))
        .await;
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    (
        body["token"].as_str().unwrap().to_string(),
        body["id"].as_str().unwrap().to_string(),
    )
}

/// Every operation of the OpenAPI document with its path parameters filled in.
fn operations() -> Vec<(reqwest::Method, String, String)> {
    let spec = serde_json::to_value(trainscaler::api::openapi()).unwrap();
    let mut ops = Vec::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let concrete = path
                .replace("{provider}", "aws")
                .replace("{instance_type}", "g4dn.12xlarge")
                .replace("{name}", "p")
                .replace("{pool}", "p")
                .replace("{id}", "x");
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            ops.push((m, path.clone(), concrete));
        }
    }
    ops
}

async fn every_route_needs_the_scope_it_documents(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let anonymous = reqwest::Client::new();
    let (read, _) = make_key(&app, &["read"]).await;
    let (ingest, _) = make_key(&app, &["ingest"]).await;
    let read = client_with_key(&read);
    let ingest = client_with_key(&ingest);
    let spec = serde_json::to_value(trainscaler::api::openapi()).unwrap();
    let mut open = Vec::new();
    for (method, path, url) in operations() {
        let op = &spec["paths"][&path][method.as_str().to_lowercase()];
        let documented = op["security"].is_array();
        let r = send(&anonymous, &method, app.url(&url)).await;
        if !documented {
            open.push(path.clone());
            assert_ne!(r.status(), 401, "{method} {path} is documented as open");
            continue;
        }
        assert_eq!(
            r.headers()["www-authenticate"],
            "Bearer realm=\"trainscaler\"",
            "{method} {path}"
        );
        assert_problem(r, 401, "Authorization").await;
        // A read key passes reads and is refused everything else, with 403.
        let r = send(&read, &method, app.url(&url)).await;
        let needs = op["description"].as_str().unwrap_or("");
        if method == reqwest::Method::GET && path.starts_with("/v1/keys") {
            // Keys are for admins, even to look at.
            assert!(needs.contains("`admin` scope"), "{path}: {needs}");
            assert_problem(r, 403, "Authorization").await;
        } else if method == reqwest::Method::GET {
            assert!(needs.contains("`read` scope"), "{path}: {needs}");
            assert!(
                ![401, 403].contains(&r.status().as_u16()),
                "{method} {path}"
            );
        } else {
            assert_problem(r, 403, "Authorization").await;
        }
        let r = send(&ingest, &method, app.url(&url)).await;
        let ingest_route = needs.contains("`ingest` scope");
        assert_eq!(
            r.status() != 403,
            ingest_route,
            "{method} {path}: {}",
            r.status()
        );
    }
    open.sort();
    // SNS cannot send a key: its envelope's signature and topic authenticate it.
    assert_eq!(open, ["/healthz", "/readyz", "/v1/webhooks/sns"]);
}

async fn every_kind_of_bad_key_gets_the_same_answer_and_no_slow_hash(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (token, id) = make_key(&app, &["read"]).await;
    assert!(app.get("/v1/pools").await.status().is_success());
    let wrong_secret = format!("tsk_{id}_{}", "0".repeat(64));
    let unknown_id = format!("tsk_000000000000_{}", "0".repeat(64));
    let revoked = {
        let (t, revoked_id) = make_key(&app, &["read"]).await;
        assert_eq!(revoke_key(&app, &revoked_id).await.status(), 204);
        t
    };
    let mut bodies = Vec::new();
    for bad in [wrong_secret.as_str(), &unknown_id, "not-a-token", &revoked] {
        let before = app.state.auth.slow_checks();
        let r = get_pools(&client_with_key(bad), &app).await;
        assert_eq!(r.status(), 401, "{bad}");
        // No refusal runs Argon2 (19 MiB and tens of milliseconds each, before digests).
        assert_eq!(app.state.auth.slow_checks(), before, "{bad}");
        bodies.push(r.text().await.unwrap());
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:?}");
    // A good key verifies once, then comes from the cache.
    let good = client_with_key(&token);
    assert!(get_pools(&good, &app).await.status().is_success());
    let before = app.state.auth.slow_checks();
    for _ in 0..3 {
        assert!(get_pools(&good, &app).await.status().is_success());
    }
    assert_eq!(app.state.auth.slow_checks(), before);
    // "Bearer" is case-insensitive; Basic carries the key as its password (the fleet page's
    // browsers); other schemes are not keys.
    for (authorization, status) in [
        (format!("bearer {token}"), 200),
        (format!("Token {token}"), 401),
    ] {
        let r = reqwest::Client::new()
            .get(app.url("/v1/pools"))
            .header("authorization", authorization)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status);
    }
}

async fn keys_are_made_listed_and_revoked_over_http(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (token, id) = make_key(&app, &["decide", "read"]).await;
    let list = app.get_json("/v1/keys").await;
    let text = list.to_string();
    assert!(
        !text.contains(&token[20..]),
        "no secret in the list: {text}"
    );
    assert!(
        !text.contains("argon2") && !text.contains("sha256"),
        "no hash in the list: {text}"
    );
    let keys = list["items"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{list}");
    assert_eq!(keys[0]["scopes"], json!(["admin"]));
    assert_eq!(keys[1]["id"], id.as_str());
    assert_eq!(keys[1]["scopes"], json!(["read", "decide"]));
    // The new key decides but may not change pools.
    let decider = client_with_key(&token);
    let r = decider
        .put(app.url("/v1/pools/p"))
        .header("content-type", "application/json")
        .body(POOL)
        .send()
        .await
        .unwrap();
    assert_problem(r, 403, "Authorization").await;
    // Only admin keys see the key list, even with every other scope.
    let r = decider.get(app.url("/v1/keys")).send().await.unwrap();
    assert_problem(r, 403, "Authorization").await;
    // Revoked: refused at once on this replica.
    assert_eq!(revoke_key(&app, &id).await.status(), 204);
    let r = get_pools(&decider, &app).await;
    assert_eq!(r.status(), 401);
    assert_problem(revoke_key(&app, &id).await, 404, "id").await;
    let list = app.get_json("/v1/keys").await;
    assert!(list["items"][1]["revoked_at"].is_string(), "{list}");
    // Bad input names its field.
    let r = app
        .post_json("/v1/keys", &json!({"name": "x", "scopes": []}))
        .await;
    assert_problem(r, 422, "scopes").await;
    let r = app
        .post_json("/v1/keys", &json!({"name": "x", "scopes": ["root"]}))
        .await;
    assert_problem(r, 422, "scopes[0]").await;
    let r = app
        .post_json("/v1/keys", &json!({"name": " ", "scopes": ["read"]}))
        .await;
    assert_problem(r, 422, "name").await;
}

async fn a_key_from_the_command_line_works_on_the_running_server(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let args = [
        "keys",
        "create",
        "--scope",
        "ingest,read",
        "--name",
        "scheduler",
    ];
    let out = trainscaler_ok(&app.db, &args);
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(token.starts_with("tsk_"), "{token}");
    put_pool(&app).await;
    let client = client_with_key(&token);
    let r = client
        .post(app.url("/v1/webhooks/metrics"))
        .json(&samples("2026-12-02T10:00:00Z"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client.get(app.url("/v1/pools/p")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = client.delete(app.url("/v1/pools/p")).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let list = std::process::Command::new(env!("CARGO_BIN_EXE_trainscaler"))
        .args(["keys", "list"])
        .env("DATABASE_URL", &app.db.url)
        .output()
        .unwrap();
    let text = String::from_utf8(list.stdout).unwrap();
    assert!(
        text.contains("scheduler") && text.contains("read,ingest"),
        "{text}"
    );
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_trainscaler"))
        .args(["keys", "create", "--scope", "root"])
        .env("DATABASE_URL", &app.db.url)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown scope"));
}

async fn only_the_first_start_makes_a_key(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let first = TestApp::spawn_on(db.clone(), false).await;
    assert!(db.admin_token.get().is_some());
    let dir = tempfile::tempdir().unwrap();
    let mut serve = serve_config(true);
    serve.admin_key_file = dir.path().join("again.key");
    let second = TestApp::spawn_with(db.clone(), serve).await;
    assert!(
        !dir.path().join("again.key").exists(),
        "a second start writes no key"
    );
    assert_eq!(
        second.get_json("/v1/keys").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    drop(first);
}

async fn insecure_mode_needs_no_key_and_makes_none(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let dir = tempfile::tempdir().unwrap();
    let mut serve = serve_config(false);
    serve.insecure_no_auth = true;
    serve.admin_key_file = dir.path().join("admin.key");
    let app = TestApp::spawn_with(db, serve).await;
    assert!(!dir.path().join("admin.key").exists());
    let r = get_pools(&reqwest::Client::new(), &app).await;
    assert_eq!(r.status(), 200);
    put_pool(&app).await;
}

async fn metrics_are_open_only_when_configured(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let closed = TestApp::spawn_on(db.clone(), false).await;
    let r = reqwest::get(closed.url("/metrics")).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(closed.get("/metrics").await.status(), 200);
    let mut serve = serve_config(true);
    serve.metrics_public = true;
    let open = TestApp::spawn_with(db, serve).await;
    let r = reqwest::get(open.url("/metrics")).await.unwrap();
    assert_eq!(r.status(), 200);
    // Probes are always open.
    assert_eq!(
        reqwest::get(open.url("/healthz")).await.unwrap().status(),
        200
    );
    assert_eq!(
        reqwest::get(open.url("/readyz")).await.unwrap().status(),
        200
    );
}

const SECRET: &str = "dcgm-shared-secret-0123";

/// An unknown source, a stale timestamp, a malformed signature or a missing header is refused
/// from the headers alone: the client sends only the head of a large body and still gets its
/// 401. A server that buffered the body first would wait for bytes that never come.
async fn signed_webhooks_are_refused_by_their_headers_before_the_body_is_read(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let mut serve = serve_config(false);
    serve.webhook_secrets = format!("dcgm={SECRET}");
    serve.webhook_replay_window_sec = 300;
    // Big enough that nothing is refused for its size: only the headers can refuse it.
    serve.max_ingest_bytes = 64 << 20;
    let app = TestApp::spawn_with(db, serve).await;
    let now = trainscaler::timefmt::now_ms() / 1000;
    let well_formed = format!("sha256={}", "ab".repeat(32));
    let cases = [
        ("nobody", now, well_formed.as_str(), "x-trainscaler-source"),
        (
            "dcgm",
            now - 301,
            well_formed.as_str(),
            "x-trainscaler-timestamp",
        ),
        ("dcgm", now, "md5=00", "x-trainscaler-signature"),
    ];
    for (source, ts, signature, named) in cases {
        let headers = format!(
            "x-trainscaler-source: {source}\r\nx-trainscaler-timestamp: {ts}\r\n\
             x-trainscaler-signature: {signature}\r\n"
        );
        let (status, content_type, body) = crate::common::post_head_only(
            &app,
            "/v1/webhooks/metrics",
            "application/json",
            &headers,
            16 << 20,
        )
        .await;
        assert_eq!(status, 401, "{source} {ts} {signature}: {body}");
        assert_eq!(content_type, "application/problem+json");
        assert!(body.to_string().contains(named), "{named}: {body}");
    }
    // A missing timestamp is named too.
    let headers =
        format!("x-trainscaler-source: dcgm\r\nx-trainscaler-signature: {well_formed}\r\n");
    let (status, _, body) = crate::common::post_head_only(
        &app,
        "/v1/webhooks/prometheus",
        "application/x-protobuf",
        &headers,
        16 << 20,
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body.to_string().contains("x-trainscaler-timestamp"),
        "{body}"
    );
}

async fn signed_webhooks_are_accepted_inside_the_window_only(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let mut serve = serve_config(false);
    serve.webhook_secrets = format!("dcgm={SECRET}");
    serve.webhook_replay_window_sec = 300;
    let app = TestApp::spawn_with(db, serve).await;
    put_pool(&app).await;
    let now = trainscaler::timefmt::now_ms() / 1000;
    let anonymous = reqwest::Client::new();
    let send = |body: Vec<u8>, ts: i64, sig: String, path: &'static str| {
        anonymous
            .post(app.url(path))
            .header("content-type", "application/json")
            .header("x-trainscaler-source", "dcgm")
            .header("x-trainscaler-timestamp", ts.to_string())
            .header("x-trainscaler-signature", sig)
            .body(body)
            .send()
    };
    let body = serde_json::to_vec(&samples("2026-12-02T10:00:00Z")).unwrap();
    let ts = now.to_string();
    let good = sign(SECRET.as_bytes(), &ts, &body);
    let r = send(body.clone(), now, good.clone(), "/v1/webhooks/metrics")
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let stored = app.get_json("/fleet/p").await;
    assert!(stored.to_string().contains("queue_depth"), "{stored}");
    // A changed body, another source's secret, a stale timestamp: refused, naming the header.
    let r = send(
        b"{\"samples\": []}".to_vec(),
        now,
        good.clone(),
        "/v1/webhooks/metrics",
    )
    .await
    .unwrap();
    assert_problem(r, 401, "x-trainscaler-signature").await;
    let other = sign(b"another-secret-0123456", &ts, &body);
    let r = send(body.clone(), now, other, "/v1/webhooks/metrics")
        .await
        .unwrap();
    assert_problem(r, 401, "x-trainscaler-signature").await;
    let old = now - 301;
    let old_sig = sign(SECRET.as_bytes(), &old.to_string(), &body);
    let r = send(body.clone(), old, old_sig, "/v1/webhooks/metrics")
        .await
        .unwrap();
    assert_problem(r, 401, "x-trainscaler-timestamp").await;
    // A signature is for ingestion only: it opens no other route.
    let pool_sig = sign(SECRET.as_bytes(), &ts, POOL.as_bytes());
    let r = anonymous
        .put(app.url("/v1/pools/p"))
        .header("content-type", "application/json")
        .header("x-trainscaler-source", "dcgm")
        .header("x-trainscaler-timestamp", ts.clone())
        .header("x-trainscaler-signature", pool_sig)
        .body(POOL)
        .send()
        .await
        .unwrap();
    assert_problem(r, 401, "Authorization").await;
}

async fn ingestion_is_rate_limited_per_key(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let mut serve = serve_config(false);
    serve.ingest_rate_per_sec = 1;
    serve.ingest_burst = 2;
    let app = TestApp::spawn_with(db, serve).await;
    put_pool(&app).await;
    let (other, _) = make_key(&app, &["ingest"]).await;
    let mut statuses = Vec::new();
    for i in 0..3 {
        let r = app
            .post_json(
                "/v1/webhooks/metrics",
                &samples(&format!("2026-12-02T10:00:0{i}Z")),
            )
            .await;
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            let wait: u64 = r.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!((1..=2).contains(&wait), "{wait}");
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["type"], "/problems/rate-limited");
        }
    }
    assert_eq!(statuses, [200, 200, 429]);
    // Another key has its own budget, and reads are not limited.
    let r = client_with_key(&other)
        .post(app.url("/v1/webhooks/metrics"))
        .json(&samples("2026-12-02T10:00:05Z"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(app.get("/v1/pools").await.status(), 200);
}

async fn requests_past_the_concurrency_limit_are_shed_with_retry_after(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let mut serve = serve_config(false);
    serve.max_concurrent_requests = 1;
    let app = TestApp::spawn_with(db, serve).await;
    assert_eq!(app.get("/v1/pools").await.status(), 200);
    // A request whose body never comes holds the only slot. If one of our probing requests
    // held the slot at the moment it arrived, it was shed itself: open another.
    let token = app.db.admin_token.get().unwrap();
    let head = format!(
        "POST /v1/webhooks/metrics HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{"
    );
    let mut found = None;
    for _ in 0..50 {
        let mut held = tokio::net::TcpStream::connect(app.addr).await.unwrap();
        held.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let r = app.get("/v1/pools").await;
        if r.status() == 503 {
            found = Some((held, r));
            break;
        }
    }
    let (held, r) = found.expect("a second request is shed while the slot is held");
    assert_eq!(r.headers()["retry-after"], "1");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "/problems/overloaded");
    // Probes are never shed.
    assert_eq!(app.get("/healthz").await.status(), 200);
    assert_eq!(app.get("/readyz").await.status(), 200);
    drop(held);
    let mut served = false;
    for _ in 0..100 {
        if app.get("/v1/pools").await.status() == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(served, "the slot is freed when the held request ends");
}

/// A browser cannot send a bearer key: the fleet page (and only it) challenges with Basic too,
/// and a key sent as the Basic password is as good as a bearer one; a wrong one is not.
async fn the_fleet_page_asks_browsers_for_the_key_as_a_password(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let anonymous = reqwest::Client::new();
    let r = anonymous.get(app.url("/")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let challenges: Vec<_> = r
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert_eq!(
        challenges,
        [
            "Bearer realm=\"trainscaler\"",
            "Basic realm=\"trainscaler\", charset=\"UTF-8\""
        ]
    );
    // JSON routes do not invite a login dialog.
    let r = anonymous.get(app.url("/fleet")).send().await.unwrap();
    assert_eq!(r.headers().get_all("www-authenticate").iter().count(), 1);

    let (read, _) = make_key(&app, &["read"]).await;
    let r = anonymous
        .get(app.url("/"))
        .basic_auth("anyone", Some(&read))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("<html"));
    // The same credentials reach the JSON behind it.
    let r = anonymous
        .get(app.url("/fleet"))
        .basic_auth("", Some(&read))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let wrong = format!("{}0", &read[..read.len() - 1]);
    let wrong = if wrong == read {
        format!("{}1", &read[..read.len() - 1])
    } else {
        wrong
    };
    for password in [Some(wrong.as_str()), None] {
        let r = anonymous
            .get(app.url("/"))
            .basic_auth("anyone", password)
            .send()
            .await
            .unwrap();
        assert_problem(r, 401, "Authorization").await;
    }
}

/// A key row as the code before digests stored it: an Argon2id PHC string of the secret.
async fn store_legacy_key(app: &TestApp, scopes: &[Scope]) -> (String, String, String) {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let token = Token::generate().unwrap();
    let params = argon2::Params::new(19 * 1024, 2, 1, None).unwrap();
    let salt = SaltString::encode_b64(&[3u8; 16]).unwrap();
    let phc = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
        .hash_password(token.secret.as_bytes(), &salt)
        .unwrap()
        .to_string();
    let row = KeyRow {
        id: token.id.clone(),
        name: "legacy".into(),
        scopes: Scopes::new(scopes.iter().copied()),
        pools: PoolScope::every(),
        secret_hash: phc.clone(),
        created_at_ms: 1,
        revoked_at_ms: None,
    };
    app.state.store.create_key(&row).await.unwrap();
    (token.to_bearer(), token.id, phc)
}

/// Keys made before digests keep working without being re-issued: the first success pays
/// Argon2 once and rewrites the row as `sha256:`; a wrong secret for it is refused and
/// leaves the row alone.
async fn a_key_stored_with_argon2_still_works_and_is_rewritten_as_a_digest(backend: Backend) {
    let app = TestApp::spawn_empty(backend).await;
    let (token, id, phc) = store_legacy_key(&app, &[Scope::Read]).await;
    let wrong = format!("tsk_{id}_{}", "0".repeat(64));
    let r = get_pools(&client_with_key(&wrong), &app).await;
    assert_eq!(r.status(), 401);
    let row = app.state.store.active_key(&id).await.unwrap().unwrap();
    assert_eq!(row.secret_hash, phc, "a refusal rewrote the row");

    let before = app.state.auth.slow_checks();
    let r = get_pools(&client_with_key(&token), &app).await;
    assert_eq!(r.status(), 200);
    assert_eq!(app.state.auth.slow_checks(), before + 1);
    let row = app.state.store.active_key(&id).await.unwrap().unwrap();
    assert_eq!(
        row.secret_hash,
        trainscaler::auth::token::hash_secret(&Token::parse(&token).unwrap().secret)
    );
    assert_eq!(row.scopes, Scopes::new([Scope::Read]));
    // A replica that never cached it verifies the digest: no Argon2 there.
    let other = TestApp::spawn_on(Arc::clone(&app.db), true).await;
    let r = client_with_key(&token)
        .get(other.url("/v1/pools"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(other.state.auth.slow_checks(), 0);
    // Its scopes still bind: read only.
    let r = client_with_key(&token)
        .post(other.url("/v1/keys"))
        .json(&json!({"name": "x", "scopes": ["read"]}))
        .send()
        .await
        .unwrap();
    assert_problem(r, 403, "Authorization").await;
}

/// A burst of requests with a legacy (Argon2) key not yet verified pays at most one Argon2
/// verification per hashing slot, not one per request: those that waited for a slot find the
/// key already verified.
async fn a_burst_with_a_legacy_key_verifies_it_a_few_times_not_once_per_request(backend: Backend) {
    let app = TestApp::spawn_empty(backend).await;
    let (token, _, _) = store_legacy_key(&app, &[Scope::Read]).await;
    let client = client_with_key(&token);
    let before = app.state.auth.slow_checks();
    let burst = (0..32).map(|_| {
        let client = client.clone();
        let url = app.url("/v1/pools");
        tokio::spawn(async move { client.get(url).send().await.map(|r| r.status()) })
    });
    for request in burst.collect::<Vec<_>>() {
        let status = request.await.unwrap().unwrap();
        assert_eq!(status, 200);
    }
    let checks = app.state.auth.slow_checks() - before;
    assert!(
        (1..=trainscaler::auth::verifier::MAX_CONCURRENT_HASHES as u64).contains(&checks),
        "32 requests with one legacy key ran {checks} Argon2 verifications"
    );
}

on_both_backends!(
    the_fleet_page_asks_browsers_for_the_key_as_a_password,
    every_route_needs_the_scope_it_documents,
    every_kind_of_bad_key_gets_the_same_answer_and_no_slow_hash,
    a_key_stored_with_argon2_still_works_and_is_rewritten_as_a_digest,
    keys_are_made_listed_and_revoked_over_http,
    a_key_from_the_command_line_works_on_the_running_server,
    only_the_first_start_makes_a_key,
    insecure_mode_needs_no_key_and_makes_none,
    metrics_are_open_only_when_configured,
    signed_webhooks_are_accepted_inside_the_window_only,
    signed_webhooks_are_refused_by_their_headers_before_the_body_is_read,
    ingestion_is_rate_limited_per_key,
    requests_past_the_concurrency_limit_are_shed_with_retry_after,
    a_burst_with_a_legacy_key_verifies_it_a_few_times_not_once_per_request,
);

/// A key revoked on one replica is refused by another that has it cached, well before the
/// cache entry would have expired: the revocation is announced (NOTIFY at commit) and every
/// replica forgets the key. Without the announcement the other replica would keep serving it
/// for up to the cache's lifetime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_on_one_replica_is_refused_at_once_by_the_others() {
    let a = TestApp::spawn(Backend::Postgres).await;
    let b = TestApp::spawn_on(Arc::clone(&a.db), false).await;
    let (token, id) = make_key(&a, &["read"]).await;
    let client = client_with_key(&token);
    // B verifies the key now and caches it.
    let ok = client.get(b.url("/v1/pools")).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let cached_at = std::time::Instant::now();

    assert_eq!(revoke_key(&a, &id).await.status(), 204);
    loop {
        let r = client.get(b.url("/v1/pools")).send().await.unwrap();
        if r.status() == 401 {
            break;
        }
        assert_eq!(r.status(), 200);
        assert!(
            cached_at.elapsed() < trainscaler::auth::verifier::CACHE_TTL / 2,
            "replica B still accepts a key revoked on A {:?} after caching it",
            cached_at.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    eprintln!(
        "revoked key refused by the other replica {:?} after it was cached",
        cached_at.elapsed()
    );
}
