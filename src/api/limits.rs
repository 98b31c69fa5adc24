//! Load shedding: a global limit on requests in flight. Past it the server answers 503 with
//! `Retry-After` at once, instead of queueing without bound until every request times out.
//! Probes are exempt, so an overloaded replica is not also restarted for being "dead".

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::ApiError;

/// Seconds a shed client is told to wait: requests here take milliseconds, so a short pause
/// is enough for the burst to pass.
const RETRY_AFTER_SECS: u64 = 1;

#[derive(Debug, Clone)]
pub struct ConcurrencyLimit(Arc<Semaphore>);

impl ConcurrencyLimit {
    pub fn new(max: usize) -> Self {
        Self(Arc::new(Semaphore::new(
            max.clamp(1, Semaphore::MAX_PERMITS),
        )))
    }
}

pub async fn shed_when_full(
    State(limit): State<ConcurrencyLimit>,
    req: Request,
    next: Next,
) -> Response {
    if matches!(req.uri().path(), "/healthz" | "/readyz") {
        return next.run(req).await;
    }
    match limit.0.clone().try_acquire_owned() {
        Ok(_permit) => next.run(req).await,
        Err(_) => ApiError::overloaded(RETRY_AFTER_SECS).into_response(),
    }
}
