//! The SQLite store: the embedded default, one file, one process. Writers begin with
//! `BEGIN IMMEDIATE` so that two writers queue on the file lock instead of failing on a
//! read-to-write upgrade; WAL lets readers go on meanwhile.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool};

use super::StoreResult;
use super::backend::{Backend, Conn, Decoded, Tx};
use super::ingest_group::{IngestQueue, Jobs, write_groups};
use super::stmt::{Stmt, arguments};

/// The decision read ([`Backend::read_pool_sql`]), aggregating with `json_group_array`.
/// Inside `BEGIN IMMEDIATE` it already holds the one write lock, so it locks as it is.
const READ_POOL: &str = "SELECT p.name, p.policy, p.state, p.last_decision, p.last_decision_key,
        p.last_decision_at_ms, p.since_ms, p.created_at_ms, p.updated_at_ms,
    (SELECT json_group_array(json_array(w.id, w.instance_type, w.market, w.zone,
                w.started_at_ms, w.stopped_at_ms, w.warning_kind, w.warning_at_ms,
                w.warning_action_at_ms))
       FROM (SELECT * FROM workers w
              WHERE w.pool = p.name AND (w.stopped_at_ms IS NULL OR w.stopped_at_ms >= $2)
              ORDER BY w.started_at_ms, w.id) w) AS workers_json,
    (SELECT json_group_array(json_array(s.worker, s.name, s.value, s.at_ms, s.last_busy_at_ms,
                s.idle_since_ms))
       FROM (SELECT * FROM signal_latest s WHERE s.pool = p.name ORDER BY s.worker, s.name) s
    ) AS latest_json,
    (SELECT json_group_array(json_array(e.kind, e.instance_type, e.zone, e.at_ms))
       FROM pool_events e
      WHERE e.pool = p.name AND e.at_ms >= $3 - p.incident_lookback_ms
        AND e.kind IN ('interruption_warning', 'capacity_error')
        AND e.instance_type IS NOT NULL) AS incidents_json
    FROM pools p WHERE p.name = $1";

#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    ingest_queue: Arc<IngestQueue>,
}

impl SqliteStore {
    pub(crate) const MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

    /// Applies the pending SQLite migrations.
    pub async fn migrate(&self) -> StoreResult<()> {
        Self::MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a commit is on disk before the 2xx that reports it, power loss included
            // (NORMAL in WAL mode may lose the last commits on power loss).
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let path = options.get_filename();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(sqlx::Error::Io)?;
        }
        create_owner_only(path)?;
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Self {
            pool,
            ingest_queue: Arc::default(),
        })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// Creates the database file with mode 0600 if it is not there yet: it holds key digests and
/// webhook state, and SQLite would otherwise create it by the umask (often world-readable).
/// SQLite gives its `-wal` and `-shm` files the database file's mode. An existing file keeps
/// its mode: the operator may have chosen it.
fn create_owner_only(path: &std::path::Path) -> Result<(), sqlx::Error> {
    let name = path.as_os_str();
    if name.is_empty() || name == ":memory:" {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(sqlx::Error::Io(e)),
    }
}

/// One file and one process: `BEGIN IMMEDIATE` takes the only write lock there is, so the
/// catalog and key locks come with it, and nobody else needs telling of a change (the API
/// announces activity and forgets revoked keys itself; readers poll the catalog version).
/// Bulk inserts are the portable multi-row statements.
impl Backend for SqliteStore {
    type Db = Sqlite;

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn ingest_queue(&self) -> &IngestQueue {
        &self.ingest_queue
    }

    fn spawn_ingest_writer(&self, jobs: Jobs) {
        let writer = Self {
            ingest_queue: Arc::default(),
            ..self.clone()
        };
        tokio::spawn(write_groups(writer, jobs));
    }

    async fn execute(conn: &mut Conn<Self>, stmt: Stmt<'_>) -> StoreResult<u64> {
        let (sql, args) = stmt.into_parts();
        let query = sqlx::query_with(&sql, arguments::<Sqlite>(args)?);
        Ok(query.execute(conn).await?.rows_affected())
    }

    async fn fetch_all<T: Decoded>(conn: &mut Conn<Self>, stmt: Stmt<'_>) -> StoreResult<Vec<T>> {
        let (sql, args) = stmt.into_parts();
        Ok(sqlx::query_as_with(&sql, arguments::<Sqlite>(args)?)
            .fetch_all(conn)
            .await?)
    }

    async fn fetch_optional<T: Decoded>(
        conn: &mut Conn<Self>,
        stmt: Stmt<'_>,
    ) -> StoreResult<Option<T>> {
        let (sql, args) = stmt.into_parts();
        Ok(sqlx::query_as_with(&sql, arguments::<Sqlite>(args)?)
            .fetch_optional(conn)
            .await?)
    }

    async fn fetch_one<T: Decoded>(conn: &mut Conn<Self>, stmt: Stmt<'_>) -> StoreResult<T> {
        let (sql, args) = stmt.into_parts();
        Ok(sqlx::query_as_with(&sql, arguments::<Sqlite>(args)?)
            .fetch_one(conn)
            .await?)
    }

    async fn begin_write(&self) -> StoreResult<Tx<Self>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// A deferred read transaction in WAL mode reads one consistent snapshot of the file.
    async fn begin_consistent_read(&self) -> StoreResult<Tx<Self>> {
        Ok(self.pool.begin().await?)
    }

    async fn lock_catalog(_tx: &mut Tx<Self>) -> StoreResult<()> {
        Ok(())
    }

    async fn lock_keys(_tx: &mut Tx<Self>) -> StoreResult<()> {
        Ok(())
    }

    fn read_pool_sql() -> &'static str {
        READ_POOL
    }

    fn lock_pool_sql() -> &'static str {
        READ_POOL
    }

    async fn announce_catalog_change(_tx: &mut Tx<Self>) -> StoreResult<()> {
        Ok(())
    }

    async fn announce_activity(_tx: &mut Tx<Self>, _pool: &str) -> StoreResult<()> {
        Ok(())
    }

    async fn announce_revocation(_tx: &mut Tx<Self>, _id: &str) -> StoreResult<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new database file is readable by its owner only, and every connection commits with
    /// `synchronous=FULL` (2).
    #[tokio::test]
    async fn a_new_database_is_owner_only_and_commits_durably() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub").join("t.db");
        let store = SqliteStore::connect(&format!("sqlite://{}", file.display()))
            .await
            .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{mode:o}");
        }
        for _ in 0..3 {
            let mut conn = store.pool().acquire().await.unwrap();
            let (level,): (i64,) = sqlx::query_as("PRAGMA synchronous")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(level, 2);
        }
    }
}
