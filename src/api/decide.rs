//! `POST /decide`: which instance for this job. Parses the job profile into the core's `Job`
//! (naming each bad field), runs the selection on the in-memory catalog, and returns the
//! ranked candidates with reasons.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, FieldError, Problem};
use super::extract::ApiJson;
use super::gpu_names::{check_gpu_list, unknown_gpu_problem};
use super::offerings::{CatalogProvider, snapshot};
use crate::app::AppState;
use crate::catalog::spot_advisor::BUNDLED_SPOT_RISK;
use crate::core::catalog::CatalogSnapshot;
use crate::core::decision::InstanceDecision;
use crate::core::job::{
    DEFAULT_ACTIVATION_RESERVE, DEFAULT_RESTART_OVERHEAD_MIN, DataLayout, Job, MemoryNeed,
    Objective, Optimizer, Precision, Sharding, StateBytes, Work,
};
use crate::core::select::select;
use crate::fleet::pool_decision::PoolDecision;

/// `nodes`: an exact count or a `{min, max}` range, 1 to 1024.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum NodesIn {
    Exactly(u32),
    Range {
        #[schema(minimum = 1, maximum = 1024)]
        min: u32,
        #[schema(minimum = 1, maximum = 1024)]
        max: u32,
    },
}

/// A training job. Every field is optional; defaults are documented per field. Numbers are
/// bounded to keep estimates finite and to catch unit mistakes.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"params_billion": 7.0, "tokens": 2e10, "spot_allowed": true, "checkpoint_interval_min": 30.0}))]
pub struct JobIn {
    /// Model size in billions of parameters; needed unless `gpu_memory_gib_min` is given.
    #[schema(exclusive_minimum = 0, maximum = 100000, example = 7.0)]
    pub params_billion: Option<f64>,
    /// Default `bf16`.
    pub precision: Option<Precision>,
    /// Default `adamw`.
    pub optimizer: Option<Optimizer>,
    /// Overrides the bytes per parameter derived from precision and optimizer.
    #[schema(exclusive_minimum = 0, maximum = 64)]
    pub bytes_per_param: Option<f64>,
    /// Default `none`.
    pub sharding: Option<Sharding>,
    /// Activation memory per GPU, GiB; otherwise `activation_reserve` applies.
    #[schema(minimum = 0, maximum = 1e18)]
    pub activation_memory_gib: Option<f64>,
    /// Fraction added on top of model states for activations (default 0.2).
    #[schema(minimum = 0, maximum = 10)]
    pub activation_reserve: Option<f64>,
    /// Memory per GPU the job needs, GiB, instead of deriving it from the model.
    #[schema(exclusive_minimum = 0, maximum = 1e18)]
    pub gpu_memory_gib_min: Option<f64>,
    /// Work as samples: with `flops_per_sample`, or with a `workload` that has benchmarks.
    #[schema(exclusive_minimum = 0, maximum = 1e18)]
    pub total_samples: Option<f64>,
    #[schema(exclusive_minimum = 0, maximum = 1e18)]
    pub flops_per_sample: Option<f64>,
    /// Work as training tokens: 6 × params × tokens FLOPs.
    #[schema(exclusive_minimum = 0, maximum = 1e18, example = 2e10)]
    pub tokens: Option<f64>,
    /// Work as hours on one `reference_gpu`.
    #[schema(exclusive_minimum = 0, maximum = 1e18)]
    pub reference_hours: Option<f64>,
    pub reference_gpu: Option<String>,
    /// Workload name that measured benchmarks are filed under.
    pub workload: Option<String>,
    /// A node count or `{min, max}`; default 1.
    pub nodes: Option<NodesIn>,
    pub gpus_per_node_min: Option<u32>,
    #[schema(minimum = 0, maximum = 1e18)]
    pub dataset_gib: Option<f64>,
    /// Default `large_sequential`; `many_small_files` needs local NVMe.
    pub data_layout: Option<DataLayout>,
    /// Default true; spot is still only offered to jobs that checkpoint.
    pub spot_allowed: Option<bool>,
    #[schema(exclusive_minimum = 0, maximum = 10080)]
    pub checkpoint_interval_min: Option<f64>,
    /// Default 5.
    #[schema(minimum = 0, maximum = 10080)]
    pub restart_overhead_min: Option<f64>,
    #[schema(value_type = Option<Vec<CatalogProvider>>)]
    pub providers: Option<Vec<String>>,
    pub regions: Option<Vec<String>>,
    pub zones: Option<Vec<String>>,
    /// GPU models allowed (case-insensitive); a name the catalog does not know is a 422
    /// listing the closest known names.
    pub gpus: Option<Vec<String>>,
    /// GPU models not allowed, checked the same way.
    pub exclude_gpus: Option<Vec<String>>,
    /// Cap on the total hourly price of all nodes, USD.
    #[schema(exclusive_minimum = 0, maximum = 1e18)]
    pub max_price_per_hour: Option<f64>,
    #[schema(exclusive_minimum = 0, maximum = 1e18)]
    pub deadline_hours: Option<f64>,
    /// Cap on the estimated total cost, USD.
    #[schema(exclusive_minimum = 0, maximum = 1e18)]
    pub budget: Option<f64>,
    /// Default `cheapest`.
    pub objective: Option<Objective>,
    /// Default 5, at most 100.
    #[schema(minimum = 1, maximum = 100)]
    pub top_k: Option<usize>,
    /// Share of one GPU's datasheet TFLOPS the job reaches. Default: the calibrated model
    /// (by model size, GPU, precision and GPU count; see `assumptions.utilisation`).
    #[schema(exclusive_minimum = 0, maximum = 1)]
    pub utilisation: Option<f64>,
    /// Minutes from launch to training (boot and image pull), paid for. Default: the
    /// provider's (see `assumptions.providers`).
    #[schema(minimum = 0, maximum = 1440)]
    pub startup_min: Option<f64>,
    /// Let multi-node jobs run without a fast fabric (default false).
    pub allow_slow_interconnect: Option<bool>,
}

