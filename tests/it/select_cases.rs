//! Instance selection on the real bundled catalog, with hand-computed expectations.

use std::sync::LazyLock;

use trainscaler::catalog::bundled::bundled_snapshot;
use trainscaler::catalog::spot_advisor::BUNDLED_SPOT_RISK;
use trainscaler::core::catalog::{CatalogSnapshot, Interconnect, Market};
use trainscaler::core::decision::RejectReason;
use trainscaler::core::job::{
    GIB, Job, MemoryNeed, Optimizer, Precision, Sharding, StateBytes, Work,
};
use trainscaler::core::select::select;

static CATALOG: LazyLock<CatalogSnapshot> = LazyLock::new(bundled_snapshot);

fn model(params: f64, sharding: Sharding) -> MemoryNeed {
    MemoryNeed::Model {
        params,
        bytes: StateBytes::of(Precision::Bf16, Optimizer::Adamw),
        sharding,
        activation_gib: None,
        activation_reserve: 0.2,
    }
}

fn offering(id: i64) -> &'static trainscaler::core::catalog::Offering {
    CATALOG
        .offering(id)
        .expect("candidate names a catalog offering")
}

#[test]
fn a_7b_adamw_job_unsharded_fits_no_80gb_gpu_and_is_told_to_shard_over_two() {
    let job = Job {
        memory: model(7e9, Sharding::None),
        gpus: vec![
            "A100-80GB".into(),
            "H100".into(),
            "A100".into(),
            "L40S".into(),
        ],
        ..Job::default()
    };
    let d = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
    assert!(d.candidates.is_empty());
    // 7e9 × 16 B = 104.3 GiB of states per GPU, more than any A100, H100 or L40S has.
    // 104.31 GiB of states + 2.61 GiB of activations (20 % of the bf16 weights).
    assert!((d.profile.memory_per_gpu_gib_single - 106.92).abs() < 0.01);
    assert_eq!(d.profile.bound, "memory");
    let memory = d
        .rejected
        .iter()
        .find(|r| r.reason == RejectReason::MemoryDoesNotFit)
        .unwrap();
    assert!(memory.count > 0 && !memory.examples.is_empty());
    let shard = d
        .suggestions
        .iter()
        .find(|s| s.change == "sharding")
        .expect("a sharding suggestion");
    // The largest allowed GPU is Vast's H100 NVL (93.6 GiB, of which 93.6 × 0.95 - 1 = 87.92
    // usable after the CUDA context and allocator overhead): ceil(104.31 / (87.92 - 2.61)) = 2.
    assert!(
        shard.detail.contains(
            "at least 2 GPUs like the largest this job may use, H100 (94 GiB, 87.9 usable)"
        ),
        "{}",
        shard.detail
    );
}

#[test]
fn the_same_job_with_fsdp_over_8_gpus_lands_on_8x80gb_nodes() {
    let job = Job {
        memory: model(7e9, Sharding::Fsdp),
        work: Work::Tokens {
            tokens: 20e9,
            params: 7e9,
        },
        gpus_per_node_min: 8.0,
        exclude_gpus: vec![
            "H200".into(),
            "B200".into(),
            "B300".into(),
            "MI300X".into(),
            "GH200".into(),
        ],
        ..Job::default()
    };
    let d = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
    let best = &d.candidates[0];
    assert_eq!((best.gpus_per_node, best.nodes), (8.0, 1));
    // An 80 GB-class GPU (H100 and A100-80GB state 79.6 to 80 GiB depending on the catalog).
    let memory = offering(best.offering_id).spec.gpu_memory_gib;
    assert!((79.0..=80.0).contains(&memory), "{memory}");
    // 15.6 GiB needed of 80.
    assert!((best.memory_needed_gib - 15.65).abs() < 0.01);
    // Cheapest means least estimated cost: sorted ascending, with hours and cost consistent.
    for pair in d.candidates.windows(2) {
        assert!(pair[0].est_cost.unwrap() <= pair[1].est_cost.unwrap());
    }
    // The cost is the billed time (from launch, start-up included, rounded up to AWS's or
    // GCP's whole second) at the nodes' price.
    let c = &d.candidates[0];
    let (hours, billed) = (c.est_hours.unwrap(), c.billed_hours.unwrap());
    assert!(billed >= hours && billed - hours < 1.0 / 3600.0, "{c:?}");
    assert!((c.est_cost.unwrap() - billed * c.price_per_hour_total).abs() < 1e-6);
}

