//! The stages of one pool decision before markets and actions: what the pool has, what the
//! signals need, the bounds, the step from the previous target (hold, idle, up, down), the
//! running floor, whole gangs and the daily budget. Each takes the policy and a small value
//! from the stage before and says which rules fired.

use super::rule::{Rule, Rules};
use super::{BudgetStatus, PoolInput, PoolState, Worker, count};
use crate::core::catalog::Market;
use crate::core::cost::{hours_left_today, round_cents, spend_today};
use crate::core::policy::{BudgetAction, Mode, Policy, secs_to_ms};

/// The pool as this decision finds it.
pub(super) struct Pool<'a> {
    /// The decision's time: never behind what the state already recorded.
    pub now: i64,
    pub live: Vec<&'a Worker>,
    /// Live workers with an interruption warning: about to go.
    pub doomed: Vec<&'a Worker>,
    pub current: u32,
    /// Live workers that will stay.
    pub capacity: u32,
    /// The target before this decision.
    pub previous: u32,
    pub waiting: f64,
    pub running: f64,
    policy: &'a Policy,
}

impl<'a> Pool<'a> {
    pub fn of(input: &PoolInput<'a>) -> Self {
        let p = input.policy;
        // A decision that read the clock before waiting for the pool's lock may run after a
        // later one: never step behind what the state already recorded.
        let now = input.now_ms.max(input.state.latest_ms());
        let live: Vec<&Worker> = input.workers.iter().filter(|w| w.is_live()).collect();
        let doomed: Vec<&Worker> = live.iter().copied().filter(|w| w.is_doomed()).collect();
        let current = count(live.len());
        Pool {
            now,
            current,
            capacity: current - count(doomed.len()),
            previous: input.state.desired.unwrap_or(current),
            waiting: input.signals.waiting().unwrap_or(0.0),
            running: input.signals.running_jobs.unwrap_or(0.0),
            live,
            doomed,
            policy: p,
        }
    }

    /// Utilisation of each staying worker that reports one. Read in place rather than
    /// collected: a replay evaluates a pool every simulated minute.
    pub fn utils(&self) -> impl Iterator<Item = f64> + '_ {
        self.live
            .iter()
            .filter(|w| !w.is_doomed())
            .filter_map(|w| w.utilization_under(self.policy))
    }

    fn mean_util(&self) -> Option<f64> {
        let n = self.utils().count();
        (n > 0).then(|| self.utils().sum::<f64>() / n as f64)
    }
}

/// Workers the signals ask for, and the floor that running jobs hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Need {
    pub need: u32,
    pub floor: u32,
}

/// Stage 1: what the signals ask for under the policy's mode.
pub(super) fn need(p: &Policy, rules: &mut Rules, pool: &Pool<'_>) -> Need {
    let (waiting, running, capacity) = (pool.waiting, pool.running, pool.capacity);
    let (need, floor) = match p.mode {
        Mode::Queue { gpus_per_job } => {
            let need = p.workers_for_jobs(running + waiting);
            let floor = p.workers_for_jobs(running);
            rules.fire(
                Rule::Queue,
                || format!("{running} running + {waiting} waiting jobs of {gpus_per_job} GPUs on {}-GPU workers need {need} workers", p.gpus_per_worker),
                &[("running_jobs", running), ("waiting_jobs", waiting), ("need", need.into())],
            );
            (need, floor)
        }
        Mode::Utilization {
            target_utilization,
            tolerance,
        } => {
            let Some(util) = pool.mean_util() else {
                let need = if capacity == 0 && waiting > 0.0 {
                    1
                } else {
                    capacity
                };
                rules.fire(
                    Rule::NoUtilizationSignal,
                    || format!("no fresh GPU utilisation: holding {need}"),
                    &[("need", need.into())],
                );
                return Need { need, floor: 0 };
            };
            let ratio = util / target_utilization;
            let need = if (ratio - 1.0).abs() <= tolerance {
                rules.fire(Rule::WithinTolerance, || format!("utilisation {util:.2} is within {tolerance} of the target {target_utilization}"), &[("utilization", util), ("target", target_utilization)]);
                capacity
            } else {
                let n = (f64::from(capacity) * ratio).ceil().max(0.0) as u32;
                rules.fire(Rule::Utilization, || format!("{capacity} workers at {util:.2} against a target of {target_utilization} need {n}"), &[("utilization", util), ("target", target_utilization), ("need", n.into())]);
                n
            };
            (need, 0)
        }
        Mode::Elastic {
            min_nodes,
            max_nodes,
            ..
        } => {
            if waiting > 0.0 || running > 0.0 {
                rules.fire(
                    Rule::Elastic,
                    || {
                        format!(
                            "the job is active: wants up to {max_nodes} nodes (at least {min_nodes})"
                        )
                    },
                    &[
                        ("min_nodes", min_nodes.into()),
                        ("max_nodes", max_nodes.into()),
                    ],
                );
                (max_nodes, if running > 0.0 { min_nodes } else { 0 })
            } else {
                rules.fire(Rule::Elastic, || "no job is waiting or running".into(), &[]);
                (0, 0)
            }
        }
    };
    Need { need, floor }
}

