//! Workers as the metrics name them: an AWS-bound pool in moto learns each instance's
//! private DNS name from EC2, and dcgm-exporter series whose `Hostname` is that name (as on
//! EKS, where it is the node name) reach the pool's decision without any relabelling.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use serde_json::{Value, json};
use trainscaler::app;
use trainscaler::ingest::remote_write::{Label, Sample, TimeSeries, WriteRequest};
use trainscaler::provider::registry::Providers;
use trainscaler::provider::{GroupRef, Provider};

use crate::aws_moto::{create_group, distribution, provider};
use crate::common::{Backend, TestApp, TestDb, serve_config};
use crate::http_pools::create_pool;
use crate::moto;

/// A remote-write body with one dcgm-exporter utilisation series per GPU of `hostname`.
fn dcgm_body(pool: &str, hostname: &str, percents: &[f64]) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let label = |name: &str, value: &str| Label {
        name: name.into(),
        value: value.into(),
    };
    let timeseries = percents
        .iter()
        .enumerate()
        .map(|(gpu, &value)| TimeSeries {
            labels: vec![
                label("__name__", "DCGM_FI_DEV_GPU_UTIL"),
                label("Hostname", hostname),
                label("gpu", &gpu.to_string()),
                label("instance", "10.0.0.200:9400"),
                label("pool", pool),
            ],
            samples: vec![Sample {
                value,
                timestamp: now - 1_000,
            }],
        })
        .collect();
    let raw = WriteRequest { timeseries }.encode_to_vec();
    snap::raw::Encoder::new().compress_vec(&raw).unwrap()
}

async fn remote_write(app: &TestApp, body: Vec<u8>) -> Value {
    let r = app
        .client
        .post(app.url("/v1/webhooks/prometheus"))
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "snappy")
        .header("x-prometheus-remote-write-version", "0.1.0")
        .body(body)
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    r.json().await.unwrap()
}

/// Polls the pool's live workers until `done` holds for them; panics after `secs`.
async fn workers_until(app: &TestApp, pool: &str, secs: u64, done: impl Fn(&[Value]) -> bool) {
    let start = Instant::now();
    loop {
        let list = app.get_json(&format!("/v1/pools/{pool}/workers")).await;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if done(&items) {
            return;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let events = app
                .get_json(&format!("/v1/pools/{pool}/events?limit=100"))
                .await;
            panic!("workers never got there: {list:#}; events: {events:#}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn dcgm_hostname_as_private_dns_name_reaches_an_aws_pools_decision() {
    let moto = moto::shared();
    let name = moto::unique("alias");
    let setup = provider(&moto.url, "test", "test");
    create_group(&setup, &name, 4, &distribution(0, 0, &["g5.xlarge"])).await;

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
    let _reconciler = app.start_reconciler_with("r1", providers);
    create_pool(
        &app,
        "gpu",
        &json!({
            "provider": "aws", "region": "us-east-1", "group": name,
            "instance_types": ["g5.xlarge"], "gpus_per_worker": 1,
            "mode": "utilization", "target_utilization": 0.5,
            "min_workers": 1, "max_workers": 4, "spot_percentage": 100,
            "scale_up_cooldown_sec": 0
        }),
    )
    .await;

    // min_workers launches one instance; once synced it carries EC2's names for it.
    workers_until(&app, "gpu", 30, |w| {
        w.len() == 1 && w[0]["aliases"].as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    let list = app.get_json("/v1/pools/gpu/workers").await;
    let worker = &list["items"][0];
    let id = worker["id"].as_str().unwrap().to_string();
    let aliases: Vec<&str> = worker["aliases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let dns = aliases
        .iter()
        .find(|a| a.ends_with(".internal"))
        .unwrap_or_else(|| panic!("no private DNS name among {aliases:?}"))
        .to_string();
    assert!(
        aliases
            .iter()
            .any(|a| a.parse::<std::net::Ipv4Addr>().is_ok()),
        "the private IP is an alias too: {aliases:?}"
    );
    assert!(worker["gpu_utilization"].is_null(), "{worker}");

    // dcgm-exporter names the worker by its node name, the private DNS name: both GPUs busy.
    let out = remote_write(&app, dcgm_body("gpu", &dns, &[100.0, 100.0])).await;
    assert_eq!(out["accepted"], 1, "{out}");

    // The sample is the instance's own, so the decision sees a worker at 1.0 against a
    // target of 0.5 and the group grows to two.
    workers_until(&app, "gpu", 30, |w| {
        w.iter()
            .any(|x| x["id"] == id.as_str() && x["gpu_utilization"] == 1.0)
    })
    .await;
    let group = GroupRef {
        pool: "gpu".into(),
        region: "us-east-1".into(),
        group: name.clone(),
        spot_group: None,
    };
    let start = Instant::now();
    loop {
        let c = aws.describe(&group).await.expect("describe");
        if c.desired >= 2 {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let events = app.get_json("/v1/pools/gpu/events?limit=100").await;
            panic!("the group stayed at {}: {events:#}", c.desired);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let events = app.get_json("/v1/pools/gpu/events?limit=100").await;
    assert!(
        events.to_string().contains("utilization"),
        "the scale-up is the utilisation rule's: {events:#}"
    );
}
