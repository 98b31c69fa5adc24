//! The running service driving a GCP pool's two managed instance groups: the pool follows its
//! queue from 0 to 3 (one standard instance and two Spot, the default 80% spot mix) and back
//! to 0, scale-down deletes the instance the decision chose with `deleteInstances`, and the
//! leader's catalog refresh prices the pool's type from the Billing catalog.
//!
//! Compute Engine is a wiremock responder that keeps the two groups' state and answers as the
//! API documents: `resize` sets the target size and the group makes or removes instances,
//! `deleteInstances` removes the named ones and lowers the target size by as many, and every
//! change answers with an `Operation` that `wait` reports `DONE`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::path_regex;
use wiremock::{Mock, Request, Respond, ResponseTemplate};

use trainscaler::app;
use trainscaler::provider::Provider;
use trainscaler::provider::registry::Providers;

use crate::common::{Backend, TestApp, TestDb, serve_config};
use crate::gcp_mock::{Google, PROJECT, SPOT, STANDARD, TOKEN, ZONE, json_fixture, mount_skus};
use crate::http_pools::{create_pool, decide};
use crate::on_both_backends;
use crate::reconcile::queue;

const BASE: &str = "https://www.googleapis.com/compute/v1";

#[derive(Debug)]
struct Group {
    igm: &'static str,
    template: &'static str,
    name: &'static str,
    target: u32,
    instances: Vec<String>,
    made: u32,
}

#[derive(Debug, Default)]
struct State {
    groups: BTreeMap<String, Group>,
    operations: u32,
    /// `resize NAME N` and `delete NAME [instances]`, in order.
    log: Vec<String>,
}

#[derive(Clone, Default)]
struct Compute(Arc<Mutex<State>>);

impl Compute {
    fn new() -> Self {
        let c = Compute::default();
        {
            let mut s = c.0.lock().unwrap();
            for (path, igm, template, name) in [
                (STANDARD, "igm_standard", "trainer-t4", "trainers"),
                (SPOT, "igm_spot", "trainer-t4-spot", "trainers-spot"),
            ] {
                s.groups.insert(
                    path.to_string(),
                    Group {
                        igm,
                        template,
                        name,
                        target: 0,
                        instances: vec![],
                        made: 0,
                    },
                );
            }
        }
        c
    }

    fn sizes(&self) -> (u32, u32, usize) {
        let s = self.0.lock().unwrap();
        let (std, spot) = (&s.groups[STANDARD], &s.groups[SPOT]);
        (
            std.target,
            spot.target,
            std.instances.len() + spot.instances.len(),
        )
    }

    fn log(&self) -> Vec<String> {
        self.0.lock().unwrap().log.clone()
    }
}

fn operation(s: &mut State, kind: &str, target: &str) -> ResponseTemplate {
    s.operations += 1;
    ResponseTemplate::new(200).set_body_json(json!({
        "kind": "compute#operation",
        "id": format!("{}", 7_000_000 + s.operations),
        "name": format!("operation-{}", s.operations),
        "zone": format!("{BASE}/projects/{PROJECT}/zones/{ZONE}"),
        "operationType": kind,
        "targetLink": format!("{BASE}/{target}"),
        "status": "RUNNING",
        "progress": 0,
        "selfLink": format!("{BASE}/projects/{PROJECT}/zones/{ZONE}/operations/operation-{}", s.operations),
    }))
}

