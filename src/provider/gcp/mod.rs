//! Google Cloud: managed instance groups (MIGs) through the Compute Engine API and prices
//! from the Cloud Billing Catalog API, with OAuth tokens from a service-account key or the
//! metadata server. No SDK: the handful of calls are JSON over one shared HTTP client.
//!
//! A MIG runs one provisioning model, so a pool that mixes markets binds two: `group`, its
//! standard (on-demand) MIG, and `spot_group`, its Spot MIG. The adapter reports the two as
//! one [`Capacity`] (the standard MIG's size as the on-demand base, the Spot MIG's above it)
//! and sets each MIG to its market's share of the decision's targets. Each instance
//! template fixes the machine type, which the adapter reads (templates never change, so each
//! is read once) and names as the catalog does.
//!
//! Calls made: `instanceGroupManagers` (or `regionInstanceGroupManagers`) `get`,
//! `listManagedInstances`, `resize`, `deleteInstances`, `recreateInstances`;
//! `instanceTemplates.get`; `zoneOperations.wait` / `regionOperations.wait`; Cloud Billing
//! `services.skus.list`.

mod api;
pub mod billing;
mod compute;
pub mod errors;
pub mod path;
pub mod settings;
pub mod shapes;
pub mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::core::catalog::Market;
use crate::provider::{
    Capacity, CapacitySpec, CloudWorker, Distribution, GCP, GroupRef, Provider, ProviderError,
    ProviderResult, Refresh, WorkerState,
};
use api::Api;
use compute::TemplateFacts;
use errors::ErrorContext;
pub use path::MigPath;
pub use settings::{CredentialSource, GcpSettings};
pub use token::CredentialStatus;

/// How long a SKU list is reused: one refresh round asks for every bound region at once.
const SKU_CACHE_MS: i64 = 10 * 60_000;

/// What the last `describe` saw of one MIG, for the calls that follow it in the same pass.
#[derive(Debug, Clone, Default)]
struct Seen {
    target_size: u32,
    /// The catalog type of the group's template, for capacity errors.
    instance_type: Option<String>,
    /// Set when an autoscaler drives the group.
    autoscaler: Option<String>,
    /// Instance name → what `deleteInstances` takes.
    members: Vec<(String, String)>,
    /// Instances the group keeps failing to create for want of capacity or quota, and why.
    failing: Vec<String>,
    failure: Option<ProviderError>,
}

/// The GCP adapter.
pub struct GcpProvider {
    api: Api,
    templates: Mutex<HashMap<String, TemplateFacts>>,
    seen: Mutex<HashMap<String, Seen>>,
    skus: tokio::sync::Mutex<Option<(i64, Arc<billing::SkuIndex>)>>,
    clock: settings::Clock,
}

impl std::fmt::Debug for GcpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcpProvider")
            .field("api", &self.api)
            .finish_non_exhaustive()
    }
}

