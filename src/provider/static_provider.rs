//! The static provider: workers are trainscaler's own records in the database, so a pool is
//! useful (and its decisions visible end to end) without any cloud account: for local use,
//! demos, tests and the simulator.
//!
//! Setting capacity creates the missing workers of each instance type and market at once,
//! with a start time `startup_delay` ahead (they count as pending until then, as a cloud
//! instance does while it boots), and stops surplus workers, pending and newest first. An
//! optional per-pool limit of workers per instance type models a region running out of a
//! type: asking for more answers `InsufficientCapacity`, as a cloud would.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;

use super::{
    Capacity, CapacitySpec, CloudWorker, GroupRef, Provider, ProviderError, ProviderResult,
    Refresh, STATIC, WorkerState,
};
use crate::core::policy::secs_to_ms;
use crate::store::{NewWorker, Store, StoreError};
use crate::timefmt::now_ms;

/// How the static provider behaves.
#[derive(Debug, Clone, Default)]
pub struct StaticSettings {
    /// Time from creating a worker until it counts as running.
    pub startup_delay: Duration,
    /// Most live workers of an instance type one pool may have; types not listed have no
    /// limit.
    pub capacity: HashMap<String, u32>,
}

impl StaticSettings {
    /// Parses `type=count,type=count` (the `TRAINSCALER_STATIC_CAPACITY` format).
    pub fn parse_capacity(text: &str) -> Result<HashMap<String, u32>, String> {
        let mut out = HashMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, count) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not instance_type=count"))?;
            let count: u32 = count
                .trim()
                .parse()
                .map_err(|_| format!("`{count}` in `{part}` is not a count of workers"))?;
            out.insert(name.trim().to_string(), count);
        }
        Ok(out)
    }
}

#[derive(Debug)]
pub struct StaticProvider {
    store: Store,
    settings: StaticSettings,
}

impl StaticProvider {
    pub fn new(store: Store, settings: StaticSettings) -> Self {
        Self { store, settings }
    }
}

fn store_error(e: StoreError) -> ProviderError {
    ProviderError::Other(format!("static provider store: {e}"))
}

fn new_worker_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("static-{}", &id[..12])
}

