//! Alibaba Cloud: ECS and Auto Scaling (ESS) through the RPC-style API, signed with signature
//! version 1.0 (HMAC-SHA1) and called over one shared HTTP client. No SDK: the handful of
//! calls below are plain signed GETs with JSON answers.
//!
//! Calls made: ECS DescribeInstanceTypes, DescribePrice, DescribeSpotPriceHistory,
//! DescribeInstances; ESS DescribeScalingGroups, DescribeScalingInstances, ModifyScalingGroup,
//! RemoveInstances.

pub mod credentials;
mod ecs;
mod errors;
mod ess;
mod rpc;
mod settings;
mod signer;

use std::sync::Arc;

use async_trait::async_trait;

pub use credentials::{AlibabaCredentialsProvider, CredentialSource, SessionCredentials};
pub use settings::{AlibabaSettings, Credentials, DEFAULT_REGION, Secret};
pub use signer::{canonical_query, percent_encode, signature, string_to_sign};

use crate::provider::{
    ALIBABA, Capacity, CapacitySpec, CloudWorker, GroupRef, ProviderError, ProviderResult, Refresh,
};
use rpc::RpcClient;

/// The Alibaba Cloud adapter.
#[derive(Debug)]
pub struct AlibabaProvider {
    client: RpcClient,
}

impl AlibabaProvider {
    pub fn new(settings: AlibabaSettings) -> ProviderResult<Self> {
        let credentials = Arc::new(AlibabaCredentialsProvider::new(
            &settings,
            crate::provider::credentials::system_clock(),
        )?);
        Self::with_credentials(settings, credentials)
    }

    /// An adapter that signs with credentials from `credentials`, which others may share.
    pub fn with_credentials(
        settings: AlibabaSettings,
        credentials: Arc<AlibabaCredentialsProvider>,
    ) -> ProviderResult<Self> {
        let http = crate::provider::http::client(settings.http)?;
        Ok(Self {
            client: RpcClient::new(http, settings, credentials),
        })
    }

    /// The adapter's credentials, for other Alibaba callers (event pollers) to share.
    pub fn credentials(&self) -> &Arc<AlibabaCredentialsProvider> {
        self.client.credentials()
    }

    /// The region used when a group names none.
    fn region<'a>(&'a self, asked: &'a str) -> &'a str {
        if asked.is_empty() {
            &self.client.settings().region
        } else {
            asked
        }
    }
}

/// The scaling group id of `group`. An empty id must not reach DescribeScalingGroups, which
/// would then list every group of the region and the first one would be taken for this pool.
fn group_id(group: &GroupRef) -> ProviderResult<&str> {
    let id = group.group.trim();
    if id.is_empty() {
        return Err(ProviderError::InvalidRequest(format!(
            "pool {} names no Alibaba scaling group id",
            group.pool
        )));
    }
    Ok(id)
}

/// Price look-ups that fail for one type (not sold here, not priced) should not hide the prices
/// of the others; credentials, throttling and transport failures still end the refresh.
fn skippable(e: &ProviderError) -> bool {
    matches!(
        e,
        ProviderError::InvalidRequest(_)
            | ProviderError::NotFound(_)
            | ProviderError::InsufficientCapacity { .. }
    )
}

