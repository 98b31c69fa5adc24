//! Request extractors whose rejections are problem documents naming the field at fault.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body. Type errors name their JSON path (`observations[0].price`).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !content_type_is(req.headers(), |t| {
            t == "application/json" || t.ends_with("+json")
        }) {
            return Err(ApiError::unsupported_media_type("application/json"));
        }
        let bytes = read_body(req, state).await?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        match serde_path_to_error::deserialize(&mut de) {
            Ok(value) => {
                de.end().map_err(|e| {
                    ApiError::bad_request(
                        "body",
                        format!(
                            "has text after the JSON value: {}",
                            strip_position(&e.to_string())
                        ),
                    )
                })?;
                Ok(Self(value))
            }
            Err(e) => {
                let path = e.path().to_string();
                let inner = e.into_inner();
                let field = if path == "." {
                    "body".to_string()
                } else {
                    path
                };
                let problem = strip_position(&inner.to_string());
                if inner.is_data() {
                    Err(ApiError::invalid(field, problem))
                } else {
                    Err(ApiError::bad_request(
                        field,
                        format!("is not valid JSON: {problem}"),
                    ))
                }
            }
        }
    }
}

/// The raw body, with the size limit turned into a 413 problem.
pub async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::from_status(StatusCode::PAYLOAD_TOO_LARGE)
        } else {
            ApiError::bad_request("body", "could not be read")
        }
    })
}

/// Reads a body of at most `limit` bytes, for middleware that must see it before the
/// handler: over the limit is 413, a body that cannot be read 400.
pub async fn read_limited(body: axum::body::Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        if e.into_inner().is::<http_body_util::LengthLimitError>() {
            ApiError::payload_too_large("the request body is larger than this route accepts")
        } else {
            ApiError::bad_request("body", "could not be read")
        }
    })
}

/// serde_json appends " at line 1 column 40"; the path says where already.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Path parameters; a segment that cannot be read (invalid percent-encoding) is a 400
/// naming the path.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| Self(v))
            .map_err(|e| ApiError::bad_request("path", e.body_text()))
    }
}

/// Query parameters. Parameters are read as text and parsed by the handler, so each problem
/// names its parameter; an unknown parameter is a 400, not silently ignored.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de).map(Self).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "query".to_string()
            } else {
                path
            };
            ApiError::bad_request(field, e.into_inner().to_string())
        })
    }
}

/// Whether the request's media type (parameters ignored) satisfies `accepts`.
pub fn content_type_is(headers: &axum::http::HeaderMap, accepts: impl Fn(&str) -> bool) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| accepts(ct.split(';').next().unwrap_or("").trim()))
}

/// The `limit` parameter: `default` when absent, otherwise 1..=`max`.
pub fn parse_limit(value: Option<&str>, default: usize, max: usize) -> Result<usize, ApiError> {
    // `limit=` says nothing; the spec's `minimum: 1` does not admit it, so neither does this.
    if value == Some("") {
        return Err(ApiError::invalid(
            "limit",
            format!("must be a whole number from 1 to {max}, not empty; omit it for {default}"),
        ));
    }
    match parse_param::<usize>("limit", value, "a whole number")? {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::invalid(
            "limit",
            format!("must be between 1 and {max}"),
        )),
    }
}

/// Parses one optional query parameter, naming it when its text is not a `T`.
pub fn parse_param<T: std::str::FromStr>(
    field: &str,
    value: Option<&str>,
    expected: &str,
) -> Result<Option<T>, ApiError> {
    match value {
        None | Some("") => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| ApiError::invalid(field, format!("must be {expected}, not `{text}`"))),
    }
}
