//! One decision for one pool, the way every caller makes it: under the pool's lock, the core
//! evaluates the stored state and fresh signals, and what changed (state, events, the last
//! decision) is written in the same transaction. Asking again with nothing new writes nothing.

use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::signals;
use crate::core::catalog::CatalogSnapshot;
use crate::core::cost::PriceBook;
use crate::core::scale::{DecisionEvent, PoolInput, WorkersDecision, evaluate};
use crate::core::timestamp::rfc3339;
use crate::store::{DecisionRead, DecisionWrite, NewEvent, Store, StoreResult};

// It is also what the store keeps as the pool's last decision, and the fleet page reads it
// back as this type, so a renamed field shows there as an unreadable decision rather than as
// blanks. (Not in the doc comment, which is the OpenAPI description.)
/// The answer for a pool, as `/decide` returns it under `workers`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PoolDecision {
    pub pool: String,
    pub decided_at: String,
    /// Whether this decision moved the target (and was logged as a `scaled` event).
    pub changed: bool,
    #[serde(flatten)]
    pub decision: WorkersDecision,
    /// Jobs waiting (queue depth plus pending jobs) in the fresh signals the decision used.
    pub queue_depth: Option<f64>,
    pub running_jobs: Option<f64>,
    /// The catalog version prices were taken from.
    pub catalog_version: i64,
}

impl PoolDecision {
    /// Whether this decision took the pool from no workers wanted to some: the moment KEDA's
    /// `StreamIsActive` subscribers must hear of. Only the change is announced, so a
    /// subscriber that decides on hearing it does not wake itself again.
    pub fn activated(&self) -> bool {
        self.changed && self.decision.previous_desired == 0 && self.decision.desired > 0
    }
}

/// Decides for `pool` at `now_ms`; `None` when there is no such pool.
pub async fn decide(
    store: &Store,
    catalog: &CatalogSnapshot,
    pool: &str,
    now_ms: i64,
) -> StoreResult<Option<PoolDecision>> {
    store
        .decide_pool(pool, now_ms, |read| run(read, catalog, now_ms))
        .await
}

/// The pure middle of a decision: inputs from the stored read, the core, the write-back.
pub fn run(
    read: &DecisionRead,
    catalog: &CatalogSnapshot,
    now_ms: i64,
) -> (DecisionWrite, PoolDecision) {
    let policy = &read.pool.policy;
    let prices = PriceBook::for_policy(catalog, policy);
    let mut workers = read.workers.clone();
    let signals = signals::apply(policy, &read.latest, &read.series_idle, &mut workers);
    let outcome = evaluate(&PoolInput {
        policy,
        state: &read.pool.state,
        workers: &workers,
        signals: &signals,
        incidents: &read.incidents,
        prices: &prices,
        since_ms: read.pool.since_ms,
        now_ms,
        explain: true,
    });
    let d = &outcome.decision;
    let events = outcome
        .events
        .iter()
        .map(|e| event_for(e, d, &workers, now_ms))
        .collect::<Vec<_>>();
    let changed = outcome
        .events
        .iter()
        .any(|e| matches!(e, DecisionEvent::Scaled { .. }));
    let answer = PoolDecision {
        pool: read.pool.name.clone(),
        decided_at: rfc3339(now_ms),
        changed,
        decision: outcome.decision.clone(),
        queue_depth: signals.waiting(),
        running_jobs: signals.running_jobs,
        catalog_version: catalog.version(),
    };
    // The fleet view shows the last decision whose outcome differs, not every repeat of it.
    let key = serde_json::to_string(&(d.desired, &d.by_type, &d.actions)).unwrap_or_default();
    let last_decision = (read.pool.last_decision_key.as_deref() != Some(key.as_str()))
        .then(|| (key, serde_json::to_value(&answer).unwrap_or_default()));
    let write = DecisionWrite {
        state: (outcome.state != read.pool.state).then_some(outcome.state),
        events,
        last_decision,
        activated: answer.activated(),
    };
    (write, answer)
}

fn event_for(
    e: &DecisionEvent,
    d: &WorkersDecision,
    workers: &[crate::core::scale::Worker],
    now_ms: i64,
) -> NewEvent {
    let base = NewEvent::pool("", now_ms, json!({}));
    match e {
        DecisionEvent::Scaled { from, to } => NewEvent {
            kind: "scaled",
            detail: json!({
                "from": from,
                "to": to,
                "current": d.current,
                "by_type": d.by_type,
                "reasons": d.reasons,
            }),
            ..base
        },
        DecisionEvent::BudgetAlarm { projected, budget } => NewEvent {
            kind: "budget_alarm",
            detail: json!({"projected_today": projected, "daily_budget": budget}),
            dedupe_key: Some(format!("budget:{}", crate::core::cost::day_start(now_ms))),
            ..base
        },
        DecisionEvent::Replacement {
            worker,
            instance_type,
            market,
        } => {
            // One replacement per warning, however often the pool is asked meanwhile.
            let warned_at = workers
                .iter()
                .find(|w| &w.id == worker)
                .and_then(|w| w.warning.as_ref())
                .map_or(0, |w| w.at_ms);
            NewEvent {
                kind: "replacement",
                worker: Some(worker.clone()),
                instance_type: Some(instance_type.clone()),
                detail: json!({"worker": worker, "instance_type": instance_type, "market": market}),
                dedupe_key: Some(format!("replace:{worker}:{warned_at}")),
                ..base
            }
        }
    }
}
