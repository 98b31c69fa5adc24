//! How many workers now: one evaluation of a pool's policy against its workers, signals and
//! recent incidents at time `now`, returning the target, the actions that reach it and every
//! rule that fired with its numbers, plus the pool state to persist.
//!
//! The target is level-triggered, like an auto scaling group's desired capacity: asking again
//! before anything changed gives the same answer, and steps are measured from the capacity
//! that exists, so repeated calls never stack steps on workers that have not arrived.

mod rule;
mod stages;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::catalog::Market;
use super::cost::{PriceBook, day_start, round_cents};
use super::idle::idle_by_memory;
use super::policy::{BudgetAction, Policy, secs_to_ms};
use super::timestamp::rfc3339;
pub use rule::Rule;
use rule::Rules;
use stages::{Budgeted, Gang, Need, Pool, Step, StepInput};

/// How long to wait before asking again when no rule names an earlier moment.
pub const DEFAULT_EVALUATION_INTERVAL_MS: i64 = 30_000;

/// What a pool remembers between decisions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PoolState {
    /// The target of the last decision; `None` before the first.
    pub desired: Option<u32>,
    pub last_scale_up_at_ms: Option<i64>,
    pub last_scale_down_at_ms: Option<i64>,
    /// Need as it changed: (at, need) points, pruned to the stabilisation window.
    pub need_history: Vec<(i64, u32)>,
    /// The UTC day (its start) on which a budget alarm was last raised.
    pub budget_alarm_day_ms: Option<i64>,
    /// Interruption warnings already given a replacement: (worker, warning time).
    pub replaced: Vec<(String, i64)>,
}

impl PoolState {
    /// The latest time the state recorded.
    pub fn latest_ms(&self) -> i64 {
        [self.last_scale_up_at_ms, self.last_scale_down_at_ms]
            .into_iter()
            .flatten()
            .chain(self.need_history.last().map(|(at, _)| *at))
            .max()
            .unwrap_or(i64::MIN)
    }
}

/// A spot warning for a worker: it will be reclaimed at `action_at_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// The instance will be stopped or terminated (AWS: two minutes' notice).
    InterruptionWarning,
    /// Elevated risk of interruption: checkpoint, no replacement yet.
    RebalanceRecommendation,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub kind: WarningKind,
    pub at_ms: i64,
    pub action_at_ms: Option<i64>,
}

/// A worker as the decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Worker {
    pub id: String,
    pub instance_type: String,
    pub market: Market,
    pub zone: Option<String>,
    pub started_at_ms: i64,
    /// Set once the worker is gone; kept so the day's spend includes it.
    pub stopped_at_ms: Option<i64>,
    pub warning: Option<Warning>,
    /// Its latest fresh GPU utilisation (0..1), if any.
    pub utilization: Option<f64>,
    /// Its latest fresh GPU memory in use (GiB, the fullest GPU), if any.
    pub gpu_memory_gib: Option<f64>,
}

impl WarningKind {
    /// The name stored and logged for the warning (the event kind it came from).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InterruptionWarning => "interruption_warning",
            Self::RebalanceRecommendation => "rebalance_recommendation",
        }
    }

    /// Reads a stored name; anything but an interruption is a rebalance recommendation.
    pub fn from_stored(name: &str) -> Self {
        if name == Self::InterruptionWarning.as_str() {
            Self::InterruptionWarning
        } else {
            Self::RebalanceRecommendation
        }
    }
}

impl Worker {
    fn is_live(&self) -> bool {
        self.stopped_at_ms.is_none()
    }

    /// Its utilisation as the policy reads it: none at all when its GPUs hold less memory
    /// than `idle_gpu_memory_gib`, since no training runs there.
    fn utilization_under(&self, p: &Policy) -> Option<f64> {
        if idle_by_memory(p, self.gpu_memory_gib) {
            Some(0.0)
        } else {
            self.utilization
        }
    }

    fn is_doomed(&self) -> bool {
        self.warning
            .as_ref()
            .is_some_and(|w| w.kind == WarningKind::InterruptionWarning)
    }
}

