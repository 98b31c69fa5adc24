//! Offerings queries over the whole bundled catalog, as `GET /v1/offerings` runs them (the
//! in-memory snapshot; no database). Run with `cargo bench --bench offerings_query`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use trainscaler::catalog::bundled::BUNDLED;
use trainscaler::catalog::gpu_facts::{BUNDLED_GPUS_CSV, parse_gpu_facts};
use trainscaler::catalog::skypilot;
use trainscaler::core::catalog::{CatalogSnapshot, Market, Offering, Provider};
use trainscaler::core::money::Micros;
use trainscaler::core::query::OfferingQuery;

fn bundled_offerings() -> Vec<Offering> {
    let mut id = 0;
    BUNDLED
        .iter()
        .flat_map(|b| skypilot::parse(b.provider, b.csv).expect("bundled catalog parses"))
        .map(|o| {
            id += 1;
            Offering {
                id,
                key: o.key,
                spec: o.spec,
                on_demand: o.on_demand,
                spot: o.spot,
                price_observed_at_ms: Some(0),
            }
        })
        .collect()
}

fn snapshot(offerings: Vec<Offering>) -> CatalogSnapshot {
    let providers = BUNDLED
        .iter()
        .map(|b| Provider {
            name: b.provider.into(),
            display_name: b.provider.into(),
        })
        .collect();
    CatalogSnapshot::new(
        providers,
        parse_gpu_facts(BUNDLED_GPUS_CSV).unwrap(),
        offerings,
    )
}

fn queries(c: &mut Criterion) {
    let offerings = bundled_offerings();
    let catalog = snapshot(offerings.clone());
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
        b.iter(|| black_box(snapshot(offerings.clone())))
    });
}

criterion_group!(benches, queries);
criterion_main!(benches);
