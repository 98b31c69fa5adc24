//! Persistence behind one seam: [`Store`], with a PostgreSQL and an SQLite implementation
//! chosen from the URL scheme. Both run the same SQL, written once in the `*_sql.rs` files as
//! functions generic over [`Backend`](backend::Backend), the trait that holds what differs
//! (transactions, locks, notifications, bulk inserts); each has its own migrations.
//! PostgreSQL adds cross-replica change notification.

mod activity_announcer;
mod backend;
mod catalog_rows;
mod catalog_sql;
mod decision_sql;
pub mod fault;
mod idempotency;
mod import_sql;
mod ingest_group;
mod keys;
mod notice_sql;
mod pool_rows;
mod pool_sql;
pub mod pools;
mod postgres;
mod signal_sql;
mod sqlite;
mod stmt;
mod worker_names;

use crate::auth::pools::PoolScope;
use crate::catalog::ImportedOffering;
use crate::core::benchmark::Benchmark;
use crate::core::catalog::{GpuFacts, Market, Offering, OfferingKey, ProviderEntry};
use crate::core::money::Micros;
use crate::core::policy::Policy;
use crate::core::scale::Worker;

pub use fault::Fault;
pub use idempotency::{IdempotencyClaim, Once, StoredKey, StoredResponse};
pub use keys::KeyRow;
pub use pools::{
    CloudNotice, DecisionRead, DecisionWrite, EventPage, EventRow, IngestReport, LatestSignal,
    NewEvent, NewSample, NewWorker, NoticeOutcome, PoolRow, SyncReport,
};
pub use postgres::{
    ACTIVITY_CHANNEL, CATALOG_CHANNEL, Heard, KEYS_CHANNEL, LEADER_LOCK_KEY, LISTENER_CHECK,
    PgStore,
};
pub use signal_sql::Busy;
pub use sqlite::SqliteStore;

/// Failures of the store. Input problems that only the database can detect (an offering that
/// does not exist) are their own variants so the API can answer them as 4xx.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL `{0}`: use postgres://... or sqlite://...")]
    UnsupportedUrl(String),
    #[error("unknown provider `{0}`")]
    UnknownProvider(String),
    #[error("observation {index}: no offering {key:?}")]
    UnknownOffering { index: usize, key: OfferingKey },
    #[error(
        "observation {index}: a different price is already recorded for that offering, market and time"
    )]
    ConflictingObservation { index: usize },
    #[error(
        "the {market} price of {key:?} differs from the one already recorded at the same observation time"
    )]
    ConflictingImport { key: OfferingKey, market: Market },
    #[error("no offering of instance type `{instance_type}` from `{provider}`")]
    UnknownInstanceType {
        provider: String,
        instance_type: String,
    },
    #[error("a different measurement is already recorded for that workload, size and measured_at")]
    ConflictingBenchmark,
    #[error("sample {index}: no pool `{pool}`")]
    UnknownPool { index: usize, pool: String },
    /// A notice of a batch sent with a key restricted to pools belongs to another pool;
    /// nothing was written.
    #[error("notice {index}: pool `{pool}` is not one of the sender's pools")]
    PoolNotAllowed { index: usize, pool: String },
    /// Another request holds this idempotency key (it committed first); nothing was written.
    #[error("the idempotency key is already used")]
    IdempotencyKeyTaken,
    /// The failure of a write this request shared with others (a group of sample batches),
    /// as each of them sees it: nothing of the group was written.
    #[error("{message}")]
    Shared { fault: Fault, message: String },
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A price seen for one offering in one market at one time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewObservation {
    pub key: OfferingKey,
    pub market: Market,
    pub price: Micros,
    pub observed_at_ms: i64,
}

/// A stored price observation.
#[derive(Debug, Clone, PartialEq)]
pub struct PricePoint {
    pub id: i64,
    pub key: OfferingKey,
    pub market: Market,
    pub price: Micros,
    pub observed_at_ms: i64,
    pub source: String,
}

/// What an import changed. Importing the same file twice gives all zeros the second time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ImportReport {
    pub offerings_added: u64,
    pub offerings_updated: u64,
    pub offerings_unchanged: u64,
    pub prices_appended: u64,
}

/// What a price batch changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct BatchReport {
    pub inserted: u64,
    /// Observations already recorded with the same price: re-sending is a no-op.
    pub duplicates: u64,
}

/// Filters for price history; every field narrows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryFilter {
    pub provider: Option<String>,
    pub instance_type: Option<String>,
    pub region: Option<String>,
    pub zone: Option<String>,
    pub market: Option<Market>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// Keyset: only observations beyond this (observed_at_ms, id) in the chosen order.
    pub after: Option<(i64, i64)>,
    /// Newest first instead of oldest first.
    pub newest_first: bool,
    pub limit: i64,
}

