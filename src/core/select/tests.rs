//! Selection on a small catalog whose figures can be followed by hand: a 25M-parameter job,
//! start-up and billing, usable memory, spot losses, multi-node for speed, GPUs without
//! facts, and the suggestions.

use super::select;
use crate::core::catalog::{CatalogSnapshot, GpuFacts, Interconnect, Market, Offering};
use crate::core::decision::{RejectReason, ThroughputSource};
use crate::core::job::{
    Job, MemoryNeed, Objective, Optimizer, Precision, Sharding, StateBytes, Work,
};
use crate::core::spot::SpotRisk;
use crate::core::test_support::p4d;

fn facts(name: &str, tflops: f64, fp32: f64, bandwidth: f64, link: f64, bf16: bool) -> GpuFacts {
    GpuFacts {
        name: name.into(),
        variant: String::new(),
        memory_gib: 0.0,
        memory_bandwidth_gbps: bandwidth,
        fp16_bf16_dense_tflops: tflops,
        bf16_supported: bf16,
        fp32_tflops: fp32,
        gpu_link_gbps: link,
        tdp_w: 0.0,
    }
}

#[allow(clippy::too_many_arguments)]
fn offering(
    id: i64,
    provider: &str,
    instance_type: &str,
    gpu: &str,
    count: f64,
    memory: f64,
    interconnect: Interconnect,
    on_demand: f64,
    spot: Option<f64>,
) -> Offering {
    let network_gbps = (interconnect == Interconnect::Efa).then_some(400.0);
    p4d()
        .id(id)
        .at(provider, "r1")
        .instance_type(instance_type)
        .gpus(gpu, count, memory)
        .host(8.0, 64.0)
        .fabric(interconnect, network_gbps)
        .prices(Some(on_demand), spot)
        .build()
}

fn catalog() -> CatalogSnapshot {
    use Interconnect::{Efa, None as Ethernet};
    CatalogSnapshot::new(
        Vec::new(),
        vec![
            facts("A100", 312.0, 19.5, 1555.0, 600.0, true),
            facts("L4", 121.0, 30.3, 300.0, 0.0, true),
            facts("T4", 65.0, 8.1, 320.0, 0.0, false),
            facts("B200", 2250.0, 80.0, 8000.0, 1800.0, true),
        ],
        vec![
            offering(
                1,
                "aws",
                "g6.xlarge",
                "L4",
                1.0,
                24.0,
                Ethernet,
                0.80,
                Some(0.32),
            ),
            offering(
                2,
                "aws",
                "p6-b200.48xlarge",
                "B200",
                8.0,
                180.0,
                Efa,
                113.90,
                None,
            ),
            offering(
                3,
                "lambda",
                "gpu_1x_a100",
                "A100",
                1.0,
                40.0,
                Ethernet,
                1.29,
                None,
            ),
            offering(
                4,
                "vast",
                "1x-RTX_3060",
                "RTX3060",
                1.0,
                12.0,
                Ethernet,
                0.10,
                None,
            ),
            offering(
                5,
                "aws",
                "g4dn.xlarge",
                "T4",
                1.0,
                16.0,
                Ethernet,
                0.526,
                None,
            ),
            offering(
                6,
                "aws",
                "p4d.24xlarge",
                "A100",
                8.0,
                40.0,
                Efa,
                32.77,
                None,
            ),
        ],
    )
}

fn model(params: f64, sharding: Sharding) -> MemoryNeed {
    MemoryNeed::Model {
        params,
        bytes: StateBytes::of(Precision::Bf16, Optimizer::Adamw),
        sharding,
        activation_gib: None,
        activation_reserve: 0.2,
    }
}

