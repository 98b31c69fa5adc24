//! Whole selection answers over the bundled catalog, compared byte for byte with a fixture
//! written by the selection code as it stood before its refactor into steps and its index.
//! It guards refactors of `core::select`: any change in a figure, reason, rejection count or
//! suggestion shows as a diff. A deliberate change of answers regenerates the fixture with
//! `UPDATE_SELECT_GOLDEN=1 cargo test --test it select_golden` and explains why in the commit.

use trainscaler::catalog::bundled::bundled_snapshot;
use trainscaler::catalog::spot_advisor::BUNDLED_SPOT_RISK;
use trainscaler::core::benchmark::Benchmark;
use trainscaler::core::catalog::CatalogSnapshot;
use trainscaler::core::job::{
    DataLayout, Job, MemoryNeed, Objective, Optimizer, Precision, Sharding, StateBytes, Work,
};
use trainscaler::core::select::select;

const FIXTURE: &str = "tests/fixtures/select_golden.json";

fn model(params: f64, sharding: Sharding) -> MemoryNeed {
    MemoryNeed::Model {
        params,
        bytes: StateBytes::of(Precision::Bf16, Optimizer::Adamw),
        sharding,
        activation_gib: None,
        activation_reserve: 0.2,
    }
}

fn bench(id: i64, instance_type: &str, gpus: u32, nodes: u32, sps: Option<f64>) -> Benchmark {
    Benchmark {
        id,
        workload: "bert".into(),
        provider: "aws".into(),
        instance_type: instance_type.into(),
        gpus,
        nodes,
        steps: Some(100),
        samples_per_sec: sps,
        step_time_sec: sps.is_none().then_some(0.5),
        measured_at_ms: 1_700_000_000_000,
    }
}

/// The bundled catalog with a few measurements of workload `bert` on AWS.
fn with_benchmarks(bundled: &CatalogSnapshot) -> CatalogSnapshot {
    CatalogSnapshot::with_benchmarks(
        bundled.providers().to_vec(),
        bundled.gpus().to_vec(),
        bundled.offerings().to_vec(),
        vec![
            bench(1, "p4d.24xlarge", 8, 1, Some(2000.0)),
            bench(2, "p4d.24xlarge", 8, 2, Some(3800.0)),
            bench(3, "g5.xlarge", 1, 1, Some(150.0)),
            bench(4, "p5.48xlarge", 8, 1, None),
        ],
    )
}