/// A pool's MIGs with the market each holds.
fn migs(group: &GroupRef) -> ProviderResult<Vec<(MigPath, Market)>> {
    let parse = |text: &str, field: &str| {
        MigPath::parse(text.trim())
            .map_err(|e| ProviderError::InvalidRequest(format!("pool {}: {field} {e}", group.pool)))
    };
    let mut out = vec![(parse(&group.group, "group")?, Market::OnDemand)];
    if let Some(spot) = &group.spot_group {
        out.push((parse(spot, "spot_group")?, Market::Spot));
    }
    Ok(out)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked mid-update; the map is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GcpProvider {
    /// Reads the key file (if one is configured) now, so a bad one stops start-up.
    pub fn new(settings: GcpSettings) -> ProviderResult<Self> {
        Ok(Self {
            api: Api::new(&settings)?,
            templates: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
            skus: tokio::sync::Mutex::new(None),
            clock: settings.clock.clone(),
        })
    }

    /// Which credentials are in use and when the current token expires.
    pub fn credential_status(&self) -> CredentialStatus {
        self.api.tokens.status()
    }

    /// HTTP requests to Google's APIs so far (token fetches not included).
    pub fn requests_sent(&self) -> u64 {
        self.api.requests_sent()
    }

    /// Access tokens fetched so far.
    pub fn tokens_fetched(&self) -> u64 {
        self.api.tokens.tokens_fetched()
    }

    async fn template(&self, url: &str) -> ProviderResult<TemplateFacts> {
        if let Some(f) = lock(&self.templates).get(url) {
            return Ok(f.clone());
        }
        let facts = compute::template(&self.api, url).await?;
        lock(&self.templates).insert(url.to_string(), facts.clone());
        Ok(facts)
    }

    /// Reads one MIG into workers of `market`, and remembers what later calls need.
    async fn read(
        &self,
        mig: &MigPath,
        market: Market,
    ) -> ProviderResult<(Seen, Vec<CloudWorker>)> {
        let manager = compute::manager(&self.api, mig).await?;
        let listed = compute::managed_instances(&self.api, mig).await?;
        let default = match manager.template() {
            Some(url) => Some(self.template(url).await?),
            None => None,
        };
        if let Some(f) = &default
            && f.market != market
        {
            let (want, role) = match market {
                Market::Spot => ("SPOT", "spot_group"),
                Market::OnDemand => ("STANDARD", "group"),
            };
            return Err(ProviderError::InvalidRequest(format!(
                "{mig} is the pool's {role}, but its instance template's provisioning model is \
                 not {want}"
            )));
        }
        let mut seen = Seen {
            target_size: manager.target_size,
            instance_type: default.as_ref().map(|f| f.instance_type.clone()),
            autoscaler: manager.status.as_ref().and_then(|s| s.autoscaler.clone()),
            ..Seen::default()
        };
        let mut workers = Vec::with_capacity(listed.len());
        for m in listed {
            let version = m
                .version
                .as_ref()
                .and_then(|v| v.instance_template.as_deref());
            let facts = match version {
                Some(url) if Some(url) != manager.template() => match self.template(url).await {
                    Ok(f) => Some(f),
                    // An old version's template may be gone; the group's own still says
                    // what the group runs.
                    Err(ProviderError::NotFound(_)) => default.clone(),
                    Err(e) => return Err(e),
                },
                _ => default.clone(),
            };
            let flexible = m
                .properties_from_flexibility_policy
                .as_ref()
                .and_then(|p| p.machine_type.as_deref())
                .map(|t| shapes::catalog_type(t, &[]));
            let instance_type = flexible
                .or_else(|| facts.map(|f| f.instance_type))
                .unwrap_or_default();
            let zone = m.zone().or_else(|| mig.zone().map(str::to_string));
            let mut state = compute::worker_state(&m);
            if m.is_being_created() && !m.attempt_errors().is_empty() {
                let ctx = ErrorContext {
                    what: format!("creation of {} in {mig}", m.name),
                    zone: zone.clone(),
                    instance_type: Some(instance_type.clone()),
                };
                let err = errors::from_operation(m.attempt_errors(), &ctx);
                if matches!(err, ProviderError::InsufficientCapacity { .. }) {
                    // Not capacity until the cloud has room: the plan sees the market short.
                    state = WorkerState::Terminating;
                    seen.failing.push(m.name.clone());
                    seen.failure.get_or_insert(err);
                } else {
                    tracing::warn!(group = %mig, instance = %m.name, error = %err, "managed instance keeps failing to be created");
                }
            }
            seen.members.push((m.name.clone(), m.reference()));
            workers.push(CloudWorker {
                id: m.name,
                instance_type,
                market,
                zone,
                state,
                launched_at_ms: None,
                // The instance name is the id already, and the host name GCP gives it.
                aliases: Vec::new(),
            });
        }
        lock(&self.seen).insert(mig.to_string(), seen.clone());
        Ok((seen, workers))
    }

    /// The last `describe`'s view of `mig`, or a fresh one.
    async fn seen(&self, mig: &MigPath, market: Market) -> ProviderResult<Seen> {
        if let Some(s) = lock(&self.seen).get(&mig.to_string()) {
            return Ok(s.clone());
        }
        Ok(self.read(mig, market).await?.0)
    }

    async fn skus(&self) -> ProviderResult<Arc<billing::SkuIndex>> {
        let mut cached = self.skus.lock().await;
        let now = (self.clock)();
        if let Some((at, index)) = cached.as_ref()
            && now - at < SKU_CACHE_MS
        {
            return Ok(index.clone());
        }
        let index = Arc::new(billing::fetch(&self.api).await?);
        *cached = Some((now, index.clone()));
        Ok(index)
    }

    /// Brings one MIG from `have` to `want` instances: instances it cannot create are deleted
    /// first when it shrinks (so the group gives up on them rather than on running ones), and
    /// `resize` does the rest.
    async fn set_size(
        &self,
        mig: &MigPath,
        seen: &Seen,
        have: u32,
        want: u32,
    ) -> ProviderResult<()> {
        let mut have = have;
        if want < have && !seen.failing.is_empty() {
            let stuck: Vec<String> = seen
                .members
                .iter()
                .filter(|(name, _)| seen.failing.contains(name))
                .map(|(_, reference)| reference.clone())
                .take((have - want) as usize)
                .collect();
            compute::remove(&self.api, mig, &stuck, true).await?;
            have -= u32::try_from(stuck.len()).unwrap_or(have).min(have);
        }
        if want != have {
            compute::resize(&self.api, mig, want, seen.instance_type.as_deref()).await?;
        }
        Ok(())
    }
}

/// On-demand and spot workers of a spec: the decision's targets by market.
fn wanted(spec: &CapacitySpec) -> (u32, u32) {
    let sum = |m: Market| -> u32 {
        spec.targets
            .iter()
            .filter(|t| t.market == m)
            .map(|t| t.count)
            .sum()
    };
    let (od, spot) = (sum(Market::OnDemand), sum(Market::Spot));
    if od.saturating_add(spot) == spec.desired {
        return (od, spot);
    }
    // No per-market targets (a hand-made spec): split as the distribution says, on-demand
    // rounded up above the base.
    let d = &spec.distribution;
    let base = spec.desired.min(d.on_demand_base);
    let above = spec.desired - base;
    let od_above = (u64::from(above) * u64::from(d.on_demand_percentage_above_base.min(100)))
        .div_ceil(100) as u32;
    (base + od_above, above - od_above)
}

#[async_trait]
impl Provider for GcpProvider {
    fn name(&self) -> &'static str {
        GCP
    }

    fn credentials(&self) -> Option<crate::provider::credentials::CredentialReport> {
        let s = self.credential_status();
        Some(crate::provider::credentials::CredentialReport::new(
            s.source,
            Some(s.identity),
            s.token_expires_at_ms,
        ))
    }

    /// Region-wide on-demand and spot prices of the named types (every GPU type the catalog
    /// can name when none are), from the Billing catalog. `since_ms` does not apply: the
    /// catalog has current list prices, not a history.
    async fn refresh(
        &self,
        region: &str,
        instance_types: &[String],
        _since_ms: i64,
    ) -> ProviderResult<Refresh> {
        let named: Vec<shapes::Shape> = instance_types
            .iter()
            .filter_map(|n| {
                let s = shapes::shape(n);
                if s.is_none() {
                    tracing::warn!(instance_type = %n, "no gcp billing shape for this type; not priced");
                }
                s
            })
            .collect();
        if named.is_empty() && !instance_types.is_empty() {
            return Ok(Refresh::default());
        }
        let index = self.skus().await?;
        let wanted = if instance_types.is_empty() {
            // As the bundled catalog names offerings: the cheapest host of each GPU count.
            shapes::candidate_groups()
                .into_iter()
                .filter_map(|group| {
                    group
                        .into_iter()
                        .filter_map(|s| {
                            let (p, _) = index.price(&s, Market::OnDemand, region)?;
                            Some((p, s))
                        })
                        .min_by(|a, b| a.0.total_cmp(&b.0))
                        .map(|(_, s)| s)
                })
                .collect()
        } else {
            named
        };
        let (types, prices) = billing::quotes(&index, &wanted, region, (self.clock)());
        Ok(Refresh { types, prices })
    }

    async fn describe(&self, group: &GroupRef) -> ProviderResult<Capacity> {
        let mut sizes = (0u32, 0u32);
        let mut types = Vec::new();
        let mut workers = Vec::new();
        for (mig, market) in migs(group)? {
            let (seen, mut w) = self.read(&mig, market).await?;
            match market {
                Market::OnDemand => sizes.0 = seen.target_size,
                Market::Spot => sizes.1 = seen.target_size,
            }
            if let Some(t) = seen.instance_type
                && !types.contains(&t)
            {
                types.push(t);
            }
            workers.append(&mut w);
        }
        let desired = sizes.0.saturating_add(sizes.1);
        Ok(Capacity {
            desired,
            // A MIG without an autoscaler has a target size and no bounds.
            min: 0,
            max: desired,
            // Two sizes in MixedInstancesPolicy terms: the standard MIG is the on-demand base,
            // everything above it is spot.
            distribution: Some(Distribution {
                on_demand_base: sizes.0,
                on_demand_percentage_above_base: 0,
                instance_types: types,
            }),
            workers,
        })
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        _current: &Capacity,
        spec: &CapacitySpec,
    ) -> ProviderResult<()> {
        let migs = migs(group)?;
        let (want_od, want_spot) = wanted(spec);
        if want_spot > 0 && migs.len() < 2 {
            return Err(ProviderError::InvalidRequest(format!(
                "pool {} wants {want_spot} spot workers but names no spot_group",
                group.pool
            )));
        }
        let mut changes = Vec::new();
        for (mig, market) in migs {
            // What this pass last saw of the group (or a fresh read), rather than `current`:
            // a termination earlier in the pass has already lowered one group's size.
            let seen = self.seen(&mig, market).await?;
            let want = match market {
                Market::OnDemand => want_od,
                Market::Spot => want_spot,
            };
            let have = seen.target_size;
            if let Some(failure) = &seen.failure
                && want >= have
                && want > 0
            {
                // The group already asks for more than the cloud can give it.
                return Err(failure.clone());
            }
            if want == have {
                continue;
            }
            if let Some(a) = &seen.autoscaler {
                return Err(ProviderError::InvalidRequest(format!(
                    "{mig} is driven by the autoscaler {a}, which would undo every resize; \
                     turn it off for a pool trainscaler drives"
                )));
            }
            changes.push((mig, seen, have, want));
        }
        // Grow before shrinking, so a move between markets never dips below the target.
        changes.sort_by_key(|(_, _, have, want)| want < have);
        for (mig, seen, have, want) in &changes {
            if let Err(e) = self.set_size(mig, seen, *have, *want).await {
                // Not known how far the group got: the next call reads it again rather than
                // trusting a size and members that may no longer hold.
                lock(&self.seen).remove(&mig.to_string());
                return Err(e);
            }
            if let Some(s) = lock(&self.seen).get_mut(&mig.to_string()) {
                s.target_size = *want;
            }
        }
        Ok(())
    }

    /// `deleteInstances` (with `decrement`) or `recreateInstances` per MIG. Every MIG is tried
    /// even when one fails; the first error is returned.
    async fn terminate(
        &self,
        group: &GroupRef,
        workers: &[String],
        decrement: bool,
    ) -> ProviderResult<()> {
        if workers.is_empty() {
            return Ok(());
        }
        let migs = migs(group)?;
        // A worker id is the managed instance's name, but a caller may hold its URL or its
        // `zones/Z/instances/NAME` reference: both end in the name.
        let find = |id: &str| -> Option<(usize, String)> {
            let name = compute::instance_name(id);
            let seen = lock(&self.seen);
            migs.iter().enumerate().find_map(|(i, (mig, _))| {
                seen.get(&mig.to_string())?
                    .members
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, reference)| (i, reference.clone()))
            })
        };
        if workers.iter().any(|w| find(w).is_none()) {
            // Not seen yet (another replica described the group): read it now.
            for (mig, market) in &migs {
                self.read(mig, *market).await?;
            }
        }
        let mut by_mig: Vec<Vec<String>> = vec![Vec::new(); migs.len()];
        for w in workers {
            match find(w) {
                Some((i, reference)) => by_mig[i].push(reference),
                None => {
                    tracing::warn!(instance = %w, group = %group.group, "not in the pool's MIGs any more; nothing to delete")
                }
            }
        }
        let mut first_error = None;
        for ((mig, _), references) in migs.iter().zip(by_mig) {
            if references.is_empty() {
                continue;
            }
            let key = mig.to_string();
            match compute::remove(&self.api, mig, &references, decrement).await {
                // `deleteInstances` lowers the target size by as many.
                Ok(()) if decrement => {
                    if let Some(s) = lock(&self.seen).get_mut(&key) {
                        let n = u32::try_from(references.len()).unwrap_or(u32::MAX);
                        s.target_size = s.target_size.saturating_sub(n);
                        s.members.retain(|(_, r)| !references.contains(r));
                        let members = &s.members;
                        s.failing
                            .retain(|name| members.iter().any(|(n, _)| n == name));
                        if s.failing.is_empty() {
                            s.failure = None;
                        }
                    }
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(group = %mig, error = %e, "cannot remove instances");
                    // Not known what was removed: read the group again when next needed.
                    lock(&self.seen).remove(&key);
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Target;

    fn spec(desired: u32, targets: &[(Market, u32)]) -> CapacitySpec {
        CapacitySpec {
            desired,
            min: 0,
            max: 8,
            distribution: Distribution {
                on_demand_base: 0,
                on_demand_percentage_above_base: 20,
                instance_types: vec![],
            },
            targets: targets
                .iter()
                .map(|(market, count)| Target {
                    instance_type: "n1-highmem-8+T4x1".into(),
                    market: *market,
                    count: *count,
                    zones: vec![],
                })
                .collect(),
        }
    }

    #[test]
    fn the_decisions_targets_split_the_markets() {
        assert_eq!(
            wanted(&spec(5, &[(Market::OnDemand, 1), (Market::Spot, 4)])),
            (1, 4)
        );
        // All spot moved to on-demand after a spot capacity error: the targets say so.
        assert_eq!(wanted(&spec(5, &[(Market::OnDemand, 5)])), (5, 0));
        assert_eq!(wanted(&spec(0, &[])), (0, 0));
        // No targets: the distribution's split, on-demand rounded up (20% of 3 is 1).
        assert_eq!(wanted(&spec(3, &[])), (1, 2));
    }

    #[test]
    fn a_group_ref_names_the_standard_and_the_spot_mig() {
        let mut g = GroupRef {
            pool: "p".into(),
            region: "us-central1".into(),
            group: "projects/proj-123/zones/us-central1-a/instanceGroupManagers/std".into(),
            spot_group: Some(
                "projects/proj-123/zones/us-central1-a/instanceGroupManagers/spot".into(),
            ),
        };
        let m = migs(&g).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].1, m[1].1), (Market::OnDemand, Market::Spot));
        g.group = "trainers".into();
        let err = migs(&g).unwrap_err();
        assert!(
            matches!(&err, ProviderError::InvalidRequest(t) if t.contains("group must be")),
            "{err:?}"
        );
    }
}
