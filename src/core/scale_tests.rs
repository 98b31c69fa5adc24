//! Each rule of the worker decision with explicit times and hand-computed expectations.

use super::*;
use crate::core::policy::{InstanceChoice, Mode, test_policy};

const T0: i64 = 1_800_000_000_000; // 2027-01-15T08:00:00Z
const MIN: i64 = 60_000;

fn worker(id: &str, market: Market, started: i64) -> Worker {
    Worker {
        id: id.into(),
        instance_type: "g4dn.12xlarge".into(),
        market,
        zone: Some("us-east-1a".into()),
        started_at_ms: started,
        stopped_at_ms: None,
        warning: None,
        utilization: Some(0.9),
        gpu_memory_gib: None,
    }
}

fn workers(n: usize) -> Vec<Worker> {
    (0..n)
        .map(|i| worker(&format!("w{i}"), Market::Spot, T0 - 60 * MIN))
        .collect()
}

fn queue(waiting: f64, running: f64) -> Signals {
    Signals {
        queue_depth: Some(waiting),
        pending_jobs: None,
        running_jobs: Some(running),
        idle_since_ms: Some(T0),
    }
}

fn prices() -> PriceBook {
    let mut b = PriceBook::default();
    b.insert("g4dn.12xlarge", Market::OnDemand, "us-east-1a", 3.912);
    b.insert("g4dn.12xlarge", Market::Spot, "us-east-1a", 1.5);
    b.insert("g5.12xlarge", Market::OnDemand, "us-east-1a", 5.672);
    b.insert("g5.12xlarge", Market::Spot, "us-east-1a", 2.0);
    b
}

struct Case {
    policy: Policy,
    state: PoolState,
    workers: Vec<Worker>,
    signals: Signals,
    incidents: Vec<Incident>,
    now: i64,
}

impl Case {
    fn new(workers: Vec<Worker>, signals: Signals) -> Self {
        let n = u32::try_from(workers.len()).unwrap();
        Case {
            policy: test_policy(),
            state: PoolState {
                desired: Some(n),
                ..PoolState::default()
            },
            workers,
            signals,
            incidents: vec![],
            now: T0,
        }
    }

    fn run(&self) -> Outcome {
        let prices = prices();
        evaluate(&PoolInput {
            policy: &self.policy,
            state: &self.state,
            workers: &self.workers,
            signals: &self.signals,
            incidents: &self.incidents,
            prices: &prices,
            since_ms: T0 - 24 * 60 * MIN,
            now_ms: self.now,
            explain: true,
        })
    }
}

fn fired(o: &Outcome, rule: &str) -> bool {
    o.decision.reasons.iter().any(|r| r.rule == rule)
}

#[test]
fn from_zero_straight_to_what_the_queue_needs_within_max() {
    let c = Case::new(vec![], queue(8.0, 0.0));
    let o = c.run();
    assert_eq!(o.decision.need, 8, "eight 4-GPU jobs on 4-GPU workers");
    assert_eq!(o.decision.desired, 4, "max_workers is 4");
    assert!(fired(&o, "bounds") && fired(&o, "scale_from_zero"));
    assert_eq!(o.events, vec![DecisionEvent::Scaled { from: 0, to: 4 }]);
    let launched: u32 = o
        .decision
        .actions
        .iter()
        .map(|a| match a {
            Action::ScaleUp { count, .. } => *count,
            _ => 0,
        })
        .sum();
    assert_eq!(launched, 4);
}

#[test]
fn one_step_adds_at_most_half_the_capacity() {
    let mut c = Case::new(workers(4), queue(16.0, 4.0));
    c.policy.max_workers = 40;
    let o = c.run();
    assert_eq!(o.decision.need, 20);
    assert_eq!(o.decision.desired, 6);
    assert!(fired(&o, "step_limit"));
    // Asking again before the new workers exist takes no second step.
    let mut again = c;
    again.state = o.state.clone();
    again.now += 1000;
    let o2 = again.run();
    assert_eq!(o2.decision.desired, 6);
    assert!(
        o2.events.is_empty(),
        "no change, nothing to log: {:?}",
        o2.events
    );
    // Once they exist the next step is measured from 6: +3.
    again.workers = workers(6);
    let o3 = again.run();
    assert_eq!(o3.decision.desired, 9);
}

#[test]
fn min_step_applies_to_small_pools() {
    let mut c = Case::new(workers(1), queue(9.0, 1.0));
    c.policy.max_workers = 40;
    c.policy.min_step = 2;
    assert_eq!(
        c.run().decision.desired,
        3,
        "ceil(50% of 1) = 1 < min_step 2"
    );
}

