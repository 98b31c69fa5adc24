//! The catalog SQL both backends run, written once: providers, GPUs, price batches,
//! benchmarks, price history and the consistent read the in-memory snapshot is built from.
//! Imports are in `import_sql.rs`. Catalog writers take the catalog lock and bump the catalog
//! version, so that readers polling the version (or hearing the backend's announcement)
//! reload.

use super::backend::{Backend, Conn, Tx, exists, fetch_all_as};
use super::catalog_rows::{
    BenchmarkRecord, GpuRecord, MeasurementRecord, OfferingRecord, PricePointRecord, ProviderRecord,
};
use super::stmt::{Arg, Stmt};
use super::{
    BatchReport, CatalogRows, HistoryFilter, NewObservation, Once, PricePoint, StoreError,
    StoreResult, idempotency,
};
use crate::core::benchmark::Benchmark;
use crate::core::catalog::{GpuFacts, InstanceSpec, ProviderEntry};

/// Offerings with their latest on-demand and spot price. The unique key on
/// (offering_id, market, observed_at_ms) makes "the row at the latest time" exactly one row.
pub(super) const OFFERINGS_WITH_LATEST_PRICES: &str = "
    SELECT o.id, o.provider, o.region, o.zone, o.instance_type, o.gpu, o.gpu_count,
           o.gpu_memory_gib, o.vcpus, o.memory_gib, o.network_gbps, o.interconnect,
           o.local_nvme_gb, o.arch,
           od.price_micros AS on_demand, sp.price_micros AS spot,
           CASE WHEN od.observed_at_ms IS NULL THEN sp.observed_at_ms
                WHEN sp.observed_at_ms IS NULL THEN od.observed_at_ms
                WHEN od.observed_at_ms > sp.observed_at_ms THEN od.observed_at_ms
                ELSE sp.observed_at_ms END AS observed_at
    FROM offerings o
    LEFT JOIN (
        SELECT p.offering_id, p.price_micros, p.observed_at_ms FROM price_observations p
        JOIN (SELECT offering_id, MAX(observed_at_ms) AS latest FROM price_observations
              WHERE market = 'on_demand' GROUP BY offering_id) l
          ON l.offering_id = p.offering_id AND l.latest = p.observed_at_ms
        WHERE p.market = 'on_demand'
    ) od ON od.offering_id = o.id
    LEFT JOIN (
        SELECT p.offering_id, p.price_micros, p.observed_at_ms FROM price_observations p
        JOIN (SELECT offering_id, MAX(observed_at_ms) AS latest FROM price_observations
              WHERE market = 'spot' GROUP BY offering_id) l
          ON l.offering_id = p.offering_id AND l.latest = p.observed_at_ms
        WHERE p.market = 'spot'
    ) sp ON sp.offering_id = o.id";

/// The nine spec columns' values, in the order of [`InstanceSpec`]'s fields.
pub(super) fn spec_args(s: &InstanceSpec) -> [Arg<'_>; 9] {
    [
        Arg::from(&s.gpu),
        Arg::from(s.gpu_count),
        Arg::from(s.gpu_memory_gib),
        Arg::from(s.vcpus),
        Arg::from(s.memory_gib),
        Arg::from(s.network_gbps),
        Arg::from(s.interconnect.as_str()),
        Arg::from(s.local_nvme_gb),
        Arg::from(&s.arch),
    ]
}

pub(super) async fn ping<B: Backend>(db: &B) -> StoreResult<()> {
    B::execute(&mut *db.conn().await?, Stmt::new("SELECT 1")).await?;
    Ok(())
}

/// Bumps the catalog version in `tx` and announces the change to other replicas.
pub(super) async fn mark_catalog_changed<B: Backend>(tx: &mut Tx<B>) -> StoreResult<()> {
    let bump = Stmt::new("UPDATE catalog_version SET version = version + 1 WHERE id = 1");
    B::execute(tx, bump).await?;
    B::announce_catalog_change(tx).await
}

