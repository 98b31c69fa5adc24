//! Offerings queries over the whole bundled catalog, as `GET /v1/offerings` runs them (the
//! in-memory snapshot; no database). Run with `cargo bench --bench offerings_query`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use trainscaler::catalog::bundled::bundled_snapshot;
use trainscaler::core::catalog::{CatalogSnapshot, Market};
use trainscaler::core::money::Micros;
use trainscaler::core::query::OfferingQuery;

fn queries(c: &mut Criterion) {
    let catalog = bundled_snapshot();
    let offerings = catalog.offerings().to_vec();
    let providers = catalog.providers().to_vec();
    let gpus = catalog.gpus().to_vec();
    let cases = [
        (
            "first_page_unfiltered",
            OfferingQuery {
                limit: 100,
                ..Default::default()
            },
        ),
        (
            "gpu_a100_min8",
            OfferingQuery {
                gpu: Some("A100".into()),
                min_gpus: Some(8.0),
                limit: 100,
                ..Default::default()
            },
        ),
        (
            "gpu_h100_spot_sorted",
            OfferingQuery {
                gpu: Some("h100".into()),
                market: Some(Market::Spot),
                limit: 100,
                ..Default::default()
            },
        ),
        (
            "scan_min_mem80_max_price",
            OfferingQuery {
                min_gpu_memory_gib: Some(80.0),
                max_price: Some(Micros(40_000_000)),
                limit: 100,
                ..Default::default()
            },
        ),
        (
            "provider_azure_all",
            OfferingQuery {
                provider: Some("azure".into()),
                limit: 1000,
                ..Default::default()
            },
        ),
    ];
    let mut group = c.benchmark_group("offerings_query");
    for (name, q) in &cases {
        group.bench_function(*name, |b| {
            b.iter(|| black_box(catalog.query(black_box(q)).items.len()))
        });
    }
    group.finish();
    c.bench_function("snapshot_build_whole_catalog", |b| {
        b.iter(|| {
            black_box(CatalogSnapshot::new(
                providers.clone(),
                gpus.clone(),
                offerings.clone(),
            ))
        })
    });
}

criterion_group!(benches, queries);
criterion_main!(benches);