#[test]
fn scale_down_waits_for_the_cooldown() {
    let mut c = Case::new(workers(4), queue(0.0, 2.0));
    c.state.last_scale_down_at_ms = Some(T0 - 4 * MIN);
    // Need has been 2 for longer than the stabilisation window.
    c.state.need_history = vec![(T0 - 10 * MIN, 2)];
    let o = c.run();
    assert_eq!(o.decision.desired, 4, "4 minutes after the last scale-down");
    assert!(fired(&o, "scale_down_cooldown"));
    assert_eq!(o.decision.cooldown_until_ms, Some(T0 + MIN));
    c.now = T0 + MIN;
    let o = c.run();
    assert_eq!(o.decision.desired, 2);
    assert!(fired(&o, "scale_down"));
    let removed = o.decision.actions.iter().find_map(|a| match a {
        Action::ScaleDown { workers } => Some(workers.len()),
        _ => None,
    });
    assert_eq!(removed, Some(2));
}

#[test]
fn stabilisation_uses_the_highest_need_in_the_window() {
    let mut c = Case::new(workers(4), queue(0.0, 1.0));
    c.state.need_history = vec![(T0 - 10 * MIN, 4), (T0 - 2 * MIN, 3)];
    let o = c.run();
    assert_eq!(o.decision.desired, 4, "need was 4 until 2 minutes ago");
    assert!(fired(&o, "stabilization"));
    c.now = T0 + 4 * MIN; // the 4 fell out of the window 3 minutes after T0
    c.state = o.state;
    let o = c.run();
    assert_eq!(o.decision.desired, 3, "highest in the last 5 minutes is 3");
}

#[test]
fn idle_ten_minutes_goes_to_min_nine_minutes_holds() {
    let mut c = Case::new(workers(4), queue(0.0, 0.0));
    for w in &mut c.workers {
        w.utilization = Some(0.02);
    }
    c.signals.idle_since_ms = Some(T0 - 9 * MIN);
    let o = c.run();
    assert_eq!(o.decision.desired, 4);
    assert!(fired(&o, "idle_wait"));
    assert_eq!(o.decision.next_evaluation_at_ms, T0 + 30_000.min(MIN));
    c.signals.idle_since_ms = Some(T0 - 10 * MIN);
    let o = c.run();
    assert_eq!(o.decision.desired, 0);
    assert!(fired(&o, "idle_to_zero"));
    c.policy.min_workers = 1;
    assert_eq!(c.run().decision.desired, 1, "idle goes to min_workers");
}

#[test]
fn a_busy_gpu_is_not_idle() {
    let mut c = Case::new(workers(2), queue(0.0, 0.0));
    c.signals.idle_since_ms = Some(T0 - 30 * MIN);
    c.workers[0].utilization = Some(0.5);
    c.workers[1].utilization = Some(0.0);
    c.state.need_history = vec![(T0 - 30 * MIN, 0)];
    let o = c.run();
    assert!(!fired(&o, "idle_to_zero"));
    // The busy pool scales down by need instead, and picks the idle worker.
    assert_eq!(o.decision.desired, 0);
    let Some(Action::ScaleDown { workers }) = o.decision.actions.last() else {
        panic!("{:?}", o.decision.actions)
    };
    assert_eq!(workers[0], "w1", "the idle worker goes first");
}

#[test]
fn never_below_what_running_jobs_use() {
    let mut c = Case::new(workers(4), queue(0.0, 3.0));
    c.state.need_history = vec![(T0 - 30 * MIN, 3)];
    c.policy.min_workers = 0;
    let o = c.run();
    assert_eq!(o.decision.desired, 3);
    // Even an explicit budget cap does not terminate workers that run jobs.
    c.policy.daily_budget = Some(0.01);
    c.policy.budget_action = BudgetAction::Cap;
    let o = c.run();
    assert_eq!(o.decision.desired, 3);
    assert!(o.decision.budget.as_ref().unwrap().exceeded);
}

#[test]
fn utilisation_inside_the_tolerance_holds() {
    let mut c = Case::new(workers(4), Signals::default());
    c.policy.mode = Mode::Utilization {
        target_utilization: 0.7,
        tolerance: 0.1,
    };
    c.policy.max_workers = 10;
    for w in &mut c.workers {
        w.utilization = Some(0.75); // ratio 1.07
    }
    let o = c.run();
    assert_eq!(o.decision.desired, 4);
    assert!(fired(&o, "within_tolerance"));
    for w in &mut c.workers {
        w.utilization = Some(0.91); // ratio 1.3: ceil(4 × 1.3) = 6
    }
    let o = c.run();
    assert_eq!(o.decision.need, 6);
    assert_eq!(o.decision.desired, 6);
}

