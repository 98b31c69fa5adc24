//! The HTTP API: routes, the OpenAPI document generated from the handlers, and the middleware
//! stack (request ids, tracing by matched route, compression, timeouts, body limits, CORS,
//! problem+json for every error).

pub mod auth;
pub mod benchmarks;
pub mod catalog;
mod cors;
mod cursor;
pub mod decide;
mod docs_page;
mod edge;
pub mod error;
pub mod exposition;
pub mod extract;
pub mod fleet;
mod gpu_names;
pub mod health;
pub mod idempotency;
pub mod keda;
pub mod keys;
pub mod limits;
mod list;
pub mod metrics;
pub mod offerings;
pub mod page;
mod page_events;
pub mod pool_access;
pub mod pools;
pub mod prices;
pub mod providers_status;
mod route_guard;
mod schema_rules;
pub mod simulate;
pub mod sns;
pub mod webhooks;

use axum::Router;
use axum::http::{HeaderName, Method, header};
use axum::middleware;
use tower::ServiceBuilder;
use tower_http::compression::CompressionLayer;
use tower_http::cors::{Any, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::config::ServeConfig;
use error::ApiError;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "trainscaler",
        description = "Scaling decisions for machine-learning training on cloud GPUs: the instance catalog with price history. Errors are application/problem+json (RFC 9457).",
        license(name = "Apache-2.0")
    ),
    tags(
        (name = "catalog", description = "Offerings, GPUs, providers, catalog imports"),
        (name = "prices", description = "Price observations and history"),
        (name = "decide", description = "Which instance for this job"),
        (name = "benchmarks", description = "Measured throughput and what to measure next"),
        (name = "pools", description = "Pools of workers, their policies, workers and events"),
        (name = "signals", description = "Metric samples, remote-write and cloud notices arriving by webhook"),
        (name = "fleet", description = "The whole fleet for dashboards and people"),
        (name = "keda", description = "KEDA's metrics-api scaler (the gRPC external scaler listens on its own port)"),
        (name = "simulate", description = "What would policies have cost on a trace: replays through the decision core"),
        (name = "keys", description = "API keys: make, list, revoke (admin scope)"),
        (name = "health", description = "Probes and metrics"),
    )
)]
struct ApiDoc;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Routes with their OpenAPI operations; body limits differ between JSON and catalog uploads.
fn routes(
    json_limit: usize,
    catalog_limit: usize,
    ingest_limit: usize,
    simulate_limit: usize,
) -> OpenApiRouter<AppState> {
    let json = OpenApiRouter::new()
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(offerings::list_offerings))
        .routes(routes!(offerings::get_offering))
        .routes(routes!(prices::post_prices))
        .routes(routes!(prices::price_history))
        .routes(routes!(catalog::list_gpus))
        .routes(routes!(catalog::list_providers))
        .routes(routes!(providers_status::providers_status))
        .routes(routes!(decide::decide))
        .routes(routes!(
            benchmarks::post_benchmark,
            benchmarks::list_benchmarks
        ))
        .routes(routes!(benchmarks::plan_benchmarks))
        .routes(routes!(
            pools::put_pool,
            pools::get_pool,
            pools::delete_pool
        ))
        .routes(routes!(pools::list_pools))
        .routes(routes!(pools::put_worker, pools::delete_worker))
        .routes(routes!(pools::list_workers))
        .routes(routes!(pools::list_events))
        .routes(routes!(fleet::get_fleet))
        .routes(routes!(fleet::get_fleet_pool))
        .routes(routes!(fleet::fleet_page))
        .routes(routes!(metrics::metrics))
        .routes(routes!(keda::keda_pool))
        .routes(routes!(keys::create_key, keys::list_keys))
        .routes(routes!(keys::revoke_key))
        .layer(RequestBodyLimitLayer::new(json_limit));
    let uploads = OpenApiRouter::new()
        .routes(routes!(catalog::import_catalog))
        .layer(RequestBodyLimitLayer::new(catalog_limit));
    let ingest = OpenApiRouter::new()
        .routes(routes!(webhooks::post_metrics))
        .routes(routes!(webhooks::post_prometheus))
        .routes(routes!(webhooks::post_events))
        .routes(routes!(sns::post_sns))
        .layer(RequestBodyLimitLayer::new(ingest_limit));
    let simulate = OpenApiRouter::new()
        .routes(routes!(simulate::simulate))
        .layer(RequestBodyLimitLayer::new(simulate_limit));
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(json)
        .merge(simulate)
        .merge(uploads)
        .merge(ingest)
}

