//! Worker aliases over HTTP: registered with a worker, validated field by field, listed with
//! the live workers, and matched when a JSON sample names the worker by one of them.

use serde_json::{Value, json};

use crate::common::{Backend, TestApp, assert_problem};
use crate::http_pools::{create_pool, put, rfc3339_ago, samples, t4_policy};
use crate::on_both_backends;

fn worker(aliases: Value) -> Value {
    json!({"instance_type": "g4dn.12xlarge", "market": "spot", "aliases": aliases})
}

async fn registered_aliases_are_listed_and_name_the_worker_in_samples(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "a", &t4_policy()).await;
    let r = put(
        &app,
        "/v1/pools/a/workers/i-0abc",
        &worker(json!(["ip-10-0-1-23.ec2.internal", "10.0.1.23"])),
    )
    .await;
    assert_eq!(r.status(), 201);
    let out: Value = r.json().await.unwrap();
    assert_eq!(
        out["aliases"],
        json!(["ip-10-0-1-23.ec2.internal", "10.0.1.23"])
    );
    // Without `aliases` a worker has none.
    let r = put(
        &app,
        "/v1/pools/a/workers/i-0def",
        &json!({"instance_type": "g4dn.12xlarge", "market": "spot"}),
    )
    .await;
    assert_eq!(r.status(), 201);

    samples(
        &app,
        json!([{"pool": "a", "worker": "ip-10-0-1-23.ec2.internal", "name": "gpu_utilization",
                "value": 0.75, "at": rfc3339_ago(1)}]),
    )
    .await;
    let list = app.get_json("/v1/pools/a/workers").await;
    let items = list["items"].as_array().unwrap();
    let by_id = |id: &str| items.iter().find(|w| w["id"] == id).unwrap().clone();
    let abc = by_id("i-0abc");
    assert_eq!(
        abc["aliases"],
        json!(["10.0.1.23", "ip-10-0-1-23.ec2.internal"]),
        "sorted"
    );
    assert_eq!(abc["gpu_utilization"], 0.75, "{abc}");
    let def = by_id("i-0def");
    assert_eq!(def["aliases"], json!([]));
    assert!(def["gpu_utilization"].is_null(), "{def}");
}

async fn bad_aliases_are_refused_naming_the_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "a", &t4_policy()).await;
    let nine: Vec<String> = (0..9).map(|i| format!("host-{i}")).collect();
    let long = "h".repeat(254);
    let cases = [
        (json!(nine), "aliases"),
        (json!([""]), "aliases[0]"),
        (json!(["ok", "has space"]), "aliases[1]"),
        (json!(["ok", "tab\there"]), "aliases[1]"),
        (json!([long]), "aliases[0]"),
        (json!(["x", "y", "x"]), "aliases[2]"),
        (json!("host-0"), "aliases"),
    ];
    for (aliases, field) in cases {
        assert_problem(
            put(&app, "/v1/pools/a/workers/w", &worker(aliases)).await,
            422,
            field,
        )
        .await;
    }
    // 8 aliases of 253 characters are within bounds; nothing refused was stored.
    let most: Vec<String> = (0..8).map(|i| format!("{i}{}", "h".repeat(252))).collect();
    let r = put(&app, "/v1/pools/a/workers/w", &worker(json!(most))).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap_or_default());
}

on_both_backends!(
    registered_aliases_are_listed_and_name_the_worker_in_samples,
    bad_aliases_are_refused_naming_the_field,
);