#[test]
fn elastic_never_gets_a_partial_gang() {
    let mut c = Case::new(vec![], queue(1.0, 0.0));
    c.policy.mode = Mode::Elastic {
        min_nodes: 4,
        max_nodes: 8,
        node_step: 2,
    };
    c.policy.max_workers = 7;
    let o = c.run();
    assert_eq!(o.decision.desired, 6, "7 allowed, gangs of 4 + 2k: 6");
    assert!(fired(&o, "whole_gang"));
    // A max below the gang size means no gang at all, not part of one.
    c.policy.max_workers = 3;
    let o = c.run();
    assert_eq!(o.decision.desired, 0);
    assert!(fired(&o, "gang_does_not_fit"));
    // A step limit never leaves it short of the gang: from 2 workers straight to 4.
    c.policy.max_workers = 8;
    c.workers = workers(2);
    c.state.desired = Some(2);
    let o = c.run();
    assert!(
        o.decision.desired >= 4 && (o.decision.desired - 4).is_multiple_of(2),
        "{}",
        o.decision.desired
    );
}

#[test]
fn spot_split_follows_mixed_instances_policy() {
    let mut p = test_policy();
    p.on_demand_base = 1;
    p.spot_percentage = 80;
    // 10 workers: base 1 on-demand; 9 above it, 20% on-demand = 1.8, rounded up to 2.
    assert_eq!(market_split(&p, 10), (3, 7));
    assert_eq!(market_split(&p, 1), (1, 0));
    p.on_demand_base = 0;
    assert_eq!(market_split(&p, 5), (1, 4));
    assert_eq!(market_split(&p, 0), (0, 0));
    let mut c = Case::new(vec![], queue(5.0, 0.0));
    c.policy = p;
    c.policy.max_workers = 5;
    let o = c.run();
    assert_eq!(
        o.decision
            .by_type
            .iter()
            .map(|t| (t.market, t.count))
            .collect::<Vec<_>>(),
        vec![(Market::OnDemand, 1), (Market::Spot, 4)]
    );
    assert_eq!(o.decision.cost_per_hour, 3.91 + 4.0 * 1.5);
}

#[test]
fn interruption_gets_a_checkpoint_and_a_replacement() {
    let mut c = Case::new(workers(4), queue(0.0, 4.0));
    c.workers[2].warning = Some(Warning {
        kind: WarningKind::InterruptionWarning,
        at_ms: T0 - 10_000,
        action_at_ms: Some(T0 + 110_000),
    });
    c.incidents = vec![Incident {
        kind: IncidentKind::Interruption,
        instance_type: "g4dn.12xlarge".into(),
        zone: Some("us-east-1a".into()),
        at_ms: T0 - 10_000,
    }];
    let o = c.run();
    assert_eq!(o.decision.desired, 4);
    assert!(o.decision.actions.contains(&Action::Checkpoint {
        worker: "w2".into(),
        deadline: Some(rfc3339(T0 + 110_000)),
    }));
    // One interruption among four spot workers: 0.25 is above the 0.2 default.
    let replace = |o: &Outcome| {
        o.decision.actions.iter().find_map(|a| match a {
            Action::Replace {
                instance_type,
                market,
                ..
            } => Some((instance_type.clone(), *market)),
            _ => None,
        })
    };
    assert_eq!(
        replace(&o),
        Some(("g4dn.12xlarge".to_string(), Market::OnDemand))
    );
    c.policy.max_interruption_rate = 0.5;
    let o = c.run();
    assert_eq!(
        replace(&o),
        Some(("g5.12xlarge".to_string(), Market::Spot)),
        "the next spot type by priority"
    );
    assert_eq!(o.decision.next_evaluation_at_ms, T0 + 30_000);
}

#[test]
fn capacity_errors_move_to_the_next_type() {
    let mut c = Case::new(vec![], queue(2.0, 0.0));
    c.policy.spot_percentage = 100;
    c.incidents = vec![Incident {
        kind: IncidentKind::CapacityError,
        instance_type: "g4dn.12xlarge".into(),
        zone: None,
        at_ms: T0 - MIN,
    }];
    let o = c.run();
    assert_eq!(o.decision.by_type[0].instance_type, "g5.12xlarge");
    c.now = T0 + 10 * MIN; // backoff over
    assert_eq!(c.run().decision.by_type[0].instance_type, "g4dn.12xlarge");
}

