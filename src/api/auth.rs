//! Authentication and authorisation at the edge: which scope each route needs, the middleware
//! that checks the bearer key (or a webhook's signature, or a Pub/Sub push token) against it,
//! per-key rate limits on ingestion, and the security scheme in the OpenAPI document.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;

use super::error::ApiError;
use super::extract::read_limited;
use crate::app::AppState;
use crate::auth::Auth;
use crate::auth::gate::BudgetRefusal;
use crate::auth::google_oidc::{PushAuth, PushAuthError, looks_like_jwt};
use crate::auth::scope::{Scope, Scopes};
use crate::auth::verifier::{KeyVerifier, Principal, VerifyError};
use crate::auth::webhook_signature::{SIGNATURE_HEADER, SOURCE_HEADER, TIMESTAMP_HEADER};

/// What a route asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Probes and the API's own description.
    Open,
    Needs(Scope),
}

/// The scope a route needs, by method and route template. Anything not named here needs
/// `admin` for writes and `read` for reads, so a new route is never open by accident.
pub fn access(method: &Method, route: &str, metrics_public: bool) -> Access {
    match route {
        "/healthz" | "/readyz" | "/openapi.json" => return Access::Open,
        // SNS cannot send a key; the handler checks the envelope's topic and signature.
        "/v1/webhooks/sns" => return Access::Open,
        r if r == "/docs" || r.starts_with("/docs/") => return Access::Open,
        "/metrics" if metrics_public => return Access::Open,
        _ => {}
    }
    // The key list names every key and its scopes: for admins only, like the keys themselves.
    if route == "/v1/keys" || route.starts_with("/v1/keys/") {
        return Access::Needs(Scope::Admin);
    }
    if *method == Method::GET || *method == Method::HEAD {
        return Access::Needs(Scope::Read);
    }
    Access::Needs(match route {
        "/decide" | "/v1/benchmarks/plan" | "/v1/simulate" => Scope::Decide,
        "/v1/prices" | "/v1/benchmarks" => Scope::Ingest,
        r if r.starts_with("/v1/webhooks/") => Scope::Ingest,
        _ => Scope::Admin,
    })
}

impl From<BudgetRefusal> for ApiError {
    fn from(refusal: BudgetRefusal) -> Self {
        match refusal {
            BudgetRefusal::RateLimited { retry_after_secs } => {
                ApiError::rate_limited(retry_after_secs)
            }
            BudgetRefusal::TooManySamples { samples, per_sec } => ApiError::too_many(
                "samples",
                format!(
                    "the request holds {samples} samples; this key may store at most {per_sec} \
                     per second (TRAINSCALER_INGEST_SAMPLES_PER_SEC): send smaller batches"
                ),
                per_sec as usize,
            ),
        }
    }
}

/// The key check of the route guard (`super::route_guard`): the request with its
/// [`Principal`] in the extensions, or the 401, 403 or 429 to answer instead. `route` is the
/// matched template.
pub async fn admit(state: &AppState, route: &str, req: Request) -> Result<Request, Response> {
    let needed = match access(req.method(), route, state.auth.metrics_public) {
        Access::Open => return Ok(req),
        Access::Needs(scope) => scope,
    };
    // Browsers cannot send a bearer key, but they prompt for Basic credentials when asked: the
    // HTML page alone offers that challenge, so API clients never see a login dialog.
    let page = route == "/" && req.method() == Method::GET;
    let body_limit = state.ingest_body_limits.for_route(route);
    authorise(&state.auth, needed, route, req, body_limit)
        .await
        .map_err(|e| {
            if page && e.status() == StatusCode::UNAUTHORIZED {
                e.with_header(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"trainscaler\", charset=\"UTF-8\""),
                )
                .into_response()
            } else {
                e.into_response()
            }
        })
}

/// `route`: the matched template; `body_limit`: the route's, for a signed body read here.
async fn authorise(
    auth: &Arc<Auth>,
    needed: Scope,
    route: &str,
    mut req: Request,
    body_limit: usize,
) -> Result<Request, ApiError> {
    let principal = match &auth.verifier {
        None => Principal::everywhere("anonymous", Scopes::new([Scope::Admin])),
        Some(verifier) => {
            let (principal, rebuilt) = identify(auth, verifier, needed, req, body_limit).await?;
            req = rebuilt;
            if !principal.scopes.allows(needed) {
                return Err(ApiError::forbidden(needed.as_str()));
            }
            let method = req.method().clone();
            req = super::pool_access::check_route(&principal, &method, route, req).await?;
            principal
        }
    };
    if needed == Scope::Ingest {
        auth.check_rate(&principal)?;
    }
    req.extensions_mut().insert(principal);
    Ok(req)
}

