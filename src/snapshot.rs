//! The in-memory catalog: a [`CatalogSnapshot`] behind an atomic pointer, rebuilt from the
//! store and swapped whole whenever the catalog changes. Requests never read the catalog from
//! the database. On PostgreSQL a listener task reloads when another replica announces a change.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use tokio::sync::Mutex;

use crate::core::catalog::CatalogSnapshot;
use crate::store::{Store, StoreResult};

/// The current snapshot, shared by every request.
#[derive(Debug, Default)]
pub struct CatalogCache {
    current: ArcSwapOption<CatalogSnapshot>,
    /// Serialises reloads so an older read can never replace a newer snapshot.
    reloading: Mutex<()>,
}

impl CatalogCache {
    /// The snapshot, or `None` until the first load has finished.
    pub fn get(&self) -> Option<Arc<CatalogSnapshot>> {
        self.current.load_full()
    }

    /// Rebuilds the snapshot from the store and swaps it in.
    pub async fn reload(&self, store: &Store) -> StoreResult<usize> {
        let _guard = self.reloading.lock().await;
        let started = Instant::now();
        let rows = store.load_catalog().await?;
        let count = rows.offerings.len();
        let snapshot = CatalogSnapshot::new(rows.providers, rows.gpus, rows.offerings);
        self.current.store(Some(Arc::new(snapshot)));
        tracing::info!(
            offerings = count,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "catalog snapshot loaded"
        );
        Ok(count)
    }

    /// On PostgreSQL, follows catalog change notifications from every replica for as long as the
    /// returned task runs. A lost connection triggers a reload too, since notifications sent
    /// while it was down are gone.
    pub fn follow_changes(self: &Arc<Self>, store: Store) -> Option<tokio::task::JoinHandle<()>> {
        let Store::Postgres(pg) = &store else {
            return None;
        };
        let pg = pg.clone();
        let cache = Arc::clone(self);
        Some(tokio::spawn(async move {
            loop {
                let mut listener = match pg.catalog_listener().await {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!(error = %e, "catalog listener cannot connect; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                };
                // Anything announced before LISTEN took effect would otherwise be missed.
                if let Err(e) = cache.reload(&store).await {
                    tracing::warn!(error = %e, "catalog reload failed");
                }
                loop {
                    match listener.try_recv().await {
                        Ok(_) => {
                            if let Err(e) = cache.reload(&store).await {
                                tracing::warn!(error = %e, "catalog reload failed");
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "catalog listener failed; reconnecting");
                            break;
                        }
                    }
                }
            }
        }))
    }
}
