//! Alibaba Cloud credentials, in the order Alibaba's credentials SDKs follow: an AccessKey
//! pair from the environment (with `ALIBABA_CLOUD_SECURITY_TOKEN` for an STS token), RRSA on
//! ACK (an OIDC token file exchanged through STS `AssumeRoleWithOIDC`), then the ECS
//! instance's RAM role from the instance metadata service. Temporary credentials are cached
//! until a few minutes before they expire.
//!
//! [`AlibabaCredentialsProvider`] is the one type every Alibaba caller asks for current
//! credentials: the RPC client of the adapter, and anything else that signs Alibaba requests.

mod fetch;

use std::path::PathBuf;
use std::time::Duration;

use super::settings::{AlibabaSettings, Credentials};
use crate::provider::ProviderResult;
use crate::provider::credentials::{Clock, CredentialCache, CredentialReport, Expiring};
use crate::provider::http::HttpSettings;
use crate::provider::secret::Secret;

pub use fetch::{
    METADATA_CREDENTIALS_PATH, METADATA_TOKEN_HEADER, METADATA_TOKEN_PATH,
    METADATA_TOKEN_TTL_HEADER, STS_VERSION,
};

/// The ECS instance metadata service.
pub const METADATA_ENDPOINT: &str = "http://100.100.100.200";
/// STS's public endpoint when no region is named.
pub const STS_ENDPOINT: &str = "https://sts.aliyuncs.com";
pub const DEFAULT_SESSION_NAME: &str = "trainscaler";

/// Where the adapter's credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// An AccessKey pair (and an STS token someone else refreshes, when given).
    AccessKey {
        credentials: Credentials,
        security_token: Option<Secret>,
    },
    /// RRSA: the OIDC token in `token_file` (rotated, so read on every fetch) exchanged for
    /// the role's STS token.
    Rrsa {
        role_arn: String,
        oidc_provider_arn: String,
        token_file: PathBuf,
        session_name: String,
        sts_endpoint: String,
    },
    /// The RAM role attached to this ECS instance.
    EcsRamRole { role: String, endpoint: String },
}

impl From<Credentials> for CredentialSource {
    fn from(credentials: Credentials) -> Self {
        Self::AccessKey {
            credentials,
            security_token: None,
        }
    }
}

impl CredentialSource {
    /// The name `GET /v1/providers/status` reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::AccessKey { .. } => "access_key",
            Self::Rrsa { .. } => "rrsa",
            Self::EcsRamRole { .. } => "ecs_ram_role",
        }
    }

    fn identity(&self) -> Option<String> {
        match self {
            Self::AccessKey { credentials, .. } => Some(credentials.access_key_id.clone()),
            Self::Rrsa { role_arn, .. } => Some(role_arn.clone()),
            Self::EcsRamRole { role, .. } => Some(role.clone()),
        }
    }
}

/// What a signed call needs: the AccessKey pair and, for STS credentials, the token sent as
/// the `SecurityToken` parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCredentials {
    pub access_key_id: String,
    pub access_key_secret: Secret,
    pub security_token: Option<Secret>,
}

/// Current Alibaba Cloud credentials from one configured source. Cheap to share in an `Arc`.
#[derive(Debug)]
pub struct AlibabaCredentialsProvider {
    source: CredentialSource,
    http: reqwest::Client,
    metadata_http: reqwest::Client,
    cache: CredentialCache<SessionCredentials>,
}

impl AlibabaCredentialsProvider {
    pub fn new(settings: &AlibabaSettings, clock: Clock) -> ProviderResult<Self> {
        Ok(Self {
            source: settings.credentials.clone(),
            http: crate::provider::http::client(settings.http)?,
            metadata_http: crate::provider::http::client(HttpSettings {
                connect_timeout: Duration::from_secs(1),
                timeout: Duration::from_secs(5),
            })?,
            cache: CredentialCache::new(clock),
        })
    }

    /// From the process environment, as the adapter reads it; `None` when nothing is set.
    pub fn from_env() -> ProviderResult<Option<Self>> {
        let Some(settings) = AlibabaSettings::from_env() else {
            return Ok(None);
        };
        Self::new(&settings, crate::provider::credentials::system_clock()).map(Some)
    }

    /// Credentials valid for a while longer (cached, or fetched when near expiry).
    pub async fn credentials(&self) -> ProviderResult<SessionCredentials> {
        self.cache.get(|| self.fetch()).await
    }

    /// Forgets the cached credentials after Alibaba refused them.
    pub fn invalidate(&self) {
        self.cache.invalidate();
    }

    /// Fetches made so far.
    pub fn fetches(&self) -> u64 {
        self.cache.fetches()
    }

    pub fn source(&self) -> &CredentialSource {
        &self.source
    }

    /// Which source is in use and when its credentials expire, without secrets.
    pub fn report(&self) -> CredentialReport {
        CredentialReport::new(
            self.source.kind(),
            self.source.identity(),
            self.cache.expires_at_ms(),
        )
    }

    async fn fetch(&self) -> ProviderResult<Expiring<SessionCredentials>> {
        match &self.source {
            CredentialSource::AccessKey {
                credentials,
                security_token,
            } => Ok(Expiring {
                value: SessionCredentials {
                    access_key_id: credentials.access_key_id.clone(),
                    access_key_secret: credentials.access_key_secret.clone(),
                    security_token: security_token.clone(),
                },
                expires_at_ms: None,
            }),
            CredentialSource::Rrsa {
                role_arn,
                oidc_provider_arn,
                token_file,
                session_name,
                sts_endpoint,
            } => {
                fetch::assume_role_with_oidc(
                    &self.http,
                    sts_endpoint,
                    role_arn,
                    oidc_provider_arn,
                    token_file,
                    session_name,
                )
                .await
            }
            CredentialSource::EcsRamRole { role, endpoint } => {
                fetch::ecs_ram_role(&self.metadata_http, endpoint, role).await
            }
        }
    }
}
