//! The cloud event parser (EventBridge spot interruption and rebalance events, Alibaba ECS
//! notifications, GCP preemptions in a Pub/Sub push envelope, the generic form) under
//! arbitrary and mutated bodies: it never panics, every
//! notice it accepts has a known kind, a worker or pool, and times no later than the clock
//! allows. Over HTTP, mutated bodies get a success or a 4xx problem, never a 5xx.

use proptest::prelude::*;
use serde_json::Value;
use trainscaler::ingest::cloud_events::{self, Parsed};
use trainscaler::timefmt::MAX_CLOCK_SKEW_MS;

use crate::common::{Backend, TestApp};
use crate::mutation::{apply, edits, post_each, samples};

/// 2026-12-03T12:00:00Z.
const NOW_MS: i64 = 1_796_300_000_000;

/// The documented EventBridge envelope of a spot interruption warning.
const SPOT_WARNING: &str = r#"{"version": "0", "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
 "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
 "account": "123456789012", "time": "2026-12-03T11:58:00Z", "region": "us-east-1",
 "resources": ["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],
 "detail": {"instance-id": "i-0b662ef9931388ba0", "instance-action": "terminate"}}"#;

const REBALANCE: &str = r#"[{"version": "0", "id": "5e2a9b1c", "detail-type": "EC2 Instance Rebalance Recommendation",
 "source": "aws.ec2", "account": "123456789012", "time": "2026-12-03T11:00:00Z", "region": "us-east-1",
 "resources": [], "detail": {"instance-id": "i-1"}}, {"detail-type": "EC2 Instance State-change Notification"}]"#;

const ALIBABA: &str = r#"{"product": "ECS", "resourceId": "acs:ecs:cn-hangzhou:1:instance/i-bp1",
 "level": "WARN", "instanceName": "w", "regionId": "cn-hangzhou", "name": "Instance:PreemptibleInstanceInterruption",
 "id": "2256A988-0B26-4E2B-820A-8A********E5", "eventTime": "20261203T185826.922+0800",
 "content": {"instanceId": "i-bp1", "action": "delete"}}"#;

const GENERIC: &str = r#"{"events": [
 {"kind": "interruption_warning", "worker": "vm-17", "pool": "gpu-t4", "at": "2026-12-03T10:00:00Z", "action_at": "2026-12-03T10:00:30Z", "id": "g-1"},
 {"kind": "capacity_error", "pool": "gpu-t4", "instance_type": "g5.12xlarge", "zone": "us-east-1b", "at": "2026-12-03T10:01:00Z", "message": "InsufficientInstanceCapacity"}]}"#;

/// A Pub/Sub push of the preemption audit log entry (`data` is its base64 JSON).
fn pubsub(entry: &Value) -> String {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(entry.to_string());
    serde_json::json!({"message": {"data": data, "messageId": "2070443601311540",
        "publishTime": "2026-12-03T11:59:00.802Z"},
        "subscription": "projects/p/subscriptions/preemptions"})
    .to_string()
}

fn preemption_entry() -> Value {
    serde_json::json!({"protoPayload": {"methodName": "compute.instances.preempted",
        "resourceName": "projects/p/zones/us-central1-f/instances/trainer-spot-1"},
        "resource": {"type": "gce_instance", "labels": {"zone": "us-central1-f"}},
        "insertId": "qnwer3e38dfz", "timestamp": "2026-12-03T11:59:00.325309Z"})
}

const KINDS: [&str; 4] = [
    cloud_events::INTERRUPTION_WARNING,
    cloud_events::REBALANCE_RECOMMENDATION,
    cloud_events::CAPACITY_ERROR,
    cloud_events::CHECKPOINT_SAVED,
];

