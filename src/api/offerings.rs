//! `GET /v1/offerings` (filtered, price-sorted, cursor-paginated, served from the in-memory
//! snapshot) and `GET /v1/offerings/{provider}/{instance_type}` (locations and price history).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::cursor;
use super::error::{ApiError, Problem};
use super::extract::{ApiPath, ApiQuery, parse_limit, parse_param};
use super::gpu_names::unknown_gpu_problem;
use super::prices::PricePointItem;
use crate::app::AppState;
use crate::core::catalog::{CatalogSnapshot, Interconnect, Market, Offering};
use crate::core::money::Micros;
use crate::core::query::{OfferingQuery, PageCursor};
use crate::store::HistoryFilter;
use crate::timefmt::format_ms;

pub const DEFAULT_PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;

/// Filters for listing offerings. All are optional and combine with AND.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OfferingsParams {
    /// Provider name (`aws`, `gcp`, `azure`, `lambda`, `nebius`, `vast`); unknown -> 404.
    provider: Option<String>,
    /// Region, as the provider names it (`us-east-1`, `europe-west4`, `eastus`).
    region: Option<String>,
    /// GPU model name, case-insensitive (`A100`, `a100-80gb`, `H100`); a name the catalog does
    /// not know is a 422 listing the closest known names.
    gpu: Option<String>,
    /// At least this many GPUs per instance.
    #[param(value_type = Option<f64>)]
    min_gpus: Option<String>,
    /// At least this much memory per GPU, GiB.
    #[param(value_type = Option<f64>)]
    min_gpu_memory_gib: Option<String>,
    /// Only offerings priced in this market; sorting and `max_price` then use its price.
    #[param(value_type = Option<Market>)]
    market: Option<String>,
    /// Highest price per instance-hour, USD: more than 0, at most 100000.
    #[param(value_type = Option<f64>, exclusive_minimum = 0, maximum = 100000)]
    max_price: Option<String>,
    /// Page size, 1 to 1000 (default 100); not empty.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// The `next` value of the previous page; omit it (do not send it empty) for the first.
    #[param(min_length = 1)]
    cursor: Option<String>,
}

/// One offering: an instance type in one region or zone, with its latest prices.
#[derive(Debug, Serialize, ToSchema)]
pub struct OfferingItem {
    pub id: i64,
    pub provider: String,
    pub region: String,
    /// Null where the provider's catalog prices a whole region.
    pub zone: Option<String>,
    pub instance_type: String,
    pub gpu: String,
    pub gpu_count: f64,
    /// Memory per GPU, GiB.
    pub gpu_memory_gib: f64,
    pub vcpus: f64,
    pub memory_gib: f64,
    pub network_gbps: Option<f64>,
    pub interconnect: Interconnect,
    /// Local instance-store NVMe/SSD in GB; 0 = network storage only, null = not documented.
    pub local_nvme_gb: Option<f64>,
    pub arch: String,
    /// USD per instance-hour; null when not offered on demand.
    pub on_demand_price: Option<f64>,
    /// USD per instance-hour, latest observation; null when unknown.
    pub spot_price: Option<f64>,
    /// When the newest of the two prices was observed (RFC 3339).
    pub price_observed_at: Option<String>,
}

