//! One reconciliation of one pool: read the group's actual capacity, make the same decision
//! `POST /decide` makes, plan the calls (`core::reconcile::plan`), make them, and log each
//! call with its outcome in the pool's event log.
//!
//! An insufficient-capacity answer is recorded as a capacity error for that instance type
//! (and zone), which the decision then skips for the policy's backoff, and the pass decides
//! and plans again, so the next type in priority order is tried at once.

use std::sync::Arc;

use serde_json::json;

use crate::core::capacity::{Capacity, GroupRef, WorkerState};
use crate::core::catalog::CatalogSnapshot;
use crate::core::policy::Actuation;
use crate::core::reconcile::{Matching, PlanInput, Step, plan};
use crate::fleet::pool_decision::decide;
use crate::provider::{GCP, Provider, ProviderError, STATIC};
use crate::store::{CloudNotice, NewEvent, NewWorker, PoolRow, Store, StoreError};

/// How many times one pass moves on after insufficient capacity (one per instance type).
const MAX_CAPACITY_RETRIES: usize = 4;

/// What a pass did.
#[derive(Debug, Clone, PartialEq)]
pub enum PassOutcome {
    /// The group already matched the decision: no call that changes anything was made.
    Unchanged,
    /// Calls were made; how many.
    Changed(usize),
    /// `observe` mode: the plan was recorded, not executed.
    Observed,
    Failed(String),
}

impl PassOutcome {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Unchanged => "unchanged",
            Self::Changed(_) => "changed",
            Self::Observed => "observed",
            Self::Failed(_) => "failed",
        }
    }
}

/// What a pass needs besides the pool.
pub struct PassContext<'a> {
    pub store: &'a Store,
    pub catalog: &'a CatalogSnapshot,
    /// This replica's name, recorded with each call.
    pub replica: &'a str,
    /// Whether this replica still leads; checked before every call that changes capacity.
    pub still_leader: &'a (dyn Fn() -> bool + Send + Sync),
    pub now_ms: &'a (dyn Fn() -> i64 + Send + Sync),
}

/// Reconciles `pool` through `provider` and `group`.
pub async fn reconcile_pool(
    cx: &PassContext<'_>,
    pool: &PoolRow,
    provider: &Arc<dyn Provider>,
    group: &GroupRef,
) -> Result<PassOutcome, StoreError> {
    let mut capacity = match describe_and_sync(cx, pool, provider, group).await? {
        Ok(c) => c,
        Err(e) => return failed(cx, pool, provider, group, "describe", &e).await,
    };
    let mut calls = 0;
    for _ in 0..=MAX_CAPACITY_RETRIES {
        let now = (cx.now_ms)();
        let Some(decision) = decide(cx.store, cx.catalog, &pool.name, now).await? else {
            return Ok(PassOutcome::Failed("the pool was deleted".into()));
        };
        let workers = cx.store.workers(&pool.name, now).await?;
        let checkpoints = cx.store.checkpoints(&pool.name).await?;
        let steps = plan(&PlanInput {
            policy: &pool.policy,
            decision: &decision.decision,
            capacity: &capacity,
            workers: &workers,
            checkpoints: &checkpoints,
            now_ms: now,
            matching: matching(provider.name()),
        });
        if steps.is_empty() {
            return Ok(if calls == 0 {
                PassOutcome::Unchanged
            } else {
                PassOutcome::Changed(calls)
            });
        }
        if pool.policy.actuation == Actuation::Observe {
            // Logged once per distinct plan, however often the same plan repeats.
            let text = serde_json::to_string(&steps).unwrap_or_default();
            let event = NewEvent {
                dedupe_key: Some(format!("planned:{}:{text}", capacity.desired)),
                ..NewEvent::pool(
                    "reconcile_planned",
                    now,
                    json!({
                    "provider": provider.name(),
                    "group": group.group,
                    "steps": steps,
                    "actual_desired": capacity.desired,
                    "decided_desired": decision.decision.desired,
                        "replica": cx.replica,
                    }),
                )
            };
            cx.store.append_events(&pool.name, &[event], now).await?;
            return Ok(PassOutcome::Observed);
        }
        let mut retry = false;
        for step in &steps {
            if !(cx.still_leader)() {
                return Ok(PassOutcome::Failed("lost the leader lease".into()));
            }
            let result = match step {
                Step::Terminate { workers, .. } => provider.terminate(group, workers, true).await,
                Step::SetCapacity { spec } => provider.set_capacity(group, &capacity, spec).await,
            };
            calls += 1;
            let now = (cx.now_ms)();
            record_step(cx, pool, provider, group, step, &result, now).await?;
            match result {
                Ok(()) => {}
                Err(ProviderError::InsufficientCapacity {
                    instance_type: Some(instance_type),
                    zone,
                    message,
                }) => {
                    let notice = CloudNotice {
                        kind: crate::ingest::cloud_events::CAPACITY_ERROR,
                        pool: Some(pool.name.clone()),
                        worker: None,
                        instance_type: Some(instance_type),
                        zone,
                        at_ms: now,
                        action_at_ms: None,
                        id: None,
                        detail: json!({"source": provider.name(), "message": message}),
                    };
                    cx.store.record_notices(&[notice], now).await?;
                    retry = true;
                    break;
                }
                Err(e) => {
                    return Ok(PassOutcome::Failed(e.to_string()));
                }
            }
        }
        match describe_and_sync(cx, pool, provider, group).await? {
            Ok(c) => capacity = c,
            Err(e) => return failed(cx, pool, provider, group, "describe", &e).await,
        }
        if !retry {
            return Ok(PassOutcome::Changed(calls));
        }
    }
    Ok(PassOutcome::Failed(
        "every instance type reported insufficient capacity".into(),
    ))
}

