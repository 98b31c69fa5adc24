//! No negative zero reaches a reader: a pool with no workers (whose cost is an empty float
//! sum, `-0.0` in Rust) and signals sent as `-0.0` show as plain zeros on the fleet page, in
//! `/fleet` and in `/metrics`, never as `-0`, `-0.0` or `$-0.00`.

use serde_json::json;

use crate::common::{Backend, TestApp};
use crate::http_pools::{create_pool, put, rfc3339_ago};
use crate::on_both_backends;

/// Lines of a text exposition whose sample value is a negative zero.
fn negative_zero_samples(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            // `name{labels} value [timestamp]`: the value is the first field after the labels.
            let after = l.rsplit_once('}').map_or(*l, |(_, rest)| rest);
            after
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v == 0.0 && v.is_sign_negative())
        })
        .collect()
}

async fn negative_zeros_are_shown_as_zero(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(
        &app,
        "nz",
        &json!({"region": "us-east-1", "instance_types": ["g4dn.12xlarge"], "max_workers": 2,
                "daily_budget": 10.0}),
    )
    .await;
    let r = put(
        &app,
        "/v1/pools/nz/workers/w-1",
        &json!({"instance_type": "g4dn.12xlarge", "market": "on_demand", "started_at": rfc3339_ago(60)}),
    )
    .await;
    assert!(
        r.status().is_success(),
        "{}",
        r.text().await.unwrap_or_default()
    );
    // JSON's `-0.0` is a negative zero once parsed; every signal that is shown gets one.
    let body = r#"{"samples": [
        {"pool": "nz", "name": "queue_depth", "value": -0.0},
        {"pool": "nz", "name": "running_jobs", "value": -0.0},
        {"pool": "nz", "name": "gpu_utilization", "value": -0.0, "worker": "w-1"},
        {"pool": "nz", "name": "gpu_memory_used_gib", "value": -0.0, "worker": "w-1"}
    ]}"#;
    let r = app
        .client
        .post(app.url("/v1/webhooks/metrics"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());

    let fleet = app.get("/fleet/nz").await.text().await.unwrap();
    assert!(
        fleet.contains("\"queue_depth\":0"),
        "the sample is shown: {fleet}"
    );
    assert!(!fleet.contains(":-0"), "{fleet}");

    let page = app.get("/").await.text().await.unwrap();
    assert!(page.contains("nz"), "the pool is on the page");
    for signed in ["$-0", "-0%", ">-0<", "-0.0", "-0 "] {
        assert!(!page.contains(signed), "{signed} on the fleet page");
    }

    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("trainscaler_pool_queue_depth{pool=\"nz\"}"),
        "the pool's queue is exposed: {metrics}"
    );
    assert_eq!(negative_zero_samples(&metrics), Vec::<&str>::new());
}

on_both_backends!(negative_zeros_are_shown_as_zero);