#[test]
fn a_100m_model_lands_on_the_cheapest_single_gpu() {
    let job = Job {
        memory: model(1e8, Sharding::None),
        spot_allowed: false,
        ..Job::default()
    };
    let d = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
    let best = &d.candidates[0];
    assert_eq!(best.gpus_per_node, 1.0);
    assert_eq!(best.market, Market::OnDemand);
    // No work given: cheapest is the lowest hourly price among on-demand offerings of whole
    // GPUs that can train in bf16 (or have no datasheet facts to say: with no work to
    // estimate they rank by price) and leave the 1.53 GiB the job needs (1e8 × 16 B + 20 %
    // of the bf16 weights) after the CUDA context and allocator overhead.
    let need = 1e8 * 16.0 / GIB + 0.2 * 1e8 * 2.0 / GIB;
    let cheapest = CATALOG
        .offerings()
        .iter()
        .filter(|o| CATALOG.gpu(&o.spec.gpu).is_none_or(|g| g.bf16_supported))
        .filter(|o| o.spec.gpu_count >= 1.0 && o.spec.gpu_memory_gib * 0.95 - 1.0 >= need)
        .filter_map(|o| o.on_demand)
        .min()
        .unwrap();
    assert_eq!(best.price_per_hour, cheapest.dollars());
}

#[test]
fn a_4_node_job_only_gets_fast_interconnects() {
    let job = Job {
        memory: model(7e9, Sharding::Fsdp),
        work: Work::Tokens {
            tokens: 100e9,
            params: 7e9,
        },
        nodes_min: 4,
        nodes_max: 4,
        top_k: 50,
        ..Job::default()
    };
    let d = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
    assert!(!d.candidates.is_empty());
    for c in &d.candidates {
        assert_eq!(c.nodes, 4);
        let o = offering(c.offering_id);
        assert!(
            matches!(
                o.spec.interconnect,
                Interconnect::Efa
                    | Interconnect::Infiniband
                    | Interconnect::Roce
                    | Interconnect::GpudirectTcpx
            ),
            "{} has {:?}",
            o.key.instance_type,
            o.spec.interconnect
        );
    }
    assert!(
        d.rejected
            .iter()
            .any(|r| r.reason == RejectReason::NoFastInterconnect && r.count > 0)
    );
    assert!(d.profile.distributed);
}

