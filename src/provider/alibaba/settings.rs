//! How the Alibaba Cloud adapter is configured: an AccessKey pair, a default region, an optional
//! endpoint override (the mock in tests), and the shared HTTP and retry limits.

use crate::provider::http::HttpSettings;
use crate::provider::retry::RetryPolicy;

/// Used when `ALIBABA_CLOUD_REGION_ID` is unset: the region the ECS documentation's examples use.
pub const DEFAULT_REGION: &str = "cn-hangzhou";

pub const ENV_ACCESS_KEY_ID: &str = "ALIBABA_CLOUD_ACCESS_KEY_ID";
pub const ENV_ACCESS_KEY_SECRET: &str = "ALIBABA_CLOUD_ACCESS_KEY_SECRET";
pub const ENV_REGION_ID: &str = "ALIBABA_CLOUD_REGION_ID";
pub const ENV_ENDPOINT_URL: &str = "ALIBABA_CLOUD_ENDPOINT_URL";

pub use crate::provider::secret::Secret;

/// An AccessKey pair of an Alibaba Cloud account or RAM user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub access_key_secret: Secret,
}

#[derive(Debug, Clone)]
pub struct AlibabaSettings {
    /// The region used where a call names none (pools name their own region).
    pub region: String,
    /// One base URL (scheme, host, optional port) for ECS and ESS alike, replacing the regional
    /// endpoints; `None` in production.
    pub endpoint: Option<String>,
    pub credentials: Credentials,
    pub http: HttpSettings,
    pub retry: RetryPolicy,
}

impl AlibabaSettings {
    pub fn new(credentials: Credentials) -> Self {
        Self {
            region: DEFAULT_REGION.to_string(),
            endpoint: None,
            credentials,
            http: HttpSettings::default(),
            retry: RetryPolicy::default(),
        }
    }

    /// Reads the process environment; `None` when no AccessKey pair is configured.
    pub fn from_env() -> Option<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads settings through `lookup` (the environment in production, a map in tests). Empty
    /// values count as unset, because compose files and Helm charts often pass `NAME=`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let access_key_id = get(ENV_ACCESS_KEY_ID)?;
        let access_key_secret = get(ENV_ACCESS_KEY_SECRET)?;
        let mut settings = Self::new(Credentials {
            access_key_id,
            access_key_secret: Secret::new(access_key_secret),
        });
        if let Some(region) = get(ENV_REGION_ID) {
            settings.region = region;
        }
        settings.endpoint = get(ENV_ENDPOINT_URL).map(|e| e.trim_end_matches('/').to_string());
        Some(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::test_env as lookup;

    #[test]
    fn an_access_key_pair_is_required() {
        assert!(AlibabaSettings::from_lookup(lookup(&[])).is_none());
        assert!(AlibabaSettings::from_lookup(lookup(&[(ENV_ACCESS_KEY_ID, "id")])).is_none());
        assert!(
            AlibabaSettings::from_lookup(lookup(&[
                (ENV_ACCESS_KEY_ID, ""),
                (ENV_ACCESS_KEY_SECRET, "s")
            ]))
            .is_none()
        );
    }

    #[test]
    fn region_defaults_and_the_endpoint_override_is_read() {
        let s = AlibabaSettings::from_lookup(lookup(&[
            (ENV_ACCESS_KEY_ID, "id"),
            (ENV_ACCESS_KEY_SECRET, "s"),
        ]))
        .expect("settings");
        assert_eq!(s.region, DEFAULT_REGION);
        assert_eq!(s.endpoint, None);

        let s = AlibabaSettings::from_lookup(lookup(&[
            (ENV_ACCESS_KEY_ID, "id"),
            (ENV_ACCESS_KEY_SECRET, "s"),
            (ENV_REGION_ID, "ap-southeast-1"),
            (ENV_ENDPOINT_URL, "http://127.0.0.1:9000/"),
        ]))
        .expect("settings");
        assert_eq!(s.region, "ap-southeast-1");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(s.credentials.access_key_id, "id");
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let s = AlibabaSettings::new(Credentials {
            access_key_id: "LTAIexample".into(),
            access_key_secret: Secret::new("very-secret-value"),
        });
        let text = format!("{s:?}");
        assert!(!text.contains("very-secret-value"), "{text}");
        assert!(text.contains("LTAIexample"));
    }
}