/// The OpenAPI document, as committed in `openapi/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut spec = routes(1, 1, 1, 1).split_for_parts().1;
    auth::document(&mut spec);
    idempotency::document(&mut spec);
    schema_rules::document(&mut spec);
    document_bodies(&mut spec);
    spec
}

/// Adds the answers the extractors give before a handler runs: 413 from the route's body
/// limit, 415 from the content-type check (of [`ApiJson`] or the handler's own), 400 for
/// malformed JSON, 400 for an unknown query parameter (of [`ApiQuery`]) and 408 from the
/// request timeout. Added here rather
/// than on each handler so a new route cannot forget them.
///
/// [`ApiJson`]: extract::ApiJson
/// [`ApiQuery`]: extract::ApiQuery
fn document_bodies(spec: &mut utoipa::openapi::OpenApi) {
    let problem = error::problem_response;
    for item in spec.paths.paths.values_mut() {
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
        ];
        for op in ops.into_iter().flatten() {
            // The timeout layer wraps every route.
            op.responses
                .responses
                .entry("408".into())
                .or_insert_with(|| {
                    problem("Not answered within `TRAINSCALER_REQUEST_TIMEOUT_SECS`").into()
                });
            let has_query = op
                .parameters
                .iter()
                .flatten()
                .any(|p| matches!(p.parameter_in, utoipa::openapi::path::ParameterIn::Query));
            if has_query {
                op.responses
                    .responses
                    .entry("400".into())
                    .or_insert_with(|| problem("Unknown query parameter").into());
            }
            let Some(body) = &op.request_body else {
                continue;
            };
            if body.content.contains_key("application/json") {
                op.responses
                    .responses
                    .entry("400".into())
                    .or_insert_with(|| problem("Malformed JSON").into());
            }
            let types: Vec<&str> = body.content.keys().map(String::as_str).collect();
            let types = types.join(" or ");
            let responses = &mut op.responses.responses;
            responses
                .entry("413".into())
                .or_insert_with(|| problem("Body over the route's limit").into());
            responses
                .entry("415".into())
                .or_insert_with(|| problem(&format!("Content-Type is not {types}")).into());
        }
    }
}

/// The whole HTTP application.
pub fn router(state: AppState, config: &ServeConfig) -> Router {
    let (api, mut spec) = routes(
        config.max_body_bytes,
        config.max_catalog_bytes,
        config.max_ingest_bytes,
        config.max_simulate_bytes,
    )
    .split_for_parts();
    auth::document(&mut spec);
    idempotency::document(&mut spec);
    schema_rules::document(&mut spec);
    document_bodies(&mut spec);
    let spec_json = spec;
    let routes = api
        .route(
            "/openapi.json",
            axum::routing::get(move || async move { axum::Json(spec_json) }),
        )
        .merge(docs_page::routes())
        .fallback(|| async { ApiError::from_status(axum::http::StatusCode::NOT_FOUND) })
        // The one layer that needs the matched route: tracing span, latency, key check,
        // idempotency.
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            route_guard::guard,
        ))
        .with_state(state);
    // The rest wraps the router once, not each route: axum clones a route's whole layered
    // service for every request it routes, and these layers do not need the matched route.
    // Outermost first. The tower-http limits on the routes replace axum's default body limit.
    let stack = ServiceBuilder::new()
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(cors::OriginCorsLayer::new(
            CorsLayer::new()
                .allow_origin(Any)
                .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
                .allow_headers([
                    header::CONTENT_TYPE,
                    header::AUTHORIZATION,
                    idempotency::IDEMPOTENCY_KEY,
                ])
                .expose_headers([idempotency::IDEMPOTENT_REPLAYED, header::RETRY_AFTER]),
        ))
        .layer(CompressionLayer::new())
        // Outside the timeout: a shed request costs nothing but the answer, and a 408 leaves
        // as a problem document too.
        .layer(middleware::from_fn_with_state(
            limits::ConcurrencyLimit::new(config.max_concurrent_requests),
            edge::edge,
        ))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            config.request_timeout(),
        ))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .service(routes);
    Router::new().fallback_service(stack)
}