/// Stage 2: the need held within `min_workers..=max_workers`.
pub(super) fn bounds(p: &Policy, rules: &mut Rules, need: u32) -> u32 {
    let bounded = need.clamp(p.min_workers, p.max_workers.max(p.min_workers));
    if bounded != need {
        rules.fire(
            Rule::Bounds,
            || {
                format!(
                    "need {need} held within min_workers {} and max_workers {}",
                    p.min_workers, p.max_workers
                )
            },
            &[
                ("need", need.into()),
                ("min_workers", p.min_workers.into()),
                ("max_workers", p.max_workers.into()),
            ],
        );
    }
    bounded
}

/// The target after the step from the previous one, and the times that may change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Step {
    pub target: u32,
    /// The end of the cooldown that holds the target, when one does.
    pub cooldown_until: Option<i64>,
    /// Moments at which asking again may give another answer.
    pub wake_at: Vec<i64>,
}

impl Step {
    fn to(target: u32) -> Self {
        Step {
            target,
            cooldown_until: None,
            wake_at: Vec::new(),
        }
    }
}

/// What the step stages read besides the policy: the pool, its state after recording this
/// need, and the bounded need.
pub(super) struct StepInput<'s> {
    pub input: &'s PoolInput<'s>,
    pub state: &'s PoolState,
    pub now: i64,
    pub previous: u32,
    pub capacity: u32,
    pub bounded: u32,
    pub floor: u32,
}

impl StepInput<'_> {
    pub fn down_blocked(&self) -> Option<i64> {
        let p = self.input.policy;
        self.input
            .state
            .last_scale_down_at_ms
            .map(|t| t + secs_to_ms(p.scale_down_cooldown_sec))
            .filter(|end| self.now < *end)
    }

    pub fn up_cooldown_end(&self) -> Option<i64> {
        let p = self.input.policy;
        self.input
            .state
            .last_scale_up_at_ms
            .map(|t| t + secs_to_ms(p.scale_up_cooldown_sec))
    }

    fn down_cooldown(&self, rules: &mut Rules, end: i64, idle: bool) -> Step {
        let p = self.input.policy;
        rules.fire(
            Rule::ScaleDownCooldown,
            || {
                if idle {
                    format!(
                        "idle, but the last scale-down was under {}s ago",
                        p.scale_down_cooldown_sec
                    )
                } else {
                    format!(
                        "the last scale-down was under {}s ago",
                        p.scale_down_cooldown_sec
                    )
                }
            },
            &[("scale_down_cooldown_sec", p.scale_down_cooldown_sec as f64)],
        );
        Step {
            target: self.previous,
            cooldown_until: Some(end),
            wake_at: Vec::new(),
        }
    }
}

