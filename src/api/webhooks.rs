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
use crate::app::AppState;
use crate::core::policy::Policy;
use crate::ingest::cloud_events::{self, NoticeError};
use crate::ingest::remote_write::{self, GPU_MEMORY_USED_GIB, GPU_UTILIZATION, SAMPLE_NAMES};
use crate::store::{IdempotencyClaim, IngestReport, NewSample, NoticeOutcome, StoredResponse};
use crate::timefmt::{check_not_future, now_ms, parse_rfc3339_ms};

/// Most samples one batch may carry.
pub const MAX_SAMPLES: usize = 100_000;
/// Most notices one batch may carry.
pub const MAX_NOTICES: usize = 1_000;

/// One sample.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SampleIn {
    pub pool: String,
    /// The worker the sample is about; omit for pool-level signals (the queue).
    pub worker: Option<String>,
    /// `queue_depth`, `pending_jobs`, `running_jobs`, `gpu_utilization` (0 to 1) or
    /// `gpu_memory_used_gib`.
    pub name: String,
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
    if s.worker.as_deref() == Some("") {
        fail(
            "worker",
            "must not be empty; omit it for pool-level samples".into(),
        );
    }
    if !s.value.is_finite() || s.value < 0.0 {
        fail("value", "must be a finite number at least zero".into());
    } else if name == Some(GPU_UTILIZATION) && s.value > 1.0 {
        fail(
            "value",
            format!(
                "gpu_utilization is a fraction from 0 to 1, not a percentage ({})",
                s.value
            ),
        );
    } else if name == Some(GPU_MEMORY_USED_GIB) && s.value > 10_000.0 {
        fail(
            "value",
            "gpu_memory_used_gib is in GiB; at most 10000".into(),
        );
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
        value: s.value,
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
    let out = |r: &IngestReport| IngestOut {
        accepted: r.accepted,
        duplicates: r.duplicates,
    };
    let respond = |r: &IngestReport| json_answer(StatusCode::OK, &out(r));
    let once = once(claim.as_ref().map(|c| &c.0), &respond);
    let report = state
        .store
        .ingest_once(&samples, shows_work, now, once)
        .await?;
    for pool in report.active_pools.iter().chain(&report.quiet_pools) {
        state.announce_activity(pool);
    }
    state
        .metrics
        .samples
        .get_or_create(&super::metrics::SourceLabels { source: "json" })
        .inc_by(report.accepted);
    Ok(Json(out(&report)))
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
        (status = 413, description = "Body too large, compressed or decompressed", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/x-protobuf", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable; retry", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_prometheus(
    State(state): State<AppState>,
    req: Request,
) -> Result<Json<RemoteWriteOut>, ApiError> {
    let claim = req.extensions().get::<IdempotencyClaim>().cloned();
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
    let mapped = remote_write::map_series(&request, &state.remote_write)
        .map_err(|e| ApiError::bad_request("body", e.to_string()))?;
    let pools: std::collections::HashSet<String> = state
        .store
        .pools()
        .await?
        .into_iter()
        .map(|p| p.name)
        .collect();
    let now = now_ms();
    let (mut unknown_pool, mut future) = (0, 0);
    let samples: Vec<NewSample> = mapped
        .samples
        .into_iter()
        .filter(|s| {
            let known = pools.contains(&s.pool);
            let in_time = check_not_future(s.at_ms, now).is_ok();
            unknown_pool += u64::from(!known);
            future += u64::from(known && !in_time);
            known && in_time
        })
        .map(|s| NewSample {
            pool: s.pool,
            worker: s.worker.unwrap_or_default(),
            name: s.name,
            value: s.value,
            at_ms: s.at_ms,
        })
        .collect();
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
    };
    let respond = |r: &IngestReport| json_answer(StatusCode::OK, &out(r));
    let once = once(claim.as_ref(), &respond);
    let report = match state
        .store
        .ingest_once(&samples, shows_work, now, once)
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
    state
        .metrics
        .samples
        .get_or_create(&super::metrics::SourceLabels {
            source: "remote_write",
        })
        .inc_by(report.accepted);
    Ok(Json(out(&report)))
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
    let indexes: Vec<usize> = parsed.notices.iter().map(|(i, _)| *i).collect();
    let respond = |outcomes: &Vec<NoticeOutcome>| -> StoredResponse {
        json_answer(
            StatusCode::OK,
            &notices_out(&indexes, outcomes, parsed.ignored.clone()),
        )
    };
    let once = once(claim.as_ref().map(|c| &c.0), &respond);
    let outcomes = record_parsed(&state, &parsed, now, once).await?;
    Ok(Json(notices_out(
        &indexes,
        &outcomes,
        parsed.ignored.clone(),
    )))
}

/// Records parsed notices in one transaction, then asks the reconciler to look at each pool
/// that got one and counts them. Every path events arrive by (this webhook, SNS, the queue
/// pollers) records through here, so they all deduplicate by event id the same way.
pub async fn record_parsed(
    state: &AppState,
    parsed: &cloud_events::Parsed,
    now: i64,
    once: Option<crate::store::Once<'_, Vec<NoticeOutcome>>>,
) -> Result<Vec<NoticeOutcome>, crate::store::StoreError> {
    let notices: Vec<_> = parsed.notices.iter().map(|(_, n)| n.clone()).collect();
    let outcomes = state.store.record_notices_once(&notices, now, once).await?;
    for ((_, notice), outcome) in parsed.notices.iter().zip(&outcomes) {
        if let NoticeOutcome::Recorded { pool } = outcome {
            state.mark_dirty(pool);
            state
                .metrics
                .cloud_events
                .get_or_create(&super::metrics::KindLabels {
                    kind: notice.kind.to_string(),
                })
                .inc();
        }
    }
    Ok(outcomes)
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