/// Pool-level signals, already filtered to fresh ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    pub queue_depth: Option<f64>,
    pub pending_jobs: Option<f64>,
    pub running_jobs: Option<f64>,
    /// Since when the signals have shown no work: the latest time one of the pool's series
    /// turned idle ([`super::idle::pool_idle_since`]).
    pub idle_since_ms: Option<i64>,
}

impl Signals {
    /// Jobs waiting: queue depth plus pending jobs; `None` when neither is reported.
    pub fn waiting(&self) -> Option<f64> {
        match (self.queue_depth, self.pending_jobs) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        }
    }
}

/// Something the cloud told us about capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    pub kind: IncidentKind,
    pub instance_type: String,
    pub zone: Option<String>,
    pub at_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncidentKind {
    /// A spot interruption (warning) of a worker of this type.
    Interruption,
    /// The provider had no capacity for this type (in this zone).
    CapacityError,
}

/// Everything one evaluation reads.
#[derive(Debug, Clone)]
pub struct PoolInput<'a> {
    pub policy: &'a Policy,
    pub state: &'a PoolState,
    pub workers: &'a [Worker],
    pub signals: &'a Signals,
    pub incidents: &'a [Incident],
    pub prices: &'a PriceBook,
    /// When the pool was created (or its policy last replaced): the idle clock starts there.
    pub since_ms: i64,
    pub now_ms: i64,
    /// Whether reasons carry their words and numbers, times are also written as RFC 3339 text
    /// and the usable type list a cloud group is set from is filled in. Answers people and the
    /// reconciler read explain; a replay, which reads only the actions, the state and the
    /// events, does not.
    pub explain: bool,
}

/// Desired workers of one instance type and market.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TypeTarget {
    pub instance_type: String,
    pub market: Market,
    pub count: u32,
    /// Zones to launch in, recent capacity errors left out; empty means any.
    pub zones: Vec<String>,
    /// Zones with a recent capacity error for this type: stay out of them (matters when
    /// `zones` is empty, meaning any).
    pub avoid_zones: Vec<String>,
}

/// One thing to do to reach the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    ScaleUp {
        instance_type: String,
        market: Market,
        count: u32,
        zones: Vec<String>,
        avoid_zones: Vec<String>,
    },
    /// Workers to remove, idle ones first.
    ScaleDown { workers: Vec<String> },
    /// A new worker for one that is being interrupted.
    Replace {
        worker: String,
        instance_type: String,
        market: Market,
        zones: Vec<String>,
        avoid_zones: Vec<String>,
    },
    /// Tell the worker's job to save a checkpoint before `deadline_ms`.
    Checkpoint {
        worker: String,
        /// When the instance will be reclaimed, if the cloud said.
        deadline: Option<String>,
    },
}

/// One rule that fired, with the numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Reason {
    #[schema(value_type = String)]
    pub rule: Rule,
    pub detail: String,
    // Not read back from a stored decision: the names are the core's own `&'static str`s,
    // and nothing that reads a stored decision (the fleet page) shows the numbers. (A plain
    // comment: a doc comment would become part of the OpenAPI document.)
    #[schema(value_type = Object)]
    #[serde(deserialize_with = "values_not_read")]
    pub values: BTreeMap<&'static str, f64>,
}

/// Passes over a stored reason's numbers (see [`Reason::values`]). Not `skip_deserializing`:
/// utoipa would take that for a field left out of the schema.
fn values_not_read<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<&'static str, f64>, D::Error> {
    serde::de::IgnoredAny::deserialize(d)?;
    Ok(BTreeMap::new())
}

/// The day's spend against the budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BudgetStatus {
    pub daily_budget: f64,
    pub spent_today: f64,
    /// Spent so far plus the target's hourly cost until the end of the UTC day.
    pub projected_today: f64,
    pub action: BudgetAction,
    pub exceeded: bool,
}

/// A change worth an entry in the pool's event log.
#[derive(Debug, Clone, PartialEq)]
pub enum DecisionEvent {
    Scaled {
        from: u32,
        to: u32,
    },
    BudgetAlarm {
        projected: f64,
        budget: f64,
    },
    Replacement {
        worker: String,
        instance_type: String,
        market: Market,
    },
}