/// A 25M-parameter ResNet-style job: 1.2e8 samples of 1.2e10 FLOPs (1.44e18 in all).
fn resnet_job() -> Job {
    Job {
        memory: model(25e6, Sharding::None),
        work: Work::Samples {
            total: 1.2e8,
            flops_per_sample: Some(1.2e10),
        },
        spot_allowed: false,
        top_k: 10,
        ..Job::default()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn a_25m_parameter_job_lands_on_one_a100_not_eight_b200s() {
    let d = select(&catalog(), &SpotRisk::default(), &resnet_job());
    let order: Vec<&str> = d
        .candidates
        .iter()
        .map(|c| c.instance_type.as_str())
        .collect();
    // T4 has no bf16; the RTX 3060 has no datasheet facts to estimate the work from.
    assert_eq!(
        order,
        [
            "gpu_1x_a100",
            "g6.xlarge",
            "p4d.24xlarge",
            "p6-b200.48xlarge"
        ]
    );
    let a100 = &d.candidates[0];
    // A100 (40 GB): ridge 312 / 1.555 = 200.6 FLOPs per byte, ceiling 0.55 × (153 /
    // 200.6)^0.4 = 0.49348; full size 3e9, fill 1 + 0.3 × log10(25e6 / 3e9) = 0.37625;
    // utilisation 0.18567: 57.93 TFLOPS, 1.44e18 FLOPs in 414.30 minutes. Lambda's 5-minute
    // start-up makes 419.30 minutes, billed by the minute as 420: 7 h × $1.29 = $9.03.
    assert!(close(a100.utilisation.unwrap(), 0.185_670), "{a100:?}");
    assert_eq!(a100.scaling_efficiency, Some(1.0));
    assert_eq!(a100.startup_min, 5.0);
    assert!(close(a100.est_hours.unwrap(), 6.988_344), "{a100:?}");
    assert_eq!(a100.billed_hours, Some(7.0));
    assert!(close(a100.est_cost.unwrap(), 9.03), "{a100:?}");
    // Eight B200s: ceiling 0.43112 (ridge 281), fill 0.24754 (full size 3e9 × sqrt(2250 /
    // 312) = 8.06e9), and three doublings of GPUs at 1 - 0.06 × (1 - 0.24754) each: 0.87058.
    // 1672.4 TFLOPS do the work in 14.35 minutes; with AWS's 4-minute start-up 18.35
    // minutes, billed to the second: 0.306111 h × $113.90 = $34.8661.
    let b200 = &d.candidates[3];
    assert!(close(b200.utilisation.unwrap(), 0.106_721), "{b200:?}");
    assert!(
        close(b200.scaling_efficiency.unwrap(), 0.870_580),
        "{b200:?}"
    );
    assert!(close(b200.est_hours.unwrap(), 0.305_849), "{b200:?}");
    assert!(close(b200.billed_hours.unwrap(), 0.306_111), "{b200:?}");
    assert!(close(b200.est_cost.unwrap(), 34.866_056), "{b200:?}");
    let rejected = |reason| {
        d.rejected
            .iter()
            .find(|r| r.reason == reason)
            .map(|r| r.count)
    };
    assert_eq!(rejected(RejectReason::PrecisionUnsupported), Some(2));
    assert_eq!(rejected(RejectReason::NoThroughputData), Some(2));
    let u = &d.assumptions.utilisation;
    assert_eq!((u.model_params, u.job_override), (25e6, None));
    let range = u.range.unwrap();
    assert!(
        close(range[0], 0.106_721) && close(range[1], 0.185_670),
        "{range:?}"
    );
    let terms: Vec<(&str, f64, f64, f64)> = d
        .assumptions
        .providers
        .iter()
        .map(|p| {
            (
                p.provider.as_str(),
                p.startup_min,
                p.billing_increment_sec,
                p.billing_minimum_sec,
            )
        })
        .collect();
    assert_eq!(
        terms,
        [("aws", 4.0, 1.0, 60.0), ("lambda", 5.0, 60.0, 60.0)]
    );
}

#[test]
fn the_job_can_state_its_start_up_and_utilisation() {
    let job = Job {
        utilisation: Some(0.5),
        startup_min: Some(0.0),
        gpus: vec!["L4".into()],
        ..resnet_job()
    };
    let d = select(&catalog(), &SpotRisk::default(), &job);
    let l4 = &d.candidates[0];
    // 121 TFLOPS × 0.5 = 60.5 TFLOPS do 1.44e18 FLOPs in 23,801.65 s with no start-up;
    // AWS bills whole seconds: 23,802 s.
    assert_eq!(l4.utilisation, Some(0.5));
    assert_eq!(l4.startup_min, 0.0);
    let hours = 1.44e18 / 60.5e12 / 3600.0;
    assert!(close(l4.est_hours.unwrap(), hours), "{l4:?}");
    assert!(close(l4.billed_hours.unwrap(), 23_802.0 / 3600.0), "{l4:?}");
    assert_eq!(d.assumptions.utilisation.job_override, Some(0.5));
    assert_eq!(d.assumptions.providers[0].startup_from, "job");
}

#[test]
fn memory_fits_what_is_left_after_the_cuda_context_and_the_allocator() {
    // 15 GiB per GPU: a 16 GiB T4 keeps 16 × 0.95 - 1 = 14.2, a 24 GiB L4 keeps 21.8.
    let job = Job {
        memory: MemoryNeed::Fixed { gib_per_gpu: 15.0 },
        precision: Precision::Fp16,
        gpus: vec!["T4".into(), "L4".into()],
        ..Job::default()
    };
    let d = select(&catalog(), &SpotRisk::default(), &job);
    assert_eq!(
        d.candidates.len(),
        1,
        "L4 on demand (spot needs checkpoints)"
    );
    assert_eq!(d.candidates[0].gpu, "L4");
    assert!(close(d.candidates[0].memory_usable_gib, 21.8));
    assert!(close(d.candidates[0].memory_headroom_gib, 6.8));
    let memory = d
        .rejected
        .iter()
        .find(|r| r.reason == RejectReason::MemoryDoesNotFit)
        .unwrap();
    assert_eq!(memory.count, 2);
    assert!(
        memory.examples[0].ends_with("needs 15.0 GiB per GPU, 14.2 of 16.0 usable"),
        "{:?}",
        memory.examples
    );
}

#[test]
fn a_spot_run_shorter_than_its_checkpoint_interval_loses_half_of_itself() {
    // 1e6 samples of 1.2e10 FLOPs on one L4 (19.778 TFLOPS for 25M parameters): 10.11
    // minutes. Hourly checkpoints: an interruption loses half the run, 5.06 minutes, plus
    // the 5-minute restart, not half an hour.
    let job = Job {
        work: Work::Samples {
            total: 1e6,
            flops_per_sample: Some(1.2e10),
        },
        spot_allowed: true,
        checkpoint_interval_min: Some(60.0),
        gpus: vec!["L4".into()],
        ..resnet_job()
    };
    let d = select(&catalog(), &SpotRisk::default(), &job);
    let spot = d
        .candidates
        .iter()
        .find(|c| c.market == Market::Spot)
        .unwrap();
    let run = 1e6 * 1.2e10 / (121e12 * 0.163_455_f64) / 3600.0;
    let rate = 0.125 / 730.0;
    let loss = (run * 60.0 / 2.0 + 5.0) / 60.0;
    let stretched = run / (1.0 - rate * loss);
    assert!(
        close(spot.est_hours.unwrap(), stretched + 4.0 / 60.0),
        "{spot:?}"
    );
    assert!(
        d.assumptions
            .spot_loss
            .contains("shorter of the checkpoint interval and the run")
    );
}

#[test]
fn fastest_spreads_over_nodes_and_cheapest_stays_on_one() {
    let base = Job {
        memory: model(7e9, Sharding::Fsdp),
        work: Work::Tokens {
            tokens: 1e10,
            params: 7e9,
        },
        nodes_min: 1,
        nodes_max: 2,
        gpus: vec!["A100".into()],
        providers: vec!["aws".into()],
        ..Job::default()
    };
    let fastest = select(
        &catalog(),
        &SpotRisk::default(),
        &Job {
            objective: Objective::Fastest,
            ..base.clone()
        },
    );
    let nodes: Vec<u32> = fastest.candidates.iter().map(|c| c.nodes).collect();
    assert_eq!(nodes, [2, 1]);
    // A 7B model fills the A100s; two EFA nodes keep 0.99 of linear.
    assert!(close(
        fastest.candidates[0].scaling_efficiency.unwrap(),
        0.99
    ));
    let cheapest = select(&catalog(), &SpotRisk::default(), &base);
    assert_eq!(cheapest.candidates.len(), 1);
    assert!(
        cheapest
            .rejected
            .iter()
            .any(|r| r.reason == RejectReason::SingleNodeSuffices && r.count == 2)
    );
}

#[test]
fn a_gpu_without_facts_ranks_by_price_when_there_is_no_work_and_is_named_when_there_is() {
    let no_work = Job {
        memory: MemoryNeed::Fixed { gib_per_gpu: 8.0 },
        precision: Precision::Fp16,
        ..Job::default()
    };
    let d = select(&catalog(), &SpotRisk::default(), &no_work);
    let first = &d.candidates[0];
    assert_eq!(
        (first.gpu.as_str(), first.price_per_hour),
        ("RTX3060", 0.10)
    );
    assert_eq!(first.throughput, None);
    assert_eq!(first.value, None);
    assert_eq!(first.throughput_source, ThroughputSource::Unknown);
    // By throughput, the GPU nobody can estimate comes last.
    let d = select(
        &catalog(),
        &SpotRisk::default(),
        &Job {
            objective: Objective::BestValue,
            top_k: 20,
            ..no_work.clone()
        },
    );
    assert_eq!(d.candidates.last().unwrap().gpu, "RTX3060");
    assert!(
        d.candidates[..d.candidates.len() - 1]
            .iter()
            .all(|c| c.value.is_some())
    );

    let with_work = Job {
        gpus: vec!["RTX3060".into()],
        work: Work::Samples {
            total: 1e6,
            flops_per_sample: Some(1e9),
        },
        ..no_work
    };
    let d = select(&catalog(), &SpotRisk::default(), &with_work);
    assert!(d.candidates.is_empty());
    let s = d.suggestions.iter().find(|s| s.change == "gpus").unwrap();
    assert!(
        s.detail
            .contains("no datasheet TFLOPS for it (catalog/gpus.csv) and no benchmark"),
        "{}",
        s.detail
    );
    assert!(s.detail.contains("RTX3060"), "{}", s.detail);
}

#[test]
fn bf16_on_gpus_without_it_suggests_fp16_and_memory_names_only_allowed_gpus() {
    let job = Job {
        memory: model(1e9, Sharding::None),
        gpus: vec!["T4".into()],
        ..Job::default()
    };
    let d = select(&catalog(), &SpotRisk::default(), &job);
    assert!(d.candidates.is_empty());
    let s = d
        .suggestions
        .iter()
        .find(|s| s.change == "precision")
        .unwrap();
    assert!(
        s.detail
            .starts_with("T4 has no bf16 tensor cores: use precision fp16"),
        "{}",
        s.detail
    );

    // 7B unsharded needs 106.9 GiB: the largest GPU this job may use is the L4, not the
    // B200 it excluded.
    let job = Job {
        memory: model(7e9, Sharding::None),
        precision: Precision::Fp16,
        gpus: vec!["L4".into(), "T4".into()],
        ..Job::default()
    };
    let d = select(&catalog(), &SpotRisk::default(), &job);
    let s = &d.suggestions[0];
    assert_eq!(s.change, "sharding");
    // ceil(104.31 / (21.8 - 2.61)) = 6.
    assert!(
        s.detail.contains(
            "at least 6 GPUs like the largest this job may use, L4 (24 GiB, 21.8 usable)"
        ),
        "{}",
        s.detail
    );
    assert!(!s.detail.contains("B200") && !s.detail.contains("A100"));
}

#[test]
fn reasons_read_as_words_not_rust_names() {
    let d = select(&catalog(), &SpotRisk::default(), &resnet_job());
    let text = d.candidates[0].reasons.join("\n");
    assert!(
        text.starts_with("rank 1 of 4 by least estimated cost: estimated cost $9.03"),
        "{text}"
    );
    assert!(text.contains("each GPU holds all model states"), "{text}");
    assert!(
        text.contains("(0.493 ceiling × 0.376 fill for 25M parameters)"),
        "{text}"
    );
    assert!(
        text.contains("time: 5.0 min start-up + 6.91 h run = 6.99 h; billed 7.00 h per node (60 s increments, 60 s minimum) × $1.29/h = $9.03"),
        "{text}"
    );
    assert!(text.contains("× 1 GPU × 1.000 scaling"), "{text}");
    assert!(
        d.profile.memory_formula.contains("not sharded"),
        "{}",
        d.profile.memory_formula
    );
    // The L4 (19.778 TFLOPS for 25M parameters) runs 20.2244 h, 20.2911 h with the start-up,
    // billed to the second as 20.291111 h × $0.80 = $16.23: $7.20 more.
    let second = d.candidates[1].reasons[0].clone();
    assert!(
        second.contains("estimated cost $16.23, $7.20 more than #1"),
        "{second}"
    );
    for bad in [
        "None",
        "BestValue",
        "Cheapest",
        "Fsdp",
        "share the model states",
    ] {
        assert!(
            !text.contains(bad) && !d.profile.memory_formula.contains(bad),
            "{bad}: {text}"
        );
    }
    let fsdp = Job {
        memory: model(7e9, Sharding::Fsdp),
        work: Work::Tokens {
            tokens: 1e10,
            params: 7e9,
        },
        gpus: vec!["A100".into()],
        gpus_per_node_min: 8.0,
        objective: Objective::BestValue,
        ..Job::default()
    };
    let d = select(&catalog(), &SpotRisk::default(), &fsdp);
    let text = d.candidates[0].reasons.join("\n");
    assert!(
        text.contains("by most throughput per hourly dollar"),
        "{text}"
    );
    assert!(
        text.contains("FSDP splits all model states over 8 GPUs"),
        "{text}"
    );
}
