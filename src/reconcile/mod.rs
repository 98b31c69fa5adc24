//! The reconciler: the loop that keeps every bound pool's capacity where its decisions say.
//!
//! It runs inside `serve` on every replica, but only the holder of the leader lease
//! (`leader.rs`) acts: every `interval`, at once when it becomes leader, and when a pool
//! becomes dirty (a decision changed its target, a cloud notice or work arrived). Pools are
//! reconciled one after another, so a pool's passes never overlap.

pub mod leader;
pub mod pass;
pub mod repeats;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::metrics::{Metrics, ReconcileLabels};
use crate::provider::refresh::refresh_region;
use crate::provider::registry::Providers;
use crate::snapshot::CatalogCache;
use crate::store::Store;
use crate::timefmt::now_ms;
use pass::{PassContext, PassOutcome, reconcile_pool};
use repeats::{Occurrence, Repeats};

/// How the reconciler runs.
#[derive(Debug, Clone)]
pub struct ReconcileSettings {
    pub interval: Duration,
    pub lease: Duration,
    /// This replica's name in events (host name and process id by default).
    pub replica: String,
    /// How often the leader refreshes instance types and prices of bound cloud pools'
    /// regions into the catalog; `None` never.
    pub catalog_refresh: Option<Duration>,
}

/// Everything the loop needs.
#[derive(Debug, Clone)]
pub struct Reconciler {
    pub store: Store,
    pub catalog: Arc<CatalogCache>,
    pub metrics: Arc<Metrics>,
    pub providers: Providers,
    pub settings: ReconcileSettings,
    /// Warnings that recur every pass, logged once and then counted.
    pub repeats: Arc<Repeats>,
}

impl Reconciler {
    /// Runs until `shutdown` turns true; acts only while `leader` is true.
    pub async fn run(
        self,
        mut leader: watch::Receiver<bool>,
        mut dirty: broadcast::Receiver<String>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(self.settings.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Never is a very long time: an hour-long interval that the branch below ignores.
        let mut refresh_tick = tokio::time::interval(
            self.settings
                .catalog_refresh
                .unwrap_or(Duration::from_secs(3600)),
        );
        refresh_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = crate::reconcile::until_true(&mut shutdown) => return,
                _ = refresh_tick.tick() => {
                    if leads(&leader) && self.settings.catalog_refresh.is_some() {
                        self.refresh_catalog().await;
                    }
                }
                _ = tick.tick() => {
                    if leads(&leader) { self.pass_all(&leader).await; }
                }
                changed = leader.changed() => {
                    if changed.is_err() { return; }
                    let leads = *leader.borrow_and_update();
                    self.metrics.reconcile_leader.set(i64::from(leads));
                    if leads {
                        if self.settings.catalog_refresh.is_some() {
                            self.refresh_catalog().await;
                        }
                        self.pass_all(&leader).await;
                    }
                }
                pool = dirty.recv() => match pool {
                    Ok(pool) => if leads(&leader) { self.pass_one(&pool, &leader).await; },
                    // Missed some: a full pass covers them all.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if leads(&leader) { self.pass_all(&leader).await; }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    }

    /// Refreshes the catalog for every (provider, region) that a pool bound to a cloud group
    /// uses, limited to the instance types those pools name.
    async fn refresh_catalog(&self) {
        let pools = match self.store.pools().await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "catalog refresh: cannot list pools");
                return;
            }
        };
        let mut wanted: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for p in pools.iter().filter(|p| p.policy.group.is_some()) {
            wanted
                .entry((p.policy.provider.clone(), p.policy.region.clone()))
                .or_default()
                .extend(
                    p.policy
                        .instance_types
                        .iter()
                        .map(|c| c.instance_type.clone()),
                );
        }
        for ((provider_name, region), types) in wanted {
            let Some(provider) = self.providers.cloud(&provider_name) else {
                continue;
            };
            let Some(catalog) = self.catalog.get() else {
                return;
            };
            let types: Vec<String> = types.into_iter().collect();

            match refresh_region(&self.store, &catalog, &*provider, &region, &types, now_ms()).await
            {
                Ok(report) => {
                    tracing::info!(
                        provider = %provider_name, region = %region,
                        added = report.offerings_added, updated = report.offerings_updated,
                        prices = report.prices_appended, "catalog refreshed from the provider"
                    );
                    self.catalog.refresh_after_write(&self.store).await;
                    self.recovered(&format!("refresh {provider_name} {region}"));
                }
                Err(e) => {
                    let key = format!("refresh {provider_name} {region}");
                    match self.repeats.note(&key, &e.to_string(), now_ms()) {
                        Occurrence::First => tracing::warn!(
                            provider = %provider_name, region = %region, error = %e,
                            "catalog refresh failed; logged again hourly while it repeats"
                        ),
                        Occurrence::Remind { repeats } => tracing::warn!(
                            provider = %provider_name, region = %region, error = %e, repeats,
                            "catalog refresh still failing"
                        ),
                        Occurrence::Quiet => {}
                    }
                }
            }
        }
    }

