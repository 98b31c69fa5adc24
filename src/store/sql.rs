//! The SQL both stores run, written once. PostgreSQL and SQLite accept the same statements
//! here (`$N` placeholders, `ON CONFLICT`, `RETURNING`); a macro instantiates them for each
//! backend's concrete pool type, because sqlx's generic executor bounds would cost more
//! clarity than they save. Backend differences live in each store's own file: how a write
//! transaction begins, how the catalog is locked, and how other replicas hear of a change.

/// Decodes an offering row selected with [`OFFERING_COLUMNS`] (plus `on_demand`, `spot`,
/// `observed_at` price columns, which may be NULL).
macro_rules! offering_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        $crate::core::catalog::Offering {
            id: row.try_get("id")?,
            key: $crate::core::catalog::OfferingKey {
                provider: row.try_get("provider")?,
                region: row.try_get("region")?,
                zone: row.try_get("zone")?,
                instance_type: row.try_get("instance_type")?,
            },
            spec: spec_from_row!(row),
            on_demand: row
                .try_get::<Option<i64>, _>("on_demand")?
                .map($crate::core::money::Micros),
            spot: row
                .try_get::<Option<i64>, _>("spot")?
                .map($crate::core::money::Micros),
            price_observed_at_ms: row.try_get("observed_at")?,
        }
    }};
}

/// Binds the nine spec columns in the order of [`InstanceSpec`]'s fields, with `$bind`
/// (`bind` on a query, `push_bind` on a row of a multi-row insert).
///
/// [`InstanceSpec`]: crate::core::catalog::InstanceSpec
macro_rules! bind_spec {
    ($query:expr, $bind:ident, $spec:expr) => {{
        let s: &$crate::core::catalog::InstanceSpec = $spec;
        $query
            .$bind(&s.gpu)
            .$bind(s.gpu_count)
            .$bind(s.gpu_memory_gib)
            .$bind(s.vcpus)
            .$bind(s.memory_gib)
            .$bind(s.network_gbps)
            .$bind(s.interconnect.as_str())
            .$bind(s.local_nvme_gb)
            .$bind(&s.arch)
    }};
}

macro_rules! spec_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let interconnect: String = $row.try_get("interconnect")?;
        $crate::core::catalog::InstanceSpec {
            gpu: $row.try_get("gpu")?,
            gpu_count: $row.try_get("gpu_count")?,
            gpu_memory_gib: $row.try_get("gpu_memory_gib")?,
            vcpus: $row.try_get("vcpus")?,
            memory_gib: $row.try_get("memory_gib")?,
            network_gbps: $row.try_get("network_gbps")?,
            interconnect: interconnect
                .parse()
                .map_err(|e: String| sqlx::Error::Decode(e.into()))?,
            local_nvme_gb: $row.try_get("local_nvme_gb")?,
            arch: $row.try_get("arch")?,
        }
    }};
}

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

