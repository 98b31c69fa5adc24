//! The store contract: every case runs against PostgreSQL and SQLite alike.

use trainscaler::app::open_store;
use trainscaler::catalog::skypilot;
use trainscaler::core::catalog::{Market, OfferingKey};
use trainscaler::core::money::Micros;
use trainscaler::store::{CatalogImport, HistoryFilter, NewObservation, Store, StoreError};

use crate::common::{Backend, aws_fixture, fresh_store};
use crate::on_both_backends;

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

async fn import(store: &Store, csv: &str, observed_at_ms: i64) -> trainscaler::store::ImportReport {
    try_import(store, "aws", csv, observed_at_ms)
        .await
        .expect("import")
}

/// Imports `csv` (AWS offerings in SkyPilot's layout) as `provider`'s catalog.
async fn try_import(
    store: &Store,
    provider: &str,
    csv: &str,
    observed_at_ms: i64,
) -> Result<trainscaler::store::ImportReport, StoreError> {
    let offerings = skypilot::parse("aws", csv).expect("fixture parses");
    store
        .import_catalog(
            CatalogImport {
                provider,
                offerings: &offerings,
                observed_at_ms,
                source: "import",
            },
            observed_at_ms,
        )
        .await
}

async fn all_history(store: &Store) -> Vec<trainscaler::store::PricePoint> {
    store
        .price_history(&HistoryFilter {
            limit: 100_000,
            ..Default::default()
        })
        .await
        .expect("history")
}

fn key(zone: &str, instance_type: &str) -> OfferingKey {
    OfferingKey {
        provider: "aws".into(),
        region: "us-east-1".into(),
        zone: zone.into(),
        instance_type: instance_type.into(),
    }
}

fn observation(zone: &str, market: Market, dollars: f64, at: i64) -> NewObservation {
    NewObservation {
        key: key(zone, "p4d.24xlarge"),
        market,
        price: Micros::from_dollars(dollars).unwrap(),
        observed_at_ms: at,
    }
}

async fn migrations_create_the_known_providers(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    let names: Vec<String> = store
        .providers()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    for p in ["aws", "gcp", "azure", "lambda", "nebius", "vast"] {
        assert!(names.contains(&p.to_string()), "{p} missing from {names:?}");
    }
    // Applying again is a no-op.
    store.migrate().await.unwrap();
}

async fn importing_the_same_file_twice_changes_nothing(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    let first = import(&store, &aws_fixture("2.4655"), T0).await;
    assert_eq!((first.offerings_added, first.prices_appended), (3, 5));
    let history_after_first = all_history(&store).await;
    let second = import(&store, &aws_fixture("2.4655"), T0 + 3_600_000).await;
    assert_eq!(
        second.offerings_added + second.offerings_updated + second.prices_appended,
        0
    );
    assert_eq!(second.offerings_unchanged, 3);
    assert_eq!(all_history(&store).await, history_after_first);
}

async fn a_changed_price_is_appended_with_its_observation_time(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    import(&store, &aws_fixture("2.4655"), T0).await;
    let later = T0 + 86_400_000;
    let report = import(&store, &aws_fixture("3.1"), later).await;
    assert_eq!(report.prices_appended, 1);
    let spot: Vec<_> = all_history(&store)
        .await
        .into_iter()
        .filter(|p| p.market == Market::Spot && p.key == key("use1-az1", "p4d.24xlarge"))
        .map(|p| (p.price.0, p.observed_at_ms))
        .collect();
    assert_eq!(spot, vec![(2_465_500, T0), (3_100_000, later)]);
    let rows = store.load_catalog().await.unwrap();
    let p4d = rows
        .offerings
        .iter()
        .find(|o| o.key == key("use1-az1", "p4d.24xlarge"))
        .unwrap();
    assert_eq!(p4d.spot, Some(Micros(3_100_000)));
    assert_eq!(p4d.on_demand, Some(Micros(21_957_642)));
    assert_eq!(p4d.price_observed_at_ms, Some(later));
}

async fn a_changed_spec_updates_the_offering_in_place(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    import(&store, &aws_fixture("2.4655"), T0).await;
    let bigger =
        aws_fixture("2.4655").replace("g5.xlarge,A10G,1.0,4.0,16.0", "g5.xlarge,A10G,1.0,4.0,32.0");
    let report = import(&store, &bigger, T0).await;
    assert_eq!((report.offerings_updated, report.offerings_added), (1, 0));
    let rows = store.load_catalog().await.unwrap();
    let g5: Vec<_> = rows
        .offerings
        .iter()
        .filter(|o| o.key.instance_type == "g5.xlarge")
        .collect();
    assert_eq!(g5.len(), 1);
    assert_eq!(g5[0].spec.memory_gib, 32.0);
}

