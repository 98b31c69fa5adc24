//! Signals arriving by webhook: `POST /v1/webhooks/metrics` (a JSON batch of samples),
//! `POST /v1/webhooks/prometheus` (Prometheus remote-write) and `POST /v1/webhooks/events`
//! (spot interruption warnings, rebalance recommendations and capacity errors, as AWS
//! EventBridge, Alibaba CloudMonitor or a GCP Pub/Sub push subscription sends them, or as
//! documented generic JSON).
//!
//! A batch is checked whole before anything is stored, and stored in one transaction before
//! the 2xx: one bad item rejects the batch with its index named.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, FieldError, Problem};
use super::extract::{ApiJson, content_type_is, read_body};
use super::idempotency::{Claim, json_answer, once};
use super::pool_access;
use crate::app::AppState;
use crate::auth::verifier::Principal;
use crate::core::policy::Policy;
use crate::ingest::cloud_events::{self, NoticeError};
use crate::ingest::limits::{
    self, DropReason, MAX_SAMPLES_PER_REQUEST, MAX_SERIES_PER_REQUEST, MAX_WORKER_LEN,
};
use crate::ingest::notices;
use crate::ingest::remote_write::{self, SAMPLE_NAMES};
use crate::ingest::worker_gate::WorkerGate;
use crate::store::{
    IdempotencyClaim, IngestReport, NewSample, NoticeOutcome, PoolRow, StoredResponse,
};
use crate::timefmt::{check_not_future, now_ms, parse_rfc3339_ms};

/// Most samples one batch may carry.
pub const MAX_SAMPLES: usize = 100_000;
pub use crate::ingest::notices::MAX_NOTICES;