fn jobs() -> Vec<(&'static str, bool, Job)> {
    let tokens_7b = Work::Tokens {
        tokens: 20e9,
        params: 7e9,
    };
    let base = Job {
        memory: model(7e9, Sharding::Fsdp),
        work: tokens_7b.clone(),
        checkpoint_interval_min: Some(10.0),
        ..Job::default()
    };
    let samples = Work::Samples {
        total: 5e7,
        flops_per_sample: None,
    };
    vec![
        ("defaults", false, Job::default()),
        ("bench_1_node", false, base.clone()),
        (
            "bench_1_to_8_nodes",
            false,
            Job {
                nodes_max: 8,
                ..base.clone()
            },
        ),
        (
            "unsharded_7b_fits_nowhere",
            false,
            Job {
                memory: model(7e9, Sharding::None),
                ..Job::default()
            },
        ),
        (
            "fsdp_8_gpus_per_node_fastest",
            false,
            Job {
                gpus_per_node_min: 8.0,
                objective: Objective::Fastest,
                ..base.clone()
            },
        ),
        (
            "four_nodes_fast_fabric",
            false,
            Job {
                memory: model(70e9, Sharding::Zero3),
                work: Work::Tokens {
                    tokens: 1e11,
                    params: 70e9,
                },
                nodes_min: 4,
                nodes_max: 4,
                ..base.clone()
            },
        ),
        (
            "nodes_1_to_64_best_value",
            false,
            Job {
                nodes_max: 64,
                objective: Objective::BestValue,
                top_k: 10,
                ..base.clone()
            },
        ),
        (
            "no_spot",
            false,
            Job {
                spot_allowed: false,
                ..base.clone()
            },
        ),
        (
            "spot_without_checkpoints",
            false,
            Job {
                checkpoint_interval_min: None,
                ..base.clone()
            },
        ),
        (
            "constraints_providers_regions_gpus",
            false,
            Job {
                providers: vec!["AWS".into(), "gcp".into()],
                regions: vec!["us-east-1".into(), "us-central1".into()],
                gpus: vec!["A100".into(), "h100".into(), "L4".into()],
                ..base.clone()
            },
        ),
        (
            "exclude_gpus_and_price_cap",
            false,
            Job {
                exclude_gpus: vec!["H100".into(), "A100-80GB".into()],
                max_price_per_hour: Some(12.0),
                ..base.clone()
            },
        ),
        (
            "deadline_missed",
            false,
            Job {
                deadline_hours: Some(0.5),
                ..base.clone()
            },
        ),
        (
            "budget_missed",
            false,
            Job {
                budget: Some(5.0),
                ..base.clone()
            },
        ),
        (
            "many_small_files_on_nvme",
            false,
            Job {
                data_layout: DataLayout::ManySmallFiles,
                dataset_gib: Some(2000.0),
                ..base.clone()
            },
        ),
        (
            "fp32_reference_hours",
            false,
            Job {
                precision: Precision::Fp32,
                memory: MemoryNeed::Fixed { gib_per_gpu: 20.0 },
                work: Work::ReferenceHours {
                    hours: 100.0,
                    gpu: "V100".into(),
                },
                ..Job::default()
            },
        ),
        (
            "fp8_tokens_given_utilisation_and_startup",
            false,
            Job {
                precision: Precision::Fp8,
                utilisation: Some(0.35),
                startup_min: Some(3.0),
                nodes_max: 4,
                require_fast_interconnect: false,
                ..base.clone()
            },
        ),
        (
            "samples_without_flops_no_workload",
            false,
            Job {
                work: samples.clone(),
                ..Job::default()
            },
        ),
        (
            "samples_with_flops",
            false,
            Job {
                work: Work::Samples {
                    total: 1e8,
                    flops_per_sample: Some(3e12),
                },
                objective: Objective::Fastest,
                nodes_max: 2,
                ..Job::default()
            },
        ),
        (
            "measured_workload_bert",
            true,
            Job {
                work: samples.clone(),
                workload: Some("bert".into()),
                memory: MemoryNeed::Fixed { gib_per_gpu: 10.0 },
                nodes_max: 4,
                checkpoint_interval_min: Some(30.0),
                ..Job::default()
            },
        ),
        (
            "measured_workload_bert_best_value_gpus",
            true,
            Job {
                work: Work::Samples {
                    total: 5e7,
                    flops_per_sample: Some(1e12),
                },
                workload: Some("bert".into()),
                gpus: vec!["A100".into(), "A10G".into(), "H100".into()],
                objective: Objective::BestValue,
                nodes_max: 2,
                ..Job::default()
            },
        ),
        (
            "unknown_gpus_with_work",
            false,
            Job {
                providers: vec!["vast".into()],
                ..base.clone()
            },
        ),
        (
            "unknown_work_on_vast",
            false,
            Job {
                providers: vec!["vast".into()],
                top_k: 3,
                ..Job::default()
            },
        ),
        (
            "nothing_matches",
            false,
            Job {
                providers: vec!["nowhere".into()],
                ..base.clone()
            },
        ),
        (
            "huge_model_needs_more_nodes",
            false,
            Job {
                memory: model(1e12, Sharding::Fsdp),
                nodes_max: 2,
                ..base
            },
        ),
    ]
}

fn answers() -> String {
    let bundled = bundled_snapshot();
    let benchmarked = with_benchmarks(&bundled);
    let mut out = serde_json::Map::new();
    for (name, measured, job) in jobs() {
        let catalog = if measured { &benchmarked } else { &bundled };
        let decision = select(catalog, &BUNDLED_SPOT_RISK, &job);
        let value = serde_json::to_value(&decision).expect("a decision serialises");
        out.insert(name.to_string(), value);
    }
    let mut text =
        serde_json::to_string_pretty(&serde_json::Value::Object(out)).expect("JSON serialises");
    text.push('\n');
    text
}

#[test]
fn select_golden_answers_are_unchanged() {
    let now = answers();
    if std::env::var_os("UPDATE_SELECT_GOLDEN").is_some() {
        std::fs::write(FIXTURE, &now).expect("fixture written");
        return;
    }
    let before = std::fs::read_to_string(FIXTURE).expect("fixture present");
    if now != before {
        let line = now
            .lines()
            .zip(before.lines())
            .position(|(a, b)| a != b)
            .map_or(0, |i| i + 1);
        panic!("selection answers differ from {FIXTURE}, first at line {line}");
    }
}
