//! Cloud notices about capacity: AWS EventBridge events as AWS sends them
//! (`EC2 Spot Instance Interruption Warning`, `EC2 Instance Rebalance Recommendation`), Alibaba
//! Cloud ECS event notifications (`Instance:PreemptibleInstanceInterruption`, as CloudMonitor
//! delivers them), GCP preemptions in a Pub/Sub push envelope (`super::pubsub`) and a generic
//! JSON shape for other clouds and for capacity errors:
//!
//! ```json
//! {"events": [{"kind": "interruption_warning", "worker": "vm-17", "pool": "gpu-t4",
//!              "at": "2026-12-02T10:00:00Z", "action_at": "2026-12-02T10:00:30Z", "id": "evt-1"}]}
//! ```
//!
//! `kind` is `interruption_warning`, `rebalance_recommendation`, `capacity_error` or
//! `checkpoint_saved` (a job saved its state: an interrupted worker may now be terminated);
//! worker notices need `worker`, capacity errors need `pool` and `instance_type`; a notice without
//! `at` is taken as sent when it arrived.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::store::CloudNotice;
use crate::timefmt::{check_not_future, parse_rfc3339_ms};

/// AWS gives two minutes between the warning and the interruption.
pub const AWS_SPOT_NOTICE_MS: i64 = 120_000;
/// Alibaba Cloud releases a preemptible instance five minutes after its interruption notice.
pub const ALIBABA_PREEMPTIBLE_NOTICE_MS: i64 = 300_000;
const ALIBABA_INTERRUPTION: &str = "Instance:PreemptibleInstanceInterruption";

pub const INTERRUPTION_WARNING: &str = "interruption_warning";
pub const REBALANCE_RECOMMENDATION: &str = "rebalance_recommendation";
pub const CAPACITY_ERROR: &str = "capacity_error";
pub const CHECKPOINT_SAVED: &str = "checkpoint_saved";

const EB_SPOT_WARNING: &str = "EC2 Spot Instance Interruption Warning";
const EB_REBALANCE: &str = "EC2 Instance Rebalance Recommendation";

/// A problem with one field of one notice.
#[derive(Debug, Clone, PartialEq)]
pub struct NoticeError {
    pub field: String,
    pub problem: String,
}

/// The notices of a body, each with its index, and the indexes of events of other kinds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub notices: Vec<(usize, CloudNotice)>,
    pub ignored: Vec<usize>,
}

/// Parses a body; every malformed notice is reported, and then nothing is accepted.
pub fn parse(body: &Value, now_ms: i64) -> Result<Parsed, Vec<NoticeError>> {
    let mut out = Parsed::default();
    let mut errors = Vec::new();
    match body {
        Value::Object(o) if o.contains_key("detail-type") => {
            eventbridge(0, "", body, now_ms, &mut out, &mut errors);
        }
        Value::Object(o) if o.get("product").and_then(Value::as_str) == Some("ECS") => {
            alibaba(0, "", body, now_ms, &mut out, &mut errors);
        }
        Value::Object(_) if super::pubsub::is_push(body) => {
            super::pubsub::push(body, now_ms, &mut out, &mut errors);
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let at = format!("[{i}]");
                if item.get("product").and_then(Value::as_str) == Some("ECS") {
                    alibaba(i, &at, item, now_ms, &mut out, &mut errors);
                } else {
                    eventbridge(i, &at, item, now_ms, &mut out, &mut errors);
                }
            }
        }
        Value::Object(o) if o.contains_key("events") => match o.get("events") {
            Some(Value::Array(items)) if o.len() == 1 => {
                for (i, item) in items.iter().enumerate() {
                    generic(i, item, now_ms, &mut out, &mut errors);
                }
            }
            _ => errors.push(NoticeError {
                field: "events".into(),
                problem: "must be an array of notices, and the only field".into(),
            }),
        },
        _ => errors.push(NoticeError {
            field: "body".into(),
            problem: "must be an EventBridge event, an array of them, a Pub/Sub push \
                      envelope, or {\"events\": [...]}"
                .into(),
        }),
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// How a sender writes times: a parser, and the format named in the error when one is missing.
type TimeFormat = (fn(&str) -> Result<i64, String>, &'static str);

const RFC3339: TimeFormat = (parse_rfc3339_ms, "an RFC 3339 time");

/// A required time, read with `parse` (each sender has its own format) and not in the future.
fn time(
    value: Option<&Value>,
    field: String,
    now_ms: i64,
    (parse, what): TimeFormat,
    errors: &mut Vec<NoticeError>,
) -> Option<i64> {
    let Some(text) = value.and_then(Value::as_str) else {
        errors.push(NoticeError {
            field,
            problem: format!("is required: {what}"),
        });
        return None;
    };
    match parse(text).and_then(|ms| check_not_future(ms, now_ms)) {
        Ok(ms) => Some(ms),
        Err(problem) => {
            errors.push(NoticeError { field, problem });
            None
        }
    }
}

/// A required, non-empty string one level inside `object`.
fn instance_id<'v>(
    event: &'v Value,
    object: &str,
    key: &str,
    field: String,
    errors: &mut Vec<NoticeError>,
) -> Option<&'v str> {
    let id = event
        .get(object)
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    if id.is_none() {
        errors.push(NoticeError {
            field,
            problem: "is required".into(),
        });
    }
    id
}

