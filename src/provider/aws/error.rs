//! AWS error responses turned into [`ProviderError`]s. EC2 and Auto Scaling use two different
//! XML shapes (`<Response><Errors><Error>` and `<ErrorResponse><Error>`); both carry a code
//! and a message, and the code decides what the reconciler does next.

use serde::Deserialize;

use crate::provider::ProviderError;

/// One error as AWS reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default, thiserror::Error)]
#[error("{code}: {message} (HTTP {status})")]
pub struct AwsError {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub request_id: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
struct Detail {
    #[serde(rename = "Code", default)]
    code: String,
    #[serde(rename = "Message", default)]
    message: String,
}

#[derive(Debug, Deserialize, Default)]
struct ErrorList {
    #[serde(rename = "Error", default)]
    error: Vec<Detail>,
}

/// Both shapes in one: the root element's name is not looked at.
#[derive(Debug, Deserialize)]
struct Envelope {
    /// EC2: `<Response><Errors><Error>…`.
    #[serde(rename = "Errors")]
    errors: Option<ErrorList>,
    /// Auto Scaling: `<ErrorResponse><Error>…`.
    #[serde(rename = "Error")]
    error: Option<Detail>,
    #[serde(rename = "RequestID")]
    request_id_ec2: Option<String>,
    #[serde(rename = "RequestId")]
    request_id: Option<String>,
}

impl AwsError {
    /// Reads an error body; `None` when it is empty or not one of AWS's error shapes (a proxy's
    /// HTML page, say).
    pub fn parse(status: u16, body: &str) -> Option<Self> {
        let envelope: Envelope = quick_xml::de::from_str(body).ok()?;
        let detail = envelope
            .errors
            .and_then(|list| list.error.into_iter().next())
            .or(envelope.error)?;
        if detail.code.is_empty() {
            return None;
        }
        Some(Self {
            status,
            code: detail.code,
            message: detail.message,
            request_id: envelope.request_id_ec2.or(envelope.request_id),
        })
    }
}

/// What a failed call's answer means to the reconciler.
pub fn classify(status: u16, body: &str) -> ProviderError {
    match AwsError::parse(status, body) {
        Some(e) => map_error(&e),
        None => by_status(status, &format!("HTTP {status}: {}", snippet(body))),
    }
}

/// What an error answer without an AWS error code (a proxy's page, an empty body) means, by
/// its status alone.
pub fn by_status(status: u16, text: &str) -> ProviderError {
    let text = text.to_string();
    match status {
        401 | 403 => ProviderError::Unauthorized(text),
        429 | 503 => ProviderError::Throttled(text),
        404 => ProviderError::NotFound(text),
        _ => ProviderError::Other(text),
    }
}

/// Maps an AWS error code to the kind of error the reconciler acts on.
pub fn map_error(e: &AwsError) -> ProviderError {
    let text = match &e.request_id {
        Some(id) => format!("{}: {} (request {id})", e.code, e.message),
        None => format!("{}: {}", e.code, e.message),
    };
    let code = e.code.as_str();
    match code {
        "Throttling"
        | "ThrottlingException"
        | "RequestLimitExceeded"
        | "TooManyRequestsException"
        // SQS's name for it.
        | "RequestThrottled" => ProviderError::Throttled(text),
        // Both say the service is overloaded for the moment (AWS sends them with HTTP 503);
        // backing off is what helps.
        "ServiceUnavailable" | "Unavailable" => ProviderError::Throttled(text),
        "AuthFailure"
        | "InvalidClientTokenId"
        | "SignatureDoesNotMatch"
        | "UnauthorizedOperation"
        | "AccessDenied"
        | "AccessDeniedException"
        | "ExpiredToken"
        | "RequestExpired"
        | "MissingAuthenticationToken"
        | "UnrecognizedClientException"
        | "OptInRequired" => ProviderError::Unauthorized(text),
        "InsufficientInstanceCapacity" | "InsufficientCapacity" => {
            let (instance_type, zone) = capacity_details(&e.message);
            ProviderError::InsufficientCapacity {
                instance_type,
                zone,
                message: text,
            }
        }
        _ if code.starts_with("Invalid") && code.ends_with(".NotFound") => {
            ProviderError::NotFound(text)
        }
        "ValidationError" if says_group_not_found(&e.message) => ProviderError::NotFound(text),
        "ValidationError"
        | "InvalidParameterValue"
        | "InvalidParameterCombination"
        | "InvalidParameter"
        | "MissingParameter"
        | "InvalidAction"
        | "InvalidQueryParameter" => ProviderError::InvalidRequest(text),
        _ => ProviderError::Other(text),
    }
}

/// Auto Scaling reports a missing group as a ValidationError whose message says so
/// ("AutoScalingGroup name not found - …", "Group … not found").
fn says_group_not_found(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("not found") && (m.contains("group") || m.contains("autoscalinggroup"))
}

/// EC2 names the instance type and the zone only in the message text: "We currently do not
/// have sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1b)."
fn capacity_details(message: &str) -> (Option<String>, Option<String>) {
    let instance_type = message
        .split_once("sufficient ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .filter(|word| looks_like_instance_type(word))
        .map(str::to_string)
        .or_else(|| {
            message
                .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
                .map(|w| w.trim_end_matches('.'))
                .find(|w| looks_like_instance_type(w))
                .map(str::to_string)
        });
    let zone = message
        .split_once("Availability Zone you requested (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(zone, _)| zone.trim().to_string())
        .filter(|z| !z.is_empty());
    (instance_type, zone)
}

/// `g4dn.12xlarge`, `p4d.24xlarge`: a family and a size joined by one dot.
fn looks_like_instance_type(word: &str) -> bool {
    match word.split_once('.') {
        Some((family, size)) => {
            !family.is_empty()
                && family
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
                && family.starts_with(|c: char| c.is_ascii_lowercase())
                && !size.is_empty()
                && size.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && (size.ends_with("large") || size == "metal" || size.starts_with("metal"))
        }
        None => false,
    }
}

/// The start of a body that is not an AWS error, for the message.
pub fn snippet(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return "(empty body)".into();
    }
    body.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::error::ErrorKind;

    const EC2_CAPACITY: &str =
        include_str!("../../../tests/fixtures/aws/ec2_error_insufficient_capacity.xml");
    const EC2_NOT_FOUND: &str =
        include_str!("../../../tests/fixtures/aws/ec2_error_instance_not_found.xml");
    const EC2_LIMIT: &str =
        include_str!("../../../tests/fixtures/aws/ec2_error_request_limit_exceeded.xml");
    const EC2_AUTH: &str = include_str!("../../../tests/fixtures/aws/ec2_error_auth_failure.xml");
    const ASG_THROTTLING: &str =
        include_str!("../../../tests/fixtures/aws/autoscaling_error_throttling.xml");
    const ASG_NO_GROUP: &str =
        include_str!("../../../tests/fixtures/aws/autoscaling_error_group_not_found.xml");
    const ASG_VALIDATION: &str =
        include_str!("../../../tests/fixtures/aws/autoscaling_error_validation.xml");
    const ASG_TOKEN: &str =
        include_str!("../../../tests/fixtures/aws/autoscaling_error_invalid_client_token.xml");

    #[test]
    fn both_error_shapes_are_read_with_code_message_and_request_id() {
        let e = AwsError::parse(400, EC2_NOT_FOUND).expect("ec2 shape");
        assert_eq!(e.code, "InvalidInstanceID.NotFound");
        assert_eq!(e.message, "The instance ID 'i-1a2b3c4d' does not exist");
        assert_eq!(
            e.request_id.as_deref(),
            Some("ea966190-f9aa-478e-9ede-example")
        );

        let e = AwsError::parse(400, ASG_THROTTLING).expect("auto scaling shape");
        assert_eq!(e.code, "Throttling");
        assert_eq!(e.message, "Rate exceeded");
        assert_eq!(
            e.request_id.as_deref(),
            Some("c4f9b5e7-8f6d-11e6-9f3e-example")
        );
    }

    #[test]
    fn insufficient_capacity_carries_the_instance_type_and_zone_from_the_message() {
        match classify(500, EC2_CAPACITY) {
            ProviderError::InsufficientCapacity {
                instance_type,
                zone,
                message,
            } => {
                assert_eq!(instance_type.as_deref(), Some("p4d.24xlarge"));
                assert_eq!(zone.as_deref(), Some("us-east-1b"));
                assert!(
                    message.starts_with("InsufficientInstanceCapacity: "),
                    "{message}"
                );
            }
            other => panic!("expected InsufficientCapacity, got {other:?}"),
        }
        let e = AwsError {
            status: 400,
            code: "InsufficientCapacity".into(),
            message: "There is no Spot capacity available that matches your request.".into(),
            request_id: None,
        };
        assert!(matches!(
            map_error(&e),
            ProviderError::InsufficientCapacity {
                instance_type: None,
                zone: None,
                ..
            }
        ));
    }

    #[test]
    fn codes_map_to_the_kinds_the_reconciler_acts_on() {
        let kind = |status: u16, body: &str| classify(status, body).kind();
        assert_eq!(kind(400, ASG_THROTTLING), ErrorKind::Throttled);
        assert_eq!(kind(503, EC2_LIMIT), ErrorKind::Throttled);
        assert_eq!(kind(401, EC2_AUTH), ErrorKind::Unauthorized);
        assert_eq!(kind(403, ASG_TOKEN), ErrorKind::Unauthorized);
        assert_eq!(kind(400, EC2_NOT_FOUND), ErrorKind::NotFound);
        assert_eq!(kind(400, ASG_NO_GROUP), ErrorKind::NotFound);
        assert_eq!(kind(400, ASG_VALIDATION), ErrorKind::InvalidRequest);

        let code = |status: u16, code: &str, message: &str| {
            map_error(&AwsError {
                status,
                code: code.into(),
                message: message.into(),
                request_id: None,
            })
            .kind()
        };
        assert_eq!(
            code(400, "RequestLimitExceeded", "Request limit exceeded."),
            ErrorKind::Throttled
        );
        assert_eq!(
            code(400, "ThrottlingException", "slow down"),
            ErrorKind::Throttled
        );
        assert_eq!(
            code(503, "ServiceUnavailable", "try later"),
            ErrorKind::Throttled
        );
        assert_eq!(code(503, "Unavailable", "try later"), ErrorKind::Throttled);
        for c in [
            "AuthFailure",
            "InvalidClientTokenId",
            "SignatureDoesNotMatch",
            "UnauthorizedOperation",
            "AccessDenied",
            "ExpiredToken",
        ] {
            assert_eq!(code(403, c, "no"), ErrorKind::Unauthorized, "{c}");
        }
        assert_eq!(
            code(400, "InvalidLaunchTemplateId.NotFound", "no"),
            ErrorKind::NotFound
        );
        assert_eq!(
            code(400, "InvalidGroup.NotFound", "no"),
            ErrorKind::NotFound
        );
        for c in [
            "InvalidParameterValue",
            "InvalidParameterCombination",
            "MissingParameter",
        ] {
            assert_eq!(code(400, c, "bad"), ErrorKind::InvalidRequest, "{c}");
        }
        assert_eq!(code(400, "ResourceInUse", "busy"), ErrorKind::Other);
        assert_eq!(code(500, "InternalError", "oops"), ErrorKind::Other);
    }

    #[test]
    fn bodies_that_are_not_aws_errors_are_judged_by_the_status() {
        assert_eq!(classify(403, "").kind(), ErrorKind::Unauthorized);
        assert_eq!(classify(401, "").kind(), ErrorKind::Unauthorized);
        assert_eq!(classify(503, "").kind(), ErrorKind::Throttled);
        assert_eq!(
            classify(502, "<html>bad gateway</html>").kind(),
            ErrorKind::Other
        );
        let ProviderError::Other(text) = classify(500, "") else {
            panic!("expected Other")
        };
        assert!(text.contains("HTTP 500"), "{text}");
    }

    #[test]
    fn other_errors_keep_code_and_message() {
        let e = AwsError {
            status: 400,
            code: "ScalingActivityInProgress".into(),
            message: "Scaling activity is in progress".into(),
            request_id: Some("r-1".into()),
        };
        assert_eq!(
            map_error(&e),
            ProviderError::Other(
                "ScalingActivityInProgress: Scaling activity is in progress (request r-1)".into()
            )
        );
    }
}
