//! Pools over HTTP: policies with their defaults and every invalid field, workers, metric
//! batches, pool decisions driven by webhooks, events, the fleet view and metrics.

use serde_json::{Value, json};

use crate::common::{Backend, TestApp, assert_problem};
use crate::on_both_backends;

pub fn t4_policy() -> Value {
    json!({
        "provider": "aws",
        "region": "us-east-1",
        "instance_types": ["g4dn.12xlarge", {"instance_type": "g5.12xlarge", "markets": ["spot"]}],
        "max_workers": 4
    })
}

pub async fn put(app: &TestApp, path: &str, body: &Value) -> reqwest::Response {
    app.client
        .put(app.url(path))
        .json(body)
        .send()
        .await
        .expect("PUT")
}

pub async fn create_pool(app: &TestApp, name: &str, policy: &Value) {
    let r = put(app, &format!("/v1/pools/{name}"), policy).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap_or_default());
}

pub fn rfc3339_ago(secs: i64) -> String {
    let t = time::OffsetDateTime::now_utc() - time::Duration::seconds(secs);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

pub async fn samples(app: &TestApp, samples: Value) -> Value {
    let r = app
        .post_json("/v1/webhooks/metrics", &json!({ "samples": samples }))
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    r.json().await.unwrap()
}

pub async fn decide(app: &TestApp, pool: &str) -> Value {
    let r = app.post_json("/decide", &json!({ "pool": pool })).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let body: Value = r.json().await.unwrap();
    assert!(body.get("instance").is_none());
    body["workers"].clone()
}

pub async fn add_workers(app: &TestApp, pool: &str, n: usize, market: &str) {
    for i in 0..n {
        let r = put(
            app,
            &format!("/v1/pools/{pool}/workers/{market}-{i}"),
            &json!({"instance_type": "g4dn.12xlarge", "market": market, "started_at": rfc3339_ago(3600)}),
        )
        .await;
        assert_eq!(r.status(), 201);
    }
}

fn rules(decision: &Value) -> Vec<String> {
    decision["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap().to_string())
        .collect()
}

async fn policy_defaults_are_filled_in_and_pools_round_trip(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "gpu-t4", &t4_policy()).await;
    let pool = app.get_json("/v1/pools/gpu-t4").await;
    let p = &pool["policy"];
    assert_eq!(
        p["gpus_per_worker"], 4,
        "from the catalog: g4dn.12xlarge has 4 T4"
    );
    assert_eq!(p["mode"], "queue");
    assert_eq!(p["gpus_per_job"], 4);
    assert_eq!(p["min_workers"], 0);
    assert_eq!(p["max_step_percent"], 50.0);
    assert_eq!(p["min_step"], 1);
    assert_eq!(p["scale_down_cooldown_sec"], 300);
    assert_eq!(p["idle_to_zero_after_sec"], 600);
    assert_eq!(p["spot_percentage"], 80);
    assert_eq!(
        p["instance_types"][0]["markets"],
        json!(["spot", "on_demand"])
    );
    assert_eq!(p["instance_types"][1]["markets"], json!(["spot"]));
    assert_eq!(pool["current"], 0);
    assert!(pool["desired"].is_null());
    // Replacing is a 200 and keeps the pool.
    let mut changed = t4_policy();
    changed["max_workers"] = json!(8);
    let r = put(&app, "/v1/pools/gpu-t4", &changed).await;
    assert_eq!(r.status(), 200);
    let list = app.get_json("/v1/pools").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["policy"]["max_workers"], 8);
    let r = app.delete("/v1/pools/gpu-t4").await;
    assert_eq!(r.status(), 204);
    assert_problem(app.get("/v1/pools/gpu-t4").await, 404, "name").await;
    let r = app.delete("/v1/pools/gpu-t4").await;
    assert_problem(r, 404, "name").await;
}