/// The version the catalog is at now.
pub(super) async fn catalog_version<B: Backend>(db: &B) -> StoreResult<i64> {
    catalog_version_in::<B>(&mut *db.conn().await?).await
}

async fn catalog_version_in<B: Backend>(conn: &mut Conn<B>) -> StoreResult<i64> {
    let stmt = Stmt::new("SELECT version FROM catalog_version WHERE id = 1");
    let (version,) = B::fetch_one::<(i64,)>(conn, stmt).await?;
    Ok(version)
}

pub(super) async fn providers<B: Backend>(db: &B) -> StoreResult<Vec<ProviderEntry>> {
    providers_in::<B>(&mut *db.conn().await?).await
}

async fn providers_in<B: Backend>(conn: &mut Conn<B>) -> StoreResult<Vec<ProviderEntry>> {
    let stmt = Stmt::new("SELECT name, display_name FROM providers ORDER BY name");
    let rows: Vec<ProviderRecord> = B::fetch_all(conn, stmt).await?;
    Ok(rows.into_iter().map(ProviderEntry::from).collect())
}

pub(super) async fn upsert_gpus<B: Backend>(db: &B, gpus: &[GpuFacts]) -> StoreResult<u64> {
    let mut tx = db.begin_write().await?;
    let n = upsert_gpus_in::<B>(&mut tx, gpus).await?;
    mark_catalog_changed::<B>(&mut tx).await?;
    tx.commit().await?;
    Ok(n)
}

pub(super) async fn upsert_gpus_in<B: Backend>(
    tx: &mut Tx<B>,
    gpus: &[GpuFacts],
) -> StoreResult<u64> {
    let mut n = 0;
    for g in gpus {
        let upsert = Stmt::new(
            "INSERT INTO gpus (name, variant, memory_gib, memory_bandwidth_gbps,
                 fp16_bf16_dense_tflops, bf16_supported, fp32_tflops, gpu_link_gbps, tdp_w)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (name) DO UPDATE SET variant = excluded.variant,
                 memory_gib = excluded.memory_gib,
                 memory_bandwidth_gbps = excluded.memory_bandwidth_gbps,
                 fp16_bf16_dense_tflops = excluded.fp16_bf16_dense_tflops,
                 bf16_supported = excluded.bf16_supported,
                 fp32_tflops = excluded.fp32_tflops,
                 gpu_link_gbps = excluded.gpu_link_gbps, tdp_w = excluded.tdp_w",
        )
        .bind(&g.name)
        .bind(&g.variant)
        .bind(g.memory_gib)
        .bind(g.memory_bandwidth_gbps)
        .bind(g.fp16_bf16_dense_tflops)
        .bind(g.bf16_supported)
        .bind(g.fp32_tflops)
        .bind(g.gpu_link_gbps)
        .bind(g.tdp_w);
        n += B::execute(tx, upsert).await?;
    }
    Ok(n)
}

/// Inserts one observation; 0 when that (offering, market, time) is already there.
async fn insert_observation<B: Backend>(
    tx: &mut Tx<B>,
    offering_id: i64,
    obs: &NewObservation,
    source: &str,
    now_ms: i64,
) -> StoreResult<u64> {
    let insert = Stmt::new(
        "INSERT INTO price_observations
             (offering_id, market, price_micros, observed_at_ms, recorded_at_ms, source)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (offering_id, market, observed_at_ms) DO NOTHING",
    )
    .bind(offering_id)
    .bind(obs.market.as_str())
    .bind(obs.price.0)
    .bind(obs.observed_at_ms)
    .bind(now_ms)
    .bind(source);
    B::execute(tx, insert).await
}

