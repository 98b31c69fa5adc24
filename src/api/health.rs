//! Liveness and readiness probes.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use crate::app::AppState;

/// How long readiness waits for the database. A database that stops answering without
/// closing the connection (a network partition) must still turn the probe to 503, not hang it.
const READINESS_DEADLINE: Duration = Duration::from_secs(3);

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
    match tokio::time::timeout(READINESS_DEADLINE, state.store.ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: database unreachable");
            return Err(ApiError::database_unavailable());
        }
        Err(_) => {
            tracing::warn!("readiness: the database did not answer in time");
            return Err(ApiError::database_unavailable());
        }
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
