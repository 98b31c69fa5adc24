//! Load shedding: a global limit on requests in flight. Past it the server answers 503 with
//! `Retry-After` at once, instead of queueing without bound until every request times out.
//! Probes are exempt, so an overloaded replica is not also restarted for being "dead".

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use tokio::sync::{Semaphore, SemaphorePermit};

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

    /// A place for `path`'s request (none needed for the probes), or [`Shed`].
    pub fn admit(&self, path: &str) -> Result<Option<SemaphorePermit<'_>>, Shed> {
        if matches!(path, "/healthz" | "/readyz") {
            return Ok(None);
        }
        match self.0.try_acquire() {
            Ok(permit) => Ok(Some(permit)),
            Err(_) => Err(Shed),
        }
    }
}

/// The server is full: answered 503 with `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shed;

impl IntoResponse for Shed {
    fn into_response(self) -> Response {
        ApiError::overloaded(RETRY_AFTER_SECS).into_response()
    }
}
