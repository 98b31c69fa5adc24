//! The PostgreSQL store: the production backend, and the one multi-replica guarantees are made
//! for. Catalog writers take a transaction-scoped advisory lock, and every catalog change sends
//! a NOTIFY on [`CATALOG_CHANNEL`] at commit so other replicas reload their snapshot.

use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

use super::StoreResult;
use super::pool_sql::{pool_from_row, pool_sql, worker_from_row};
use super::sql::{bind_spec, offering_from_row, shared_sql, spec_from_row};

/// The LISTEN/NOTIFY channel that announces catalog changes.
pub const CATALOG_CHANNEL: &str = "trainscaler_catalog";

/// Serialises catalog imports and seeding across replicas (an arbitrary constant key).
const CATALOG_LOCK_KEY: i64 = 0x7472_6169_6e73_6361; // "trainsca"

#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    pub(crate) const MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

    pub async fn connect(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .connect(url)
            .await?;
        Ok(Self { pool })
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

    /// Reads a pool with its last busy time, locking its row until the transaction ends: concurrent decisions for one pool queue here (NO KEY UPDATE, so inserts that only reference the pool do not wait).
    const LOCK_POOL: &'static str = "SELECT name, policy, state, last_decision, last_decision_key, last_decision_at_ms, since_ms, created_at_ms, updated_at_ms,
        (SELECT last_busy_at_ms FROM pool_activity a WHERE a.pool = p.name) AS last_busy_at_ms
        FROM pools p WHERE name = $1 FOR NO KEY UPDATE";

    async fn begin_write(&self) -> StoreResult<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    /// Statements in READ COMMITTED each see their own moment; a snapshot must see one.
    async fn begin_consistent_read(&self) -> StoreResult<Transaction<'static, Postgres>> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    async fn lock_catalog(tx: &mut Transaction<'static, Postgres>) -> StoreResult<()> {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(CATALOG_LOCK_KEY)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Queued in the transaction: PostgreSQL delivers it only if and when the commit succeeds.
    async fn announce_catalog_change(tx: &mut Transaction<'static, Postgres>) -> StoreResult<()> {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(CATALOG_CHANNEL)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}

shared_sql!(PgStore, Postgres);
pool_sql!(PgStore, Postgres);
