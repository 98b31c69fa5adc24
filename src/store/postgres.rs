//! The PostgreSQL store: the production backend, and the one multi-replica guarantees are made
//! for. Catalog writers take a transaction-scoped advisory lock, and every catalog change sends
//! a NOTIFY on [`CATALOG_CHANNEL`] at commit so other replicas reload their snapshot.

use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

use super::StoreResult;
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
