//! `POST /v1/prices` (a batch of price observations, all or nothing, idempotent) and
//! `GET /v1/prices/history`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::cursor;
use super::error::{ApiError, FieldError, Problem};
use super::extract::{ApiJson, ApiQuery, parse_limit, parse_param};
use super::idempotency::{Claim, json_answer, once};
use super::offerings::{CatalogProvider, known_provider, snapshot};
use crate::app::AppState;
use crate::core::catalog::{Market, OfferingKey};
use crate::core::money::Micros;
use crate::store::{BatchReport, HistoryFilter, NewObservation, PricePoint};
use crate::timefmt::{check_not_future, format_ms, now_ms, parse_rfc3339_ms};

/// Most observations one request may carry.
pub const MAX_BATCH: usize = 10_000;

/// One observed price.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservationIn {
    /// Unknown -> 404, and nothing of the batch is written.
    #[schema(value_type = CatalogProvider, example = "aws")]
    pub provider: String,
    /// With `zone` and `instance_type`, an offering of the catalog (else 422).
    #[schema(min_length = 1, pattern = r"\S", example = "us-east-1")]
    pub region: String,
    /// Omit (or send "") for offerings priced per region.
    #[serde(default)]
    pub zone: Option<String>,
    #[schema(min_length = 1, pattern = r"\S", example = "g4dn.12xlarge")]
    pub instance_type: String,
    pub market: Market,
    /// USD per instance-hour, stored in micro-dollars: at least one micro-dollar, at most
    /// 100000.
    // Micros::from_dollars: positive, at most MAX_DOLLARS_PER_HOUR, and not rounding to zero.
    #[schema(minimum = 0.000001, maximum = 100000, example = 3.912)]
    pub price: f64,
    /// RFC 3339, not in the future. Together with offering and market it identifies the
    /// observation, which is what makes re-sending a batch a no-op.
    #[schema(format = DateTime, example = "2026-12-01T00:00:00Z")]
    pub observed_at: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"observations": [{
    "provider": "aws", "region": "us-east-1", "instance_type": "g4dn.12xlarge",
    "market": "on_demand", "price": 3.912, "observed_at": "2026-12-01T00:00:00Z"
}]}))]
pub struct PriceBatch {
    /// 1 to 10000 observations.
    #[schema(min_items = 1, max_items = 10000)]
    pub observations: Vec<ObservationIn>,
}