async fn invalid_policies_name_the_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"min_workers": 5}), 422, "min_workers"),
        (json!({"spot_percentage": 150}), 422, "spot_percentage"),
        (json!({"max_step_percent": 0}), 422, "max_step_percent"),
        (
            json!({"instance_types": ["p9.nope"]}),
            422,
            "instance_types[0].instance_type",
        ),
        (
            json!({"instance_types": ["g4dn.12xlarge", "g4dn.12xlarge"]}),
            422,
            "instance_types[1].instance_type",
        ),
        (json!({"instance_types": []}), 422, "instance_types"),
        (
            json!({"region": "mars-1"}),
            422,
            "instance_types[0].instance_type",
        ),
        (json!({"provider": "nocloud"}), 422, "provider"),
        (json!({"mode": "elastic"}), 422, "min_nodes"),
        (
            json!({"mode": "elastic", "min_nodes": 4, "max_nodes": 2}),
            422,
            "max_nodes",
        ),
        (
            json!({"target_utilization": 0.7}),
            422,
            "target_utilization",
        ),
        (json!({"tolerance": 0.2}), 422, "tolerance"),
        (json!({"node_step": 2}), 422, "node_step"),
        (json!({"mode": "elastic", "min_nodes": 2}), 422, "max_nodes"),
        (
            json!({"mode": "elastic", "min_nodes": 8, "max_nodes": 8}),
            422,
            "min_nodes",
        ),
        (
            json!({"mode": "utilization", "target_utilization": 70}),
            422,
            "target_utilization",
        ),
        (
            json!({"idle_utilization_threshold": -0.1}),
            422,
            "idle_utilization_threshold",
        ),
        (
            json!({"scale_down_cooldown_sec": 300000000}),
            422,
            "scale_down_cooldown_sec",
        ),
        (json!({"daily_budget": -5}), 422, "daily_budget"),
        (json!({"budget_action": "cap"}), 422, "budget_action"),
        (json!({"max_workers": 0}), 422, "max_workers"),
        (json!({"colour": "blue"}), 422, "colour"),
        (json!({"max_workers": "four"}), 422, "max_workers"),
    ];
    for (patch, status, field) in cases {
        let mut policy = t4_policy();
        for (k, v) in patch.as_object().unwrap() {
            policy[k] = v.clone();
        }
        let r = put(&app, "/v1/pools/bad", &policy).await;
        assert_problem(r, status, field).await;
    }
    let r = put(&app, "/v1/pools/Bad%20Name", &t4_policy()).await;
    assert_problem(r, 422, "name").await;
    let mut no_max = t4_policy();
    no_max.as_object_mut().unwrap().remove("max_workers");
    assert_problem(put(&app, "/v1/pools/bad", &no_max).await, 422, "body").await;
    assert_problem(app.get("/v1/pools/bad").await, 404, "name").await;
}

async fn from_zero_to_what_the_queue_needs_and_asking_again_changes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "gpu-t4", &t4_policy()).await;
    let out = samples(
        &app,
        json!([
            {"pool": "gpu-t4", "name": "queue_depth", "value": 8, "at": rfc3339_ago(5)},
            {"pool": "gpu-t4", "name": "running_jobs", "value": 0, "at": rfc3339_ago(5)}
        ]),
    )
    .await;
    assert_eq!(out["accepted"], 2);
    let d = decide(&app, "gpu-t4").await;
    assert_eq!(d["pool"], "gpu-t4");
    assert_eq!(d["current"], 0);
    assert_eq!(d["need"], 8);
    assert_eq!(d["desired"], 4, "8 four-GPU jobs, max_workers 4");
    assert_eq!(d["delta"], 4);
    assert_eq!(d["changed"], true);
    // 80% spot above a base of 0: on-demand is 20% of 4 rounded up.
    let by_type: Vec<(String, String, u64)> = d["by_type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["instance_type"].as_str().unwrap().into(),
                t["market"].as_str().unwrap().into(),
                t["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_type,
        vec![
            ("g4dn.12xlarge".into(), "on_demand".into(), 1),
            ("g4dn.12xlarge".into(), "spot".into(), 3)
        ]
    );
    let launched: u64 = d["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "scale_up")
        .map(|a| a["count"].as_u64().unwrap())
        .sum();
    assert_eq!(launched, 4);
    assert!(rules(&d).contains(&"scale_from_zero".to_string()), "{d}");
    // g4dn.12xlarge: $3.912 on-demand, $1.72128 spot in the bundled catalog.
    assert_eq!(d["cost_per_hour"], 9.08, "3.912 + 3 × 1.72128");
    let again = decide(&app, "gpu-t4").await;
    assert_eq!(again["desired"], 4);
    assert_eq!(again["changed"], false);
    let events = app.get_json("/v1/pools/gpu-t4/events").await;
    let kinds: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["scaled"]);
    assert_eq!(events["items"][0]["detail"]["from"], 0);
    assert_eq!(events["items"][0]["detail"]["to"], 4);
    assert_problem(
        app.post_json("/decide", &json!({"pool": "nope"})).await,
        404,
        "pool",
    )
    .await;
    assert_problem(app.post_json("/decide", &json!({})).await, 422, "body").await;
    assert_problem(
        app.post_json(
            "/decide",
            &json!({"pool": "gpu-t4", "job": {"params_billion": 1}}),
        )
        .await,
        422,
        "body",
    )
    .await;
}