/// Where `name` is in the event at `at` (`[2].detail.instance-id`), or just `name` when
/// the body is one event.
fn field_path(at: &str, name: &str) -> String {
    format!("{at}{}{name}", if at.is_empty() { "" } else { "." })
}

fn eventbridge(
    i: usize,
    at: &str,
    event: &Value,
    now_ms: i64,
    out: &mut Parsed,
    errors: &mut Vec<NoticeError>,
) {
    let field = |name: &str| field_path(at, name);
    let Some(detail_type) = event.get("detail-type").and_then(Value::as_str) else {
        errors.push(NoticeError {
            field: field("detail-type"),
            problem: "is required: this is not an EventBridge event".into(),
        });
        return;
    };
    let kind = match detail_type {
        EB_SPOT_WARNING => INTERRUPTION_WARNING,
        EB_REBALANCE => REBALANCE_RECOMMENDATION,
        // An EventBridge rule may forward more than we use; that is not the sender's error.
        _ => {
            out.ignored.push(i);
            return;
        }
    };
    if event.get("source").and_then(Value::as_str) != Some("aws.ec2") {
        errors.push(NoticeError {
            field: field("source"),
            problem: format!("must be aws.ec2 for `{detail_type}`"),
        });
    }
    let instance = instance_id(
        event,
        "detail",
        "instance-id",
        field("detail.instance-id"),
        errors,
    );
    let at_ms = time(event.get("time"), field("time"), now_ms, RFC3339, errors);
    let (Some(instance), Some(at_ms)) = (instance, at_ms) else {
        return;
    };
    out.notices.push((
        i,
        CloudNotice {
            action_at_ms: (kind == INTERRUPTION_WARNING).then_some(at_ms + AWS_SPOT_NOTICE_MS),
            id: event_id(event),
            detail: json!({
                "source": "eventbridge",
                "detail_type": detail_type,
                "region": event.get("region"),
                "instance_action": event.get("detail").and_then(|d| d.get("instance-action")),
            }),
            ..CloudNotice::about_worker(kind, instance, at_ms)
        },
    ));
}

/// The sender's id of an event (EventBridge's and Alibaba's `id`), so a re-sent one is
/// logged once.
fn event_id(event: &Value) -> Option<String> {
    event.get("id").and_then(Value::as_str).map(str::to_string)
}

/// Alibaba's notification time: `20190409T121826.922+0800`.
fn alibaba_time(text: &str) -> Result<i64, String> {
    let format = time::macros::format_description!(
        "[year][month][day]T[hour][minute][second].[subsecond][offset_hour sign:mandatory][offset_minute]"
    );
    time::OffsetDateTime::parse(text, &format)
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .map_err(|e| {
            format!("must be Alibaba's time format such as 20190409T121826.922+0800 ({e})")
        })
}