/// Records a batch of prices all or nothing: every offering must exist, and a price already
/// recorded for the same offering, market and time must be the same price.
pub(super) async fn record_prices<B: Backend>(
    db: &B,
    batch: &[NewObservation],
    source: &str,
    now_ms: i64,
    once: Option<Once<'_, BatchReport>>,
) -> StoreResult<BatchReport> {
    let mut tx = db.begin_write().await?;
    // The key before the catalog lock: a duplicate waits on the key alone.
    idempotency::begin_once::<B, _>(&mut tx, &once).await?;
    // Catalog writers queue on one lock, so concurrent batches and imports that touch the
    // same rows in different orders cannot deadlock.
    B::lock_catalog(&mut tx).await?;
    let mut report = BatchReport::default();
    for (index, obs) in batch.iter().enumerate() {
        let k = &obs.key;
        let find = Stmt::new(
            "SELECT id FROM offerings
             WHERE provider = $1 AND region = $2 AND zone = $3 AND instance_type = $4",
        )
        .bind(&k.provider)
        .bind(&k.region)
        .bind(&k.zone)
        .bind(&k.instance_type);
        let Some((id,)) = B::fetch_optional::<(i64,)>(&mut tx, find).await? else {
            return Err(StoreError::UnknownOffering {
                index,
                key: k.clone(),
            });
        };
        if insert_observation::<B>(&mut tx, id, obs, source, now_ms).await? > 0 {
            report.inserted += 1;
            continue;
        }
        let recorded = Stmt::new(
            "SELECT price_micros FROM price_observations
             WHERE offering_id = $1 AND market = $2 AND observed_at_ms = $3",
        )
        .bind(id)
        .bind(obs.market.as_str())
        .bind(obs.observed_at_ms);
        let (recorded,) = B::fetch_one::<(i64,)>(&mut tx, recorded).await?;
        if recorded != obs.price.0 {
            return Err(StoreError::ConflictingObservation { index });
        }
        report.duplicates += 1;
    }
    if report.inserted > 0 {
        mark_catalog_changed::<B>(&mut tx).await?;
    }
    idempotency::finish_once::<B, _>(&mut tx, &once, &report).await?;
    tx.commit().await?;
    Ok(report)
}

/// Everything the in-memory snapshot is built from, in one consistent read, so that version,
/// offerings and prices come from one moment.
pub(super) async fn load_catalog<B: Backend>(db: &B) -> StoreResult<CatalogRows> {
    let mut tx = db.begin_consistent_read().await?;
    let version = catalog_version_in::<B>(&mut tx).await?;
    let providers = providers_in::<B>(&mut tx).await?;
    let gpus: Vec<GpuRecord> =
        B::fetch_all(&mut tx, Stmt::new("SELECT * FROM gpus ORDER BY name")).await?;
    let offerings: Vec<OfferingRecord> =
        B::fetch_all(&mut tx, Stmt::new(OFFERINGS_WITH_LATEST_PRICES)).await?;
    let benchmarks: Vec<BenchmarkRecord> =
        B::fetch_all(&mut tx, Stmt::new("SELECT * FROM benchmarks ORDER BY id")).await?;
    tx.commit().await?;
    Ok(CatalogRows {
        version,
        providers,
        gpus: gpus.into_iter().map(GpuFacts::from).collect(),
        offerings: offerings
            .into_iter()
            .map(TryInto::try_into)
            .collect::<Result<_, sqlx::Error>>()?,
        benchmarks: benchmarks.into_iter().map(Benchmark::from).collect(),
    })
}