/// Stage 3: hold, idle, up or down from the previous target.
pub(super) fn step(s: &StepInput<'_>, rules: &mut Rules, pool: &Pool<'_>) -> Step {
    let p = s.input.policy;
    let signals = s.input.signals;
    let busy = pool.waiting > 0.0
        || pool.running > 0.0
        || pool.utils().any(|u| u >= p.idle_utilization_threshold);
    // Workers that report nothing (an exporter down, say) are not idle: nothing is known.
    let silent = s.capacity > 0
        && pool.utils().next().is_none()
        && signals.queue_depth.is_none()
        && signals.pending_jobs.is_none()
        && signals.running_jobs.is_none();
    let (previous, bounded) = (s.previous, s.bounded);
    if previous < p.min_workers || previous > p.max_workers {
        let target = previous.clamp(p.min_workers, p.max_workers.max(p.min_workers));
        rules.fire(
            Rule::Bounds,
            || {
                format!(
                    "the previous target {previous} is outside {}..={}",
                    p.min_workers, p.max_workers
                )
            },
            &[("previous", previous.into())],
        );
        Step::to(target)
    } else if silent && bounded <= previous {
        let capacity = s.capacity;
        rules.fire(
            Rule::NoSignal,
            || format!("{capacity} workers and no fresh signal of any kind: holding {previous}"),
            &[("capacity", capacity.into())],
        );
        Step::to(previous)
    } else if !busy && bounded <= previous && previous > p.min_workers {
        idle(s, rules)
    } else if bounded > previous {
        up(s, rules)
    } else if bounded < previous {
        down(s, rules)
    } else {
        Step::to(previous)
    }
}

/// No work at all: keep warm workers until the pool has been idle long enough.
fn idle(s: &StepInput<'_>, rules: &mut Rules) -> Step {
    let (p, input) = (s.input.policy, s.input);
    let idle_since = [
        input.signals.idle_since_ms,
        input.state.last_scale_up_at_ms,
        Some(input.since_ms),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(input.since_ms);
    let idle_for = (s.now - idle_since).max(0);
    let needed = secs_to_ms(p.idle_to_zero_after_sec);
    if idle_for < needed {
        rules.fire(
            Rule::IdleWait,
            || {
                format!(
                    "idle for {}s of the {}s before scaling to min_workers",
                    idle_for / 1000,
                    p.idle_to_zero_after_sec
                )
            },
            &[
                ("idle_sec", (idle_for / 1000) as f64),
                ("idle_to_zero_after_sec", p.idle_to_zero_after_sec as f64),
            ],
        );
        let mut step = Step::to(s.previous);
        step.wake_at.push(idle_since + needed);
        step
    } else if let Some(end) = s.down_blocked() {
        s.down_cooldown(rules, end, true)
    } else {
        let target = p.min_workers.max(s.floor);
        rules.fire(
            Rule::IdleToZero,
            || {
                format!(
                    "no work and GPU utilisation under {} for {}s: down to {}",
                    p.idle_utilization_threshold,
                    idle_for / 1000,
                    target
                )
            },
            &[
                ("idle_sec", (idle_for / 1000) as f64),
                ("min_workers", p.min_workers.into()),
            ],
        );
        Step::to(target)
    }
}

/// The need is above the previous target: up, by at most a step, unless cooling down.
fn up(s: &StepInput<'_>, rules: &mut Rules) -> Step {
    let p = s.input.policy;
    let (previous, bounded, capacity) = (s.previous, s.bounded, s.capacity);
    if let Some(end) = s.up_cooldown_end().filter(|end| s.now < *end) {
        rules.fire(
            Rule::ScaleUpCooldown,
            || {
                format!(
                    "the last scale-up was under {}s ago",
                    p.scale_up_cooldown_sec
                )
            },
            &[("scale_up_cooldown_sec", p.scale_up_cooldown_sec as f64)],
        );
        return Step {
            target: previous,
            cooldown_until: Some(end),
            wake_at: Vec::new(),
        };
    }
    if capacity == 0 {
        rules.fire(
            Rule::ScaleFromZero,
            || format!("no capacity: straight to the {bounded} workers needed"),
            &[("need", bounded.into())],
        );
        return Step::to(bounded);
    }
    let step = p
        .min_step
        .max(((f64::from(capacity) * p.max_step_percent / 100.0).ceil()) as u32);
    let limit = capacity.saturating_add(step);
    let target = bounded.min(limit).max(previous);
    if bounded > limit {
        rules.fire(
            Rule::StepLimit,
            || format!("{capacity} workers may grow by at most {step} per decision ({}%, min_step {}): {target} of the {bounded} needed", p.max_step_percent, p.min_step),
            &[("capacity", capacity.into()), ("step", step.into()), ("need", bounded.into())],
        );
    } else {
        rules.fire(
            Rule::ScaleUp,
            || format!("need {bounded} workers, have {capacity}"),
            &[("need", bounded.into()), ("capacity", capacity.into())],
        );
    }
    Step::to(target)
}

/// The need is below the previous target: down to the highest need within the stabilisation
/// window, unless that holds the target or a cooldown does.
fn down(s: &StepInput<'_>, rules: &mut Rules) -> Step {
    let p = s.input.policy;
    let (previous, bounded, floor) = (s.previous, s.bounded, s.floor);
    let window_start = s.now - secs_to_ms(p.stabilization_window_sec);
    let h = &s.state.need_history;
    // The point in force at the window's start counts, as do all points inside it.
    let highest = h
        .iter()
        .enumerate()
        .filter(|(i, (at, _))| {
            *at >= window_start || h.get(i + 1).is_none_or(|n| n.0 > window_start)
        })
        .map(|(_, (_, n))| *n)
        .max()
        .unwrap_or(bounded);
    let candidate = highest.max(floor).max(p.min_workers);
    if candidate >= previous {
        rules.fire(
            Rule::Stabilization,
            || {
                format!(
                    "need is {bounded}, but it was {highest} within the last {}s",
                    p.stabilization_window_sec
                )
            },
            &[
                ("need", bounded.into()),
                ("highest_in_window", highest.into()),
            ],
        );
        // A point holds the target while it is in force inside the window: until the next
        // point's time plus the window.
        let mut step = Step::to(previous);
        if let Some(leaves) = (0..h.len())
            .filter(|&i| h[i].1 >= previous)
            .filter_map(|i| h.get(i + 1).map(|next| next.0))
            .max()
        {
            step.wake_at
                .push(leaves + secs_to_ms(p.stabilization_window_sec));
        }
        step
    } else if let Some(end) = s.down_blocked() {
        s.down_cooldown(rules, end, false)
    } else {
        rules.fire(
            Rule::ScaleDown,
            || format!("need {bounded} (highest in window {highest}), running jobs need {floor}"),
            &[
                ("need", bounded.into()),
                ("highest_in_window", highest.into()),
                ("running_floor", floor.into()),
            ],
        );
        Step::to(candidate)
    }
}

/// Stage 4: running jobs keep the workers they run on, within `max_workers`.
pub(super) fn running_floor(p: &Policy, rules: &mut Rules, floor: u32, target: u32) -> u32 {
    if floor > target && target < p.max_workers {
        rules.fire(
            Rule::RunningFloor,
            || format!("running jobs use {floor} workers"),
            &[("running_floor", floor.into())],
        );
        floor.min(p.max_workers)
    } else {
        target
    }
}

/// The worker counts an elastic job can run on: 0, or `min_nodes + k × step` up to
/// `max_nodes` (the policy's `max_nodes` within `max_workers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Gang {
    pub min_nodes: u32,
    pub max_nodes: u32,
    pub step: u32,
}

