//! GCP preemption notices as Cloud Logging delivers them: a log sink routes the
//! `compute.instances.preempted` system-event audit log entry to a Pub/Sub topic, and a push
//! subscription POSTs each message to `/v1/webhooks/events` in Pub/Sub's push envelope:
//!
//! ```json
//! {"message": {"data": "<base64 LogEntry JSON>", "messageId": "2070443601311540",
//!              "publishTime": "2027-01-15T07:59:00.802Z", "attributes": {...}},
//!  "subscription": "projects/my-project/subscriptions/trainscaler-preemptions"}
//! ```
//!
//! A Spot VM gets about 30 seconds between the preemption and its shutdown, so the notice is an
//! interruption warning whose deadline is the entry's time plus 30 seconds. Entries of other
//! methods (a sink's filter may let more through) are ignored, not refused: Pub/Sub redelivers
//! anything not acknowledged with a 2xx.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::cloud_events::{INTERRUPTION_WARNING, NoticeError, Parsed};
use crate::store::CloudNotice;
use crate::timefmt::{check_not_future, parse_rfc3339_ms};

/// Compute Engine stops a preempted Spot VM about 30 seconds after the notice.
pub const GCP_PREEMPTION_NOTICE_MS: i64 = 30_000;
pub const PREEMPTED_METHOD: &str = "compute.instances.preempted";

/// Whether `body` is a Pub/Sub push envelope.
pub fn is_push(body: &Value) -> bool {
    body.get("message").is_some_and(Value::is_object)
        && body.get("subscription").is_some_and(Value::is_string)
}

/// Reads one push envelope into `out` (a notice, or index 0 ignored) or `errors`.
pub fn push(body: &Value, now_ms: i64, out: &mut Parsed, errors: &mut Vec<NoticeError>) {
    let mut fail = |field: &str, problem: String| {
        errors.push(NoticeError {
            field: field.into(),
            problem,
        })
    };
    let message = &body["message"];
    let Some(data) = message.get("data").and_then(Value::as_str) else {
        fail("message.data", "is required: the base64 log entry".into());
        return;
    };
    let Ok(bytes) = STANDARD.decode(data.trim()) else {
        fail("message.data", "must be base64".into());
        return;
    };
    let Ok(entry) = serde_json::from_slice::<Value>(&bytes) else {
        fail(
            "message.data",
            "must hold a Cloud Logging entry as JSON".into(),
        );
        return;
    };
    let payload = &entry["protoPayload"];
    if payload.get("methodName").and_then(Value::as_str) != Some(PREEMPTED_METHOD) {
        out.ignored.push(0);
        return;
    }
    let resource_name = payload
        .get("resourceName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some((instance, zone_in_name)) = instance_of(resource_name) else {
        fail(
            "message.data.protoPayload.resourceName",
            "must be projects/PROJECT/zones/ZONE/instances/NAME".into(),
        );
        return;
    };
    let labels = &entry["resource"]["labels"];
    let zone = labels
        .get("zone")
        .and_then(Value::as_str)
        .filter(|z| !z.is_empty())
        .unwrap_or(zone_in_name);
    let at_ms = match entry.get("timestamp").and_then(Value::as_str) {
        None => {
            fail(
                "message.data.timestamp",
                "is required: an RFC 3339 time".into(),
            );
            return;
        }
        Some(t) => match parse_rfc3339_ms(t).and_then(|ms| check_not_future(ms, now_ms)) {
            Ok(ms) => ms,
            Err(problem) => {
                fail("message.data.timestamp", problem);
                return;
            }
        },
    };
    // One preemption may be logged as a first and a last entry of one operation: its id is
    // the notice's, so the second is a duplicate.
    let id = entry["operation"]
        .get("id")
        .or_else(|| entry.get("insertId"))
        .or_else(|| message.get("messageId"))
        .and_then(Value::as_str)
        .map(|id| format!("gcp:{id}"));
    out.notices.push((
        0,
        CloudNotice {
            zone: Some(zone.to_string()),
            action_at_ms: Some(at_ms + GCP_PREEMPTION_NOTICE_MS),
            id,
            detail: json!({
                "source": "pubsub",
                "method": PREEMPTED_METHOD,
                "subscription": body.get("subscription"),
                "instance_id": labels.get("instance_id"),
                "project": labels.get("project_id"),
            }),
            ..CloudNotice::about_worker(INTERRUPTION_WARNING, instance, at_ms)
        },
    ));
}