/// Who sent the request: a bearer key, or for ingestion routes a webhook signature.
async fn identify(
    auth: &Auth,
    verifier: &KeyVerifier,
    needed: Scope,
    req: Request,
    body_limit: usize,
) -> Result<(Principal, Request), ApiError> {
    // Owned before any await: a borrowed request would make this future not `Send`.
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|value| credential(value.to_str().unwrap_or_default()));
    let pushed = req
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|m| m.as_str() == PUBSUB_ROUTE);
    if let (Some(token), Some(pubsub), true) = (&bearer, &auth.pubsub, pushed)
        && looks_like_jwt(token)
    {
        return verify_push(pubsub, token).await.map(|p| (p, req));
    }
    if let Some(token) = bearer {
        return match verifier.verify(&token).await {
            Ok(p) => Ok((p, req)),
            Err(VerifyError::Invalid) => Err(ApiError::unauthorized("the API key is not valid")),
            Err(VerifyError::Store(e)) => Err(e.into()),
            Err(e @ VerifyError::Internal(_)) => Err(ApiError::internal(e)),
        };
    }
    if needed == Scope::Ingest
        && !auth.webhooks.is_empty()
        && req.headers().contains_key(SIGNATURE_HEADER)
    {
        return verify_signed(auth, req, body_limit).await;
    }
    Err(ApiError::unauthorized(
        "this route needs an API key: send `Authorization: Bearer <token>`",
    ))
}

/// The one route a Pub/Sub push subscription may call with its token.
pub const PUBSUB_ROUTE: &str = "/v1/webhooks/events";

/// A Pub/Sub push token: the subscription's service account may ingest events, nothing else.
async fn verify_push(pubsub: &PushAuth, token: &str) -> Result<Principal, ApiError> {
    match pubsub.verify(token, crate::timefmt::now_ms()).await {
        Ok(id) => Ok(Principal::everywhere(
            format!("pubsub:{}", id.email),
            Scopes::new([Scope::Ingest]),
        )),
        Err(e @ PushAuthError::Keys(_)) => Err(ApiError::unavailable(format!(
            "the Pub/Sub push token {e}; retry"
        ))),
        Err(e) => Err(ApiError::unauthorized(format!(
            "the Pub/Sub push token {e}"
        ))),
    }
}

/// The API key in an `Authorization` value: `Bearer <token>`, or `Basic` with the token as the
/// password (what a browser sends after the fleet page's Basic challenge; the user name is
/// ignored). Anything else yields an empty token, which verifies as invalid like any other.
fn credential(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once(' ') else {
        return String::new();
    };
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return rest.to_string();
    }
    if scheme.eq_ignore_ascii_case("basic") {
        return base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()
            .and_then(|raw| String::from_utf8(raw).ok())
            .and_then(|pair| pair.split_once(':').map(|(_, token)| token.to_string()))
            .unwrap_or_default();
    }
    String::new()
}

/// Checks the signature's headers (source, timestamp, form), then reads the body (within the
/// ingestion limit), checks the signature over it, and hands the body on. Nothing of the body
/// is read for a request its headers already refuse.
async fn verify_signed(
    auth: &Auth,
    req: Request,
    body_limit: usize,
) -> Result<(Principal, Request), ApiError> {
    let source = header_text(&req, SOURCE_HEADER)?;
    let timestamp = header_text(&req, TIMESTAMP_HEADER)?;
    let signature = header_text(&req, SIGNATURE_HEADER)?;
    let refused = |e: crate::auth::webhook_signature::SignatureError| {
        ApiError::bad_signature(e.header(), e.to_string())
    };
    let now_secs = crate::timefmt::now_ms() / 1000;
    auth.webhooks
        .check_headers(&source, &timestamp, &signature, now_secs)
        .map_err(refused)?;
    let (parts, body) = req.into_parts();
    let bytes = read_limited(body, body_limit).await?;
    auth.webhooks
        .verify(&source, &timestamp, &signature, &bytes, now_secs)
        .map_err(refused)?;
    let principal =
        Principal::everywhere(format!("webhook:{source}"), Scopes::new([Scope::Ingest]));
    Ok((principal, Request::from_parts(parts, Body::from(bytes))))
}

fn header_text(req: &Request, name: &str) -> Result<String, ApiError> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| ApiError::bad_signature(name, "is missing"))
}

/// Adds the bearer scheme to `spec`, and to every operation that needs a key: the scope it
/// needs, and its 401, 403 (and for ingestion 429) answers.
pub fn document(spec: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{
        HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
    };

    let components = spec.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API key (`tsk_...`) from `trainscaler keys create` or `POST /v1/keys`",
                ))
                .build(),
        ),
    );
    let problem = super::error::problem_response;
    for (path, item) in spec.paths.paths.iter_mut() {
        let ops = [
            (Method::GET, &mut item.get),
            (Method::PUT, &mut item.put),
            (Method::POST, &mut item.post),
            (Method::DELETE, &mut item.delete),
        ];
        for (method, op) in ops {
            let Some(op) = op else { continue };
            let Access::Needs(scope) = access(&method, path, false) else {
                continue;
            };
            op.security = Some(vec![SecurityRequirement::new(
                "bearer",
                Vec::<String>::new(),
            )]);
            let note = format!("Needs an API key with the `{scope}` scope.");
            op.description = Some(match op.description.take() {
                Some(d) if !d.is_empty() => format!("{d}\n\n{note}"),
                _ => note,
            });
            let responses = &mut op.responses.responses;
            responses
                .entry("401".into())
                .or_insert_with(|| problem("No API key, or not a valid one").into());
            responses
                .entry("403".into())
                .or_insert_with(|| {
                    problem("The key lacks the scope this route needs, or its pools do not include the one asked about").into()
                });
            if scope == Scope::Ingest {
                responses.entry("429".into()).or_insert_with(|| {
                    problem("The key is over its ingestion rate; see Retry-After").into()
                });
            }
            responses.entry("503".into()).or_insert_with(|| {
                problem("Overloaded (see Retry-After) or the database is unreachable").into()
            });
        }
    }
}
