//! Tells the other replicas which pools have work once ingestion has committed, in as few
//! NOTIFY statements as the load allows.
//!
//! PostgreSQL serialises the commits of transactions that NOTIFY: a database-wide lock is
//! taken at commit and held through the WAL flush. With a NOTIFY inside every ingestion
//! transaction, concurrent batches committed one after another instead of sharing a flush.
//! Ingestion now commits without one and hands its pool names here: one task sends whatever
//! was queued since its last send in one statement, so under load many batches share one
//! notifying transaction, and an idle server sends a name at once.
//!
//! Losing a name is acceptable (a crash between the commit and the send): the push only makes
//! KEDA's `StreamIsActive` sooner, and KEDA asks `IsActive` every polling interval anyway.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use sqlx::PgPool;
use tokio::sync::mpsc;

use super::postgres::ACTIVITY_CHANNEL;

/// The sending half, held by the store; the task ends when the last clone is dropped.
#[derive(Debug, Clone)]
pub(super) struct ActivityAnnouncer {
    /// Names waiting for the next send. A set: it never holds more than the pools that
    /// exist, however long the database stays unreachable.
    pending: Arc<Mutex<BTreeSet<String>>>,
    /// Wakes the task; a full queue means it is already awake and will see the new names.
    wake: mpsc::Sender<()>,
}

impl ActivityAnnouncer {
    /// Starts the sending task on the current runtime.
    pub(super) fn start(pool: PgPool) -> Self {
        let pending = Arc::new(Mutex::new(BTreeSet::new()));
        let (wake, mut woken) = mpsc::channel::<()>(1);
        let queued = pending.clone();
        tokio::spawn(async move {
            while woken.recv().await.is_some() {
                let names = std::mem::take(&mut *lock(&queued));
                if names.is_empty() {
                    continue;
                }
                if let Err(e) = send(&pool, names).await {
                    tracing::warn!(error = %e, "cannot tell other replicas of pool activity");
                }
            }
        });
        Self { pending, wake }
    }

    /// Queues `pools` for the next send and returns at once.
    pub(super) fn announce<'a>(&self, pools: impl IntoIterator<Item = &'a String>) {
        let mut any = false;
        {
            let mut pending = lock(&self.pending);
            for pool in pools {
                any |= pending.insert(pool.clone());
            }
        }
        if any {
            // Full: a wake-up is already queued and will take these names too.
            let _ = self.wake.try_send(());
        }
    }
}

fn lock(pending: &Mutex<BTreeSet<String>>) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
    // A set of names stays valid whatever a panicking holder was doing.
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One statement, one notification per pool.
async fn send(pool: &PgPool, names: BTreeSet<String>) -> sqlx::Result<()> {
    let names: Vec<String> = names.into_iter().collect();
    sqlx::query("SELECT pg_notify($1, name) FROM unnest($2::text[]) AS name")
        .bind(ACTIVITY_CHANNEL)
        .bind(names)
        .execute(pool)
        .await?;
    Ok(())
}