/// The answer to "how many workers now".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkersDecision {
    /// Live workers, including ones being interrupted.
    pub current: u32,
    pub desired: u32,
    /// The target before this decision.
    pub previous_desired: u32,
    /// What the signals ask for before steps, cooldowns and budget.
    pub need: u32,
    pub by_type: Vec<TypeTarget>,
    /// The policy's instance types that may be launched now, in priority order: types with a
    /// recent capacity error (in every allowed zone) are left out. A cloud group's instance
    /// type list is set from this.
    pub usable_types: Vec<String>,
    /// `desired - current`.
    pub delta: i64,
    pub actions: Vec<Action>,
    pub reasons: Vec<Reason>,
    /// When the cooldown that holds the target ends.
    pub cooldown_until: Option<String>,
    /// When asking again may give a different answer without new signals.
    pub next_evaluation_at: String,
    #[serde(skip)]
    pub cooldown_until_ms: Option<i64>,
    #[serde(skip)]
    pub next_evaluation_at_ms: i64,
    /// Dollars per hour of the target, at catalog prices.
    pub cost_per_hour: f64,
    pub budget: Option<BudgetStatus>,
}

/// A decision, what to remember, and what to log.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub decision: WorkersDecision,
    pub state: PoolState,
    pub events: Vec<DecisionEvent>,
}

/// Evaluates the pool once. Pure: the same input always gives the same outcome.
pub fn evaluate(input: &PoolInput<'_>) -> Outcome {
    let p = input.policy;
    let mut rules = Rules::new(input.explain);
    let pool = Pool::of(input);
    let now = pool.now;

    let Need { need, floor } = stages::need(p, &mut rules, &pool);
    let bounded = stages::bounds(p, &mut rules, need);
    let mut state = input.state.clone();
    record_need(&mut state, bounded, now, p.stabilization_window_sec);

    let step_input = StepInput {
        input,
        state: &state,
        now,
        previous: pool.previous,
        capacity: pool.capacity,
        bounded,
        floor,
    };
    let Step {
        target,
        cooldown_until,
        mut wake_at,
    } = stages::step(&step_input, &mut rules, &pool);
    let down_blocked = step_input.down_blocked();
    let up_cooldown_end = step_input.up_cooldown_end();
    let mut target = stages::running_floor(p, &mut rules, floor, target);
    if let Some(gang) = Gang::of(p) {
        target = stages::whole_gangs(&mut rules, gang, target, pool.previous);
    }
    let budgeted = stages::budget(input, &mut rules, now, pool.capacity, floor, target);
    let target = budgeted.target;
    let mut events = remember(&mut state, &budgeted, pool.previous, now);

    let blocked = Blocked::from(input);
    let by_type = split_by_type(p, &blocked, &mut rules, target);
    let actions = actions(
        input,
        &pool,
        &blocked,
        &by_type,
        target,
        Effects {
            rules: &mut rules,
            state: &mut state,
            events: &mut events,
            wake_at: &mut wake_at,
        },
    );

    if let Some(end) = up_cooldown_end.filter(|e| *e > now)
        && bounded > target
    {
        wake_at.push(end);
    }
    if let Some(end) = down_blocked {
        wake_at.push(end);
    }
    let next = wake_at
        .into_iter()
        .filter(|t| *t > now)
        .min()
        .unwrap_or(now + DEFAULT_EVALUATION_INTERVAL_MS);
    let next = next.min(now + DEFAULT_EVALUATION_INTERVAL_MS);
    let cooldown_until = cooldown_until.or(down_blocked);

    let decision = WorkersDecision {
        current: pool.current,
        desired: target,
        previous_desired: pool.previous,
        need,
        cost_per_hour: target_cost(input, &by_type),
        // Read by the reconciler only: a replay (`explain: false`) launches by the actions.
        usable_types: if input.explain {
            usable_types(p, &blocked)
        } else {
            Vec::new()
        },
        by_type,
        delta: i64::from(target) - i64::from(pool.current),
        actions,
        reasons: rules.reasons,
        cooldown_until: cooldown_until.filter(|_| input.explain).map(rfc3339),
        next_evaluation_at: if input.explain {
            rfc3339(next)
        } else {
            String::new()
        },
        cooldown_until_ms: cooldown_until,
        next_evaluation_at_ms: next,
        budget: budgeted.status,
    };
    Outcome {
        decision,
        state,
        events,
    }
}

