//! `GET /v1/providers/status`: the cloud adapters this replica runs, the credentials each
//! uses and how its last call went, so an operator can tell a missing role from a throttled
//! API without reading logs. Never a key or a token.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::app::AppState;
use crate::provider::status::ProviderStatus;

#[derive(Debug, Serialize, ToSchema)]
pub struct ProvidersStatus {
    /// `aws`, `alibaba` and `gcp`, always in this order.
    pub providers: Vec<ProviderStatus>,
}

/// Credentials and last call of each cloud adapter on this replica.
///
/// Adapters exist on replicas that run the reconciler; only the leader calls clouds, so the
/// other replicas report no last call.
#[utoipa::path(get, path = "/v1/providers/status", tag = "health",
    responses(
        (status = 200, description = "Each cloud provider's adapter", body = ProvidersStatus),
    ))]
pub async fn providers_status(State(state): State<AppState>) -> Json<ProvidersStatus> {
    Json(ProvidersStatus {
        providers: state.provider_status.statuses(),
    })
}
