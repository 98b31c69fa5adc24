//! Catalog imports, written once for both backends: a provider's offerings are upserted and
//! each price that differs from the latest one recorded is appended, under the catalog lock,
//! all or nothing. Seeding is an import that only runs into an empty catalog.

use std::collections::HashMap;

use super::backend::{Backend, Tx, exists};
use super::catalog_rows::{InsertedOfferingRecord, OfferingRecord, RecordedPriceRecord};
use super::catalog_sql::{
    OFFERINGS_WITH_LATEST_PRICES, mark_catalog_changed, spec_args, upsert_gpus_in,
};
use super::stmt::Stmt;
use super::{CatalogImport, ImportReport, StoreError, StoreResult};
use crate::catalog::ImportedOffering;
use crate::core::catalog::{GpuFacts, InstanceSpec, Market, Offering, OfferingKey};
use crate::core::money::Micros;

/// Loads `imports` only if the catalog holds no offering yet; `None` when it was not empty.
pub(super) async fn seed_if_empty<B: Backend>(
    db: &B,
    gpus: &[GpuFacts],
    imports: &[CatalogImport<'_>],
    now_ms: i64,
) -> StoreResult<Option<ImportReport>> {
    let mut tx = db.begin_write().await?;
    B::lock_catalog(&mut tx).await?;
    let count = Stmt::new("SELECT COUNT(*) AS n FROM offerings");
    let (count,) = B::fetch_one::<(i64,)>(&mut tx, count).await?;
    if count > 0 {
        return Ok(None);
    }
    upsert_gpus_in::<B>(&mut tx, gpus).await?;
    let mut total = ImportReport::default();
    for import in imports {
        let r = import_in::<B>(&mut tx, *import, now_ms).await?;
        total.offerings_added += r.offerings_added;
        total.prices_appended += r.prices_appended;
    }
    mark_catalog_changed::<B>(&mut tx).await?;
    tx.commit().await?;
    Ok(Some(total))
}

pub(super) async fn import_catalog<B: Backend>(
    db: &B,
    import: CatalogImport<'_>,
    now_ms: i64,
) -> StoreResult<ImportReport> {
    let mut tx = db.begin_write().await?;
    B::lock_catalog(&mut tx).await?;
    let report = import_in::<B>(&mut tx, import, now_ms).await?;
    if report.offerings_added + report.offerings_updated + report.prices_appended > 0 {
        mark_catalog_changed::<B>(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(report)
}

async fn import_in<B: Backend>(
    tx: &mut Tx<B>,
    import: CatalogImport<'_>,
    now_ms: i64,
) -> StoreResult<ImportReport> {
    let known = Stmt::new("SELECT 1 FROM providers WHERE name = $1").bind(import.provider);
    if !exists::<B>(tx, known).await? {
        return Err(StoreError::UnknownProvider(import.provider.to_string()));
    }
    let current = Stmt::new(format!(
        "{OFFERINGS_WITH_LATEST_PRICES} WHERE o.provider = $1"
    ))
    .bind(import.provider);
    let rows: Vec<OfferingRecord> = B::fetch_all(tx, current).await?;
    let mut existing = HashMap::with_capacity(rows.len());
    for row in rows {
        let o = Offering::try_from(row)?;
        existing.insert(o.key.clone(), o);
    }
    let mut report = ImportReport::default();
    let mut added = Vec::new();
    let mut appends = Vec::new();
    for new in import.offerings {
        let latest = match existing.get(&new.key) {
            Some(old) => {
                if old.spec == new.spec {
                    report.offerings_unchanged += 1;
                } else {
                    update_spec::<B>(tx, old.id, &new.spec, now_ms).await?;
                    report.offerings_updated += 1;
                }
                (old.on_demand, old.spot)
            }
            None => {
                added.push(new);
                (None, None)
            }
        };
        for (market, price, last) in [
            (Market::OnDemand, new.on_demand, latest.0),
            (Market::Spot, new.spot, latest.1),
        ] {
            if let Some(price) = price.filter(|p| last != Some(*p)) {
                appends.push((&new.key, market, price));
            }
        }
    }
    report.offerings_added = added.len() as u64;
    let mut ids: HashMap<&OfferingKey, i64> = existing.iter().map(|(k, o)| (k, o.id)).collect();
    ids.extend(B::insert_offerings(tx, &added, now_ms).await?);
    // A price already recorded at this very time must agree with the file.
    let recorded = prices_observed_at::<B>(tx, import.provider, import.observed_at_ms).await?;
    let mut rows = Vec::with_capacity(appends.len());
    for (key, market, price) in appends {
        let Some(&id) = ids.get(key) else { continue };
        match recorded.get(&(id, market)) {
            None => rows.push((id, market, price)),
            Some(&p) if p == price.0 => {}
            Some(_) => {
                return Err(StoreError::ConflictingImport {
                    key: key.clone(),
                    market,
                });
            }
        }
    }
    report.prices_appended =
        B::insert_observations(tx, &rows, import.observed_at_ms, import.source, now_ms).await?;
    Ok(report)
}

/// Prices of `provider`'s offerings recorded at exactly `observed_at_ms`.
async fn prices_observed_at<B: Backend>(
    tx: &mut Tx<B>,
    provider: &str,
    observed_at_ms: i64,
) -> StoreResult<HashMap<(i64, Market), i64>> {
    let stmt = Stmt::new(
        "SELECT p.offering_id, p.market, p.price_micros
         FROM price_observations p JOIN offerings o ON o.id = p.offering_id
         WHERE o.provider = $1 AND p.observed_at_ms = $2",
    )
    .bind(provider)
    .bind(observed_at_ms);
    let rows: Vec<RecordedPriceRecord> = B::fetch_all(tx, stmt).await?;
    Ok(rows
        .into_iter()
        .map(RecordedPriceRecord::keyed)
        .collect::<Result<_, sqlx::Error>>()?)
}

async fn update_spec<B: Backend>(
    tx: &mut Tx<B>,
    id: i64,
    spec: &InstanceSpec,
    now_ms: i64,
) -> StoreResult<()> {
    let mut update = Stmt::new(
        "UPDATE offerings SET gpu = $1, gpu_count = $2, gpu_memory_gib = $3,
             vcpus = $4, memory_gib = $5, network_gbps = $6, interconnect = $7,
             local_nvme_gb = $8, arch = $9, updated_at_ms = $10
         WHERE id = $11",
    );
    for arg in spec_args(spec) {
        update = update.bind(arg);
    }
    B::execute(tx, update.bind(now_ms).bind(id)).await?;
    Ok(())
}

/// Inserts new offerings in multi-row statements of at most 500 rows (15 parameters a row
/// stays far below both engines' limits); returns their ids by key.
pub(super) async fn insert_offerings_values<'o, B: Backend>(
    tx: &mut Tx<B>,
    offerings: &[&'o ImportedOffering],
    now_ms: i64,
) -> StoreResult<Vec<(&'o OfferingKey, i64)>> {
    let mut ids = Vec::with_capacity(offerings.len());
    for chunk in offerings.chunks(500) {
        let mut q = Stmt::new(
            "INSERT INTO offerings (gpu, gpu_count, gpu_memory_gib, vcpus, memory_gib,
                 network_gbps, interconnect, local_nvme_gb, arch,
                 provider, region, zone, instance_type, created_at_ms, updated_at_ms) ",
        );
        q.push_values(chunk, |t, o| {
            for arg in spec_args(&o.spec) {
                t.bind(arg);
            }
            t.bind(&o.key.provider)
                .bind(&o.key.region)
                .bind(&o.key.zone)
                .bind(&o.key.instance_type)
                .bind(now_ms)
                .bind(now_ms);
        });
        // Multi-row RETURNING order is not promised, so rows come back with their key.
        q.push(" RETURNING id, region, zone, instance_type");
        let rows: Vec<InsertedOfferingRecord> = B::fetch_all(tx, q).await?;
        let by_key: HashMap<(&str, &str, &str), i64> = rows
            .iter()
            .map(|r| ((&*r.region, &*r.zone, &*r.instance_type), r.id))
            .collect();
        for o in chunk {
            let k = &o.key;
            if let Some(&id) = by_key.get(&(&*k.region, &*k.zone, &*k.instance_type)) {
                ids.push((k, id));
            }
        }
    }
    Ok(ids)
}

/// Appends observations in multi-row statements of at most 1000 rows (6000 parameters, far
/// below both engines' limits).
pub(super) async fn insert_observations_values<B: Backend>(
    tx: &mut Tx<B>,
    rows: &[(i64, Market, Micros)],
    observed_at_ms: i64,
    source: &str,
    now_ms: i64,
) -> StoreResult<u64> {
    let mut appended = 0;
    for chunk in rows.chunks(1000) {
        let mut q = Stmt::new(
            "INSERT INTO price_observations
                 (offering_id, market, price_micros, observed_at_ms, recorded_at_ms, source) ",
        );
        q.push_values(chunk, |t, (id, market, price)| {
            t.bind(*id)
                .bind(market.as_str())
                .bind(price.0)
                .bind(observed_at_ms)
                .bind(now_ms)
                .bind(source);
        });
        q.push(" ON CONFLICT (offering_id, market, observed_at_ms) DO NOTHING");
        appended += B::execute(tx, q).await?;
    }
    Ok(appended)
}