/// What the state remembers of the new target and the budget, and the events worth logging:
/// a budget alarm once per UTC day, a change of target.
fn remember(
    state: &mut PoolState,
    budgeted: &Budgeted,
    previous: u32,
    now: i64,
) -> Vec<DecisionEvent> {
    let mut events = Vec::new();
    let target = budgeted.target;
    if let Some((projected, budget)) = budgeted.over {
        let today = day_start(now);
        if state.budget_alarm_day_ms != Some(today) {
            state.budget_alarm_day_ms = Some(today);
            events.push(DecisionEvent::BudgetAlarm { projected, budget });
        }
    }
    if target > previous {
        state.last_scale_up_at_ms = Some(now);
    } else if target < previous {
        state.last_scale_down_at_ms = Some(now);
    }
    if target != previous {
        events.push(DecisionEvent::Scaled {
            from: previous,
            to: target,
        });
    }
    state.desired = Some(target);
    events
}

/// Dollars per hour of the target by type, at catalog prices.
fn target_cost(input: &PoolInput<'_>, by_type: &[TypeTarget]) -> f64 {
    round_cents(
        by_type
            .iter()
            .map(|t| {
                f64::from(t.count)
                    * input
                        .prices
                        .price(&t.instance_type, t.market, None)
                        .unwrap_or(0.0)
            })
            .sum(),
    )
}

/// The policy's types that may be launched now in some market, in priority order.
fn usable_types(p: &Policy, blocked: &Blocked<'_>) -> Vec<String> {
    p.instance_types
        .iter()
        .filter(|c| {
            c.markets
                .iter()
                .any(|m| blocked.usable(p, &c.instance_type, *m))
        })
        .map(|c| c.instance_type.clone())
        .collect()
}

/// What the action stage writes besides the actions.
struct Effects<'e> {
    rules: &'e mut Rules,
    state: &'e mut PoolState,
    events: &'e mut Vec<DecisionEvent>,
    wake_at: &'e mut Vec<i64>,
}

/// The last stage: checkpoints for warned workers, replacements for doomed ones, launches for
/// the rest of the shortfall, removals for a surplus.
fn actions(
    input: &PoolInput<'_>,
    pool: &Pool<'_>,
    blocked: &Blocked<'_>,
    by_type: &[TypeTarget],
    target: u32,
    fx: Effects<'_>,
) -> Vec<Action> {
    let p = input.policy;
    let mut actions = Vec::new();
    for w in pool.live.iter().filter(|w| w.warning.is_some()) {
        let deadline_ms = w.warning.as_ref().and_then(|x| x.action_at_ms);
        actions.push(Action::Checkpoint {
            worker: w.id.clone(),
            deadline: deadline_ms.map(rfc3339),
        });
        if let Some(d) = deadline_ms {
            fx.wake_at.push(d);
        }
    }
    // Forget replacements of warnings that are over (the worker stopped or was re-registered).
    fx.state.replaced.retain(|(id, at)| {
        pool.doomed
            .iter()
            .any(|w| &w.id == id && w.warning.as_ref().is_some_and(|x| x.at_ms == *at))
    });
    let mut shortfall = target.saturating_sub(pool.capacity);
    let rate = interruption_rate(p, input, &pool.live);
    for w in &pool.doomed {
        if shortfall == 0 {
            break;
        }
        shortfall -= 1;
        let (instance_type, market, why) = replacement_for(p, blocked, w, rate);
        fx.rules.fire(
            Rule::Replace,
            || format!("{} is being interrupted: {why}", w.id),
            &[
                ("interruption_rate", rate),
                ("max_interruption_rate", p.max_interruption_rate),
            ],
        );
        // The action repeats until the replacement exists; the event is logged once.
        let warned_at = w.warning.as_ref().map_or(0, |x| x.at_ms);
        let key = (w.id.clone(), warned_at);
        if !fx.state.replaced.contains(&key) {
            fx.state.replaced.push(key);
            fx.events.push(DecisionEvent::Replacement {
                worker: w.id.clone(),
                instance_type: instance_type.clone(),
                market,
            });
        }
        let zones = blocked.zones_for(p, &instance_type);
        let avoid_zones = blocked.avoid_zones(&instance_type);
        actions.push(Action::Replace {
            worker: w.id.clone(),
            instance_type,
            market,
            zones,
            avoid_zones,
        });
    }
    if shortfall > 0 {
        actions.extend(scale_up_actions(by_type, &pool.live, shortfall));
    }
    if pool.capacity > target {
        let surplus = (pool.capacity - target) as usize;
        actions.push(Action::ScaleDown {
            workers: pick_for_removal(p, &pool.live, by_type, surplus),
        });
    }
    actions
}