impl Gang {
    /// The policy's gang, for elastic pools.
    pub fn of(p: &Policy) -> Option<Gang> {
        match p.mode {
            Mode::Elastic {
                min_nodes,
                max_nodes,
                node_step,
            } => Some(Gang {
                min_nodes,
                max_nodes: max_nodes.min(p.max_workers),
                step: node_step.max(1),
            }),
            _ => None,
        }
    }

    fn fits(&self) -> bool {
        self.min_nodes <= self.max_nodes
    }

    /// The largest whole count at or below `n` (0 when none is).
    pub fn round_down(&self, n: u32) -> u32 {
        if n < self.min_nodes || !self.fits() {
            return 0;
        }
        self.min_nodes + (n.min(self.max_nodes) - self.min_nodes) / self.step * self.step
    }

    /// The smallest whole count at or above `n`, within the largest allowed (0 stays 0).
    pub fn round_up(&self, n: u32) -> u32 {
        if n == 0 || !self.fits() {
            return 0;
        }
        let largest = self.round_down(self.max_nodes);
        if n <= self.min_nodes {
            self.min_nodes
        } else {
            (self.min_nodes + (n - self.min_nodes).div_ceil(self.step) * self.step).min(largest)
        }
    }
}

/// Stage 5: whole gangs only. Rounding up, so that a step smaller than a gang still adds one
/// (a partial gang is useless, and rounding down would hold the pool where it is for good).
pub(super) fn whole_gangs(rules: &mut Rules, gang: Gang, target: u32, previous: u32) -> u32 {
    let Gang {
        min_nodes,
        max_nodes,
        step,
    } = gang;
    if target == 0 {
        return 0;
    }
    if !gang.fits() {
        rules.fire(
            Rule::GangDoesNotFit,
            || {
                format!(
                    "the gang needs {min_nodes} nodes but at most {max_nodes} are allowed: none"
                )
            },
            &[
                ("min_nodes", min_nodes.into()),
                ("max_nodes", max_nodes.into()),
            ],
        );
        return 0;
    }
    let whole = gang.round_up(target);
    if whole != target {
        rules.fire(
            Rule::WholeGang,
            || {
                format!(
                    "{target} is not a whole gang (min_nodes {min_nodes}, node_step {step}): {whole}"
                )
            },
            &[
                ("target", target.into()),
                ("whole", whole.into()),
                ("previous", previous.into()),
            ],
        );
    }
    whole
}