/// One sample.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SampleIn {
    pub pool: String,
    /// The worker the sample is about; omit for pool-level signals (the queue).
    #[schema(min_length = 1, max_length = 253)]
    pub worker: Option<String>,
    /// `queue_depth`, `pending_jobs`, `running_jobs`, `gpu_utilization` (0 to 1) or
    /// `gpu_memory_used_gib`.
    pub name: String,
    /// At least 0; counts (`queue_depth`, `pending_jobs`, `running_jobs`) at most 1000000,
    /// `gpu_utilization` at most 1, `gpu_memory_used_gib` at most 10000.
    #[schema(minimum = 0, maximum = 1000000)]
    pub value: f64,
    /// When it was measured, RFC 3339; omitted, it is the time the server received the batch.
    /// With pool, worker and name it identifies the sample, so re-sending a sample that
    /// states its time is a no-op (one without a time is a new measurement each time).
    pub at: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SampleBatch {
    pub samples: Vec<SampleIn>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct IngestOut {
    /// Samples in the batch, all durable now.
    pub accepted: u64,
    /// Of those, samples that were already stored.
    pub duplicates: u64,
}

/// Whether a sample shows work: jobs, a GPU busier than the pool's idle threshold, or GPU
/// memory at or above `idle_gpu_memory_gib` when the policy sets it.
pub fn shows_work(policy: &Policy, s: &NewSample) -> bool {
    crate::core::idle::shows_work(policy, s.name, s.value)
}

fn check_sample(
    i: usize,
    s: SampleIn,
    now: i64,
    errors: &mut Vec<FieldError>,
) -> Option<NewSample> {
    let mut fail = |field: &str, problem: String| {
        errors.push(FieldError {
            field: format!("samples[{i}].{field}"),
            problem,
            line: None,
        });
    };
    let name = SAMPLE_NAMES.iter().copied().find(|n| *n == s.name);
    if name.is_none() {
        fail(
            "name",
            format!(
                "must be one of {}, not `{}`",
                SAMPLE_NAMES.join(", "),
                s.name
            ),
        );
    }
    if s.pool.is_empty() {
        fail("pool", "must not be empty".into());
    }
    match s.worker.as_deref().map(str::len) {
        Some(0) => fail(
            "worker",
            "must not be empty; omit it for pool-level samples".into(),
        ),
        Some(n) if n > MAX_WORKER_LEN => fail(
            "worker",
            format!("is {n} bytes long; at most {MAX_WORKER_LEN}"),
        ),
        _ => {}
    }
    if let Some(problem) = limits::value_problem(name.unwrap_or_default(), s.value) {
        fail("value", problem);
    }
    // A sender without a clock of its own (a shell script, a cron job) reports "now".
    let at = match &s.at {
        None => Ok(now),
        Some(text) => parse_rfc3339_ms(text).and_then(|ms| check_not_future(ms, now)),
    };
    if let Err(p) = &at {
        fail("at", p.clone());
    }
    Some(NewSample {
        pool: s.pool,
        worker: s.worker.unwrap_or_default(),
        name: name?,
        // `-0` is a valid zero, but PostgreSQL keeps its sign and it would come back as
        // `-0.0` on the fleet page and in JSON; store it as zero.
        value: s.value + 0.0,
        at_ms: at.ok()?,
    })
}

/// A batch of metric samples, stored all or nothing.
#[utoipa::path(post, path = "/v1/webhooks/metrics", tag = "signals", request_body = SampleBatch,
    responses(
        (status = 200, description = "Stored", body = IngestOut),
        (status = 400, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A bad sample (its index named) or an unknown pool; nothing was stored", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable; nothing was stored, retry", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_metrics(
    State(state): State<AppState>,
    principal: Option<axum::Extension<Principal>>,
    claim: Claim,
    ApiJson(batch): ApiJson<SampleBatch>,
) -> Result<Json<IngestOut>, ApiError> {
    if batch.samples.len() > MAX_SAMPLES {
        return Err(ApiError::invalid(
            "samples",
            format!(
                "holds {} samples; at most {MAX_SAMPLES} per batch",
                batch.samples.len()
            ),
        ));
    }
    // The whole batch is refused for one sample of another pool, before anything is written.
    for (i, s) in batch.samples.iter().enumerate() {
        pool_access::check(principal.as_deref(), &format!("samples[{i}].pool"), &s.pool)?;
    }
    let now = now_ms();
    let mut errors = Vec::new();
    let samples: Vec<NewSample> = batch
        .samples
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| check_sample(i, s, now, &mut errors))
        .collect();
    if !errors.is_empty() {
        errors.truncate(20);
        return Err(ApiError::invalid_fields(errors));
    }
    check_workers(&state, &samples, now).await?;
    state
        .auth
        .check_samples(principal.as_deref(), samples.len())?;
    let out = |r: &IngestReport| IngestOut {
        accepted: r.accepted,
        duplicates: r.duplicates,
    };
    let respond = |r: &IngestReport| json_answer(StatusCode::OK, &out(r));
    let once = once(claim.as_ref().map(|c| &c.0), &respond);
    let report = state
        .store
        .ingest_once(samples, shows_work, now, once)
        .await?;
    for pool in report.active_pools.iter().chain(&report.quiet_pools) {
        state.announce_activity(pool);
    }
    state.metrics.samples_stored("json", &report);
    Ok(Json(out(&report)))
}

async fn pools_by_name(
    state: &AppState,
) -> Result<std::collections::HashMap<String, PoolRow>, ApiError> {
    Ok(state
        .store
        .pools()
        .await?
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect())
}

/// Refuses a JSON batch holding a sample about a worker its pool does not take (see
/// [`WorkerGate`]): the batch is stored all or nothing, so the sender hears which sample.
/// Samples of pools that do not exist are left to the store, which names them.
async fn check_workers(state: &AppState, samples: &[NewSample], now: i64) -> Result<(), ApiError> {
    if samples.iter().all(|s| s.worker.is_empty()) {
        return Ok(());
    }
    let pools = pools_by_name(state).await?;
    let mut gate = WorkerGate::default();
    let mut errors = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let Some(pool) = pools.get(&s.pool).filter(|_| !s.worker.is_empty()) else {
            continue;
        };
        let problem = match gate.admit(&state.store, pool, &s.worker, now).await? {
            None => continue,
            Some(DropReason::UnknownWorker) => format!(
                "pool `{}` has no worker or alias `{}` (register it with \
                 PUT /v1/pools/{{name}}/workers/{{id}})",
                s.pool, s.worker
            ),
            Some(_) => format!(
                "pool `{}` already has fresh samples from max_workers ({}) workers; \
                 `{}` would be one more",
                s.pool, pool.policy.max_workers, s.worker
            ),
        };
        errors.push(FieldError {
            field: format!("samples[{i}].worker"),
            problem,
            line: None,
        });
        if errors.len() == 20 {
            break;
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(errors))
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RemoteWriteOut {
    pub series: u64,
    /// Samples stored (after per-worker aggregation of GPUs).
    pub accepted: u64,
    pub duplicates: u64,
    pub skipped_no_pool_label: u64,
    pub skipped_unknown_metric: u64,
    /// Samples of pools that do not exist here, dropped.
    pub skipped_unknown_pool: u64,
    /// Samples with timestamps in the future, dropped.
    pub skipped_future: u64,
    /// Samples dropped, by reason (`unknown_pool`, `future`, `out_of_range`, `unknown_worker`,
    /// `too_many_workers`); reasons with none are left out. Also counted in `/metrics` as
    /// `trainscaler_samples_dropped_total{reason}`.
    pub dropped: std::collections::BTreeMap<&'static str, u64>,
}

/// Prometheus remote-write 1.0 (snappy-compressed protobuf, as Prometheus, vmagent and the
/// OpenTelemetry collector send it). DCGM exporter series map to `gpu_utilization` and
/// `gpu_memory_used_gib` per worker; `trainscaler_*` series map to the sample of that name.
/// Series of unknown pools are dropped and counted (Prometheus forwards everything it scrapes).
#[utoipa::path(post, path = "/v1/webhooks/prometheus", tag = "signals",
    request_body(content = Vec<u8>, content_type = "application/x-protobuf", description = "Snappy (block format) compressed prometheus.WriteRequest"),
    responses(
        (status = 200, description = "Stored", body = RemoteWriteOut),
        (status = 400, description = "Not snappy, not a WriteRequest, or a bad sample value", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large, compressed or decompressed, or more than 20000 series or 100000 samples", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/x-protobuf", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable; retry", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_prometheus(
    State(state): State<AppState>,
    req: Request,
) -> Result<Json<RemoteWriteOut>, ApiError> {
    let claim = req.extensions().get::<IdempotencyClaim>().cloned();
    let principal = req.extensions().get::<Principal>().cloned();
    if !content_type_is(req.headers(), |t| t == remote_write::CONTENT_TYPE) {
        return Err(ApiError::unsupported_media_type(remote_write::CONTENT_TYPE));
    }
    if let Some(enc) = req.headers().get(header::CONTENT_ENCODING)
        && !enc.as_bytes().eq_ignore_ascii_case(b"snappy")
    {
        return Err(ApiError::bad_request(
            "content-encoding",
            "must be snappy (remote-write 1.0)",
        ));
    }
    let body = read_body(req, &state).await?;
    let request =
        remote_write::decode(&body, state.max_decompressed_bytes).map_err(|e| match e {
            remote_write::RemoteWriteError::TooLarge { .. } => {
                ApiError::payload_too_large(e.to_string())
            }
            other => ApiError::bad_request("body", other.to_string()),
        })?;
    let series = request.timeseries.len();
    if series > MAX_SERIES_PER_REQUEST {
        return Err(ApiError::too_many(
            "series",
            format!(
                "the request holds {series} series; at most {MAX_SERIES_PER_REQUEST} per \
                 request (lower queue_config.max_samples_per_send)"
            ),
            MAX_SERIES_PER_REQUEST,
        ));
    }
    let sample_count: usize = request.timeseries.iter().map(|t| t.samples.len()).sum();
    if sample_count > MAX_SAMPLES_PER_REQUEST {
        return Err(ApiError::too_many(
            "samples",
            format!(
                "the request holds {sample_count} samples; at most {MAX_SAMPLES_PER_REQUEST} \
                 per request (lower queue_config.max_samples_per_send)"
            ),
            MAX_SAMPLES_PER_REQUEST,
        ));
    }
    let mapped = remote_write::map_series(&request, &state.remote_write)
        .map_err(|e| ApiError::bad_request("body", e.to_string()))?;
    // A restricted key's request is refused whole for one series of another pool: dropping
    // those samples quietly would hide a sender writing where it should not.
    for sample in &mapped.samples {
        let label = &state.remote_write.pool_label;
        pool_access::check(principal.as_ref(), label, &sample.pool)?;
    }
    let pools = pools_by_name(&state).await?;
    let now = now_ms();
    let mut sorter = Sorter::default();
    for sample in mapped.samples {
        let Some(pool) = pools.get(&sample.pool) else {
            sorter.drop(DropReason::UnknownPool, "");
            continue;
        };
        if check_not_future(sample.at_ms, now).is_err() {
            sorter.drop(DropReason::Future, &sample.pool);
            continue;
        }
        if limits::value_problem(sample.name, sample.value).is_some() {
            sorter.drop(DropReason::OutOfRange, &sample.pool);
            continue;
        }
        if let Some(worker) = &sample.worker
            && let Some(reason) = sorter.gate.admit(&state.store, pool, worker, now).await?
        {
            sorter.drop(reason, &sample.pool);
            continue;
        }
        sorter.kept.push(NewSample {
            pool: sample.pool,
            worker: sample.worker.unwrap_or_default(),
            name: sample.name,
            value: sample.value + 0.0,
            at_ms: sample.at_ms,
        });
    }
    sorter.report(
        &state,
        mapped.series_skipped_no_pool,
        mapped.series_skipped_unknown_metric,
    );
    state
        .auth
        .check_samples(principal.as_ref(), sorter.kept.len())?;
    let samples = std::mem::take(&mut sorter.kept);
    let dropped = sorter.by_reason();
    let unknown_pool = dropped.get("unknown_pool").copied().unwrap_or(0);
    let future = dropped.get("future").copied().unwrap_or(0);
    // A pool deleted between the check and the write fails the batch: answer 503 so that
    // Prometheus retries it (it drops batches answered 4xx), and the retry skips that pool.
    let out = |r: &IngestReport| RemoteWriteOut {
        series: mapped.series_total as u64,
        accepted: r.accepted,
        duplicates: r.duplicates,
        skipped_no_pool_label: mapped.series_skipped_no_pool as u64,
        skipped_unknown_metric: mapped.series_skipped_unknown_metric as u64,
        skipped_unknown_pool: unknown_pool,
        skipped_future: future,
        dropped: dropped.clone(),
    };
    let respond = |r: &IngestReport| json_answer(StatusCode::OK, &out(r));
    let once = once(claim.as_ref(), &respond);
    let report = match state
        .store
        .ingest_once(samples, shows_work, now, once)
        .await
    {
        Err(crate::store::StoreError::UnknownPool { pool, .. }) => {
            return Err(ApiError::unavailable(format!(
                "pool `{pool}` was deleted while this batch was written; retry"
            )));
        }
        other => other?,
    };
    for pool in report.active_pools.iter().chain(&report.quiet_pools) {
        state.announce_activity(pool);
    }
    state.metrics.samples_stored("remote_write", &report);
    Ok(Json(out(&report)))
}

/// Sorts a remote-write request's samples into kept and dropped, counting the dropped by
/// reason and pool.
#[derive(Default)]
struct Sorter {
    kept: Vec<NewSample>,
    dropped: std::collections::HashMap<(DropReason, String), u64>,
    gate: WorkerGate,
}

impl Sorter {
    fn drop(&mut self, reason: DropReason, pool: &str) {
        *self.dropped.entry((reason, pool.to_string())).or_default() += 1;
    }

    /// Counts the dropped samples in `/metrics` and logs each pool and reason the first time.
    fn report(&self, state: &AppState, no_pool_label: usize, unknown_metric: usize) {
        let count = |reason: DropReason, n: u64| {
            if n > 0 {
                state
                    .metrics
                    .samples_dropped
                    .get_or_create(&crate::metrics::ReasonLabels {
                        reason: reason.as_str(),
                    })
                    .inc_by(n);
            }
        };
        count(DropReason::NoPoolLabel, no_pool_label as u64);
        count(DropReason::UnknownMetric, unknown_metric as u64);
        for ((reason, pool), n) in &self.dropped {
            count(*reason, *n);
            if state.drop_log.first(pool, *reason) {
                tracing::warn!(
                    pool,
                    reason = reason.as_str(),
                    samples = n,
                    "remote-write samples dropped (logged once per pool and reason; \
                     see trainscaler_samples_dropped_total)"
                );
            }
        }
    }

    fn by_reason(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let mut out = std::collections::BTreeMap::new();
        for ((reason, _), n) in &self.dropped {
            *out.entry(reason.as_str()).or_default() += n;
        }
        out
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NoticesOut {
    pub recorded: u64,
    pub duplicates: u64,
    /// Indexes of notices about workers no pool has (or of unknown pools); not stored.
    pub unmatched: Vec<usize>,
    /// Indexes of EventBridge events of other kinds; not stored.
    pub ignored: Vec<usize>,
}

/// Spot interruption warnings, rebalance recommendations and capacity errors. The body is one
/// AWS EventBridge event or Alibaba Cloud ECS event notification, or an array of them (as an
/// EventBridge API destination or an SNS/SQS or MNS relay delivers them), a Pub/Sub push
/// envelope holding a GCP `compute.instances.preempted` audit log entry (a push
/// subscription may authenticate with its OIDC token instead of an API key, see
/// `TRAINSCALER_PUBSUB_AUDIENCE`), or `{"events": [...]}` in the generic format for other
/// clouds.
#[utoipa::path(post, path = "/v1/webhooks/events", tag = "signals",
    request_body(content = Object, description = "An EventBridge event, an array of them, or {\"events\": [generic notice, ...]}",
        example = json!({"events": [{"kind": "interruption_warning", "worker": "vm-17",
            "pool": "gpu-t4", "at": "2026-12-02T10:00:00Z",
            "action_at": "2026-12-02T10:00:30Z", "id": "evt-1"}]})),
    responses(
        (status = 200, description = "Recorded", body = NoticesOut),
        (status = 400, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A malformed notice (its index named); nothing was stored", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_events(
    State(state): State<AppState>,
    principal: Option<axum::Extension<Principal>>,
    claim: Claim,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Result<Json<NoticesOut>, ApiError> {
    let now = now_ms();
    let parsed = cloud_events::parse(&body, now).map_err(|errors| {
        ApiError::invalid_fields(
            errors
                .into_iter()
                .take(20)
                .map(|NoticeError { field, problem }| FieldError {
                    field,
                    problem,
                    line: None,
                })
                .collect(),
        )
    })?;
    if parsed.notices.len() > MAX_NOTICES {
        return Err(ApiError::invalid(
            "events",
            format!("at most {MAX_NOTICES} notices per batch"),
        ));
    }
    // Notices that name their pool are checked here; those that name only a worker are
    // checked once the store has found the worker's pool, in the same transaction.
    let pools = pool_access::scope_of(principal.as_deref());
    for (i, notice) in &parsed.notices {
        if let Some(pool) = &notice.pool {
            let field = format!("{}.pool", item_field(&body, *i));
            pool_access::check(principal.as_deref(), &field, pool)?;
        }
    }
    let indexes: Vec<usize> = parsed.notices.iter().map(|(i, _)| *i).collect();
    let respond = |outcomes: &Vec<NoticeOutcome>| -> StoredResponse {
        json_answer(
            StatusCode::OK,
            &notices_out(&indexes, outcomes, parsed.ignored.clone()),
        )
    };
    let once = once(claim.as_ref().map(|c| &c.0), &respond);
    let outcomes = notices::record_within(&state, &parsed, now, once, &pools)
        .await
        .map_err(|e| match e {
            // The store counts the notices it was given; the answer names the request's item.
            crate::store::StoreError::PoolNotAllowed { index, pool } => {
                let i = parsed.notices.get(index).map_or(index, |(i, _)| *i);
                ApiError::pool_forbidden(
                    &item_field(&body, i),
                    format!(
                        "the notice is about a worker of pool `{pool}`, which is not one of \
                         this API key's pools; nothing of the batch was stored"
                    ),
                )
            }
            other => other.into(),
        })?;
    Ok(Json(notices_out(
        &indexes,
        &outcomes,
        parsed.ignored.clone(),
    )))
}

/// Where item `i` of an events body is, as problem documents name fields: `events[i]` in the
/// generic format, `[i]` in an array, `body` for a single event.
fn item_field(body: &serde_json::Value, i: usize) -> String {
    if body.is_array() {
        format!("[{i}]")
    } else if body.get("events").is_some() {
        format!("events[{i}]")
    } else {
        "body".to_string()
    }
}

/// The answer to a batch of notices: `indexes` are the notices' places in the request.
pub fn notices_out(
    indexes: &[usize],
    outcomes: &[NoticeOutcome],
    ignored: Vec<usize>,
) -> NoticesOut {
    let mut out = NoticesOut {
        recorded: 0,
        duplicates: 0,
        unmatched: Vec::new(),
        ignored,
    };
    for (index, outcome) in indexes.iter().zip(outcomes) {
        match outcome {
            NoticeOutcome::Recorded { .. } => out.recorded += 1,
            NoticeOutcome::Duplicate { .. } => out.duplicates += 1,
            NoticeOutcome::Unmatched => out.unmatched.push(*index),
        }
    }
    out
}
