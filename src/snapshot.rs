//! The in-memory catalog: a [`CatalogSnapshot`] behind an atomic pointer, rebuilt from the
//! store and swapped whole whenever the catalog changes. Requests never read the catalog from
//! the database.
//!
//! Changes are noticed two ways. A replica that writes reloads at once. Every replica also runs
//! [`CatalogCache::follow_changes`], which compares the store's catalog version with the
//! snapshot's: woken by PostgreSQL NOTIFY, and by a timer on both backends, which covers SQLite
//! (a CLI import into the file of a running server), missed notifications, and a reload that
//! failed after a write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use tokio::sync::Mutex;

use crate::core::catalog::CatalogSnapshot;
use crate::store::{Heard, LISTENER_CHECK, PgStore, Store, StoreResult};

/// How soon a lost catalog listener is reconnected.
const LISTENER_RETRY: Duration = Duration::from_secs(1);

/// The current snapshot, shared by every request.
#[derive(Debug)]
pub struct CatalogCache {
    current: ArcSwapOption<CatalogSnapshot>,
    /// Serialises reloads so an older read can never replace a newer snapshot.
    reloading: Mutex<()>,
}

impl Default for CatalogCache {
    fn default() -> Self {
        Self {
            current: ArcSwapOption::empty(),
            reloading: Mutex::new(()),
        }
    }
}

impl CatalogCache {
    /// The snapshot, or `None` until the first load has finished.
    pub fn get(&self) -> Option<Arc<CatalogSnapshot>> {
        self.current.load_full()
    }

    /// The catalog version the current snapshot was built from; -1 before the first load.
    pub fn version(&self) -> i64 {
        self.current.load().as_ref().map_or(-1, |s| s.version())
    }

    /// Rebuilds the snapshot from the store and swaps it in.
    pub async fn reload(&self, store: &Store) -> StoreResult<usize> {
        let _guard = self.reloading.lock().await;
        let started = Instant::now();
        let rows = store.load_catalog().await?;
        let count = rows.offerings.len();
        let snapshot = CatalogSnapshot::with_benchmarks(
            rows.providers,
            rows.gpus,
            rows.offerings,
            rows.benchmarks,
        );
        self.current
            .store(Some(Arc::new(snapshot.at_version(rows.version))));
        tracing::info!(
            offerings = count,
            version = rows.version,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "catalog snapshot loaded"
        );
        Ok(count)
    }

    /// Reloads if the store's catalog is at another version than the snapshot.
    pub async fn reload_if_changed(&self, store: &Store) -> StoreResult<bool> {
        if store.catalog_version().await? == self.version() {
            return Ok(false);
        }
        self.reload(store).await.map(|_| true)
    }

    /// After this replica changed the catalog: reload now. A failure is logged, not returned,
    /// because the write is committed; [`follow_changes`](Self::follow_changes) retries.
    pub async fn refresh_after_write(&self, store: &Store) {
        if let Err(e) = self.reload_if_changed(store).await {
            tracing::warn!(error = %e, "catalog reload after a write failed; the follower will retry");
        }
    }

    /// Follows catalog changes made anywhere for as long as the returned task runs.
    pub fn follow_changes(
        self: &Arc<Self>,
        store: Store,
        poll: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let cache = Arc::clone(self);
        tokio::spawn(async move {
            let mut listener = None;
            let mut next_poll = Instant::now() + poll;
            loop {
                // A session just opened may have missed notifications while there was none:
                // read the version once it listens, so nothing sent before is lost.
                let mut opened = false;
                if let Store::Postgres(pg) = &store
                    && listener.is_none()
                {
                    match pg.catalog_listener().await {
                        Ok(l) => {
                            listener = Some(l);
                            opened = true;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "catalog listener cannot connect; polling meanwhile")
                        }
                    }
                }
                let reload = opened
                    || match listener.as_mut() {
                        // A notification, or quiet for the check interval: a quiet session is
                        // asked whether it is alive every check interval rather than every
                        // poll interval, since a partition leaves it open and silent and the
                        // poll may be long: until then this replica would be deaf.
                        Some(l) => {
                            let wait = next_poll
                                .saturating_duration_since(Instant::now())
                                .min(LISTENER_CHECK);
                            match PgStore::listen_for(l, wait).await {
                                Heard::Notification(_) => true,
                                Heard::Quiet => Instant::now() >= next_poll,
                                Heard::Lost(e) => {
                                    tracing::warn!(error = ?e, "catalog listener lost; reconnecting");
                                    listener = None;
                                    // A failed session may have dropped a notification.
                                    e.is_some() || Instant::now() >= next_poll
                                }
                            }
                        }
                        // Without a listener (PostgreSQL is down, or this is SQLite) wait for
                        // the poll; on PostgreSQL no longer than the reconnect backoff, so that
                        // a long poll interval does not leave this replica deaf to
                        // notifications for that long after an outage.
                        None if matches!(store, Store::Postgres(_)) => {
                            tokio::time::sleep(poll.min(LISTENER_RETRY)).await;
                            true
                        }
                        None => {
                            tokio::time::sleep(poll).await;
                            true
                        }
                    };
                if !reload {
                    continue;
                }
                next_poll = Instant::now() + poll;
                // Comparing versions coalesces bursts and this replica's own notifications.
                if let Err(e) = cache.reload_if_changed(&store).await {
                    tracing::warn!(error = %e, "catalog reload failed");
                }
            }
        })
    }
}