/// Everything the in-memory snapshot is built from.
#[derive(Debug, Clone, Default)]
pub struct CatalogRows {
    /// The catalog version these rows were read at.
    pub version: i64,
    pub providers: Vec<ProviderEntry>,
    pub gpus: Vec<GpuFacts>,
    pub offerings: Vec<Offering>,
    pub benchmarks: Vec<Benchmark>,
}

/// A provider's catalog file to load, with when its prices were observed and where from.
#[derive(Debug, Clone, Copy)]
pub struct CatalogImport<'a> {
    pub provider: &'a str,
    pub offerings: &'a [ImportedOffering],
    pub observed_at_ms: i64,
    pub source: &'a str,
}

/// How the store's connection pool behaves.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How long a PostgreSQL statement waits for a connection (a free one, or a new one the
    /// server accepts) before failing with [`Fault::Unavailable`].
    pub acquire_timeout: std::time::Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            acquire_timeout: std::time::Duration::from_secs(2),
        }
    }
}

/// The store the service runs on, chosen by URL scheme.
#[derive(Debug, Clone)]
pub enum Store {
    Postgres(PgStore),
    Sqlite(SqliteStore),
}

/// Runs the same call on whichever backend the store is.
macro_rules! dispatch {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            Store::Postgres($store) => $call,
            Store::Sqlite($store) => $call,
        }
    };
}

