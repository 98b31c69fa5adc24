//! The PostgreSQL store: the production backend, and the one multi-replica guarantees are made
//! for. Catalog writers take a transaction-scoped advisory lock, and every catalog change sends
//! a NOTIFY on [`CATALOG_CHANNEL`] at commit so other replicas reload their snapshot.

use std::sync::{Arc, LazyLock};

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

use super::StoreResult;
use super::activity_announcer::ActivityAnnouncer;
use super::backend::{Backend, Conn, Decoded, Tx};
use super::ingest_group::{IngestQueue, Jobs, write_groups};
use super::signal_sql::{LatestRow, Received, SampleKey, UPSERT_LATEST_TAIL};
use super::stmt::{Stmt, arguments};

/// The LISTEN/NOTIFY channel that announces catalog changes.
pub const CATALOG_CHANNEL: &str = "trainscaler_catalog";

/// The LISTEN/NOTIFY channel on which ingestion names pools whose samples show work.
pub const ACTIVITY_CHANNEL: &str = "trainscaler_activity";

/// The LISTEN/NOTIFY channel that names API keys as they are revoked.
pub const KEYS_CHANNEL: &str = "trainscaler_keys";

/// How long a LISTEN session may stay quiet before it is asked whether it is alive, and how
/// long it then has to answer.
pub const LISTENER_CHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// What a LISTEN session brought within a wait ([`PgStore::listen_for`]).
#[derive(Debug)]
pub enum Heard {
    /// A notification; `None` when the connection was lost and sqlx opened a new one, so
    /// notifications sent in between are gone.
    Notification(Option<sqlx::postgres::PgNotification>),
    /// Nothing, and the session still answers.
    Quiet,
    /// The session failed (with its error) or stopped answering: open a new one.
    Lost(Option<sqlx::Error>),
}

/// Serialises catalog imports and seeding across replicas (an arbitrary constant key).
const CATALOG_LOCK_KEY: i64 = 0x7472_6169_6e73_6361; // "trainsca"
/// The reconciler's leader lease (a session lock held for as long as a replica leads). Kept
/// beside the catalog's key because one key for both would block every catalog write while a
/// leader exists.
pub const LEADER_LOCK_KEY: i64 = 0x7265_636f_6e63_696c; // "reconcil"
/// Serialises the first-start admin key between replicas starting together.
const KEYS_LOCK_KEY: i64 = 0x6170_696b_6579_7331; // "apikeys1"

/// The decision read ([`Backend::read_pool_sql`]), aggregating with `json_agg`.
const READ_POOL: &str = "SELECT p.name, p.policy, p.state, p.last_decision, p.last_decision_key,
        p.last_decision_at_ms, p.since_ms, p.created_at_ms, p.updated_at_ms,
    (SELECT json_agg(json_build_array(w.id, w.instance_type, w.market, w.zone, w.started_at_ms,
                w.stopped_at_ms, w.warning_kind, w.warning_at_ms, w.warning_action_at_ms)
            ORDER BY w.started_at_ms, w.id)
       FROM workers w
      WHERE w.pool = p.name AND (w.stopped_at_ms IS NULL OR w.stopped_at_ms >= $2)
    )::text AS workers_json,
    (SELECT json_agg(json_build_array(s.worker, s.name, s.value, s.at_ms, s.last_busy_at_ms,
                s.idle_since_ms) ORDER BY s.worker, s.name)
       FROM signal_latest s WHERE s.pool = p.name)::text AS latest_json,
    (SELECT json_agg(json_build_array(e.kind, e.instance_type, e.zone, e.at_ms))
       FROM pool_events e
      WHERE e.pool = p.name AND e.at_ms >= $3 - p.incident_lookback_ms
        AND e.kind IN ('interruption_warning', 'capacity_error')
        AND e.instance_type IS NOT NULL)::text AS incidents_json
    FROM pools p WHERE p.name = $1";

/// The same, locking the pool's row until the transaction ends: concurrent decisions that
/// write queue here, and hold the lock for one round trip, not four. NO KEY UPDATE, so
/// inserts that merely reference the pool (workers, events) do not wait.
static LOCK_POOL: LazyLock<String> =
    LazyLock::new(|| format!("{READ_POOL} FOR NO KEY UPDATE OF p"));

