//! The SQLite store: the embedded default, one file, one process. Writers begin with
//! `BEGIN IMMEDIATE` so that two writers queue on the file lock instead of failing on a
//! read-to-write upgrade; WAL lets readers go on meanwhile.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::NewSample;
use super::StoreResult;
use super::pool_sql::{
    LatestRow, UPSERT_LATEST_TAIL, decision_read_from_row, pool_from_row, pool_sql, worker_from_row,
};
use super::sql::{bind_spec, offering_from_row, shared_sql, spec_from_row};

/// The decision read, as text, so the locking variant can append to it.
macro_rules! pool_read_sql {
    () => {
        "SELECT p.name, p.policy, p.state, p.last_decision, p.last_decision_key, p.last_decision_at_ms,
            p.since_ms, p.created_at_ms, p.updated_at_ms,
        (SELECT json_group_array(json_array(w.id, w.instance_type, w.market, w.zone, w.started_at_ms,
                    w.stopped_at_ms, w.warning_kind, w.warning_at_ms, w.warning_action_at_ms))
           FROM (SELECT * FROM workers w
                  WHERE w.pool = p.name AND (w.stopped_at_ms IS NULL OR w.stopped_at_ms >= $2)
                  ORDER BY w.started_at_ms, w.id) w) AS workers_json,
        (SELECT json_group_array(json_array(s.worker, s.name, s.value, s.at_ms, s.last_busy_at_ms, s.idle_since_ms))
           FROM (SELECT * FROM signal_latest s WHERE s.pool = p.name ORDER BY s.worker, s.name) s) AS latest_json,
        (SELECT json_group_array(json_array(e.kind, e.instance_type, e.zone, e.at_ms))
           FROM pool_events e
          WHERE e.pool = p.name AND e.at_ms >= $3 - p.incident_lookback_ms
            AND e.kind IN ('interruption_warning', 'capacity_error')
            AND e.instance_type IS NOT NULL) AS incidents_json
        FROM pools p WHERE p.name = $1"
    };
}

#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    pub(crate) const MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let path = options.get_filename();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(sqlx::Error::Io)?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Reads a pool with everything its decision needs, in one statement.
    const READ_POOL: &'static str = pool_read_sql!();
    /// The same statement: inside `BEGIN IMMEDIATE` it already holds the one write lock.
    const LOCK_POOL: &'static str = pool_read_sql!();

    /// One process: the API announces activity to its own subscribers.
    async fn announce_activity(
        _tx: &mut Transaction<'static, Sqlite>,
        _pool: &str,
    ) -> StoreResult<()> {
        Ok(())
    }

    /// One process: the API forgets a revoked key itself.
    async fn announce_revocation(
        _tx: &mut Transaction<'static, Sqlite>,
        _id: &str,
    ) -> StoreResult<()> {
        Ok(())
    }

    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// A deferred read transaction in WAL mode reads one consistent snapshot of the file.
    async fn begin_consistent_read(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin().await?)
    }

    /// `BEGIN IMMEDIATE` already holds the only write lock there is.
    async fn lock_keys(_tx: &mut Transaction<'static, Sqlite>) -> StoreResult<()> {
        Ok(())
    }

    /// `BEGIN IMMEDIATE` already holds the only write lock there is.
    async fn lock_catalog(_tx: &mut Transaction<'static, Sqlite>) -> StoreResult<()> {
        Ok(())
    }

    /// SQLite has no notifications; readers poll the catalog version instead.
    async fn announce_catalog_change(_tx: &mut Transaction<'static, Sqlite>) -> StoreResult<()> {
        Ok(())
    }
    async fn insert_samples(
        tx: &mut Transaction<'static, Sqlite>,
        rows: &[&NewSample],
        now_ms: i64,
    ) -> StoreResult<u64> {
        let mut q = sqlx::QueryBuilder::<Sqlite>::new(
            "INSERT INTO metric_samples (pool, worker, name, at_ms, value, received_at_ms) ",
        );
        q.push_values(rows, |mut b, s| {
            b.push_bind(&s.pool)
                .push_bind(&s.worker)
                .push_bind(s.name)
                .push_bind(s.at_ms)
                .push_bind(s.value)
                .push_bind(now_ms);
        });
        q.push(" ON CONFLICT (pool, worker, name, at_ms) DO NOTHING");
        Ok(q.build().execute(&mut **tx).await?.rows_affected())
    }

    async fn upsert_latest(
        tx: &mut Transaction<'static, Sqlite>,
        rows: &[LatestRow],
    ) -> StoreResult<()> {
        let mut q = sqlx::QueryBuilder::<Sqlite>::new(
            "INSERT INTO signal_latest (pool, worker, name, at_ms, value, last_busy_at_ms, idle_since_ms) ",
        );
        q.push_values(rows, |mut b, s| {
            b.push_bind(&s.pool)
                .push_bind(&s.worker)
                .push_bind(s.name)
                .push_bind(s.at_ms)
                .push_bind(s.value)
                .push_bind(s.activity.last_busy_at_ms)
                .push_bind(s.activity.idle_since_ms);
        });
        q.push(UPSERT_LATEST_TAIL.as_str());
        q.build().execute(&mut **tx).await?;
        Ok(())
    }
}

shared_sql!(SqliteStore, Sqlite);
pool_sql!(SqliteStore, Sqlite);
key_sql!(SqliteStore, Sqlite);
idempotency_sql!(SqliteStore, Sqlite);
