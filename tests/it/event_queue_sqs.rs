//! Spot events from an SQS queue, against moto's SQS: EventBridge-shaped messages as a rule
//! targeting the queue delivers them are recorded once each and deleted; a redelivered event
//! is a duplicate; poison messages are counted by reason and deleted, not retried.

use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use trainscaler::app;
use trainscaler::metrics::{QueueOutcomeLabels, QueuePoisonLabels};
use trainscaler::provider::aws::sign::sign_post;
use trainscaler::provider::aws::{AwsCredentials, AwsSettings, Secret};

use crate::common::{Backend, TestApp};
use crate::http_pools::{create_pool, decide, put, rfc3339_ago, samples, t4_policy};
use crate::moto;

const REGION: &str = "us-east-1";

fn settings(url: &str) -> AwsSettings {
    let mut s = AwsSettings::new(
        REGION,
        AwsCredentials {
            access_key_id: "testing".into(),
            secret_access_key: Secret::new("testing"),
            session_token: None,
        },
    );
    s.endpoint = Some(url.to_string());
    s
}

/// One SQS JSON-protocol call, signed, as the AWS CLI sends it (the test's own client for
/// setting up queues and sending messages).
async fn sqs(url: &str, action: &str, body: &Value) -> Value {
    let body = body.to_string();
    let target = format!("AmazonSQS.{action}");
    let host = url.trim_start_matches("http://").to_string();
    let endpoint = format!("{url}/");
    let signed = sign_post(
        settings(url).static_credentials().expect("static keys"),
        REGION,
        "sqs",
        &endpoint,
        &[
            ("host", &host),
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", &target),
        ],
        body.as_bytes(),
        SystemTime::now(),
    )
    .expect("signed");
    let mut request = reqwest::Client::new()
        .post(&endpoint)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-target", &target)
        .body(body);
    for (name, value) in signed {
        request = request.header(name, value);
    }
    let response = request.send().await.expect("moto answers SQS");
    let status = response.status();
    let text = response.text().await.expect("body");
    assert!(status.is_success(), "{action}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(json!({}))
}

/// The shape AWS documents for the warning an EventBridge rule forwards to its target.
fn spot_warning(id: &str, instance: &str) -> Value {
    json!({
        "version": "0",
        "id": id,
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": rfc3339_ago(5),
        "region": REGION,
        "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    })
}

async fn send(url: &str, queue: &str, body: &str) {
    sqs(
        url,
        "SendMessage",
        &json!({"QueueUrl": queue, "MessageBody": body}),
    )
    .await;
}

/// Messages on the queue, visible or in flight.
async fn left_on(url: &str, queue: &str) -> u64 {
    let a = sqs(
        url,
        "GetQueueAttributes",
        &json!({"QueueUrl": queue, "AttributeNames": ["All"]}),
    )
    .await;
    let n = |k: &str| {
        a["Attributes"][k]
            .as_str()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    };
    n("ApproximateNumberOfMessages") + n("ApproximateNumberOfMessagesNotVisible")
}

fn outcome(app: &TestApp, outcome: &'static str) -> u64 {
    app.state
        .metrics
        .event_queue_messages
        .get_or_create(&QueueOutcomeLabels { outcome })
        .get()
}

fn poison(app: &TestApp, reason: &'static str) -> u64 {
    app.state
        .metrics
        .event_queue_poison
        .get_or_create(&QueuePoisonLabels { reason })
        .get()
}

async fn wait_for(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sqs_spot_warnings_are_recorded_once_and_poison_is_deleted(backend: Backend) {
    let moto = moto::shared();
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
    let name = moto::unique("ts-events");
    let queue = sqs(&moto.url, "CreateQueue", &json!({"QueueName": name})).await["QueueUrl"]
        .as_str()
        .expect("QueueUrl")
        .to_string();

    let warning = spot_warning("7bf73129-1428-4cd3-a780-95db273d1602", "i-0bbb").to_string();
    send(&moto.url, &queue, &warning).await;
    // The same event again, as at-least-once delivery (or a second rule) may bring it.
    send(&moto.url, &queue, &warning).await;
    send(&moto.url, &queue, "this is not an event").await;
    let mut broken = spot_warning("b-1", "i-0aaa");
    broken["detail"] = json!({"instance-action": "terminate"});
    send(&moto.url, &queue, &broken.to_string()).await;
    // A warning about an instance no pool has: handled and deleted, not stored.
    send(
        &moto.url,
        &queue,
        &spot_warning("s-1", "i-0zzz").to_string(),
    )
    .await;

    let mut reconciler = app.start_reconciler("r1");
    let (client, queues) =
        app::event_queues(settings(&moto.url), &[queue.as_str()]).expect("queue URL");
    reconciler.poll_event_queues(&app.state, client, queues);

    wait_for("the queue to drain", async || {
        left_on(&moto.url, &queue).await == 0
    })
    .await;
    assert_eq!(
        (
            outcome(&app, "recorded"),
            outcome(&app, "duplicate"),
            outcome(&app, "unmatched"),
            outcome(&app, "poison")
        ),
        (1, 1, 1, 2)
    );
    assert_eq!(
        (poison(&app, "not_json"), poison(&app, "invalid_event")),
        (1, 1)
    );

    let events = app.get_json("/v1/pools/spot/events").await;
    let warnings: Vec<&Value> = events["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|e| e["kind"] == "interruption_warning")
        .collect();
    assert_eq!(warnings.len(), 1, "{events}");
    let d = decide(&app, "spot").await;
    let replace = d["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|a| a["action"] == "replace")
        .unwrap_or_else(|| panic!("a replacement for the warned worker: {d}"));
    assert_eq!(replace["worker"], "i-0bbb");

    // Poison is not looping: a new good message is still handled, and the poison counts stay.
    send(
        &moto.url,
        &queue,
        &json!({"Type": "Notification", "MessageId": "sns-1",
            "Message": spot_warning("a-1", "i-0aaa").to_string()})
        .to_string(),
    )
    .await;
    wait_for("the SNS-wrapped warning", async || {
        outcome(&app, "recorded") == 2 && left_on(&moto.url, &queue).await == 0
    })
    .await;
    assert_eq!(
        (poison(&app, "not_json"), poison(&app, "invalid_event")),
        (1, 1)
    );
    reconciler.stop().await;
}

crate::on_both_backends!(sqs_spot_warnings_are_recorded_once_and_poison_is_deleted);