#[test]
fn spot_falls_back_to_on_demand_when_no_spot_type_is_usable() {
    let mut c = Case::new(vec![], queue(2.0, 0.0));
    c.policy.instance_types = vec![InstanceChoice {
        instance_type: "g4dn.12xlarge".into(),
        markets: vec![Market::Spot, Market::OnDemand],
    }];
    c.incidents = vec![Incident {
        kind: IncidentKind::Interruption,
        instance_type: "g4dn.12xlarge".into(),
        zone: None,
        at_ms: T0 - MIN,
    }];
    let o = c.run();
    assert!(fired(&o, "spot_fallback"));
    assert_eq!(o.decision.by_type.len(), 1);
    assert_eq!(o.decision.by_type[0].market, Market::OnDemand);
}

#[test]
fn budget_cap_limits_scale_up_and_alarm_fires_once_a_day() {
    let mut c = Case::new(vec![], queue(4.0, 0.0));
    c.policy.spot_percentage = 0;
    // 08:00 UTC: 16 hours left; one on-demand worker is $3.912/h = $62.59 for the day.
    c.policy.daily_budget = Some(130.0);
    c.policy.budget_action = BudgetAction::Cap;
    let o = c.run();
    assert_eq!(
        o.decision.desired, 2,
        "two workers ($125.18) fit, three do not"
    );
    assert!(fired(&o, "budget_cap"));
    c.policy.budget_action = BudgetAction::Alarm;
    let o = c.run();
    assert_eq!(o.decision.desired, 4);
    assert!(
        o.events
            .iter()
            .any(|e| matches!(e, DecisionEvent::BudgetAlarm { .. }))
    );
    c.state = o.state;
    let o = c.run();
    assert!(
        !o.events
            .iter()
            .any(|e| matches!(e, DecisionEvent::BudgetAlarm { .. })),
        "once per day"
    );
}

#[test]
fn the_same_input_gives_the_same_answer() {
    let c = Case::new(workers(3), queue(7.0, 3.0));
    let (a, b) = (c.run(), c.run());
    assert_eq!(a.decision, b.decision);
    assert_eq!(a.state, b.state);
}

#[test]
fn elastic_grows_by_whole_gangs_even_when_a_step_is_smaller() {
    let mut c = Case::new(workers(4), queue(1.0, 0.0));
    c.policy.mode = Mode::Elastic {
        min_nodes: 4,
        max_nodes: 16,
        node_step: 4,
    };
    c.policy.max_workers = 16;
    // 50% of 4 is 2, less than a gang of 4: round up to the next whole gang, not down to 4.
    let o = c.run();
    assert_eq!(o.decision.desired, 8);
}

#[test]
fn a_budget_cap_never_starts_a_partial_gang_nor_stops_workers() {
    let mut c = Case::new(vec![], queue(1.0, 0.0));
    c.policy.mode = Mode::Elastic {
        min_nodes: 4,
        max_nodes: 8,
        node_step: 4,
    };
    c.policy.max_workers = 8;
    c.policy.spot_percentage = 0;
    c.policy.budget_action = BudgetAction::Cap;
    // 16 hours left at $3.912/h: two workers ($125) fit in $130, a gang of four does not.
    c.policy.daily_budget = Some(130.0);
    assert_eq!(c.run().decision.desired, 0, "no partial gang");
    // Seven live workers (a gang of eight with one gone), eight unaffordable: hold seven.
    c.workers = workers(7);
    c.state.desired = Some(7);
    c.policy.daily_budget = Some(7.0 * 3.912 * 16.0 + 1.0);
    let o = c.run();
    assert_eq!(o.decision.desired, 7, "{:?}", o.decision.reasons);
    assert!(
        !o.decision
            .actions
            .iter()
            .any(|a| matches!(a, Action::ScaleDown { .. }))
    );
}

#[test]
fn a_spot_only_pool_keeps_asking_for_spot_after_an_interruption() {
    let mut c = Case::new(workers(2), queue(0.0, 2.0));
    c.policy.instance_types = vec![InstanceChoice {
        instance_type: "g4dn.12xlarge".into(),
        markets: vec![Market::Spot],
    }];
    c.workers[1].warning = Some(Warning {
        kind: WarningKind::InterruptionWarning,
        at_ms: T0 - 10_000,
        action_at_ms: Some(T0 + 110_000),
    });
    c.incidents = vec![Incident {
        kind: IncidentKind::Interruption,
        instance_type: "g4dn.12xlarge".into(),
        zone: None,
        at_ms: T0 - 10_000,
    }];
    let o = c.run();
    assert_eq!(o.decision.by_type.len(), 1);
    assert_eq!(o.decision.by_type[0].market, Market::Spot);
    let replace = o.decision.actions.iter().find_map(|a| match a {
        Action::Replace { market, .. } => Some(*market),
        _ => None,
    });
    assert_eq!(replace, Some(Market::Spot));
}

