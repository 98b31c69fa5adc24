//! Properties of the pool decision that must hold for any input: bounds, the step limit, the
//! running floor, whole gangs, the market split, and determinism (proptest).

use proptest::prelude::*;
use trainscaler::core::catalog::Market;
use trainscaler::core::cost::PriceBook;
use trainscaler::core::policy::{BudgetAction, InstanceChoice, Mode, Policy};
use trainscaler::core::scale::{PoolInput, PoolState, Signals, Worker, evaluate, market_split};

const T0: i64 = 1_800_000_000_000;

fn policy(mode: Mode, min: u32, max: u32, pct: f64, min_step: u32, base: u32, spot: u32) -> Policy {
    Policy {
        provider: "aws".into(),
        region: "us-east-1".into(),
        group: None,
        spot_group: None,
        actuation: Default::default(),
        zones: vec![],
        instance_types: vec![
            InstanceChoice {
                instance_type: "a".into(),
                markets: vec![Market::Spot, Market::OnDemand],
            },
            InstanceChoice {
                instance_type: "b".into(),
                markets: vec![Market::Spot],
            },
        ],
        gpus_per_worker: 4,
        mode,
        min_workers: min,
        max_workers: max,
        max_step_percent: pct,
        min_step,
        scale_up_cooldown_sec: 0,
        scale_down_cooldown_sec: 300,
        stabilization_window_sec: 300,
        idle_to_zero_after_sec: 600,
        idle_utilization_threshold: 0.1,
        idle_gpu_memory_gib: None,
        on_demand_base: base,
        spot_percentage: spot,
        daily_budget: None,
        budget_action: BudgetAction::Alarm,
        signal_max_age_sec: 300,
        capacity_error_backoff_sec: 600,
        interruption_window_sec: 3600,
        max_interruption_rate: 0.2,
    }
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        (1u32..=16).prop_map(|gpus_per_job| Mode::Queue { gpus_per_job }),
        (0.05f64..=1.0, 0.0f64..0.5).prop_map(|(t, tol)| Mode::Utilization {
            target_utilization: t,
            tolerance: tol
        }),
        (1u32..=8, 0u32..=8, 1u32..=4).prop_map(|(min, extra, step)| Mode::Elastic {
            min_nodes: min,
            max_nodes: min + extra,
            node_step: step
        }),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    policy: Policy,
    workers: Vec<Worker>,
    signals: Signals,
    previous: Option<u32>,
    budget: Option<(f64, BudgetAction)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        mode(),
        0u32..=6,
        1u32..=40,
        1.0f64..=200.0,
        1u32..=4,
        0u32..=4,
        0u32..=100,
        proptest::collection::vec((any::<bool>(), proptest::option::of(0.0f64..=1.0)), 0..30),
        (
            proptest::option::of(0.0f64..100.0),
            proptest::option::of(0.0f64..50.0),
        ),
        proptest::option::of(0u32..60),
        proptest::option::of((1.0f64..2000.0, any::<bool>())),
    )
        .prop_map(
            |(
                mode,
                min,
                extra,
                pct,
                min_step,
                base,
                spot,
                ws,
                (queue, running),
                previous,
                budget,
            )| {
                let policy = policy(mode, min, min + extra, pct, min_step, base, spot);
                let workers = ws
                    .into_iter()
                    .enumerate()
                    .map(|(i, (on_spot, utilization))| Worker {
                        id: format!("w{i}"),
                        instance_type: "a".into(),
                        market: if on_spot {
                            Market::Spot
                        } else {
                            Market::OnDemand
                        },
                        zone: None,
                        started_at_ms: T0 - 3_600_000,
                        stopped_at_ms: None,
                        warning: None,
                        utilization,
                        gpu_memory_gib: None,
                    })
                    .collect();
                Case {
                    policy,
                    workers,
                    signals: Signals {
                        queue_depth: queue,
                        pending_jobs: None,
                        running_jobs: running,
                        idle_since_ms: Some(T0 - 60_000),
                    },
                    previous,
                    budget: budget.map(|(b, cap)| {
                        (
                            b,
                            if cap {
                                BudgetAction::Cap
                            } else {
                                BudgetAction::Alarm
                            },
                        )
                    }),
                }
            },
        )
}

