//! Catalog reference data and uploads: `GET /v1/gpus`, `GET /v1/providers`, and
//! `POST /v1/catalog/import` (the HTTP twin of `trainscaler catalog import`).

use axum::Json;
use axum::extract::{Request, State};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, Problem};
use super::extract::{ApiQuery, content_type_is, read_body};
use super::list::{ListParams, page};
use super::offerings::{CatalogProvider, known_provider, snapshot};
use crate::app::AppState;
use crate::catalog::{CatalogFormat, skypilot};
use crate::core::catalog::{GpuFacts, ProviderEntry};
use crate::store::{CatalogImport, ImportReport};
use crate::timefmt::{check_not_future, now_ms, parse_rfc3339_ms};

#[derive(Debug, Serialize, ToSchema)]
pub struct GpuList {
    /// GPU models by name.
    pub items: Vec<GpuFacts>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next: Option<String>,
}

/// GPU datasheet facts, per GPU.
#[utoipa::path(get, path = "/v1/gpus", tag = "catalog", params(ListParams),
    responses(
        (status = 200, description = "A page of GPU models", body = GpuList),
        (status = 400, description = "Unknown parameter or bad cursor", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`limit` out of range", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_gpus(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<GpuList>, ApiError> {
    let (items, next) = page(
        snapshot(&state)?.gpus().to_vec(),
        |g| format!("{}\u{1}{}", g.name, g.variant),
        params.limit.as_deref(),
        params.cursor.as_deref(),
    )?;
    Ok(Json(GpuList { items, next }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderList {
    /// Providers by name.
    pub items: Vec<ProviderEntry>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next: Option<String>,
}

/// The providers the catalog knows.
#[utoipa::path(get, path = "/v1/providers", tag = "catalog", params(ListParams),
    responses(
        (status = 200, description = "A page of providers", body = ProviderList),
        (status = 400, description = "Unknown parameter or bad cursor", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`limit` out of range", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_providers(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ProviderList>, ApiError> {
    let (items, next) = page(
        snapshot(&state)?.providers().to_vec(),
        |p| p.name.clone(),
        params.limit.as_deref(),
        params.cursor.as_deref(),
    )?;
    Ok(Json(ProviderList { items, next }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ImportParams {
    /// Provider the file describes; unknown -> 404.
    #[param(value_type = CatalogProvider)]
    provider: String,
    /// File layout; only `skypilot` so far.
    #[param(value_type = Option<String>, pattern = "^skypilot$")]
    format: Option<CatalogFormat>,
    /// When the file's prices were observed (RFC 3339, not in the future); default: now.
    #[param(format = DateTime)]
    observed_at: Option<String>,
}

/// Loads a provider catalog file (`text/csv`). Idempotent: the same file twice changes
/// nothing; prices that differ from the latest recorded ones are appended to the history.
#[utoipa::path(post, path = "/v1/catalog/import", tag = "catalog", params(ImportParams),
    request_body(content = String, content_type = "text/csv", description = "A SkyPilot-layout vms.csv",
        example = json!(concat!(
            "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region,AvailabilityZone\n",
            "g4dn.12xlarge,T4,4.0,48.0,192.0,3.912,1.72128,us-east-1,\n",
        ))),
    responses(
        (status = 200, description = "Imported", body = ImportReport),
        (status = 404, description = "Unknown provider", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A price differs from the one recorded at the same observed_at; nothing was written", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "File too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not text/csv", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Malformed file; `errors[0].line` names the line. Nothing was written", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn import_catalog(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ImportParams>,
    request: Request,
) -> Result<Json<ImportReport>, ApiError> {
    known_provider(&*snapshot(&state)?, &params.provider)?;
    if !content_type_is(request.headers(), |t| t == "text/csv") {
        return Err(ApiError::unsupported_media_type("text/csv"));
    }
    let observed_at_ms = match params.observed_at.as_deref() {
        Some(t) => parse_rfc3339_ms(t)
            .and_then(|ms| check_not_future(ms, now_ms()))
            .map_err(|e| ApiError::invalid("observed_at", e))?,
        None => now_ms(),
    };
    let CatalogFormat::Skypilot = params.format.unwrap_or(CatalogFormat::Skypilot);
    let body = read_body(request, &state).await?;
    let text = String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::invalid("body", "is not valid UTF-8"))?;
    let provider = params.provider.clone();
    // Parsing a large catalog is CPU work; keep it off the async workers.
    let offerings = tokio::task::spawn_blocking(move || skypilot::parse(&provider, &text))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::invalid_line(e.line, e.to_string()))?;
    let report = state
        .store
        .import_catalog(
            CatalogImport {
                provider: &params.provider,
                offerings: &offerings,
                observed_at_ms,
                source: "import",
            },
            now_ms(),
        )
        .await?;
    state.catalog.refresh_after_write(&state.store).await;
    Ok(Json(report))
}