async fn importing_for_an_unknown_provider_fails(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    let err = try_import(&store, "nosuchcloud", &aws_fixture("1"), T0)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownProvider(p) if p == "nosuchcloud"));
    assert!(store.load_catalog().await.unwrap().offerings.is_empty());
}

async fn a_price_batch_with_one_bad_item_writes_nothing(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    import(&store, &aws_fixture("2.4655"), T0).await;
    let before = all_history(&store).await;
    let mut bad = observation("use1-az9", Market::Spot, 2.0, T0 + 1);
    bad.key.zone = "use1-az9".into();
    let batch = vec![observation("use1-az1", Market::Spot, 2.0, T0 + 1), bad];
    let err = store.record_prices(&batch, "api", T0).await.unwrap_err();
    assert!(
        matches!(err, StoreError::UnknownOffering { index: 1, .. }),
        "{err:?}"
    );
    assert_eq!(all_history(&store).await, before);
}

async fn resending_an_observation_is_a_no_op(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    import(&store, &aws_fixture("2.4655"), T0).await;
    let batch = vec![
        observation("use1-az1", Market::Spot, 2.2, T0 + 10),
        observation("use1-az2", Market::Spot, 2.3, T0 + 10),
    ];
    let first = store.record_prices(&batch, "api", T0).await.unwrap();
    assert_eq!((first.inserted, first.duplicates), (2, 0));
    let count = all_history(&store).await.len();
    let again = store.record_prices(&batch, "api", T0).await.unwrap();
    assert_eq!((again.inserted, again.duplicates), (0, 2));
    assert_eq!(all_history(&store).await.len(), count);
}

async fn a_different_price_for_a_recorded_observation_is_a_conflict(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    import(&store, &aws_fixture("2.4655"), T0).await;
    store
        .record_prices(
            &[observation("use1-az1", Market::Spot, 2.2, T0 + 10)],
            "api",
            T0,
        )
        .await
        .unwrap();
    let err = store
        .record_prices(
            &[
                observation("use1-az2", Market::Spot, 2.0, T0 + 20),
                observation("use1-az1", Market::Spot, 9.9, T0 + 10),
            ],
            "api",
            T0,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::ConflictingObservation { index: 1 }),
        "{err:?}"
    );
    // The first item of the failed batch was rolled back with it.
    let az2_spot = all_history(&store)
        .await
        .into_iter()
        .filter(|p| p.key.zone == "use1-az2" && p.market == Market::Spot)
        .count();
    assert_eq!(az2_spot, 0);
}

async fn history_filters_by_market_and_time_and_pages_by_keyset(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    import(&store, &aws_fixture("2.4655"), T0).await;
    let batch: Vec<_> = (1..=5)
        .map(|h| {
            observation(
                "use1-az1",
                Market::Spot,
                2.0 + h as f64 / 10.0,
                T0 + h * 3_600_000,
            )
        })
        .collect();
    store.record_prices(&batch, "api", T0).await.unwrap();
    let window = HistoryFilter {
        instance_type: Some("p4d.24xlarge".into()),
        market: Some(Market::Spot),
        from_ms: Some(T0 + 2 * 3_600_000),
        to_ms: Some(T0 + 5 * 3_600_000),
        limit: 100,
        ..Default::default()
    };
    let prices: Vec<i64> = store
        .price_history(&window)
        .await
        .unwrap()
        .iter()
        .map(|p| p.price.0)
        .collect();
    assert_eq!(prices, vec![2_200_000, 2_300_000, 2_400_000]);
    let first_two = store
        .price_history(&HistoryFilter {
            limit: 2,
            ..window.clone()
        })
        .await
        .unwrap();
    let last = first_two.last().unwrap();
    let rest = store
        .price_history(&HistoryFilter {
            after: Some((last.observed_at_ms, last.id)),
            ..window.clone()
        })
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|p| p.price.0).collect::<Vec<_>>(),
        vec![2_400_000]
    );
    let newest = HistoryFilter {
        newest_first: true,
        limit: 2,
        ..window.clone()
    };
    let newest_two = store.price_history(&newest).await.unwrap();
    assert_eq!(
        newest_two.iter().map(|p| p.price.0).collect::<Vec<_>>(),
        vec![2_400_000, 2_300_000]
    );
    let last = newest_two.last().unwrap();
    let older = store
        .price_history(&HistoryFilter {
            after: Some((last.observed_at_ms, last.id)),
            ..newest
        })
        .await
        .unwrap();
    assert_eq!(
        older.iter().map(|p| p.price.0).collect::<Vec<_>>(),
        vec![2_200_000]
    );
}

