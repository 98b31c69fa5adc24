//! `GET /fleet` and `GET /fleet/{pool}` for dashboards, and `GET /`: the same view as a page
//! for people. A key restricted to pools sees those pools only.

use axum::extract::State;
use axum::response::Html;
use axum::{Extension, Json};

use super::error::{ApiError, Problem};
use super::extract::ApiPath;
use super::offerings::snapshot;
use super::pool_access::scope_of;
use crate::app::AppState;
use crate::auth::verifier::Principal;
use crate::fleet::view::{FleetView, PoolView, fleet_of, pool_view};
use crate::timefmt::now_ms;

/// Every pool: workers by type, market and zone, target, queue, utilisation, cost per hour,
/// spend today, budget, last decision and recent events; fleet totals.
#[utoipa::path(get, path = "/fleet", tag = "fleet",
    responses((status = 200, description = "The fleet", body = FleetView)))]
pub async fn get_fleet(
    State(state): State<AppState>,
    principal: Option<Extension<Principal>>,
) -> Result<Json<FleetView>, ApiError> {
    let catalog = snapshot(&state)?;
    let pools = scope_of(principal.as_deref());
    let shown = |name: &str| pools.allows(name);
    Ok(Json(
        fleet_of(&state.store, &catalog, now_ms(), false, shown).await?,
    ))
}

/// One pool of the fleet.
#[utoipa::path(get, path = "/fleet/{pool}", tag = "fleet",
    params(("pool" = String, Path, description = "Pool name")),
    responses(
        (status = 200, description = "The pool", body = PoolView),
        (status = 404, description = "No such pool", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_fleet_pool(
    State(state): State<AppState>,
    ApiPath(pool): ApiPath<String>,
) -> Result<Json<PoolView>, ApiError> {
    let catalog = snapshot(&state)?;
    let row = state
        .store
        .find_pool(&pool)
        .await?
        .ok_or_else(|| ApiError::not_found("pool", format!("no pool `{pool}`")))?;
    Ok(Json(
        pool_view(&state.store, &catalog, row, now_ms(), false).await?,
    ))
}

/// The fleet page: pools, workers, cost, and desired vs current over the last hours.
#[utoipa::path(get, path = "/", tag = "fleet",
    responses((status = 200, description = "HTML", content_type = "text/html")))]
pub async fn fleet_page(
    State(state): State<AppState>,
    principal: Option<Extension<Principal>>,
) -> Result<Html<String>, ApiError> {
    let catalog = snapshot(&state)?;
    let pools = scope_of(principal.as_deref());
    let shown = |name: &str| pools.allows(name);
    let view = fleet_of(&state.store, &catalog, now_ms(), true, shown).await?;
    Ok(Html(super::page::render(&view)))
}