impl Respond for Compute {
    fn respond(&self, r: &Request) -> ResponseTemplate {
        let auth = r.headers.get("authorization").and_then(|v| v.to_str().ok());
        if auth != Some(&format!("Bearer {TOKEN}")) {
            return ResponseTemplate::new(401).set_body_json(json_fixture("error_unauthenticated"));
        }
        let path = r.url.path().trim_start_matches("/compute/v1/").to_string();
        let mut s = self.0.lock().unwrap();
        if let Some(op) = path.strip_suffix("/wait") {
            let name = op.rsplit('/').next().unwrap_or("");
            return ResponseTemplate::new(200).set_body_json(json!({
                "kind": "compute#operation", "name": name, "status": "DONE", "progress": 100,
                "zone": format!("{BASE}/projects/{PROJECT}/zones/{ZONE}")
            }));
        }
        if let Some(t) = path.strip_prefix(&format!("projects/{PROJECT}/global/instanceTemplates/"))
        {
            let file = if t == "trainer-t4" {
                "template_t4"
            } else {
                "template_t4_spot"
            };
            return ResponseTemplate::new(200).set_body_json(json_fixture(file));
        }
        let (group_path, method) = match path.rsplit_once('/') {
            Some((g, m)) if s.groups.contains_key(g) => (g.to_string(), m.to_string()),
            _ if s.groups.contains_key(&path) => (path.clone(), String::new()),
            _ => return ResponseTemplate::new(404).set_body_json(json_fixture("error_not_found")),
        };
        match (r.method.as_str(), method.as_str()) {
            ("GET", "") => {
                let g = &s.groups[&group_path];
                let mut igm = json_fixture(g.igm);
                igm["targetSize"] = json!(g.target);
                ResponseTemplate::new(200).set_body_json(igm)
            }
            ("POST", "listManagedInstances") => {
                let g = &s.groups[&group_path];
                let managed: Vec<Value> = g
                    .instances
                    .iter()
                    .map(|name| json!({
                        "instance": format!("{BASE}/projects/{PROJECT}/zones/{ZONE}/instances/{name}"),
                        "name": name,
                        "id": "4520873645298176100",
                        "instanceStatus": "RUNNING",
                        "currentAction": "NONE",
                        "version": {"instanceTemplate": format!("{BASE}/projects/{PROJECT}/global/instanceTemplates/{}", g.template)}
                    }))
                    .collect();
                ResponseTemplate::new(200).set_body_json(json!({"managedInstances": managed}))
            }
            ("POST", "resize") => {
                let Some(size) = r
                    .url
                    .query_pairs()
                    .find(|(k, _)| k == "size")
                    .and_then(|(_, v)| v.parse::<u32>().ok())
                else {
                    return ResponseTemplate::new(400).set_body_json(json!({"error": {"code": 400, "message": "Required parameter: size", "errors": [{"reason": "required"}]}}));
                };
                let g = s.groups.get_mut(&group_path).unwrap();
                g.target = size;
                while g.instances.len() < size as usize {
                    g.made += 1;
                    g.instances.push(format!("{}-{:04x}", g.name, g.made));
                }
                g.instances.truncate(size as usize);
                let entry = format!("resize {} {size}", g.name);
                s.log.push(entry);
                operation(&mut s, "compute.instanceGroupManagers.resize", &group_path)
            }
            ("POST", "deleteInstances") => {
                let body: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                let names: Vec<String> = body["instances"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str())
                    .map(|r| r.rsplit('/').next().unwrap_or(r).to_string())
                    .collect();
                let g = s.groups.get_mut(&group_path).unwrap();
                let before = g.instances.len();
                g.instances.retain(|i| !names.contains(i));
                g.target -= (before - g.instances.len()) as u32;
                let entry = format!("delete {} {names:?}", g.name);
                s.log.push(entry);
                operation(&mut s, "compute.instanceGroupManagers.deleteInstances", &group_path)
            }
            _ => ResponseTemplate::new(400).set_body_json(json!({"error": {"code": 400, "message": "Invalid request", "errors": [{"reason": "invalid"}]}})),
        }
    }
}