#[test]
fn spot_is_chosen_with_checkpoints_when_cheaper_and_never_without() {
    let base = Job {
        memory: model(7e9, Sharding::Fsdp),
        work: Work::Tokens {
            tokens: 20e9,
            params: 7e9,
        },
        gpus_per_node_min: 8.0,
        providers: vec!["aws".into()],
        gpus: vec!["A100".into()],
        top_k: 20,
        ..Job::default()
    };
    let with = select(
        &CATALOG,
        &BUNDLED_SPOT_RISK,
        &Job {
            checkpoint_interval_min: Some(10.0),
            ..base.clone()
        },
    );
    let best = &with.candidates[0];
    assert_eq!(best.market, Market::Spot);
    // p4d.24xlarge spot in use1-az1 is $2.4655/h; us-east-1 is in the advisor's >20 % bucket:
    // 0.25/730 per hour, each interruption losing 5 + 5 minutes.
    let p4d = with
        .candidates
        .iter()
        .find(|c| c.zone.as_deref() == Some("use1-az1") && c.market == Market::Spot)
        .expect("p4d in use1-az1 on spot");
    let rate = 0.25 / 730.0;
    // A 7B model fills an A100 (40 GB: 312 TFLOPS over 1.555 TB/s): utilisation is the
    // ceiling 0.55 × (153 / 200.6)^0.4 = 0.4966, and eight GPUs in one node lose nothing.
    let utilisation = 0.55 * (153.0 / (312.0 / 1.555f64)).powf(0.4);
    assert!(
        (p4d.utilisation.unwrap() - utilisation).abs() < 1e-12,
        "{p4d:?}"
    );
    let plain_hours = 20e9 * 6.0 * 7e9 / (312e12 * utilisation * 8.0) / 3600.0;
    let stretched = plain_hours / (1.0 - rate * (10.0 / 60.0));
    // Four minutes of AWS start-up come first.
    let hours = stretched + 4.0 / 60.0;
    assert!(
        (p4d.est_hours.unwrap() - hours).abs() < 1e-9,
        "{} vs {hours}",
        p4d.est_hours.unwrap()
    );
    assert!((p4d.expected_interruptions - rate * stretched).abs() < 1e-12);
    // Billed in whole seconds.
    let billed = (hours * 3600.0).ceil() / 3600.0;
    assert!((p4d.est_cost.unwrap() - billed * 2.4655).abs() < 1e-6);

    let without = select(&CATALOG, &BUNDLED_SPOT_RISK, &base);
    assert!(
        without
            .candidates
            .iter()
            .all(|c| c.market == Market::OnDemand)
    );
    assert!(
        without
            .rejected
            .iter()
            .any(|r| r.reason == RejectReason::SpotNotAllowed && r.count > 0)
    );
}

#[test]
fn a_deadline_removes_slow_options_and_says_what_would_meet_it() {
    let job = Job {
        memory: model(1e9, Sharding::None),
        work: Work::Tokens {
            tokens: 50e9,
            params: 1e9,
        },
        deadline_hours: Some(24.0),
        top_k: 100,
        ..Job::default()
    };
    let d = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
    assert!(!d.candidates.is_empty());
    assert!(d.candidates.iter().all(|c| c.est_hours.unwrap() <= 24.0));
    assert!(
        d.rejected
            .iter()
            .any(|r| r.reason == RejectReason::MissesDeadline && r.count > 0)
    );
    let impossible = select(
        &CATALOG,
        &BUNDLED_SPOT_RISK,
        &Job {
            deadline_hours: Some(0.01),
            ..job
        },
    );
    assert!(impossible.candidates.is_empty());
    assert!(
        impossible
            .suggestions
            .iter()
            .any(|s| s.change == "deadline_hours")
    );
}

#[test]
fn the_same_request_gives_the_same_answer() {
    let job = Job {
        memory: model(3e9, Sharding::Zero2),
        work: Work::Tokens {
            tokens: 1e10,
            params: 3e9,
        },
        ..Job::default()
    };
    let a = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
    let b = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
    assert_eq!(a, b);
}

#[test]
fn small_file_data_needs_local_nvme_that_holds_it() {
    use trainscaler::core::job::DataLayout;
    let job = Job {
        memory: model(1e9, Sharding::None),
        data_layout: DataLayout::ManySmallFiles,
        dataset_gib: Some(2000.0),
        top_k: 100,
        ..Job::default()
    };
    let d = select(&CATALOG, &BUNDLED_SPOT_RISK, &job);
    assert!(!d.candidates.is_empty());
    for c in &d.candidates {
        // 2000 GiB = 2147.5 GB.
        let nvme = offering(c.offering_id).spec.local_nvme_gb.unwrap();
        assert!(nvme >= 2147.48, "{} has {nvme} GB", c.instance_type);
    }
    assert!(
        d.rejected
            .iter()
            .any(|r| r.reason == RejectReason::NoLocalNvme && r.count > 0)
    );
    assert!(d.profile.io_sensitive);
}
