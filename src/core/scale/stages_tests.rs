//! Each stage of the pool decision on its own, with hand-computed expectations.

use super::*;
use crate::core::cost::PriceBook;
use crate::core::policy::test_policy;
use crate::core::scale::{Signals, Worker};

const T0: i64 = 1_800_000_000_000; // 2027-01-15T08:00:00Z
const MIN: i64 = 60_000;

fn worker(id: &str, util: f64) -> Worker {
    Worker {
        id: id.into(),
        instance_type: "g4dn.12xlarge".into(),
        market: Market::Spot,
        zone: Some("us-east-1a".into()),
        started_at_ms: T0 - 60 * MIN,
        stopped_at_ms: None,
        warning: None,
        utilization: Some(util),
        gpu_memory_gib: None,
    }
}

fn prices() -> PriceBook {
    let mut b = PriceBook::default();
    b.insert("g4dn.12xlarge", Market::OnDemand, "us-east-1a", 4.0);
    b.insert("g4dn.12xlarge", Market::Spot, "us-east-1a", 1.0);
    b
}

/// Everything a stage may read, owned by the test.
struct Fixture {
    policy: Policy,
    state: PoolState,
    workers: Vec<Worker>,
    signals: Signals,
    prices: PriceBook,
}

impl Fixture {
    fn new(workers: Vec<Worker>, waiting: f64, running: f64) -> Self {
        Fixture {
            policy: test_policy(),
            state: PoolState {
                desired: Some(count(workers.len())),
                ..PoolState::default()
            },
            workers,
            signals: Signals {
                queue_depth: Some(waiting),
                pending_jobs: None,
                running_jobs: Some(running),
                idle_since_ms: Some(T0 - 60 * MIN),
            },
            prices: prices(),
        }
    }

    fn input(&self) -> PoolInput<'_> {
        PoolInput {
            policy: &self.policy,
            state: &self.state,
            workers: &self.workers,
            signals: &self.signals,
            incidents: &[],
            prices: &self.prices,
            since_ms: T0 - 24 * 60 * MIN,
            now_ms: T0,
            explain: true,
        }
    }

    /// Runs the step stage with the need already bounded.
    fn step(&self, bounded: u32, floor: u32) -> (Step, Rules) {
        let input = self.input();
        let pool = Pool::of(&input);
        let s = StepInput {
            input: &input,
            state: &self.state,
            now: pool.now,
            previous: pool.previous,
            capacity: pool.capacity,
            bounded,
            floor,
        };
        let mut rules = Rules::new(true);
        (step(&s, &mut rules, &pool), rules)
    }
}

fn workers(n: usize, util: f64) -> Vec<Worker> {
    (0..n).map(|i| worker(&format!("w{i}"), util)).collect()
}

#[test]
fn the_pool_counts_live_and_staying_workers_and_never_steps_behind_its_state() {
    let mut f = Fixture::new(workers(3, 0.5), 1.0, 2.0);
    f.workers[1].stopped_at_ms = Some(T0 - MIN);
    f.workers[2].warning = Some(crate::core::scale::Warning {
        kind: crate::core::scale::WarningKind::InterruptionWarning,
        at_ms: T0 - MIN,
        action_at_ms: None,
    });
    f.state.last_scale_up_at_ms = Some(T0 + 5 * MIN);
    let input = f.input();
    let pool = Pool::of(&input);
    assert_eq!((pool.current, pool.capacity, pool.previous), (2, 1, 3));
    assert_eq!(pool.now, T0 + 5 * MIN, "the state's later time wins");
    assert_eq!(
        pool.utils().collect::<Vec<_>>(),
        vec![0.5],
        "the doomed worker's utilisation is left out"
    );
    assert_eq!((pool.waiting, pool.running), (1.0, 2.0));
}

#[test]
fn queue_need_counts_running_and_waiting_jobs_and_floors_the_running() {
    let f = Fixture::new(vec![], 3.0, 2.0);
    let input = f.input();
    let mut rules = Rules::new(true);
    let n = need(&f.policy, &mut rules, &Pool::of(&input));
    assert_eq!(n, Need { need: 5, floor: 2 });
    assert!(rules.fired(Rule::Queue));
}

