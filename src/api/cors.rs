//! CORS for dashboards in browsers: tower-http's layer, consulted only for requests that carry
//! an `Origin` header. Browsers send `Origin` on every cross-origin request and every
//! preflight; a scheduler, `curl` or a probe does not, and tower-http's layer builds a header
//! map and clones its lists for every request whether or not it is cross-origin (counted with
//! callgrind: about a quarter of the instructions of a `GET /healthz`).
//!
//! A response to a request without `Origin` carries no CORS headers but says, in `Vary`, that
//! it depends on them, so that a shared cache never hands it to a browser in place of the
//! answer with `Access-Control-Allow-Origin`.

use std::task::{Context, Poll};

use axum::http::{HeaderValue, Request, Response, header};
use futures_util::future::{Either, Map};
use tower::{Layer, Service};
use tower_http::cors::{Cors, CorsLayer, ResponseFuture};

/// The request headers a CORS answer depends on: tower-http's own list (its layer puts the
/// same in `Vary`; a test keeps the two equal), written once rather than joined per request.
const VARY: HeaderValue = HeaderValue::from_static(
    "origin, access-control-request-method, access-control-request-headers",
);

/// Applies `cors` to requests with an `Origin` header.
#[derive(Debug, Clone)]
pub struct OriginCorsLayer {
    cors: CorsLayer,
}

impl OriginCorsLayer {
    pub fn new(cors: CorsLayer) -> Self {
        Self { cors }
    }
}

impl<S> Layer<S> for OriginCorsLayer {
    type Service = OriginCors<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OriginCors {
            cors: self.cors.clone(),
            inner,
        }
    }
}

/// See [`OriginCorsLayer`].
#[derive(Debug, Clone)]
pub struct OriginCors<S> {
    cors: CorsLayer,
    inner: S,
}

/// What the inner service answers, once `Vary` is added.
type Answer<B, E> = Result<Response<B>, E>;
type Plain<F, B, E> = Map<F, fn(Answer<B, E>) -> Answer<B, E>>;

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for OriginCors<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Either<ResponseFuture<S::Future>, Plain<S::Future, ResBody, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        use futures_util::FutureExt;
        if req.headers().contains_key(header::ORIGIN) {
            // The service made ready is the one that answers; its clone waits for the next.
            let waiting = self.inner.clone();
            let ready = std::mem::replace(&mut self.inner, waiting);
            let mut cors: Cors<S> = self.cors.layer(ready);
            return Either::Left(cors.call(req));
        }
        Either::Right(self.inner.call(req).map(add_vary as fn(_) -> _))
    }
}

/// Says that the answer would differ for a request with CORS headers.
fn add_vary<B, E>(answer: Answer<B, E>) -> Answer<B, E> {
    answer.map(|mut response| {
        response.headers_mut().append(header::VARY, VARY);
        response
    })
}

#[cfg(test)]
mod tests {
    use tower_http::cors::preflight_request_headers;

    use super::VARY;

    #[test]
    fn answers_without_origin_vary_by_the_headers_tower_http_varies_by() {
        let theirs: Vec<String> = preflight_request_headers()
            .map(|name| name.as_str().to_owned())
            .collect();
        assert_eq!(VARY.to_str().unwrap(), theirs.join(", "));
    }
}
