//! The running service driving an AWS auto scaling group in moto: a pool bound to the group
//! follows its queue from 0 to N and back to 0, scale-down terminates the worker the decision
//! chose (and lowers the group's desired capacity with it), and every change is in the pool's
//! event log.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trainscaler::app;
use trainscaler::provider::registry::Providers;
use trainscaler::provider::{GroupRef, Provider};

use crate::aws_moto::{create_group, distribution, provider};
use crate::common::{Backend, TestApp, TestDb, serve_config};
use crate::http_pools::{create_pool, decide};
use crate::moto;
use crate::reconcile::queue;

/// Waits until the group in moto has `n` instances and desired capacity `n`.
async fn wait_for_group(
    aws: &dyn Provider,
    group: &GroupRef,
    n: usize,
    app: &TestApp,
) -> Vec<String> {
    let start = Instant::now();
    loop {
        let c = aws.describe(group).await.expect("describe the group");
        if c.workers.len() == n && c.desired as usize == n {
            let mut ids: Vec<String> = c.workers.into_iter().map(|w| w.id).collect();
            ids.sort();
            return ids;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let events = app
                .get_json(&format!("/v1/pools/{}/events?limit=100", group.pool))
                .await;
            panic!(
                "group {} has {} instances (desired {}), not {n}: {c:?}; events: {events:#}",
                group.group,
                c.workers.len(),
                c.desired,
                c = c
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn live_ids(app: &TestApp, pool: &str) -> Vec<String> {
    let mut ids: Vec<String> = app.get_json(&format!("/v1/pools/{pool}/workers")).await["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn aws_pool_bound_to_an_auto_scaling_group_follows_the_queue_to_three_and_back_to_zero() {
    let moto = moto::shared();
    let name = moto::unique("train");
    let types = ["g4dn.12xlarge", "g5.12xlarge"];
    let setup = provider(&moto.url, "test", "test");
    // All spot above a base of 0: moto (5.2) truncates a fractional on-demand share instead of
    // rounding it up as AWS does, launching one instance short of 3 at 20% on-demand.
    // The group starts with the types in the other order: the policy's order must win.
    create_group(
        &setup,
        &name,
        4,
        &distribution(0, 0, &["g5.12xlarge", "g4dn.12xlarge"]),
    )
    .await;

    let mut serve = serve_config(false);
    serve.reconcile_interval_sec = 1;
    serve.catalog_refresh_interval_sec = 1;
    let app = TestApp::spawn_with(Arc::new(TestDb::new(Backend::Postgres).await), serve).await;
    let aws: Arc<dyn Provider> = Arc::new(provider(&moto.url, "test", "test"));
    let providers = Providers {
        static_provider: app::providers_from_env(&app.state, &app.serve)
            .unwrap()
            .static_provider,
        aws: Some(app::metered(&app.state, aws.clone())),
        alibaba: None,
        gcp: None,
    };
    let reconciler = app.start_reconciler_with("r1", providers);
    create_pool(
        &app,
        "asg",
        &json!({
            "provider": "aws", "region": "us-east-1", "group": name,
            "instance_types": types, "max_workers": 4, "spot_percentage": 100,
            "scale_down_cooldown_sec": 1, "stabilization_window_sec": 0,
            "idle_to_zero_after_sec": 2
        }),
    )
    .await;
    let group = GroupRef {
        pool: "asg".into(),
        region: "us-east-1".into(),
        group: name.clone(),
        spot_group: None,
    };

    queue(&app, "asg", 3, 0).await;
    let launched = wait_for_group(&*aws, &group, 3, &app).await;
    // The group's instances become the pool's workers.
    let start = Instant::now();
    while live_ids(&app, "asg").await != launched {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "workers never synced"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let c = aws.describe(&group).await.unwrap();
    let d = c.distribution.expect("mixed instances policy");
    assert_eq!(
        d.on_demand_percentage_above_base, 0,
        "all spot, as the policy says"
    );
    assert_eq!(
        d.instance_types, types,
        "overrides in the policy's priority order"
    );

    // Two jobs still run: the decision picks one worker, and exactly that one goes.
    queue(&app, "asg", 0, 2).await;
    let kept = wait_for_group(&*aws, &group, 2, &app).await;
    let gone: Vec<&String> = launched.iter().filter(|id| !kept.contains(id)).collect();
    assert_eq!(gone.len(), 1);
    let events: Value = app.get_json("/v1/pools/asg/events?limit=200").await["items"].clone();
    let terminations: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "reconcile_step" && e["detail"]["step"]["step"] == "terminate")
        .collect();
    assert_eq!(terminations.len(), 1, "{events:#}");
    assert_eq!(
        terminations[0]["detail"]["step"]["workers"],
        json!([gone[0]])
    );
    assert_eq!(terminations[0]["detail"]["outcome"], "ok");

    // No work: idle, then the group is emptied; nothing more is asked of it afterwards.
    queue(&app, "asg", 0, 0).await;
    wait_for_group(&*aws, &group, 0, &app).await;
    let start = Instant::now();
    while !live_ids(&app, "asg").await.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "stopped workers never synced"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let d = decide(&app, "asg").await;
    assert_eq!(
        (d["desired"].as_u64(), d["current"].as_u64()),
        (Some(0), Some(0))
    );
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains(
            r#"trainscaler_provider_calls_total{provider="aws",method="set_capacity",outcome="ok"}"#
        ),
        "{metrics}"
    );
    // The leader refreshes the pool's types from the group's region (every second here).
    let g4 = app.get_json("/v1/offerings/aws/g4dn.12xlarge").await;
    assert!(
        g4["price_history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["source"] == "aws-api" && p["market"] == "spot"),
        "spot prices from DescribeSpotPriceHistory: {g4:#}"
    );
    reconciler.stop().await;
}

/// The refresh the reconciler's leader runs: a type the bundled catalog lacks (g6f.large, a
/// slice of an L4) arrives with moto's facts, known types keep the catalog's, and spot quotes
/// land per zone, visible at once through `/v1/offerings`.
#[tokio::test]
async fn aws_refresh_fills_the_catalog_from_describe_instance_types() {
    let moto = moto::shared();
    let app = TestApp::spawn(Backend::Sqlite).await;
    let r = app.get("/v1/offerings/aws/g6f.large").await;
    assert_eq!(r.status(), 404, "the bundled catalog lacks g6f.large");
    let aws = provider(&moto.url, "test", "test");
    let catalog = app.state.catalog.get().expect("catalog loaded");
    let types = vec!["g6f.large".to_string(), "g4dn.12xlarge".to_string()];
    let report = trainscaler::provider::refresh::refresh_region(
        &app.state.store,
        &catalog,
        &aws,
        "us-east-1",
        &types,
        trainscaler::timefmt::now_ms(),
    )
    .await
    .expect("refresh");
    assert!(report.offerings_added >= 2, "{report:?}");
    app.state
        .catalog
        .refresh_after_write(&app.state.store)
        .await;

    let g6f = app.get_json("/v1/offerings/aws/g6f.large").await;
    assert_eq!(g6f["gpu"], "L4", "{g6f:#}");
    assert!(
        g6f["gpu_count"].as_f64().unwrap() < 1.0,
        "a fraction of one L4: {g6f:#}"
    );
    let zones: Vec<&Value> = g6f["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["region"] == "us-east-1" && l["zone"].is_string())
        .collect();
    assert!(!zones.is_empty(), "spot quotes per zone: {g6f:#}");
    assert!(
        zones
            .iter()
            .all(|l| l["spot_price"].as_f64().unwrap() > 0.0)
    );
    let g4 = app.get_json("/v1/offerings/aws/g4dn.12xlarge").await;
    assert_eq!(
        (g4["gpu"].as_str(), g4["gpu_count"].as_f64()),
        (Some("T4"), Some(4.0))
    );
}
