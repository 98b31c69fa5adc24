//! What the cloud adapters share about credentials: a cache of temporary credentials that is
//! refreshed a few minutes before they expire (never on every call, one fetch at a time), and
//! the secret-free description of the credentials in use that `GET /v1/providers/status`
//! reports.

mod cache;

pub use cache::{CredentialCache, Expiring, REFRESH_MARGIN_MS};

use serde::Serialize;
use std::sync::Arc;

/// Epoch milliseconds now; an input so tests move time instead of sleeping.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(crate::timefmt::now_ms)
}

/// Which credentials an adapter uses, without any secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CredentialReport {
    /// Where the credentials come from, e.g. `environment`, `profile`, `web_identity`,
    /// `container`, `instance_profile` (AWS); `access_key`, `rrsa`, `ecs_ram_role` (Alibaba
    /// Cloud); `service_account_key`, `metadata_server` (GCP).
    #[schema(example = "web_identity")]
    pub source: String,
    /// What the source names: a profile, a role ARN, an endpoint or a service account. Never
    /// a key or a token.
    #[schema(example = "arn:aws:iam::123456789012:role/trainscaler")]
    pub identity: Option<String>,
    /// When the credentials in use expire (RFC 3339); `null` for long-lived keys and before
    /// the first temporary credentials were fetched.
    #[schema(example = "2026-12-04T18:00:00Z")]
    pub expires_at: Option<String>,
}

impl CredentialReport {
    pub fn new(source: &str, identity: Option<String>, expires_at_ms: Option<i64>) -> Self {
        Self {
            source: source.to_string(),
            identity,
            expires_at: expires_at_ms.map(crate::timefmt::format_ms),
        }
    }
}