/// An ECS event notification; only the preemptible interruption is a notice we act on.
fn alibaba(
    i: usize,
    at: &str,
    event: &Value,
    now_ms: i64,
    out: &mut Parsed,
    errors: &mut Vec<NoticeError>,
) {
    let field = |name: &str| field_path(at, name);
    let Some(name) = event.get("name").and_then(Value::as_str) else {
        errors.push(NoticeError {
            field: field("name"),
            problem: "is required: the notification's event name".into(),
        });
        return;
    };
    if name != ALIBABA_INTERRUPTION {
        out.ignored.push(i);
        return;
    }
    let instance = instance_id(
        event,
        "content",
        "instanceId",
        field("content.instanceId"),
        errors,
    );
    let at_ms = time(
        event.get("eventTime"),
        field("eventTime"),
        now_ms,
        (alibaba_time, "a time such as 20190409T121826.922+0800"),
        errors,
    );
    let (Some(instance), Some(at_ms)) = (instance, at_ms) else {
        return;
    };
    out.notices.push((
        i,
        CloudNotice {
            action_at_ms: Some(at_ms + ALIBABA_PREEMPTIBLE_NOTICE_MS),
            id: event_id(event),
            detail: json!({
                "source": "alibaba",
                "name": name,
                "region": event.get("regionId"),
                "action": event.get("content").and_then(|c| c.get("action")),
            }),
            ..CloudNotice::about_worker(INTERRUPTION_WARNING, instance, at_ms)
        },
    ));
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GenericNotice {
    kind: String,
    pool: Option<String>,
    worker: Option<String>,
    instance_type: Option<String>,
    zone: Option<String>,
    at: Option<Value>,
    action_at: Option<Value>,
    id: Option<String>,
    /// Free-form context kept with the event (the provider's own error message, say).
    message: Option<String>,
}

fn generic(i: usize, item: &Value, now_ms: i64, out: &mut Parsed, errors: &mut Vec<NoticeError>) {
    let field = |name: &str| format!("events[{i}].{name}");
    let n: GenericNotice = match serde_json::from_value(item.clone()) {
        Ok(n) => n,
        Err(e) => {
            errors.push(NoticeError {
                field: format!("events[{i}]"),
                problem: e.to_string(),
            });
            return;
        }
    };
    let before = errors.len();
    let kind = match n.kind.as_str() {
        INTERRUPTION_WARNING => INTERRUPTION_WARNING,
        REBALANCE_RECOMMENDATION => REBALANCE_RECOMMENDATION,
        CAPACITY_ERROR => CAPACITY_ERROR,
        CHECKPOINT_SAVED => CHECKPOINT_SAVED,
        other => {
            errors.push(NoticeError {
                field: field("kind"),
                problem: format!(
                    "must be interruption_warning, rebalance_recommendation, capacity_error or checkpoint_saved, not `{other}`"
                ),
            });
            ""
        }
    };
    // Omitted, the notice is taken as sent when it arrived, as for samples.
    let at_ms = match &n.at {
        None => Some(now_ms),
        Some(at) => time(Some(at), field("at"), now_ms, RFC3339, errors),
    };
    let action_at_ms = match &n.action_at {
        None => None,
        Some(v) => match v.as_str().map(parse_rfc3339_ms) {
            Some(Ok(ms)) => Some(ms),
            Some(Err(problem)) => {
                errors.push(NoticeError {
                    field: field("action_at"),
                    problem,
                });
                None
            }
            None => {
                errors.push(NoticeError {
                    field: field("action_at"),
                    problem: "must be an RFC 3339 time".into(),
                });
                None
            }
        },
    };
    let empty = |s: &Option<String>| s.as_deref().is_some_and(str::is_empty);
    for (name, value) in [
        ("pool", &n.pool),
        ("worker", &n.worker),
        ("instance_type", &n.instance_type),
        ("id", &n.id),
    ] {
        if empty(value) {
            errors.push(NoticeError {
                field: field(name),
                problem: "must not be empty".into(),
            });
        }
    }
    if kind == CAPACITY_ERROR {
        if n.pool.is_none() {
            errors.push(NoticeError {
                field: field("pool"),
                problem: "is required for capacity_error".into(),
            });
        }
        if n.instance_type.is_none() {
            errors.push(NoticeError {
                field: field("instance_type"),
                problem: "is required for capacity_error".into(),
            });
        }
    } else if !kind.is_empty() && n.worker.is_none() {
        errors.push(NoticeError {
            field: field("worker"),
            problem: format!("is required for {kind}"),
        });
    }
    let Some(at_ms) = at_ms else { return };
    if errors.len() > before {
        return;
    }
    out.notices.push((
        i,
        CloudNotice {
            kind,
            pool: n.pool,
            worker: n.worker,
            instance_type: n.instance_type,
            zone: n.zone.filter(|z| !z.is_empty()),
            at_ms,
            action_at_ms: action_at_ms
                .or((kind == INTERRUPTION_WARNING).then_some(at_ms + AWS_SPOT_NOTICE_MS)),
            id: n.id,
            detail: json!({"source": "generic", "message": n.message}),
        },
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    /// The shape AWS documents for the spot warning (EC2 User Guide, "Spot Instance
    /// interruption notices").
    fn spot_warning() -> Value {
        json!({
            "version": "0",
            "id": "12345678-1234-1234-1234-123456789012",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": "2027-01-15T07:59:00Z",
            "region": "us-east-1",
            "resources": ["arn:aws:ec2:us-east-1a:instance/i-1234567890abcdef0"],
            "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"}
        })
    }

    #[test]
    fn eventbridge_spot_warning_gives_two_minutes() {
        let p = parse(&spot_warning(), NOW).unwrap();
        let (_, n) = &p.notices[0];
        assert_eq!(n.kind, INTERRUPTION_WARNING);
        assert_eq!(n.worker.as_deref(), Some("i-1234567890abcdef0"));
        assert_eq!(n.action_at_ms, Some(n.at_ms + 120_000));
        assert_eq!(
            n.id.as_deref(),
            Some("12345678-1234-1234-1234-123456789012")
        );
    }

    #[test]
    fn arrays_name_the_bad_index_and_other_kinds_are_ignored() {
        let mut bad = spot_warning();
        bad["detail"] = json!({});
        let other =
            json!({"detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2"});
        let errors = parse(&json!([spot_warning(), bad]), NOW).unwrap_err();
        assert_eq!(errors[0].field, "[1].detail.instance-id");
        let p = parse(&json!([other, spot_warning()]), NOW).unwrap();
        assert_eq!(p.ignored, vec![0]);
        assert_eq!(p.notices[0].0, 1);
    }

    /// The envelope Alibaba documents for ECS event notifications (CloudMonitor), with the
    /// preemptible interruption's name and content.
    fn alibaba_interruption() -> Value {
        json!({
            "id": "2256A988-0B26-4E2B-820A-8A0000000E5",
            "product": "ECS",
            "resourceId": "acs:ecs:cn-hangzhou:1690700000000030:instance/i-bp1ecr000000005go2",
            "level": "WARN",
            "instanceName": "trainer-7",
            "regionId": "cn-hangzhou",
            "name": "Instance:PreemptibleInstanceInterruption",
            "userId": "1690700000000030",
            "eventTime": "20270115T155900.250+0800",
            "content": {"instanceId": "i-bp1ecr000000005go2", "action": "delete"}
        })
    }

    #[test]
    fn alibaba_preemptible_interruption_gives_five_minutes() {
        let p = parse(&alibaba_interruption(), NOW).unwrap();
        let (_, n) = &p.notices[0];
        assert_eq!(n.kind, INTERRUPTION_WARNING);
        assert_eq!(n.worker.as_deref(), Some("i-bp1ecr000000005go2"));
        // 15:59:00.250 at +08:00 is 07:59:00.250 UTC.
        assert_eq!(n.at_ms, NOW - 60_000 + 250);
        assert_eq!(n.action_at_ms, Some(n.at_ms + 300_000));
        let mut other = alibaba_interruption();
        other["name"] = json!("Instance:StateChange");
        let mut broken = alibaba_interruption();
        broken["eventTime"] = json!("2027-01-15T07:59:00Z");
        let p = parse(&json!([other, alibaba_interruption()]), NOW).unwrap();
        assert_eq!((p.ignored.clone(), p.notices.len()), (vec![0], 1));
        assert_eq!(
            parse(&json!([broken]), NOW).unwrap_err()[0].field,
            "[0].eventTime"
        );
    }

    #[test]
    fn generic_capacity_error_needs_pool_and_type() {
        let body = json!({"events": [{"kind": "capacity_error", "at": "2027-01-15T07:59:00Z", "instance_type": "g5.12xlarge"}]});
        let errors = parse(&body, NOW).unwrap_err();
        assert_eq!(errors[0].field, "events[0].pool");
        let body =
            json!({"events": [{"kind": "preempted", "at": "2027-01-15T07:59:00Z", "worker": "x"}]});
        assert_eq!(parse(&body, NOW).unwrap_err()[0].field, "events[0].kind");
        let body = json!({"events": [{"kind": "interruption_warning", "at": "2999-01-01T00:00:00Z", "worker": "x"}]});
        assert_eq!(parse(&body, NOW).unwrap_err()[0].field, "events[0].at");
    }
}
