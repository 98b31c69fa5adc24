//! Loops that run for the life of the process beside the server: following other replicas'
//! activity and key revocations, and pruning old samples and idempotency keys.

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::auth::Auth;
use crate::store::{Heard, KEYS_CHANNEL, LISTENER_CHECK, PgStore, Store};
use crate::timefmt::now_ms;

/// Forwards other replicas' pool activity (PostgreSQL NOTIFY on the activity channel) to this
/// replica's subscribers, and forgets keys revoked anywhere (the keys channel) so that no
/// replica serves a revoked key from its cache. SQLite runs one process, which does both
/// locally.
pub(super) fn follow_activity(store: Store, activity: broadcast::Sender<String>, auth: Arc<Auth>) {
    let Store::Postgres(pg) = store else { return };
    tokio::spawn(async move {
        loop {
            let mut listener = match pg.activity_listener().await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for pool activity; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    continue;
                }
            };
            loop {
                match PgStore::listen_for(&mut listener, LISTENER_CHECK).await {
                    Heard::Notification(Some(n)) if n.channel() == KEYS_CHANNEL => {
                        auth.forget(n.payload())
                    }
                    Heard::Notification(Some(n)) => {
                        let _ = activity.send(n.payload().to_string());
                    }
                    Heard::Notification(None) | Heard::Quiet => {}
                    Heard::Lost(e) => {
                        tracing::warn!(error = ?e, "pool activity listener lost; reconnecting");
                        break;
                    }
                }
            }
        }
    });
}

/// Deletes raw samples past their retention, and worker series silent past their pool's
/// horizon (`ingest::worker_gate`), every ten minutes, in the background.
pub(super) fn prune_samples(store: Store, retention_hours: u64) {
    let retention_ms = i64::try_from(retention_hours.saturating_mul(3_600_000)).unwrap_or(i64::MAX);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(600));
        loop {
            tick.tick().await;
            match store
                .prune_samples(now_ms().saturating_sub(retention_ms))
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "pruned old metric samples"),
                Err(e) => tracing::warn!(error = %e, "could not prune metric samples"),
            }
            match crate::ingest::worker_gate::prune_stale_series(&store, now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "deleted worker series silent too long"),
                Err(e) => tracing::warn!(error = %e, "could not delete stale worker series"),
            }
        }
    });
}

/// Deletes expired idempotency keys every ten minutes, in the background. Expired keys are
/// already ignored when read and replaced when claimed; this only bounds the table.
pub(super) fn prune_idempotency_keys(store: Store) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(600));
        loop {
            tick.tick().await;
            match store.prune_idempotency_keys(now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "pruned expired idempotency keys"),
                Err(e) => tracing::warn!(error = %e, "could not prune idempotency keys"),
            }
        }
    });
}
