//! GCP pools over HTTP: the MIG paths and the Spot MIG rule of their policies, and preemption
//! notices pushed by a Pub/Sub subscription with Google's OIDC token, verified against keys a
//! mock serves as Google publishes them (a JWKS).

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD};
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{Backend, TestApp, TestDb, assert_problem, serve_config};
use crate::gcp_mock::{SPOT, STANDARD, fixture};
use crate::http_pools::{create_pool, decide, put, rfc3339_ago, samples};
use crate::on_both_backends;

pub const AUDIENCE: &str = "https://trainscaler.example.com/v1/webhooks/events";
pub const PUSHER: &str = "pubsub-push@trainscaler-test.iam.gserviceaccount.com";
const GOOGLE_KID: &str = "6f7254101f56e41cf35c9926de84a2d552b4c6f1";

fn gcp_policy() -> Value {
    json!({
        "provider": "gcp",
        "region": "us-central1",
        "group": STANDARD,
        "spot_group": SPOT,
        "instance_types": ["n1-highmem-4+T4x1"],
        "max_workers": 4
    })
}

async fn gcp_policies_name_their_migs_and_a_spot_mig_exactly_when_spot_is_allowed(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "t4", &gcp_policy()).await;
    let p = app.get_json("/v1/pools/t4").await["policy"].clone();
    assert_eq!(
        (p["group"].as_str(), p["spot_group"].as_str()),
        (Some(STANDARD), Some(SPOT))
    );
    assert_eq!(
        p["zones"],
        json!(["us-central1-a"]),
        "a zonal MIG's zone becomes the pool's"
    );
    // On-demand only: one MIG, no spot_group.
    let mut od = gcp_policy();
    od["spot_group"] = Value::Null;
    od["instance_types"] =
        json!([{"instance_type": "n1-highmem-4+T4x1", "markets": ["on_demand"]}]);
    create_pool(&app, "t4-od", &od).await;

    let with = |k: &str, v: Value| {
        let mut p = gcp_policy();
        p[k] = v;
        p
    };
    let mut od_with_spot_mig = od.clone();
    od_with_spot_mig["spot_group"] = json!(SPOT);
    let cases: Vec<(Value, &str)> = vec![
        (od_with_spot_mig, "spot_group"),
        (with("spot_group", Value::Null), "spot_group"),
        (with("group", json!("trainers")), "group"),
        (
            with(
                "group",
                json!(
                    "projects/trainscaler-test/zones/europe-west4-a/instanceGroupManagers/trainers"
                ),
            ),
            "group",
        ),
        (with("spot_group", json!(STANDARD)), "spot_group"),
        (with("zones", json!(["us-central1-b"])), "group"),
        (with("group", Value::Null), "spot_group"),
        (
            json!({"provider": "aws", "region": "us-east-1", "group": "asg", "spot_group": "asg-spot",
                   "instance_types": ["g4dn.12xlarge"], "max_workers": 2}),
            "spot_group",
        ),
    ];
    for (i, (policy, field)) in cases.into_iter().enumerate() {
        let r = put(&app, &format!("/v1/pools/bad-{i}"), &policy).await;
        assert_problem(r, 422, field).await;
    }
}

/// A token Google would send for the push subscription, signed with `key`.
pub fn push_token(key: &str, claims: Value) -> String {
    let pem = fixture(key);
    let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).unwrap();
    let pair = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).unwrap();
    let header = json!({"alg": "RS256", "kid": GOOGLE_KID, "typ": "JWT"});
    let part = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap());
    let signed = format!("{}.{}", part(&header), part(&claims));
    let mut sig = vec![0; pair.public().modulus_len()];
    pair.sign(
        &RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut sig,
    )
    .unwrap();
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig))
}

pub fn claims() -> Value {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    json!({
        "aud": AUDIENCE,
        "azp": "105736264463038321964",
        "email": PUSHER,
        "email_verified": true,
        "exp": now + 3600,
        "iat": now,
        "iss": "https://accounts.google.com",
        "sub": "105736264463038321964"
    })
}

/// The preemption audit log entry of `instance`, in a Pub/Sub push envelope.
pub fn preemption(instance: &str, operation: &str) -> Value {
    let entry = json!({
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "status": {"message": "Instance was preempted."},
            "authenticationInfo": {"principalEmail": "system@google.com"},
            "serviceName": "compute.googleapis.com",
            "methodName": "compute.instances.preempted",
            "resourceName": format!("projects/trainscaler-test/zones/us-central1-a/instances/{instance}"),
            "request": {"@type": "type.googleapis.com/compute.instances.preempted"}
        },
        "insertId": format!("ins-{operation}"),
        "resource": {"type": "gce_instance", "labels": {
            "instance_id": "4520873645298176002", "project_id": "trainscaler-test", "zone": "us-central1-a"}},
        "timestamp": rfc3339_ago(3),
        "severity": "INFO",
        "logName": "projects/trainscaler-test/logs/cloudaudit.googleapis.com%2Fsystem_event",
        "operation": {"id": operation, "producer": "compute.instances.preempted", "first": true, "last": true},
        "receiveTimestamp": rfc3339_ago(2)
    });
    json!({
        "message": {
            "attributes": {"logging.googleapis.com/timestamp": rfc3339_ago(3)},
            "data": BASE64.encode(serde_json::to_vec(&entry).unwrap()),
            "messageId": "2070443601311540",
            "publishTime": rfc3339_ago(2)
        },
        "subscription": "projects/trainscaler-test/subscriptions/trainscaler-preemptions"
    })
}

