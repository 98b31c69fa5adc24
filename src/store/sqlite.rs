//! The SQLite store: the embedded default, one file, one process. Writers begin with
//! `BEGIN IMMEDIATE` so that two writers queue on the file lock instead of failing on a
//! read-to-write upgrade; WAL lets readers go on meanwhile.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::StoreResult;
use super::pool_sql::{pool_from_row, pool_sql, worker_from_row};
use super::sql::{bind_spec, offering_from_row, shared_sql, spec_from_row};

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

    /// Reads a pool with its last busy time; `BEGIN IMMEDIATE` already holds the database's one write lock.
    const LOCK_POOL: &'static str = "SELECT name, policy, state, last_decision, last_decision_key, last_decision_at_ms, since_ms, created_at_ms, updated_at_ms,
        (SELECT last_busy_at_ms FROM pool_activity a WHERE a.pool = p.name) AS last_busy_at_ms
        FROM pools p WHERE name = $1";

    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// A deferred read transaction in WAL mode reads one consistent snapshot of the file.
    async fn begin_consistent_read(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin().await?)
    }

    /// `BEGIN IMMEDIATE` already holds the only write lock there is.
    async fn lock_catalog(_tx: &mut Transaction<'static, Sqlite>) -> StoreResult<()> {
        Ok(())
    }

    /// SQLite has no notifications; readers poll the catalog version instead.
    async fn announce_catalog_change(_tx: &mut Transaction<'static, Sqlite>) -> StoreResult<()> {
        Ok(())
    }
}

shared_sql!(SqliteStore, Sqlite);
pool_sql!(SqliteStore, Sqlite);
