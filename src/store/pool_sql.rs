//! The SQL for pools, workers, signals and events, written once for both backends like
//! `sql.rs`. A pool decision runs in one transaction that first takes the pool's row lock
//! (`LOCK_POOL`, which each backend defines), so concurrent decisions for one pool happen one
//! after another; ingestion never touches that row and so never waits for a decision.

/// Decodes a `pools` row selected with `POOL_COLUMNS`.
macro_rules! pool_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let json = |col: &str| -> Result<String, sqlx::Error> { row.try_get::<String, _>(col) };
        let decode = |e: serde_json::Error| sqlx::Error::Decode(e.into());
        $crate::store::PoolRow {
            name: row.try_get("name")?,
            policy: serde_json::from_str(&json("policy")?).map_err(decode)?,
            state: serde_json::from_str(&json("state")?).map_err(decode)?,
            last_decision: row
                .try_get::<Option<String>, _>("last_decision")?
                .map(|s| serde_json::from_str(&s))
                .transpose()
                .map_err(decode)?,
            last_decision_key: row.try_get("last_decision_key")?,
            last_decision_at_ms: row.try_get("last_decision_at_ms")?,
            since_ms: row.try_get("since_ms")?,
            created_at_ms: row.try_get("created_at_ms")?,
            updated_at_ms: row.try_get("updated_at_ms")?,
        }
    }};
}

macro_rules! worker_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let market: String = row.try_get("market")?;
        let warning_kind: Option<String> = row.try_get("warning_kind")?;
        $crate::core::scale::Worker {
            id: row.try_get("id")?,
            instance_type: row.try_get("instance_type")?,
            market: market
                .parse()
                .map_err(|e: String| sqlx::Error::Decode(e.into()))?,
            zone: row.try_get("zone")?,
            started_at_ms: row.try_get("started_at_ms")?,
            stopped_at_ms: row.try_get("stopped_at_ms")?,
            warning: match warning_kind.as_deref() {
                Some(kind) => Some($crate::core::scale::Warning {
                    kind: $crate::core::scale::WarningKind::from_stored(kind),
                    at_ms: row.try_get::<Option<i64>, _>("warning_at_ms")?.unwrap_or(0),
                    action_at_ms: row.try_get("warning_action_at_ms")?,
                }),
                None => None,
            },
            utilization: None,
            gpu_memory_gib: None,
        }
    }};
}

pub(super) const WORKER_COLUMNS: &str = "id, instance_type, market, zone, started_at_ms, stopped_at_ms, warning_kind, warning_at_ms, warning_action_at_ms";

/// Rows per multi-row statement: well under both backends' bind-parameter limits.
pub(super) const CHUNK: usize = 1000;

/// The newest sample of a series in a batch, with the latest time it showed work.
#[derive(Debug, Clone)]
pub(super) struct LatestRow {
    pub pool: String,
    pub worker: String,
    pub name: &'static str,
    pub at_ms: i64,
    pub value: f64,
    /// The batch's own activity for the series, merged with the stored one by the upsert.
    pub activity: crate::core::idle::SeriesActivity,
}

/// Keeps the newest value per series and merges its activity as
/// [`SeriesActivity::merge`](crate::core::idle::SeriesActivity::merge) does: the later busy
/// time, and the earlier of the two idle times that fall after it. The SET expressions all
/// read the row as it was, which both backends guarantee.
pub(super) static UPSERT_LATEST_TAIL: std::sync::LazyLock<String> = std::sync::LazyLock::new(
    || {
        let busy = "CASE WHEN excluded.last_busy_at_ms IS NOT NULL
        AND (signal_latest.last_busy_at_ms IS NULL OR excluded.last_busy_at_ms > signal_latest.last_busy_at_ms)
        THEN excluded.last_busy_at_ms ELSE signal_latest.last_busy_at_ms END";
        let after =
            |idle: &str| format!("CASE WHEN ({busy}) IS NULL OR {idle} > ({busy}) THEN {idle} END");
        let (x, y) = (
            after("excluded.idle_since_ms"),
            after("signal_latest.idle_since_ms"),
        );
        format!(
        " ON CONFLICT (pool, worker, name) DO UPDATE SET
    value = CASE WHEN excluded.at_ms > signal_latest.at_ms THEN excluded.value ELSE signal_latest.value END,
    at_ms = CASE WHEN excluded.at_ms > signal_latest.at_ms THEN excluded.at_ms ELSE signal_latest.at_ms END,
    last_busy_at_ms = {busy},
    idle_since_ms = CASE WHEN ({x}) IS NULL THEN {y} WHEN ({y}) IS NULL THEN {x}
        WHEN ({x}) < ({y}) THEN {x} ELSE {y} END"
    )
    },
);