fn run(c: &Case) -> trainscaler::core::scale::Outcome {
    let mut prices = PriceBook::default();
    prices.insert("a", Market::OnDemand, "", 3.0);
    prices.insert("a", Market::Spot, "", 1.0);
    prices.insert("b", Market::Spot, "", 1.5);
    let mut policy = c.policy.clone();
    if let Some((b, action)) = c.budget {
        policy.daily_budget = Some(b);
        policy.budget_action = action;
    }
    let state = PoolState {
        desired: c.previous,
        ..PoolState::default()
    };
    evaluate(&PoolInput {
        policy: &policy,
        state: &state,
        workers: &c.workers,
        signals: &c.signals,
        incidents: &[],
        prices: &prices,
        since_ms: T0 - 86_400_000,
        now_ms: T0,
        explain: true,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn desired_stays_within_min_and_max(c in case()) {
        let d = run(&c).decision;
        let p = &c.policy;
        prop_assert!(d.desired <= p.max_workers, "{} > max {}", d.desired, p.max_workers);
        // An elastic pool whose gang cannot run goes to 0 rather than to a partial gang.
        if !matches!(p.mode, Mode::Elastic { .. }) {
            prop_assert!(d.desired >= p.min_workers, "{} < min {}", d.desired, p.min_workers);
        }
    }

    #[test]
    fn one_step_is_bounded_unless_running_jobs_or_bounds_need_more(c in case()) {
        let o = run(&c);
        let d = &o.decision;
        let p = &c.policy;
        let capacity = u32::try_from(c.workers.len()).unwrap();
        let previous = c.previous.unwrap_or(capacity);
        if capacity > 0 && d.desired > previous && !matches!(p.mode, Mode::Elastic { .. }) {
            let step = p.min_step.max((f64::from(capacity) * p.max_step_percent / 100.0).ceil() as u32);
            let running = p.workers_for_jobs(c.signals.running_jobs.unwrap_or(0.0));
            let allowed = (capacity + step).max(previous).max(running.min(p.max_workers)).max(p.min_workers);
            prop_assert!(d.desired <= allowed, "desired {} from {} capacity {}: allowed {}", d.desired, previous, capacity, allowed);
        }
    }

    #[test]
    fn never_below_what_running_jobs_use(c in case()) {
        let d = run(&c).decision;
        let p = &c.policy;
        if let Mode::Queue { .. } = p.mode {
            let running = p.workers_for_jobs(c.signals.running_jobs.unwrap_or(0.0));
            prop_assert!(d.desired >= running.min(p.max_workers), "{} < running {}", d.desired, running);
        }
    }

    #[test]
    fn elastic_pools_only_ever_run_whole_gangs(c in case()) {
        let d = run(&c).decision;
        if let Mode::Elastic { min_nodes, node_step, .. } = c.policy.mode {
            let capacity = u32::try_from(c.workers.len()).unwrap();
            let whole = d.desired == 0
                || (d.desired >= min_nodes && (d.desired - min_nodes).is_multiple_of(node_step.max(1)));
            // A budget cap holds the workers that exist rather than stop some.
            prop_assert!(whole || d.desired == capacity || Some(d.desired) == c.previous, "{} is not a whole gang of {min_nodes}+k×{node_step}", d.desired);
        }
    }

    #[test]
    fn the_market_split_sums_to_the_target(c in case(), total in 0u32..500) {
        let (od, spot) = market_split(&c.policy, total);
        prop_assert_eq!(od + spot, total);
        prop_assert!(od >= total.min(c.policy.on_demand_base));
        let d = run(&c).decision;
        let sum: u32 = d.by_type.iter().map(|t| t.count).sum();
        prop_assert_eq!(sum, d.desired);
    }

    #[test]
    fn the_same_input_gives_the_same_answer(c in case()) {
        let (a, b) = (run(&c), run(&c));
        prop_assert_eq!(a.decision, b.decision);
        prop_assert_eq!(a.state, b.state);
    }
}