#[test]
fn utilisation_need_scales_capacity_outside_the_tolerance_only() {
    let mut f = Fixture::new(workers(4, 0.9), 0.0, 0.0);
    f.policy.mode = Mode::Utilization {
        target_utilization: 0.6,
        tolerance: 0.1,
    };
    let input = f.input();
    let mut rules = Rules::new(true);
    // 4 × 0.9 / 0.6 = 6.
    assert_eq!(need(&f.policy, &mut rules, &Pool::of(&input)).need, 6);
    assert!(rules.fired(Rule::Utilization));
    let mut f = Fixture::new(workers(4, 0.62), 0.0, 0.0);
    f.policy.mode = Mode::Utilization {
        target_utilization: 0.6,
        tolerance: 0.1,
    };
    let input = f.input();
    let mut rules = Rules::new(true);
    assert_eq!(need(&f.policy, &mut rules, &Pool::of(&input)).need, 4);
    assert!(rules.fired(Rule::WithinTolerance));
}

#[test]
fn elastic_need_is_the_largest_gang_while_the_job_is_active() {
    let mut f = Fixture::new(vec![], 0.0, 1.0);
    f.policy.mode = Mode::Elastic {
        min_nodes: 2,
        max_nodes: 6,
        node_step: 2,
    };
    let input = f.input();
    let mut rules = Rules::new(true);
    assert_eq!(
        need(&f.policy, &mut rules, &Pool::of(&input)),
        Need { need: 6, floor: 2 }
    );
}

#[test]
fn bounds_fire_only_when_they_change_the_need() {
    let mut p = test_policy();
    p.min_workers = 1;
    let mut rules = Rules::new(true);
    assert_eq!(bounds(&p, &mut rules, 3), 3);
    assert!(!rules.fired(Rule::Bounds));
    assert_eq!(bounds(&p, &mut rules, 9), 4);
    assert_eq!(bounds(&p, &mut rules, 0), 1);
    assert_eq!(rules.reasons.len(), 2);
}

#[test]
fn step_up_is_limited_by_the_step_and_held_by_the_cooldown() {
    let mut f = Fixture::new(workers(2, 0.9), 8.0, 2.0);
    f.policy.max_workers = 10;
    f.policy.max_step_percent = 50.0;
    f.policy.min_step = 1;
    let (s, rules) = f.step(10, 2);
    assert_eq!(s.target, 3, "2 workers grow by ceil(50%) = 1");
    assert!(rules.fired(Rule::StepLimit));
    f.policy.scale_up_cooldown_sec = 600;
    f.state.last_scale_up_at_ms = Some(T0 - MIN);
    let (s, rules) = f.step(10, 2);
    assert_eq!(s.target, 2);
    assert_eq!(s.cooldown_until, Some(T0 + 9 * MIN));
    assert!(rules.fired(Rule::ScaleUpCooldown));
}

#[test]
fn an_idle_pool_waits_before_going_to_its_minimum() {
    let mut f = Fixture::new(workers(2, 0.0), 0.0, 0.0);
    f.policy.idle_to_zero_after_sec = 7200;
    let (s, rules) = f.step(0, 0);
    assert_eq!(s.target, 2);
    assert_eq!(
        s.wake_at,
        vec![T0 + 60 * MIN],
        "idle since T0-60min, two hours needed"
    );
    assert!(rules.fired(Rule::IdleWait));
    f.policy.idle_to_zero_after_sec = 1800;
    let (s, rules) = f.step(0, 0);
    assert_eq!(s.target, 0);
    assert!(rules.fired(Rule::IdleToZero));
}