/// What a pool decision reads besides the pool row, aggregated into JSON by the lock query so
/// that the lock is held for one round trip: workers, every series' newest value and recent
/// incidents, as arrays in the column order below.
pub(super) type WorkerTuple = (
    String,
    String,
    String,
    Option<String>,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);
pub(super) type LatestTuple = (String, String, f64, i64, Option<i64>, Option<i64>);
pub(super) type IncidentTuple = (String, String, Option<String>, i64);

/// Decodes the row of `READ_POOL`/`LOCK_POOL` into what a decision reads; series older than
/// the policy's signal age limit are left out.
macro_rules! decision_read_from_row {
    ($row:expr, $now_ms:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let now_ms: i64 = $now_ms;
        let pool = pool_from_row!(&row);
        let json = |col: &str| -> Result<String, sqlx::Error> {
            Ok(row
                .try_get::<Option<String>, _>(col)?
                .unwrap_or_else(|| "[]".into()))
        };
        let decode = |e: serde_json::Error| sqlx::Error::Decode(e.into());
        let workers: Vec<$crate::store::pool_sql::WorkerTuple> =
            serde_json::from_str(&json("workers_json")?).map_err(decode)?;
        let workers = workers
            .into_iter()
            .map(
                |(
                    id,
                    instance_type,
                    market,
                    zone,
                    started_at_ms,
                    stopped_at_ms,
                    kind,
                    at,
                    action_at,
                )| {
                    Ok($crate::core::scale::Worker {
                        id,
                        instance_type,
                        market: market
                            .parse()
                            .map_err(|e: String| sqlx::Error::Decode(e.into()))?,
                        zone,
                        started_at_ms,
                        stopped_at_ms,
                        warning: kind.map(|k| $crate::core::scale::Warning {
                            kind: $crate::core::scale::WarningKind::from_stored(&k),
                            at_ms: at.unwrap_or(0),
                            action_at_ms: action_at,
                        }),
                        utilization: None,
                        gpu_memory_gib: None,
                    })
                },
            )
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let max_age = $crate::core::policy::secs_to_ms(pool.policy.signal_max_age_sec);
        let fresh_since = now_ms.saturating_sub(max_age);
        let latest: Vec<$crate::store::pool_sql::LatestTuple> =
            serde_json::from_str(&json("latest_json")?).map_err(decode)?;
        let series_idle = latest
            .iter()
            .map(
                |(worker, name, _, _, busy, idle)| $crate::core::idle::SeriesIdle {
                    worker: worker.clone(),
                    name: name.clone(),
                    activity: $crate::core::idle::SeriesActivity {
                        last_busy_at_ms: *busy,
                        idle_since_ms: *idle,
                    },
                },
            )
            .collect();
        let latest = latest
            .into_iter()
            .filter(|(_, _, _, at, _, _)| *at >= fresh_since)
            .map(
                |(worker, name, value, at_ms, _, _)| $crate::store::LatestSignal {
                    worker,
                    name,
                    value,
                    at_ms,
                },
            )
            .collect();
        let incidents: Vec<$crate::store::pool_sql::IncidentTuple> =
            serde_json::from_str(&json("incidents_json")?).map_err(decode)?;
        let incidents = incidents
            .into_iter()
            .map(
                |(kind, instance_type, zone, at_ms)| $crate::core::scale::Incident {
                    kind: if kind == "capacity_error" {
                        $crate::core::scale::IncidentKind::CapacityError
                    } else {
                        $crate::core::scale::IncidentKind::Interruption
                    },
                    instance_type,
                    zone,
                    at_ms,
                },
            )
            .collect();
        $crate::store::DecisionRead {
            pool,
            workers,
            latest,
            series_idle,
            incidents,
        }
    }};
}

