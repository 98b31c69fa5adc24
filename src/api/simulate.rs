//! `POST /v1/simulate`: what would these policies have cost on this trace. The replay runs
//! off the async workers, bounded in lines, policies and evaluations (422 beyond them) and in
//! body size (413).

use axum::Json;
use axum::extract::State;

use super::error::{ApiError, Problem};
use super::extract::ApiJson;
use super::offerings::snapshot;
use crate::app::AppState;
use crate::sim::{SimulateRequest, SimulateResponse, plan_request};

/// Replay a trace through policies and the built-in baselines.
///
/// Every policy (and `fixed_on_demand`, `autoscale_on_demand`, `autoscale_spot_mix`, derived
/// from the first) is replayed over the same window by the decision core the service runs,
/// priced from the current catalog.
#[utoipa::path(
    post,
    path = "/v1/simulate",
    tag = "simulate",
    request_body = SimulateRequest,
    responses(
        (status = 200, description = "One report per policy, baselines last", body = SimulateResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A bad field, or more lines, policies or evaluations than one request may ask for", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn simulate(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<SimulateRequest>,
) -> Result<Json<SimulateResponse>, ApiError> {
    let catalog = snapshot(&state)?;
    let response = tokio::task::spawn_blocking(move || {
        let prices_from = format!("the service's catalog, version {}", catalog.version());
        plan_request(req, &catalog).map(|plan| plan.run(&catalog, &prices_from).0)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|p| ApiError::invalid_fields(p.0))?;
    Ok(Json(response))
}