pub async fn push(app: &TestApp, token: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(app.url("/v1/webhooks/events"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("POST")
}

async fn a_pubsub_push_of_a_preemption_warns_the_worker_and_gets_a_replacement(backend: Backend) {
    let google = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/oauth2/v3/certs"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header(
                    "cache-control",
                    "public, max-age=19204, must-revalidate, no-transform",
                )
                .set_body_string(fixture("google_certs.jwks.json")),
        )
        // Fetched once and cached, however many pushes arrive.
        .expect(1)
        .mount(&google)
        .await;
    let mut serve = serve_config(false);
    serve.pubsub_audience = Some(AUDIENCE.into());
    serve.pubsub_service_account = Some(PUSHER.into());
    serve.pubsub_jwks_url = format!("{}/oauth2/v3/certs", google.uri());
    let app = TestApp::spawn_with(Arc::new(TestDb::new(backend).await), serve).await;

    let mut policy = gcp_policy();
    // Decided for, not actuated; the next spot type is an L4 host.
    policy["group"] = Value::Null;
    policy["spot_group"] = Value::Null;
    policy["instance_types"] = json!(["n1-highmem-4+T4x1", "g2-standard-4"]);
    policy["max_interruption_rate"] = json!(1.0);
    create_pool(&app, "t4", &policy).await;
    for id in ["trainers-spot-x7k2", "trainers-spot-b41q"] {
        let r = put(
            &app,
            &format!("/v1/pools/t4/workers/{id}"),
            &json!({"instance_type": "n1-highmem-4+T4x1", "market": "spot", "zone": "us-central1-a"}),
        )
        .await;
        assert_eq!(r.status(), 201);
    }
    samples(
        &app,
        json!([{"pool": "t4", "name": "running_jobs", "value": 2, "at": rfc3339_ago(1)}]),
    )
    .await;
    assert_eq!(decide(&app, "t4").await["desired"], 2);

    let body = preemption("trainers-spot-x7k2", "systemevent-1800000000116-5f1a");
    let good = push_token("google_signer.pem", claims());
    let r = push(&app, &good, &body).await;
    assert_eq!(r.status(), 200);
    let out: Value = r.json().await.unwrap();
    assert_eq!(
        (out["recorded"].as_u64(), out["duplicates"].as_u64()),
        (Some(1), Some(0)),
        "{out}"
    );
    // Pub/Sub delivers at least once: the same message again is a duplicate.
    let out: Value = push(&app, &good, &body).await.json().await.unwrap();
    assert_eq!(out["duplicates"], 1, "{out}");

    let d = decide(&app, "t4").await;
    let actions = d["actions"].as_array().unwrap();
    let checkpoint = actions
        .iter()
        .find(|a| a["action"] == "checkpoint")
        .expect("checkpoint");
    assert_eq!(checkpoint["worker"], "trainers-spot-x7k2");
    let replace = actions
        .iter()
        .find(|a| a["action"] == "replace")
        .expect("replace");
    assert_eq!(
        (
            replace["instance_type"].as_str(),
            replace["market"].as_str()
        ),
        (Some("g2-standard-4"), Some("spot")),
        "the next spot type by priority, as for an AWS warning: {d}"
    );
    let events = app.get_json("/v1/pools/t4/events").await;
    let warning = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "interruption_warning")
        .expect("the warning is in the pool's log")
        .clone();
    assert_eq!(warning["zone"], "us-central1-a");
    assert_eq!(warning["detail"]["source"], "pubsub");

    // Every way a token can be wrong is a 401, and nothing is recorded.
    let other = preemption("trainers-spot-b41q", "systemevent-1800000000222-6a2b");
    let mut wrong_audience = claims();
    wrong_audience["aud"] = json!("https://elsewhere.example.com/push");
    let mut expired = claims();
    expired["exp"] = json!(time::OffsetDateTime::now_utc().unix_timestamp() - 600);
    let mut stranger = claims();
    stranger["email"] = json!("someone@gmail.com");
    for (why, token) in [
        (
            "wrong audience",
            push_token("google_signer.pem", wrong_audience),
        ),
        ("expired", push_token("google_signer.pem", expired)),
        ("bad signature", push_token("impostor.pem", claims())),
        ("another account", push_token("google_signer.pem", stranger)),
    ] {
        let r = push(&app, &token, &other).await;
        assert_eq!(r.status(), 401, "{why}");
        let problem: Value = r.json().await.unwrap();
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("Pub/Sub push token"),
            "{why}: {problem}"
        );
    }
    // A push token opens only the events route.
    let r = reqwest::Client::new()
        .post(app.url("/v1/webhooks/metrics"))
        .bearer_auth(&good)
        .json(&json!({"samples": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let d = decide(&app, "t4").await;
    let checkpoints = d["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "checkpoint")
        .count();
    assert_eq!(
        checkpoints, 1,
        "none of the refused pushes warned a worker: {d}"
    );
    // An API key may post the same envelope (a relay, a test).
    let r = app.post_json("/v1/webhooks/events", &other).await;
    assert_eq!(r.json::<Value>().await.unwrap()["recorded"], 1);
}

on_both_backends!(
    gcp_policies_name_their_migs_and_a_spot_mig_exactly_when_spot_is_allowed,
    a_pubsub_push_of_a_preemption_warns_the_worker_and_gets_a_replacement,
);