/// What the plan compares for a provider's groups.
fn matching(provider: &str) -> Matching {
    match provider {
        STATIC => Matching::PerTarget,
        GCP => Matching::PerMarket,
        _ => Matching::Distribution,
    }
}

/// Reads the group and, for a cloud group, makes the pool's stored workers match it.
async fn describe_and_sync(
    cx: &PassContext<'_>,
    pool: &PoolRow,
    provider: &Arc<dyn Provider>,
    group: &GroupRef,
) -> Result<Result<Capacity, ProviderError>, StoreError> {
    let capacity = match provider.describe(group).await {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    if provider.name() != STATIC {
        let now = (cx.now_ms)();
        let live: Vec<NewWorker> = capacity
            .workers
            .iter()
            .filter(|w| w.state != WorkerState::Terminating)
            .map(|w| NewWorker {
                id: w.id.clone(),
                instance_type: w.instance_type.clone(),
                market: w.market,
                zone: w.zone.clone(),
                started_at_ms: w.launched_at_ms.unwrap_or(now),
                aliases: w.aliases.clone(),
            })
            .collect();
        cx.store.sync_workers(&pool.name, &live, now).await?;
    }
    Ok(Ok(capacity))
}

async fn record_step(
    cx: &PassContext<'_>,
    pool: &PoolRow,
    provider: &Arc<dyn Provider>,
    group: &GroupRef,
    step: &Step,
    result: &Result<(), ProviderError>,
    now: i64,
) -> Result<(), StoreError> {
    let (outcome, error) = match result {
        Ok(()) => ("ok", None),
        Err(e) => (e.kind().as_str(), Some(e.to_string())),
    };
    let (instance_type, zone) = match result {
        Err(ProviderError::InsufficientCapacity {
            instance_type,
            zone,
            ..
        }) => (instance_type.clone(), zone.clone()),
        _ => (None, None),
    };
    let event = NewEvent {
        instance_type,
        zone,
        ..NewEvent::pool(
            "reconcile_step",
            now,
            json!({
            "provider": provider.name(),
            "group": group.group,
            "step": step,
            "outcome": outcome,
            "error": error,
                "replica": cx.replica,
            }),
        )
    };
    cx.store.append_events(&pool.name, &[event], now).await?;
    Ok(())
}

/// Logs a failed read once per kind of failure and ten minutes, not on every pass.
async fn failed(
    cx: &PassContext<'_>,
    pool: &PoolRow,
    provider: &Arc<dyn Provider>,
    group: &GroupRef,
    method: &str,
    e: &ProviderError,
) -> Result<PassOutcome, StoreError> {
    let now = (cx.now_ms)();
    let event = NewEvent {
        dedupe_key: Some(format!(
            "reconcile_error:{method}:{}:{}",
            e.kind().as_str(),
            now / 600_000
        )),
        ..NewEvent::pool(
            "reconcile_error",
            now,
            json!({
                "provider": provider.name(),
                "group": group.group,
                "method": method,
                "outcome": e.kind().as_str(),
                "error": e.to_string(),
                "replica": cx.replica,
            }),
        )
    };
    cx.store.append_events(&pool.name, &[event], now).await?;
    Ok(PassOutcome::Failed(e.to_string()))
}
