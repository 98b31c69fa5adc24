//! Property tests of instance selection on the real bundled catalog: candidates come out
//! sorted by the job's objective (ties broken by offering id, nodes and market), ranked 1..n,
//! within the job's constraints, and the same job gives the same answer.

use std::cmp::Ordering;
use std::sync::LazyLock;

use proptest::prelude::*;
use trainscaler::catalog::bundled::bundled_snapshot;
use trainscaler::catalog::spot_advisor::BUNDLED_SPOT_RISK;
use trainscaler::core::catalog::{CatalogSnapshot, Market};
use trainscaler::core::decision::Candidate;
use trainscaler::core::job::{
    Job, MemoryNeed, Objective, Optimizer, Precision, Sharding, StateBytes, Work,
};
use trainscaler::core::select::select;

static CATALOG: LazyLock<CatalogSnapshot> = LazyLock::new(bundled_snapshot);

/// The objective's sort key as the answer states it; lower is better. Unknown throughput
/// (GPUs without datasheet facts, for a job without work) sorts last.
fn key(objective: Objective, c: &Candidate) -> (f64, f64) {
    match objective {
        Objective::Cheapest => (
            c.est_cost.unwrap_or(c.price_per_hour_total),
            c.est_hours.unwrap_or(0.0),
        ),
        Objective::Fastest => (
            c.est_hours
                .or(c.throughput.map(|t| -t))
                .unwrap_or(f64::INFINITY),
            c.est_cost.unwrap_or(c.price_per_hour_total),
        ),
        Objective::BestValue => (
            c.value.map_or(f64::INFINITY, |v| -v),
            c.price_per_hour_total,
        ),
    }
}

fn order(objective: Objective, a: &Candidate, b: &Candidate) -> Ordering {
    let (ka, kb) = (key(objective, a), key(objective, b));
    ka.0.total_cmp(&kb.0)
        .then(ka.1.total_cmp(&kb.1))
        .then(a.offering_id.cmp(&b.offering_id))
        .then(a.nodes.cmp(&b.nodes))
        .then(a.market.cmp(&b.market))
}

fn job() -> impl Strategy<Value = Job> {
    let sharding = prop::sample::select(vec![
        Sharding::None,
        Sharding::Zero1,
        Sharding::Zero2,
        Sharding::Zero3,
        Sharding::Fsdp,
    ]);
    let objective = prop::sample::select(vec![
        Objective::Cheapest,
        Objective::Fastest,
        Objective::BestValue,
    ]);
    let providers = prop::sample::subsequence(vec!["aws", "gcp", "azure", "lambda"], 0..=2);
    let work = prop_oneof![Just(None), (1e8..1e12f64).prop_map(Some),];
    (
        (0.05..70.0f64, sharding, objective, providers, work),
        (
            1u32..=3,
            0u32..=3,
            prop::sample::select(vec![1.0, 2.0, 4.0, 8.0]),
        ),
        (prop::option::of(5.0..60.0f64), any::<bool>(), 1usize..=12),
        (
            prop::option::of(1.0..200.0f64),
            prop::option::of(1.0..500.0f64),
            prop::option::of(100.0..1e6f64),
        ),
    )
        .prop_map(
            |(
                (params_b, sharding, objective, providers, tokens),
                (nodes_min, extra_nodes, gpus_min),
                (checkpoint, spot_allowed, top_k),
                (max_price, deadline, budget),
            )| {
                let params = params_b * 1e9;
                Job {
                    memory: MemoryNeed::Model {
                        params,
                        bytes: StateBytes::of(Precision::Bf16, Optimizer::Adamw),
                        sharding,
                        activation_gib: None,
                        activation_reserve: 0.2,
                    },
                    work: tokens.map_or(Work::Unknown, |tokens| Work::Tokens { tokens, params }),
                    nodes_min,
                    nodes_max: nodes_min + extra_nodes,
                    gpus_per_node_min: gpus_min,
                    spot_allowed,
                    checkpoint_interval_min: checkpoint,
                    providers: providers.into_iter().map(String::from).collect(),
                    max_price_per_hour: max_price,
                    deadline_hours: deadline,
                    budget,
                    objective,
                    top_k,
                    ..Job::default()
                }
            },
        )
}

proptest! {
    // Each case runs selection over the whole catalog three times; 48 keep this to seconds.
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn candidates_are_ranked_by_the_objective_within_the_constraints(job in job()) {
        let decision = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
        let c = &decision.candidates;
        prop_assert!(c.len() <= job.top_k);
        prop_assert!(c.len() as u64 <= decision.feasible);
        for (i, cand) in c.iter().enumerate() {
            prop_assert_eq!(cand.rank, i + 1);
            prop_assert!(cand.nodes >= job.nodes_min && cand.nodes <= job.nodes_max, "{cand:?}");
            prop_assert!(cand.gpus_per_node >= job.gpus_per_node_min);
            prop_assert!(cand.memory_headroom_gib >= 0.0, "{cand:?}");
            prop_assert!(cand.memory_usable_gib < cand.memory_needed_gib + cand.memory_headroom_gib + 1e-9);
            if let (Some(hours), Some(billed), Some(cost)) = (cand.est_hours, cand.billed_hours, cand.est_cost) {
                // Billed time rounds up the time from launch, start-up included.
                prop_assert!(hours > cand.startup_min / 60.0 && billed >= hours - 1e-9, "{cand:?}");
                prop_assert!((cost - billed * cand.price_per_hour_total).abs() <= 1e-6 * cost.max(1.0), "{cand:?}");
            }
            prop_assert!(cand.price_per_hour_total > 0.0 && cand.price_per_hour_total.is_finite());
            if !job.providers.is_empty() {
                prop_assert!(job.providers.contains(&cand.provider));
            }
            if cand.market == Market::Spot {
                prop_assert!(job.spot_allowed && job.checkpoint_interval_min.is_some(), "{cand:?}");
            }
            if let Some(max) = job.max_price_per_hour {
                prop_assert!(cand.price_per_hour_total <= max + 1e-9, "{cand:?}");
            }
            if let (Some(deadline), Some(hours)) = (job.deadline_hours, cand.est_hours) {
                prop_assert!(hours <= deadline + 1e-9, "{cand:?}");
            }
            if let (Some(budget), Some(cost)) = (job.budget, cand.est_cost) {
                prop_assert!(cost <= budget + 1e-6, "{cand:?}");
            }
        }
        for pair in c.windows(2) {
            prop_assert_eq!(
                order(job.objective, &pair[0], &pair[1]),
                Ordering::Less,
                "#{} before #{} under {:?}", pair[0].rank, pair[1].rank, job.objective
            );
        }
    }

    #[test]
    fn the_same_job_gives_the_same_answer_and_a_smaller_top_k_a_prefix(job in job()) {
        let a = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
        let b = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
        prop_assert_eq!(&a, &b);
        let fewer = Job { top_k: job.top_k.div_ceil(2), ..job.clone() };
        let short = select(&CATALOG, &BUNDLED_SPOT_RISK, &fewer);
        prop_assert_eq!(short.candidates.len(), a.candidates.len().min(fewer.top_k));
        for (s, l) in short.candidates.iter().zip(&a.candidates) {
            prop_assert_eq!(
                (s.offering_id, s.nodes, s.market),
                (l.offering_id, l.nodes, l.market)
            );
        }
    }
}
