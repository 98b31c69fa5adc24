//! Replays small enough to follow by hand, with every expected figure worked out in the
//! comments from the timeline the rules imply.

use super::*;
use crate::core::policy::{InstanceChoice, test_policy};

const T: i64 = 1_800_000_000_000 - 1_800_000_000_000 % 86_400_000; // a UTC midnight
const MIN: i64 = 60_000;
const OD: f64 = 4.0;
const SPOT: f64 = 1.0;

fn prices() -> PriceBook {
    let mut b = PriceBook::default();
    b.insert("g4dn.12xlarge", Market::OnDemand, "", OD);
    b.insert("g4dn.12xlarge", Market::Spot, "", SPOT);
    b.insert("g5.12xlarge", Market::OnDemand, "", 6.0);
    b.insert("g5.12xlarge", Market::Spot, "", 2.0);
    b
}

fn job(id: &str, at: i64, minutes: i64, checkpoint_min: Option<i64>) -> TraceEvent {
    TraceEvent::Job(JobSpec {
        id: id.into(),
        at_ms: at,
        size: JobSize::Gpus(4),
        duration_ms: minutes * MIN,
        checkpoint_interval_ms: checkpoint_min.map(|m| m * MIN),
        priority: 0,
    })
}

fn run(policy: &Policy, events: Vec<TraceEvent>, hours: i64) -> PolicyReport {
    let settings = Settings::new(T, T + hours * 60 * MIN);
    replay(&Replay {
        name: "p",
        policy,
        prices: &prices(),
        trace: &Trace::new(events),
        settings: &settings,
        speed: &SpeedTable::default(),
    })
    .report
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

fn only(markets: &[Market], types: &[&str]) -> Policy {
    let mut p = test_policy();
    p.instance_types = types
        .iter()
        .map(|t| InstanceChoice {
            instance_type: (*t).into(),
            markets: markets.to_vec(),
        })
        .collect();
    p
}

#[test]
fn one_job_is_billed_from_launch_until_the_idle_pool_scales_in() {
    // 00:00 the job arrives, one on-demand worker is launched; ready 00:02, the job runs
    // 00:02-01:02; idle from 01:02, scaled in at 01:12 after the 10-minute idle wait.
    let p = only(&[Market::OnDemand], &["g4dn.12xlarge"]);
    let r = run(&p, vec![job("a", T, 60, None)], 6);
    assert!(close(r.total_cost, OD * 72.0 / 60.0), "{r:?}");
    assert!(close(r.gpu_hours_paid, 4.0 * 72.0 / 60.0));
    assert!(close(r.gpu_hours_used, 4.0));
    assert!(close(r.idle_share, 1.0 - 4.0 / 4.8));
    assert_eq!(r.wait_p50_sec, 120.0, "the start-up time");
    assert_eq!(r.makespan_sec, Some(62.0 * 60.0));
    assert_eq!((r.scaling_actions, r.launches, r.jobs_finished), (2, 1, 1));
    assert_eq!(
        r.evaluations,
        6 * 60,
        "one a minute, the window's end excluded"
    );
    assert_eq!(r.cost_by_market.spot, 0.0);
}

#[test]
fn idle_time_starts_when_the_job_ends_not_at_the_last_busy_tick() {
    // The job runs 00:02-01:02:30, between two decisions. The last busy observation is the
    // 01:02 tick; the pool turns idle when the job ends, at 01:02:30, so the 10-minute idle
    // wait ends at 01:12:30 and the 01:13 decision scales in. Counting from the last busy
    // observation instead would have scaled in at 01:12, a minute less paid.
    let p = only(&[Market::OnDemand], &["g4dn.12xlarge"]);
    let mut long = job("a", T, 60, None);
    if let TraceEvent::Job(spec) = &mut long {
        spec.duration_ms += MIN / 2;
    }
    let r = run(&p, vec![long], 6);
    assert!(close(r.total_cost, OD * 73.0 / 60.0), "{r:?}");
    assert_eq!(r.makespan_sec, Some(62.5 * 60.0));
    assert_eq!((r.scaling_actions, r.launches, r.jobs_finished), (2, 1, 1));
}

#[test]
fn an_interruption_loses_the_work_since_the_checkpoint_and_pays_the_restart() {
    // All spot (100 %). The job starts at 00:02 on spot; the notice comes at 00:30 and the
    // decision at 00:30 tells it to checkpoint (28 min of work saved) and, with one
    // interruption per spot worker (over the 0.2 limit), replaces the worker on-demand. The
    // spot worker is reclaimed at 00:32 with 30 min done: 2 min of 4 GPUs lost. The job
    // resumes at 00:32 on the new worker (ready at 00:32), loads for 5 min, and runs the
    // remaining 32 min: done at 01:09; the pool scales in at 01:19.
    let mut p = test_policy();
    p.spot_percentage = 100;
    let r = run(
        &p,
        vec![
            job("a", T, 60, Some(20)),
            TraceEvent::Interruption {
                at_ms: T + 30 * MIN,
                instance_type: None,
                zone: None,
                count: 1,
            },
        ],
        6,
    );
    assert_eq!(r.interruptions, 1);
    assert!(close(r.lost_gpu_hours, 4.0 * 2.0 / 60.0), "{r:?}");
    assert!(close(r.cost_by_market.spot, SPOT * 32.0 / 60.0), "{r:?}");
    assert!(close(r.cost_by_market.on_demand, OD * 49.0 / 60.0), "{r:?}");
    assert!(close(r.gpu_hours_used, 4.0 * (30.0 + 37.0) / 60.0));
    assert_eq!(r.makespan_sec, Some(69.0 * 60.0));
    assert_eq!(r.launches, 2);
}

#[test]
fn without_checkpoints_an_interruption_loses_everything() {
    let mut p = test_policy();
    p.spot_percentage = 100;
    let r = run(
        &p,
        vec![
            job("a", T, 60, None),
            TraceEvent::Interruption {
                at_ms: T + 30 * MIN,
                instance_type: Some("g4dn.12xlarge".into()),
                zone: None,
                count: 1,
            },
        ],
        6,
    );
    // 30 min of work on 4 GPUs gone at the 00:32 reclaim; the job starts over (5 min load
    // plus the full hour): done at 01:37.
    assert!(close(r.lost_gpu_hours, 4.0 * 30.0 / 60.0), "{r:?}");
    assert_eq!(r.makespan_sec, Some(97.0 * 60.0));
}

#[test]
fn a_capacity_error_moves_the_pool_to_the_next_spot_type() {
    // g4dn spot has no capacity for an hour: the 00:00 launch fails, the 00:01 decision
    // avoids g4dn spot and launches g5 spot (ready 00:03); the job runs 00:03-01:03 and the
    // pool scales in at 01:13: 72 min of g5 spot at $2.
    let mut p = test_policy();
    p.spot_percentage = 100;
    let r = run(
        &p,
        vec![
            job("a", T, 60, None),
            TraceEvent::CapacityError {
                at_ms: T,
                instance_type: "g4dn.12xlarge".into(),
                zone: None,
                market: Market::Spot,
                duration_ms: 60 * MIN,
            },
        ],
        6,
    );
    assert_eq!((r.capacity_errors, r.launches), (1, 1));
    assert_eq!(r.wait_p50_sec, 180.0);
    assert!(close(r.cost_by_market.spot, 2.0 * 72.0 / 60.0), "{r:?}");
}

#[test]
fn a_spot_price_change_is_billed_from_its_moment() {
    // One spot worker 00:00-01:12 (as in the first test); the price doubles at 00:30.
    let mut p = only(&[Market::Spot], &["g4dn.12xlarge"]);
    p.spot_percentage = 100;
    let r = run(
        &p,
        vec![
            job("a", T, 60, None),
            TraceEvent::SpotPrice {
                at_ms: T + 30 * MIN,
                instance_type: "g4dn.12xlarge".into(),
                zone: None,
                price: 2.0 * SPOT,
            },
        ],
        6,
    );
    assert!(
        close(r.total_cost, SPOT * 30.0 / 60.0 + 2.0 * SPOT * 42.0 / 60.0),
        "{r:?}"
    );
}

#[test]
fn the_fifth_job_waits_for_a_worker_when_the_pool_is_at_max() {
    // Five jobs at 00:00, max 4 workers: four run 00:02-01:02, the fifth 01:02-02:02.
    let p = only(&[Market::OnDemand], &["g4dn.12xlarge"]);
    let events = (0..5).map(|i| job(&format!("j{i}"), T, 60, None)).collect();
    let r = run(&p, events, 6);
    assert_eq!(r.jobs_finished, 5);
    assert_eq!(r.wait_p95_sec, 62.0 * 60.0);
    assert_eq!(r.makespan_sec, Some(122.0 * 60.0));
    assert!(close(r.gpu_hours_used, 5.0 * 4.0));
}

#[test]
fn drawn_interruptions_are_reproducible_by_seed() {
    let mut p = test_policy();
    p.spot_percentage = 100;
    let events = |seed| {
        let mut e: Vec<TraceEvent> = (0..40)
            .map(|i| job(&format!("j{i}"), T + i * 30 * MIN, 120, Some(30)))
            .collect();
        e.push(TraceEvent::InterruptionRate {
            at_ms: T,
            instance_type: None,
            rate_per_hour: 0.3,
            seed,
        });
        e
    };
    let a = run(&p, events(7), 48);
    assert!(a.interruptions > 0, "{a:?}");
    assert_eq!(a, run(&p, events(7), 48));
    assert_ne!(a, run(&p, events(8), 48));
}

#[test]
fn a_job_that_cannot_fit_does_not_block_the_ones_behind_it() {
    // At most one 4-GPU worker: the 8-GPU job never fits (and is reported unfinished); the
    // 4-GPU job submitted after it runs 00:02-01:02 anyway.
    let p = only(&[Market::OnDemand], &["g4dn.12xlarge"]);
    let mut p = p;
    p.max_workers = 1;
    let big = TraceEvent::Job(JobSpec {
        size: JobSize::Gpus(8),
        ..match job("big", T, 60, None) {
            TraceEvent::Job(j) => j,
            _ => unreachable!(),
        }
    });
    let r = run(&p, vec![big, job("small", T + MIN, 60, None)], 6);
    assert_eq!((r.jobs_finished, r.jobs_unfinished), (1, 1), "{r:?}");
    assert!(close(r.gpu_hours_used, 4.0));
    assert_eq!(r.makespan_sec, None, "a job never finished");
}

#[test]
fn a_later_rate_line_replaces_the_earlier_one() {
    // A storm of 2 interruptions an hour ends at 01:00 with a rate of 0: far fewer
    // interruptions than the storm for the whole day.
    let mut p = test_policy();
    p.spot_percentage = 100;
    let events = |stop: bool| {
        let mut e: Vec<TraceEvent> = (0..20)
            .map(|i| job(&format!("j{i}"), T + i * 60 * MIN, 60, Some(10)))
            .collect();
        let rate = |at, r| TraceEvent::InterruptionRate {
            at_ms: at,
            instance_type: None,
            rate_per_hour: r,
            seed: 3,
        };
        e.push(rate(T, 2.0));
        if stop {
            e.push(rate(T + 60 * MIN, 0.0));
        }
        e
    };
    let storm = run(&p, events(false), 24);
    let ended = run(&p, events(true), 24);
    assert!(storm.interruptions >= 10, "{storm:?}");
    assert!(ended.interruptions <= 5, "{ended:?}");
}
