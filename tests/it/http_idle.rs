//! When a pool counts as idle, over HTTP and through the reconciler: idle time starts at the
//! first signal without work after the last one with work, and a worker whose GPUs hold less
//! memory than `idle_gpu_memory_gib` is idle whatever its utilisation says.
//!
//! The idle clock never starts before the pool was created, and the service reads the wall
//! clock, so these pools wait one second after `idle_to_zero_after_sec: 1` before their
//! signals are sent: real time is the subject here. Sample times are explicit offsets from
//! the test's "now".

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trainscaler::core::timestamp::rfc3339;

use crate::common::{Backend, TestApp, TestDb, assert_problem, serve_config};
use crate::http_pools::{create_pool, decide, put, samples, t4_policy};
use crate::on_both_backends;

fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

fn queue_at(pool: &str, value: u32, at_ms: i64) -> Value {
    json!({"pool": pool, "name": "queue_depth", "value": value, "at": rfc3339(at_ms)})
}

fn rules(decision: &Value) -> Vec<&str> {
    decision["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect()
}

/// A pool of two on-demand workers that goes to min_workers after a second without work.
async fn idle_pool(app: &TestApp, name: &str, mut policy: Value) {
    policy["idle_to_zero_after_sec"] = json!(1);
    policy["scale_down_cooldown_sec"] = json!(0);
    policy["stabilization_window_sec"] = json!(0);
    create_pool(app, name, &policy).await;
    for i in 0..2 {
        let r = put(
            app,
            &format!("/v1/pools/{name}/workers/w{i}"),
            &json!({"instance_type": "g4dn.12xlarge", "market": "on_demand",
                    "started_at": rfc3339(now_ms() - 3_600_000)}),
        )
        .await;
        assert_eq!(r.status(), 201);
    }
}

/// Past `idle_to_zero_after_sec` since the pools were created, on the clock decisions read.
fn pools_age(app: &TestApp) {
    app.state.clock.advance(Duration::from_millis(1200));
}

async fn a_sender_that_reports_on_change_waits_from_its_zero(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    idle_pool(&app, "two-batches", t4_policy()).await;
    idle_pool(&app, "one-batch", t4_policy()).await;
    pools_age(&app);
    // Queue 2 three seconds ago and 0 now: in two batches (the stores merge the series'
    // activity) and in one (the batch's samples, out of order).
    let now = app.state.clock.now_ms();
    samples(&app, json!([queue_at("two-batches", 2, now - 3_000)])).await;
    samples(&app, json!([queue_at("two-batches", 0, now)])).await;
    samples(
        &app,
        json!([
            queue_at("one-batch", 0, now),
            queue_at("one-batch", 2, now - 3_000)
        ]),
    )
    .await;
    for pool in ["two-batches", "one-batch"] {
        let d = decide(&app, pool).await;
        assert_eq!(d["desired"], 2, "idle since the zero, not for 3 s: {d:#}");
        assert!(rules(&d).contains(&"idle_wait"), "{d:#}");
        assert_eq!(
            d["next_evaluation_at"],
            rfc3339(now + 1_000),
            "asks again when the zero is a second old: {d:#}"
        );
    }
    // A second after the zero: down to min_workers.
    app.state.clock.advance(Duration::from_millis(1100));
    for pool in ["two-batches", "one-batch"] {
        let d = decide(&app, pool).await;
        assert_eq!(d["desired"], 0, "{d:#}");
        assert!(rules(&d).contains(&"idle_to_zero"), "{d:#}");
    }
}

/// The same rule for GPU utilisation: busy GPUs 3 s ago and idle ones now are idle since
/// now, not since 3 s ago.
async fn utilisation_that_reports_on_change_waits_from_its_first_idle_sample(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["mode"] = json!("utilization");
    policy["target_utilization"] = json!(0.7);
    idle_pool(&app, "util", policy).await;
    pools_age(&app);
    let now = app.state.clock.now_ms();
    let util = |worker: &str, value: f64, at: i64| json!({"pool": "util", "worker": worker, "name": "gpu_utilization", "value": value, "at": rfc3339(at)});
    samples(
        &app,
        json!([
            util("w0", 0.9, now - 3_000),
            util("w1", 0.9, now - 3_000),
            util("w0", 0.0, now),
            util("w1", 0.02, now - 500)
        ]),
    )
    .await;
    let d = decide(&app, "util").await;
    // w1 went idle 0.5 s ago and w0 now: the pool has been idle since now.
    assert_eq!(d["desired"], 2, "{d:#}");
    assert!(rules(&d).contains(&"idle_wait"), "{d:#}");
    assert_eq!(d["next_evaluation_at"], rfc3339(now + 1_000), "{d:#}");
}

async fn work_after_an_idle_spell_starts_the_count_again(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    idle_pool(&app, "again", t4_policy()).await;
    pools_age(&app);
    let now = app.state.clock.now_ms();
    samples(
        &app,
        json!([
            queue_at("again", 0, now - 5_000),
            queue_at("again", 1, now - 4_000)
        ]),
    )
    .await;
    samples(&app, json!([queue_at("again", 0, now - 300)])).await;
    let d = decide(&app, "again").await;
    assert_eq!(d["desired"], 2, "{d:#}");
    assert_eq!(d["next_evaluation_at"], rfc3339(now + 700), "{d:#}");
}

async fn gpu_memory_below_the_threshold_is_idle_even_when_utilisation_blips(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["mode"] = json!("utilization");
    policy["target_utilization"] = json!(0.7);
    let mut by_memory = policy.clone();
    by_memory["idle_gpu_memory_gib"] = json!(2.0);
    idle_pool(&app, "by-memory", by_memory).await;
    idle_pool(&app, "by-utilisation", policy).await;
    pools_age(&app);
    let now = app.state.clock.now_ms();
    let signals = |pool: &str| {
        let at = |ms: i64| rfc3339(ms);
        json!([
            {"pool": pool, "worker": "w0", "name": "gpu_memory_used_gib", "value": 0.5, "at": at(now - 3_000)},
            {"pool": pool, "worker": "w0", "name": "gpu_memory_used_gib", "value": 0.5, "at": at(now)},
            {"pool": pool, "worker": "w0", "name": "gpu_utilization", "value": 0.5, "at": at(now)},
            {"pool": pool, "worker": "w1", "name": "gpu_memory_used_gib", "value": 1.0, "at": at(now - 3_000)},
            {"pool": pool, "worker": "w1", "name": "gpu_utilization", "value": 0.0, "at": at(now - 3_000)}
        ])
    };
    samples(&app, signals("by-memory")).await;
    samples(&app, signals("by-utilisation")).await;
    let d = decide(&app, "by-memory").await;
    assert_eq!(d["desired"], 0, "w0's GPUs hold 0.5 GiB: idle: {d:#}");
    assert!(rules(&d).contains(&"idle_to_zero"), "{d:#}");
    // Without the rule w0's 50 % is work: mean 0.25 against 0.7 needs one worker.
    let d = decide(&app, "by-utilisation").await;
    assert_eq!(d["desired"], 1, "{d:#}");
    assert!(!rules(&d).contains(&"idle_to_zero"), "{d:#}");

    // Each worker's GPU memory is shown where people and scrapers look.
    let workers = app.get_json("/v1/pools/by-memory/workers").await;
    let w0 = workers["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "w0")
        .unwrap_or_else(|| panic!("{workers:#}"));
    assert_eq!(w0["gpu_memory_used_gib"], 0.5, "{workers:#}");
    assert_eq!(w0["gpu_utilization"], 0.5, "{workers:#}");
    // Decided for, not actuated (no cloud group): both workers are still there.
    let fleet = app.get_json("/fleet/by-memory").await;
    let w0 = &fleet["worker_signals"][0];
    assert_eq!(
        (&w0["id"], &w0["gpu_memory_used_gib"], &w0["idle_by_memory"]),
        (&json!("w0"), &json!(0.5), &json!(true)),
        "{fleet:#}"
    );
    let fleet = app.get_json("/fleet/by-utilisation").await;
    let w0 = &fleet["worker_signals"][0];
    assert_eq!(
        (&w0["id"], &w0["gpu_memory_used_gib"], &w0["idle_by_memory"]),
        (&json!("w0"), &json!(0.5), &json!(false)),
        "the rule is off for this pool: {fleet:#}"
    );
    let text = app.get("/metrics").await.text().await.unwrap();
    assert!(
        text.contains(
            "trainscaler_worker_gpu_memory_used_gib{pool=\"by-utilisation\",worker=\"w1\"} 1.0"
        ),
        "{text}"
    );
    let html = app.get("/").await.text().await.unwrap();
    assert!(html.contains("0.5 GiB (idle)"), "{html}");
}

async fn idle_gpu_memory_gib_must_be_a_positive_size(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for bad in [json!(0), json!(-1.5), json!(20000)] {
        let mut policy = t4_policy();
        policy["idle_gpu_memory_gib"] = bad;
        assert_problem(
            put(&app, "/v1/pools/bad", &policy).await,
            422,
            "idle_gpu_memory_gib",
        )
        .await;
    }
    create_pool(&app, "unset", &t4_policy()).await;
    let stored = app.get_json("/v1/pools/unset").await;
    assert_eq!(
        stored["policy"]["idle_gpu_memory_gib"],
        Value::Null,
        "{stored:#}"
    );
    let mut policy = t4_policy();
    policy["idle_gpu_memory_gib"] = json!(2.5);
    create_pool(&app, "set", &policy).await;
    let stored = app.get_json("/v1/pools/set").await;
    assert_eq!(stored["policy"]["idle_gpu_memory_gib"], 2.5, "{stored:#}");
}

/// The reconciler decides on its own schedule: a sender that reports on change must not lose
/// the pool's workers the moment its zero arrives.
async fn the_reconciler_waits_from_the_zero_too(backend: Backend) {
    let db = Arc::new(TestDb::new(backend).await);
    let mut serve = serve_config(false);
    serve.reconcile_interval_sec = 1;
    let app = TestApp::spawn_with(db, serve).await;
    let _reconciler = app.start_reconciler("r1");
    let policy = json!({
        "region": "us-east-1",
        "instance_types": ["g4dn.12xlarge"],
        "max_workers": 4,
        "scale_down_cooldown_sec": 0,
        "stabilization_window_sec": 0,
        "idle_to_zero_after_sec": 1
    });
    create_pool(&app, "onchange", &policy).await;
    samples(&app, json!([queue_at("onchange", 2, now_ms())])).await;
    let start = Instant::now();
    while live(&app).await != 2 {
        assert!(start.elapsed() < Duration::from_secs(15), "no workers");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The scale-up and the queue's 2 are now over a second old. The reconciler decides on
    // the real clock: this wait is real.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let zero_at = now_ms();
    samples(&app, json!([queue_at("onchange", 0, zero_at)])).await;
    let start = Instant::now();
    while live(&app).await != 0 {
        assert!(start.elapsed() < Duration::from_secs(15), "never idled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = app.get_json("/v1/pools/onchange/events?limit=100").await;
    let down = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "scaled" && e["detail"]["to"] == 0)
        .unwrap_or_else(|| panic!("{events:#}"))
        .clone();
    let at = time::OffsetDateTime::parse(
        down["at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let at_ms = (at.unix_timestamp_nanos() / 1_000_000) as i64;
    assert!(
        at_ms >= zero_at + 1_000,
        "scaled to zero {} ms after the zero, not a second: {down:#}",
        at_ms - zero_at
    );
}

async fn live(app: &TestApp) -> u64 {
    app.get_json("/v1/pools/onchange").await["current"]
        .as_u64()
        .unwrap()
}

on_both_backends!(
    a_sender_that_reports_on_change_waits_from_its_zero,
    work_after_an_idle_spell_starts_the_count_again,
    utilisation_that_reports_on_change_waits_from_its_first_idle_sample,
    gpu_memory_below_the_threshold_is_idle_even_when_utilisation_blips,
    idle_gpu_memory_gib_must_be_a_positive_size,
    the_reconciler_waits_from_the_zero_too,
);