/// On-demand and spot counts for a total, with AWS MixedInstancesPolicy semantics: the base is
/// on-demand; above it, on-demand gets `100 - spot_percentage` percent, rounded up.
pub fn market_split(p: &Policy, total: u32) -> (u32, u32) {
    if !p.any_allows(Market::Spot) {
        return (total, 0);
    }
    if !p.any_allows(Market::OnDemand) {
        return (0, total);
    }
    let base = total.min(p.on_demand_base);
    let above = total - base;
    let od_above =
        (u64::from(above) * u64::from(100 - p.spot_percentage.min(100))).div_ceil(100) as u32;
    (base + od_above, above - od_above)
}

/// Types and zones to avoid because of recent capacity errors or interruptions.
struct Blocked<'a> {
    /// (instance type, zone or None for all zones)
    capacity: Vec<(&'a str, Option<&'a str>)>,
    interrupted_types: Vec<&'a str>,
}

impl<'a> Blocked<'a> {
    fn from(input: &'a PoolInput<'_>) -> Self {
        let p = input.policy;
        let mut b = Blocked {
            capacity: Vec::new(),
            interrupted_types: Vec::new(),
        };
        for i in input.incidents {
            match i.kind {
                IncidentKind::CapacityError
                    if input.now_ms - i.at_ms < secs_to_ms(p.capacity_error_backoff_sec) =>
                {
                    b.capacity
                        .push((i.instance_type.as_str(), i.zone.as_deref()));
                }
                IncidentKind::Interruption
                    if input.now_ms - i.at_ms < secs_to_ms(p.capacity_error_backoff_sec) =>
                {
                    b.interrupted_types.push(i.instance_type.as_str());
                }
                _ => {}
            }
        }
        b
    }

    /// Zones with a recent capacity error for this type.
    fn avoid_zones(&self, instance_type: &str) -> Vec<String> {
        let mut z: Vec<String> = self
            .capacity
            .iter()
            .filter(|(t, _)| *t == instance_type)
            .filter_map(|(_, z)| z.map(str::to_string))
            .collect();
        z.sort();
        z.dedup();
        z
    }

    /// The policy's zones minus those with recent capacity errors for this type (empty when
    /// the policy allows any zone).
    fn zones_for(&self, p: &Policy, instance_type: &str) -> Vec<String> {
        p.zones
            .iter()
            .filter(|z| {
                !self
                    .capacity
                    .iter()
                    .any(|(t, bz)| *t == instance_type && *bz == Some(z.as_str()))
            })
            .cloned()
            .collect()
    }

    fn usable(&self, p: &Policy, instance_type: &str, market: Market) -> bool {
        if self
            .capacity
            .iter()
            .any(|(t, z)| *t == instance_type && z.is_none())
        {
            return false;
        }
        if !p.zones.is_empty() && self.zones_for(p, instance_type).is_empty() {
            return false;
        }
        !(market == Market::Spot && self.interrupted_types.contains(&instance_type))
    }

    fn first<'p>(&self, p: &'p Policy, market: Market, skip: Option<&str>) -> Option<&'p str> {
        p.instance_types
            .iter()
            .filter(|c| c.allows(market) && Some(c.instance_type.as_str()) != skip)
            .find(|c| self.usable(p, &c.instance_type, market))
            .map(|c| c.instance_type.as_str())
    }
}