/// Queues a notification in the transaction: PostgreSQL delivers it only if and when the
/// commit succeeds, so listeners never hear of a change that rolled back.
async fn notify(
    tx: &mut Transaction<'static, Postgres>,
    channel: &str,
    payload: &str,
) -> StoreResult<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(payload)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Takes the advisory lock `key` until the transaction ends (commit or rollback both free it).
async fn advisory_xact_lock(tx: &mut Transaction<'static, Postgres>, key: i64) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(key)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    announcer: ActivityAnnouncer,
    ingest_queue: Arc<IngestQueue>,
}

impl PgStore {
    pub(crate) const MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

    pub async fn connect(url: &str, options: &super::StoreOptions) -> StoreResult<Self> {
        // The pool tests an idle connection before handing it out (sqlx's default), so
        // connections that died with an outage are replaced rather than failing a request
        // once the database is back.
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(options.acquire_timeout)
            .connect(url)
            .await?;
        let announcer = ActivityAnnouncer::start(pool.clone());
        Ok(Self {
            pool,
            announcer,
            ingest_queue: Arc::default(),
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A listener subscribed to catalog change notifications. It reconnects by itself.
    pub async fn catalog_listener(&self) -> StoreResult<PgListener> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(CATALOG_CHANNEL).await?;
        Ok(listener)
    }

    /// Applies the pending PostgreSQL migrations.
    pub async fn migrate(&self) -> StoreResult<()> {
        Self::MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    /// Waits up to `wait` for what a LISTEN session brings. When nothing comes, the session is
    /// asked whether it is alive (within [`LISTENER_CHECK`]): a partition leaves the
    /// connection open and silent, so a quiet listener cannot otherwise tell "no news" from
    /// "cut off". Both listeners (catalog, activity) wait through this.
    pub async fn listen_for(listener: &mut PgListener, wait: std::time::Duration) -> Heard {
        match tokio::time::timeout(wait, listener.try_recv()).await {
            Ok(Ok(n)) => Heard::Notification(n),
            Ok(Err(e)) => Heard::Lost(Some(e)),
            Err(_) => {
                let ping = sqlx::query("SELECT 1").execute(&mut *listener);
                match tokio::time::timeout(LISTENER_CHECK, ping).await {
                    Ok(Ok(_)) => Heard::Quiet,
                    _ => Heard::Lost(None),
                }
            }
        }
    }

    /// A listener for pool activity and key revocations (see [`ACTIVITY_CHANNEL`] and
    /// [`KEYS_CHANNEL`]): both are news every replica acts on at once, on one session.
    pub async fn activity_listener(&self) -> StoreResult<PgListener> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener
            .listen_all([ACTIVITY_CHANNEL, KEYS_CHANNEL])
            .await?;
        Ok(listener)
    }
}

impl Backend for PgStore {
    type Db = Postgres;

    fn pool(&self) -> &PgPool {
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
        let query = sqlx::query_with(&sql, arguments::<Postgres>(args)?);
        Ok(query.execute(conn).await?.rows_affected())
    }

    async fn fetch_all<T: Decoded>(conn: &mut Conn<Self>, stmt: Stmt<'_>) -> StoreResult<Vec<T>> {
        let (sql, args) = stmt.into_parts();
        Ok(sqlx::query_as_with(&sql, arguments::<Postgres>(args)?)
            .fetch_all(conn)
            .await?)
    }

    async fn fetch_optional<T: Decoded>(
        conn: &mut Conn<Self>,
        stmt: Stmt<'_>,
    ) -> StoreResult<Option<T>> {
        let (sql, args) = stmt.into_parts();
        Ok(sqlx::query_as_with(&sql, arguments::<Postgres>(args)?)
            .fetch_optional(conn)
            .await?)
    }

    async fn fetch_one<T: Decoded>(conn: &mut Conn<Self>, stmt: Stmt<'_>) -> StoreResult<T> {
        let (sql, args) = stmt.into_parts();
        Ok(sqlx::query_as_with(&sql, arguments::<Postgres>(args)?)
            .fetch_one(conn)
            .await?)
    }

    async fn begin_write(&self) -> StoreResult<Tx<Self>> {
        Ok(self.pool.begin().await?)
    }

    /// Statements in READ COMMITTED each see their own moment; a snapshot must see one.
    async fn begin_consistent_read(&self) -> StoreResult<Tx<Self>> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    async fn lock_catalog(tx: &mut Tx<Self>) -> StoreResult<()> {
        advisory_xact_lock(tx, CATALOG_LOCK_KEY).await
    }

    async fn lock_keys(tx: &mut Tx<Self>) -> StoreResult<()> {
        advisory_xact_lock(tx, KEYS_LOCK_KEY).await
    }

    fn read_pool_sql() -> &'static str {
        READ_POOL
    }

    fn lock_pool_sql() -> &'static str {
        &LOCK_POOL
    }