/// The instance name and zone of `projects/P/zones/Z/instances/NAME`.
fn instance_of(resource_name: &str) -> Option<(&str, &str)> {
    let name = resource_name.trim_start_matches("//compute.googleapis.com/");
    match name.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", _, "zones", zone, "instances", instance] if !instance.is_empty() => {
            Some((instance, zone))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    /// The system-event audit log entry Compute Engine writes for a preemption.
    fn entry() -> Value {
        json!({
            "protoPayload": {
                "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
                "status": {"message": "Instance was preempted."},
                "authenticationInfo": {"principalEmail": "system@google.com"},
                "serviceName": "compute.googleapis.com",
                "methodName": "compute.instances.preempted",
                "resourceName": "projects/my-project/zones/us-central1-f/instances/trainer-spot-x7k2",
                "request": {"@type": "type.googleapis.com/compute.instances.preempted"}
            },
            "insertId": "qnwer3e38dfz",
            "resource": {"type": "gce_instance", "labels": {
                "instance_id": "1844488190123456789", "project_id": "my-project", "zone": "us-central1-f"}},
            "timestamp": "2027-01-15T07:59:00.325309Z",
            "severity": "INFO",
            "logName": "projects/my-project/logs/cloudaudit.googleapis.com%2Fsystem_event",
            "operation": {"id": "systemevent-1800000000116-5f1a", "producer": "compute.instances.preempted", "first": true, "last": true},
            "receiveTimestamp": "2027-01-15T07:59:00.782066320Z"
        })
    }

    fn envelope(entry: &Value) -> Value {
        json!({
            "message": {
                "attributes": {"logging.googleapis.com/timestamp": "2027-01-15T07:59:00.325309Z"},
                "data": STANDARD.encode(serde_json::to_vec(entry).unwrap()),
                "messageId": "2070443601311540",
                "publishTime": "2027-01-15T07:59:00.802Z"
            },
            "subscription": "projects/my-project/subscriptions/trainscaler-preemptions"
        })
    }

    fn parse(body: &Value) -> Result<Parsed, Vec<NoticeError>> {
        let (mut out, mut errors) = (Parsed::default(), Vec::new());
        push(body, NOW, &mut out, &mut errors);
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }

    #[test]
    fn a_preemption_is_an_interruption_warning_with_thirty_seconds() {
        let body = envelope(&entry());
        assert!(is_push(&body));
        let p = parse(&body).unwrap();
        let (_, n) = &p.notices[0];
        assert_eq!(n.kind, INTERRUPTION_WARNING);
        assert_eq!(n.worker.as_deref(), Some("trainer-spot-x7k2"));
        assert_eq!(n.zone.as_deref(), Some("us-central1-f"));
        // 2027-01-15T07:59:00.325Z is NOW - 60 s + 325 ms.
        assert_eq!(n.at_ms, NOW - 60_000 + 325);
        assert_eq!(n.action_at_ms, Some(n.at_ms + 30_000));
        assert_eq!(n.id.as_deref(), Some("gcp:systemevent-1800000000116-5f1a"));
    }

    #[test]
    fn other_log_entries_are_ignored_and_broken_envelopes_refused_with_the_field() {
        let mut other = entry();
        other["protoPayload"]["methodName"] = json!("v1.compute.instances.insert");
        let p = parse(&envelope(&other)).unwrap();
        assert_eq!((p.ignored, p.notices.len()), (vec![0], 0));

        let mut body = envelope(&entry());
        body["message"]["data"] = json!("not base64!");
        assert_eq!(parse(&body).unwrap_err()[0].field, "message.data");
        body["message"]["data"] = json!(STANDARD.encode("plain text"));
        assert_eq!(parse(&body).unwrap_err()[0].field, "message.data");
        body["message"] = json!({"messageId": "1"});
        assert_eq!(parse(&body).unwrap_err()[0].field, "message.data");

        let mut e = entry();
        e["protoPayload"]["resourceName"] = json!("projects/my-project/global/instances/x");
        assert_eq!(
            parse(&envelope(&e)).unwrap_err()[0].field,
            "message.data.protoPayload.resourceName"
        );
        let mut e = entry();
        e["timestamp"] = json!("2999-01-01T00:00:00Z");
        assert_eq!(
            parse(&envelope(&e)).unwrap_err()[0].field,
            "message.data.timestamp"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

        /// Any bytes as `message.data`: a notice with a worker and a deadline, or a field error.
        #[test]
        fn arbitrary_data_is_a_notice_or_an_error(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let body = json!({"message": {"data": STANDARD.encode(&bytes)}, "subscription": "s"});
            if let Ok(p) = parse(&body) {
                for (_, n) in &p.notices {
                    proptest::prop_assert!(n.worker.as_deref().is_some_and(|w| !w.is_empty()));
                    proptest::prop_assert_eq!(n.action_at_ms, Some(n.at_ms + GCP_PREEMPTION_NOTICE_MS));
                }
            }
        }
    }
}
