//! Alibaba Cloud's error responses (`{"RequestId","HostId","Code","Message","Recommend"}`)
//! turned into the few kinds the reconciler acts on. The code decides; the message is kept for
//! the operator, with the RequestId that Alibaba support asks for.

use serde::Deserialize;

use crate::provider::ProviderError;

/// The documented error body. Every field is optional because gateways in front of the API
/// (and mocks) sometimes answer with less.
#[derive(Debug, Default, Deserialize)]
pub struct ErrorBody {
    #[serde(rename = "RequestId", default)]
    pub request_id: Option<String>,
    #[serde(rename = "Code", default)]
    pub code: Option<String>,
    #[serde(rename = "Message", default)]
    pub message: Option<String>,
}

/// What the failed request asked for, so a capacity error can say which type and zone.
#[derive(Debug, Default, Clone)]
pub struct RequestContext {
    pub action: String,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
}

/// Maps an HTTP status and body to a [`ProviderError`].
pub fn from_response(status: u16, body: &str, ctx: &RequestContext) -> ProviderError {
    let parsed: ErrorBody = serde_json::from_str(body).unwrap_or_default();
    let Some(code) = parsed.code.filter(|c| !c.is_empty()) else {
        // No documented body: a proxy or load balancer answered. 503 and 429 mean "later".
        let text = format!(
            "{} answered HTTP {status}: {}",
            ctx.action,
            body.chars().take(200).collect::<String>()
        );
        return if status == 503 || status == 429 {
            ProviderError::Throttled(text)
        } else {
            ProviderError::Other(text)
        };
    };
    let message = parsed.message.unwrap_or_default();
    let text = match &parsed.request_id {
        Some(id) => format!("{}: {code}: {message} (RequestId {id})", ctx.action),
        None => format!("{}: {code}: {message}", ctx.action),
    };
    classify(&code, &message, text, ctx)
}

fn classify(code: &str, message: &str, text: String, ctx: &RequestContext) -> ProviderError {
    // Order matters: `InvalidAccessKeyId.NotFound` is a credentials problem, not a missing
    // resource, and `InvalidScalingGroupId.NotFound` is missing, not malformed.
    if code.starts_with("Throttling") || code == "ServiceUnavailable" {
        return ProviderError::Throttled(text);
    }
    if code.starts_with("InvalidAccessKeyId")
        || code == "SignatureDoesNotMatch"
        || code == "IncompleteSignature"
        || code.starts_with("Forbidden")
        || code == "InvalidSecurityToken.Expired"
    {
        return ProviderError::Unauthorized(text);
    }
    if is_no_stock(code, message) {
        return ProviderError::InsufficientCapacity {
            instance_type: ctx.instance_type.clone(),
            zone: ctx.zone.clone(),
            message: text,
        };
    }
    if code.ends_with(".NotFound") || code == "NotFound" {
        return ProviderError::NotFound(text);
    }
    if code.starts_with("InvalidParameter")
        || code.starts_with("MissingParameter")
        || code.starts_with("InvalidScalingGroup")
        || code.starts_with("MissingScalingGroup")
    {
        return ProviderError::InvalidRequest(text);
    }
    ProviderError::Other(text)
}

fn is_no_stock(code: &str, message: &str) -> bool {
    let code_says = code.contains("NoStock")
        || code == "Zone.NotOnSale"
        || code == "ResourceNotAvailable"
        || code.starts_with("InvalidResourceType.NotSupported");
    let m = message.to_ascii_lowercase();
    let message_says = m.contains("no stock")
        || m.contains("out of stock")
        || m.contains("sold out")
        || m.contains("insufficient inventory")
        || m.contains("not enough stock");
    code_says || message_says
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::error::ErrorKind;

    fn kind(status: u16, code: &str, message: &str) -> ErrorKind {
        let body = serde_json::json!({
            "RequestId": "7463B73D-35CC-4D19-A010-6B8D65D242EF",
            "HostId": "ecs.aliyuncs.com",
            "Code": code,
            "Message": message,
            "Recommend": "https://api.aliyun.com/troubleshoot?q=x",
        })
        .to_string();
        from_response(status, &body, &RequestContext::default()).kind()
    }

    #[test]
    fn codes_map_to_the_kinds_the_reconciler_acts_on() {
        use ErrorKind::*;
        let cases = [
            (400, "Throttling", Throttled),
            (400, "Throttling.User", Throttled),
            (400, "Throttling.Api", Throttled),
            (503, "ServiceUnavailable", Throttled),
            (404, "InvalidAccessKeyId.NotFound", Unauthorized),
            (400, "InvalidAccessKeyId.Inactive", Unauthorized),
            (400, "SignatureDoesNotMatch", Unauthorized),
            (400, "IncompleteSignature", Unauthorized),
            (403, "Forbidden.RAM", Unauthorized),
            (403, "Forbidden", Unauthorized),
            (403, "OperationDenied.NoStock", InsufficientCapacity),
            (403, "Zone.NotOnSale", InsufficientCapacity),
            (400, "ResourceNotAvailable", InsufficientCapacity),
            (
                400,
                "InvalidResourceType.NotSupported",
                InsufficientCapacity,
            ),
            (404, "InvalidScalingGroupId.NotFound", NotFound),
            (404, "InvalidInstanceId.NotFound", NotFound),
            (400, "InvalidParameter", InvalidRequest),
            (400, "InvalidParameter.Conflict", InvalidRequest),
            (400, "MissingParameter", InvalidRequest),
            (400, "InvalidScalingGroup.SizeLimit", InvalidRequest),
            (500, "InternalError", Other),
        ];
        for (status, code, want) in cases {
            assert_eq!(kind(status, code, "m"), want, "{code}");
        }
    }

    #[test]
    fn a_message_about_stock_is_a_capacity_error_whatever_the_code() {
        assert_eq!(
            kind(
                403,
                "OperationDenied",
                "The resource is out of stock in the specified zone."
            ),
            ErrorKind::InsufficientCapacity
        );
    }

    #[test]
    fn a_body_without_a_code_keeps_the_status_meaning() {
        let ctx = RequestContext::default();
        assert_eq!(
            from_response(503, "busy", &ctx).kind(),
            ErrorKind::Throttled
        );
        assert_eq!(from_response(502, "<html>", &ctx).kind(), ErrorKind::Other);
    }

    #[test]
    fn capacity_errors_name_the_type_and_zone_asked_for() {
        let ctx = RequestContext {
            action: "DescribePrice".into(),
            instance_type: Some("ecs.gn7i-c8g1.2xlarge".into()),
            zone: Some("cn-hangzhou-i".into()),
        };
        let body = r#"{"Code":"OperationDenied.NoStock","Message":"sold out","RequestId":"R"}"#;
        match from_response(403, body, &ctx) {
            ProviderError::InsufficientCapacity {
                instance_type,
                zone,
                message,
            } => {
                assert_eq!(instance_type.as_deref(), Some("ecs.gn7i-c8g1.2xlarge"));
                assert_eq!(zone.as_deref(), Some("cn-hangzhou-i"));
                assert!(message.contains("RequestId R"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