async fn wait_for(compute: &Compute, app: &TestApp, want: (u32, u32, usize)) {
    let start = Instant::now();
    while compute.sizes() != want {
        if start.elapsed() > Duration::from_secs(20) {
            let events = app.get_json("/v1/pools/t4/events?limit=100").await;
            panic!(
                "groups are {:?}, not {want:?}; log {:?}; events {events:#}",
                compute.sizes(),
                compute.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn live_workers(app: &TestApp) -> Vec<(String, String)> {
    let mut w: Vec<(String, String)> = app.get_json("/v1/pools/t4/workers").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["id"].as_str().unwrap().to_string(),
                w["market"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    w.sort();
    w
}

async fn wait_for_workers(app: &TestApp, n: usize) -> Vec<(String, String)> {
    let start = Instant::now();
    loop {
        let w = live_workers(app).await;
        if w.len() == n {
            return w;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "workers never synced: {w:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn gcp_pool_follows_the_queue_to_three_across_both_migs_and_back_to_zero(backend: Backend) {
    let google = Google::start().await;
    google.mount_token(3599, 1).await;
    mount_skus(&google).await;
    let compute = Compute::new();
    Mock::given(path_regex("^/compute/v1/"))
        .respond_with(compute.clone())
        .mount(&google.server)
        .await;

    let mut serve = serve_config(false);
    serve.reconcile_interval_sec = 1;
    serve.catalog_refresh_interval_sec = 1;
    let app = TestApp::spawn_with(Arc::new(TestDb::new(backend).await), serve).await;
    let gcp: Arc<dyn Provider> = Arc::new(google.provider());
    let providers = Providers {
        static_provider: app::providers_from_env(&app.state, &app.serve)
            .unwrap()
            .static_provider,
        aws: None,
        alibaba: None,
        gcp: Some(app::metered(&app.state, gcp)),
    };
    let reconciler = app.start_reconciler_with("r1", providers);
    create_pool(
        &app,
        "t4",
        &json!({
            "provider": "gcp", "region": "us-central1", "group": STANDARD, "spot_group": SPOT,
            "instance_types": ["n1-highmem-4+T4x1"], "max_workers": 4,
            "scale_down_cooldown_sec": 1, "stabilization_window_sec": 0, "idle_to_zero_after_sec": 2
        }),
    )
    .await;

    // Three waiting jobs: 20% on-demand rounded up is one standard instance, two Spot.
    queue(&app, "t4", 3, 0).await;
    wait_for(&compute, &app, (1, 2, 3)).await;
    let launched = wait_for_workers(&app, 3).await;
    let markets: Vec<&str> = launched.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(
        markets.iter().filter(|m| **m == "spot").count(),
        2,
        "{launched:?}"
    );
    assert_eq!(
        compute.log(),
        ["resize trainers 1", "resize trainers-spot 2"]
    );

    // Two jobs still run: one worker goes, a Spot one (that market is over its share of 2).
    queue(&app, "t4", 0, 2).await;
    wait_for(&compute, &app, (1, 1, 2)).await;
    let kept = wait_for_workers(&app, 2).await;
    let gone: Vec<&(String, String)> = launched.iter().filter(|w| !kept.contains(w)).collect();
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].1, "spot");
    assert_eq!(
        compute.log()[2],
        format!("delete trainers-spot [{:?}]", gone[0].0)
    );
    let events: Value = app.get_json("/v1/pools/t4/events?limit=200").await["items"].clone();
    let terminations: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "reconcile_step" && e["detail"]["step"]["step"] == "terminate")
        .collect();
    assert_eq!(terminations.len(), 1, "{events:#}");
    assert_eq!(terminations[0]["detail"]["outcome"], "ok");
    assert_eq!(
        terminations[0]["detail"]["step"]["workers"],
        json!([gone[0].0])
    );

    // No work: idle, then both groups are emptied with deleteInstances.
    queue(&app, "t4", 0, 0).await;
    wait_for(&compute, &app, (0, 0, 0)).await;
    wait_for_workers(&app, 0).await;
    let d = decide(&app, "t4").await;
    assert_eq!(
        (d["desired"].as_u64(), d["current"].as_u64()),
        (Some(0), Some(0))
    );
    let log = compute.log();
    assert_eq!(log.len(), 5, "nothing else was changed: {log:?}");
    assert!(log[3..].iter().all(|l| l.starts_with("delete ")), "{log:?}");

    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains(
            r#"trainscaler_provider_calls_total{provider="gcp",method="set_capacity",outcome="ok"}"#
        ),
        "{metrics}"
    );
    // The leader priced the pool's type from the Billing catalog.
    let o = app.get_json("/v1/offerings/gcp/n1-highmem-4+T4x1").await;
    assert!(
        o["price_history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["source"] == "gcp-api"
                && p["market"] == "spot"
                && p["price"] == json!(0.195902)),
        "{o:#}"
    );
    reconciler.stop().await;
}

/// A Pub/Sub push of `compute.instances.preempted` for a Spot instance of a pool bound to
/// its MIGs: the replacement launches (on-demand: the preempted type is out of spot for a
/// while) while the preempted instance stays counted, and once its job saves a checkpoint
/// that instance is deleted from its MIG.
async fn a_preempted_spot_instance_of_a_bound_pool_is_replaced_then_deleted(backend: Backend) {
    use crate::gcp_pools::{AUDIENCE, PUSHER, claims, preemption, push, push_token};

    let google = Google::start().await;
    google.mount_token(3599, 1).await;
    mount_skus(&google).await;
    Mock::given(wiremock::matchers::path("/oauth2/v3/certs"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("cache-control", "public, max-age=19204")
                .set_body_string(crate::gcp_mock::fixture("google_certs.jwks.json")),
        )
        .mount(&google.server)
        .await;
    let compute = Compute::new();
    Mock::given(path_regex("^/compute/v1/"))
        .respond_with(compute.clone())
        .mount(&google.server)
        .await;

    let mut serve = serve_config(false);
    serve.reconcile_interval_sec = 1;
    serve.catalog_refresh_interval_sec = 1;
    serve.pubsub_audience = Some(AUDIENCE.into());
    serve.pubsub_service_account = Some(PUSHER.into());
    serve.pubsub_jwks_url = format!("{}/oauth2/v3/certs", google.server.uri());
    let app = TestApp::spawn_with(Arc::new(TestDb::new(backend).await), serve).await;
    let gcp: Arc<dyn Provider> = Arc::new(google.provider());
    let providers = Providers {
        static_provider: app::providers_from_env(&app.state, &app.serve)
            .unwrap()
            .static_provider,
        aws: None,
        alibaba: None,
        gcp: Some(app::metered(&app.state, gcp)),
    };
    let reconciler = app.start_reconciler_with("r1", providers);
    create_pool(
        &app,
        "t4",
        &json!({
            "provider": "gcp", "region": "us-central1", "group": STANDARD, "spot_group": SPOT,
            "instance_types": ["n1-highmem-4+T4x1"], "max_workers": 4,
            "max_interruption_rate": 1.0, "stabilization_window_sec": 0
        }),
    )
    .await;
    queue(&app, "t4", 0, 3).await;
    wait_for(&compute, &app, (1, 2, 3)).await;
    let launched = wait_for_workers(&app, 3).await;
    let doomed = launched
        .iter()
        .find(|(_, m)| m == "spot")
        .map(|(id, _)| id.clone())
        .expect("a spot worker");

    let r = push(
        &app,
        &push_token("google_signer.pem", claims()),
        &preemption(&doomed, "systemevent-1800000000333-7b3c"),
    )
    .await;
    assert_eq!(r.status(), 200);
    let out: Value = r.json().await.unwrap();
    assert_eq!(out["recorded"], 1, "{out}");

    // The preempted type is out of spot for a while, so spot falls back to on-demand: the
    // standard MIG grows by two (the replacement and the other spot worker's), then the
    // other spot instance is deleted; the preempted one stays counted until its checkpoint.
    let other = launched
        .iter()
        .find(|(id, m)| m == "spot" && *id != doomed)
        .map(|(id, _)| id.clone())
        .expect("a second spot worker");
    wait_for(&compute, &app, (3, 1, 4)).await;
    assert_eq!(
        compute.log(),
        [
            "resize trainers 1".to_string(),
            "resize trainers-spot 2".to_string(),
            "resize trainers 3".to_string(),
            format!("delete trainers-spot [{other:?}]"),
        ]
    );
    let events = app.get_json("/v1/pools/t4/events?limit=200").await;
    let replacement = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "replacement")
        .unwrap_or_else(|| panic!("{events:#}"))
        .clone();
    assert_eq!(
        (
            replacement["worker"].as_str(),
            replacement["detail"]["market"].as_str()
        ),
        (Some(doomed.as_str()), Some("on_demand")),
        "{replacement:#}"
    );

    let r = app
        .post_json(
            "/v1/webhooks/events",
            &json!({"events": [{"kind": "checkpoint_saved", "pool": "t4", "worker": doomed,
                                "at": crate::http_pools::rfc3339_ago(0)}]}),
        )
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    wait_for(&compute, &app, (3, 0, 3)).await;
    assert_eq!(
        compute.log().last().cloned(),
        Some(format!("delete trainers-spot [{doomed:?}]"))
    );
    let kept = wait_for_workers(&app, 3).await;
    assert!(kept.iter().all(|(_, m)| m == "on_demand"), "{kept:?}");
    // The leader's price refresh runs on its own schedule, after the other adapters'; the
    // preemption can be handled before it comes round, so wait for it rather than race it.
    let start = Instant::now();
    loop {
        let requests = google.server.received_requests().await.unwrap_or_default();
        let pages = requests
            .iter()
            .filter(|r| r.url.path().ends_with("/skus"))
            .count();
        if pages >= 2 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the leader never refreshed GCP prices ({pages} SKU pages read)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    reconciler.stop().await;
}

on_both_backends!(
    gcp_pool_follows_the_queue_to_three_across_both_migs_and_back_to_zero,
    a_preempted_spot_instance_of_a_bound_pool_is_replaced_then_deleted,
);
