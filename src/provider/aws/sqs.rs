//! Amazon SQS through its JSON protocol (`X-Amz-Target: AmazonSQS.<Action>`, a JSON body,
//! `application/x-amz-json-1.0`), signed with SigV4: just the two calls the event-queue
//! poller needs, `ReceiveMessage` (long poll) and `DeleteMessage`.
//!
//! A request goes to the queue URL's own origin (`https://sqs.<region>.amazonaws.com`), or to
//! `AWS_ENDPOINT_URL_SQS` / `AWS_ENDPOINT_URL` when set, and is signed for the region the
//! queue URL names (the adapter's region when it names none, as a local endpoint does).

use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use super::credentials::AwsCredentialsProvider;
use super::error;
use super::settings::{AwsCredentials, AwsSettings};
use super::sign::sign_post;
use crate::provider::{ProviderError, ProviderResult};

const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// The longest long poll SQS allows.
pub const MAX_WAIT_SECONDS: u32 = 20;
/// The most messages one ReceiveMessage returns.
pub const MAX_MESSAGES: u32 = 10;

/// One received message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Message {
    pub message_id: String,
    /// What DeleteMessage needs; new on every receive.
    pub receipt_handle: String,
    #[serde(default)]
    pub body: String,
    /// System attributes asked for (`ApproximateReceiveCount`).
    #[serde(default)]
    pub attributes: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Received {
    #[serde(rename = "Messages", default)]
    messages: Vec<Message>,
}

/// A queue, and where and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    pub url: String,
    endpoint: Url,
    host: String,
    region: String,
}

impl Queue {
    /// Reads a queue URL; the endpoint and signing region follow from it and `settings`.
    pub fn new(queue_url: &str, settings: &AwsSettings) -> Result<Self, String> {
        let url = Url::parse(queue_url).map_err(|e| format!("`{queue_url}` is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("`{queue_url}` is not an http(s) queue URL"));
        }
        if url.path().trim_matches('/').split('/').count() != 2 {
            return Err(format!(
                "`{queue_url}` is not a queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)"
            ));
        }
        let endpoint_text = settings
            .sqs_endpoint
            .as_ref()
            .or(settings.endpoint.as_ref())
            .cloned()
            .unwrap_or_else(|| url.origin().ascii_serialization());
        let endpoint = Url::parse(&endpoint_text)
            .map_err(|e| format!("the SQS endpoint `{endpoint_text}` is not a URL: {e}"))?;
        let host = match (endpoint.host_str(), endpoint.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => return Err(format!("the SQS endpoint `{endpoint_text}` names no host")),
        };
        let region = region_of(url.host_str().unwrap_or_default())
            .unwrap_or(&settings.region)
            .to_string();
        Ok(Self {
            url: queue_url.to_string(),
            endpoint,
            host,
            region,
        })
    }

    pub fn region(&self) -> &str {
        &self.region
    }
}

/// The region of `sqs.<region>.amazonaws.com` (or `.amazonaws.com.cn`) and of the legacy
/// `<region>.queue.amazonaws.com`.
fn region_of(host: &str) -> Option<&str> {
    let labels: Vec<&str> = host.split('.').collect();
    match labels.as_slice() {
        ["sqs", region, "amazonaws", "com", ..] => Some(region),
        [region, "queue", "amazonaws", "com", ..] => Some(region),
        _ => None,
    }
}

/// Sends SQS calls with one HTTP client whose timeout outlasts a long poll.
#[derive(Debug)]
pub struct SqsClient {
    settings: AwsSettings,
    credentials: AwsCredentialsProvider,
    http: reqwest::Client,
}

impl SqsClient {
    pub fn new(settings: AwsSettings) -> ProviderResult<Self> {
        let mut http = settings.http;
        // A long poll holds the request for up to 20 s before the answer starts.
        http.timeout = http
            .timeout
            .max(Duration::from_secs(u64::from(MAX_WAIT_SECONDS) + 15));
        Ok(Self {
            http: crate::provider::http::client(http)?,
            credentials: AwsCredentialsProvider::new(
                &settings,
                crate::provider::credentials::system_clock(),
            )?,
            settings,
        })
    }

    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    /// The credentials for the next request, from the same chain as the adapter's (cached,
    /// refreshed before they expire).
    async fn credentials(&self) -> ProviderResult<AwsCredentials> {
        self.credentials.credentials().await
    }

    /// Long-polls `queue` for up to `wait_seconds` (at most 20) and returns up to
    /// `max_messages` (at most 10) messages, each with its receive count.
    pub async fn receive(
        &self,
        queue: &Queue,
        wait_seconds: u32,
        max_messages: u32,
    ) -> ProviderResult<Vec<Message>> {
        let body = json!({
            "QueueUrl": queue.url,
            "MaxNumberOfMessages": max_messages.clamp(1, MAX_MESSAGES),
            "WaitTimeSeconds": wait_seconds.min(MAX_WAIT_SECONDS),
            "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
        });
        let answer = self.call(queue, "ReceiveMessage", &body).await?;
        let received: Received = serde_json::from_value(answer).map_err(|e| {
            ProviderError::Other(format!("SQS ReceiveMessage answered an unknown shape: {e}"))
        })?;
        Ok(received.messages)
    }

    /// Deletes a received message; deleting one already deleted is not an error in SQS.
    pub async fn delete(&self, queue: &Queue, receipt_handle: &str) -> ProviderResult<()> {
        let body = json!({"QueueUrl": queue.url, "ReceiptHandle": receipt_handle});
        self.call(queue, "DeleteMessage", &body).await.map(|_| ())
    }