/// Records one benchmark; `false` when the same measurement was already recorded. The
/// instance type must be in the catalog.
pub(super) async fn record_benchmark<B: Backend>(
    db: &B,
    b: &Benchmark,
    now_ms: i64,
    once: Option<Once<'_, bool>>,
) -> StoreResult<bool> {
    let mut tx = db.begin_write().await?;
    idempotency::begin_once::<B, _>(&mut tx, &once).await?;
    B::lock_catalog(&mut tx).await?;
    let known =
        Stmt::new("SELECT 1 FROM offerings WHERE provider = $1 AND instance_type = $2 LIMIT 1")
            .bind(&b.provider)
            .bind(&b.instance_type);
    if !exists::<B>(&mut tx, known).await? {
        return Err(StoreError::UnknownInstanceType {
            provider: b.provider.clone(),
            instance_type: b.instance_type.clone(),
        });
    }
    let insert = Stmt::new(
        "INSERT INTO benchmarks (workload, provider, instance_type, gpus, nodes, steps,
             samples_per_sec, step_time_sec, measured_at_ms, recorded_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (workload, provider, instance_type, gpus, nodes, measured_at_ms)
         DO NOTHING",
    )
    .bind(&b.workload)
    .bind(&b.provider)
    .bind(&b.instance_type)
    .bind(i64::from(b.gpus))
    .bind(i64::from(b.nodes))
    .bind(b.steps)
    .bind(b.samples_per_sec)
    .bind(b.step_time_sec)
    .bind(b.measured_at_ms)
    .bind(now_ms);
    let inserted = B::execute(&mut tx, insert).await?;
    if inserted == 0 {
        let recorded = Stmt::new(
            "SELECT samples_per_sec, step_time_sec FROM benchmarks
             WHERE workload = $1 AND provider = $2 AND instance_type = $3 AND gpus = $4
               AND nodes = $5 AND measured_at_ms = $6",
        )
        .bind(&b.workload)
        .bind(&b.provider)
        .bind(&b.instance_type)
        .bind(i64::from(b.gpus))
        .bind(i64::from(b.nodes))
        .bind(b.measured_at_ms);
        let was: MeasurementRecord = B::fetch_one(&mut tx, recorded).await?;
        if was.samples_per_sec != b.samples_per_sec || was.step_time_sec != b.step_time_sec {
            return Err(StoreError::ConflictingBenchmark);
        }
    } else {
        mark_catalog_changed::<B>(&mut tx).await?;
    }
    // A duplicate measurement commits too: its idempotency key must be kept.
    let recorded = inserted > 0;
    idempotency::finish_once::<B, _>(&mut tx, &once, &recorded).await?;
    tx.commit().await?;
    Ok(recorded)
}

/// Price observations matching `f`, a keyset page in time order.
pub(super) async fn price_history<B: Backend>(
    db: &B,
    f: &HistoryFilter,
) -> StoreResult<Vec<PricePoint>> {
    let mut q = Stmt::new(
        "SELECT p.id, o.provider, o.region, o.zone, o.instance_type, p.market,
                p.price_micros, p.observed_at_ms, p.source
         FROM price_observations p JOIN offerings o ON o.id = p.offering_id
         WHERE 1 = 1",
    );
    for (column, value) in [
        ("o.provider", &f.provider),
        ("o.instance_type", &f.instance_type),
        ("o.region", &f.region),
        ("o.zone", &f.zone),
    ] {
        if let Some(v) = value {
            q.push(&format!(" AND {column} = ")).push_bind(v);
        }
    }
    if let Some(m) = f.market {
        q.push(" AND p.market = ").push_bind(m.as_str());
    }
    if let Some(from) = f.from_ms {
        q.push(" AND p.observed_at_ms >= ").push_bind(from);
    }
    if let Some(to) = f.to_ms {
        q.push(" AND p.observed_at_ms < ").push_bind(to);
    }
    let (beyond, order) = if f.newest_first {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    if let Some((at, id)) = f.after {
        q.push(&format!(" AND (p.observed_at_ms {beyond} "))
            .push_bind(at)
            .push(" OR (p.observed_at_ms = ")
            .push_bind(at)
            .push(&format!(" AND p.id {beyond} "))
            .push_bind(id)
            .push("))");
    }
    q.push(&format!(
        " ORDER BY p.observed_at_ms {order}, p.id {order} LIMIT "
    ))
    .push_bind(f.limit);
    fetch_all_as::<B, PricePointRecord, _>(&mut *db.conn().await?, q).await
}