/// Exactly one of `job` (which instance for this job) and `pool` (how many workers now).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"job": {"params_billion": 7.0, "tokens": 2e10}}))]
pub struct DecideRequest {
    pub job: Option<JobIn>,
    /// A pool's name.
    pub pool: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceAnswer {
    #[serde(flatten)]
    pub decision: InstanceDecision,
    /// The catalog version the answer was computed on.
    pub catalog_version: i64,
}

/// `instance` for a job, `workers` for a pool.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecideResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceAnswer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<PoolDecision>,
}

/// Collects field problems so one response names them all.
struct Checks(Vec<FieldError>);

impl Checks {
    fn fail(&mut self, field: &str, problem: impl Into<String>) {
        self.0.push(FieldError {
            field: format!("job.{field}"),
            problem: problem.into(),
            line: None,
        });
    }

    /// A positive number within the field's bound, or `None` (with a problem recorded).
    fn positive(&mut self, field: &str, value: Option<f64>) -> Option<f64> {
        self.number(field, value, false)
    }

    fn non_negative(&mut self, field: &str, value: Option<f64>) -> Option<f64> {
        self.number(field, value, true)
    }

    fn number(&mut self, field: &str, value: Option<f64>, zero_ok: bool) -> Option<f64> {
        let v = value?;
        let max = upper_bound(field);
        if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) {
            let least = if zero_ok {
                "at least zero"
            } else {
                "greater than zero"
            };
            self.fail(field, format!("must be a number {least}"));
            None
        } else if v > max {
            self.fail(field, format!("must be at most {max}"));
            None
        } else {
            Some(v)
        }
    }
}

/// Bounds that keep estimates finite and catch unit mistakes (params in units, not billions).
fn upper_bound(field: &str) -> f64 {
    match field {
        "params_billion" => 100_000.0,
        "bytes_per_param" => 64.0,
        "activation_reserve" => 10.0,
        // A week: longer intervals make spot pointless anyway.
        "checkpoint_interval_min" | "restart_overhead_min" => 10_080.0,
        // A day: a start-up longer than that is a unit mistake.
        "startup_min" => 1_440.0,
        _ => 1e18,
    }
}

