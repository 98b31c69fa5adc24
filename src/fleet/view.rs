//! The fleet as dashboards see it: per pool the workers by type, market and zone, the target,
//! queue and utilisation, what it costs per hour and has cost today, the budget, the last
//! decision and recent events; totals over all pools. Read-only: building it decides nothing.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::signals;
use crate::core::catalog::{CatalogSnapshot, Market};
use crate::core::cost::{PriceBook, day_start, round_cents, spend_today};
use crate::core::idle::idle_by_memory;
use crate::core::policy::{Mode, secs_to_ms};
use crate::core::scale::Worker;
use crate::core::timestamp::rfc3339;
use crate::store::{EventPage, EventRow, PoolRow, Store, StoreResult};

/// How far back the desired-vs-current history reaches.
pub const HISTORY_MS: i64 = 6 * 3_600_000;
const RECENT_EVENTS: usize = 5;
/// Events looked through for the replacement of a warned worker.
const REPLACEMENT_SCAN: usize = 200;

/// One logged event.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EventOut {
    pub id: i64,
    pub at: String,
    /// `scaled`, `interruption_warning`, `rebalance_recommendation`, `capacity_error`,
    /// `replacement` or `budget_alarm`.
    pub kind: String,
    pub worker: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

impl From<EventRow> for EventOut {
    fn from(e: EventRow) -> Self {
        Self {
            id: e.id,
            at: rfc3339(e.at_ms),
            kind: e.kind,
            worker: e.worker,
            instance_type: e.instance_type,
            zone: e.zone,
            detail: e.detail,
        }
    }
}

/// Live workers of one instance type, market and zone.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WorkerGroup {
    pub instance_type: String,
    pub market: Market,
    pub zone: Option<String>,
    pub count: u32,
}

/// One live worker: its fresh GPU signals, a cloud warning and the replacement under way.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WorkerSignals {
    pub id: String,
    pub instance_type: String,
    pub market: Market,
    pub zone: Option<String>,
    pub started_at: String,
    /// Still booting: its start is in the future (a launch that is not ready yet).
    pub booting: bool,
    /// `interruption_warning` or `rebalance_recommendation`, when the cloud sent one.
    pub warning: Option<String>,
    /// When the cloud will reclaim it, if it said.
    pub reclaim_at: Option<String>,
    /// The replacement the last decision launched for it (`instance_type` and `market`),
    /// while it is still live.
    #[schema(value_type = Option<Object>)]
    pub replacement: Option<serde_json::Value>,
    /// GPU busy fraction (0..1), when fresh.
    pub gpu_utilization: Option<f64>,
    /// GPU memory in use on its fullest GPU (GiB), when fresh.
    pub gpu_memory_used_gib: Option<f64>,
    /// Its GPUs hold less memory than the policy's `idle_gpu_memory_gib`: no training runs
    /// there, whatever the utilisation says.
    pub idle_by_memory: bool,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BudgetView {
    pub daily_budget: f64,
    pub spent_today: f64,
    pub exceeded: bool,
}