async fn steps_cooldowns_and_idle_through_webhooks(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["max_workers"] = json!(40);
    policy["scale_down_cooldown_sec"] = json!(3);
    policy["stabilization_window_sec"] = json!(0);
    policy["idle_to_zero_after_sec"] = json!(3);
    create_pool(&app, "steps", &policy).await;
    add_workers(&app, "steps", 4, "spot").await;
    samples(
        &app,
        json!([{"pool": "steps", "name": "queue_depth", "value": 20, "at": rfc3339_ago(1)}]),
    )
    .await;
    let d = decide(&app, "steps").await;
    assert_eq!(
        (d["current"].as_u64(), d["desired"].as_u64()),
        (Some(4), Some(6)),
        "{d}"
    );
    assert!(rules(&d).contains(&"step_limit".to_string()));
    // Work drops to 2 jobs: scale down once, then the cooldown holds the next one.
    samples(&app, json!([{"pool": "steps", "name": "queue_depth", "value": 0, "at": rfc3339_ago(0)},
                         {"pool": "steps", "name": "running_jobs", "value": 3, "at": rfc3339_ago(0)}])).await;
    let d = decide(&app, "steps").await;
    assert_eq!(d["desired"], 3, "{d}");
    let removed = d["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "scale_down")
        .unwrap();
    assert_eq!(
        removed["workers"].as_array().unwrap().len(),
        1,
        "4 live workers, target 3"
    );
    samples(
        &app,
        json!([{"pool": "steps", "name": "running_jobs", "value": 1, "at": rfc3339_ago(0)}]),
    )
    .await;
    let d = decide(&app, "steps").await;
    assert_eq!(d["desired"], 3, "inside the 3 s cooldown: {d}");
    assert!(rules(&d).contains(&"scale_down_cooldown".to_string()));
    assert!(d["cooldown_until"].is_string());
    app.state
        .clock
        .advance(std::time::Duration::from_millis(3100));
    let d = decide(&app, "steps").await;
    assert_eq!(d["desired"], 1, "cooldown over, one job running: {d}");
    // No work and idle GPUs: held until idle_to_zero_after_sec, then to min_workers (0).
    samples(
        &app,
        json!([{"pool": "steps", "name": "running_jobs", "value": 0, "at": rfc3339_ago(0)}]),
    )
    .await;
    let d = decide(&app, "steps").await;
    assert_eq!(d["desired"], 1, "{d}");
    assert!(
        rules(&d).contains(&"idle_wait".to_string())
            || rules(&d).contains(&"scale_down_cooldown".to_string()),
        "{d}"
    );
    app.state
        .clock
        .advance(std::time::Duration::from_millis(3200));
    let d = decide(&app, "steps").await;
    assert_eq!(d["desired"], 0, "{d}");
    assert!(rules(&d).contains(&"idle_to_zero".to_string()), "{d}");
}

async fn interruption_warning_from_eventbridge_gets_checkpoint_and_replacement(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["max_interruption_rate"] = json!(1.0);
    create_pool(&app, "spot", &policy).await;
    for id in ["i-0aaa", "i-0bbb"] {
        let r = put(
            &app,
            &format!("/v1/pools/spot/workers/{id}"),
            &json!({"instance_type": "g4dn.12xlarge", "market": "spot", "zone": "us-east-1a"}),
        )
        .await;
        assert_eq!(r.status(), 201);
    }
    samples(
        &app,
        json!([{"pool": "spot", "name": "running_jobs", "value": 2, "at": rfc3339_ago(1)}]),
    )
    .await;
    assert_eq!(decide(&app, "spot").await["desired"], 2);
    // As AWS sends it through an EventBridge API destination.
    let event = json!({
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": rfc3339_ago(10),
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1a:instance/i-0bbb"],
        "detail": {"instance-id": "i-0bbb", "instance-action": "terminate"}
    });
    let r = app.post_json("/v1/webhooks/events", &event).await;
    assert_eq!(r.status(), 200);
    let out: Value = r.json().await.unwrap();
    assert_eq!(out["recorded"], 1);
    let r = app.post_json("/v1/webhooks/events", &json!([event])).await;
    let out: Value = r.json().await.unwrap();
    assert_eq!(
        (out["recorded"].as_u64(), out["duplicates"].as_u64()),
        (Some(0), Some(1)),
        "re-sent: {out}"
    );
    let d = decide(&app, "spot").await;
    let actions = d["actions"].as_array().unwrap();
    let checkpoint = actions
        .iter()
        .find(|a| a["action"] == "checkpoint")
        .expect("checkpoint");
    assert_eq!(checkpoint["worker"], "i-0bbb");
    assert!(checkpoint["deadline"].is_string());
    let replace = actions
        .iter()
        .find(|a| a["action"] == "replace")
        .expect("replace");
    assert_eq!(replace["worker"], "i-0bbb");
    assert_eq!(
        (
            replace["instance_type"].as_str(),
            replace["market"].as_str()
        ),
        (Some("g5.12xlarge"), Some("spot")),
        "next spot type by priority: {d}"
    );
    // Asked again, the replacement is not logged twice.
    decide(&app, "spot").await;
    let events = app.get_json("/v1/pools/spot/events").await;
    let kinds: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "replacement").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "interruption_warning")
            .count(),
        1
    );
    // An instance no pool has is reported, not stored; a malformed event rejects the batch.
    let mut stranger = event.clone();
    stranger["id"] = json!("other");
    stranger["detail"]["instance-id"] = json!("i-0zzz");
    let out: Value = app
        .post_json("/v1/webhooks/events", &json!([stranger]))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["unmatched"], json!([0]));
    let mut broken = event.clone();
    broken["time"] = json!("yesterday");
    assert_problem(
        app.post_json("/v1/webhooks/events", &json!([event, broken]))
            .await,
        422,
        "[1].time",
    )
    .await;
    // A capacity error moves new spot capacity off the type.
    let r = app.post_json("/v1/webhooks/events", &json!({"events": [{"kind": "capacity_error", "pool": "spot", "instance_type": "g5.12xlarge", "at": rfc3339_ago(1), "message": "InsufficientInstanceCapacity"}]})).await;
    assert_eq!(r.status(), 200);
    let d = decide(&app, "spot").await;
    let replace = d["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "replace")
        .unwrap()
        .clone();
    assert_eq!(
        replace["market"], "on_demand",
        "no other spot type is usable: {d}"
    );
}