    async fn call(&self, queue: &Queue, action: &str, body: &Value) -> ProviderResult<Value> {
        let body = body.to_string();
        let target = format!("AmazonSQS.{action}");
        let credentials = self.credentials().await?;
        let signed = sign_post(
            &credentials,
            &queue.region,
            "sqs",
            queue.endpoint.as_str(),
            &[
                ("host", &queue.host),
                ("content-type", CONTENT_TYPE),
                ("x-amz-target", &target),
            ],
            body.as_bytes(),
            SystemTime::now(),
        )?;
        let mut request = self
            .http
            .post(queue.endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
            .header("x-amz-target", &target)
            .body(body);
        for (name, value) in signed {
            request = request.header(name, value);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let query_error = response
            .headers()
            .get("x-amzn-query-error")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = response.text().await?;
        if (200..300).contains(&status) {
            if text.trim().is_empty() {
                return Ok(json!({}));
            }
            return serde_json::from_str(&text).map_err(|e| {
                ProviderError::Other(format!("SQS {action} answered invalid JSON: {e}"))
            });
        }
        Err(classify(status, &text, query_error.as_deref()))
    }
}

/// An SQS JSON-protocol error: `{"__type": "com.amazonaws.sqs#QueueDoesNotExist",
/// "message": "..."}`, with the legacy code in `x-amzn-query-error` (`Code;Sender`).
pub fn classify(status: u16, body: &str, query_error: Option<&str>) -> ProviderError {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let kind = parsed
        .get("__type")
        .and_then(Value::as_str)
        .map(|t| t.rsplit('#').next().unwrap_or(t))
        .unwrap_or_default();
    let legacy = query_error
        .and_then(|q| q.split(';').next())
        .unwrap_or_default();
    let message = parsed
        .get("message")
        .or_else(|| parsed.get("Message"))
        .and_then(Value::as_str)
        .unwrap_or(body);
    if kind == "QueueDoesNotExist" || legacy == "AWS.SimpleQueueService.NonExistentQueue" {
        return ProviderError::NotFound(format!("SQS {kind}: {message} (HTTP {status})"));
    }
    if kind.is_empty() {
        return error::by_status(status, &format!("SQS: {}", error::snippet(body)));
    }
    // The same codes mean the same to the reconciler whichever AWS API sent them.
    error::map_error(&error::AwsError {
        status,
        code: kind.to_string(),
        message: format!("SQS: {message} (HTTP {status})"),
        request_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_url_names_its_endpoint_and_region_unless_overridden() {
        let q = Queue::new(
            "https://sqs.us-west-2.amazonaws.com/123456789012/spot-events",
            &AwsSettings::for_tests(),
        )
        .unwrap();
        assert_eq!(q.endpoint.as_str(), "https://sqs.us-west-2.amazonaws.com/");
        assert_eq!(q.region(), "us-west-2");
        let legacy = Queue::new(
            "https://ap-south-1.queue.amazonaws.com/123456789012/q",
            &AwsSettings::for_tests(),
        )
        .unwrap();
        assert_eq!(legacy.region(), "ap-south-1");
        let local = Queue::new(
            "http://127.0.0.1:5000/123456789012/q",
            &AwsSettings::for_tests(),
        )
        .unwrap();
        assert_eq!(
            (local.region(), local.host.as_str()),
            ("eu-west-1", "127.0.0.1:5000")
        );
        let mut s = AwsSettings::for_tests();
        s.endpoint = Some("http://moto:5000".into());
        s.sqs_endpoint = Some("http://sqs.local:9324".into());
        let q = Queue::new("https://sqs.us-east-1.amazonaws.com/1/q", &s).unwrap();
        assert_eq!(q.host, "sqs.local:9324");
        assert_eq!(q.region(), "us-east-1");
    }

    #[test]
    fn things_that_are_not_queue_urls_are_refused() {
        for bad in [
            "sqs.us-east-1.amazonaws.com/1/q",
            "ftp://sqs.us-east-1.amazonaws.com/1/q",
            "https://sqs.us-east-1.amazonaws.com/q",
            "https://sqs.us-east-1.amazonaws.com/1/q/extra",
        ] {
            assert!(Queue::new(bad, &AwsSettings::for_tests()).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_protocol_errors_are_classified_by_type_and_legacy_code() {
        let missing = r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#;
        assert!(matches!(
            classify(400, missing, None),
            ProviderError::NotFound(_)
        ));
        assert!(matches!(
            classify(
                400,
                "{}",
                Some("AWS.SimpleQueueService.NonExistentQueue;Sender")
            ),
            ProviderError::NotFound(_)
        ));
        let denied =
            r#"{"__type":"com.amazon.coral.service#AccessDeniedException","message":"no"}"#;
        assert!(matches!(
            classify(400, denied, None),
            ProviderError::Unauthorized(_)
        ));
        assert!(matches!(
            classify(
                400,
                r#"{"__type":"com.amazonaws.sqs#RequestThrottled"}"#,
                None
            ),
            ProviderError::Throttled(_)
        ));
        // Without a code, the status decides, as for EC2 and Auto Scaling: 503 is overload.
        assert!(matches!(
            classify(503, "<html>", None),
            ProviderError::Throttled(_)
        ));
        assert!(matches!(
            classify(
                400,
                r#"{"__type":"com.amazonaws.sqs#InvalidParameterValue"}"#,
                None
            ),
            ProviderError::InvalidRequest(_)
        ));
    }
}