fn split_by_type(
    p: &Policy,
    blocked: &Blocked<'_>,
    rules: &mut Rules,
    total: u32,
) -> Vec<TypeTarget> {
    let (mut od, mut spot) = market_split(p, total);
    let mut out = Vec::new();
    let mut spot_type = blocked.first(p, Market::Spot, None);
    if spot > 0 && spot_type.is_none() {
        if p.any_allows(Market::OnDemand) {
            rules.fire(Rule::SpotFallback, || format!("no spot instance type is usable (recent capacity errors or interruptions): {spot} spot workers go on-demand"), &[("spot", spot.into())]);
            od += spot;
            spot = 0;
        } else {
            // A spot-only pool has nowhere else to go: keep asking for spot.
            rules.fire(Rule::NoUsableType, || format!("every spot type had a recent capacity error or interruption and the policy allows no on-demand: {spot} spot workers of the first type by priority"), &[("spot", spot.into())]);
            spot_type = p
                .instance_types
                .iter()
                .find(|c| c.allows(Market::Spot))
                .map(|c| c.instance_type.as_str());
        }
    }
    if od > 0 {
        let t =
            blocked.first(p, Market::OnDemand, None).or_else(|| {
                rules.fire(
                Rule::NoUsableType,
                || "every on-demand type had a recent capacity error: using the first by priority"
                    .into(),
                &[],
            );
                p.instance_types
                    .iter()
                    .find(|c| c.allows(Market::OnDemand))
                    .map(|c| c.instance_type.as_str())
            });
        if let Some(t) = t {
            out.push(TypeTarget {
                zones: blocked.zones_for(p, t),
                avoid_zones: blocked.avoid_zones(t),
                instance_type: t.to_owned(),
                market: Market::OnDemand,
                count: od,
            });
        }
    }
    if let (true, Some(t)) = (spot > 0, spot_type) {
        out.push(TypeTarget {
            zones: blocked.zones_for(p, t),
            avoid_zones: blocked.avoid_zones(t),
            instance_type: t.to_owned(),
            market: Market::Spot,
            count: spot,
        });
    }
    if total > 0 {
        rules.fire(
            Rule::MarketMix,
            || {
                format!(
                    "{od} on-demand (base {}) and {spot} spot ({}% spot above the base)",
                    p.on_demand_base, p.spot_percentage
                )
            },
            &[("on_demand", od.into()), ("spot", spot.into())],
        );
    }
    out
}

/// Interruptions in the window per spot worker the pool has had in it.
fn interruption_rate(p: &Policy, input: &PoolInput<'_>, live: &[&Worker]) -> f64 {
    let since = input.now_ms - secs_to_ms(p.interruption_window_sec);
    let n = input
        .incidents
        .iter()
        .filter(|i| i.kind == IncidentKind::Interruption && i.at_ms >= since)
        .count();
    let spot = live.iter().filter(|w| w.market == Market::Spot).count();
    if n == 0 {
        0.0
    } else {
        n as f64 / spot.max(1) as f64
    }
}

fn replacement_for(
    p: &Policy,
    blocked: &Blocked<'_>,
    w: &Worker,
    rate: f64,
) -> (String, Market, String) {
    if rate <= p.max_interruption_rate {
        // The interrupted type is about to be reclaimed: try the next one by priority.
        if let Some(t) = blocked.first(p, Market::Spot, Some(&w.instance_type)) {
            return (
                t.to_owned(),
                Market::Spot,
                format!("interruption rate {rate:.2} is low: the next spot type by priority"),
            );
        }
    }
    if !p.any_allows(Market::OnDemand) {
        // A spot-only pool replaces with spot whatever the rate: the next type, else the same.
        let t = blocked
            .first(p, Market::Spot, Some(&w.instance_type))
            .or_else(|| blocked.first(p, Market::Spot, None))
            .unwrap_or(&w.instance_type);
        return (
            t.to_owned(),
            Market::Spot,
            "the policy allows no on-demand: spot again".to_string(),
        );
    }
    let t = blocked
        .first(p, Market::OnDemand, None)
        .or_else(|| {
            p.instance_types
                .iter()
                .find(|c| c.allows(Market::OnDemand))
                .map(|c| c.instance_type.as_str())
        })
        .unwrap_or(&w.instance_type)
        .to_owned();
    let why = if rate > p.max_interruption_rate {
        format!(
            "interruption rate {rate:.2} is above {}: on-demand",
            p.max_interruption_rate
        )
    } else {
        "no other spot type is usable: on-demand".to_string()
    };
    (t, Market::OnDemand, why)
}