fn check(parsed: &Parsed) -> Result<(), TestCaseError> {
    for (_, n) in &parsed.notices {
        prop_assert!(KINDS.contains(&n.kind), "{n:?}");
        prop_assert!(n.at_ms <= NOW_MS + MAX_CLOCK_SKEW_MS, "{n:?}");
        if n.kind == cloud_events::CAPACITY_ERROR {
            prop_assert!(n.pool.as_deref().is_some_and(|p| !p.is_empty()), "{n:?}");
            prop_assert!(n.instance_type.as_deref().is_some_and(|t| !t.is_empty()));
        } else {
            prop_assert!(n.worker.as_deref().is_some_and(|w| !w.is_empty()), "{n:?}");
        }
        if n.kind == cloud_events::INTERRUPTION_WARNING {
            prop_assert!(
                n.action_at_ms.is_some(),
                "a warning always says when: {n:?}"
            );
        }
    }
    Ok(())
}

fn parse_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(body) = serde_json::from_slice::<Value>(bytes)
        && let Ok(parsed) = cloud_events::parse(&body, NOW_MS)
    {
        check(&parsed)?;
    }
    Ok(())
}

fn fixture() -> impl Strategy<Value = String> {
    let pushed = pubsub(&preemption_entry());
    prop::sample::select(vec![
        SPOT_WARNING.to_string(),
        REBALANCE.to_string(),
        ALIBABA.to_string(),
        GENERIC.to_string(),
        pushed,
    ])
}

/// Any JSON value, a few levels deep, with the keys the parser looks for.
fn json() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "detail-type",
        "source",
        "detail",
        "instance-id",
        "time",
        "id",
        "product",
        "name",
        "content",
        "instanceId",
        "eventTime",
        "events",
        "kind",
        "worker",
        "pool",
        "at",
        "action_at",
        "instance_type",
        "zone",
        "message",
        "data",
        "subscription",
        "protoPayload",
        "methodName",
        "resourceName",
        "timestamp",
    ]);
    let text = prop::sample::select(vec![
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "aws.ec2",
        "ECS",
        "Instance:PreemptibleInstanceInterruption",
        "interruption_warning",
        "capacity_error",
        "checkpoint_saved",
        "2026-12-03T10:00:00Z",
        "9999-12-31T23:59:59Z",
        "0000-01-01T00:00:00Z",
        "20261203T101826.922+0800",
        "99991231T235959.999-2359",
        "",
        "i-1",
        "compute.instances.preempted",
        "projects/p/zones/us-central1-a/instances/t-1",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text.prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        parse_bytes(&bytes)?;
    }

    #[test]
    fn mutated_events_never_panic(text in fixture(), e in edits(5)) {
        parse_bytes(&apply(text.as_bytes(), &e))?;
    }

    #[test]
    fn arbitrary_log_entries_pushed_by_pubsub_never_panic(entry in json(), raw in prop::collection::vec(any::<u8>(), 0..200)) {
        parse_bytes(pubsub(&entry).as_bytes())?;
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(&raw);
        let body = serde_json::json!({"message": {"data": data}, "subscription": "s"});
        if let Ok(parsed) = cloud_events::parse(&body, NOW_MS) {
            check(&parsed)?;
        }
    }

    #[test]
    fn arbitrary_json_shapes_never_panic(body in json()) {
        if let Ok(parsed) = cloud_events::parse(&body, NOW_MS) {
            check(&parsed)?;
        }
    }
}

#[test]
fn the_fixtures_parse() {
    let pushed = pubsub(&preemption_entry());
    for text in [SPOT_WARNING, REBALANCE, ALIBABA, GENERIC, pushed.as_str()] {
        let body: Value = serde_json::from_str(text).expect("JSON");
        let parsed = cloud_events::parse(&body, NOW_MS).expect(text);
        assert!(!parsed.notices.is_empty(), "{text}");
    }
}

/// Mutated bodies over HTTP: a success or a 4xx problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_bodies_get_a_4xx_problem_never_a_5xx() {
    let app = TestApp::spawn_empty(Backend::Sqlite).await;
    let bodies = samples((fixture(), edits(3)), 40)
        .into_iter()
        .map(|(text, e)| apply(text.as_bytes(), &e));
    let json = [("content-type", "application/json")];
    let rejected = post_each(&app, "/v1/webhooks/events", &json, bodies).await;
    assert!(rejected > 0, "no mutated body was rejected");
}
