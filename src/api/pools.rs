//! Pools and their workers: `PUT/GET/DELETE /v1/pools/{name}`, `GET /v1/pools`,
//! `GET /v1/pools/{name}/workers`, `PUT/DELETE /v1/pools/{name}/workers/{id}` and the pool's
//! event log.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::cursor;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, parse_limit};
use super::list::{ListParams, page, time_then};
use super::offerings::snapshot;
use crate::app::AppState;
use crate::core::catalog::Market;
use crate::core::policy::{Policy, secs_to_ms};
use crate::core::scale::Worker;
use crate::fleet::signals;
use crate::fleet::view::EventOut;
use crate::policy_in::{PolicyIn, parse_policy};
use crate::store::{EventPage, NewWorker, PoolRow};
use crate::timefmt::{check_not_future, format_ms, now_ms, parse_rfc3339_ms};

/// A pool with its complete policy (defaults filled in).
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolOut {
    pub name: String,
    pub policy: Policy,
    /// Live workers.
    pub current: u32,
    /// The target of the last decision; absent before the first.
    pub desired: Option<u32>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PoolList {
    /// Pools by name.
    pub items: Vec<PoolOut>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next: Option<String>,
}

async fn pool_out(state: &AppState, row: PoolRow) -> Result<PoolOut, ApiError> {
    let live = state.store.workers(&row.name, i64::MAX).await?.len();
    Ok(pool_out_with(row, live as u64))
}

fn pool_out_with(row: PoolRow, live: u64) -> PoolOut {
    PoolOut {
        current: u32::try_from(live).unwrap_or(u32::MAX),
        desired: row.state.desired,
        created_at: format_ms(row.created_at_ms),
        updated_at: format_ms(row.updated_at_ms),
        policy: row.policy,
        name: row.name,
    }
}

fn no_pool(name: &str) -> ApiError {
    ApiError::not_found("name", format!("no pool `{name}`"))
}

/// Creates or replaces a pool. Replacing keeps its workers, signals, events and decision state.
#[utoipa::path(put, path = "/v1/pools/{name}", tag = "pools", request_body = PolicyIn,
    params(("name" = String, Path, description = "Pool name: lowercase letters, digits, - _ .")),
    responses(
        (status = 200, description = "Replaced", body = PoolOut),
        (status = 201, description = "Created", body = PoolOut),
        (status = 400, description = "Not JSON, or an unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An invalid policy field, named", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn put_pool(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<PolicyIn>,
) -> Result<Response, ApiError> {
    check_pool_name(&name)?;
    let policy = parse_policy(body, &*snapshot(&state)?).map_err(ApiError::invalid_fields)?;
    let created = state.store.put_pool(&name, &policy, now_ms()).await?;
    state.mark_dirty(&name);
    let row = state
        .store
        .find_pool(&name)
        .await?
        .ok_or_else(|| no_pool(&name))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(pool_out(&state, row).await?)).into_response())
}

#[utoipa::path(get, path = "/v1/pools", tag = "pools", params(ListParams),
    responses(
        (status = 200, description = "A page of pools, by name", body = PoolList),
        (status = 400, description = "Unknown parameter or bad cursor", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`limit` out of range", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_pools(
    State(state): State<AppState>,
    principal: Option<axum::Extension<crate::auth::verifier::Principal>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<PoolList>, ApiError> {
    let pools = super::pool_access::scope_of(principal.as_deref());
    // One statement for every pool and its live workers, not one per pool.
    let mut all = state.store.pools_with_live_workers().await?;
    // Filtered before paging, so pages and cursors are the key's own.
    all.retain(|(p, _)| pools.allows(&p.name));
    let (rows, next) = page(
        all,
        |(p, _)| p.name.clone(),
        params.limit.as_deref(),
        params.cursor.as_deref(),
    )?;
    let items = rows
        .into_iter()
        .map(|(row, live)| pool_out_with(row, live))
        .collect();
    Ok(Json(PoolList { items, next }))
}

#[utoipa::path(get, path = "/v1/pools/{name}", tag = "pools",
    params(("name" = String, Path, description = "Pool name")),
    responses(
        (status = 200, description = "The pool", body = PoolOut),
        (status = 404, description = "No such pool", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_pool(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<PoolOut>, ApiError> {
    let row = state
        .store
        .find_pool(&name)
        .await?
        .ok_or_else(|| no_pool(&name))?;
    Ok(Json(pool_out(&state, row).await?))
}

/// Deletes a pool with its workers, samples and events.
#[utoipa::path(delete, path = "/v1/pools/{name}", tag = "pools",
    params(("name" = String, Path, description = "Pool name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such pool", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn delete_pool(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    if state.store.delete_pool(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(no_pool(&name))
    }
}

/// A worker a caller runs itself.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"instance_type": "g4dn.12xlarge", "market": "spot",
    "zone": "us-east-1a", "started_at": "2026-12-01T00:00:00Z",
    "aliases": ["ip-10-0-1-23.ec2.internal", "10.0.1.23"]}))]
pub struct WorkerIn {
    /// An instance type of the pool's provider in the catalog (else 422).
    #[schema(min_length = 1, example = "g4dn.12xlarge")]
    pub instance_type: String,
    pub market: Market,
    #[schema(example = "us-east-1a")]
    pub zone: Option<String>,
    /// RFC 3339, not in the future; default now.
    #[schema(format = DateTime, example = "2026-12-01T00:00:00Z")]
    pub started_at: Option<String>,
    /// Other names the worker goes by (its host name, private DNS name or IP): samples and
    /// remote-write series naming it by one of them count as its own. At most 8, each 1 to
    /// 253 characters without spaces or control characters, no repeats. Replaces the
    /// aliases it had; an alias another worker of the pool had moves to this one.
    #[serde(default)]
    #[schema(max_items = 8)]
    pub aliases: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerOut {
    pub pool: String,
    pub id: String,
    pub instance_type: String,
    pub market: Market,
    pub zone: Option<String>,
    pub started_at: String,
    pub aliases: Vec<String>,
}

/// Most aliases one worker may have: a host name, a DNS name and a few addresses.
pub const MAX_ALIASES: usize = 8;
/// Longest alias: the longest DNS name.
pub const MAX_ALIAS_CHARS: usize = 253;

/// Checks a worker's aliases, naming the first bad one.
fn check_aliases(aliases: &[String]) -> Result<(), ApiError> {
    if aliases.len() > MAX_ALIASES {
        return Err(ApiError::invalid(
            "aliases",
            format!(
                "has {} names, at most {MAX_ALIASES} are allowed",
                aliases.len()
            ),
        ));
    }
    for (i, alias) in aliases.iter().enumerate() {
        let field = format!("aliases[{i}]");
        let chars = alias.chars().count();
        if chars == 0 || chars > MAX_ALIAS_CHARS {
            return Err(ApiError::invalid(
                field,
                format!("must be 1 to {MAX_ALIAS_CHARS} characters"),
            ));
        }
        if alias.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ApiError::invalid(
                field,
                "must not contain spaces or control characters",
            ));
        }
        if aliases[..i].contains(alias) {
            return Err(ApiError::invalid(field, format!("repeats `{alias}`")));
        }
    }
    Ok(())
}

/// Registers or updates a worker of a pool.
#[utoipa::path(put, path = "/v1/pools/{name}/workers/{id}", tag = "pools", request_body = WorkerIn,
    params(("name" = String, Path, description = "Pool name"), ("id" = String, Path, min_length = 1, max_length = 128, description = "Worker id, e.g. the EC2 instance id: 1 to 128 characters")),
    responses(
        (status = 200, description = "Updated", body = WorkerOut),
        (status = 201, description = "Registered", body = WorkerOut),
        (status = 404, description = "No such pool", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A bad field, named", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn put_worker(
    State(state): State<AppState>,
    ApiPath((name, id)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<WorkerIn>,
) -> Result<Response, ApiError> {
    if id.is_empty() || id.chars().count() > 128 {
        return Err(ApiError::invalid("id", "must be 1 to 128 characters"));
    }
    check_aliases(&body.aliases)?;
    let pool = state
        .store
        .find_pool(&name)
        .await?
        .ok_or_else(|| no_pool(&name))?;
    let catalog = snapshot(&state)?;
    // A static pool's workers are priced from any provider that offers the type.
    if catalog
        .offerings_for_pool(&pool.policy.provider, &body.instance_type)
        .next()
        .is_none()
    {
        return Err(ApiError::invalid(
            "instance_type",
            format!(
                "`{}` is not an instance type of {}, the pool's provider",
                body.instance_type, pool.policy.provider
            ),
        ));
    }
    let now = now_ms();
    let started_at_ms = match &body.started_at {
        None => now,
        Some(t) => parse_rfc3339_ms(t)
            .and_then(|ms| check_not_future(ms, now))
            .map_err(|p| ApiError::invalid("started_at", p))?,
    };
    let worker = NewWorker {
        id: id.clone(),
        instance_type: body.instance_type,
        market: body.market,
        zone: body.zone.filter(|z| !z.is_empty()),
        started_at_ms,
        aliases: body.aliases,
    };
    let created = state
        .store
        .put_worker(&name, &worker, now)
        .await?
        .ok_or_else(|| no_pool(&name))?;
    let out = WorkerOut {
        pool: name,
        id,
        instance_type: worker.instance_type,
        market: worker.market,
        zone: worker.zone,
        started_at: format_ms(started_at_ms),
        aliases: worker.aliases,
    };
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(out)).into_response())
}

/// A live worker with what the cloud and its job said about it.
#[derive(Debug, Serialize, ToSchema)]
pub struct LiveWorker {
    pub id: String,
    pub instance_type: String,
    pub market: Market,
    pub zone: Option<String>,
    /// When it started (or, while it boots, will start).
    pub started_at: String,
    /// `interruption_warning` or `rebalance_recommendation`, when the cloud sent one.
    pub warning: Option<String>,
    pub warning_at: Option<String>,
    /// When the cloud will reclaim it, if it said.
    pub reclaim_at: Option<String>,
    /// When its job last reported a saved checkpoint.
    pub checkpoint_at: Option<String>,
    /// Its fresh GPU busy fraction (0..1), if reported within the policy's
    /// `signal_max_age_sec`.
    pub gpu_utilization: Option<f64>,
    /// Its fresh GPU memory in use (GiB, the fullest GPU), if reported likewise.
    pub gpu_memory_used_gib: Option<f64>,
    /// Other names it goes by, sorted: given when it was registered, or from its cloud
    /// (private DNS name and IP on AWS, host name and private IP on Alibaba Cloud).
    pub aliases: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerList {
    /// Live workers, oldest first (by start, then id).
    pub items: Vec<LiveWorker>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next: Option<String>,
}

/// Lists a pool's live workers: registered by callers, synced from its cloud group, or
/// created by the static provider.
#[utoipa::path(get, path = "/v1/pools/{name}/workers", tag = "pools",
    params(("name" = String, Path, description = "Pool name"), ListParams),
    responses(
        (status = 200, description = "A page of live workers, oldest first", body = WorkerList),
        (status = 400, description = "Unknown parameter or bad cursor", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such pool", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`limit` out of range", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_workers(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<WorkerList>, ApiError> {
    let Some(pool) = state.store.find_pool(&name).await? else {
        return Err(no_pool(&name));
    };
    let checkpoints = state.store.checkpoints(&name).await?;
    let aliases = state.store.worker_aliases(&name).await?;
    let policy = &pool.policy;
    let fresh_since = now_ms().saturating_sub(secs_to_ms(policy.signal_max_age_sec));
    let latest = state.store.latest_signals(&name, fresh_since).await?;
    let mut live: Vec<Worker> = state
        .store
        .workers(&name, i64::MAX)
        .await?
        .into_iter()
        .filter(|w| w.stopped_at_ms.is_none())
        .collect();
    signals::apply(policy, &latest, &[], &mut live);
    let (live, next) = page(
        live,
        |w| time_then(w.started_at_ms, &w.id),
        params.limit.as_deref(),
        params.cursor.as_deref(),
    )?;
    let items: Vec<LiveWorker> = live
        .into_iter()
        .map(|w| LiveWorker {
            aliases: aliases
                .iter()
                .filter(|(worker, _)| *worker == w.id)
                .map(|(_, alias)| alias.clone())
                .collect(),
            gpu_utilization: w.utilization,
            gpu_memory_used_gib: w.gpu_memory_gib,
            checkpoint_at: checkpoints
                .iter()
                .find(|(id, _)| *id == w.id)
                .map(|(_, at)| format_ms(*at)),
            warning: w.warning.as_ref().map(|x| x.kind.as_str().to_string()),
            warning_at: w.warning.as_ref().map(|x| format_ms(x.at_ms)),
            reclaim_at: w
                .warning
                .as_ref()
                .and_then(|x| x.action_at_ms)
                .map(format_ms),
            started_at: format_ms(w.started_at_ms),
            id: w.id,
            instance_type: w.instance_type,
            market: w.market,
            zone: w.zone,
        })
        .collect();
    Ok(Json(WorkerList { items, next }))
}

/// Marks a worker stopped. It stays in today's spend.
#[utoipa::path(delete, path = "/v1/pools/{name}/workers/{id}", tag = "pools",
    params(("name" = String, Path, description = "Pool name"), ("id" = String, Path, description = "Worker id")),
    responses(
        (status = 204, description = "Stopped"),
        (status = 404, description = "No such pool or live worker", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn delete_worker(
    State(state): State<AppState>,
    ApiPath((name, id)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    if state.store.stop_worker(&name, &id, now_ms()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else if state.store.find_pool(&name).await?.is_none() {
        Err(no_pool(&name))
    } else {
        Err(ApiError::not_found(
            "id",
            format!("pool `{name}` has no live worker `{id}`"),
        ))
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EventList {
    /// Events, newest first.
    pub items: Vec<EventOut>,
    /// Pass as `cursor` for the next (older) page; null on the last page.
    pub next: Option<String>,
}

/// A pool's events, newest first: scaling changes, interruptions, replacements, capacity
/// errors and budget alarms.
#[utoipa::path(get, path = "/v1/pools/{name}/events", tag = "pools", params(("name" = String, Path, description = "Pool name"), ListParams),
    responses(
        (status = 200, description = "A page of events", body = EventList),
        (status = 400, description = "Unknown parameter or bad cursor", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such pool", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`limit` out of range", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_events(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<EventList>, ApiError> {
    let limit = parse_limit(params.limit.as_deref(), 100, 500)?;
    let after = params.cursor.as_deref().map(cursor::decode).transpose()?;
    if state.store.find_pool(&name).await?.is_none() {
        return Err(no_pool(&name));
    }
    let rows = state
        .store
        .events(&name, EventPage { after, limit })
        .await?;
    let next = (rows.len() == limit)
        .then(|| rows.last().map(|e| cursor::encode(e.at_ms, e.id)))
        .flatten();
    Ok(Json(EventList {
        items: rows.into_iter().map(EventOut::from).collect(),
        next,
    }))
}

/// Pool names: see [`is_pool_name`](crate::auth::pools::is_pool_name).
pub fn check_pool_name(name: &str) -> Result<(), ApiError> {
    if crate::auth::pools::is_pool_name(name) {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "name",
            crate::auth::pools::POOL_NAME_RULE,
        ))
    }
}