#[async_trait]
impl crate::provider::Provider for AlibabaProvider {
    fn name(&self) -> &'static str {
        ALIBABA
    }

    fn credentials(&self) -> Option<crate::provider::credentials::CredentialReport> {
        Some(self.client.credentials().report())
    }

    async fn refresh(
        &self,
        region: &str,
        instance_types: &[String],
        since_ms: i64,
    ) -> ProviderResult<Refresh> {
        let region = self.region(region);
        let now_ms = crate::timefmt::now_ms();
        let types = ecs::instance_types(&self.client, region, instance_types).await?;
        let mut prices = Vec::new();
        for info in &types {
            let t = &info.instance_type;
            match ecs::on_demand_price(&self.client, region, t, now_ms).await {
                Ok(quote) => prices.push(quote),
                Err(e) if skippable(&e) => {
                    tracing::warn!(instance_type = %t, error = %e, "no alibaba on-demand price");
                }
                Err(e) => return Err(e),
            }
            match ecs::spot_prices(&self.client, region, t, since_ms, now_ms).await {
                Ok(quotes) => prices.extend(quotes),
                Err(e) if skippable(&e) => {
                    tracing::warn!(instance_type = %t, error = %e, "no alibaba spot price");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Refresh { types, prices })
    }

    async fn describe(&self, group: &GroupRef) -> ProviderResult<Capacity> {
        let region = self.region(&group.region);
        let id = group_id(group)?;
        let mut capacity = ess::group(&self.client, region, id).await?;
        let listed = ess::instances(&self.client, region, id).await?;
        let ids: Vec<String> = listed
            .iter()
            .filter_map(|i| i.instance_id.clone())
            .collect();
        let facts = if ids.is_empty() {
            Default::default()
        } else {
            ecs::instances(&self.client, region, &ids).await?
        };
        capacity.workers = listed
            .into_iter()
            .filter_map(|item| {
                let id = item.instance_id?;
                let state = ess::worker_state(item.lifecycle_state.as_deref().unwrap_or(""));
                // ECS is the authority on type, zone, market and launch time; ESS's own copy
                // covers an instance ECS has already forgotten.
                let worker = match facts.get(&id) {
                    Some(f) => CloudWorker {
                        id,
                        instance_type: f.instance_type.clone(),
                        market: f.market,
                        zone: f.zone.clone(),
                        state,
                        launched_at_ms: f.launched_at_ms,
                        aliases: f.aliases.clone(),
                    },
                    None => CloudWorker {
                        id,
                        instance_type: item.instance_type.unwrap_or_default(),
                        market: ecs::market_of(item.spot_strategy.as_deref()),
                        zone: item.zone_id,
                        state,
                        launched_at_ms: item.creation_time.as_deref().and_then(rpc::parse_time_ms),
                        aliases: Vec::new(),
                    },
                };
                Some(worker)
            })
            .collect();
        Ok(capacity)
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        current: &Capacity,
        spec: &CapacitySpec,
    ) -> ProviderResult<()> {
        let changes = ess::modify_params(current, spec);
        if changes.is_empty() {
            return Ok(());
        }
        let id = group_id(group)?;
        ess::modify(&self.client, self.region(&group.region), id, changes).await
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        workers: &[String],
        decrement: bool,
    ) -> ProviderResult<()> {
        if workers.is_empty() {
            return Ok(());
        }
        let id = group_id(group)?;
        ess::remove(
            &self.client,
            self.region(&group.region),
            id,
            workers,
            decrement,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Provider;

    fn provider() -> AlibabaProvider {
        // Unroutable on purpose: these tests must fail before any request is made.
        let mut settings = AlibabaSettings::new(Credentials {
            access_key_id: "id".into(),
            access_key_secret: Secret::new("s"),
        });
        settings.endpoint = Some("http://127.0.0.1:9".into());
        AlibabaProvider::new(settings).expect("provider")
    }

    #[tokio::test]
    async fn a_pool_without_a_group_id_is_refused_before_any_call() {
        let group = GroupRef {
            pool: "p".into(),
            region: "cn-shanghai".into(),
            group: " ".into(),
            spot_group: None,
        };
        let err = provider().describe(&group).await.unwrap_err();
        assert!(matches!(err, ProviderError::InvalidRequest(_)), "{err:?}");
        let err = provider()
            .terminate(&group, &["i-1".to_string()], true)
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::InvalidRequest(_)), "{err:?}");
    }

    #[tokio::test]
    async fn terminating_nobody_makes_no_call() {
        let group = GroupRef {
            pool: "p".into(),
            region: "cn-shanghai".into(),
            group: "asg-1".into(),
            spot_group: None,
        };
        provider()
            .terminate(&group, &[], true)
            .await
            .expect("nothing to do");
    }
}
