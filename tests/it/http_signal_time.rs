//! Samples and notices sent without `at` are taken as measured when the batch arrived, so a
//! shell script or cron job without a clock format of its own still drives a pool.

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::common::{Backend, TestApp, assert_problem};
use crate::http_pools::{create_pool, decide, put, samples, t4_policy};
use crate::on_both_backends;

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

fn reason<'a>(decision: &'a Value, rule: &str) -> &'a Value {
    decision["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == rule)
        .unwrap_or_else(|| panic!("no `{rule}` reason in {decision}"))
}

async fn a_sample_without_at_counts_as_current(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "p", &t4_policy()).await;
    let sample = json!([{"pool": "p", "name": "queue_depth", "value": 2}]);
    let out = samples(&app, sample.clone()).await;
    assert_eq!(out, json!({"accepted": 1, "duplicates": 0}));

    // A stale or missing signal would hold the pool (`no_signal`); a current one is read.
    let d = decide(&app, "p").await;
    assert_eq!(reason(&d, "queue")["values"]["waiting_jobs"], 2.0, "{d}");
    assert_eq!(d["desired"], 2, "{d}");

    // Each sample without a time is a new measurement, not a re-sent one.
    let sample = json!([{"pool": "p", "name": "queue_depth", "value": 3}]);
    let out = samples(&app, sample).await;
    assert_eq!(out, json!({"accepted": 1, "duplicates": 0}));
    let d = decide(&app, "p").await;
    assert_eq!(reason(&d, "queue")["values"]["waiting_jobs"], 3.0, "{d}");

    // `at` given is still checked.
    let bad = json!({"samples": [{"pool": "p", "name": "queue_depth", "value": 1, "at": "noon"}]});
    assert_problem(
        app.post_json("/v1/webhooks/metrics", &bad).await,
        422,
        "samples[0].at",
    )
    .await;
}

async fn a_notice_without_at_is_stamped_on_arrival(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "p", &t4_policy()).await;
    let r = put(
        &app,
        "/v1/pools/p/workers/i-1",
        &json!({"instance_type": "g4dn.12xlarge", "market": "spot", "started_at": "2026-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(r.status(), 201);

    let before = now() - time::Duration::milliseconds(1);
    let r = app
        .post_json(
            "/v1/webhooks/events",
            &json!({"events": [{"kind": "interruption_warning", "worker": "i-1", "pool": "p"}]}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let after = now() + time::Duration::milliseconds(1);
    let out: Value = r.json().await.unwrap();
    assert_eq!(out["recorded"], 1, "{out}");

    let events = app.get_json("/v1/pools/p/events").await;
    let warning = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "interruption_warning")
        .unwrap_or_else(|| panic!("no warning in {events}"))
        .clone();
    let at = OffsetDateTime::parse(warning["at"].as_str().unwrap(), &Rfc3339).unwrap();
    assert!(
        before <= at && at <= after,
        "{at} not within {before}..{after}"
    );

    // The reclaim defaults to two minutes after the (defaulted) `at`, as AWS gives.
    let workers = app.get_json("/v1/pools/p/workers").await;
    let reclaim = workers["items"][0]["reclaim_at"]
        .as_str()
        .unwrap()
        .to_string();
    let reclaim = OffsetDateTime::parse(&reclaim, &Rfc3339).unwrap();
    assert_eq!(reclaim - at, time::Duration::seconds(120), "{workers}");

    let bad = json!({"events": [{"kind": "interruption_warning", "worker": "i-1", "at": "noon"}]});
    assert_problem(
        app.post_json("/v1/webhooks/events", &bad).await,
        422,
        "events[0].at",
    )
    .await;
}

on_both_backends!(
    a_sample_without_at_counts_as_current,
    a_notice_without_at_is_stamped_on_arrival,
);
