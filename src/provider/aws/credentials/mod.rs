//! AWS credentials the way AWS's own tools find them (see [`chain`]), fetched when needed and
//! cached until a few minutes before they expire.
//!
//! [`AwsCredentialsProvider`] is the one type every AWS caller asks for current credentials:
//! the Query API client of the adapter, and anything else that signs AWS requests.

pub mod chain;
pub mod metadata;
pub mod profile;
pub mod source;
pub mod sts;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::provider::aws::settings::{AwsCredentials, AwsSettings};
use crate::provider::credentials::{Clock, CredentialCache, CredentialReport, Expiring};
use crate::provider::http::HttpSettings;
use crate::provider::{ProviderError, ProviderResult};
pub use chain::Chain;
pub use source::Source;
use sts::Sts;

/// Current AWS credentials from one configured source. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct AwsCredentialsProvider {
    source: Source,
    sts: Sts,
    http: reqwest::Client,
    /// Short timeouts: a metadata endpoint that does not answer at once is not there.
    metadata_http: reqwest::Client,
    cache: CredentialCache<AwsCredentials>,
}

type Fetch<'a> =
    Pin<Box<dyn Future<Output = ProviderResult<Expiring<AwsCredentials>>> + Send + 'a>>;

impl AwsCredentialsProvider {
    /// The provider for an adapter's settings: its source, region and STS endpoint.
    pub fn new(settings: &AwsSettings, clock: Clock) -> ProviderResult<Self> {
        let http = crate::provider::http::client(settings.http)?;
        let metadata_http = crate::provider::http::client(HttpSettings {
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
        })?;
        Ok(Self {
            source: settings.credentials.clone(),
            sts: Sts::new(
                settings
                    .sts_endpoint
                    .clone()
                    .or_else(|| settings.endpoint.clone()),
                &settings.region,
            ),
            http,
            metadata_http,
            cache: CredentialCache::new(clock),
        })
    }

    /// From the process environment, as the adapter reads it; `Ok(None)` when no source is
    /// configured and IMDS is disabled.
    pub fn from_env() -> Result<Option<Self>, String> {
        let Some(settings) = AwsSettings::from_env()? else {
            return Ok(None);
        };
        Self::new(&settings, crate::provider::credentials::system_clock())
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// Credentials valid for a while longer: cached ones, or freshly fetched ones when the
    /// cached ones are within minutes of expiring.
    pub async fn credentials(&self) -> ProviderResult<AwsCredentials> {
        self.cache.get(|| self.fetch(&self.source)).await
    }

    /// Forgets the cached credentials after AWS refused them, so the next call fetches new ones.
    pub fn invalidate(&self) {
        self.cache.invalidate();
    }

    /// Fetches made so far, for tests that show credentials are not fetched on every call.
    pub fn fetches(&self) -> u64 {
        self.cache.fetches()
    }

    pub fn source(&self) -> &Source {
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

    fn fetch<'a>(&'a self, source: &'a Source) -> Fetch<'a> {
        Box::pin(async move {
            match source {
                Source::Static { credentials, .. } => Ok(Expiring {
                    value: credentials.clone(),
                    expires_at_ms: None,
                }),
                Source::AssumeRole {
                    role_arn,
                    session_name,
                    external_id,
                    base,
                } => {
                    let base = self.fetch(base).await?.value;
                    self.sts
                        .assume_role(
                            &self.http,
                            &base,
                            role_arn,
                            session_name,
                            external_id.as_deref(),
                        )
                        .await
                }
                Source::WebIdentity {
                    role_arn,
                    session_name,
                    token_file,
                } => {
                    let token = std::fs::read_to_string(token_file).map_err(|e| {
                        ProviderError::Unauthorized(format!(
                            "web identity token file {}: {e}",
                            token_file.display()
                        ))
                    })?;
                    self.sts
                        .assume_role_with_web_identity(
                            &self.http,
                            token.trim(),
                            role_arn,
                            session_name,
                        )
                        .await
                }
                Source::Container {
                    uri,
                    token_file,
                    token,
                } => {
                    metadata::container(
                        &self.metadata_http,
                        uri,
                        token_file.as_deref(),
                        token.as_ref(),
                    )
                    .await
                }
                Source::InstanceProfile { endpoint } => {
                    metadata::instance_profile(&self.metadata_http, endpoint).await
                }
            }
        })
    }
}