async fn metric_batches_are_all_or_nothing_and_idempotent(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "m", &t4_policy()).await;
    let good = json!({"pool": "m", "name": "queue_depth", "value": 3, "at": rfc3339_ago(2)});
    let cases = vec![
        (
            json!({"pool": "m", "name": "gpu_temp", "value": 3, "at": rfc3339_ago(2)}),
            "samples[1].name",
        ),
        (
            json!({"pool": "m", "name": "gpu_utilization", "value": 85, "at": rfc3339_ago(2)}),
            "samples[1].value",
        ),
        (
            json!({"pool": "m", "name": "queue_depth", "value": -1, "at": rfc3339_ago(2)}),
            "samples[1].value",
        ),
        (
            json!({"pool": "m", "name": "queue_depth", "value": 1, "at": "2999-01-01T00:00:00Z"}),
            "samples[1].at",
        ),
        (
            json!({"pool": "m", "name": "queue_depth", "value": 1, "at": "noon"}),
            "samples[1].at",
        ),
        (
            json!({"pool": "m", "worker": "", "name": "queue_depth", "value": 1, "at": rfc3339_ago(2)}),
            "samples[1].worker",
        ),
        (
            json!({"pool": "ghost", "name": "queue_depth", "value": 1, "at": rfc3339_ago(2)}),
            "samples[1].pool",
        ),
    ];
    for (bad, field) in cases {
        let r = app
            .post_json("/v1/webhooks/metrics", &json!({"samples": [good, bad]}))
            .await;
        assert_problem(r, 422, field).await;
    }
    let fleet = app.get_json("/fleet/m").await;
    assert!(
        fleet["queue_depth"].is_null(),
        "nothing of a rejected batch is stored: {fleet}"
    );
    let batch = json!([
        good,
        {"pool": "m", "worker": "w1", "name": "gpu_utilization", "value": 0.5, "at": rfc3339_ago(2)},
        {"pool": "m", "worker": "w1", "name": "gpu_memory_used_gib", "value": 11.5, "at": rfc3339_ago(2)}
    ]);
    let out = samples(&app, batch.clone()).await;
    assert_eq!(
        (out["accepted"].as_u64(), out["duplicates"].as_u64()),
        (Some(3), Some(0))
    );
    let out = samples(&app, batch).await;
    assert_eq!(
        (out["accepted"].as_u64(), out["duplicates"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(app.get_json("/fleet/m").await["queue_depth"], 3.0);
    assert_problem(
        app.post_json("/v1/webhooks/metrics", &json!({"samples": [], "extra": 1}))
            .await,
        422,
        "extra",
    )
    .await;
}

async fn fleet_metrics_and_page_show_the_pool(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["daily_budget"] = json!(1000);
    create_pool(&app, "fleet-a", &policy).await;
    add_workers(&app, "fleet-a", 2, "on_demand").await;
    samples(&app, json!([
        {"pool": "fleet-a", "name": "queue_depth", "value": 5, "at": rfc3339_ago(1)},
        {"pool": "fleet-a", "worker": "on_demand-0", "name": "gpu_utilization", "value": 0.8, "at": rfc3339_ago(1)},
        {"pool": "fleet-a", "worker": "on_demand-1", "name": "gpu_utilization", "value": 0.6, "at": rfc3339_ago(1)}
    ])).await;
    decide(&app, "fleet-a").await;
    let fleet = app.get_json("/fleet").await;
    let pool = &fleet["pools"][0];
    assert_eq!(pool["name"], "fleet-a");
    assert_eq!(pool["current"], 2);
    assert_eq!(pool["desired"], 3, "2 workers + 50%: {pool}");
    assert_eq!(pool["queue_depth"], 5.0);
    assert!((pool["gpu_utilization"].as_f64().unwrap() - 0.7).abs() < 1e-9);
    assert_eq!(
        pool["cost_per_hour"], 7.82,
        "two on-demand g4dn.12xlarge at $3.912"
    );
    // Started an hour ago: about $7.82 spent today (less if the UTC day began since).
    let spent = pool["spent_today"].as_f64().unwrap();
    assert!(spent > 0.0 && spent <= 7.83, "{spent}");
    assert_eq!(pool["workers"][0]["count"], 2);
    assert_eq!(pool["budget"]["daily_budget"], 1000.0);
    assert_eq!(pool["last_decision"]["desired"], 3);
    assert_eq!(pool["recent_events"][0]["kind"], "scaled");
    assert_eq!(fleet["totals"]["workers"], 2);
    assert_eq!(fleet["totals"]["desired"], 3);
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    assert!(
        text.contains("trainscaler_pool_workers_current{pool=\"fleet-a\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("trainscaler_pool_workers_desired{pool=\"fleet-a\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("trainscaler_pool_cost_per_hour_dollars{pool=\"fleet-a\"} 7.82"),
        "{text}"
    );
    assert!(
        text.contains(
            "trainscaler_decisions_total{kind=\"pool\",pool=\"fleet-a\",changed=\"true\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("trainscaler_http_request_duration_seconds_bucket{"),
        "{text}"
    );
    assert!(text.contains("route=\"/decide\""), "{text}");
    let page = app.get("/").await;
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text().await.unwrap();
    assert!(html.contains("fleet-a") && html.contains("<svg"), "{html}");
    assert_problem(app.get("/fleet/nope").await, 404, "pool").await;
}

/// A static pool has no catalog of its own: a worker of any provider's type in its region
/// is one it can hold, as its prices come from there too.
async fn a_static_pool_takes_workers_of_types_other_providers_offer(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["provider"] = json!("static");
    create_pool(&app, "sim", &policy).await;
    let worker = json!({"instance_type": "g4dn.12xlarge", "market": "spot"});
    assert_eq!(
        put(&app, "/v1/pools/sim/workers/a", &worker).await.status(),
        201
    );
    let unknown = json!({"instance_type": "no-such-type", "market": "spot"});
    assert_problem(
        put(&app, "/v1/pools/sim/workers/b", &unknown).await,
        422,
        "instance_type",
    )
    .await;
}

async fn workers_are_validated_and_stop(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "w", &t4_policy()).await;
    let worker = json!({"instance_type": "g4dn.12xlarge", "market": "spot"});
    assert_eq!(
        put(&app, "/v1/pools/w/workers/a", &worker).await.status(),
        201
    );
    assert_eq!(
        put(&app, "/v1/pools/w/workers/a", &worker).await.status(),
        200
    );
    assert_problem(
        put(&app, "/v1/pools/ghost/workers/a", &worker).await,
        404,
        "name",
    )
    .await;
    for (field, invalid) in [
        (
            "instance_type",
            json!({"instance_type": "n1-standard-8", "market": "spot"}),
        ),
        (
            "market",
            json!({"instance_type": "g4dn.12xlarge", "market": "reserved"}),
        ),
        (
            "started_at",
            json!({"instance_type": "g4dn.12xlarge", "market": "spot", "started_at": "2999-01-01T00:00:00Z"}),
        ),
    ] {
        let r = put(&app, "/v1/pools/w/workers/b", &invalid).await;
        assert_problem(r, 422, field).await;
    }
    assert_eq!(app.get_json("/v1/pools/w").await["current"], 1);
    let r = app.delete("/v1/pools/w/workers/a").await;
    assert_eq!(r.status(), 204);
    let r = app.delete("/v1/pools/w/workers/a").await;
    assert_problem(r, 404, "id").await;
    assert_eq!(app.get_json("/v1/pools/w").await["current"], 0);

    // Worker ids are limited in characters, as the spec's maxLength counts them: 128 two-byte
    // characters (256 bytes) are an id, 129 are not.
    let id = |n: usize| "%C3%A9".repeat(n);
    let at = |n: usize| format!("/v1/pools/w/workers/{}", id(n));
    assert_eq!(put(&app, &at(128), &worker).await.status(), 201);
    assert_problem(put(&app, &at(129), &worker).await, 422, "id").await;
}

async fn events_page_newest_first(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "ev", &t4_policy()).await;
    let events: Vec<Value> = (0..5)
        .map(|i| json!({"kind": "capacity_error", "pool": "ev", "instance_type": "g4dn.12xlarge", "at": rfc3339_ago(100 - i), "id": format!("e{i}")}))
        .collect();
    let r = app
        .post_json("/v1/webhooks/events", &json!({ "events": events }))
        .await;
    assert_eq!(r.status(), 200);
    let first = app.get_json("/v1/pools/ev/events?limit=3").await;
    let ids = |page: &Value| {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["at"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let a = ids(&first);
    assert_eq!(a.len(), 3);
    assert!(a[0] > a[1] && a[1] > a[2], "{a:?}");
    let next = first["next"].as_str().unwrap();
    let second = app
        .get_json(&format!("/v1/pools/ev/events?limit=3&cursor={next}"))
        .await;
    let b = ids(&second);
    assert_eq!(b.len(), 2);
    assert!(a[2] > b[0]);
    assert!(second["next"].is_null());
    assert_problem(
        app.get("/v1/pools/ev/events?cursor=zzz").await,
        400,
        "cursor",
    )
    .await;
    assert_problem(app.get("/v1/pools/nope/events").await, 404, "name").await;
}

/// Fifty schedulers ask at once: the answers are as if asked one after another, so exactly
/// one of them takes the step and logs it. A race is a matter of timing, so four pools race
/// in turn: a missing lock shows in at least one of them.
async fn fifty_concurrent_decisions_take_one_step(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["max_workers"] = json!(40);
    // Open the database and HTTP connections first, so that the fifty really overlap rather
    // than queueing behind connection set-up.
    create_pool(&app, "warm-up", &t4_policy()).await;
    futures_join(concurrent_decisions(&app, "warm-up".into())).await;
    for round in 0..4 {
        let pool = format!("race-{round}");
        create_pool(&app, &pool, &policy).await;
        add_workers(&app, &pool, 4, "spot").await;
        samples(
            &app,
            json!([{"pool": pool, "name": "queue_depth", "value": 20, "at": rfc3339_ago(1)}]),
        )
        .await;
        let answers: Vec<Value> = futures_join(concurrent_decisions(&app, pool.clone())).await;
        assert!(
            answers.iter().all(|a| a["desired"] == 6),
            "every answer is the one step: {answers:?}"
        );
        assert_eq!(
            answers.iter().filter(|a| a["changed"] == true).count(),
            1,
            "{pool}"
        );
        let events = app.get_json(&format!("/v1/pools/{pool}/events")).await;
        let scaled: Vec<&Value> = events["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "scaled")
            .collect();
        assert_eq!(scaled.len(), 1, "{events}");
        assert_eq!(
            (
                scaled[0]["detail"]["from"].as_u64(),
                scaled[0]["detail"]["to"].as_u64()
            ),
            (Some(4), Some(6))
        );
    }
}

fn concurrent_decisions(
    app: &TestApp,
    pool: String,
) -> impl Iterator<Item = tokio::task::JoinHandle<Value>> {
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(50));
    (0..50)
        .map(move |_| {
            let client = app.client.clone();
            let url = app.url("/decide");
            let barrier = barrier.clone();
            let pool = pool.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let r = client
                    .post(url)
                    .json(&json!({"pool": pool}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                r.json::<Value>().await.unwrap()["workers"].clone()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
}

async fn futures_join(handles: impl Iterator<Item = tokio::task::JoinHandle<Value>>) -> Vec<Value> {
    let mut out = Vec::new();
    for h in handles.collect::<Vec<_>>() {
        out.push(h.await.expect("task"));
    }
    out
}

async fn utilization_mode_and_budget_alarm(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["mode"] = json!("utilization");
    policy["target_utilization"] = json!(0.7);
    policy["max_workers"] = json!(10);
    policy["daily_budget"] = json!(1.0);
    create_pool(&app, "util", &policy).await;
    add_workers(&app, "util", 4, "spot").await;
    let util = |v: f64| {
        json!((0..4)
            .map(|i| json!({"pool": "util", "worker": format!("spot-{i}"), "name": "gpu_utilization", "value": v, "at": rfc3339_ago(0)}))
            .collect::<Vec<_>>())
    };
    samples(&app, util(0.75)).await;
    let d = decide(&app, "util").await;
    assert_eq!(d["desired"], 4, "0.75 / 0.7 is within 0.1: {d}");
    assert!(rules(&d).contains(&"within_tolerance".to_string()));
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    samples(&app, util(0.91)).await;
    let d = decide(&app, "util").await;
    assert_eq!(d["desired"], 6, "ceil(4 × 0.91 / 0.7) = 6: {d}");
    // Four workers for an hour already cost more than $1: one alarm, however often asked.
    assert_eq!(d["budget"]["exceeded"], true);
    decide(&app, "util").await;
    let events = app.get_json("/v1/pools/util/events").await;
    let alarms = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "budget_alarm")
        .count();
    assert_eq!(alarms, 1, "{events}");
}

async fn alibaba_preemptible_interruption_reaches_the_pool(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["max_interruption_rate"] = json!(1.0);
    create_pool(&app, "ali", &policy).await;
    let r = put(
        &app,
        "/v1/pools/ali/workers/i-bp1ecr000000005go2",
        &json!({"instance_type": "g4dn.12xlarge", "market": "spot"}),
    )
    .await;
    assert_eq!(r.status(), 201);
    // Alibaba's notification time: local time with its offset, no separators.
    let t = time::OffsetDateTime::now_utc().to_offset(time::macros::offset!(+8))
        - time::Duration::seconds(5);
    let event_time = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}.000+0800",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    let event = json!({
        "id": "ali-evt-1", "product": "ECS", "level": "WARN", "regionId": "cn-hangzhou",
        "resourceId": "acs:ecs:cn-hangzhou:1690700000000030:instance/i-bp1ecr000000005go2",
        "name": "Instance:PreemptibleInstanceInterruption", "eventTime": event_time,
        "content": {"instanceId": "i-bp1ecr000000005go2", "action": "delete"}
    });
    let out: Value = app
        .post_json("/v1/webhooks/events", &event)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["recorded"], 1, "{out}");
    let d = decide(&app, "ali").await;
    assert!(
        d["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action"] == "checkpoint" && a["worker"] == "i-bp1ecr000000005go2"),
        "{d}"
    );
}

async fn the_pool_list_counts_each_pools_live_workers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for name in ["list-a", "list-b", "list-c"] {
        create_pool(&app, name, &t4_policy()).await;
    }
    add_workers(&app, "list-a", 3, "spot").await;
    add_workers(&app, "list-b", 1, "on_demand").await;
    let r = app.delete("/v1/pools/list-a/workers/spot-1").await;
    assert_eq!(r.status(), 204);
    let list = app.get_json("/v1/pools").await;
    let counts: Vec<(String, u64)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["current"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("list-a".into(), 2),
            ("list-b".into(), 1),
            ("list-c".into(), 0)
        ],
        "a stopped worker is not counted"
    );
    // Pages carry the counts too.
    let first = app.get_json("/v1/pools?limit=1").await;
    assert_eq!(first["items"][0]["current"], 2);
    let next = first["next"].as_str().unwrap();
    let second = app
        .get_json(&format!("/v1/pools?limit=1&cursor={next}"))
        .await;
    assert_eq!(second["items"][0]["name"], "list-b");
    assert_eq!(second["items"][0]["current"], 1);
}

on_both_backends!(
    alibaba_preemptible_interruption_reaches_the_pool,
    utilization_mode_and_budget_alarm,
    policy_defaults_are_filled_in_and_pools_round_trip,
    invalid_policies_name_the_field,
    from_zero_to_what_the_queue_needs_and_asking_again_changes_nothing,
    steps_cooldowns_and_idle_through_webhooks,
    interruption_warning_from_eventbridge_gets_checkpoint_and_replacement,
    metric_batches_are_all_or_nothing_and_idempotent,
    fleet_metrics_and_page_show_the_pool,
    workers_are_validated_and_stop,
    the_pool_list_counts_each_pools_live_workers,
    a_static_pool_takes_workers_of_types_other_providers_offer,
    events_page_newest_first,
    fifty_concurrent_decisions_take_one_step,
);