/// One pool in the fleet view.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PoolView {
    pub name: String,
    pub created_at: String,
    #[serde(skip)]
    pub created_at_ms: i64,
    pub provider: String,
    pub region: String,
    pub mode: &'static str,
    pub current: u32,
    /// The target of the last decision; `None` before the first.
    pub desired: Option<u32>,
    pub min_workers: u32,
    pub max_workers: u32,
    pub workers: Vec<WorkerGroup>,
    /// Jobs waiting (queue depth plus pending jobs), from fresh signals.
    pub queue_depth: Option<f64>,
    pub running_jobs: Option<f64>,
    /// Mean fresh GPU utilisation of live workers.
    pub gpu_utilization: Option<f64>,
    /// Each live worker's fresh GPU utilisation and memory, oldest worker first.
    pub worker_signals: Vec<WorkerSignals>,
    /// Dollars per hour of the live workers at catalog prices.
    pub cost_per_hour: f64,
    /// Dollars spent since 00:00 UTC, stopped workers included.
    pub spent_today: f64,
    pub budget: Option<BudgetView>,
    #[schema(value_type = Option<Object>)]
    pub last_decision: Option<serde_json::Value>,
    pub last_decision_at: Option<String>,
    pub recent_events: Vec<EventOut>,
    /// Desired and current over the last hours: (epoch ms, desired, current) at each change.
    #[serde(skip)]
    pub history: Vec<(i64, u32, u32)>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FleetTotals {
    pub pools: u32,
    pub workers: u32,
    pub on_demand_workers: u32,
    pub spot_workers: u32,
    pub desired: u32,
    pub cost_per_hour: f64,
    pub spent_today: f64,
    /// The sum of the daily budgets of the pools that have one; null when none has.
    pub daily_budgets: Option<f64>,
    /// What the pools with a budget spent today.
    pub spent_today_budgeted: f64,
    /// Live workers with a cloud interruption warning or rebalance recommendation.
    pub warned_workers: u32,
    /// Warned workers whose replacement has been launched.
    pub replacements: u32,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FleetView {
    pub generated_at: String,
    pub pools: Vec<PoolView>,
    pub totals: FleetTotals,
}

/// The whole fleet.
pub async fn fleet(
    store: &Store,
    catalog: &CatalogSnapshot,
    now_ms: i64,
    history: bool,
) -> StoreResult<FleetView> {
    fleet_of(store, catalog, now_ms, history, |_| true).await
}

/// The pools named `shown` keeps, with totals over those alone (a caller restricted to some
/// pools learns nothing of the others, not even through a sum).
pub async fn fleet_of(
    store: &Store,
    catalog: &CatalogSnapshot,
    now_ms: i64,
    history: bool,
    shown: impl Fn(&str) -> bool,
) -> StoreResult<FleetView> {
    let mut pools = Vec::new();
    for row in store.pools().await?.into_iter().filter(|r| shown(&r.name)) {
        pools.push(pool_view(store, catalog, row, now_ms, history).await?);
    }
    let live = || pools.iter().flat_map(|p| &p.worker_signals);
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let budgeted = || pools.iter().filter_map(|p| p.budget.as_ref());
    let totals = FleetTotals {
        pools: count(pools.len()),
        workers: pools.iter().map(|p| p.current).sum(),
        on_demand_workers: count(live().filter(|w| w.market == Market::OnDemand).count()),
        spot_workers: count(live().filter(|w| w.market == Market::Spot).count()),
        desired: pools.iter().map(|p| p.desired.unwrap_or(p.current)).sum(),
        cost_per_hour: round_cents(pools.iter().map(|p| p.cost_per_hour).sum()),
        spent_today: round_cents(pools.iter().map(|p| p.spent_today).sum()),
        daily_budgets: budgeted().map(|b| b.daily_budget).reduce(|a, b| a + b),
        spent_today_budgeted: round_cents(budgeted().map(|b| b.spent_today).sum()),
        warned_workers: count(live().filter(|w| w.warning.is_some()).count()),
        replacements: count(live().filter(|w| w.replacement.is_some()).count()),
    };
    Ok(FleetView {
        generated_at: rfc3339(now_ms),
        pools,
        totals,
    })
}

/// One pool's view.
pub async fn pool_view(
    store: &Store,
    catalog: &CatalogSnapshot,
    row: PoolRow,
    now_ms: i64,
    history: bool,
) -> StoreResult<PoolView> {
    let p = &row.policy;
    let since = day_start(now_ms).min(now_ms - HISTORY_MS);
    let mut workers = store.workers(&row.name, since).await?;
    let max_age = secs_to_ms(p.signal_max_age_sec);
    let latest = store.latest_signals(&row.name, now_ms - max_age).await?;
    let sig = signals::apply(p, &latest, &[], &mut workers);
    let prices = PriceBook::for_policy(catalog, p);
    let price = |w: &Worker| {
        prices
            .price(&w.instance_type, w.market, w.zone.as_deref())
            .unwrap_or(0.0)
    };
    let live: Vec<&Worker> = workers
        .iter()
        .filter(|w| w.stopped_at_ms.is_none())
        .collect();
    let mut groups: BTreeMap<(String, Market, Option<String>), u32> = BTreeMap::new();
    for w in &live {
        *groups
            .entry((w.instance_type.clone(), w.market, w.zone.clone()))
            .or_default() += 1;
    }
    let utils: Vec<f64> = live.iter().filter_map(|w| w.utilization).collect();
    let spent: f64 = workers
        .iter()
        .map(|w| {
            spend_today(
                price(w),
                w.started_at_ms,
                w.stopped_at_ms.unwrap_or(now_ms),
                now_ms,
            )
        })
        .sum();
    let mut recent = store
        .events(
            &row.name,
            EventPage {
                after: None,
                limit: if live.iter().any(|w| w.warning.is_some()) {
                    REPLACEMENT_SCAN
                } else {
                    RECENT_EVENTS
                },
            },
        )
        .await?;
    let history = if history {
        desired_vs_current(store, &row, &workers, now_ms).await?
    } else {
        Vec::new()
    };
    let waiting = sig.waiting();
    Ok(PoolView {
        provider: p.provider.clone(),
        region: p.region.clone(),
        mode: match p.mode {
            Mode::Queue { .. } => "queue",
            Mode::Utilization { .. } => "utilization",
            Mode::Elastic { .. } => "elastic",
        },
        current: u32::try_from(live.len()).unwrap_or(u32::MAX),
        desired: row.state.desired,
        min_workers: p.min_workers,
        max_workers: p.max_workers,
        workers: groups
            .into_iter()
            .map(|((instance_type, market, zone), count)| WorkerGroup {
                instance_type,
                market,
                zone,
                count,
            })
            .collect(),
        queue_depth: waiting,
        running_jobs: sig.running_jobs,
        gpu_utilization: (!utils.is_empty())
            .then(|| utils.iter().sum::<f64>() / utils.len() as f64),
        worker_signals: live
            .iter()
            .map(|w| WorkerSignals {
                id: w.id.clone(),
                instance_type: w.instance_type.clone(),
                market: w.market,
                zone: w.zone.clone(),
                started_at: rfc3339(w.started_at_ms),
                booting: w.started_at_ms > now_ms,
                warning: w.warning.as_ref().map(|x| x.kind.as_str().to_string()),
                reclaim_at: w.warning.as_ref().and_then(|x| x.action_at_ms).map(rfc3339),
                replacement: w
                    .warning
                    .as_ref()
                    .and_then(|x| replacement_for(&recent, &w.id, x.at_ms)),
                gpu_utilization: w.utilization,
                gpu_memory_used_gib: w.gpu_memory_gib,
                idle_by_memory: idle_by_memory(p, w.gpu_memory_gib),
            })
            .collect(),
        cost_per_hour: round_cents(live.iter().map(|w| price(w)).sum()),
        spent_today: round_cents(spent),
        budget: p.daily_budget.map(|b| BudgetView {
            daily_budget: b,
            spent_today: round_cents(spent),
            exceeded: spent > b,
        }),
        last_decision: row.last_decision.clone(),
        last_decision_at: row.last_decision_at_ms.map(rfc3339),
        recent_events: {
            recent.truncate(RECENT_EVENTS);
            recent.into_iter().map(EventOut::from).collect()
        },
        history,
        created_at: rfc3339(row.created_at_ms),
        created_at_ms: row.created_at_ms,
        name: row.name,
    })
}

/// The replacement launched for `worker` since its warning at `warned_at_ms`, from the
/// `replacement` events (newest first): its instance type and market.
fn replacement_for(
    events: &[EventRow],
    worker: &str,
    warned_at_ms: i64,
) -> Option<serde_json::Value> {
    let e = events.iter().find(|e| {
        e.kind == "replacement" && e.worker.as_deref() == Some(worker) && e.at_ms >= warned_at_ms
    })?;
    Some(serde_json::json!({
        "instance_type": e.detail.get("instance_type")?,
        "market": e.detail.get("market")?,
    }))
}

/// Step series of desired (from `scaled` events) and current (from worker starts and stops).
async fn desired_vs_current(
    store: &Store,
    row: &PoolRow,
    workers: &[Worker],
    now_ms: i64,
) -> StoreResult<Vec<(i64, u32, u32)>> {
    // From the pool's creation when that is within the window: nothing before it is known.
    let start = (now_ms - HISTORY_MS).max(row.created_at_ms.min(now_ms));
    let mut changes: Vec<(i64, Option<u32>, i32)> = Vec::new();
    let mut after = None;
    let mut oldest_from = None;
    // Pages of events, newest first, until the window is covered.
    'pages: loop {
        let page = store
            .events(&row.name, EventPage { after, limit: 500 })
            .await?;
        let Some(last) = page.last() else { break };
        after = Some((last.at_ms, last.id));
        for e in &page {
            if e.at_ms < start {
                break 'pages;
            }
            if e.kind == "scaled"
                && let Some(to) = e.detail.get("to").and_then(|v| v.as_u64())
            {
                changes.push((e.at_ms, Some(u32::try_from(to).unwrap_or(u32::MAX)), 0));
                oldest_from = e.detail.get("from").and_then(|v| v.as_u64());
            }
        }
        if page.len() < 500 {
            break;
        }
    }
    for w in workers {
        // A worker still booting is live (counted in `current`) from now on; its start in
        // the future would draw the line past the chart's end and back.
        if w.started_at_ms > start {
            changes.push((w.started_at_ms.min(now_ms), None, 1));
        }
        if let Some(s) = w.stopped_at_ms.filter(|s| *s > start) {
            changes.push((s, None, -1));
        }
    }
    changes.sort_by_key(|c| c.0);
    let mut current = workers
        .iter()
        .filter(|w| w.started_at_ms <= start && w.stopped_at_ms.is_none_or(|s| s > start))
        .count() as i64;
    // The target at the window's start: what the oldest change in it moved away from.
    let mut desired = match oldest_from {
        Some(from) => u32::try_from(from).unwrap_or(u32::MAX),
        None => row.state.desired.unwrap_or(0),
    };
    let mut out = vec![(start, desired, u32::try_from(current.max(0)).unwrap_or(0))];
    for (at, to, d) in changes {
        if let Some(to) = to {
            desired = to;
        }
        current += i64::from(d);
        out.push((at, desired, u32::try_from(current.max(0)).unwrap_or(0)));
    }
    out.push((now_ms, desired, u32::try_from(current.max(0)).unwrap_or(0)));
    Ok(out)
}