async fn price_history_cannot_be_edited_or_deleted(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    import(&store, &aws_fixture("2.4655"), T0).await;
    // Each backend has its own pool type; the statements are the same.
    macro_rules! refusals {
        ($pool:expr) => {{
            let mut errors = Vec::new();
            for sql in [
                "UPDATE price_observations SET price_micros = 1",
                "DELETE FROM price_observations",
            ] {
                errors.push(
                    sqlx::query(sql)
                        .execute($pool)
                        .await
                        .unwrap_err()
                        .to_string(),
                );
            }
            errors
        }};
    }
    let errors = match &store {
        Store::Postgres(pg) => refusals!(pg.pool()),
        Store::Sqlite(lite) => refusals!(lite.pool()),
    };
    for e in errors {
        assert!(e.contains("append-only"), "{e}");
    }
    assert_eq!(all_history(&store).await.len(), 5);
}

async fn every_catalog_change_moves_the_version(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    let v0 = store.catalog_version().await.unwrap();
    import(&store, &aws_fixture("2.4655"), T0).await;
    let v1 = store.catalog_version().await.unwrap();
    assert!(v1 > v0);
    import(&store, &aws_fixture("2.4655"), T0).await;
    assert_eq!(
        store.catalog_version().await.unwrap(),
        v1,
        "a no-op import is not a change"
    );
    store
        .record_prices(
            &[observation("use1-az1", Market::Spot, 2.2, T0 + 10)],
            "api",
            T0,
        )
        .await
        .unwrap();
    let v2 = store.catalog_version().await.unwrap();
    assert!(v2 > v1);
    assert_eq!(store.load_catalog().await.unwrap().version, v2);
}

async fn an_import_conflicting_midway_writes_nothing(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    import(&store, &aws_fixture("2.4655"), T0).await;
    let before = (
        store.load_catalog().await.unwrap().offerings.len(),
        all_history(&store).await,
    );
    // A new offering first, then a different p4d spot price at the same observation time.
    let csv = aws_fixture("9.99") + "g5.2xlarge,A10G,1.0,8.0,32.0,,1.212,,us-east-1,,x86_64\n";
    let err = try_import(&store, "aws", &csv, T0).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::ConflictingImport {
                market: Market::Spot,
                ..
            }
        ),
        "{err:?}"
    );
    let after = (
        store.load_catalog().await.unwrap().offerings.len(),
        all_history(&store).await,
    );
    assert_eq!(after, before);
}

async fn concurrent_seeding_loads_the_catalog_exactly_once(backend: Backend) {
    let (db, first) = fresh_store(backend).await;
    let second = open_store(&db.config()).await.unwrap();
    let (a, b) = tokio::join!(
        trainscaler::app::seed_bundled_catalog(&first),
        trainscaler::app::seed_bundled_catalog(&second)
    );
    let seeded = [a.unwrap(), b.unwrap()];
    assert_eq!(
        seeded.iter().filter(|r| r.is_some()).count(),
        1,
        "{seeded:?}"
    );
}

async fn seeding_loads_the_bundled_catalog_only_once(backend: Backend) {
    let (_db, store) = fresh_store(backend).await;
    let first = trainscaler::app::seed_bundled_catalog(&store)
        .await
        .unwrap()
        .expect("seeded");
    assert!(first.offerings_added > 3000, "{first:?}");
    assert!(
        trainscaler::app::seed_bundled_catalog(&store)
            .await
            .unwrap()
            .is_none()
    );
    let rows = store.load_catalog().await.unwrap();
    assert_eq!(rows.offerings.len() as u64, first.offerings_added);
    assert!(
        rows.gpus
            .iter()
            .any(|g| g.name == "H200" && g.memory_gib == 141.0)
    );
}

on_both_backends!(
    migrations_create_the_known_providers,
    importing_the_same_file_twice_changes_nothing,
    a_changed_price_is_appended_with_its_observation_time,
    a_changed_spec_updates_the_offering_in_place,
    importing_for_an_unknown_provider_fails,
    a_price_batch_with_one_bad_item_writes_nothing,
    resending_an_observation_is_a_no_op,
    a_different_price_for_a_recorded_observation_is_a_conflict,
    history_filters_by_market_and_time_and_pages_by_keyset,
    price_history_cannot_be_edited_or_deleted,
    seeding_loads_the_bundled_catalog_only_once,
    every_catalog_change_moves_the_version,
    an_import_conflicting_midway_writes_nothing,
    concurrent_seeding_loads_the_catalog_exactly_once,
);