/// Implements the pool methods for `$store` (which defines `LOCK_POOL` and `begin_write`).
macro_rules! pool_sql {
    ($store:ty, $db:ty) => {
        impl $store {
            /// Logs one event of `pool`, unless it already has one with the event's dedupe
            /// key; 1 when logged, 0 when a duplicate.
            async fn insert_event(
                tx: &mut sqlx::Transaction<'static, $db>,
                pool: &str,
                e: &$crate::store::NewEvent,
                now_ms: i64,
            ) -> $crate::store::StoreResult<u64> {
                Ok(sqlx::query(
                    "INSERT INTO pool_events (pool, at_ms, kind, worker, instance_type, zone, detail, dedupe_key, recorded_at_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                     ON CONFLICT (pool, dedupe_key) DO NOTHING",
                )
                .bind(pool)
                .bind(e.at_ms)
                .bind(e.kind)
                .bind(&e.worker)
                .bind(&e.instance_type)
                .bind(&e.zone)
                .bind(e.detail.to_string())
                .bind(&e.dedupe_key)
                .bind(now_ms)
                .execute(&mut **tx)
                .await?
                .rows_affected())
            }

            /// Creates or replaces a pool's policy; `true` when it was created. Replacing keeps
            /// the decision state and restarts the idle clock.
            pub async fn put_pool(
                &self,
                name: &str,
                policy: &$crate::core::policy::Policy,
                now_ms: i64,
            ) -> $crate::store::StoreResult<bool> {
                let json = serde_json::to_string(policy).map_err(|e| sqlx::Error::Encode(e.into()))?;
                let lookback_ms = policy.incident_lookback_ms();
                let mut tx = self.begin_write().await?;
                let updated = sqlx::query(
                    "UPDATE pools SET policy = $2, since_ms = $3, updated_at_ms = $3, incident_lookback_ms = $4 WHERE name = $1",
                )
                    .bind(name)
                    .bind(&json)
                    .bind(now_ms)
                    .bind(lookback_ms)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if updated == 0 {
                    sqlx::query(
                        "INSERT INTO pools (name, policy, state, since_ms, created_at_ms, updated_at_ms, incident_lookback_ms)
                         VALUES ($1, $2, '{}', $3, $3, $3, $4)",
                    )
                    .bind(name)
                    .bind(&json)
                    .bind(now_ms)
                    .bind(lookback_ms)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(updated == 0)
            }

            pub async fn pools(&self) -> $crate::store::StoreResult<Vec<$crate::store::PoolRow>> {
                let sql = format!("SELECT {} FROM pools ORDER BY name", $crate::store::pools::POOL_COLUMNS);
                let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
                rows.iter().map(|r| Ok(pool_from_row!(r))).collect()
            }

            pub async fn find_pool(&self, name: &str) -> $crate::store::StoreResult<Option<$crate::store::PoolRow>> {
                let sql = format!("SELECT {} FROM pools WHERE name = $1", $crate::store::pools::POOL_COLUMNS);
                let row = sqlx::query(&sql).bind(name).fetch_optional(&self.pool).await?;
                Ok(match row {
                    Some(r) => Some(pool_from_row!(&r)),
                    None => None,
                })
            }

            /// Deletes a pool with its workers, samples and events; `false` if there was none.
            pub async fn delete_pool(&self, name: &str) -> $crate::store::StoreResult<bool> {
                let mut tx = self.begin_write().await?;
                for table in ["metric_samples", "signal_latest"] {
                    sqlx::query(&format!("DELETE FROM {table} WHERE pool = $1"))
                        .bind(name)
                        .execute(&mut *tx)
                        .await?;
                }
                let n = sqlx::query("DELETE FROM pools WHERE name = $1")
                    .bind(name)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                Ok(n > 0)
            }

            /// Registers or updates a worker; `None` when the pool does not exist, else whether
            /// the worker is new. Re-registering a stopped worker brings it back.
            pub async fn put_worker(
                &self,
                pool: &str,
                w: &$crate::store::NewWorker,
                now_ms: i64,
            ) -> $crate::store::StoreResult<Option<bool>> {
                let mut tx = self.begin_write().await?;
                if sqlx::query("SELECT 1 FROM pools WHERE name = $1").bind(pool).fetch_optional(&mut *tx).await?.is_none() {
                    return Ok(None);
                }
                let updated = sqlx::query(
                    "UPDATE workers SET instance_type = $3, market = $4, zone = $5, started_at_ms = $6,
                         stopped_at_ms = NULL, warning_kind = NULL, warning_at_ms = NULL,
                         warning_action_at_ms = NULL, updated_at_ms = $7
                     WHERE pool = $1 AND id = $2",
                )
                .bind(pool)
                .bind(&w.id)
                .bind(&w.instance_type)
                .bind(w.market.as_str())
                .bind(&w.zone)
                .bind(w.started_at_ms)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if updated == 0 {
                    sqlx::query(
                        "INSERT INTO workers (pool, id, instance_type, market, zone, started_at_ms, updated_at_ms)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(pool)
                    .bind(&w.id)
                    .bind(&w.instance_type)
                    .bind(w.market.as_str())
                    .bind(&w.zone)
                    .bind(w.started_at_ms)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(Some(updated == 0))
            }

            /// Makes the pool's live workers exactly `workers` (as a cloud reports them): new
            /// ones are added, changed ones updated (warnings kept), missing ones stopped.
            pub async fn sync_workers(
                &self,
                pool: &str,
                workers: &[$crate::store::NewWorker],
                now_ms: i64,
            ) -> $crate::store::StoreResult<$crate::store::SyncReport> {
                let mut tx = self.begin_write().await?;
                let live: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
                    "SELECT id, instance_type, market, zone FROM workers
                     WHERE pool = $1 AND stopped_at_ms IS NULL ORDER BY id",
                )
                .bind(pool)
                .fetch_all(&mut *tx)
                .await?;
                let mut report = $crate::store::SyncReport::default();
                for w in workers {
                    let same = live.iter().find(|l| l.0 == w.id);
                    if let Some(l) = same {
                        if l.1 == w.instance_type && l.2 == w.market.as_str() && l.3 == w.zone {
                            continue;
                        }
                        sqlx::query(
                            "UPDATE workers SET instance_type = $3, market = $4, zone = $5, updated_at_ms = $6
                             WHERE pool = $1 AND id = $2",
                        )
                        .bind(pool)
                        .bind(&w.id)
                        .bind(&w.instance_type)
                        .bind(w.market.as_str())
                        .bind(&w.zone)
                        .bind(now_ms)
                        .execute(&mut *tx)
                        .await?;
                        report.updated += 1;
                        continue;
                    }
                    // A stopped row with this id is an instance seen again: it lives on.
                    sqlx::query(
                        "INSERT INTO workers (pool, id, instance_type, market, zone, started_at_ms, updated_at_ms)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)
                         ON CONFLICT (pool, id) DO UPDATE SET instance_type = excluded.instance_type,
                             market = excluded.market, zone = excluded.zone,
                             started_at_ms = excluded.started_at_ms, stopped_at_ms = NULL,
                             warning_kind = NULL, warning_at_ms = NULL, warning_action_at_ms = NULL,
                             checkpoint_at_ms = NULL, updated_at_ms = excluded.updated_at_ms",
                    )
                    .bind(pool)
                    .bind(&w.id)
                    .bind(&w.instance_type)
                    .bind(w.market.as_str())
                    .bind(&w.zone)
                    .bind(w.started_at_ms)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                    report.added += 1;
                }
                for l in &live {
                    if workers.iter().any(|w| w.id == l.0) {
                        continue;
                    }
                    sqlx::query(
                        "UPDATE workers SET stopped_at_ms = $3, updated_at_ms = $3
                         WHERE pool = $1 AND id = $2 AND stopped_at_ms IS NULL",
                    )
                    .bind(pool)
                    .bind(&l.0)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                    report.stopped += 1;
                }
                tx.commit().await?;
                Ok(report)
            }

            /// Live workers whose job reported a saved checkpoint, with when.
            pub async fn checkpoints(&self, pool: &str) -> $crate::store::StoreResult<Vec<(String, i64)>> {
                Ok(sqlx::query_as(
                    "SELECT id, checkpoint_at_ms FROM workers
                     WHERE pool = $1 AND stopped_at_ms IS NULL AND checkpoint_at_ms IS NOT NULL
                     ORDER BY id",
                )
                .bind(pool)
                .fetch_all(&self.pool)
                .await?)
            }

            /// Appends events to a pool's log (one with a known dedupe key is logged once);
            /// returns how many were new.
            pub async fn append_events(
                &self,
                pool: &str,
                events: &[$crate::store::NewEvent],
                now_ms: i64,
            ) -> $crate::store::StoreResult<u64> {
                let mut tx = self.begin_write().await?;
                // A pool deleted meanwhile has no log to append to.
                if sqlx::query("SELECT 1 FROM pools WHERE name = $1").bind(pool).fetch_optional(&mut *tx).await?.is_none() {
                    return Ok(0);
                }
                let mut inserted = 0;
                for e in events {
                    inserted += Self::insert_event(&mut tx, pool, e, now_ms).await?;
                }
                tx.commit().await?;
                Ok(inserted)
            }

            /// Marks a live worker stopped; `false` if there is no such live worker.
            pub async fn stop_worker(&self, pool: &str, id: &str, now_ms: i64) -> $crate::store::StoreResult<bool> {
                let mut tx = self.begin_write().await?;
                let n = sqlx::query(
                    "UPDATE workers SET stopped_at_ms = $3, updated_at_ms = $3
                     WHERE pool = $1 AND id = $2 AND stopped_at_ms IS NULL",
                )
                .bind(pool)
                .bind(id)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                Ok(n > 0)
            }

            /// Live workers and those stopped at or after `stopped_since_ms`.
            pub async fn workers(
                &self,
                pool: &str,
                stopped_since_ms: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::core::scale::Worker>> {
                let mut conn = self.pool.acquire().await?;
                Self::workers_in(&mut conn, pool, stopped_since_ms).await
            }

            async fn workers_in(
                conn: &mut <$db as sqlx::Database>::Connection,
                pool: &str,
                stopped_since_ms: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::core::scale::Worker>> {
                let sql = format!(
                    "SELECT {} FROM workers WHERE pool = $1 AND (stopped_at_ms IS NULL OR stopped_at_ms >= $2)
                     ORDER BY started_at_ms, id",
                    $crate::store::pool_sql::WORKER_COLUMNS
                );
                let rows = sqlx::query(&sql).bind(pool).bind(stopped_since_ms).fetch_all(&mut *conn).await?;
                rows.iter().map(|r| Ok(worker_from_row!(r))).collect()
            }

            /// The newest sample of each series of a pool at or after `since_ms`.
            pub async fn latest_signals(
                &self,
                pool: &str,
                since_ms: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::LatestSignal>> {
                let mut conn = self.pool.acquire().await?;
                Self::latest_in(&mut conn, pool, since_ms).await
            }

            async fn latest_in(
                conn: &mut <$db as sqlx::Database>::Connection,
                pool: &str,
                since_ms: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::LatestSignal>> {
                use sqlx::Row as _;
                let rows = sqlx::query(
                    "SELECT worker, name, value, at_ms FROM signal_latest
                     WHERE pool = $1 AND at_ms >= $2 ORDER BY worker, name",
                )
                .bind(pool)
                .bind(since_ms)
                .fetch_all(&mut *conn)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::store::LatestSignal {
                            worker: r.try_get("worker")?,
                            name: r.try_get("name")?,
                            value: r.try_get("value")?,
                            at_ms: r.try_get("at_ms")?,
                        })
                    })
                    .collect()
            }

            /// Stores a batch of samples all or nothing. Every pool must exist; `busy` says
            /// whether a sample shows work under its pool's policy (for idle-to-zero).
            pub async fn ingest(
                &self,
                samples: &[$crate::store::NewSample],
                busy: impl Fn(&$crate::core::policy::Policy, &$crate::store::NewSample) -> bool,
                now_ms: i64,
                once: Option<$crate::store::Once<'_, $crate::store::IngestReport>>,
            ) -> $crate::store::StoreResult<$crate::store::IngestReport> {
                use std::collections::BTreeMap;
                let mut tx = self.begin_write().await?;
                // The key before any write: a duplicate waits here, not halfway through.
                Self::begin_once(&mut tx, &once).await?;
                // Pools first: a batch naming an unknown pool stores nothing.
                let mut policies: BTreeMap<&str, $crate::core::policy::Policy> = BTreeMap::new();
                for (index, s) in samples.iter().enumerate() {
                    if policies.contains_key(s.pool.as_str()) {
                        continue;
                    }
                    let row: Option<(String,)> = sqlx::query_as("SELECT policy FROM pools WHERE name = $1")
                        .bind(&s.pool)
                        .fetch_optional(&mut *tx)
                        .await?;
                    let Some((json,)) = row else {
                        return Err($crate::store::StoreError::UnknownPool { index, pool: s.pool.clone() });
                    };
                    let policy = serde_json::from_str(&json).map_err(|e| sqlx::Error::Decode(e.into()))?;
                    policies.insert(s.pool.as_str(), policy);
                }
                // One lock order for every writer (sorted keys), so concurrent batches that
                // overlap cannot deadlock.
                let mut sorted: Vec<&$crate::store::NewSample> = samples.iter().collect();
                sorted.sort_by(|a, b| (&a.pool, &a.worker, a.name, a.at_ms).cmp(&(&b.pool, &b.worker, b.name, b.at_ms)));
                let mut inserted = 0;
                for chunk in sorted.chunks($crate::store::pool_sql::CHUNK) {
                    inserted += Self::insert_samples(&mut tx, chunk, now_ms).await?;
                }
                // The newest sample per series, and when the series last showed work.
                let mut latest: BTreeMap<(&str, &str, &str), $crate::store::pool_sql::LatestRow> = BTreeMap::new();
                for s in &sorted {
                    let shows_work = policies.get(s.pool.as_str()).is_some_and(|p| busy(p, s));
                    let e = latest
                        .entry((s.pool.as_str(), s.worker.as_str(), s.name))
                        .or_insert_with(|| $crate::store::pool_sql::LatestRow {
                            pool: s.pool.clone(),
                            worker: s.worker.clone(),
                            name: s.name,
                            at_ms: s.at_ms,
                            value: s.value,
                            activity: Default::default(),
                        });
                    if s.at_ms > e.at_ms {
                        e.at_ms = s.at_ms;
                        e.value = s.value;
                    }
                    e.activity.observe(s.at_ms, shows_work);
                }
                let latest: Vec<_> = latest.into_values().collect();
                for chunk in latest.chunks($crate::store::pool_sql::CHUNK) {
                    Self::upsert_latest(&mut tx, chunk).await?;
                }
                let mut active_pools: Vec<String> = latest
                    .iter()
                    .filter(|l| l.activity.last_busy_at_ms.is_some())
                    .map(|l| l.pool.clone())
                    .collect();
                active_pools.dedup();
                let mut quiet_pools: Vec<String> = latest
                    .iter()
                    .filter(|l| $crate::core::idle::counts_jobs(l.name) && l.activity.last_busy_at_ms.is_none())
                    .map(|l| l.pool.clone())
                    .filter(|p| !active_pools.contains(p))
                    .collect();
                quiet_pools.dedup();
                for pool in active_pools.iter().chain(&quiet_pools) {
                    Self::announce_activity(&mut tx, pool).await?;
                }
                let total = samples.len() as u64;
                let report = $crate::store::IngestReport {
                    accepted: total,
                    duplicates: total.saturating_sub(inserted),
                    active_pools,
                    quiet_pools,
                };
                Self::finish_once(&mut tx, &once, &report).await?;
                tx.commit().await?;
                Ok(report)
            }

            /// Records cloud notices all or nothing: each is matched to a pool (by name or by
            /// the worker's id), logged once per sender id, and marks its worker.
            pub async fn record_notices(
                &self,
                notices: &[$crate::store::CloudNotice],
                now_ms: i64,
                once: Option<$crate::store::Once<'_, Vec<$crate::store::NoticeOutcome>>>,
            ) -> $crate::store::StoreResult<Vec<$crate::store::NoticeOutcome>> {
                use $crate::store::NoticeOutcome;
                let mut tx = self.begin_write().await?;
                Self::begin_once(&mut tx, &once).await?;
                // One lock order for every writer (by pool and worker), so that two overlapping
                // batches cannot deadlock; outcomes go back in the caller's order.
                let mut order: Vec<usize> = (0..notices.len()).collect();
                order.sort_by(|&a, &b| {
                    (&notices[a].pool, &notices[a].worker).cmp(&(&notices[b].pool, &notices[b].worker))
                });
                let mut outcomes: Vec<Option<NoticeOutcome>> = vec![None; notices.len()];
                for &index in &order {
                    let n = &notices[index];
                    let out = &mut outcomes[index];
                    let found: Option<(String, Option<String>, Option<String>)> = match (&n.pool, &n.worker) {
                        (Some(pool), Some(worker)) => sqlx::query_as(
                            "SELECT pool, instance_type, zone FROM workers WHERE pool = $1 AND id = $2",
                        )
                        .bind(pool)
                        .bind(worker)
                        .fetch_optional(&mut *tx)
                        .await?,
                        (None, Some(worker)) => sqlx::query_as(
                            "SELECT pool, instance_type, zone FROM workers WHERE id = $1
                             ORDER BY stopped_at_ms IS NULL DESC, started_at_ms DESC LIMIT 1",
                        )
                        .bind(worker)
                        .fetch_optional(&mut *tx)
                        .await?,
                        (Some(pool), None) => sqlx::query_as(
                            "SELECT name, CAST(NULL AS TEXT), CAST(NULL AS TEXT) FROM pools WHERE name = $1",
                        )
                        .bind(pool)
                        .fetch_optional(&mut *tx)
                        .await?,
                        (None, None) => None,
                    };
                    let Some((pool, worker_type, worker_zone)) = found else {
                        *out = Some(NoticeOutcome::Unmatched);
                        continue;
                    };
                    let instance_type = n.instance_type.clone().or(worker_type);
                    let zone = n.zone.clone().or(worker_zone);
                    let key = n.id.clone().unwrap_or_else(|| {
                        format!(
                            "{}:{}:{}:{}:{}",
                            n.kind,
                            n.worker.as_deref().unwrap_or(""),
                            instance_type.as_deref().unwrap_or(""),
                            zone.as_deref().unwrap_or(""),
                            n.at_ms
                        )
                    });
                    let event = $crate::store::NewEvent {
                        kind: n.kind,
                        at_ms: n.at_ms,
                        worker: n.worker.clone(),
                        instance_type,
                        zone,
                        detail: n.detail.clone(),
                        dedupe_key: Some(key),
                    };
                    let inserted = Self::insert_event(&mut tx, &pool, &event, now_ms).await?;
                    if inserted == 0 {
                        *out = Some(NoticeOutcome::Duplicate { pool });
                        continue;
                    }
                    if let (Some(worker), "checkpoint_saved") = (&n.worker, n.kind) {
                        sqlx::query(
                            "UPDATE workers SET checkpoint_at_ms = $3, updated_at_ms = $4
                             WHERE pool = $1 AND id = $2
                               AND (checkpoint_at_ms IS NULL OR checkpoint_at_ms < $3)",
                        )
                        .bind(&pool)
                        .bind(worker)
                        .bind(n.at_ms)
                        .bind(now_ms)
                        .execute(&mut *tx)
                        .await?;
                    } else if let (Some(worker), true) = (&n.worker, n.kind != "capacity_error") {
                        // An interruption warning outranks a rebalance recommendation.
                        sqlx::query(
                            "UPDATE workers SET warning_kind = $3, warning_at_ms = $4, warning_action_at_ms = $5,
                                 updated_at_ms = $6
                             WHERE pool = $1 AND id = $2
                               AND (warning_kind IS NULL OR warning_kind <> 'interruption_warning')",
                        )
                        .bind(&pool)
                        .bind(worker)
                        .bind(n.kind)
                        .bind(n.at_ms)
                        .bind(n.action_at_ms)
                        .bind(now_ms)
                        .execute(&mut *tx)
                        .await?;
                    }
                    *out = Some(NoticeOutcome::Recorded { pool });
                }
                let outcomes: Vec<NoticeOutcome> =
                    outcomes.into_iter().map(|o| o.unwrap_or(NoticeOutcome::Unmatched)).collect();
                Self::finish_once(&mut tx, &once, &outcomes).await?;
                tx.commit().await?;
                Ok(outcomes)
            }

            /// Runs one pool decision: locks the pool, reads what the decision needs, lets
            /// `decide` compute (pure, no awaits inside), writes what it returns, commits.
            /// `None` when the pool does not exist.
            pub async fn decide_pool<R>(
                &self,
                name: &str,
                now_ms: i64,
                decide: impl Fn(&$crate::store::DecisionRead) -> ($crate::store::DecisionWrite, R),
            ) -> $crate::store::StoreResult<Option<R>> {
                let day_start = $crate::core::cost::day_start(now_ms);
                // Most decisions change nothing. One that changes nothing can take its place in
                // the order at the moment of its (consistent, committed) read, so it needs no
                // lock; only a decision that would write is made again under the pool's lock.
                let Some(row) = sqlx::query(Self::READ_POOL)
                    .bind(name)
                    .bind(day_start)
                    .bind(now_ms)
                    .fetch_optional(&self.pool)
                    .await?
                else {
                    return Ok(None);
                };
                let (write, answer) = decide(&decision_read_from_row!(&row, now_ms));
                if write.is_empty() {
                    return Ok(Some(answer));
                }
                let mut tx = self.begin_write().await?;
                let Some(row) = sqlx::query(Self::LOCK_POOL)
                    .bind(name)
                    .bind(day_start)
                    .bind(now_ms)
                    .fetch_optional(&mut *tx)
                    .await?
                else {
                    return Ok(None);
                };
                let (write, answer) = decide(&decision_read_from_row!(&row, now_ms));
                if write.is_empty() {
                    // Nothing to write: end the read without a commit record.
                    tx.rollback().await?;
                    return Ok(Some(answer));
                }
                if let Some(state) = &write.state {
                    let json = serde_json::to_string(state).map_err(|e| sqlx::Error::Encode(e.into()))?;
                    sqlx::query("UPDATE pools SET state = $2 WHERE name = $1")
                        .bind(name)
                        .bind(json)
                        .execute(&mut *tx)
                        .await?;
                }
                if let Some((key, rendered)) = &write.last_decision {
                    sqlx::query(
                        "UPDATE pools SET last_decision = $2, last_decision_key = $3, last_decision_at_ms = $4
                         WHERE name = $1",
                    )
                    .bind(name)
                    .bind(rendered.to_string())
                    .bind(key)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                }
                for e in &write.events {
                    Self::insert_event(&mut tx, name, e, now_ms).await?;
                }
                if write.activated {
                    Self::announce_activity(&mut tx, name).await?;
                }
                tx.commit().await?;
                Ok(Some(answer))
            }

            /// A page of a pool's events, newest first.
            pub async fn events(
                &self,
                pool: &str,
                page: $crate::store::EventPage,
            ) -> $crate::store::StoreResult<Vec<$crate::store::EventRow>> {
                use sqlx::Row as _;
                let mut q = sqlx::QueryBuilder::<$db>::new(
                    "SELECT id, pool, at_ms, kind, worker, instance_type, zone, detail FROM pool_events WHERE pool = ",
                );
                q.push_bind(pool);
                if let Some((at, id)) = page.after {
                    q.push(" AND (at_ms < ").push_bind(at).push(" OR (at_ms = ").push_bind(at).push(" AND id < ").push_bind(id).push("))");
                }
                q.push(" ORDER BY at_ms DESC, id DESC LIMIT ").push_bind(i64::try_from(page.limit).unwrap_or(i64::MAX));
                let rows = q.build().fetch_all(&self.pool).await?;
                rows.iter()
                    .map(|r| {
                        let detail: String = r.try_get("detail")?;
                        Ok($crate::store::EventRow {
                            id: r.try_get("id")?,
                            pool: r.try_get("pool")?,
                            at_ms: r.try_get("at_ms")?,
                            kind: r.try_get("kind")?,
                            worker: r.try_get("worker")?,
                            instance_type: r.try_get("instance_type")?,
                            zone: r.try_get("zone")?,
                            detail: serde_json::from_str(&detail).map_err(|e| sqlx::Error::Decode(e.into()))?,
                        })
                    })
                    .collect()
            }

            /// Deletes samples received before `before_ms`; the latest per series stays.
            pub async fn prune_samples(&self, before_ms: i64) -> $crate::store::StoreResult<u64> {
                Ok(sqlx::query("DELETE FROM metric_samples WHERE received_at_ms < $1")
                    .bind(before_ms)
                    .execute(&self.pool)
                    .await?
                    .rows_affected())
            }
        }
    };
}

pub(super) use {decision_read_from_row, pool_from_row, pool_sql, worker_from_row};