fn validate(batch: PriceBatch, state: &AppState) -> Result<Vec<NewObservation>, ApiError> {
    if batch.observations.is_empty() {
        return Err(ApiError::invalid("observations", "must not be empty"));
    }
    if batch.observations.len() > MAX_BATCH {
        return Err(ApiError::invalid(
            "observations",
            format!("must hold at most {MAX_BATCH} items"),
        ));
    }
    let catalog = snapshot(state)?;
    // An unknown provider is a 404, as everywhere else in the API.
    if let Some((i, o)) = batch
        .observations
        .iter()
        .enumerate()
        .find(|(_, o)| !catalog.has_provider(&o.provider))
    {
        return Err(ApiError::not_found(
            format!("observations[{i}].provider"),
            format!("unknown provider `{}`", o.provider),
        ));
    }
    let now = now_ms();
    let mut errors = Vec::new();
    let mut out = Vec::with_capacity(batch.observations.len());
    for (i, o) in batch.observations.into_iter().enumerate() {
        let mut fail = |field: &str, problem: String| {
            errors.push(FieldError {
                field: format!("observations[{i}].{field}"),
                problem,
                line: None,
            });
        };
        for (field, value) in [("region", &o.region), ("instance_type", &o.instance_type)] {
            if value.trim().is_empty() {
                fail(field, "must not be empty".into());
            }
        }
        let price = Micros::from_dollars(o.price)
            .map_err(|e| fail("price", e.to_string()))
            .ok();
        let observed_at = parse_rfc3339_ms(&o.observed_at)
            .and_then(|ms| check_not_future(ms, now))
            .map_err(|e| fail("observed_at", e))
            .ok();
        if let (Some(price), Some(observed_at_ms)) = (price, observed_at) {
            out.push(NewObservation {
                key: OfferingKey {
                    provider: o.provider,
                    region: o.region,
                    zone: o.zone.unwrap_or_default(),
                    instance_type: o.instance_type,
                },
                market: o.market,
                price,
                observed_at_ms,
            });
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(ApiError::invalid_fields(errors))
    }
}

/// Records a batch of price observations: all of them or, on any error, none.
///
/// An observation already recorded (same offering, market, `observed_at` and price) is counted
/// as a duplicate and changes nothing; the same key with a different price is a 409.
#[utoipa::path(post, path = "/v1/prices", tag = "prices", request_body = PriceBatch,
    responses(
        (status = 200, description = "Recorded", body = BatchReport),
        (status = 400, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown provider; nothing was written", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Conflicts with a recorded observation", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid observation (bad value, future time, unknown offering); nothing was written", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "A conflicting write was in progress; retry", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_prices(
    State(state): State<AppState>,
    claim: Claim,
    ApiJson(batch): ApiJson<PriceBatch>,
) -> Result<Json<BatchReport>, ApiError> {
    let observations = validate(batch, &state)?;
    let respond = |r: &BatchReport| json_answer(StatusCode::OK, r);
    let once = once(claim.as_ref().map(|c| &c.0), &respond);
    let report = state
        .store
        .record_prices_once(&observations, "api", now_ms(), once)
        .await?;
    if report.inserted > 0 {
        state.catalog.refresh_after_write(&state.store).await;
    }
    Ok(Json(report))
}

/// Filters for price history.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryParams {
    provider: Option<String>,
    instance_type: Option<String>,
    region: Option<String>,
    /// Zone; send an empty value for region-level offerings.
    zone: Option<String>,
    #[param(value_type = Option<Market>)]
    market: Option<String>,
    /// Observations at or after this time (RFC 3339).
    from: Option<String>,
    /// Observations before this time (RFC 3339).
    to: Option<String>,
    /// Page size, 1 to 10000 (default 1000); not empty.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 10000)]
    limit: Option<String>,
    /// The `next` value of the previous page; omit it (do not send it empty) for the first.
    #[param(min_length = 1)]
    cursor: Option<String>,
}

/// One recorded price observation.
#[derive(Debug, Serialize, ToSchema)]
pub struct PricePointItem {
    pub provider: String,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub market: Market,
    /// USD per instance-hour.
    pub price: f64,
    pub observed_at: String,
    /// `bundled`, `import`, or `api`.
    pub source: String,
}

impl From<&PricePoint> for PricePointItem {
    fn from(p: &PricePoint) -> Self {
        Self {
            provider: p.key.provider.clone(),
            region: p.key.region.clone(),
            zone: (!p.key.zone.is_empty()).then(|| p.key.zone.clone()),
            instance_type: p.key.instance_type.clone(),
            market: p.market,
            price: p.price.dollars(),
            observed_at: format_ms(p.observed_at_ms),
            source: p.source.clone(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryPage {
    /// Oldest first.
    pub items: Vec<PricePointItem>,
    pub next: Option<String>,
}

/// Price observations, oldest first, filtered by offering, market and time range.
#[utoipa::path(get, path = "/v1/prices/history", tag = "prices", params(HistoryParams),
    responses(
        (status = 200, description = "A page of observations", body = HistoryPage),
        (status = 400, description = "Unknown parameter or bad cursor", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown provider", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A parameter has a bad value", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn price_history(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<HistoryParams>,
) -> Result<Json<HistoryPage>, ApiError> {
    if let Some(p) = &params.provider {
        known_provider(&*snapshot(&state)?, p)?;
    }
    let time = |field: &str, v: &Option<String>| {
        v.as_deref()
            .filter(|t| !t.is_empty())
            .map(|t| parse_rfc3339_ms(t).map_err(|e| ApiError::invalid(field, e)))
            .transpose()
    };
    let from_ms = time("from", &params.from)?;
    let to_ms = time("to", &params.to)?;
    if let (Some(from), Some(to)) = (from_ms, to_ms)
        && from > to
    {
        return Err(ApiError::invalid("to", "must not be before `from`"));
    }
    let limit = parse_limit(params.limit.as_deref(), 1000, 10_000)?;
    let after = params.cursor.as_deref().map(cursor::decode).transpose()?;
    let filter = HistoryFilter {
        provider: params.provider,
        instance_type: params.instance_type.filter(|s| !s.is_empty()),
        region: params.region.filter(|s| !s.is_empty()),
        zone: params.zone,
        market: parse_param("market", params.market.as_deref(), "`on_demand` or `spot`")?,
        from_ms,
        to_ms,
        after,
        newest_first: false,
        // One extra row tells whether another page follows.
        limit: limit as i64 + 1,
    };
    let mut points = state.store.price_history(&filter).await?;
    let next = if points.len() > limit {
        points.truncate(limit);
        points
            .last()
            .map(|p| cursor::encode(p.observed_at_ms, p.id))
    } else {
        None
    };
    Ok(Json(HistoryPage {
        items: points.iter().map(PricePointItem::from).collect(),
        next,
    }))
}
