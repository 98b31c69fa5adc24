//! Measured benchmarks: `POST /v1/benchmarks` records one, `GET /v1/benchmarks` summarises a
//! workload per instance type and size, `POST /v1/benchmarks/plan` says which three sizes to
//! measure for a job.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::decide::{JobIn, parse_job};
use super::error::{ApiError, FieldError, Problem};
use super::extract::{ApiJson, ApiQuery, parse_param};
use super::idempotency::{Claim, json_answer, once};
use super::list::page;

/// Most steps a benchmark may state or a plan may ask for: a billion fixed steps is far beyond
/// any measurement run, and keeps step counts exact in every number type they pass through.
pub const MAX_STEPS: i64 = 1_000_000_000;
use super::offerings::{CatalogProvider, known_provider, snapshot};
use crate::app::AppState;
use crate::catalog::spot_advisor::BUNDLED_SPOT_RISK;
use crate::core::benchmark::{
    Benchmark, BenchmarkPlan, DEFAULT_COMMUNICATION_BOUND_BELOW, InstanceSummary, plan, summarise,
};
use crate::core::catalog::CatalogSnapshot;
use crate::core::job::usable_gib;
use crate::core::select::select;
use crate::timefmt::{check_not_future, now_ms, parse_rfc3339_ms};

/// One measurement: give `samples_per_sec` or `step_time_sec`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"workload": "llama-7b-finetune", "provider": "aws",
    "instance_type": "p4d.24xlarge", "gpus": 8, "nodes": 1, "samples_per_sec": 512.0,
    "measured_at": "2026-12-01T00:00:00Z"}))]