impl Store {
    /// Connects to `url` (`postgres://`, `postgresql://` or `sqlite://`) with default
    /// options. SQLite files and their parent folders are created when missing.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        Self::connect_with(url, StoreOptions::default()).await
    }

    /// [`connect`](Self::connect) with these options.
    pub async fn connect_with(url: &str, options: StoreOptions) -> StoreResult<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres(PgStore::connect(url, &options).await?))
        } else if url.starts_with("sqlite:") {
            Ok(Self::Sqlite(SqliteStore::connect(url).await?))
        } else {
            Err(StoreError::UnsupportedUrl(url.to_string()))
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
            Self::Sqlite(_) => "sqlite",
        }
    }

    /// Applies this backend's pending migrations.
    pub async fn migrate(&self) -> StoreResult<()> {
        dispatch!(self, s => s.migrate().await)
    }

    pub async fn ping(&self) -> StoreResult<()> {
        dispatch!(self, s => catalog_sql::ping(s).await)
    }

    pub async fn providers(&self) -> StoreResult<Vec<ProviderEntry>> {
        dispatch!(self, s => catalog_sql::providers(s).await)
    }

    pub async fn upsert_gpus(&self, gpus: &[GpuFacts]) -> StoreResult<u64> {
        dispatch!(self, s => catalog_sql::upsert_gpus(s, gpus).await)
    }

    /// Loads `imports` only if the catalog holds no offering yet; several replicas starting at
    /// once seed it exactly once. Returns `None` when it was not empty.
    pub async fn seed_if_empty(
        &self,
        gpus: &[GpuFacts],
        imports: &[CatalogImport<'_>],
        now_ms: i64,
    ) -> StoreResult<Option<ImportReport>> {
        dispatch!(self, s => import_sql::seed_if_empty(s, gpus, imports, now_ms).await)
    }

    /// Upserts offerings and appends each price that differs from the latest one recorded.
    pub async fn import_catalog(
        &self,
        import: CatalogImport<'_>,
        now_ms: i64,
    ) -> StoreResult<ImportReport> {
        dispatch!(self, s => import_sql::import_catalog(s, import, now_ms).await)
    }

    /// Records a batch all or nothing.
    pub async fn record_prices(
        &self,
        batch: &[NewObservation],
        source: &str,
        now_ms: i64,
    ) -> StoreResult<BatchReport> {
        dispatch!(self, s => catalog_sql::record_prices(s, batch, source, now_ms, None).await)
    }

    /// [`record_prices`](Self::record_prices), claiming an idempotency key in its transaction.
    pub async fn record_prices_once(
        &self,
        batch: &[NewObservation],
        source: &str,
        now_ms: i64,
        once: Option<Once<'_, BatchReport>>,
    ) -> StoreResult<BatchReport> {
        dispatch!(self, s => catalog_sql::record_prices(s, batch, source, now_ms, once).await)
    }

    /// A counter that every catalog change increments, for change detection by polling.
    pub async fn catalog_version(&self) -> StoreResult<i64> {
        dispatch!(self, s => catalog_sql::catalog_version(s).await)
    }

    pub async fn load_catalog(&self) -> StoreResult<CatalogRows> {
        dispatch!(self, s => catalog_sql::load_catalog(s).await)
    }

    /// Records one benchmark; `false` when the same measurement was already recorded.
    pub async fn record_benchmark(&self, b: &Benchmark, now_ms: i64) -> StoreResult<bool> {
        dispatch!(self, s => catalog_sql::record_benchmark(s, b, now_ms, None).await)
    }

    /// [`record_benchmark`](Self::record_benchmark), claiming an idempotency key in its
    /// transaction.
    pub async fn record_benchmark_once(
        &self,
        b: &Benchmark,
        now_ms: i64,
        once: Option<Once<'_, bool>>,
    ) -> StoreResult<bool> {
        dispatch!(self, s => catalog_sql::record_benchmark(s, b, now_ms, once).await)
    }

    pub async fn price_history(&self, filter: &HistoryFilter) -> StoreResult<Vec<PricePoint>> {
        dispatch!(self, s => catalog_sql::price_history(s, filter).await)
    }

    pub async fn put_pool(&self, name: &str, policy: &Policy, now_ms: i64) -> StoreResult<bool> {
        dispatch!(self, s => pool_sql::put_pool(s, name, policy, now_ms).await)
    }

    pub async fn pools(&self) -> StoreResult<Vec<PoolRow>> {
        dispatch!(self, s => pool_sql::pools(s).await)
    }

    /// Every pool with how many live workers it has, read in one statement.
    pub async fn pools_with_live_workers(&self) -> StoreResult<Vec<(PoolRow, u64)>> {
        dispatch!(self, s => pool_sql::pools_with_live_workers(s).await)
    }

    pub async fn find_pool(&self, name: &str) -> StoreResult<Option<PoolRow>> {
        dispatch!(self, s => pool_sql::find_pool(s, name).await)
    }

    pub async fn delete_pool(&self, name: &str) -> StoreResult<bool> {
        dispatch!(self, s => pool_sql::delete_pool(s, name).await)
    }

    pub async fn put_worker(
        &self,
        pool: &str,
        w: &NewWorker,
        now_ms: i64,
    ) -> StoreResult<Option<bool>> {
        dispatch!(self, s => pool_sql::put_worker(s, pool, w, now_ms).await)
    }

    /// Makes the pool's live workers exactly `workers`, as its cloud group reports them.
    pub async fn sync_workers(
        &self,
        pool: &str,
        workers: &[NewWorker],
        now_ms: i64,
    ) -> StoreResult<SyncReport> {
        dispatch!(self, s => pool_sql::sync_workers(s, pool, workers, now_ms).await)
    }

    /// Every pool's live workers and their aliases, as (pool, id or alias).
    pub async fn live_worker_names(&self) -> StoreResult<Vec<(String, String)>> {
        dispatch!(self, s => worker_names::live_worker_names(s).await)
    }

    /// The aliases of the pool's workers, as (worker id, alias), sorted by both.
    pub async fn worker_aliases(&self, pool: &str) -> StoreResult<Vec<(String, String)>> {
        dispatch!(self, s => pool_sql::worker_aliases(s, pool).await)
    }

    /// Live workers whose job reported a saved checkpoint: (worker, when).
    pub async fn checkpoints(&self, pool: &str) -> StoreResult<Vec<(String, i64)>> {
        dispatch!(self, s => pool_sql::checkpoints(s, pool).await)
    }

    /// Appends events to a pool's log; returns how many were new (not deduplicated).
    pub async fn append_events(
        &self,
        pool: &str,
        events: &[NewEvent],
        now_ms: i64,
    ) -> StoreResult<u64> {
        dispatch!(self, s => pool_sql::append_events(s, pool, events, now_ms).await)
    }

    pub async fn stop_worker(&self, pool: &str, id: &str, now_ms: i64) -> StoreResult<bool> {
        dispatch!(self, s => pool_sql::stop_worker(s, pool, id, now_ms).await)
    }

    pub async fn workers(&self, pool: &str, stopped_since_ms: i64) -> StoreResult<Vec<Worker>> {
        dispatch!(self, s => pool_sql::workers(s, pool, stopped_since_ms).await)
    }

    pub async fn latest_signals(
        &self,
        pool: &str,
        since_ms: i64,
    ) -> StoreResult<Vec<LatestSignal>> {
        dispatch!(self, s => signal_sql::latest_signals(s, pool, since_ms).await)
    }

    /// Stores a batch of samples all or nothing; every pool must exist.
    pub async fn ingest(
        &self,
        samples: Vec<NewSample>,
        busy: Busy,
        now_ms: i64,
    ) -> StoreResult<IngestReport> {
        self.ingest_once(samples, busy, now_ms, None).await
    }

    /// [`ingest`](Self::ingest), claiming an idempotency key in its transaction. Without a
    /// key the batch is written in the next group commit (see [`ingest_group`]), with one in
    /// its own transaction.
    pub async fn ingest_once(
        &self,
        samples: Vec<NewSample>,
        busy: Busy,
        now_ms: i64,
        once: Option<Once<'_, IngestReport>>,
    ) -> StoreResult<IngestReport> {
        match once {
            None => dispatch!(self, s => ingest_group::ingest(s, samples, busy, now_ms).await),
            once => dispatch!(self, s => signal_sql::ingest(s, &samples, busy, now_ms, once).await),
        }
    }

    pub async fn record_notices(
        &self,
        notices: &[CloudNotice],
        now_ms: i64,
    ) -> StoreResult<Vec<NoticeOutcome>> {
        dispatch!(self, s => notice_sql::record_notices(s, notices, now_ms, None, &PoolScope::every()).await)
    }

    /// [`record_notices`](Self::record_notices), claiming an idempotency key in its
    /// transaction.
    pub async fn record_notices_once(
        &self,
        notices: &[CloudNotice],
        now_ms: i64,
        once: Option<Once<'_, Vec<NoticeOutcome>>>,
    ) -> StoreResult<Vec<NoticeOutcome>> {
        self.record_notices_within(notices, now_ms, once, &PoolScope::every())
            .await
    }

    /// [`Store::record_notices_once`] for a sender that reaches only `pools`: a notice that
    /// belongs to another pool fails the batch with [`StoreError::PoolNotAllowed`].
    pub async fn record_notices_within(
        &self,
        notices: &[CloudNotice],
        now_ms: i64,
        once: Option<Once<'_, Vec<NoticeOutcome>>>,
        pools: &PoolScope,
    ) -> StoreResult<Vec<NoticeOutcome>> {
        dispatch!(self, s => notice_sql::record_notices(s, notices, now_ms, once, pools).await)
    }

    /// The live row for an idempotency key of `caller` on `route`, if any.
    pub async fn idempotency_key(
        &self,
        caller: &str,
        route: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<StoredKey>> {
        dispatch!(self, s => idempotency::idempotency_key(s, caller, route, key, now_ms).await)
    }

    /// Deletes idempotency keys expired at `now_ms`.
    pub async fn prune_idempotency_keys(&self, now_ms: i64) -> StoreResult<u64> {
        dispatch!(self, s => idempotency::prune_idempotency_keys(s, now_ms).await)
    }

    /// One pool decision under the pool's lock; `None` when the pool does not exist.
    pub async fn decide_pool<R>(
        &self,
        name: &str,
        now_ms: i64,
        decide: impl Fn(&DecisionRead) -> (DecisionWrite, R),
    ) -> StoreResult<Option<R>> {
        dispatch!(self, s => decision_sql::decide_pool(s, name, now_ms, decide).await)
    }

    pub async fn events(&self, pool: &str, page: EventPage) -> StoreResult<Vec<EventRow>> {
        dispatch!(self, s => pool_sql::events(s, pool, page).await)
    }

    /// Deletes `pool`'s worker series last reported before `before_ms`.
    pub async fn prune_worker_series(&self, pool: &str, before_ms: i64) -> StoreResult<u64> {
        dispatch!(self, s => signal_sql::prune_worker_series(s, pool, before_ms).await)
    }

    pub async fn prune_samples(&self, before_ms: i64) -> StoreResult<u64> {
        dispatch!(self, s => signal_sql::prune_samples(s, before_ms).await)
    }

    pub async fn create_key(&self, key: &KeyRow) -> StoreResult<()> {
        dispatch!(self, s => keys::create_key(s, key).await)
    }

    /// Stores `key` only if no key was ever stored (see the backends' docs); `hand_over` runs
    /// before the commit and its failure keeps nothing.
    pub async fn create_first_key(
        &self,
        key: &KeyRow,
        hand_over: impl FnOnce() -> std::io::Result<()>,
    ) -> StoreResult<bool> {
        dispatch!(self, s => keys::create_first_key(s, key, hand_over).await)
    }

    pub async fn active_key(&self, id: &str) -> StoreResult<Option<KeyRow>> {
        dispatch!(self, s => keys::active_key(s, id).await)
    }

    /// Rewrites a legacy Argon2 hash as its digest; see `keys::rehash_key`.
    pub async fn rehash_key(&self, id: &str, old: &str, new: &str) -> StoreResult<bool> {
        dispatch!(self, s => keys::rehash_key(s, id, old, new).await)
    }

    pub async fn keys(&self) -> StoreResult<Vec<KeyRow>> {
        dispatch!(self, s => keys::keys(s).await)
    }

    pub async fn revoke_key(&self, id: &str, now_ms: i64) -> StoreResult<bool> {
        dispatch!(self, s => keys::revoke_key(s, id, now_ms).await)
    }
}
