//! What differs between PostgreSQL and SQLite, as one trait: how a write transaction begins,
//! how writers that must not interleave are serialised, how other replicas hear of a change,
//! how a pool's decision read is written and locked, how rows go in by the thousand, and how
//! a [`Stmt`] is bound and run. Everything else (the SQL itself) is written once, in the
//! `*_sql.rs` files, as functions generic over [`Backend`].

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, FromRow, Pool, Transaction};

use super::StoreResult;
use super::import_sql;
use super::signal_sql::{self, LatestRow};
use super::stmt::Stmt;
use crate::catalog::ImportedOffering;
use crate::core::catalog::{Market, OfferingKey};
use crate::core::money::Micros;

/// A transaction of backend `B`.
pub(super) type Tx<B> = Transaction<'static, <B as Backend>::Db>;

/// A connection of backend `B`: what a transaction or a pooled connection dereferences to.
pub(super) type Conn<B> = <<B as Backend>::Db as Database>::Connection;

/// A row type both engines decode: `#[derive(sqlx::FromRow)]` on fields of portable types
/// (`i64`, `f64`, `String`, their `Option`s), or a tuple of them.
pub(super) trait Decoded:
    for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{
}

impl<T> Decoded for T where
    T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{
}

/// One database engine. The shared SQL calls only these methods and plain statements.
pub(super) trait Backend: Send + Sync + Sized {
    type Db: Database;

    fn pool(&self) -> &Pool<Self::Db>;

    /// The queue to this store's ingestion writer ([`super::ingest_group`]).
    fn ingest_queue(&self) -> &super::ingest_group::IngestQueue;

    /// Starts one of this store's ingestion writers on `jobs` ([`super::ingest_group::write_groups`])
    /// with a clone that shares the connections but not the queue: the queue closes, and the
    /// writer ends, when the store's last clone is dropped. (Each engine spawns it itself:
    /// only there is the writer's future known to be `Send`.)
    fn spawn_ingest_writer(&self, jobs: super::ingest_group::Jobs);

    /// A connection from the pool, for reads outside a transaction.
    async fn conn(&self) -> StoreResult<PoolConnection<Self::Db>> {
        Ok(self.pool().acquire().await?)
    }

