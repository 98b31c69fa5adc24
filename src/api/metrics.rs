//! `GET /metrics`: OpenMetrics text for Prometheus. The counters of `crate::metrics` are
//! counted in this process; the per-pool gauges are read from the database at scrape time, so
//! every replica reports the same fleet (aggregate them with `max by (pool)`, not `sum`).

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::exposition::{self, Format};
use super::offerings::snapshot;
use crate::app::AppState;
use crate::fleet::view::fleet;
use crate::metrics::HttpLabels;
use crate::timefmt::now_ms;

/// The `method` label: a standard method by name, anything else `other`. A client may send
/// any token as a method; taking it as a label would let it grow `/metrics` without bound.
pub fn method_label(method: &Method) -> &'static str {
    const STANDARD: [Method; 9] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ];
    STANDARD
        .iter()
        .find(|m| *m == method)
        .map_or("other", Method::as_str)
}

/// Records one answered request's latency under its matched route template, or `unmatched`
/// (never the raw path: ids would explode the label set).
pub fn observe(state: &AppState, method: &'static str, route: &str, status: u16, took: Duration) {
    state
        .metrics
        .http
        .get_or_create(&HttpLabels {
            method,
            route: route.to_owned(),
            status,
        })
        .observe(took.as_secs_f64());
}

/// Prometheus metrics: OpenMetrics text, or the classic text format 0.0.4 when the `Accept`
/// header prefers `text/plain`.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "OpenMetrics text, or the classic Prometheus text format for `Accept: text/plain;version=0.0.4`", content(
        (String = "application/openmetrics-text"),
        (String = "text/plain"),
    ))))]
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let catalog = snapshot(&state)?;
    let view = fleet(&state.store, &catalog, now_ms(), false).await?;
    let mut text = state
        .metrics
        .encode_with_fleet(&view.pools)
        .map_err(ApiError::internal)?;
    let format = exposition::negotiate(&headers);
    if format == Format::Classic {
        text = exposition::to_classic(&text);
    }
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept"));
    Ok(response)
}
