//! The pure middle of one pool decision (`fleet::pool_decision::run`: prices from the catalog,
//! signals, the core's rules, the write-back) for pools of 8 and 200 workers, as
//! `POST /decide {"pool": ...}` runs it between its database read and write.
//! Run with `cargo bench --bench pool_decision`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use trainscaler::catalog::bundled::bundled_snapshot;
use trainscaler::core::capacity::{Capacity, CloudWorker, WorkerState};
use trainscaler::core::catalog::Market;
use trainscaler::core::idle::{SeriesActivity, SeriesIdle};
use trainscaler::core::policy::Policy;
use trainscaler::core::reconcile::{Matching, PlanInput, plan, spec_for};
use trainscaler::core::scale::{PoolState, Worker};
use trainscaler::fleet::pool_decision::run;
use trainscaler::store::{DecisionRead, LatestSignal, PoolRow};

const NOW: i64 = 1_800_000_000_000;

fn read(workers: usize) -> DecisionRead {
    let policy: Policy = serde_json::from_value(json!({
        "provider": "aws", "region": "us-east-1", "zones": [],
        "instance_types": [
            {"instance_type": "g4dn.12xlarge", "markets": ["spot", "on_demand"]},
            {"instance_type": "g5.12xlarge", "markets": ["spot", "on_demand"]}
        ],
        "gpus_per_worker": 4, "mode": "queue", "gpus_per_job": 4,
        "min_workers": 0, "max_workers": 400, "max_step_percent": 50.0, "min_step": 1,
        "scale_up_cooldown_sec": 0, "scale_down_cooldown_sec": 300,
        "stabilization_window_sec": 300, "idle_to_zero_after_sec": 600,
        "idle_utilization_threshold": 0.1, "on_demand_base": 1, "spot_percentage": 80,
        "daily_budget": 5000.0, "budget_action": "alarm", "signal_max_age_sec": 300,
        "capacity_error_backoff_sec": 600, "interruption_window_sec": 3600,
        "max_interruption_rate": 0.2
    }))
    .expect("policy");
    let ws: Vec<Worker> = (0..workers)
        .map(|i| Worker {
            id: format!("i-{i:08x}"),
            instance_type: "g4dn.12xlarge".into(),
            market: if i % 5 == 0 {
                Market::OnDemand
            } else {
                Market::Spot
            },
            zone: Some("us-east-1a".into()),
            started_at_ms: NOW - 3_600_000,
            stopped_at_ms: None,
            warning: None,
            utilization: None,
            gpu_memory_gib: None,
        })
        .collect();
    let mut latest: Vec<LatestSignal> = ws
        .iter()
        .map(|w| LatestSignal {
            worker: w.id.clone(),
            name: "gpu_utilization".into(),
            value: 0.8,
            at_ms: NOW - 10_000,
        })
        .collect();
    latest.push(LatestSignal {
        worker: String::new(),
        name: "queue_depth".into(),
        value: workers as f64,
        at_ms: NOW - 10_000,
    });
    DecisionRead {
        pool: PoolRow {
            name: "bench".into(),
            policy,
            state: PoolState {
                desired: Some(u32::try_from(workers).unwrap_or(u32::MAX)),
                ..PoolState::default()
            },
            last_decision: None,
            last_decision_key: None,
            last_decision_at_ms: None,
            since_ms: NOW - 86_400_000,
            created_at_ms: NOW - 86_400_000,
            updated_at_ms: NOW - 86_400_000,
        },
        workers: ws,
        series_idle: latest
            .iter()
            .map(|l| SeriesIdle {
                worker: l.worker.clone(),
                name: l.name.clone(),
                activity: SeriesActivity {
                    last_busy_at_ms: Some(l.at_ms),
                    idle_since_ms: None,
                },
            })
            .collect(),
        latest,
        incidents: vec![],
    }
}

fn pool_decision(c: &mut Criterion) {
    let catalog = bundled_snapshot();
    let mut group = c.benchmark_group("pool_decision");
    for n in [8, 200] {
        let r = read(n);
        group.bench_function(format!("queue_mode_{n}_workers"), |b| {
            b.iter(|| black_box(run(black_box(&r), &catalog, NOW)))
        });
        // The reconciler's planning on top of the decision: a group that already matches
        // (the common pass) costs only the comparison.
        let (_, answer) = run(&r, &catalog, NOW);
        let spec = spec_for(&r.pool.policy, &answer.decision, &[]);
        let capacity = Capacity {
            desired: spec.desired,
            min: spec.min,
            max: spec.max,
            distribution: Some(spec.distribution.clone()),
            workers: r
                .workers
                .iter()
                .map(|w| CloudWorker {
                    id: w.id.clone(),
                    instance_type: w.instance_type.clone(),
                    market: w.market,
                    zone: w.zone.clone(),
                    state: WorkerState::Running,
                    launched_at_ms: Some(w.started_at_ms),
                    aliases: Vec::new(),
                })
                .collect(),
        };
        group.bench_function(format!("reconcile_plan_{n}_workers"), |b| {
            b.iter(|| {
                black_box(plan(&PlanInput {
                    policy: &r.pool.policy,
                    decision: &answer.decision,
                    capacity: &capacity,
                    workers: &r.workers,
                    checkpoints: &[],
                    now_ms: NOW,
                    matching: Matching::Distribution,
                }))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, pool_decision);
criterion_main!(benches);