#[test]
fn step_down_holds_for_the_highest_need_in_the_window() {
    let mut f = Fixture::new(workers(4, 0.9), 1.0, 1.0);
    f.policy.stabilization_window_sec = 600;
    f.state.need_history = vec![(T0 - 5 * MIN, 4), (T0, 2)];
    let (s, rules) = f.step(2, 1);
    assert_eq!(s.target, 4);
    assert!(rules.fired(Rule::Stabilization));
    assert_eq!(
        s.wake_at,
        vec![T0 + 10 * MIN],
        "the 4 leaves the window at T0 + 600 s"
    );
    f.state.need_history = vec![(T0 - 20 * MIN, 4), (T0 - 11 * MIN, 2)];
    let (s, rules) = f.step(2, 1);
    assert_eq!(s.target, 2);
    assert!(rules.fired(Rule::ScaleDown));
}

#[test]
fn running_jobs_raise_the_target_within_max_workers() {
    let p = test_policy();
    let mut rules = Rules::new(true);
    assert_eq!(running_floor(&p, &mut rules, 3, 1), 3);
    assert_eq!(running_floor(&p, &mut rules, 9, 1), 4, "max_workers is 4");
    assert_eq!(running_floor(&p, &mut rules, 1, 2), 2);
    assert_eq!(rules.reasons.len(), 2);
}

#[test]
fn gangs_round_up_within_the_largest_and_down_to_a_whole_gang() {
    let g = Gang {
        min_nodes: 2,
        max_nodes: 9,
        step: 3,
    };
    // Whole counts: 0, 2, 5, 8.
    let up: Vec<u32> = (0..=10).map(|n| g.round_up(n)).collect();
    assert_eq!(up, vec![0, 2, 2, 5, 5, 5, 8, 8, 8, 8, 8]);
    let down: Vec<u32> = (0..=10).map(|n| g.round_down(n)).collect();
    assert_eq!(down, vec![0, 0, 2, 2, 2, 5, 5, 5, 8, 8, 8]);
    let none = Gang {
        min_nodes: 5,
        max_nodes: 4,
        step: 1,
    };
    assert_eq!((none.round_up(5), none.round_down(5)), (0, 0));
}

#[test]
fn whole_gangs_say_when_they_round_or_when_no_gang_fits() {
    let g = Gang {
        min_nodes: 2,
        max_nodes: 8,
        step: 2,
    };
    let mut rules = Rules::new(true);
    assert_eq!(whole_gangs(&mut rules, g, 4, 2), 4);
    assert!(!rules.fired(Rule::WholeGang));
    assert_eq!(whole_gangs(&mut rules, g, 3, 2), 4);
    assert!(rules.fired(Rule::WholeGang));
    let none = Gang {
        min_nodes: 6,
        max_nodes: 4,
        step: 1,
    };
    assert_eq!(whole_gangs(&mut rules, none, 3, 0), 0);
    assert!(rules.fired(Rule::GangDoesNotFit));
}

#[test]
fn the_budget_caps_growth_to_what_the_day_can_afford() {
    // At T0 (08:00 UTC) 16 hours are left; one spot worker costs $1/h, one on-demand $4/h,
    // and 80% spot above a zero base puts the first worker on-demand.
    let mut f = Fixture::new(vec![], 4.0, 0.0);
    f.workers.clear();
    f.policy.daily_budget = Some(100.0);
    f.policy.budget_action = BudgetAction::Cap;
    f.policy.instance_types.truncate(1);
    let input = f.input();
    let mut rules = Rules::new(true);
    let b = budget(&input, &mut rules, T0, 0, 0, 4);
    // 4 workers: 1 od + 3 spot = $7/h × 16 h = $112 > 100; 3 workers: 1 + 2 = $6/h = $96.
    assert_eq!(b.target, 3);
    assert!(rules.fired(Rule::BudgetCap) && !rules.fired(Rule::BudgetExceeded));
    assert_eq!(b.over, None);
    let status = b.status.expect("a budget");
    assert_eq!(status.projected_today, 96.0);
    f.policy.budget_action = BudgetAction::Alarm;
    let input = f.input();
    let mut rules = Rules::new(true);
    let b = budget(&input, &mut rules, T0, 0, 0, 4);
    assert_eq!((b.target, b.over), (4, Some((112.0, 100.0))));
    assert!(rules.fired(Rule::BudgetExceeded));
}