#[test]
fn a_replacement_is_logged_once_and_its_action_repeats() {
    let mut c = Case::new(workers(2), queue(0.0, 2.0));
    c.policy.max_interruption_rate = 1.0;
    c.workers[1].warning = Some(Warning {
        kind: WarningKind::InterruptionWarning,
        at_ms: T0 - 10_000,
        action_at_ms: Some(T0 + 110_000),
    });
    let o = c.run();
    assert_eq!(o.events.len(), 1, "{:?}", o.events);
    c.state = o.state;
    c.now += 1000;
    let again = c.run();
    assert!(again.events.is_empty());
    assert_eq!(again.state, c.state, "nothing new to store");
    assert!(
        again
            .decision
            .actions
            .iter()
            .any(|a| matches!(a, Action::Replace { .. }))
    );
}

#[test]
fn zone_capacity_errors_are_avoided_when_any_zone_is_allowed() {
    let mut c = Case::new(vec![], queue(2.0, 0.0));
    c.incidents = vec![Incident {
        kind: IncidentKind::CapacityError,
        instance_type: "g4dn.12xlarge".into(),
        zone: Some("us-east-1b".into()),
        at_ms: T0 - MIN,
    }];
    let o = c.run();
    assert_eq!(o.decision.by_type[0].instance_type, "g4dn.12xlarge");
    assert_eq!(
        o.decision.by_type[0].avoid_zones,
        vec!["us-east-1b".to_string()]
    );
    assert!(o.decision.actions.iter().all(|a| match a {
        Action::ScaleUp { avoid_zones, .. } => avoid_zones == &["us-east-1b".to_string()],
        _ => true,
    }));
}

#[test]
fn workers_that_report_nothing_are_not_idled() {
    let mut c = Case::new(workers(3), Signals::default());
    for w in &mut c.workers {
        w.utilization = None;
    }
    c.signals.idle_since_ms = Some(T0 - 60 * MIN);
    let o = c.run();
    assert_eq!(o.decision.desired, 3);
    assert!(fired(&o, "no_signal"));
}

#[test]
fn stabilisation_wakes_when_the_high_need_leaves_the_window() {
    let mut c = Case::new(workers(8), queue(0.0, 2.0));
    c.policy.max_workers = 40;
    // Need 8 until 50 s ago, then 2: the 8 leaves the 300 s window in 250 s.
    c.state.need_history = vec![(T0 - 400_000, 8), (T0 - 50_000, 2)];
    c.state.desired = Some(8);
    let o = c.run();
    assert!(fired(&o, "stabilization"));
    assert_eq!(
        o.decision.next_evaluation_at_ms,
        T0 + 30_000,
        "capped at the interval"
    );
    c.now = T0 + 200_000;
    let o = c.run();
    assert_eq!(o.decision.desired, 8);
    assert_eq!(o.decision.next_evaluation_at_ms, T0 + 230_000);
}

#[test]
fn a_late_decision_never_steps_behind_the_state() {
    let mut c = Case::new(workers(4), queue(16.0, 4.0));
    c.policy.max_workers = 40;
    c.state.last_scale_up_at_ms = Some(T0 + 5_000);
    c.policy.scale_up_cooldown_sec = 0;
    let o = c.run();
    assert!(o.state.need_history.iter().all(|(at, _)| *at >= T0 + 5_000));
    assert_eq!(o.state.last_scale_up_at_ms, Some(T0 + 5_000));
}

#[test]
fn need_history_stays_bounded_and_never_lowers_the_window_maximum() {
    let mut state = PoolState::default();
    for i in 0..1000u32 {
        // A noisy need: 9 once early, small values after.
        let need = if i == 3 { 9 } else { i % 4 };
        record_need(&mut state, need, T0 + i64::from(i) * 1000, 7 * 24 * 3600);
    }
    assert!(state.need_history.len() <= MAX_NEED_POINTS);
    assert_eq!(state.need_history.iter().map(|(_, n)| *n).max(), Some(9));
}
