//! One authorised call to a Google REST API (Compute Engine `compute/v1`, Cloud Billing
//! `v1`): the bearer token, JSON in and out, error mapping, retries of throttled attempts, a
//! second try with a new token when a cached one is refused, and following the long-running
//! `Operation` that Compute Engine's changing calls return until it is `DONE`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::errors::{self, ErrorContext, OperationError};
use super::path::MigPath;
use super::settings::{Clock, GcpSettings};
use super::token::TokenSource;
use crate::provider::retry::RetryPolicy;
use crate::provider::{ProviderError, ProviderResult};

/// A Compute Engine `Operation`, the fields the adapter reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    #[serde(default)]
    pub name: String,
    /// `PENDING`, `RUNNING` or `DONE`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub operation_type: Option<String>,
    #[serde(default)]
    pub error: Option<OperationErrors>,
    #[serde(default)]
    pub http_error_status_code: Option<u16>,
    #[serde(default)]
    pub http_error_message: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct OperationErrors {
    #[serde(default)]
    pub errors: Vec<OperationError>,
}

/// The HTTP side of the adapter.
pub struct Api {
    http: reqwest::Client,
    pub tokens: Arc<TokenSource>,
    compute: String,
    billing: String,
    retry: RetryPolicy,
    operation_timeout: Duration,
    clock: Clock,
    sent: AtomicU64,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("compute", &self.compute)
            .field("billing", &self.billing)
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

/// Which API a path is under.
#[derive(Debug, Clone, Copy)]
pub enum Service {
    /// `{compute}/compute/v1/{path}`.
    Compute,
    /// `{billing}/v1/{path}`.
    Billing,
}

impl Api {
    pub fn new(settings: &GcpSettings) -> ProviderResult<Self> {
        let http = crate::provider::http::client(settings.http)?;
        let tokens = Arc::new(TokenSource::new(settings, http.clone())?);
        Ok(Self {
            http,
            tokens,
            compute: settings.compute_endpoint.clone(),
            billing: settings.billing_endpoint.clone(),
            retry: settings.retry,
            operation_timeout: settings.operation_timeout,
            clock: settings.clock.clone(),
            sent: AtomicU64::new(0),
        })
    }

    /// HTTP requests to the APIs so far (retries included, token fetches not).
    pub fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    fn url(&self, service: Service, path: &str) -> String {
        match service {
            Service::Compute => format!("{}/compute/v1/{path}", self.compute),
            Service::Billing => format!("{}/v1/{path}", self.billing),
        }
    }

    /// Calls `path` and decodes the JSON answer, retrying throttled attempts.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        service: Service,
        path: &str,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        ctx: &ErrorContext,
    ) -> ProviderResult<T> {
        let request = Outgoing {
            method,
            url: self.url(service, path),
            query,
            body,
            timeout: None,
        };
        self.retry.run(|| self.authorised(&request, ctx)).await
    }

    /// One attempt, and one more with a new token if the cached one was refused (revoked, or
    /// expired earlier than it said).
    async fn authorised<T: DeserializeOwned>(
        &self,
        request: &Outgoing<'_>,
        ctx: &ErrorContext,
    ) -> ProviderResult<T> {
        match self.attempt(request, ctx).await {
            Err(Refused::Token) => {
                self.tokens.invalidate();
                match self.attempt(request, ctx).await {
                    Err(Refused::Token) => Err(ProviderError::Unauthorized(format!(
                        "{}: HTTP 401: the access token was refused twice",
                        ctx.what
                    ))),
                    Err(Refused::Error(e)) => Err(e),
                    Ok(v) => Ok(v),
                }
            }
            Err(Refused::Error(e)) => Err(e),
            Ok(v) => Ok(v),
        }
    }

