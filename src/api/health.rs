//! Liveness and readiness probes.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use crate::app::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    pub status: &'static str,
    /// `postgres` or `sqlite`.
    pub database: &'static str,
    pub catalog_offerings: usize,
}

/// The process is up and serving HTTP.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "Alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The database answers and the catalog snapshot is loaded.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready", body = Readiness),
        (status = 503, description = "Not ready", body = super::error::Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    if let Err(e) = state.store.ping().await {
        tracing::warn!(error = %e, "readiness: database unreachable");
        return Err(ApiError::unavailable("the database is not reachable"));
    }
    let Some(catalog) = state.catalog.get() else {
        return Err(ApiError::unavailable("the catalog is not loaded yet"));
    };
    Ok(Json(Readiness {
        status: "ready",
        database: state.store.backend(),
        catalog_offerings: catalog.offerings().len(),
    }))
}