    async fn pass_all(&self, leader: &watch::Receiver<bool>) {
        let pools = match self.store.pools().await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "reconciler: cannot list pools");
                return;
            }
        };
        for pool in pools {
            if !leads(leader) {
                return;
            }
            self.reconcile(&pool, leader).await;
        }
    }

    async fn pass_one(&self, name: &str, leader: &watch::Receiver<bool>) {
        match self.store.find_pool(name).await {
            Ok(Some(pool)) => self.reconcile(&pool, leader).await,
            Ok(None) => {}
            Err(e) => tracing::warn!(pool = name, error = %e, "reconciler: cannot read pool"),
        }
    }

    async fn reconcile(&self, pool: &crate::store::PoolRow, leader: &watch::Receiver<bool>) {
        let (provider, group) = match self.providers.bind(&pool.name, &pool.policy) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                let key = format!("pool {}", pool.name);
                match self.repeats.note(&key, &e.to_string(), now_ms()) {
                    Occurrence::First => tracing::warn!(
                        pool = %pool.name, error = %e,
                        "reconciler: pool cannot be driven; logged again hourly while it repeats \
                         (counted in trainscaler_reconciles_total{{outcome=\"failed\"}})"
                    ),
                    Occurrence::Remind { repeats } => tracing::warn!(
                        pool = %pool.name, error = %e, repeats,
                        "reconciler: pool still cannot be driven"
                    ),
                    Occurrence::Quiet => {}
                }
                self.count("failed");
                return;
            }
        };
        let Some(catalog) = self.catalog.get() else {
            return;
        };
        let leader = leader.clone();
        let still_leader = move || leads(&leader);
        let cx = PassContext {
            store: &self.store,
            catalog: &catalog,
            replica: &self.settings.replica,
            still_leader: &still_leader,
            now_ms: &now_ms,
        };
        match reconcile_pool(&cx, pool, &provider, &group).await {
            Ok(outcome) => {
                let key = format!("pool {}", pool.name);
                if let PassOutcome::Failed(why) = &outcome {
                    match self.repeats.note(&key, why, now_ms()) {
                        Occurrence::First => tracing::warn!(
                            pool = %pool.name, error = %why,
                            "reconcile failed; logged again hourly while it repeats"
                        ),
                        Occurrence::Remind { repeats } => tracing::warn!(
                            pool = %pool.name, error = %why, repeats, "reconcile still failing"
                        ),
                        Occurrence::Quiet => {}
                    }
                } else {
                    self.recovered(&key);
                    if let PassOutcome::Changed(calls) = outcome {
                        tracing::info!(pool = %pool.name, calls, "reconciled");
                    }
                }
                self.count(outcome.label());
            }
            Err(e) => {
                tracing::warn!(pool = %pool.name, error = %e, "reconcile: store error");
                self.count("failed");
            }
        }
    }

    /// Logs the end of a repeating warning, with how often it occurred.
    fn recovered(&self, key: &str) {
        if let Some(times) = self.repeats.clear(key) {
            tracing::info!(about = key, times, "the repeated warning stopped");
        }
    }

    fn count(&self, outcome: &'static str) {
        self.metrics
            .reconciles
            .get_or_create(&ReconcileLabels { outcome })
            .inc();
    }
}

/// Resolves once `flag` is true (or its sender is gone), holding no borrow of it after.
pub async fn until_true(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|s| *s).await;
}

fn leads(leader: &watch::Receiver<bool>) -> bool {
    *leader.borrow()
}

/// A name for this replica: the host name (the pod name on Kubernetes) and process id.
pub fn replica_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "trainscaler".into());
    format!("{host}:{}", std::process::id())
}