/// The target after the budget, the day's figures, and the projection when it is over.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Budgeted {
    pub target: u32,
    pub status: Option<BudgetStatus>,
    /// `(projected, daily budget)` when the projection is over the budget.
    pub over: Option<(f64, f64)>,
}

/// Stage 6: the day's spend so far plus the target's cost until midnight against the daily
/// budget; with `budget_action: cap`, growth is cut to what is affordable.
pub(super) fn budget(
    input: &PoolInput<'_>,
    rules: &mut Rules,
    now: i64,
    capacity: u32,
    floor: u32,
    mut target: u32,
) -> Budgeted {
    let p = input.policy;
    let Some(daily) = p.daily_budget else {
        return Budgeted {
            target,
            status: None,
            over: None,
        };
    };
    let spent: f64 = input
        .workers
        .iter()
        .map(|w| {
            let price = input
                .prices
                .price(&w.instance_type, w.market, w.zone.as_deref())
                .unwrap_or(0.0);
            spend_today(price, w.started_at_ms, w.stopped_at_ms.unwrap_or(now), now)
        })
        .sum();
    let hours_left = hours_left_today(now);
    let projected = |n: u32| spent + hourly_cost(input, n) * hours_left;
    let mut exceeded = projected(target) > daily;
    if exceeded && p.budget_action == BudgetAction::Cap && target > capacity {
        // Bounds win over the cap: min_workers is a deliberate floor, like running jobs.
        let floor_n = capacity.max(floor).max(p.min_workers).min(target);
        let affordable = (floor_n..=target)
            .rev()
            .find(|n| projected(*n) <= daily)
            .unwrap_or(floor_n);
        if affordable < target {
            rules.fire(
                Rule::BudgetCap,
                || format!("{target} workers would spend ${:.2} today against a budget of ${daily:.2}: capped at {affordable}", projected(target)),
                &[("projected", projected(target)), ("daily_budget", daily)],
            );
            // The largest whole gang within what is affordable, else hold the workers that
            // exist: a cap never terminates, and never starts a partial gang.
            target = match Gang::of(p) {
                Some(gang) => gang.round_down(affordable).max(capacity),
                None => affordable,
            };
        }
        exceeded = projected(target) > daily;
    }
    if exceeded {
        rules.fire(
            Rule::BudgetExceeded,
            || {
                format!(
                    "projected spend today ${:.2} is over the daily budget ${daily:.2}",
                    projected(target)
                )
            },
            &[
                ("projected", projected(target)),
                ("daily_budget", daily),
                ("spent_today", spent),
            ],
        );
    }
    Budgeted {
        target,
        status: Some(BudgetStatus {
            daily_budget: daily,
            spent_today: round_cents(spent),
            projected_today: round_cents(projected(target)),
            action: p.budget_action,
            exceeded,
        }),
        over: exceeded.then(|| (projected(target), daily)),
    }
}

/// Dollars per hour of `n` workers split across the markets, at the first allowed type's
/// price in each.
fn hourly_cost(input: &PoolInput<'_>, n: u32) -> f64 {
    let p = input.policy;
    let (od, spot) = super::market_split(p, n);
    let price = |m: Market| {
        p.instance_types
            .iter()
            .find(|c| c.allows(m))
            .and_then(|c| input.prices.price(&c.instance_type, m, None))
            .unwrap_or(0.0)
    };
    f64::from(od) * price(Market::OnDemand) + f64::from(spot) * price(Market::Spot)
}

#[cfg(test)]
#[path = "stages_tests.rs"]
mod tests;
