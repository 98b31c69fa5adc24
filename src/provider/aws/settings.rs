//! How the AWS adapter is configured: region, endpoints and credentials, read from the same
//! environment variables the AWS CLI and SDKs use, so an operator configures us like any other
//! AWS tool.
//!
//! Only static keys are read (access key, secret, optional session token). Shared profile
//! files, instance profiles (IMDS), ECS task roles and IRSA web identity are not supported.

use crate::provider::http::HttpSettings;
use crate::provider::retry::RetryPolicy;

/// The region used when neither `AWS_REGION` nor `AWS_DEFAULT_REGION` is set, as the CLI does.
pub const DEFAULT_REGION: &str = "us-east-1";

pub use crate::provider::secret::Secret;

/// Static AWS credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    /// Present for temporary credentials (STS); sent as `X-Amz-Security-Token`.
    pub session_token: Option<Secret>,
}

/// Everything the AWS adapter needs.
#[derive(Debug, Clone)]
pub struct AwsSettings {
    /// The region used where a call names none (groups and refreshes carry their own).
    pub region: String,
    /// One endpoint for every service (`AWS_ENDPOINT_URL`), e.g. a moto server.
    pub endpoint: Option<String>,
    /// EC2's own endpoint (`AWS_ENDPOINT_URL_EC2`); wins over `endpoint`.
    pub ec2_endpoint: Option<String>,
    /// Auto Scaling's own endpoint (`AWS_ENDPOINT_URL_AUTO_SCALING`); wins over `endpoint`.
    pub autoscaling_endpoint: Option<String>,
    /// SQS's own endpoint (`AWS_ENDPOINT_URL_SQS`); wins over `endpoint` and the queue URL's.
    pub sqs_endpoint: Option<String>,
    pub credentials: AwsCredentials,
    pub http: HttpSettings,
    pub retry: RetryPolicy,
}

impl AwsSettings {
    /// Settings with AWS's public endpoints and the default HTTP and retry limits.
    pub fn new(region: impl Into<String>, credentials: AwsCredentials) -> Self {
        Self {
            region: region.into(),
            endpoint: None,
            ec2_endpoint: None,
            autoscaling_endpoint: None,
            sqs_endpoint: None,
            credentials,
            http: HttpSettings::default(),
            retry: RetryPolicy::default(),
        }
    }

    /// Settings from the process environment; `None` when no access key is set.
    pub fn from_env() -> Option<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Settings from any variable lookup, so tests need not change the process environment
    /// (which parallel tests share). Empty values count as unset, as in the AWS CLI.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let access_key_id = get("AWS_ACCESS_KEY_ID")?;
        let credentials = AwsCredentials {
            access_key_id,
            secret_access_key: Secret::new(get("AWS_SECRET_ACCESS_KEY").unwrap_or_default()),
            session_token: get("AWS_SESSION_TOKEN").map(Secret::new),
        };
        let region = get("AWS_REGION")
            .or_else(|| get("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        let mut settings = Self::new(region, credentials);
        settings.endpoint = get("AWS_ENDPOINT_URL");
        settings.ec2_endpoint = get("AWS_ENDPOINT_URL_EC2");
        settings.autoscaling_endpoint = get("AWS_ENDPOINT_URL_AUTO_SCALING");
        settings.sqs_endpoint = get("AWS_ENDPOINT_URL_SQS");
        Some(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::test_env as lookup;

    #[test]
    fn no_access_key_means_no_aws_settings() {
        assert!(AwsSettings::from_lookup(lookup(&[])).is_none());
        assert!(AwsSettings::from_lookup(lookup(&[("AWS_ACCESS_KEY_ID", "")])).is_none());
        assert!(
            AwsSettings::from_lookup(lookup(&[
                ("AWS_SECRET_ACCESS_KEY", "s"),
                ("AWS_REGION", "eu-west-1")
            ]))
            .is_none()
        );
    }

    #[test]
    fn keys_token_region_and_endpoints_are_read_from_the_sdk_variables() {
        let s = AwsSettings::from_lookup(lookup(&[
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI"),
            ("AWS_SESSION_TOKEN", "tok"),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_DEFAULT_REGION", "us-west-2"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("AWS_ENDPOINT_URL_EC2", "http://ec2.local"),
            ("AWS_ENDPOINT_URL_AUTO_SCALING", "http://asg.local"),
        ]))
        .expect("settings");
        assert_eq!(s.credentials.access_key_id, "AKIDEXAMPLE");
        assert_eq!(s.credentials.secret_access_key.expose(), "wJalrXUtnFEMI");
        assert_eq!(
            s.credentials.session_token.as_ref().map(Secret::expose),
            Some("tok")
        );
        assert_eq!(s.region, "eu-west-1");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(s.ec2_endpoint.as_deref(), Some("http://ec2.local"));
        assert_eq!(s.autoscaling_endpoint.as_deref(), Some("http://asg.local"));
    }

    #[test]
    fn region_falls_back_to_the_default_region_variable_then_us_east_1() {
        let s = AwsSettings::from_lookup(lookup(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_DEFAULT_REGION", "ap-northeast-1"),
        ]))
        .expect("settings");
        assert_eq!(s.region, "ap-northeast-1");
        assert_eq!(s.endpoint, None);
        assert_eq!(s.credentials.session_token, None);

        let s =
            AwsSettings::from_lookup(lookup(&[("AWS_ACCESS_KEY_ID", "AKID")])).expect("settings");
        assert_eq!(s.region, "us-east-1");
    }

    #[test]
    fn debug_output_never_shows_the_secret_or_the_token() {
        let s = AwsSettings::from_lookup(lookup(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret-value"),
            ("AWS_SESSION_TOKEN", "session-token-value"),
        ]))
        .expect("settings");
        let debug = format!("{s:?}");
        assert!(debug.contains("AKID"));
        assert!(!debug.contains("very-secret-value"), "{debug}");
        assert!(!debug.contains("session-token-value"), "{debug}");
    }
}