    async fn attempt<T: DeserializeOwned>(
        &self,
        r: &Outgoing<'_>,
        ctx: &ErrorContext,
    ) -> Result<T, Refused> {
        let token = self.tokens.token().await?;
        let mut request = self
            .http
            .request(r.method.clone(), &r.url)
            .bearer_auth(token.expose())
            .query(r.query);
        if let Some(t) = r.timeout {
            request = request.timeout(t);
        }
        if let Some(b) = r.body {
            request = request.json(b);
        } else {
            // Compute Engine's POST methods without a body still want a length.
            request = request.header("content-length", "0");
        }
        self.sent.fetch_add(1, Ordering::SeqCst);
        let response = request.send().await.map_err(ProviderError::from)?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(ProviderError::from)?;
        if status == 401 {
            return Err(Refused::Token);
        }
        if !(200..300).contains(&status) {
            let err = errors::from_response(status, &text, ctx);
            tracing::debug!(what = %ctx.what, status, error = %err, "google api call failed");
            return Err(err.into());
        }
        serde_json::from_str(&text).map_err(|e| {
            Refused::Error(ProviderError::Other(format!(
                "{}: cannot read the answer ({e}): {}",
                ctx.what,
                text.chars().take(200).collect::<String>()
            )))
        })
    }

    /// Follows `op` (returned by a call on `mig`) with `zoneOperations.wait` or
    /// `regionOperations.wait` until it is `DONE`, and turns its errors into the call's error.
    pub async fn follow(
        &self,
        mig: &MigPath,
        mut op: Operation,
        ctx: &ErrorContext,
    ) -> ProviderResult<()> {
        let started = (self.clock)();
        let timeout_ms = i64::try_from(self.operation_timeout.as_millis()).unwrap_or(i64::MAX);
        for _ in 0..MAX_WAITS {
            if op.status == "DONE" {
                return match op.error.as_ref().map(|e| e.errors.as_slice()) {
                    Some(list) if !list.is_empty() => Err(errors::from_operation(list, ctx)),
                    _ => match op.http_error_status_code {
                        Some(code) if code >= 400 => Err(errors::from_response(
                            code,
                            op.http_error_message.as_deref().unwrap_or(""),
                            ctx,
                        )),
                        _ => Ok(()),
                    },
                };
            }
            if op.name.is_empty() {
                return Err(ProviderError::Other(format!(
                    "{}: the answer is an operation without a name",
                    ctx.what
                )));
            }
            if (self.clock)().saturating_sub(started) > timeout_ms {
                return Err(ProviderError::Other(format!(
                    "{}: operation {} is still {} after {:?}",
                    ctx.what, op.name, op.status, self.operation_timeout
                )));
            }
            // `wait` answers when the operation is done or after about two minutes (either way
            // with the operation as it stands), so it gets longer than other calls.
            let request = Outgoing {
                method: Method::POST,
                url: self.url(Service::Compute, &mig.operation_wait_path(&op.name)),
                query: &[],
                body: None,
                timeout: Some(WAIT_TIMEOUT),
            };
            op = self.retry.run(|| self.authorised(&request, ctx)).await?;
        }
        Err(ProviderError::Other(format!(
            "{}: operation {} is still {} after {MAX_WAITS} waits",
            ctx.what, op.name, op.status
        )))
    }
}

/// A guard against an endpoint that answers every `wait` at once without finishing.
const MAX_WAITS: usize = 200;
/// Longer than the two minutes `wait` may hold a request.
const WAIT_TIMEOUT: Duration = Duration::from_secs(150);

/// One request, as every attempt of it is sent.
struct Outgoing<'a> {
    method: Method,
    url: String,
    query: &'a [(&'a str, String)],
    body: Option<&'a serde_json::Value>,
    /// Instead of the client's own.
    timeout: Option<Duration>,
}

/// An attempt's failure: the token was refused (try once more with a new one), or an error.
enum Refused {
    Token,
    Error(ProviderError),
}

impl From<ProviderError> for Refused {
    fn from(e: ProviderError) -> Self {
        Self::Error(e)
    }
}
