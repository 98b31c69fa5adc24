//! PostgreSQL taken away from running servers through a proxy the test controls
//! ([`PgProxy`]): the service says it is not ready while the database is gone, answers 503
//! with `Retry-After` rather than 500, loses no acknowledged sample, and recovers by itself;
//! and a leader cut off by a partition steps down before another replica leads.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::auth::{make_key, revoke_key};
use crate::common::{Backend, TestApp, TestDb, client_with_key, p4d_use1_az1_spot, serve_config};
use crate::http_pools::{create_pool, t4_policy};
use crate::pg_proxy::PgProxy;

/// What the load saw, shared by its tasks.
#[derive(Default)]
struct Ledger {
    /// (worker, at_ms) of every sample in a batch answered 2xx.
    acknowledged: Mutex<Vec<(String, i64)>>,
    /// Acknowledged batches before the cut, during it, and after the restore.
    acked_by_phase: [AtomicU64; 3],
    /// 503 answers naming the database as the problem, each with `Retry-After`.
    unavailable: AtomicU64,
    /// Anything else: a status that is neither 2xx nor such a 503, or no answer.
    wrong: Mutex<Vec<String>>,
    /// 0 before the cut, 1 while cut, 2 after the restore.
    phase: AtomicU64,
    stop: AtomicBool,
}

impl Ledger {
    /// Files one answer; `true` when it was a 2xx.
    async fn file(&self, what: &str, sent: Result<reqwest::Response, reqwest::Error>) -> bool {
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                self.wrong
                    .lock()
                    .unwrap()
                    .push(format!("{what}: no answer: {e}"));
                return false;
            }
        };
        let status = response.status();
        if status.is_success() {
            return true;
        }
        let retry_after = response.headers().contains_key("retry-after");
        let body = response.text().await.unwrap_or_default();
        let kind = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|p| p["type"].as_str().map(str::to_string))
            .unwrap_or_default();
        // The database's absence (or a conflict it caused), said as such.
        let database = matches!(
            kind.as_str(),
            "/problems/database-unavailable" | "/problems/database-conflict"
        );
        if status == 503 && retry_after && database {
            self.unavailable.fetch_add(1, Ordering::Relaxed);
        } else {
            self.wrong.lock().unwrap().push(format!(
                "{what}: {status} (Retry-After: {retry_after}) {body}"
            ));
        }
        false
    }
}