impl From<&Offering> for OfferingItem {
    fn from(o: &Offering) -> Self {
        Self {
            id: o.id,
            provider: o.key.provider.clone(),
            region: o.key.region.clone(),
            zone: (!o.key.zone.is_empty()).then(|| o.key.zone.clone()),
            instance_type: o.key.instance_type.clone(),
            gpu: o.spec.gpu.clone(),
            gpu_count: o.spec.gpu_count,
            gpu_memory_gib: o.spec.gpu_memory_gib,
            vcpus: o.spec.vcpus,
            memory_gib: o.spec.memory_gib,
            network_gbps: o.spec.network_gbps,
            interconnect: o.spec.interconnect,
            local_nvme_gb: o.spec.local_nvme_gb,
            arch: o.spec.arch.clone(),
            on_demand_price: o.on_demand.map(Micros::dollars),
            spot_price: o.spot.map(Micros::dollars),
            price_observed_at: o.price_observed_at_ms.map(format_ms),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OfferingPageBody {
    pub items: Vec<OfferingItem>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next: Option<String>,
}

pub(super) fn snapshot(state: &AppState) -> Result<Arc<CatalogSnapshot>, ApiError> {
    state
        .catalog
        .get()
        .ok_or_else(|| ApiError::unavailable("the catalog is not loaded yet"))
}

/// A provider of the catalog (`GET /v1/providers` lists them with display names).
// Only the schema is used: request fields stay strings, so an unknown name keeps its 404 or
// 422 naming the field. The `providers` table is filled by a migration and no request adds to
// it, so the set is fixed per release and the spec can list it (a test holds it to the
// migration).
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // never built: it exists for its schema
pub enum CatalogProvider {
    Aws,
    Gcp,
    Azure,
    Lambda,
    Nebius,
    Vast,
    Alibaba,
}

pub use crate::policy_in::PoolProvider;

pub(super) fn known_provider(catalog: &CatalogSnapshot, provider: &str) -> Result<(), ApiError> {
    if catalog.has_provider(provider) {
        Ok(())
    } else {
        Err(ApiError::not_found(
            "provider",
            format!("unknown provider `{provider}`"),
        ))
    }
}

impl OfferingsParams {
    fn into_query(self, catalog: &CatalogSnapshot) -> Result<OfferingQuery, ApiError> {
        if let Some(p) = &self.provider {
            known_provider(catalog, p)?;
        }
        if let Some(gpu) = self.gpu.as_deref().filter(|g| !g.is_empty())
            && !catalog.knows_gpu(gpu)
        {
            return Err(ApiError::invalid("gpu", unknown_gpu_problem(catalog, gpu)));
        }
        let non_negative = |field: &str, v: Option<f64>| match v {
            Some(x) if !x.is_finite() || x < 0.0 => {
                Err(ApiError::invalid(field, "must be a non-negative number"))
            }
            v => Ok(v),
        };
        let max_price = parse_param::<f64>(
            "max_price",
            self.max_price.as_deref(),
            "a price in USD per hour",
        )?
        .map(|d| Micros::from_dollars(d).map_err(|e| ApiError::invalid("max_price", e.to_string())))
        .transpose()?;
        let limit = parse_limit(self.limit.as_deref(), DEFAULT_PAGE, MAX_PAGE)?;
        let after = match self.cursor.as_deref() {
            None => None,
            // An empty cursor is refused like any other the service did not issue.
            Some(token) => {
                let (price, id) = cursor::decode(token)?;
                Some(PageCursor { price, id })
            }
        };
        Ok(OfferingQuery {
            provider: self.provider,
            region: self.region.filter(|r| !r.is_empty()),
            gpu: self.gpu.filter(|g| !g.is_empty()),
            min_gpus: non_negative(
                "min_gpus",
                parse_param("min_gpus", self.min_gpus.as_deref(), "a number")?,
            )?,
            min_gpu_memory_gib: non_negative(
                "min_gpu_memory_gib",
                parse_param(
                    "min_gpu_memory_gib",
                    self.min_gpu_memory_gib.as_deref(),
                    "a number",
                )?,
            )?,
            market: parse_param("market", self.market.as_deref(), "`on_demand` or `spot`")?,
            max_price,
            after,
            limit,
        })
    }
}

/// Offerings matching the filters, cheapest first.
///
/// Sorted by on-demand price (spot where there is no on-demand offer), or by the `market`'s
/// price when `market` is given; unpriced offerings come last. Served from memory.
#[utoipa::path(get, path = "/v1/offerings", tag = "catalog", params(OfferingsParams),
    responses(
        (status = 200, description = "A page of offerings", body = OfferingPageBody),
        (status = 400, description = "Unknown parameter or bad cursor", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown provider", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A parameter has a bad value, or `gpu` names no GPU model of the catalog", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_offerings(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<OfferingsParams>,
) -> Result<Json<OfferingPageBody>, ApiError> {
    let catalog = snapshot(&state)?;
    let query = params.into_query(&catalog)?;
    let page = catalog.query(&query);
    Ok(Json(OfferingPageBody {
        items: page.items.into_iter().map(OfferingItem::from).collect(),
        next: page.next.map(|c| cursor::encode(c.price, c.id)),
    }))
}

/// One instance type of one provider: its specification, every region and zone it is sold in,
/// and its price history.
#[derive(Debug, Serialize, ToSchema)]
pub struct OfferingDetail {
    pub provider: String,
    pub instance_type: String,
    pub gpu: String,
    pub gpu_count: f64,
    pub gpu_memory_gib: f64,
    pub vcpus: f64,
    pub memory_gib: f64,
    pub network_gbps: Option<f64>,
    pub interconnect: Interconnect,
    pub local_nvme_gb: Option<f64>,
    pub arch: String,
    pub regions: Vec<String>,
    /// Every region and zone the type is sold in, as `/v1/offerings` lists them.
    pub locations: Vec<OfferingItem>,
    /// The newest 10,000 observations at most, oldest first; `/v1/prices/history` pages
    /// through all of them.
    pub price_history: Vec<PricePointItem>,
}

const DETAIL_HISTORY_LIMIT: i64 = 10_000;

/// One instance type with its regions, zones and price history.
#[utoipa::path(get, path = "/v1/offerings/{provider}/{instance_type}", tag = "catalog",
    params(
        ("provider" = String, Path, description = "Provider name"),
        ("instance_type" = String, Path, description = "Instance type (GCP N1 hosts with GPUs: `n1-highmem-8+T4x1`)"),
    ),
    responses(
        (status = 200, description = "The instance type", body = OfferingDetail),
        (status = 404, description = "Unknown provider or instance type", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_offering(
    State(state): State<AppState>,
    ApiPath((provider, instance_type)): ApiPath<(String, String)>,
) -> Result<Json<OfferingDetail>, ApiError> {
    let catalog = snapshot(&state)?;
    known_provider(&catalog, &provider)?;
    let mut locations: Vec<&Offering> = catalog.offerings_of(&provider, &instance_type).collect();
    let Some(first) = locations.first().copied() else {
        return Err(ApiError::not_found(
            "instance_type",
            format!("provider `{provider}` has no instance type `{instance_type}`"),
        ));
    };
    locations.sort_by(|a, b| a.key.cmp(&b.key));
    let history = state
        .store
        .price_history(&HistoryFilter {
            provider: Some(provider.clone()),
            instance_type: Some(instance_type.clone()),
            limit: DETAIL_HISTORY_LIMIT,
            newest_first: true,
            ..Default::default()
        })
        .await?;
    // The newest observations, shown oldest first.
    let history: Vec<_> = history.into_iter().rev().collect();
    let mut regions: Vec<String> = locations.iter().map(|o| o.key.region.clone()).collect();
    regions.dedup();
    let spec = &first.spec;
    Ok(Json(OfferingDetail {
        provider,
        instance_type,
        gpu: spec.gpu.clone(),
        gpu_count: spec.gpu_count,
        gpu_memory_gib: spec.gpu_memory_gib,
        vcpus: spec.vcpus,
        memory_gib: spec.memory_gib,
        network_gbps: spec.network_gbps,
        interconnect: spec.interconnect,
        local_nvme_gb: spec.local_nvme_gb,
        arch: spec.arch.clone(),
        regions,
        locations: locations.into_iter().map(OfferingItem::from).collect(),
        price_history: history.iter().map(PricePointItem::from).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    /// The schema's provider lists must stay the migration's providers, or the spec lies.
    #[test]
    fn provider_enums_list_the_migrated_providers() {
        let sql = include_str!("../../migrations/sqlite/20261202000001_catalog.sql");
        let insert = sql
            .split("INSERT INTO providers")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .expect("the catalog migration inserts the providers");
        let mut migrated: Vec<String> = insert
            .split("('")
            .skip(1)
            .filter_map(|row| row.split('\'').next().map(str::to_string))
            .collect();
        migrated.sort();
        let names = |schema: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>| {
            let json = serde_json::to_value(schema).expect("a schema serialises");
            let mut names: Vec<String> = json["enum"]
                .as_array()
                .expect("an enum schema")
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            names.sort();
            names
        };
        assert_eq!(names(CatalogProvider::schema()), migrated);
        let mut pool = migrated.clone();
        pool.push(crate::core::policy::STATIC_PROVIDER.to_string());
        pool.sort();
        assert_eq!(names(PoolProvider::schema()), pool);
    }
}
