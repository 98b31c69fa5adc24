//! How the AWS adapter is configured: region, endpoints and credentials, read from the same
//! environment variables and shared files the AWS CLI and SDKs use, so an operator configures
//! us like any other AWS tool. Where the credentials come from is decided by
//! [`chain`](super::credentials::chain).

use crate::provider::http::HttpSettings;
use crate::provider::retry::RetryPolicy;

pub use super::credentials::Source as CredentialSource;

/// The region used when neither `AWS_REGION` nor `AWS_DEFAULT_REGION` is set, as the CLI does.
pub const DEFAULT_REGION: &str = "us-east-1";

pub use crate::provider::secret::Secret;

/// One set of AWS credentials, long-lived or temporary.
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
    /// STS's own endpoint (`AWS_ENDPOINT_URL_STS`); wins over `endpoint`.
    pub sts_endpoint: Option<String>,
    /// Where credentials come from.
    pub credentials: CredentialSource,
    /// SQS's own endpoint (`AWS_ENDPOINT_URL_SQS`); wins over `endpoint` and the queue URL's.
    pub sqs_endpoint: Option<String>,
    pub http: HttpSettings,
    pub retry: RetryPolicy,
}

impl AwsSettings {
    /// Settings with AWS's public endpoints and the default HTTP and retry limits.
    pub fn new(region: impl Into<String>, credentials: impl Into<CredentialSource>) -> Self {
        Self {
            region: region.into(),
            endpoint: None,
            ec2_endpoint: None,
            autoscaling_endpoint: None,
            sts_endpoint: None,
            credentials: credentials.into(),
            sqs_endpoint: None,
            http: HttpSettings::default(),
            retry: RetryPolicy::default(),
        }
    }

    /// Settings from the process environment and the shared files; `Ok(None)` when no
    /// credential source is configured and IMDS is disabled (`AWS_EC2_METADATA_DISABLED`).
    pub fn from_env() -> Result<Option<Self>, String> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Settings from any variable lookup, so tests need not change the process environment
    /// (which parallel tests share). Empty values count as unset, as in the AWS CLI.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let chain =
            super::credentials::chain::resolve(&get, &|path| std::fs::read_to_string(path).ok())?;
        let Some(credentials) = chain.source else {
            return Ok(None);
        };
        let region = get("AWS_REGION")
            .or_else(|| get("AWS_DEFAULT_REGION"))
            .or(chain.profile_region)
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        let mut settings = Self::new(region, credentials);
        settings.endpoint = get("AWS_ENDPOINT_URL");
        settings.ec2_endpoint = get("AWS_ENDPOINT_URL_EC2");
        settings.autoscaling_endpoint = get("AWS_ENDPOINT_URL_AUTO_SCALING");
        settings.sts_endpoint = get("AWS_ENDPOINT_URL_STS");
        settings.sqs_endpoint = get("AWS_ENDPOINT_URL_SQS");
        Ok(Some(settings))
    }

    /// The static keys, when the source is static (tests and tools).
    pub fn static_credentials(&self) -> Option<&AwsCredentials> {
        match &self.credentials {
            CredentialSource::Static { credentials, .. } => Some(credentials),
            _ => None,
        }
    }

    /// Settings for unit tests: eu-west-1 with a fixed static key and no session token.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Self::new(
            "eu-west-1",
            AwsCredentials {
                access_key_id: "AKID".into(),
                secret_access_key: Secret::new("s"),
                session_token: None,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::test_env as lookup;

    #[test]
    fn no_source_and_imds_disabled_means_no_aws_settings() {
        let off = ("AWS_EC2_METADATA_DISABLED", "true");
        assert!(AwsSettings::from_lookup(lookup(&[off])).unwrap().is_none());
        assert!(
            AwsSettings::from_lookup(lookup(&[("AWS_ACCESS_KEY_ID", ""), off]))
                .unwrap()
                .is_none()
        );
        assert!(
            AwsSettings::from_lookup(lookup(&[
                ("AWS_SECRET_ACCESS_KEY", "s"),
                ("AWS_REGION", "eu-west-1"),
                off
            ]))
            .unwrap()
            .is_none()
        );
        let s = AwsSettings::from_lookup(lookup(&[]))
            .unwrap()
            .expect("IMDS");
        assert_eq!(s.credentials.kind(), "instance_profile");
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
            ("AWS_ENDPOINT_URL_STS", "http://sts.local"),
        ]))
        .unwrap()
        .expect("settings");
        let c = s.static_credentials().expect("static keys");
        assert_eq!(c.access_key_id, "AKIDEXAMPLE");
        assert_eq!(c.secret_access_key.expose(), "wJalrXUtnFEMI");
        assert_eq!(c.session_token.as_ref().map(Secret::expose), Some("tok"));
        assert_eq!(s.credentials.kind(), "environment");
        assert_eq!(s.sts_endpoint.as_deref(), Some("http://sts.local"));
        assert_eq!(s.region, "eu-west-1");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(s.ec2_endpoint.as_deref(), Some("http://ec2.local"));
        assert_eq!(s.autoscaling_endpoint.as_deref(), Some("http://asg.local"));
    }

    #[test]
    fn region_falls_back_to_the_default_region_variable_then_us_east_1() {
        let s = AwsSettings::from_lookup(lookup(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_DEFAULT_REGION", "ap-northeast-1"),
        ]))
        .unwrap()
        .expect("settings");
        assert_eq!(s.region, "ap-northeast-1");
        assert_eq!(s.endpoint, None);
        assert_eq!(s.static_credentials().unwrap().session_token, None);

        let s = AwsSettings::from_lookup(lookup(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ]))
        .unwrap()
        .expect("settings");
        assert_eq!(s.region, "us-east-1");
    }

    #[test]
    fn debug_output_never_shows_the_secret_or_the_token() {
        let s = AwsSettings::from_lookup(lookup(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret-value"),
            ("AWS_SESSION_TOKEN", "session-token-value"),
        ]))
        .unwrap()
        .expect("settings");
        let debug = format!("{s:?}");
        assert!(debug.contains("AKID"));
        assert!(!debug.contains("very-secret-value"), "{debug}");
        assert!(!debug.contains("session-token-value"), "{debug}");
    }
}