    async fn announce_catalog_change(tx: &mut Tx<Self>) -> StoreResult<()> {
        notify(tx, CATALOG_CHANNEL, "").await
    }

    async fn announce_activity(tx: &mut Tx<Self>, pool: &str) -> StoreResult<()> {
        notify(tx, ACTIVITY_CHANNEL, pool).await
    }

    /// After the commit, folded with other batches' (see [`ActivityAnnouncer`] for why).
    fn announce_activity_soon<'a>(&self, pools: impl IntoIterator<Item = &'a String>) {
        self.announcer.announce(pools);
    }

    /// Other replicas forget a revoked key from their caches when this arrives, at commit,
    /// instead of trusting it until their cache entry expires.
    async fn announce_revocation(tx: &mut Tx<Self>, id: &str) -> StoreResult<()> {
        notify(tx, KEYS_CHANNEL, id).await
    }

    /// Appends samples with one array per column: PostgreSQL plans one statement with six
    /// parameters instead of six thousand.
    async fn insert_samples(
        tx: &mut Tx<Self>,
        rows: &[Received<'_>],
    ) -> StoreResult<Vec<SampleKey>> {
        let keys = sqlx::query_as(
            "INSERT INTO metric_samples (pool, worker, name, at_ms, value, received_at_ms)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[],
                 $5::float8[], $6::bigint[])
             ON CONFLICT (pool, worker, name, at_ms) DO NOTHING
             RETURNING pool, worker, name, at_ms",
        )
        .bind(
            rows.iter()
                .map(|(s, _)| s.pool.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            rows.iter()
                .map(|(s, _)| s.worker.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(rows.iter().map(|(s, _)| s.name).collect::<Vec<_>>())
        .bind(rows.iter().map(|(s, _)| s.at_ms).collect::<Vec<_>>())
        .bind(rows.iter().map(|(s, _)| s.value).collect::<Vec<_>>())
        .bind(
            rows.iter()
                .map(|(_, received)| *received)
                .collect::<Vec<_>>(),
        )
        .fetch_all(&mut **tx)
        .await?;
        Ok(keys)
    }

    /// The same with arrays for the series' upsert.
    async fn upsert_latest(tx: &mut Tx<Self>, rows: &[LatestRow]) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO signal_latest
                 (pool, worker, name, at_ms, value, last_busy_at_ms, idle_since_ms)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[],
                 $5::float8[], $6::bigint[], $7::bigint[])
             {}",
            UPSERT_LATEST_TAIL.as_str()
        );
        let busy: Vec<_> = rows.iter().map(|s| s.activity.last_busy_at_ms).collect();
        let idle: Vec<_> = rows.iter().map(|s| s.activity.idle_since_ms).collect();
        sqlx::query(&sql)
            .bind(rows.iter().map(|s| s.pool.as_str()).collect::<Vec<_>>())
            .bind(rows.iter().map(|s| s.worker.as_str()).collect::<Vec<_>>())
            .bind(rows.iter().map(|s| s.name).collect::<Vec<_>>())
            .bind(rows.iter().map(|s| s.at_ms).collect::<Vec<_>>())
            .bind(rows.iter().map(|s| s.value).collect::<Vec<_>>())
            .bind(busy)
            .bind(idle)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}
