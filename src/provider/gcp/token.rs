//! OAuth 2.0 access tokens for Google APIs, from one of two sources:
//!
//! - a service-account key file: a JWT (RS256, signed with the key's PKCS#8 private key by
//!   `ring`) is exchanged at the file's own `token_uri` with the JWT-bearer grant (RFC 7523),
//!   as Google's "OAuth 2.0 for server to server applications" describes;
//! - the metadata server (`/computeMetadata/v1/instance/service-accounts/default/token` with
//!   `Metadata-Flavor: Google`), which GCE and GKE Workload Identity serve.
//!
//! A token is cached and fetched again five minutes before it expires, one fetch at a time
//! however many calls wait for it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};

use super::settings::{Clock, CredentialSource, GcpSettings};
use crate::provider::retry::RetryPolicy;
use crate::provider::secret::Secret;
use crate::provider::{ProviderError, ProviderResult};

/// Read and change access to Compute Engine and read the Billing catalog; narrower scopes
/// are not offered for Compute Engine writes, so Google recommends this one with IAM roles.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The longest lifetime Google accepts for the assertion.
pub const ASSERTION_LIFETIME_SECS: i64 = 3600;
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub const METADATA_TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";
/// Fetch a new token this long before the cached one expires.
const REFRESH_MARGIN_MS: i64 = 300_000;

/// The parts of a service-account key file the exchange needs.
pub struct ServiceAccountKey {
    pub client_email: String,
    pub private_key_id: Option<String>,
    pub token_uri: String,
    pub project_id: Option<String>,
    key_pair: RsaKeyPair,
}

impl std::fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountKey")
            .field("client_email", &self.client_email)
            .field("private_key_id", &self.private_key_id)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct KeyFile {
    #[serde(default)]
    project_id: Option<String>,
    #[serde(default)]
    private_key_id: Option<String>,
    private_key: String,
    client_email: String,
    token_uri: String,
}

#[derive(Serialize)]
struct Header<'a> {
    alg: &'static str,
    typ: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kid: Option<&'a str>,
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
}

impl ServiceAccountKey {
    /// Reads a key file's JSON; the error says which field is wrong (never the key itself).
    pub fn from_json(text: &str) -> Result<Self, String> {
        // The type first: a user's or a workload identity pool's credentials file has other
        // fields, and saying which type it is helps more than a missing field.
        let kind = serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| format!("not a service-account key file: {e}"))?
            .get("type")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        if kind.as_deref() != Some("service_account") {
            return Err(format!(
                "`type` is {}; only `service_account` key files are supported",
                kind.map_or("missing".to_string(), |k| format!("`{k}`"))
            ));
        }
        let file: KeyFile = serde_json::from_str(text)
            .map_err(|e| format!("not a service-account key file: {e}"))?;
        let der = PrivatePkcs8KeyDer::from_pem_slice(file.private_key.as_bytes())
            .map_err(|e| format!("`private_key` is not a PKCS#8 PEM key: {e}"))?;
        let key_pair = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|e| format!("`private_key` is not an RSA key ring accepts: {e}"))?;
        if !file.token_uri.starts_with("https://") && !file.token_uri.starts_with("http://") {
            return Err("`token_uri` must be an http(s) URL".into());
        }
        Ok(Self {
            client_email: file.client_email,
            private_key_id: file.private_key_id.filter(|k| !k.is_empty()),
            token_uri: file.token_uri,
            project_id: file.project_id,
            key_pair,
        })
    }

    /// The signed JWT assertion for a token request made at `now_secs`.
    pub fn assertion(&self, now_secs: i64) -> Result<String, String> {
        let header = Header {
            alg: "RS256",
            typ: "JWT",
            kid: self.private_key_id.as_deref(),
        };
        let claims = Claims {
            iss: &self.client_email,
            scope: SCOPE,
            aud: &self.token_uri,
            iat: now_secs,
            exp: now_secs + ASSERTION_LIFETIME_SECS,
        };
        let signing_input = format!("{}.{}", json_part(&header), json_part(&claims));
        let mut signature = vec![0; self.key_pair.public().modulus_len()];
        self.key_pair
            .sign(
                &RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                signing_input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "RSA signing failed".to_string())?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

/// Base64url of a value's JSON, for the two JWT parts.
fn json_part<T: Serialize>(value: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default())
}

/// The answer of both token endpoints.
#[derive(Debug, Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<i64>,
}

#[derive(Debug, Deserialize, Default)]
struct OAuthError {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

#[derive(Clone)]
struct Cached {
    token: Secret,
    expires_at_ms: i64,
    refresh_at_ms: i64,
}

enum Source {
    Key(Box<ServiceAccountKey>),
    Metadata { base_url: String },
}

/// Which credentials are in use and how long the current token lasts, for a status endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CredentialStatus {
    /// `service_account_key` or `metadata_server`.
    pub source: &'static str,
    /// The service account's e-mail (key files), or the metadata server's address.
    pub identity: String,
    /// When the cached token expires, epoch milliseconds; `None` before the first call.
    pub token_expires_at_ms: Option<i64>,
}