    /// Runs `stmt`; returns how many rows it changed.
    async fn execute(conn: &mut Conn<Self>, stmt: Stmt<'_>) -> StoreResult<u64>;

    async fn fetch_all<T: Decoded>(conn: &mut Conn<Self>, stmt: Stmt<'_>) -> StoreResult<Vec<T>>;

    async fn fetch_optional<T: Decoded>(
        conn: &mut Conn<Self>,
        stmt: Stmt<'_>,
    ) -> StoreResult<Option<T>>;

    /// The one row `stmt` returns; no row is an error ([`sqlx::Error::RowNotFound`]).
    async fn fetch_one<T: Decoded>(conn: &mut Conn<Self>, stmt: Stmt<'_>) -> StoreResult<T>;

    /// A transaction for a write. It queues behind other writers as early as the engine
    /// allows, so that two writers never fail on a read-to-write upgrade.
    async fn begin_write(&self) -> StoreResult<Tx<Self>>;

    /// A transaction whose reads all see one moment.
    async fn begin_consistent_read(&self) -> StoreResult<Tx<Self>>;

    /// Serialises catalog writers (imports, seeding, price batches, benchmarks) until `tx`
    /// ends, across replicas.
    async fn lock_catalog(tx: &mut Tx<Self>) -> StoreResult<()>;

    /// Serialises the creation of the first API key until `tx` ends, across replicas.
    async fn lock_keys(tx: &mut Tx<Self>) -> StoreResult<()>;

    /// Reads a pool with everything its decision needs, in one statement: `$1` the pool,
    /// `$2` the start of the day (workers stopped since still count), `$3` now. The columns
    /// are the pool's plus `workers_json`, `latest_json` and `incidents_json`.
    fn read_pool_sql() -> &'static str;

    /// [`read_pool_sql`](Self::read_pool_sql), also locking the pool's row until the
    /// transaction ends, so that decisions that write queue one after another.
    fn lock_pool_sql() -> &'static str;

    /// Tells every replica, at commit, that the catalog changed.
    async fn announce_catalog_change(tx: &mut Tx<Self>) -> StoreResult<()>;

    /// Tells every replica, at commit, that `pool` has work (for KEDA's activation).
    async fn announce_activity(tx: &mut Tx<Self>, pool: &str) -> StoreResult<()>;

    /// Tells every replica, soon after a commit, that `pools` have work, without holding
    /// the transaction for it. Nothing to tell with one process (SQLite): the handler's own
    /// broadcast reaches every subscriber.
    fn announce_activity_soon<'a>(&self, _pools: impl IntoIterator<Item = &'a String>) {}

    /// Tells every replica, at commit, that the API key `id` was revoked.
    async fn announce_revocation(tx: &mut Tx<Self>, id: &str) -> StoreResult<()>;

    // Bulk inserts. The defaults are portable multi-row `INSERT ... VALUES` statements; an
    // engine with a faster path (PostgreSQL's arrays, COPY) overrides them.

    /// Appends samples (one chunk of at most [`CHUNK`](signal_sql::CHUNK), each with when its
    /// batch was received); returns the keys of those that were new, in no particular order.
    async fn insert_samples(
        tx: &mut Tx<Self>,
        rows: &[signal_sql::Received<'_>],
    ) -> StoreResult<Vec<signal_sql::SampleKey>> {
        Self::fetch_all(tx, signal_sql::insert_samples_values(rows)).await
    }

    /// Merges the newest value and activity of each series (one chunk) into `signal_latest`.
    async fn upsert_latest(tx: &mut Tx<Self>, rows: &[LatestRow]) -> StoreResult<()> {
        Self::execute(tx, signal_sql::upsert_latest_values(rows)).await?;
        Ok(())
    }

    /// Inserts new offerings; returns their ids by key.
    async fn insert_offerings<'o>(
        tx: &mut Tx<Self>,
        offerings: &[&'o ImportedOffering],
        now_ms: i64,
    ) -> StoreResult<Vec<(&'o OfferingKey, i64)>> {
        import_sql::insert_offerings_values::<Self>(tx, offerings, now_ms).await
    }

    /// Appends price observations; one whose (offering, market, time) is already recorded is
    /// skipped. Returns how many were appended.
    async fn insert_observations(
        tx: &mut Tx<Self>,
        rows: &[(i64, Market, Micros)],
        observed_at_ms: i64,
        source: &str,
        now_ms: i64,
    ) -> StoreResult<u64> {
        import_sql::insert_observations_values::<Self>(tx, rows, observed_at_ms, source, now_ms)
            .await
    }
}

/// The rows `stmt` returns, each decoded as record `R` and converted to `T` (which parses
/// what the database keeps as text or JSON; a value that does not parse is an error).
pub(super) async fn fetch_all_as<B, R, T>(conn: &mut Conn<B>, stmt: Stmt<'_>) -> StoreResult<Vec<T>>
where
    B: Backend,
    R: Decoded,
    T: TryFrom<R, Error = sqlx::Error>,
{
    let rows: Vec<R> = B::fetch_all(conn, stmt).await?;
    Ok(rows
        .into_iter()
        .map(T::try_from)
        .collect::<Result<_, _>>()?)
}

/// Whether `stmt` (a `SELECT 1 ...`) finds a row.
pub(super) async fn exists<B: Backend>(conn: &mut Conn<B>, stmt: Stmt<'_>) -> StoreResult<bool> {
    Ok(B::fetch_optional::<()>(conn, stmt).await?.is_some())
}

/// A stored value that does not decode (bad JSON, an unknown market) is a database error,
/// as sqlx reports a column of the wrong type.
pub(super) fn decode_error(e: impl Into<sqlx::error::BoxDynError>) -> sqlx::Error {
    sqlx::Error::Decode(e.into())
}

/// A value that does not encode (JSON of a policy) is reported like a bind that failed.
pub(super) fn encode_error(e: impl Into<sqlx::error::BoxDynError>) -> sqlx::Error {
    sqlx::Error::Encode(e.into())
}
