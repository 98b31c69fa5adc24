//! How the GCP adapter is configured: where its credentials come from (a service-account key
//! file named by `GOOGLE_APPLICATION_CREDENTIALS`, else the metadata server, whose address
//! `GCE_METADATA_HOST` overrides as Google's own libraries read it), the Compute Engine and
//! Cloud Billing endpoints (`TRAINSCALER_GCP_COMPUTE_ENDPOINT`,
//! `TRAINSCALER_GCP_BILLING_ENDPOINT`), and the shared HTTP, retry and clock settings.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::provider::http::HttpSettings;
use crate::provider::retry::RetryPolicy;

pub const ENV_CREDENTIALS: &str = "GOOGLE_APPLICATION_CREDENTIALS";
pub const ENV_METADATA_HOST: &str = "GCE_METADATA_HOST";
pub const ENV_COMPUTE_ENDPOINT: &str = "TRAINSCALER_GCP_COMPUTE_ENDPOINT";
pub const ENV_BILLING_ENDPOINT: &str = "TRAINSCALER_GCP_BILLING_ENDPOINT";

pub const DEFAULT_COMPUTE_ENDPOINT: &str = "https://compute.googleapis.com";
pub const DEFAULT_BILLING_ENDPOINT: &str = "https://cloudbilling.googleapis.com";
/// The link-local address Google's client libraries use when `GCE_METADATA_HOST` is unset;
/// GKE's metadata server (Workload Identity) answers there too.
pub const DEFAULT_METADATA_HOST: &str = "169.254.169.254";

/// Epoch milliseconds now; an input so tests can move time instead of sleeping.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Where access tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// A service-account key file (JSON, as `gcloud iam service-accounts keys create` writes).
    KeyFile(PathBuf),
    /// The metadata server at this host (and port): GCE, or GKE with Workload Identity.
    MetadataServer(String),
}

#[derive(Clone)]
pub struct GcpSettings {
    pub credentials: CredentialSource,
    /// Scheme and host (and port), without a trailing `/`.
    pub compute_endpoint: String,
    pub billing_endpoint: String,
    pub http: HttpSettings,
    pub retry: RetryPolicy,
    /// How long to follow one long-running operation before giving up on it.
    pub operation_timeout: Duration,
    pub clock: Clock,
}

impl fmt::Debug for GcpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcpSettings")
            .field("credentials", &self.credentials)
            .field("compute_endpoint", &self.compute_endpoint)
            .field("billing_endpoint", &self.billing_endpoint)
            .field("http", &self.http)
            .field("retry", &self.retry)
            .field("operation_timeout", &self.operation_timeout)
            .finish_non_exhaustive()
    }
}

impl GcpSettings {
    pub fn new(credentials: CredentialSource) -> Self {
        Self {
            credentials,
            compute_endpoint: DEFAULT_COMPUTE_ENDPOINT.to_string(),
            billing_endpoint: DEFAULT_BILLING_ENDPOINT.to_string(),
            http: HttpSettings::default(),
            retry: RetryPolicy::default(),
            operation_timeout: Duration::from_secs(300),
            clock: Arc::new(crate::timefmt::now_ms),
        }
    }

    /// Reads the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads settings through `lookup` (the environment in production, a map in tests). Empty
    /// values count as unset, as for the other adapters.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let credentials = match get(ENV_CREDENTIALS) {
            Some(path) => CredentialSource::KeyFile(PathBuf::from(path)),
            None => CredentialSource::MetadataServer(
                get(ENV_METADATA_HOST).unwrap_or_else(|| DEFAULT_METADATA_HOST.to_string()),
            ),
        };
        let mut settings = Self::new(credentials);
        let endpoint = |v: String| v.trim_end_matches('/').to_string();
        if let Some(e) = get(ENV_COMPUTE_ENDPOINT) {
            settings.compute_endpoint = endpoint(e);
        }
        if let Some(e) = get(ENV_BILLING_ENDPOINT) {
            settings.billing_endpoint = endpoint(e);
        }
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::test_env as lookup;

    #[test]
    fn a_key_file_wins_over_the_metadata_server() {
        let s = GcpSettings::from_lookup(lookup(&[
            (ENV_CREDENTIALS, "/etc/gcp/key.json"),
            (ENV_METADATA_HOST, "metadata.local:8080"),
        ]));
        assert_eq!(
            s.credentials,
            CredentialSource::KeyFile("/etc/gcp/key.json".into())
        );
        assert_eq!(s.compute_endpoint, DEFAULT_COMPUTE_ENDPOINT);
        assert_eq!(s.billing_endpoint, DEFAULT_BILLING_ENDPOINT);
    }

    #[test]
    fn without_a_key_file_the_metadata_server_answers_at_its_default_or_overridden_host() {
        let s = GcpSettings::from_lookup(lookup(&[(ENV_CREDENTIALS, " ")]));
        assert_eq!(
            s.credentials,
            CredentialSource::MetadataServer("169.254.169.254".into())
        );
        let s = GcpSettings::from_lookup(lookup(&[
            (ENV_METADATA_HOST, "127.0.0.1:8989"),
            (ENV_COMPUTE_ENDPOINT, "http://127.0.0.1:1/"),
            (ENV_BILLING_ENDPOINT, "http://127.0.0.1:2"),
        ]));
        assert_eq!(
            s.credentials,
            CredentialSource::MetadataServer("127.0.0.1:8989".into())
        );
        assert_eq!(s.compute_endpoint, "http://127.0.0.1:1");
        assert_eq!(s.billing_endpoint, "http://127.0.0.1:2");
    }
}