fn rfc3339_ms(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// Sends batches of five samples, each with its own (worker, at), until told to stop.
async fn ingest_load(app: Arc<TestApp>, ledger: Arc<Ledger>, task: usize, base_ms: i64) {
    let worker = format!("w{task}");
    let mut next_at = base_ms;
    while !ledger.stop.load(Ordering::Relaxed) {
        let batch: Vec<(String, i64)> = (0..5).map(|i| (worker.clone(), next_at + i)).collect();
        next_at += 5;
        let samples: Vec<Value> = batch
            .iter()
            .map(|(w, at)| {
                json!({"pool": "ingest", "worker": w, "name": "gpu_utilization",
                       "value": 0.5, "at": rfc3339_ms(*at)})
            })
            .collect();
        let phase = ledger.phase.load(Ordering::SeqCst);
        let sent = app
            .client
            .post(app.url("/v1/webhooks/metrics"))
            .json(&json!({ "samples": samples }))
            .timeout(Duration::from_secs(20))
            .send()
            .await;
        if ledger.file("ingest", sent).await {
            // Counted in the phase it was sent in: an answer that arrives after the restore
            // may still have been committed before the cut.
            ledger.acked_by_phase[phase as usize].fetch_add(1, Ordering::Relaxed);
            ledger.acknowledged.lock().unwrap().extend(batch);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Decides for the pool over and over: decisions write under a row lock, so a cut catches
/// some of them inside a transaction.
async fn decide_load(app: Arc<TestApp>, ledger: Arc<Ledger>) {
    while !ledger.stop.load(Ordering::Relaxed) {
        let sent = app
            .client
            .post(app.url("/decide"))
            .json(&json!({"pool": "ingest"}))
            .timeout(Duration::from_secs(20))
            .send()
            .await;
        ledger.file("decide", sent).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn readyz(app: &TestApp) -> u16 {
    app.client
        .get(app.url("/readyz"))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("/readyz answers whatever the database does")
        .status()
        .as_u16()
}

/// Polls `/readyz` from now until it answers `status`: when it started, and how long that
/// took. Fails the test with `what` if it takes `within_secs`.
async fn until_readyz(
    app: &TestApp,
    status: u16,
    within_secs: u64,
    what: &str,
) -> (Instant, Duration) {
    let since = Instant::now();
    while readyz(app).await != status {
        assert!(since.elapsed() < Duration::from_secs(within_secs), "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (since, since.elapsed())
}

/// Posts p4d's use1-az1 spot `price` on `other` and waits until `app` lists it: only a
/// notification can bring it, since `app` polls once an hour. How long it took.
async fn price_heard(
    app: &TestApp,
    other: &TestApp,
    price: f64,
    observed_at: &str,
    within: Duration,
    what: &str,
) -> Duration {
    let batch = json!({"observations": [{
        "provider": "aws", "region": "us-east-1", "zone": "use1-az1",
        "instance_type": "p4d.24xlarge", "market": "spot", "price": price,
        "observed_at": observed_at
    }]});
    assert_eq!(other.post_json("/v1/prices", &batch).await.status(), 200);
    let posted = Instant::now();
    while p4d_use1_az1_spot(app).await != Some(price) {
        assert!(posted.elapsed() < within, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    posted.elapsed()
}

/// A replica that reaches a new PostgreSQL database through a proxy the test controls, with
/// pool `ingest`, and another replica that reaches the database directly.
async fn replica_behind_a_proxy() -> (PgProxy, TestApp, TestApp) {
    let db = Arc::new(TestDb::new(Backend::Postgres).await);
    let proxy = PgProxy::in_front_of(&db.url).await;
    let mut config = db.config();
    config.database_url = trainscaler::config::DatabaseUrl::new(proxy.url_for(&db.url));
    // Fail fast while the database is gone, as the setting is meant for.
    config.db_acquire_timeout_ms = 500;
    // This replica polls the catalog version only once an hour: after a fault only its
    // LISTEN session, reconnected, can tell it of another replica's price.
    let mut serve = serve_config(false);
    serve.catalog_poll_ms = 3_600_000;
    let app = TestApp::spawn_configured(db.clone(), config, serve).await;
    let other = TestApp::spawn_on(db, false).await;
    create_pool(&app, "ingest", &t4_policy()).await;
    assert_eq!(readyz(&app).await, 200);
    (proxy, app, other)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_under_load_loses_no_acknowledged_sample_and_heals_itself() {
    let (proxy, app, other) = replica_behind_a_proxy().await;
    let app = Arc::new(app);
    let db = Arc::clone(&app.db);

    let ledger = Arc::new(Ledger::default());
    let base_ms = trainscaler::timefmt::now_ms() - 3_600_000;
    let mut load = Vec::new();
    for task in 0..4 {
        load.push(tokio::spawn(ingest_load(
            app.clone(),
            ledger.clone(),
            task,
            // Each task has its own worker, so times may repeat across tasks.
            base_ms,
        )));
    }
    load.push(tokio::spawn(decide_load(app.clone(), ledger.clone())));
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The database goes away for about three seconds.
    ledger.phase.store(1, Ordering::SeqCst);
    proxy.cut();
    let (cut, not_ready_after) = until_readyz(
        &app,
        503,
        10,
        "/readyz never said 503 while the database was gone",
    )
    .await;
    while cut.elapsed() < Duration::from_secs(3) {
        assert_eq!(
            readyz(&app).await,
            503,
            "not ready while the database is gone"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let outage = cut.elapsed();
    let unavailable_during = ledger.unavailable.load(Ordering::Relaxed);

    ledger.phase.store(2, Ordering::SeqCst);
    proxy.restore();
    let (restored, ready_after) =
        until_readyz(&app, 200, 15, "/readyz did not recover without a restart").await;
    // Ingestion itself recovers, not only the probe.
    while ledger.acked_by_phase[2].load(Ordering::Relaxed) < 20 {
        assert!(
            restored.elapsed() < Duration::from_secs(30),
            "ingestion did not recover: {} batches acknowledged since the restore",
            ledger.acked_by_phase[2].load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ledger.stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.expect("load task");
    }

    let wrong = ledger.wrong.lock().unwrap().clone();
    assert!(
        wrong.is_empty(),
        "only 2xx, or 503 with Retry-After: {} others, e.g. {:#?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    assert!(
        unavailable_during > 0,
        "the load met the outage (no 503 at all means it did not test anything)"
    );
    assert!(ledger.acked_by_phase[0].load(Ordering::Relaxed) > 0);

    // Every acknowledged sample is in the database, read directly, not through the service.
    let acknowledged = ledger.acknowledged.lock().unwrap().clone();
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&db.url)
        .await
        .expect("connect directly");
    let stored: Vec<(String, i64)> =
        sqlx::query_as("SELECT worker, at_ms FROM metric_samples WHERE pool = 'ingest'")
            .fetch_all(&mut conn)
            .await
            .expect("read samples");
    let stored: HashSet<(String, i64)> = stored.into_iter().collect();
    let missing: Vec<&(String, i64)> = acknowledged
        .iter()
        .filter(|s| !stored.contains(*s))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged samples are missing, e.g. {:?}",
        missing.len(),
        acknowledged.len(),
        &missing[..missing.len().min(5)]
    );
    eprintln!(
        "outage {outage:?}: /readyz 503 after {not_ready_after:?}, 200 again {ready_after:?} \
         after the restore; batches acknowledged before/during/after: {}/{}/{}; 503 answers: {} \
         ({unavailable_during} by the restore); samples acknowledged {}, stored {}",
        ledger.acked_by_phase[0].load(Ordering::Relaxed),
        ledger.acked_by_phase[1].load(Ordering::Relaxed),
        ledger.acked_by_phase[2].load(Ordering::Relaxed),
        ledger.unavailable.load(Ordering::Relaxed),
        acknowledged.len(),
        stored.len()
    );

    // The catalog follower listens again: a price posted on the other replica reaches this
    // one by notification (its poll is an hour away).
    price_heard(
        &app,
        &other,
        4.75,
        "2026-12-01T10:00:00Z",
        Duration::from_secs(15),
        "the catalog listener did not come back after the outage",
    )
    .await;
}

/// One batch of one sample, for a worker of its own: the status and `Retry-After`.
async fn ingest_one(app: &TestApp, worker: &str) -> (u16, Option<String>) {
    let sample = json!({"samples": [{"pool": "ingest", "worker": worker,
        "name": "gpu_utilization", "value": 0.5,
        "at": rfc3339_ms(trainscaler::timefmt::now_ms() - 1000)}]});
    let answer = app
        .client
        .post(app.url("/v1/webhooks/metrics"))
        .json(&sample)
        .timeout(Duration::from_secs(40))
        .send()
        .await
        .expect("an answer, whatever the database does");
    let retry_after = answer
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (answer.status().as_u16(), retry_after)
}

/// A partition rather than a stop: every connection to the database goes silent, nothing is
/// closed, nothing answers. The pool's idle connections are now dead without knowing it. The
/// probe and the API must still answer (503 with `Retry-After`, not a hang to the request
/// timeout), and after the partition heals the service must come back by itself: ready,
/// writing, and both LISTEN sessions (silenced too) replaced: another replica's price arrives
/// by notification (this replica's poll is an hour away), and so does a key revocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_database_reads_not_ready_and_everything_heals_after_it() {
    let (proxy, app, other) = replica_behind_a_proxy().await;
    assert_eq!(ingest_one(&app, "before").await.0, 200);

    proxy.blackhole();
    let (cut, not_ready_after) = until_readyz(
        &app,
        503,
        10,
        "/readyz never said 503 while the database was silent",
    )
    .await;
    let (status, retry_after) = ingest_one(&app, "during").await;
    assert_eq!(
        (status, retry_after.is_some()),
        (503, true),
        "a write during the partition is refused with Retry-After"
    );
    let write_refused_after = cut.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;

    proxy.restore();
    let (restored, ready_after) = until_readyz(
        &app,
        200,
        30,
        "/readyz did not recover from the partition without a restart",
    )
    .await;
    let mut writes_failed = 0;
    while ingest_one(&app, "after").await.0 != 200 {
        writes_failed += 1;
        assert!(
            restored.elapsed() < Duration::from_secs(30),
            "ingestion did not recover from the partition"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let writing_after = restored.elapsed();

    let price_heard_after = price_heard(
        &app,
        &other,
        5.25,
        "2026-12-01T11:00:00Z",
        Duration::from_secs(40),
        "the catalog listener, silenced by the partition, never listened again",
    )
    .await;

    // The activity listener was silenced too. It carries key revocations: once it listens
    // again, a key this replica has just cached is refused here within moments of being
    // revoked on the other replica, far sooner than the cache would let it go.
    let relistening = Instant::now();
    let mut tries = 0;
    let revocation_heard = loop {
        tries += 1;
        assert!(
            relistening.elapsed() < Duration::from_secs(40),
            "the activity listener, silenced by the partition, never delivered a revocation"
        );
        let (token, id) = make_key(&other, &["read"]).await;
        let key = client_with_key(&token);
        let status = |c: &reqwest::Client| {
            let req = c.get(app.url("/v1/pools")).send();
            async move { req.await.expect("an answer").status().as_u16() }
        };
        assert_eq!(
            status(&key).await,
            200,
            "the new key works here (and is cached)"
        );
        assert_eq!(revoke_key(&other, &id).await.status(), 204);
        let sent = Instant::now();
        while sent.elapsed() < Duration::from_secs(2) {
            if status(&key).await == 401 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if sent.elapsed() < Duration::from_secs(2) {
            break sent.elapsed();
        }
    };
    eprintln!(
        "partition: /readyz 503 after {not_ready_after:?}, a write refused 503 by \
         {write_refused_after:?}; after the restore: ready {ready_after:?}, writing \
         {writing_after:?} ({writes_failed} refused first), a price from the other replica \
         heard {price_heard_after:?} after it was posted, a revocation on the other replica \
         heard {revocation_heard:?} after it was made (try {tries}, \
         {:?} after the price)",
        relistening.elapsed()
    );
}

/// A partition (the leader's connection goes silent, nothing is closed): the leader's renewal
/// times out and it steps down; PostgreSQL ends the silent session after the lease
/// (`idle_session_timeout`) and frees the lock; the other replica takes it. Never two leaders,
/// and once the partition heals the old leader, still running, is a follower that can lead
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_steps_down_before_the_other_leads_and_rejoins_as_follower() {
    use tokio::sync::watch;
    use trainscaler::reconcile::leader::hold_lease;
    use trainscaler::store::{Store, StoreOptions};
    const LEASE: Duration = Duration::from_millis(2000);

    let db = TestDb::new(Backend::Postgres).await;
    let proxy = PgProxy::in_front_of(&db.url).await;
    let options = StoreOptions {
        acquire_timeout: Duration::from_millis(500),
    };
    let store_a = Store::connect_with(&proxy.url_for(&db.url), options)
        .await
        .expect("connect a");
    let store_b = Store::connect(&db.url).await.expect("connect b");
    let (stop_a_tx, stop_a) = watch::channel(false);
    let (stop_b_tx, stop_b) = watch::channel(false);
    let (a_tx, a) = watch::channel(false);
    let (b_tx, b) = watch::channel(false);
    tokio::spawn(hold_lease(store_a, LEASE, a_tx, stop_a));
    let start = Instant::now();
    while !*a.borrow() {
        assert!(start.elapsed() < Duration::from_secs(10), "a never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::spawn(hold_lease(store_b, LEASE, b_tx, stop_b));
    tokio::time::sleep(LEASE).await;
    assert!(*a.borrow() && !*b.borrow(), "b waits while a renews");

    proxy.blackhole();
    let cut = Instant::now();
    let mut a_stepped_down = None;
    loop {
        let (la, lb) = (*a.borrow(), *b.borrow());
        assert!(!(la && lb), "two leaders at once");
        if !la && a_stepped_down.is_none() {
            a_stepped_down = Some(cut.elapsed());
        }
        if lb {
            break;
        }
        assert!(
            cut.elapsed() < LEASE * 4,
            "no hand-over within four leases: a={la} b={lb}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let b_led = cut.elapsed();

    // The partition heals: b keeps the lease, a does not take it back.
    proxy.restore();
    let healed = Instant::now();
    while healed.elapsed() < LEASE * 2 {
        assert!(
            *b.borrow() && !*a.borrow(),
            "b keeps leading after the heal"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // a's loop came back by itself: when b leaves, a leads again.
    let _ = stop_b_tx.send(true);
    let released = Instant::now();
    loop {
        let (la, lb) = (*a.borrow(), *b.borrow());
        assert!(!(la && lb), "two leaders at once");
        if la {
            break;
        }
        assert!(
            released.elapsed() < LEASE * 4,
            "the healed replica never led again"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!(
        "partition: a stepped down after {:?}, b led after {b_led:?}; a led again {:?} after b released",
        a_stepped_down.unwrap_or_default(),
        released.elapsed()
    );
    let _ = stop_a_tx.send(true);
}

/// A PostgreSQL outage does not lock out keys verified shortly before it: past the cache's
/// lifetime they keep reading from memory (`/v1/offerings`) within the outage grace, while a
/// key never seen here gets 503 (not 401: nobody can tell), and writes still answer 503 with
/// `Retry-After`. A key revoked on another replica during the outage is refused once this
/// replica's database answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_verified_before_an_outage_keep_reading_during_it() {
    let (proxy, app, other) = replica_behind_a_proxy().await;
    let (kept, _) = make_key(&other, &["read"]).await;
    let (revoked, revoked_id) = make_key(&other, &["read"]).await;
    let (unseen, _) = make_key(&other, &["read"]).await;
    let offerings = |token: &str| {
        let req = client_with_key(token)
            .get(app.url("/v1/offerings?limit=1"))
            .timeout(Duration::from_secs(20))
            .send();
        async move { req.await.expect("an answer").status().as_u16() }
    };
    for token in [&kept, &revoked] {
        assert_eq!(offerings(token).await, 200);
    }
    let verified = Instant::now();
    let hits_before = app.state.auth.outage_hits();

    proxy.cut();
    assert_eq!(revoke_key(&other, &revoked_id).await.status(), 204);
    // Past the cache's lifetime, so the key must come from the outage grace, not the cache.
    while verified.elapsed() < trainscaler::auth::verifier::CACHE_TTL + Duration::from_secs(1) {
        assert_eq!(
            offerings(&kept).await,
            200,
            "after {:?}",
            verified.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(offerings(&kept).await, 200);
    assert!(app.state.auth.outage_hits() > hits_before);
    let r = client_with_key(&unseen)
        .get(app.url("/v1/offerings?limit=1"))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let (status, retry_after) = ingest_one(&app, "during").await;
    assert_eq!((status, retry_after.is_some()), (503, true));

    proxy.restore();
    let restored = Instant::now();
    loop {
        let (r, k) = (offerings(&revoked).await, offerings(&kept).await);
        if r == 401 && k == 200 {
            break;
        }
        assert!(
            restored.elapsed() < Duration::from_secs(30),
            "after the restore: revoked key {r}, kept key {k}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
