//! The middleware outside the request timeout: load shedding (see [`super::limits`]) and
//! problem documents for the errors that leave the stack without one.
//!
//! One layer rather than two: each `from_fn` layer clones the inner service and boxes a
//! future on every request.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, PROBLEM_JSON};
use super::limits::ConcurrencyLimit;

/// Sheds the request when the server is full, else runs it and mends a bare error answer.
pub async fn edge(State(limit): State<ConcurrencyLimit>, req: Request, next: Next) -> Response {
    let _place = match limit.admit(req.uri().path()) {
        Ok(place) => place,
        Err(shed) => return shed.into_response(),
    };
    problem_for_bare_errors(next.run(req).await)
}

/// Turns any error response that is not already a problem document (a 405 from routing, a 413
/// from the body limit, a 408 from the timeout) into one, so clients parse one error shape.
fn problem_for_bare_errors(response: Response) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == PROBLEM_JSON.as_bytes());
    if (status.is_client_error() || status.is_server_error()) && !is_problem {
        let mut replaced = ApiError::from_status(status).into_response();
        if let Some(allow) = response.headers().get(header::ALLOW) {
            replaced.headers_mut().insert(header::ALLOW, allow.clone());
        }
        return replaced;
    }
    response
}