/// Parses the request into the core's job, naming every bad field.
pub fn parse_job(j: JobIn, catalog: &CatalogSnapshot) -> Result<Job, ApiError> {
    if let Some(providers) = &j.providers
        && let Some((i, p)) = providers
            .iter()
            .enumerate()
            .find(|(_, p)| !catalog.has_provider(p))
    {
        return Err(ApiError::not_found(
            format!("job.providers[{i}]"),
            format!("unknown provider `{p}`"),
        ));
    }
    let mut c = Checks(Vec::new());
    let params = c
        .positive("params_billion", j.params_billion)
        .map(|b| b * 1e9);
    let precision = j.precision.unwrap_or(Precision::Bf16);
    let optimizer = j.optimizer.unwrap_or(Optimizer::Adamw);
    let bytes = match c.positive("bytes_per_param", j.bytes_per_param) {
        Some(b) => StateBytes::explicit(b),
        None => StateBytes::of(precision, optimizer),
    };
    let activation_gib = c.non_negative("activation_memory_gib", j.activation_memory_gib);
    let activation_reserve = c
        .non_negative("activation_reserve", j.activation_reserve)
        .unwrap_or(DEFAULT_ACTIVATION_RESERVE);
    let memory = match (
        c.positive("gpu_memory_gib_min", j.gpu_memory_gib_min),
        params,
    ) {
        (Some(gib), _) => MemoryNeed::Fixed { gib_per_gpu: gib },
        (None, Some(params)) => MemoryNeed::Model {
            params,
            bytes,
            sharding: j.sharding.unwrap_or(Sharding::None),
            activation_gib,
            activation_reserve,
        },
        (None, None) => {
            if j.params_billion.is_none() {
                c.fail(
                    "params_billion",
                    "is required unless gpu_memory_gib_min is given",
                );
            }
            MemoryNeed::Fixed { gib_per_gpu: 0.0 }
        }
    };
    let samples = c.positive("total_samples", j.total_samples);
    let flops_per_sample = c.positive("flops_per_sample", j.flops_per_sample);
    let tokens = c.positive("tokens", j.tokens);
    let reference_hours = c.positive("reference_hours", j.reference_hours);
    let work = match (samples, flops_per_sample, tokens, reference_hours) {
        (Some(total), Some(flops_per_sample), None, None) => Work::Samples {
            total,
            flops_per_sample: Some(flops_per_sample),
        },
        (None, None, Some(tokens), None) => match params {
            Some(params) => Work::Tokens { tokens, params },
            None => {
                c.fail(
                    "tokens",
                    "needs params_billion (work = 6 × params × tokens)",
                );
                Work::Unknown
            }
        },
        (None, None, None, Some(hours)) => {
            match j.reference_gpu.as_deref() {
                Some(gpu)
                    if precision == Precision::Bf16
                        && catalog.gpu(gpu).is_some_and(|g| !g.bf16_supported) =>
                {
                    c.fail("reference_gpu", format!("`{gpu}` has no bf16 tensor cores; use precision fp16 or another reference"));
                    Work::Unknown
                }
                Some(gpu) if catalog.gpu(gpu).is_some() => Work::ReferenceHours {
                    hours,
                    gpu: gpu.to_string(),
                },
                Some(gpu) if catalog.knows_gpu(gpu) => {
                    c.fail(
                        "reference_gpu",
                        format!(
                            "`{gpu}` has no datasheet facts (catalog/gpus.csv) to compare with"
                        ),
                    );
                    Work::Unknown
                }
                Some(gpu) => {
                    c.fail("reference_gpu", unknown_gpu_problem(catalog, gpu));
                    Work::Unknown
                }
                None => {
                    c.fail("reference_gpu", "is required with reference_hours");
                    Work::Unknown
                }
            }
        }
        (None, None, None, None) => Work::Unknown,
        // Measured samples per second answer without FLOPs per sample.
        (Some(total), None, None, None) if j.workload.is_some() => Work::Samples {
            total,
            flops_per_sample: None,
        },
        (Some(_), None, None, None) => {
            c.fail(
                "flops_per_sample",
                "is required with total_samples unless a benchmarked workload is named",
            );
            Work::Unknown
        }
        (None, Some(_), None, None) => {
            c.fail("total_samples", "is required with flops_per_sample");
            Work::Unknown
        }
        _ => {
            c.fail("tokens", "give one kind of work: total_samples with flops_per_sample, tokens, or reference_hours");
            Work::Unknown
        }
    };
    let (nodes_min, nodes_max) = match j.nodes {
        None => (1, 1),
        Some(NodesIn::Exactly(n)) => (n, n),
        Some(NodesIn::Range { min, max }) => (min, max),
    };
    if nodes_min == 0 {
        c.fail(
            if nodes_min == nodes_max {
                "nodes"
            } else {
                "nodes.min"
            },
            "must be at least 1",
        );
    }
    if nodes_max < nodes_min {
        c.fail(
            "nodes.max",
            format!("must not be below nodes.min ({nodes_min})"),
        );
    }
    if nodes_max > 1024 {
        c.fail("nodes.max", "must be at most 1024");
    }
    let top_k = j.top_k.unwrap_or(5);
    if !(1..=100).contains(&top_k) {
        c.fail("top_k", "must be between 1 and 100");
    }
    let utilisation = j.utilisation;
    if utilisation.is_some_and(|u| !(u.is_finite() && u > 0.0 && u <= 1.0)) {
        c.fail("utilisation", "must be in (0, 1]");
    }
    let startup_min = c.non_negative("startup_min", j.startup_min);
    for (field, names) in [("gpus", &j.gpus), ("exclude_gpus", &j.exclude_gpus)] {
        let names = names.as_deref().unwrap_or_default();
        c.0.extend(check_gpu_list(catalog, &format!("job.{field}"), names));
    }
    let dataset_gib = c.non_negative("dataset_gib", j.dataset_gib);
    let job = Job {
        memory,
        precision,
        work,
        workload: j.workload,
        nodes_min,
        nodes_max,
        gpus_per_node_min: f64::from(j.gpus_per_node_min.unwrap_or(0)),
        data_layout: j.data_layout.unwrap_or(DataLayout::LargeSequential),
        dataset_gib,
        spot_allowed: j.spot_allowed.unwrap_or(true),
        checkpoint_interval_min: c.positive("checkpoint_interval_min", j.checkpoint_interval_min),
        restart_overhead_min: c
            .non_negative("restart_overhead_min", j.restart_overhead_min)
            .unwrap_or(DEFAULT_RESTART_OVERHEAD_MIN),
        providers: j.providers.unwrap_or_default(),
        regions: j.regions.unwrap_or_default(),
        zones: j.zones.unwrap_or_default(),
        gpus: j.gpus.unwrap_or_default(),
        exclude_gpus: j.exclude_gpus.unwrap_or_default(),
        max_price_per_hour: c.positive("max_price_per_hour", j.max_price_per_hour),
        deadline_hours: c.positive("deadline_hours", j.deadline_hours),
        budget: c.positive("budget", j.budget),
        require_fast_interconnect: !j.allow_slow_interconnect.unwrap_or(false),
        objective: j.objective.unwrap_or_default(),
        top_k,
        utilisation,
        startup_min,
    };
    if c.0.is_empty() {
        Ok(job)
    } else {
        Err(ApiError::invalid_fields(c.0))
    }
}