fn scale_up_actions(by_type: &[TypeTarget], live: &[&Worker], mut shortfall: u32) -> Vec<Action> {
    let mut out = Vec::new();
    // Fill the market that is furthest below its share first.
    let mut gaps: Vec<(&TypeTarget, u32)> = by_type
        .iter()
        .map(|t| {
            let have = count(
                live.iter()
                    .filter(|w| !w.is_doomed() && w.market == t.market)
                    .count(),
            );
            (t, t.count.saturating_sub(have))
        })
        .collect();
    for (t, gap) in gaps.iter_mut() {
        let n = (*gap).min(shortfall);
        if n > 0 {
            shortfall -= n;
            out.push(Action::ScaleUp {
                instance_type: t.instance_type.clone(),
                market: t.market,
                count: n,
                zones: t.zones.clone(),
                avoid_zones: t.avoid_zones.clone(),
            });
        }
    }
    if shortfall > 0
        && let Some(t) = by_type.first()
    {
        out.push(Action::ScaleUp {
            instance_type: t.instance_type.clone(),
            market: t.market,
            count: shortfall,
            zones: t.zones.clone(),
            avoid_zones: t.avoid_zones.clone(),
        });
    }
    out
}

/// Idle workers first, then those of a market over its share (so the on-demand base stays),
/// then the lowest utilisation, then the newest (the least work lost and, with per-second
/// billing, nothing saved by keeping them).
fn pick_for_removal(p: &Policy, live: &[&Worker], by_type: &[TypeTarget], n: usize) -> Vec<String> {
    let share = |m: Market| {
        by_type
            .iter()
            .filter(|t| t.market == m)
            .map(|t| t.count)
            .sum::<u32>()
    };
    let have = |m: Market| {
        count(
            live.iter()
                .filter(|w| !w.is_doomed() && w.market == m)
                .count(),
        )
    };
    let over = |m: Market| have(m) > share(m);
    let mut candidates: Vec<&&Worker> = live.iter().filter(|w| !w.is_doomed()).collect();
    candidates.sort_by(|a, b| {
        let util = |w: &Worker| w.utilization_under(p).unwrap_or(0.0);
        let idle = |w: &Worker| util(w) < p.idle_utilization_threshold;
        idle(b)
            .cmp(&idle(a))
            .then(over(b.market).cmp(&over(a.market)))
            .then(util(a).total_cmp(&util(b)))
            .then(b.started_at_ms.cmp(&a.started_at_ms))
            .then(a.id.cmp(&b.id))
    });
    candidates
        .into_iter()
        .take(n)
        .map(|w| w.id.clone())
        .collect()
}

fn record_need(state: &mut PoolState, need: u32, now: i64, window_sec: u64) {
    if state.need_history.last().is_none_or(|(_, n)| *n != need) {
        state.need_history.push((now, need));
    }
    // Keep the last point from before the window: it was in force at the window's start.
    let start = now - secs_to_ms(window_sec);
    while state.need_history.len() > 1 && state.need_history[1].0 <= start {
        state.need_history.remove(0);
    }
    // A long window over a noisy need would grow the stored state without bound. Merging the
    // two oldest points into the earlier time and the higher need never lowers the window's
    // maximum: at worst it holds a scale-down a little longer.
    while state.need_history.len() > MAX_NEED_POINTS {
        let (_, second) = state.need_history.remove(1);
        state.need_history[0].1 = state.need_history[0].1.max(second);
    }
}

/// The most need points a pool keeps for its stabilisation window.
pub const MAX_NEED_POINTS: usize = 256;

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[path = "scale_tests.rs"]
mod tests;
