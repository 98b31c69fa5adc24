//! `GET /v1/keda/pools/{pool}`: a pool's decision as plain JSON for KEDA's `metrics-api`
//! scaler (`valueLocation: desired_workers`), for clusters that would rather not run the gRPC
//! external scaler. It is the same decision `POST /decide` and the gRPC scaler make.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, Problem};
use super::extract::ApiPath;
use super::offerings::snapshot;
use crate::app::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct KedaPool {
    pub pool: String,
    /// The pool's target now: point `valueLocation` here, with `targetValue: "1"`.
    pub desired_workers: u32,
    pub current_workers: u32,
    /// Jobs waiting, if the pool reports a queue.
    pub queue_depth: Option<f64>,
    /// `desired_workers > 0`, for `activationTargetValue`-style checks.
    pub active: bool,
}

/// A pool's desired workers for KEDA's metrics-api scaler.
#[utoipa::path(get, path = "/v1/keda/pools/{pool}", tag = "keda",
    params(("pool" = String, Path, description = "Pool name")),
    responses(
        (status = 200, description = "The pool's decision", body = KedaPool),
        (status = 404, description = "No such pool", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn keda_pool(
    State(state): State<AppState>,
    ApiPath(pool): ApiPath<String>,
) -> Result<Json<KedaPool>, ApiError> {
    let catalog = snapshot(&state)?;
    let answer = state
        .decide_pool(&catalog, &pool)
        .await?
        .ok_or_else(|| ApiError::not_found("pool", format!("no pool `{pool}`")))?;
    let d = &answer.decision;
    Ok(Json(KedaPool {
        desired_workers: d.desired,
        current_workers: d.current,
        queue_depth: answer.queue_depth,
        active: d.desired > 0,
        pool,
    }))
}
