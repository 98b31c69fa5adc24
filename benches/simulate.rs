//! The simulator's throughput: 30 days of one-minute decisions for 100 pools (4.32 million
//! pool evaluations), single-threaded, each pool with its own trace of daily jobs and drawn
//! spot interruptions. Run with `cargo bench --bench simulate`; the bar is 5 s.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use trainscaler::catalog::bundled::bundled_snapshot;
use trainscaler::core::cost::{DAY_MS, PriceBook};
use trainscaler::core::policy::Policy;
use trainscaler::core::sim::engine::{Replay, SpeedTable, replay};
use trainscaler::core::sim::settings::Settings;
use trainscaler::core::sim::trace::{JobSize, JobSpec, Trace, TraceEvent};

const START: i64 = 1_793_491_200_000; // 2026-11-01T00:00:00Z
const POOLS: u64 = 100;
const DAYS: i64 = 30;

fn policy() -> Policy {
    serde_json::from_value(json!({
        "provider": "aws", "region": "us-east-1", "zones": [],
        "instance_types": [
            {"instance_type": "g4dn.12xlarge", "markets": ["spot", "on_demand"]},
            {"instance_type": "g5.12xlarge", "markets": ["spot", "on_demand"]}
        ],
        "gpus_per_worker": 4, "mode": "queue", "gpus_per_job": 4,
        "min_workers": 0, "max_workers": 8, "max_step_percent": 50.0, "min_step": 1,
        "scale_up_cooldown_sec": 0, "scale_down_cooldown_sec": 300,
        "stabilization_window_sec": 300, "idle_to_zero_after_sec": 600,
        "idle_utilization_threshold": 0.1, "on_demand_base": 0, "spot_percentage": 80,
        "daily_budget": null, "budget_action": "alarm", "signal_max_age_sec": 300,
        "capacity_error_backoff_sec": 180, "interruption_window_sec": 3600,
        "max_interruption_rate": 0.2
    }))
    .expect("policy")
}

/// Pool `k`'s month: 5 to 14 jobs a day at staggered hours, two hours each, checkpointing
/// every 30 minutes, with spot interruptions drawn at a pessimistic rate.
fn trace(k: u64) -> Trace {
    let mut events = vec![TraceEvent::InterruptionRate {
        at_ms: START,
        instance_type: None,
        rate_per_hour: 0.01,
        seed: k,
    }];
    let per_day = 5 + (k % 10) as i64;
    for day in 0..DAYS {
        for j in 0..per_day {
            events.push(TraceEvent::Job(JobSpec {
                id: format!("p{k}-d{day}-j{j}"),
                at_ms: START + day * DAY_MS + (8 + j % 10) * 3_600_000 + (k as i64 % 7) * 60_000,
                size: JobSize::Gpus(4),
                duration_ms: 7_200_000,
                checkpoint_interval_ms: Some(1_800_000),
                priority: 0,
            }));
        }
    }
    Trace::new(events)
}

fn simulate(c: &mut Criterion) {
    let catalog = bundled_snapshot();
    let p = policy();
    let prices = PriceBook::for_policy(&catalog, &p);
    let traces: Vec<Trace> = (0..POOLS).map(trace).collect();
    let settings = Settings::new(START, START + DAYS * DAY_MS);
    let speed = SpeedTable::default();
    let run_all = || {
        traces
            .iter()
            .map(|t| {
                replay(&Replay {
                    name: "bench",
                    policy: &p,
                    prices: &prices,
                    trace: t,
                    settings: &settings,
                    speed: &speed,
                })
                .report
                .evaluations
            })
            .sum::<u64>()
    };
    let evaluations = run_all();
    assert_eq!(evaluations, POOLS * 30 * 24 * 60, "one evaluation a minute");
    let mut group = c.benchmark_group("simulate");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("100_pools_30_days_1min_ticks", |b| {
        b.iter(|| black_box(run_all()))
    });
    group.finish();
}

criterion_group!(benches, simulate);
criterion_main!(benches);
