//! One instance selection over the whole bundled catalog (all providers), as `POST /decide`
//! will run it. Run with `cargo bench --bench select_instance`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use trainscaler::catalog::bundled::bundled_snapshot;
use trainscaler::catalog::spot_advisor::BUNDLED_SPOT_RISK;
use trainscaler::core::job::{Job, MemoryNeed, Optimizer, Precision, Sharding, StateBytes, Work};
use trainscaler::core::select::select;

fn selection(c: &mut Criterion) {
    let catalog = bundled_snapshot();
    let risk = &*BUNDLED_SPOT_RISK;
    let memory = MemoryNeed::Model {
        params: 7e9,
        bytes: StateBytes::of(Precision::Bf16, Optimizer::Adamw),
        sharding: Sharding::Fsdp,
        activation_gib: None,
        activation_reserve: 0.2,
    };
    let single_node = Job {
        memory: memory.clone(),
        work: Work::Tokens {
            tokens: 20e9,
            params: 7e9,
        },
        checkpoint_interval_min: Some(10.0),
        ..Job::default()
    };
    let node_range = Job {
        nodes_min: 1,
        nodes_max: 8,
        ..single_node.clone()
    };
    let mut group = c.benchmark_group("select_instance");
    group.bench_function("7b_fsdp_tokens_spot_1_node", |b| {
        b.iter(|| {
            black_box(
                select(&catalog, risk, black_box(&single_node))
                    .candidates
                    .len(),
            )
        })
    });
    group.bench_function("7b_fsdp_tokens_spot_1_to_8_nodes", |b| {
        b.iter(|| {
            black_box(
                select(&catalog, risk, black_box(&node_range))
                    .candidates
                    .len(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, selection);
criterion_main!(benches);