/// Implements the shared store methods for `$store`, whose `pool` is a `sqlx::Pool<$db>` and
/// which provides `begin_write`, `begin_consistent_read`, `lock_catalog` and
/// `announce_catalog_change`.
macro_rules! shared_sql {
    ($store:ty, $db:ty) => {
        impl $store {
            pub async fn migrate(&self) -> $crate::store::StoreResult<()> {
                Self::MIGRATOR.run(&self.pool).await?;
                Ok(())
            }

            /// Bumps the catalog version in `tx` and announces the change to other replicas.
            async fn mark_catalog_changed(
                tx: &mut sqlx::Transaction<'static, $db>,
            ) -> $crate::store::StoreResult<()> {
                sqlx::query("UPDATE catalog_version SET version = version + 1 WHERE id = 1")
                    .execute(&mut **tx)
                    .await?;
                Self::announce_catalog_change(tx).await
            }

            /// The version the catalog is at now.
            pub async fn catalog_version(&self) -> $crate::store::StoreResult<i64> {
                let mut conn = self.pool.acquire().await?;
                Self::catalog_version_in(&mut conn).await
            }

            async fn catalog_version_in(
                conn: &mut <$db as sqlx::Database>::Connection,
            ) -> $crate::store::StoreResult<i64> {
                use sqlx::Row as _;
                Ok(sqlx::query("SELECT version FROM catalog_version WHERE id = 1")
                    .fetch_one(&mut *conn)
                    .await?
                    .try_get("version")?)
            }

            pub async fn ping(&self) -> $crate::store::StoreResult<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            pub async fn providers(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::core::catalog::Provider>> {
                let mut conn = self.pool.acquire().await?;
                Self::providers_in(&mut conn).await
            }

            async fn providers_in(
                conn: &mut <$db as sqlx::Database>::Connection,
            ) -> $crate::store::StoreResult<Vec<$crate::core::catalog::Provider>> {
                use sqlx::Row as _;
                let rows = sqlx::query("SELECT name, display_name FROM providers ORDER BY name")
                    .fetch_all(&mut *conn)
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::core::catalog::Provider {
                            name: r.try_get("name")?,
                            display_name: r.try_get("display_name")?,
                        })
                    })
                    .collect()
            }

            pub async fn upsert_gpus(
                &self,
                gpus: &[$crate::core::catalog::GpuFacts],
            ) -> $crate::store::StoreResult<u64> {
                let mut tx = self.begin_write().await?;
                let n = Self::upsert_gpus_in(&mut tx, gpus).await?;
                Self::mark_catalog_changed(&mut tx).await?;
                tx.commit().await?;
                Ok(n)
            }

            async fn upsert_gpus_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                gpus: &[$crate::core::catalog::GpuFacts],
            ) -> $crate::store::StoreResult<u64> {
                let mut n = 0;
                for g in gpus {
                    n += sqlx::query(
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
                    .bind(g.tdp_w)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected();
                }
                Ok(n)
            }

            pub async fn seed_if_empty(
                &self,
                gpus: &[$crate::core::catalog::GpuFacts],
                imports: &[$crate::store::CatalogImport<'_>],
                now_ms: i64,
            ) -> $crate::store::StoreResult<Option<$crate::store::ImportReport>> {
                use sqlx::Row as _;
                let mut tx = self.begin_write().await?;
                Self::lock_catalog(&mut tx).await?;
                let count: i64 = sqlx::query("SELECT COUNT(*) AS n FROM offerings")
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("n")?;
                if count > 0 {
                    return Ok(None);
                }
                Self::upsert_gpus_in(&mut tx, gpus).await?;
                let mut total = $crate::store::ImportReport::default();
                for import in imports {
                    let r = Self::import_in(&mut tx, *import, now_ms).await?;
                    total.offerings_added += r.offerings_added;
                    total.prices_appended += r.prices_appended;
                }
                Self::mark_catalog_changed(&mut tx).await?;
                tx.commit().await?;
                Ok(Some(total))
            }

            pub async fn import_catalog(
                &self,
                import: $crate::store::CatalogImport<'_>,
                now_ms: i64,
            ) -> $crate::store::StoreResult<$crate::store::ImportReport> {
                let mut tx = self.begin_write().await?;
                Self::lock_catalog(&mut tx).await?;
                let report = Self::import_in(&mut tx, import, now_ms).await?;
                if report.offerings_added + report.offerings_updated + report.prices_appended > 0 {
                    Self::mark_catalog_changed(&mut tx).await?;
                }
                tx.commit().await?;
                Ok(report)
            }

            async fn import_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                import: $crate::store::CatalogImport<'_>,
                now_ms: i64,
            ) -> $crate::store::StoreResult<$crate::store::ImportReport> {
                use std::collections::HashMap;
                use $crate::core::catalog::Market;
                let known = sqlx::query("SELECT 1 FROM providers WHERE name = $1")
                    .bind(import.provider)
                    .fetch_optional(&mut **tx)
                    .await?;
                if known.is_none() {
                    return Err($crate::store::StoreError::UnknownProvider(
                        import.provider.to_string(),
                    ));
                }
                let sql = format!(
                    "{} WHERE o.provider = $1",
                    $crate::store::sql::OFFERINGS_WITH_LATEST_PRICES
                );
                let rows = sqlx::query(&sql)
                    .bind(import.provider)
                    .fetch_all(&mut **tx)
                    .await?;
                let mut existing = HashMap::with_capacity(rows.len());
                for row in &rows {
                    let o = offering_from_row!(row);
                    existing.insert(o.key.clone(), o);
                }
                let mut report = $crate::store::ImportReport::default();
                let mut added = Vec::new();
                let mut appends = Vec::new();
                for new in import.offerings {
                    let latest = match existing.get(&new.key) {
                        Some(old) => {
                            if old.spec == new.spec {
                                report.offerings_unchanged += 1;
                            } else {
                                Self::update_spec(tx, old.id, &new.spec, now_ms).await?;
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
                let mut ids: HashMap<&$crate::core::catalog::OfferingKey, i64> = existing
                    .iter()
                    .map(|(k, o)| (k, o.id))
                    .collect();
                ids.extend(Self::insert_offerings(tx, &added, now_ms).await?);
                // A price already recorded at this very time must agree with the file.
                let recorded = Self::prices_observed_at(tx, import.provider, import.observed_at_ms).await?;
                let mut rows = Vec::with_capacity(appends.len());
                for (key, market, price) in appends {
                    let Some(&id) = ids.get(key) else { continue };
                    match recorded.get(&(id, market)) {
                        None => rows.push((id, market, price)),
                        Some(&p) if p == price.0 => {}
                        Some(_) => {
                            return Err($crate::store::StoreError::ConflictingImport {
                                key: key.clone(),
                                market,
                            });
                        }
                    }
                }
                report.prices_appended =
                    Self::insert_observations(tx, &rows, import.observed_at_ms, import.source, now_ms)
                        .await?;
                Ok(report)
            }

            /// Prices of `provider`'s offerings recorded at exactly `observed_at_ms`.
            async fn prices_observed_at(
                tx: &mut sqlx::Transaction<'static, $db>,
                provider: &str,
                observed_at_ms: i64,
            ) -> $crate::store::StoreResult<
                std::collections::HashMap<(i64, $crate::core::catalog::Market), i64>,
            > {
                use sqlx::Row as _;
                let rows = sqlx::query(
                    "SELECT p.offering_id, p.market, p.price_micros
                     FROM price_observations p JOIN offerings o ON o.id = p.offering_id
                     WHERE o.provider = $1 AND p.observed_at_ms = $2",
                )
                .bind(provider)
                .bind(observed_at_ms)
                .fetch_all(&mut **tx)
                .await?;
                rows.iter()
                    .map(|r| {
                        let market: String = r.try_get("market")?;
                        let market = market
                            .parse()
                            .map_err(|e: String| sqlx::Error::Decode(e.into()))?;
                        Ok(((r.try_get("offering_id")?, market), r.try_get("price_micros")?))
                    })
                    .collect()
            }

            /// Inserts new offerings in multi-row statements; returns their ids by key.
            async fn insert_offerings<'o>(
                tx: &mut sqlx::Transaction<'static, $db>,
                offerings: &[&'o $crate::catalog::ImportedOffering],
                now_ms: i64,
            ) -> $crate::store::StoreResult<Vec<(&'o $crate::core::catalog::OfferingKey, i64)>> {
                use sqlx::Row as _;
                let mut ids = Vec::with_capacity(offerings.len());
                // 15 parameters a row stays far below both engines' limits on bind variables.
                for chunk in offerings.chunks(500) {
                    let mut q = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO offerings (gpu, gpu_count, gpu_memory_gib, vcpus, memory_gib,
                             network_gbps, interconnect, local_nvme_gb, arch,
                             provider, region, zone, instance_type, created_at_ms, updated_at_ms) ",
                    );
                    q.push_values(chunk, |mut b, o| {
                        bind_spec!(b, push_bind, &o.spec)
                            .push_bind(&o.key.provider)
                            .push_bind(&o.key.region)
                            .push_bind(&o.key.zone)
                            .push_bind(&o.key.instance_type)
                            .push_bind(now_ms)
                            .push_bind(now_ms);
                    });
                    // Multi-row RETURNING order is not promised, so rows come back with their key.
                    q.push(" RETURNING id, region, zone, instance_type");
                    let rows = q.build().fetch_all(&mut **tx).await?;
                    let by_key: std::collections::HashMap<(String, String, String), i64> = rows
                        .iter()
                        .map(|r| {
                            Ok::<_, sqlx::Error>((
                                (r.try_get("region")?, r.try_get("zone")?, r.try_get("instance_type")?),
                                r.try_get("id")?,
                            ))
                        })
                        .collect::<Result<_, _>>()?;
                    for o in chunk {
                        let k = &o.key;
                        if let Some(id) = by_key.get(&(k.region.clone(), k.zone.clone(), k.instance_type.clone())) {
                            ids.push((k, *id));
                        }
                    }
                }
                Ok(ids)
            }

            /// Appends observations in multi-row statements; an observation whose (offering,
            /// market, time) is already recorded is skipped. Returns how many were appended.
            async fn insert_observations(
                tx: &mut sqlx::Transaction<'static, $db>,
                rows: &[(i64, $crate::core::catalog::Market, $crate::core::money::Micros)],
                observed_at_ms: i64,
                source: &str,
                now_ms: i64,
            ) -> $crate::store::StoreResult<u64> {
                let mut appended = 0;
                for chunk in rows.chunks(1000) {
                    let mut q = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO price_observations
                             (offering_id, market, price_micros, observed_at_ms, recorded_at_ms, source) ",
                    );
                    q.push_values(chunk, |mut b, (id, market, price)| {
                        b.push_bind(*id)
                            .push_bind(market.as_str())
                            .push_bind(price.0)
                            .push_bind(observed_at_ms)
                            .push_bind(now_ms)
                            .push_bind(source);
                    });
                    q.push(" ON CONFLICT (offering_id, market, observed_at_ms) DO NOTHING");
                    appended += q.build().execute(&mut **tx).await?.rows_affected();
                }
                Ok(appended)
            }

            async fn update_spec(
                tx: &mut sqlx::Transaction<'static, $db>,
                id: i64,
                s: &$crate::core::catalog::InstanceSpec,
                now_ms: i64,
            ) -> $crate::store::StoreResult<()> {
                let query = sqlx::query(
                    "UPDATE offerings SET gpu = $1, gpu_count = $2, gpu_memory_gib = $3,
                         vcpus = $4, memory_gib = $5, network_gbps = $6, interconnect = $7,
                         local_nvme_gb = $8, arch = $9, updated_at_ms = $10
                     WHERE id = $11",
                );
                bind_spec!(query, bind, s)
                    .bind(now_ms)
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            /// Inserts one observation; 0 when that (offering, market, time) is already there.
            async fn insert_observation(
                tx: &mut sqlx::Transaction<'static, $db>,
                offering_id: i64,
                market: $crate::core::catalog::Market,
                price: $crate::core::money::Micros,
                observed_at_ms: i64,
                source: &str,
                now_ms: i64,
            ) -> $crate::store::StoreResult<u64> {
                Ok(sqlx::query(
                    "INSERT INTO price_observations
                         (offering_id, market, price_micros, observed_at_ms, recorded_at_ms, source)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (offering_id, market, observed_at_ms) DO NOTHING",
                )
                .bind(offering_id)
                .bind(market.as_str())
                .bind(price.0)
                .bind(observed_at_ms)
                .bind(now_ms)
                .bind(source)
                .execute(&mut **tx)
                .await?
                .rows_affected())
            }

            pub async fn record_prices(
                &self,
                batch: &[$crate::store::NewObservation],
                source: &str,
                now_ms: i64,
                once: Option<$crate::store::Once<'_, $crate::store::BatchReport>>,
            ) -> $crate::store::StoreResult<$crate::store::BatchReport> {
                use sqlx::Row as _;
                let mut tx = self.begin_write().await?;
                // The key before the catalog lock: a duplicate waits on the key alone.
                Self::begin_once(&mut tx, &once).await?;
                // Catalog writers queue on one lock, so concurrent batches and imports that touch
                // the same rows in different orders cannot deadlock.
                Self::lock_catalog(&mut tx).await?;
                let mut report = $crate::store::BatchReport::default();
                for (index, obs) in batch.iter().enumerate() {
                    let k = &obs.key;
                    let id: i64 = match sqlx::query(
                        "SELECT id FROM offerings
                         WHERE provider = $1 AND region = $2 AND zone = $3 AND instance_type = $4",
                    )
                    .bind(&k.provider)
                    .bind(&k.region)
                    .bind(&k.zone)
                    .bind(&k.instance_type)
                    .fetch_optional(&mut *tx)
                    .await?
                    {
                        Some(row) => row.try_get("id")?,
                        None => {
                            return Err($crate::store::StoreError::UnknownOffering {
                                index,
                                key: k.clone(),
                            });
                        }
                    };
                    let inserted = Self::insert_observation(
                        &mut tx,
                        id,
                        obs.market,
                        obs.price,
                        obs.observed_at_ms,
                        source,
                        now_ms,
                    )
                    .await?;
                    if inserted > 0 {
                        report.inserted += 1;
                        continue;
                    }
                    let recorded: i64 = sqlx::query(
                        "SELECT price_micros FROM price_observations
                         WHERE offering_id = $1 AND market = $2 AND observed_at_ms = $3",
                    )
                    .bind(id)
                    .bind(obs.market.as_str())
                    .bind(obs.observed_at_ms)
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("price_micros")?;
                    if recorded != obs.price.0 {
                        return Err($crate::store::StoreError::ConflictingObservation { index });
                    }
                    report.duplicates += 1;
                }
                if report.inserted > 0 {
                    Self::mark_catalog_changed(&mut tx).await?;
                }
                Self::finish_once(&mut tx, &once, &report).await?;
                tx.commit().await?;
                Ok(report)
            }

            pub async fn load_catalog(&self) -> $crate::store::StoreResult<$crate::store::CatalogRows> {
                use sqlx::Row as _;
                // One consistent read, so version, offerings and prices come from one moment.
                let mut tx = self.begin_consistent_read().await?;
                let version = Self::catalog_version_in(&mut tx).await?;
                let providers = Self::providers_in(&mut tx).await?;
                let gpus = sqlx::query("SELECT * FROM gpus ORDER BY name")
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|r| {
                        Ok::<_, sqlx::Error>($crate::core::catalog::GpuFacts {
                            name: r.try_get("name")?,
                            variant: r.try_get("variant")?,
                            memory_gib: r.try_get("memory_gib")?,
                            memory_bandwidth_gbps: r.try_get("memory_bandwidth_gbps")?,
                            fp16_bf16_dense_tflops: r.try_get("fp16_bf16_dense_tflops")?,
                            bf16_supported: r.try_get("bf16_supported")?,
                            fp32_tflops: r.try_get("fp32_tflops")?,
                            gpu_link_gbps: r.try_get("gpu_link_gbps")?,
                            tdp_w: r.try_get("tdp_w")?,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let rows = sqlx::query($crate::store::sql::OFFERINGS_WITH_LATEST_PRICES)
                    .fetch_all(&mut *tx)
                    .await?;
                let mut offerings = Vec::with_capacity(rows.len());
                for row in &rows {
                    offerings.push(offering_from_row!(row));
                }
                let benchmarks = sqlx::query("SELECT * FROM benchmarks ORDER BY id")
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|r| {
                        Ok::<_, sqlx::Error>($crate::core::benchmark::Benchmark {
                            id: r.try_get("id")?,
                            workload: r.try_get("workload")?,
                            provider: r.try_get("provider")?,
                            instance_type: r.try_get("instance_type")?,
                            gpus: u32::try_from(r.try_get::<i64, _>("gpus")?).unwrap_or(u32::MAX),
                            nodes: u32::try_from(r.try_get::<i64, _>("nodes")?).unwrap_or(u32::MAX),
                            steps: r.try_get("steps")?,
                            samples_per_sec: r.try_get("samples_per_sec")?,
                            step_time_sec: r.try_get("step_time_sec")?,
                            measured_at_ms: r.try_get("measured_at_ms")?,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                tx.commit().await?;
                Ok($crate::store::CatalogRows { version, providers, gpus, offerings, benchmarks })
            }

            pub async fn record_benchmark(
                &self,
                b: &$crate::core::benchmark::Benchmark,
                now_ms: i64,
                once: Option<$crate::store::Once<'_, bool>>,
            ) -> $crate::store::StoreResult<bool> {
                use sqlx::Row as _;
                let mut tx = self.begin_write().await?;
                Self::begin_once(&mut tx, &once).await?;
                Self::lock_catalog(&mut tx).await?;
                let known = sqlx::query("SELECT 1 FROM offerings WHERE provider = $1 AND instance_type = $2 LIMIT 1")
                    .bind(&b.provider)
                    .bind(&b.instance_type)
                    .fetch_optional(&mut *tx)
                    .await?;
                if known.is_none() {
                    return Err($crate::store::StoreError::UnknownInstanceType {
                        provider: b.provider.clone(),
                        instance_type: b.instance_type.clone(),
                    });
                }
                let inserted = sqlx::query(
                    "INSERT INTO benchmarks (workload, provider, instance_type, gpus, nodes, steps,
                         samples_per_sec, step_time_sec, measured_at_ms, recorded_at_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                     ON CONFLICT (workload, provider, instance_type, gpus, nodes, measured_at_ms) DO NOTHING",
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
                .bind(now_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if inserted == 0 {
                    let row = sqlx::query(
                        "SELECT samples_per_sec, step_time_sec FROM benchmarks
                         WHERE workload = $1 AND provider = $2 AND instance_type = $3 AND gpus = $4
                           AND nodes = $5 AND measured_at_ms = $6",
                    )
                    .bind(&b.workload)
                    .bind(&b.provider)
                    .bind(&b.instance_type)
                    .bind(i64::from(b.gpus))
                    .bind(i64::from(b.nodes))
                    .bind(b.measured_at_ms)
                    .fetch_one(&mut *tx)
                    .await?;
                    let same = row.try_get::<Option<f64>, _>("samples_per_sec")? == b.samples_per_sec
                        && row.try_get::<Option<f64>, _>("step_time_sec")? == b.step_time_sec;
                    if !same {
                        return Err($crate::store::StoreError::ConflictingBenchmark);
                    }
                } else {
                    Self::mark_catalog_changed(&mut tx).await?;
                }
                // A duplicate measurement commits too: its idempotency key must be kept.
                let recorded = inserted > 0;
                Self::finish_once(&mut tx, &once, &recorded).await?;
                tx.commit().await?;
                Ok(recorded)
            }

            pub async fn price_history(
                &self,
                f: &$crate::store::HistoryFilter,
            ) -> $crate::store::StoreResult<Vec<$crate::store::PricePoint>> {
                use sqlx::Row as _;
                let mut q = sqlx::QueryBuilder::<$db>::new(
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
                        q.push(format_args!(" AND {column} = ")).push_bind(v.clone());
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
                let (beyond, order) = if f.newest_first { ("<", "DESC") } else { (">", "ASC") };
                if let Some((at, id)) = f.after {
                    q.push(format_args!(" AND (p.observed_at_ms {beyond} "))
                        .push_bind(at)
                        .push(" OR (p.observed_at_ms = ")
                        .push_bind(at)
                        .push(format_args!(" AND p.id {beyond} "))
                        .push_bind(id)
                        .push("))");
                }
                q.push(format_args!(" ORDER BY p.observed_at_ms {order}, p.id {order} LIMIT "))
                    .push_bind(f.limit);
                let rows = q.build().fetch_all(&self.pool).await?;
                rows.iter()
                    .map(|r| {
                        let market: String = r.try_get("market")?;
                        Ok($crate::store::PricePoint {
                            id: r.try_get("id")?,
                            key: $crate::core::catalog::OfferingKey {
                                provider: r.try_get("provider")?,
                                region: r.try_get("region")?,
                                zone: r.try_get("zone")?,
                                instance_type: r.try_get("instance_type")?,
                            },
                            market: market
                                .parse()
                                .map_err(|e: String| sqlx::Error::Decode(e.into()))?,
                            price: $crate::core::money::Micros(r.try_get("price_micros")?),
                            observed_at_ms: r.try_get("observed_at_ms")?,
                            source: r.try_get("source")?,
                        })
                    })
                    .collect()
            }
        }
    };
}

pub(super) use {bind_spec, offering_from_row, shared_sql, spec_from_row};