/// A cached access token and the way to get a new one.
pub struct TokenSource {
    source: Source,
    http: reqwest::Client,
    retry: RetryPolicy,
    clock: Clock,
    cached: Mutex<Option<Cached>>,
    /// Held while a token is fetched, so that concurrent callers wait for one fetch.
    refreshing: tokio::sync::Mutex<()>,
    fetched: AtomicU64,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl TokenSource {
    /// Reads the key file now, so a bad one stops start-up with its reason.
    pub fn new(settings: &GcpSettings, http: reqwest::Client) -> ProviderResult<Self> {
        let source = match &settings.credentials {
            CredentialSource::KeyFile(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ProviderError::Unauthorized(format!(
                        "GOOGLE_APPLICATION_CREDENTIALS {}: {e}",
                        path.display()
                    ))
                })?;
                let key = ServiceAccountKey::from_json(&text).map_err(|e| {
                    ProviderError::Unauthorized(format!(
                        "GOOGLE_APPLICATION_CREDENTIALS {}: {e}",
                        path.display()
                    ))
                })?;
                Source::Key(Box::new(key))
            }
            CredentialSource::MetadataServer(host) => Source::Metadata {
                base_url: if host.starts_with("http://") || host.starts_with("https://") {
                    host.trim_end_matches('/').to_string()
                } else {
                    format!("http://{}", host.trim_end_matches('/'))
                },
            },
        };
        Ok(Self {
            source,
            http,
            retry: settings.retry,
            clock: settings.clock.clone(),
            cached: Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
            fetched: AtomicU64::new(0),
        })
    }

    /// A token valid for at least a while longer.
    pub async fn token(&self) -> ProviderResult<Secret> {
        if let Some(t) = self.fresh() {
            return Ok(t);
        }
        let _one_at_a_time = self.refreshing.lock().await;
        // Another caller may have fetched it while this one waited.
        if let Some(t) = self.fresh() {
            return Ok(t);
        }
        let answer = self.retry.run(|| self.fetch()).await?;
        let now = (self.clock)();
        let lifetime_ms = answer
            .expires_in
            .unwrap_or(3600)
            .max(0)
            .saturating_mul(1000);
        // A token with less than the margin left is refreshed halfway through instead.
        let early = REFRESH_MARGIN_MS.min(lifetime_ms / 2);
        let cached = Cached {
            token: Secret::new(answer.access_token),
            expires_at_ms: now.saturating_add(lifetime_ms),
            refresh_at_ms: now.saturating_add(lifetime_ms - early),
        };
        let token = cached.token.clone();
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some(cached);
        Ok(token)
    }

    /// Forgets the cached token (the API refused it), so the next call fetches one.
    pub fn invalidate(&self) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Tokens fetched so far.
    pub fn tokens_fetched(&self) -> u64 {
        self.fetched.load(Ordering::SeqCst)
    }

    pub fn status(&self) -> CredentialStatus {
        let expires = self
            .cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|c| c.expires_at_ms);
        let (source, identity) = match &self.source {
            Source::Key(k) => ("service_account_key", k.client_email.clone()),
            Source::Metadata { base_url } => ("metadata_server", base_url.clone()),
        };
        CredentialStatus {
            source,
            identity,
            token_expires_at_ms: expires,
        }
    }

    fn fresh(&self) -> Option<Secret> {
        let now = (self.clock)();
        self.cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|c| now < c.refresh_at_ms)
            .map(|c| c.token.clone())
    }

    async fn fetch(&self) -> ProviderResult<TokenAnswer> {
        self.fetched.fetch_add(1, Ordering::SeqCst);
        let (what, request) = match &self.source {
            Source::Key(key) => {
                let now_secs = (self.clock)().div_euclid(1000);
                let assertion = key.assertion(now_secs).map_err(ProviderError::Other)?;
                let form = [("grant_type", JWT_BEARER_GRANT), ("assertion", &assertion)];
                let body = serde_urlencoded::to_string(form)
                    .map_err(|e| ProviderError::Other(e.to_string()))?;
                let request = self
                    .http
                    .post(&key.token_uri)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body);
                (format!("token exchange at {}", key.token_uri), request)
            }
            Source::Metadata { base_url } => (
                format!("metadata server at {base_url}"),
                self.http
                    .get(format!("{base_url}{METADATA_TOKEN_PATH}"))
                    .header("Metadata-Flavor", "Google"),
            ),
        };
        let response = request.send().await.map_err(|e| {
            ProviderError::Unauthorized(format!(
                "no Google access token: the {what} did not answer ({}); set \
                 GOOGLE_APPLICATION_CREDENTIALS to a service-account key file outside GCP",
                ProviderError::from(e)
            ))
        })?;
        let status = response.status().as_u16();
        let body = response.text().await?;
        if !(200..300).contains(&status) {
            let e: OAuthError = serde_json::from_str(&body).unwrap_or_default();
            let detail = match (e.error, e.error_description) {
                (Some(code), Some(d)) => format!("{code}: {d}"),
                (Some(code), None) => code,
                _ => body.chars().take(200).collect(),
            };
            let text = format!("{what} answered HTTP {status}: {detail}");
            return Err(match status {
                429 | 500..=599 => ProviderError::Throttled(text),
                _ => ProviderError::Unauthorized(text),
            });
        }
        let answer: TokenAnswer = serde_json::from_str(&body).map_err(|e| {
            ProviderError::Unauthorized(format!("{what} answered without an access token: {e}"))
        })?;
        if answer.access_token.is_empty() {
            return Err(ProviderError::Unauthorized(format!(
                "{what} answered with an empty access token"
            )));
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_of_other_types_or_without_a_pkcs8_key_are_refused_with_the_field() {
        let e = ServiceAccountKey::from_json(
            r#"{"type": "authorized_user", "private_key": "", "client_email": "a", "token_uri": "https://x"}"#,
        )
        .unwrap_err();
        assert!(e.contains("authorized_user"), "{e}");
        let e = ServiceAccountKey::from_json(
            r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "client_email": "a", "token_uri": "https://x"}"#,
        )
        .unwrap_err();
        assert!(e.contains("private_key"), "{e}");
        assert!(
            ServiceAccountKey::from_json("{}")
                .unwrap_err()
                .contains("`type` is missing")
        );
        assert!(
            ServiceAccountKey::from_json("[")
                .unwrap_err()
                .contains("not a service-account key file")
        );
    }
}
