//! Google's error answers turned into the kinds the reconciler acts on. Two shapes arrive: an
//! HTTP error body (`{"error": {"code", "message", "status", "errors": [{"reason", ...}],
//! "details": [...]}}`) and the `error.errors[]` of a finished long-running `Operation` (or of
//! a managed instance's last creation attempt), each with a `code` such as
//! `ZONE_RESOURCE_POOL_EXHAUSTED`.
//!
//! A 403 is not always a permissions problem: Compute Engine answers 403 with reason
//! `rateLimitExceeded` (too many calls) and `quotaExceeded` (a resource quota), so the reason
//! decides before the status does.

use serde::Deserialize;
use serde_json::Value;

use crate::provider::ProviderError;

/// What the failed call was about, so the error can say which group, type and zone.
#[derive(Debug, Clone, Default)]
pub struct ErrorContext {
    /// `resize of projects/.../instanceGroupManagers/x`, for the message.
    pub what: String,
    /// The group's zone, used when the error itself names none.
    pub zone: Option<String>,
    /// The catalog instance type the group's template runs.
    pub instance_type: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Envelope {
    #[serde(default)]
    error: Option<Body>,
}

#[derive(Debug, Default, Deserialize)]
struct Body {
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    errors: Vec<Item>,
    #[serde(default)]
    details: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Item {
    #[serde(default)]
    reason: Option<String>,
}

/// One error of an `Operation` or of a managed instance's last attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct OperationError {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub message: String,
}

/// Maps an HTTP status and error body to a [`ProviderError`].
pub fn from_response(status: u16, body: &str, ctx: &ErrorContext) -> ProviderError {
    let parsed = serde_json::from_str::<Envelope>(body)
        .ok()
        .and_then(|e| e.error)
        .unwrap_or_default();
    let message = if parsed.message.is_empty() {
        body.chars().take(200).collect::<String>()
    } else {
        parsed.message.clone()
    };
    let text = format!("{}: HTTP {status}: {message}", ctx.what);
    // Reasons from the legacy `errors[]` and from `google.rpc.ErrorInfo` details.
    let mut reasons: Vec<String> = parsed
        .errors
        .iter()
        .filter_map(|e| e.reason.clone())
        .collect();
    reasons.extend(
        parsed
            .details
            .iter()
            .filter(|d| {
                d.get("@type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.ends_with("ErrorInfo"))
            })
            .filter_map(|d| d.get("reason").and_then(Value::as_str).map(str::to_string)),
    );
    let has = |names: &[&str]| {
        reasons
            .iter()
            .any(|r| names.iter().any(|n| r.eq_ignore_ascii_case(n)))
    };
    if has(&[
        "rateLimitExceeded",
        "userRateLimitExceeded",
        "RATE_LIMIT_EXCEEDED",
    ]) {
        return ProviderError::Throttled(text);
    }
    if has(&["quotaExceeded", "RESOURCE_QUOTA_EXCEEDED", "QUOTA_EXCEEDED"]) {
        return quota(text, &message, ctx);
    }
    if has(&["insufficientCapacity"]) || is_stockout("", &message) {
        return capacity(text, &message, None, ctx);
    }
    match (status, parsed.status.as_deref()) {
        (401, _) | (_, Some("UNAUTHENTICATED")) => ProviderError::Unauthorized(text),
        (403, _) | (_, Some("PERMISSION_DENIED")) => ProviderError::Unauthorized(text),
        (404, _) | (_, Some("NOT_FOUND")) => ProviderError::NotFound(text),
        // Too many requests, or a frontend that is briefly unavailable: Google's guidance for
        // both is exponential backoff.
        (429 | 502 | 503 | 504, _) => ProviderError::Throttled(text),
        (400, _) | (_, Some("INVALID_ARGUMENT")) => ProviderError::InvalidRequest(text),
        _ => ProviderError::Other(text),
    }
}

/// Maps the errors of a finished operation (or of a failed creation attempt); the first error
/// that says something the reconciler acts on wins, otherwise they are all reported.
pub fn from_operation(errors: &[OperationError], ctx: &ErrorContext) -> ProviderError {
    let all = errors
        .iter()
        .map(|e| format!("{}: {}", e.code, e.message))
        .collect::<Vec<_>>()
        .join("; ");
    let text = format!("{}: {all}", ctx.what);
    for e in errors {
        if is_stockout(&e.code, &e.message) {
            return capacity(text, &e.message, e.location.as_deref(), ctx);
        }
        if e.code == "QUOTA_EXCEEDED" || e.code.ends_with("QUOTA_EXCEEDED") {
            return quota(text, &e.message, ctx);
        }
        if e.code == "RATE_LIMIT_EXCEEDED" {
            return ProviderError::Throttled(text);
        }
    }
    let code = errors.first().map(|e| e.code.as_str()).unwrap_or("");
    match code {
        "RESOURCE_NOT_FOUND" | "NOT_FOUND" => ProviderError::NotFound(text),
        "PERMISSION_DENIED" | "FORBIDDEN" | "UNAUTHENTICATED" => ProviderError::Unauthorized(text),
        c if c.starts_with("INVALID") || c == "BAD_REQUEST" || c == "CONDITION_NOT_MET" => {
            ProviderError::InvalidRequest(text)
        }
        _ => ProviderError::Other(text),
    }
}

/// Whether an error says the zone has no room for the request: the documented
/// `ZONE_RESOURCE_POOL_EXHAUSTED` (and `_WITH_DETAILS`), its regional sibling, GKE's
/// `GCE_STOCKOUT`, or one of the documented messages under another code.
pub fn is_stockout(code: &str, message: &str) -> bool {
    let code_says = code.contains("RESOURCE_POOL_EXHAUSTED") || code.contains("STOCKOUT");
    let m = message.to_ascii_lowercase();
    let message_says = m.contains("does not have enough resources available")
        || (m.contains("is currently unavailable in the") && m.contains("zone"));
    code_says || message_says
}

/// A resource quota (GPUs, CPUs per region) reads as insufficient capacity for the whole
/// region: waiting seconds does not raise it, another type or market may fit. A quota on the
/// rate of API calls (`... per minute`) is throttling.
fn quota(text: String, message: &str, ctx: &ErrorContext) -> ProviderError {
    let m = message.to_ascii_lowercase();
    if m.contains("per minute") || m.contains("per second") || m.contains("per 100 seconds") {
        return ProviderError::Throttled(text);
    }
    ProviderError::InsufficientCapacity {
        instance_type: ctx.instance_type.clone(),
        zone: None,
        message: text,
    }
}

fn capacity(
    text: String,
    message: &str,
    location: Option<&str>,
    ctx: &ErrorContext,
) -> ProviderError {
    let zone = zone_in(message)
        .or_else(|| {
            location
                .filter(|l| super::path::is_zone(l))
                .map(str::to_string)
        })
        .or_else(|| ctx.zone.clone());
    ProviderError::InsufficientCapacity {
        instance_type: ctx.instance_type.clone(),
        zone,
        message: text,
    }
}

/// The zone a stockout message names: `The zone 'projects/P/zones/us-central1-a' does not
/// ...`, or `... is currently unavailable in the us-central1-a zone`.
fn zone_in(message: &str) -> Option<String> {
    if let Some((_, rest)) = message.split_once("/zones/") {
        let zone: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        if super::path::is_zone(&zone) {
            return Some(zone);
        }
    }
    let words: Vec<&str> = message.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[1].trim_end_matches(['.', ',']) == "zone" && super::path::is_zone(w[0]))
        .map(|w| w[0].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::error::ErrorKind;

    fn ctx() -> ErrorContext {
        ErrorContext {
            what: "resize of projects/p/zones/us-central1-a/instanceGroupManagers/g".into(),
            zone: Some("us-central1-a".into()),
            instance_type: Some("n1-highmem-8+T4x1".into()),
        }
    }

    /// An error body in the documented shape, with one legacy `errors[]` item.
    fn body(code: u16, status: &str, reason: &str, message: &str) -> String {
        serde_json::json!({"error": {"code": code, "message": message, "status": status,
            "errors": [{"message": message, "domain": "global", "reason": reason}]}})
        .to_string()
    }

    #[test]
    fn reasons_decide_before_the_status() {
        let kind = |status, s, reason, m| {
            from_response(status, &body(status, s, reason, m), &ctx()).kind()
        };
        use ErrorKind::*;
        assert_eq!(
            kind(
                403,
                "PERMISSION_DENIED",
                "rateLimitExceeded",
                "Rate Limit Exceeded"
            ),
            Throttled
        );
        assert_eq!(
            kind(403, "PERMISSION_DENIED", "userRateLimitExceeded", "slow"),
            Throttled
        );
        assert_eq!(
            kind(
                403,
                "PERMISSION_DENIED",
                "quotaExceeded",
                "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 4.0 in region us-central1."
            ),
            InsufficientCapacity
        );
        assert_eq!(
            kind(
                403,
                "PERMISSION_DENIED",
                "quotaExceeded",
                "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute'"
            ),
            Throttled
        );
        assert_eq!(
            kind(503, "UNAVAILABLE", "insufficientCapacity", "no room"),
            InsufficientCapacity
        );
        assert_eq!(
            kind(
                403,
                "PERMISSION_DENIED",
                "forbidden",
                "Required 'compute.instanceGroupManagers.update' permission"
            ),
            Unauthorized
        );
        assert_eq!(
            kind(401, "UNAUTHENTICATED", "authError", "Invalid Credentials"),
            Unauthorized
        );
        assert_eq!(
            kind(404, "NOT_FOUND", "notFound", "The resource was not found"),
            NotFound
        );
        assert_eq!(
            kind(
                400,
                "INVALID_ARGUMENT",
                "invalid",
                "Invalid value for field 'size'"
            ),
            InvalidRequest
        );
        assert_eq!(
            kind(429, "RESOURCE_EXHAUSTED", "", "Too many requests"),
            Throttled
        );
        assert_eq!(
            kind(503, "UNAVAILABLE", "backendError", "try again"),
            Throttled
        );
        assert_eq!(kind(500, "INTERNAL", "backendError", "oops"), Other);
    }

    #[test]
    fn an_error_info_detail_counts_like_a_legacy_reason() {
        let b = serde_json::json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
            "message": "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute'",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com"}]}})
        .to_string();
        assert_eq!(from_response(429, &b, &ctx()).kind(), ErrorKind::Throttled);
    }

    #[test]
    fn a_body_that_is_not_googles_keeps_the_status_meaning() {
        assert_eq!(
            from_response(502, "<html>bad gateway</html>", &ctx()).kind(),
            ErrorKind::Throttled
        );
        assert_eq!(
            from_response(403, "", &ctx()).kind(),
            ErrorKind::Unauthorized
        );
        let ProviderError::Other(text) = from_response(500, "oops", &ctx()) else {
            panic!()
        };
        assert!(
            text.contains("HTTP 500") && text.contains("oops") && text.contains("resize of"),
            "{text}"
        );
    }

    #[test]
    fn a_stockout_carries_the_zone_it_names_and_the_groups_type() {
        let errors = [OperationError {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
            location: None,
            message: "The zone 'projects/p/zones/us-central1-f' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.".into(),
        }];
        match from_operation(&errors, &ctx()) {
            ProviderError::InsufficientCapacity {
                instance_type,
                zone,
                message,
            } => {
                assert_eq!(zone.as_deref(), Some("us-central1-f"));
                assert_eq!(instance_type.as_deref(), Some("n1-highmem-8+T4x1"));
                assert!(
                    message.contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        let with_details = [OperationError {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS".into(),
            location: None,
            message: "A n1-highmem-8 VM instance with 1 nvidia-tesla-t4 accelerator(s) is currently unavailable in the us-east1-c zone. Capacity changes frequently.".into(),
        }];
        let ProviderError::InsufficientCapacity { zone, .. } =
            from_operation(&with_details, &ctx())
        else {
            panic!()
        };
        assert_eq!(zone.as_deref(), Some("us-east1-c"));
        // A code without a zone in its message falls back to the group's zone.
        let bare = [OperationError {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
            location: None,
            message: "exhausted".into(),
        }];
        let ProviderError::InsufficientCapacity { zone, .. } = from_operation(&bare, &ctx()) else {
            panic!()
        };
        assert_eq!(zone.as_deref(), Some("us-central1-a"));
    }

    #[test]
    fn operation_codes_map_to_kinds() {
        let op = |code: &str, message: &str| {
            from_operation(
                &[OperationError {
                    code: code.into(),
                    location: None,
                    message: message.into(),
                }],
                &ctx(),
            )
            .kind()
        };
        use ErrorKind::*;
        assert_eq!(
            op(
                "QUOTA_EXCEEDED",
                "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally."
            ),
            InsufficientCapacity
        );
        assert_eq!(op("RATE_LIMIT_EXCEEDED", "slow down"), Throttled);
        assert_eq!(
            op(
                "RESOURCE_NOT_FOUND",
                "The resource 'projects/p/zones/z/instances/x' was not found"
            ),
            NotFound
        );
        assert_eq!(op("PERMISSION_DENIED", "no"), Unauthorized);
        assert_eq!(op("INVALID_FIELD_VALUE", "bad"), InvalidRequest);
        assert_eq!(op("GCE_STOCKOUT", "no capacity"), InsufficientCapacity);
        assert_eq!(op("INTERNAL_ERROR", "oops"), Other);
        // A resource quota is region-wide: no zone.
        let ProviderError::InsufficientCapacity { zone, .. } = from_operation(
            &[OperationError {
                code: "QUOTA_EXCEEDED".into(),
                location: None,
                message: "Quota 'NVIDIA_T4_GPUS' exceeded.".into(),
            }],
            &ctx(),
        ) else {
            panic!()
        };
        assert_eq!(zone, None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

        /// Any status and body: a typed error that names the call, no panic.
        #[test]
        fn any_error_answer_names_the_call(status in 100u16..600, bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let body = String::from_utf8_lossy(&bytes);
            let e = from_response(status, &body, &ctx());
            proptest::prop_assert!(e.to_string().contains("resize of"), "{e}");
        }
    }
}
