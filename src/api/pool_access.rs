//! Keys restricted to pools: which routes name a pool where, and the checks that keep such a
//! key to its pools. The scope check (`auth`) says what a key may do; this says where.
//!
//! A route names its pool in the path (checked here, in the middleware, before the handler
//! runs), in the body (checked by the handler, whole batch before anything is written), or
//! lists pools (the handler shows only the key's). Routes about no pool in particular (the
//! catalog, prices, benchmarks, the simulator) serve any key. Every other route, and any route
//! added later without a thought about pools, serves only keys that reach every pool: the key
//! list, catalog imports, `/metrics` (its series are labelled with every pool's name).

use axum::extract::{FromRequestParts, RawPathParams, Request};
use axum::http::Method;

use super::error::ApiError;
use crate::auth::pools::PoolScope;
use crate::auth::verifier::Principal;

/// How a route reaches pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// One pool, named by this path parameter.
    Path(&'static str),
    /// Pools named in the body, or a listing: the handler checks or filters.
    Handler,
    /// No pool in particular.
    NoPool,
    /// Every pool at once: keys restricted to pools are refused.
    EveryPool,
}

/// How the route template `route` reaches pools.
pub fn reach(method: &Method, route: &str) -> Reach {
    match route {
        "/v1/pools/{name}"
        | "/v1/pools/{name}/workers"
        | "/v1/pools/{name}/workers/{id}"
        | "/v1/pools/{name}/events" => Reach::Path("name"),
        "/fleet/{pool}" | "/v1/keda/pools/{pool}" => Reach::Path("pool"),
        "/v1/pools" | "/fleet" | "/" if *method == Method::GET || *method == Method::HEAD => {
            Reach::Handler
        }
        "/decide" | "/v1/webhooks/metrics" | "/v1/webhooks/prometheus" | "/v1/webhooks/events" => {
            Reach::Handler
        }
        "/v1/offerings"
        | "/v1/offerings/{provider}/{instance_type}"
        | "/v1/gpus"
        | "/v1/providers"
        | "/v1/providers/status"
        | "/v1/prices"
        | "/v1/prices/history"
        | "/v1/benchmarks"
        | "/v1/benchmarks/plan"
        | "/v1/simulate" => Reach::NoPool,
        _ => Reach::EveryPool,
    }
}

/// The middleware's part: refuses a restricted key on a route that reaches every pool, or on
/// a path that names a pool outside its list. Requests of keys that reach every pool pass
/// untouched.
pub async fn check_route(
    principal: &Principal,
    method: &Method,
    route: &str,
    req: Request,
) -> Result<Request, ApiError> {
    if principal.pools.is_every() {
        return Ok(req);
    }
    match reach(method, route) {
        Reach::NoPool | Reach::Handler => Ok(req),
        Reach::EveryPool => Err(ApiError::pool_forbidden(
            "Authorization",
            format!(
                "this API key is restricted to pools ({}); `{method} {route}` reaches every \
                 pool and needs a key without `pools`",
                principal.pools
            ),
        )),
        Reach::Path(param) => {
            let (mut parts, body) = req.into_parts();
            // The router matched the template, so the parameter is there; a name that is not
            // valid UTF-8 is no pool of anyone's and is refused like any other.
            let named = RawPathParams::from_request_parts(&mut parts, &())
                .await
                .ok()
                .and_then(|params| {
                    params
                        .iter()
                        .find(|(k, _)| *k == param)
                        .map(|(_, v)| v.to_string())
                })
                .unwrap_or_default();
            check(Some(principal), param, &named)?;
            Ok(Request::from_parts(parts, body))
        }
    }
}

/// The pools the caller reaches (every pool when there is no principal: authentication off).
pub fn scope_of(principal: Option<&Principal>) -> PoolScope {
    principal.map_or_else(PoolScope::every, |p| p.pools.clone())
}

/// 403 naming `field` unless the caller reaches `pool`.
pub fn check(principal: Option<&Principal>, field: &str, pool: &str) -> Result<(), ApiError> {
    match principal {
        Some(p) if !p.pools.allows(pool) => Err(ApiError::pool_forbidden(
            field,
            format!(
                "pool `{pool}` is not one of this API key's pools ({})",
                p.pools
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_nobody_classified_reach_every_pool() {
        assert_eq!(reach(&Method::GET, "/v1/keys"), Reach::EveryPool);
        assert_eq!(reach(&Method::POST, "/v1/catalog/import"), Reach::EveryPool);
        assert_eq!(reach(&Method::GET, "/metrics"), Reach::EveryPool);
        assert_eq!(reach(&Method::GET, "/v1/something-new"), Reach::EveryPool);
        assert_eq!(reach(&Method::PUT, "/v1/pools/{name}"), Reach::Path("name"));
        assert_eq!(reach(&Method::GET, "/fleet"), Reach::Handler);
        assert_eq!(reach(&Method::GET, "/v1/offerings"), Reach::NoPool);
    }
}