#[async_trait]
impl Provider for StaticProvider {
    fn name(&self) -> &'static str {
        STATIC
    }

    /// The static provider has no price list of its own: its pools are priced from the
    /// catalog, so there is nothing to refresh.
    async fn refresh(&self, _: &str, _: &[String], _: i64) -> ProviderResult<Refresh> {
        Ok(Refresh::default())
    }

    async fn describe(&self, group: &GroupRef) -> ProviderResult<Capacity> {
        let now = now_ms();
        let workers = self
            .store
            .workers(&group.pool, now)
            .await
            .map_err(store_error)?;
        let workers: Vec<CloudWorker> = workers
            .into_iter()
            .filter(|w| w.stopped_at_ms.is_none())
            .map(|w| CloudWorker {
                state: if w.started_at_ms > now {
                    WorkerState::Pending
                } else {
                    WorkerState::Running
                },
                id: w.id,
                instance_type: w.instance_type,
                market: w.market,
                zone: w.zone,
                launched_at_ms: Some(w.started_at_ms),
                aliases: Vec::new(),
            })
            .collect();
        Ok(Capacity {
            desired: u32::try_from(workers.len()).unwrap_or(u32::MAX),
            min: 0,
            max: u32::MAX,
            distribution: None,
            workers,
        })
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        current: &Capacity,
        spec: &CapacitySpec,
    ) -> ProviderResult<()> {
        let now = now_ms();
        let live: Vec<&CloudWorker> = current
            .workers
            .iter()
            .filter(|w| w.state != WorkerState::Terminating)
            .collect();
        let count_of = |t: &str, m| {
            live.iter()
                .filter(|w| w.instance_type == t && w.market == m)
                .count() as u32
        };
        // Check every type first: a launch that cannot be completed launches nothing.
        let mut launches: Vec<(&super::Target, u32)> = Vec::new();
        let mut of_type: HashMap<&str, u32> = HashMap::new();
        for w in &live {
            *of_type.entry(w.instance_type.as_str()).or_default() += 1;
        }
        for t in &spec.targets {
            let missing = t.count.saturating_sub(count_of(&t.instance_type, t.market));
            if missing == 0 {
                continue;
            }
            let total = of_type.entry(t.instance_type.as_str()).or_default();
            *total += missing;
            if let Some(limit) = self.settings.capacity.get(&t.instance_type)
                && *total > *limit
            {
                return Err(ProviderError::InsufficientCapacity {
                    instance_type: Some(t.instance_type.clone()),
                    zone: t.zones.first().cloned(),
                    message: format!(
                        "the static provider holds at most {limit} {} per pool",
                        t.instance_type
                    ),
                });
            }
            launches.push((t, missing));
        }
        let started_at_ms = now + secs_to_ms(self.settings.startup_delay.as_secs());
        for (t, missing) in launches {
            for i in 0..missing {
                let zone =
                    (!t.zones.is_empty()).then(|| t.zones[i as usize % t.zones.len()].clone());
                let worker = NewWorker {
                    id: new_worker_id(),
                    instance_type: t.instance_type.clone(),
                    market: t.market,
                    zone,
                    started_at_ms,
                    aliases: Vec::new(),
                };
                self.store
                    .put_worker(&group.pool, &worker, now)
                    .await
                    .map_err(store_error)?
                    .ok_or_else(|| ProviderError::NotFound(format!("pool `{}`", group.pool)))?;
            }
        }

        // Surplus: workers beyond their type's target go first, pending before running,
        // newest before oldest.
        let after = self.describe(group).await?;
        let total = after.workers.len() as u32;
        if total > spec.desired {
            let mut kept: HashMap<(String, crate::core::catalog::Market), u32> = HashMap::new();
            let mut ranked: Vec<(bool, bool, i64, &CloudWorker)> = Vec::new();
            let mut by_age: Vec<&CloudWorker> = after.workers.iter().collect();
            by_age.sort_by_key(|w| w.launched_at_ms.unwrap_or(0));
            for w in by_age {
                let target = spec
                    .targets
                    .iter()
                    .find(|t| t.instance_type == w.instance_type && t.market == w.market)
                    .map_or(0, |t| t.count);
                let k = kept.entry((w.instance_type.clone(), w.market)).or_default();
                let beyond = *k >= target;
                *k += 1;
                ranked.push((
                    !beyond,
                    w.state != WorkerState::Pending,
                    -w.launched_at_ms.unwrap_or(0),
                    w,
                ));
            }
            ranked.sort_by_key(|(a, b, c, _)| (*a, *b, *c));
            for (_, _, _, w) in ranked.into_iter().take((total - spec.desired) as usize) {
                self.store
                    .stop_worker(&group.pool, &w.id, now)
                    .await
                    .map_err(store_error)?;
            }
        }
        Ok(())
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        workers: &[String],
        _decrement: bool,
    ) -> ProviderResult<()> {
        let now = now_ms();
        for id in workers {
            if !self
                .store
                .stop_worker(&group.pool, id, now)
                .await
                .map_err(store_error)?
            {
                return Err(ProviderError::NotFound(format!(
                    "worker `{id}` of pool `{}`",
                    group.pool
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_limits_parse_and_bad_ones_are_named() {
        let c = StaticSettings::parse_capacity("g4dn.12xlarge=2, g5.12xlarge = 10,").unwrap();
        assert_eq!(c.get("g4dn.12xlarge"), Some(&2));
        assert_eq!(c.get("g5.12xlarge"), Some(&10));
        assert!(
            StaticSettings::parse_capacity("g4dn.12xlarge")
                .unwrap_err()
                .contains("instance_type=count")
        );
        assert!(
            StaticSettings::parse_capacity("g4dn.12xlarge=two")
                .unwrap_err()
                .contains("`two`")
        );
    }
}
