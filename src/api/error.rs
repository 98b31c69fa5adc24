//! The one API error type. Every failure -- our validation, extractor rejections, unknown
//! routes, oversized bodies, timeouts -- leaves as `application/problem+json` (RFC 9457) with
//! the offending fields named in `errors`. Internal causes are logged once and never sent.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::store::{Fault, StoreError};

pub const PROBLEM_JSON: &str = "application/problem+json";

/// `Retry-After` while the database is unreachable: long enough not to hammer a recovering
/// server, short enough that a restart or fail-over costs clients little.
pub const DATABASE_RETRY_AFTER_SECS: u64 = 2;

pub use crate::field_error::FieldError;

/// An RFC 9457 problem document.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI reference naming the kind of problem (`/problems/validation`).
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    pub errors: Vec<FieldError>,
}

/// An error an API handler returns.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {detail}")]
pub struct ApiError {
    status: StatusCode,
    slug: &'static str,
    detail: String,
    errors: Vec<FieldError>,
    /// Logged, never sent.
    source: Option<anyhow::Error>,
    /// Sent as they are: `Retry-After`, `WWW-Authenticate`.
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    fn new(status: StatusCode, slug: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            slug,
            detail: detail.into(),
            errors: Vec::new(),
            source: None,
            headers: Vec::new(),
        }
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// 401: no API key, or one that is not valid. One answer for every kind of invalid key.
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
            .with_field(
                "Authorization",
                "must be `Bearer <token>` with a valid API key",
            )
            .with_header(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"trainscaler\""),
            )
    }

    /// 401 for a signed webhook whose signature headers do not check out.
    pub fn bad_signature(header_name: &str, problem: impl Into<String>) -> Self {
        let problem = problem.into();
        Self::new(
            StatusCode::UNAUTHORIZED,
            "bad-signature",
            format!("`{header_name}` {problem}"),
        )
        .with_field(header_name, problem)
    }

    /// 403: a delivery that authenticates itself (an SNS envelope) and does not check out.
    pub fn refused(field: &str, problem: impl Into<String>) -> Self {
        let problem = problem.into();
        Self::new(StatusCode::FORBIDDEN, "refused", problem.clone()).with_field(field, problem)
    }

    /// 403 `/problems/pool-forbidden`: a key restricted to pools, about a pool outside its
    /// list (`field` says where the request named it), or on a route that reaches every pool.
    pub fn pool_forbidden(field: &str, problem: impl Into<String>) -> Self {
        let problem = problem.into();
        Self::new(StatusCode::FORBIDDEN, "pool-forbidden", problem.clone())
            .with_field(field, problem)
    }

    /// 403: a valid key without the scope this route needs.
    pub fn forbidden(scope: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("this API key lacks the `{scope}` scope this route needs"),
        )
        .with_field(
            "Authorization",
            format!("needs a key with the `{scope}` scope"),
        )
    }

    /// 429: this key sent more than its share; `retry_after_secs` says when to try again.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate-limited",
            format!("this API key is over its ingestion rate; retry after {retry_after_secs} s"),
        )
        .with_header(header::RETRY_AFTER, HeaderValue::from(retry_after_secs))
    }

    /// 503 with `Retry-After`: the server sheds load rather than queue without bound.
    pub fn overloaded(retry_after_secs: u64) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "the server is at its concurrent request limit; retry shortly",
        )
        .with_header(header::RETRY_AFTER, HeaderValue::from(retry_after_secs))
    }

    /// 400: the `Idempotency-Key` header cannot be used as a key.
    pub fn bad_idempotency_key(problem: impl Into<String>) -> Self {
        let problem = problem.into();
        Self::new(
            StatusCode::BAD_REQUEST,
            "bad-idempotency-key",
            format!("`idempotency-key` {problem}"),
        )
        .with_field("idempotency-key", problem)
    }

    /// 422: the key was already used for a different request on this route.
    pub fn idempotency_key_reused() -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-reused",
            "this Idempotency-Key was already used with a different request body; use a new key for a new batch",
        )
        .with_field(
            "idempotency-key",
            "was used before with a different request body",
        )
    }

    /// 409 with `Retry-After`: a request with this key is still being written.
    pub fn idempotency_key_in_flight() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "idempotency-key-in-flight",
            "a request with this Idempotency-Key is still in progress; retry shortly",
        )
        .with_field("idempotency-key", "is in use by a request in progress")
        .with_header(header::RETRY_AFTER, HeaderValue::from(1u64))
    }

    fn with_field(mut self, field: impl Into<String>, problem: impl Into<String>) -> Self {
        self.errors.push(FieldError {
            field: field.into(),
            problem: problem.into(),
            line: None,
        });
        self
    }

    /// 422: the request is well-formed but a field's value is not acceptable.
    pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Self {
        let field = field.into();
        let problem = problem.into();
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation",
            format!("`{field}` {problem}"),
        )
        .with_field(field, problem)
    }

    /// 422 for several fields at once.
    pub fn invalid_fields(errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(|e| format!("`{}` {}", e.field, e.problem))
            .collect::<Vec<_>>()
            .join("; ");
        let mut e = Self::new(StatusCode::UNPROCESSABLE_ENTITY, "validation", detail);
        e.errors = errors;
        e
    }

    /// 400: the request cannot be read at all (bad syntax, unknown parameter).
    pub fn bad_request(field: impl Into<String>, problem: impl Into<String>) -> Self {
        let field = field.into();
        let problem = problem.into();
        Self::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            format!("`{field}` {problem}"),
        )
        .with_field(field, problem)
    }

    /// 422 for an uploaded file, naming the line at fault.
    pub fn invalid_line(line: u64, problem: impl Into<String>) -> Self {
        let problem = problem.into();
        let mut e = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-file",
            problem.clone(),
        );
        e.errors.push(FieldError {
            field: "body".into(),
            problem,
            line: Some(line),
        });
        e
    }

    pub fn not_found(field: impl Into<String>, detail: impl Into<String>) -> Self {
        let detail = detail.into();
        Self::new(StatusCode::NOT_FOUND, "not-found", detail.clone()).with_field(field, detail)
    }

    pub fn conflict(field: impl Into<String>, detail: impl Into<String>) -> Self {
        let detail = detail.into();
        Self::new(StatusCode::CONFLICT, "conflict", detail.clone()).with_field(field, detail)
    }

    pub fn unsupported_media_type(expected: &str) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            format!("the body must be sent as {expected}"),
        )
        .with_field("content-type", format!("must be {expected}"))
    }

    /// 413 with a specific reason (a body that decompresses too large, say).
    pub fn payload_too_large(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", detail)
            .with_field("body", "is too large")
    }

    /// 413: the body holds more of something (series, samples) than one request may.
    pub fn too_many(field: &str, detail: impl Into<String>, limit: usize) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", detail)
            .with_field(field, format!("at most {limit} per request"))
    }

    /// 503: the database cannot be reached, or is shutting down or starting. Nothing was
    /// acknowledged; every write is idempotent, so sending the same request again is safe.
    pub fn database_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "database-unavailable",
            "the database is not reachable right now; retry the request",
        )
        .with_header(
            header::RETRY_AFTER,
            HeaderValue::from(DATABASE_RETRY_AFTER_SECS),
        )
    }

    /// 503: the write met a conflicting one (deadlock, serialisation failure, a busy SQLite
    /// file) and wrote nothing; it may well succeed at once.
    pub fn database_conflict() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "database-conflict",
            "the database is busy with a conflicting change; retry the request",
        )
        .with_header(header::RETRY_AFTER, HeaderValue::from(1u64))
    }

    /// 503 for a passing condition (the catalog still loading, a pool deleted mid-batch):
    /// like every 503 here it says when to retry.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", detail)
            .with_header(header::RETRY_AFTER, HeaderValue::from(1u64))
    }

    pub fn internal(source: impl Into<anyhow::Error>) -> Self {
        let mut e = Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to handle this request; it has been logged",
        );
        e.source = Some(source.into());
        e
    }

    /// A problem for a status that has no more specific cause (unknown route, timeout...).
    pub fn from_status(status: StatusCode) -> Self {
        let (slug, detail) = match status {
            StatusCode::NOT_FOUND => ("not-found", "no such route"),
            StatusCode::METHOD_NOT_ALLOWED => (
                "method-not-allowed",
                "this route does not accept that method",
            ),
            StatusCode::PAYLOAD_TOO_LARGE => (
                "payload-too-large",
                "the request body is larger than this route accepts",
            ),
            StatusCode::REQUEST_TIMEOUT => {
                ("timeout", "the request took longer than the server allows")
            }
            _ => ("http", status.canonical_reason().unwrap_or("error")),
        };
        let e = Self::new(status, slug, detail);
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            e.with_field("body", "is too large")
        } else {
            e
        }
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn problem(&self) -> Problem {
        Problem {
            kind: format!("/problems/{}", self.slug),
            title: self
                .status
                .canonical_reason()
                .unwrap_or("Error")
                .to_string(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            errors: self.errors.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(source) = &self.source {
            tracing::error!(error = ?source, "request failed");
        }
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        for (name, value) in self.headers {
            // Appended: a 401 may carry more than one `WWW-Authenticate` challenge.
            headers.append(name, value);
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::UnknownProvider(p) => {
                Self::not_found("provider", format!("unknown provider `{p}`"))
            }
            StoreError::UnknownOffering { index, key } => Self::invalid(
                format!("observations[{index}]"),
                format!(
                    "names no known offering: provider `{}`, region `{}`, zone `{}`, instance type `{}`",
                    key.provider, key.region, key.zone, key.instance_type
                ),
            ),
            StoreError::ConflictingObservation { index } => Self::conflict(
                format!("observations[{index}]"),
                "a different price is already recorded for this offering, market and observed_at",
            ),
            StoreError::ConflictingImport { key, market } => Self::conflict(
                "body",
                format!(
                    "the {market} price of {}/{}/{}/{} differs from the one already recorded at this \
                     observed_at; import it with a later observed_at",
                    key.provider, key.region, key.zone, key.instance_type
                ),
            ),
            StoreError::UnknownInstanceType {
                provider,
                instance_type,
            } => Self::invalid(
                "instance_type",
                format!("names no instance type of `{provider}`: `{instance_type}`"),
            ),
            StoreError::ConflictingBenchmark => Self::conflict(
                "measured_at",
                "a different measurement is already recorded for this workload, instance type, size and measured_at",
            ),
            StoreError::UnknownPool { index, pool } => Self::invalid(
                format!("samples[{index}].pool"),
                format!("names no pool: `{pool}`; create it with PUT /v1/pools/{pool} first"),
            ),
            StoreError::PoolNotAllowed { index, pool } => Self::pool_forbidden(
                "events",
                format!(
                    "notice {index} is about a worker of pool `{pool}`, which is not one of \
                     this API key's pools; nothing of the batch was stored"
                ),
            ),
            StoreError::IdempotencyKeyTaken => Self::idempotency_key_in_flight(),
            other => match other.fault() {
                Fault::Unavailable => {
                    tracing::warn!(error = %other, "database unavailable");
                    Self::database_unavailable()
                }
                Fault::Conflict => {
                    tracing::warn!(error = %other, "transient database conflict");
                    Self::database_conflict()
                }
                Fault::Other => Self::internal(other),
            },
        }
    }
}

/// An OpenAPI response: a problem document with this description.
pub fn problem_response(description: &str) -> utoipa::openapi::Response {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    ResponseBuilder::new()
        .description(description)
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_database_is_a_503_that_says_when_to_retry() {
        let e = ApiError::from(StoreError::Database(sqlx::Error::PoolTimedOut));
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.problem().kind, "/problems/database-unavailable");
        let response = e.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn a_write_conflict_is_a_503_to_retry_at_once_and_a_bug_stays_a_500() {
        let conflict = ApiError::database_conflict();
        assert_eq!(conflict.problem().kind, "/problems/database-conflict");
        assert_eq!(conflict.into_response().headers()[header::RETRY_AFTER], "1");
        let bug = ApiError::from(StoreError::Database(sqlx::Error::RowNotFound));
        assert_eq!(bug.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