/// Which instance for this job (`{"job": ...}`): ranked candidates with estimates and
/// reasons, rejections by reason, and the assumptions behind the numbers; a job that fits
/// nowhere is a 200 with no candidates and suggestions. How many workers now
/// (`{"pool": "name"}`): the pool's target by type and market, the actions that reach it and
/// every rule that fired. Concurrent pool decisions are serialised per pool.
#[utoipa::path(post, path = "/decide", tag = "decide", request_body = DecideRequest,
    responses(
        (status = 200, description = "The decision", body = DecideResponse),
        (status = 400, description = "Not JSON, or an unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown provider or pool", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field has a bad value (a GPU name the catalog does not know lists the closest known ones), or neither or both of job and pool", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn decide(
    State(state): State<AppState>,
    principal: Option<axum::Extension<crate::auth::verifier::Principal>>,
    ApiJson(request): ApiJson<DecideRequest>,
) -> Result<Json<DecideResponse>, ApiError> {
    let catalog = snapshot(&state)?;
    match (request.job, request.pool) {
        (Some(job), None) => {
            let catalog_version = catalog.version();
            let job = parse_job(job, &catalog)?;
            let decision = select(&catalog, &BUNDLED_SPOT_RISK, &job);
            state.metrics.decision("job", "", false);
            Ok(Json(DecideResponse {
                instance: Some(InstanceAnswer {
                    decision,
                    catalog_version,
                }),
                workers: None,
            }))
        }
        (None, Some(pool)) => {
            super::pool_access::check(principal.as_deref(), "pool", &pool)?;
            let answer = state
                .decide_pool(&catalog, &pool)
                .await?
                .ok_or_else(|| ApiError::not_found("pool", format!("no pool `{pool}`")))?;
            Ok(Json(DecideResponse {
                instance: None,
                workers: Some(answer),
            }))
        }
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "body",
            "give either `job` (which instance) or `pool` (how many workers), not both",
        )),
        (None, None) => Err(ApiError::invalid(
            "body",
            "give `job` (which instance for this job) or `pool` (how many workers now)",
        )),
    }
}