pub struct BenchmarkIn {
    /// The workload name the measurement is filed under (trimmed; not blank).
    #[schema(min_length = 1, pattern = r"\S", example = "llama-7b-finetune")]
    pub workload: String,
    #[schema(value_type = CatalogProvider, example = "aws")]
    pub provider: String,
    /// An instance type the provider offers in the catalog (else 422).
    #[schema(min_length = 1, example = "p4d.24xlarge")]
    pub instance_type: String,
    /// GPUs per node used: 1 to the instance type's GPU count.
    #[schema(minimum = 1, example = 8)]
    pub gpus: u32,
    #[schema(minimum = 1, maximum = 1024, example = 1)]
    pub nodes: u32,
    #[schema(minimum = 1, maximum = 1000000000, example = 1000)]
    pub steps: Option<i64>,
    #[schema(exclusive_minimum = 0, example = 512.0)]
    pub samples_per_sec: Option<f64>,
    #[schema(exclusive_minimum = 0)]
    pub step_time_sec: Option<f64>,
    /// RFC 3339, not in the future.
    #[schema(format = DateTime, example = "2026-12-01T00:00:00Z")]
    pub measured_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BenchmarkRecorded {
    /// False when the same measurement was already recorded (re-sending is a no-op).
    pub inserted: bool,
}

/// Most nodes a measurement may span.
const MAX_NODES: u32 = 1024;

fn validate(b: BenchmarkIn, catalog: &CatalogSnapshot) -> Result<Benchmark, ApiError> {
    let Some(offering) = catalog.offerings_of(&b.provider, &b.instance_type).next() else {
        return Err(ApiError::invalid(
            "instance_type",
            format!(
                "names no instance type of `{}`: `{}`",
                b.provider, b.instance_type
            ),
        ));
    };
    let gpus_per_instance = (offering.spec.gpu_count as u32).max(1);
    let mut errors = Vec::new();
    let mut fail = |field: &str, problem: &str| {
        errors.push(FieldError {
            field: field.into(),
            problem: problem.into(),
            line: None,
        });
    };
    if b.gpus > gpus_per_instance {
        fail(
            "gpus",
            &format!(
                "must be at most {gpus_per_instance}, the GPUs of {}",
                b.instance_type
            ),
        );
    }
    if b.nodes > MAX_NODES {
        fail("nodes", &format!("must be at most {MAX_NODES}"));
    }
    if b.workload.trim().is_empty() {
        fail("workload", "must not be empty");
    }
    if b.gpus == 0 {
        fail("gpus", "must be at least 1");
    }
    if b.nodes == 0 {
        fail("nodes", "must be at least 1");
    }
    if b.steps.is_some_and(|s| !(1..=MAX_STEPS).contains(&s)) {
        fail("steps", &format!("must be from 1 to {MAX_STEPS}"));
    }
    let positive = |v: Option<f64>| v.is_none_or(|x| x.is_finite() && x > 0.0);
    if !positive(b.samples_per_sec) {
        fail("samples_per_sec", "must be a number greater than zero");
    }
    if !positive(b.step_time_sec) {
        fail("step_time_sec", "must be a number greater than zero");
    }
    if b.samples_per_sec.is_none() && b.step_time_sec.is_none() {
        fail("samples_per_sec", "give samples_per_sec or step_time_sec");
    }
    let measured_at =
        parse_rfc3339_ms(&b.measured_at).and_then(|ms| check_not_future(ms, now_ms()));
    if let Err(e) = &measured_at {
        errors.push(FieldError {
            field: "measured_at".into(),
            problem: e.clone(),
            line: None,
        });
    }
    match measured_at {
        Ok(measured_at_ms) if errors.is_empty() => Ok(Benchmark {
            id: 0,
            workload: b.workload.trim().to_string(),
            provider: b.provider,
            instance_type: b.instance_type,
            gpus: b.gpus,
            nodes: b.nodes,
            steps: b.steps,
            samples_per_sec: b.samples_per_sec,
            step_time_sec: b.step_time_sec,
            measured_at_ms,
        }),
        _ => Err(ApiError::invalid_fields(errors)),
    }
}

/// Records a measured benchmark. The catalog snapshot (and so `/decide`) uses it at once.
#[utoipa::path(post, path = "/v1/benchmarks", tag = "benchmarks", request_body = BenchmarkIn,
    responses(
        (status = 201, description = "Recorded", body = BenchmarkRecorded),
        (status = 200, description = "Already recorded; nothing changed", body = BenchmarkRecorded),
        (status = 404, description = "Unknown provider", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A different measurement at the same key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field has a bad value or names no instance type", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_benchmark(
    State(state): State<AppState>,
    claim: Claim,
    ApiJson(body): ApiJson<BenchmarkIn>,
) -> Result<(StatusCode, Json<BenchmarkRecorded>), ApiError> {
    let catalog = snapshot(&state)?;
    known_provider(&catalog, &body.provider)?;
    let benchmark = validate(body, &catalog)?;
    let status = |inserted: bool| {
        if inserted {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        }
    };
    let respond = |&inserted: &bool| json_answer(status(inserted), &BenchmarkRecorded { inserted });
    let once = once(claim.as_ref().map(|c| &c.0), &respond);
    let inserted = state
        .store
        .record_benchmark_once(&benchmark, now_ms(), once)
        .await?;
    if inserted {
        state.catalog.refresh_after_write(&state.store).await;
    }
    Ok((status(inserted), Json(BenchmarkRecorded { inserted })))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BenchmarkParams {
    /// The workload to summarise.
    workload: String,
    /// Scaling efficiency below which a size is flagged communication-bound (default 0.8).
    #[param(value_type = Option<f64>)]
    communication_bound_below: Option<String>,
    /// Page size, 1 to 500 (default 100); not empty.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    limit: Option<String>,
    /// The `next` value of the previous page; omit it (do not send it empty) for the first.
    #[param(min_length = 1)]
    cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BenchmarkSummaries {
    pub workload: String,
    /// Instance types by provider and name.
    pub items: Vec<InstanceSummary>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next: Option<String>,
}

/// A workload's measurements per instance type and size: throughput, throughput per hourly
/// price (on-demand and spot, cheapest listed), scaling efficiency against the smallest GPU
/// count measured of the same GPU model (on any instance type or node count), and a
/// `communication_bound` flag.
#[utoipa::path(get, path = "/v1/benchmarks", tag = "benchmarks", params(BenchmarkParams),
    responses(
        (status = 200, description = "Summaries", body = BenchmarkSummaries),
        (status = 400, description = "Missing or unknown parameter", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A parameter has a bad value", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_benchmarks(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<BenchmarkParams>,
) -> Result<Json<BenchmarkSummaries>, ApiError> {
    let below = parse_param::<f64>(
        "communication_bound_below",
        params.communication_bound_below.as_deref(),
        "a number",
    )?
    .unwrap_or(DEFAULT_COMMUNICATION_BOUND_BELOW);
    if !(0.0..=1.0).contains(&below) {
        return Err(ApiError::invalid(
            "communication_bound_below",
            "must be between 0 and 1",
        ));
    }
    let catalog = snapshot(&state)?;
    let (items, next) = page(
        summarise(&catalog, &params.workload, below),
        |s| format!("{}\u{1}{}", s.provider, s.instance_type),
        params.limit.as_deref(),
        params.cursor.as_deref(),
    )?;
    Ok(Json(BenchmarkSummaries {
        items,
        next,
        workload: params.workload,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"job": {"params_billion": 7.0, "tokens": 2e10}, "steps": 1000}))]
pub struct PlanRequest {
    pub job: JobIn,
    /// Fixed steps to run at each size (default 1000).
    #[schema(minimum = 1, maximum = 1000000000)]
    pub steps: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PlanResponse {
    /// Null when no offering fits the job at all.
    pub plan: Option<BenchmarkPlan>,
}

/// Which three sizes of one family to measure for a job, and how many steps: around the best
/// candidate `/decide` would give. Sizes the job's `workload` already measured carry their
/// figures, compared as `GET /v1/benchmarks` compares them.
#[utoipa::path(post, path = "/v1/benchmarks/plan", tag = "benchmarks", request_body = PlanRequest,
    responses(
        (status = 200, description = "The plan", body = PlanResponse),
        (status = 404, description = "Unknown provider in `job.providers`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field has a bad value, or names a GPU the catalog does not know", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn plan_benchmarks(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<PlanRequest>,
) -> Result<Json<PlanResponse>, ApiError> {
    let steps = request.steps.unwrap_or(1000);
    if !(1..=MAX_STEPS).contains(&i64::from(steps)) {
        return Err(ApiError::invalid(
            "steps",
            format!("must be from 1 to {MAX_STEPS}"),
        ));
    }
    let catalog = snapshot(&state)?;
    let job = parse_job(request.job, &catalog)?;
    let decision = select(&catalog, &BUNDLED_SPOT_RISK, &job);
    let plan = decision.candidates.first().and_then(|best| {
        let offering = catalog.offering(best.offering_id)?;
        let usable = usable_gib(offering.spec.gpu_memory_gib);
        Some(plan(
            &catalog,
            offering,
            best.market,
            steps,
            job.workload.as_deref(),
            |gpus| job.memory.gib_per_gpu(gpus) <= usable,
        ))
    });
    Ok(Json(PlanResponse { plan }))
}
