//! AWS: EC2 and Auto Scaling through their Query APIs, signed with SigV4, without the AWS SDK.
//!
//! A pool binds to an auto scaling group with a MixedInstancesPolicy; the adapter reads and
//! changes the group's bounds, desired capacity and distribution, terminates chosen
//! instances, and reads GPU instance types and spot prices from EC2.

pub mod autoscaling;
pub mod credentials;
pub mod ec2;
pub mod error;
pub mod query;
pub mod settings;
pub mod sign;
pub mod sqs;
pub mod xml;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::provider::{
    Capacity, CapacitySpec, GroupRef, Provider, ProviderError, ProviderResult, Refresh,
};
use autoscaling::{Change, Group, LaunchTemplateSpec};
use ec2::InstanceFacts;

pub use credentials::AwsCredentialsProvider;
pub use query::Service;
pub use settings::{AwsCredentials, AwsSettings, CredentialSource, Secret};

/// Ids per DescribeInstances request: EC2 takes at most 200 values in one filter, and a
/// bounded request is cheap to retry.
const INSTANCE_IDS_PER_CALL: usize = 200;
/// Instance types per DescribeInstanceTypes or DescribeSpotPriceHistory request.
const TYPES_PER_CALL: usize = 100;
/// A guard against an endpoint that keeps answering with a next page.
const MAX_PAGES: usize = 1000;

/// The AWS adapter. One HTTP client for every call; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct AwsProvider {
    client: query::QueryClient,
    /// Launch templates of the groups described so far, by (region, group): an update of the
    /// mixed-instances policy must name the template again, and `Capacity` has no room for it.
    templates: Mutex<HashMap<(String, String), LaunchTemplateSpec>>,
}

impl AwsProvider {
    pub fn new(settings: AwsSettings) -> ProviderResult<Self> {
        let credentials = Arc::new(AwsCredentialsProvider::new(
            &settings,
            crate::provider::credentials::system_clock(),
        )?);
        Self::with_credentials(settings, credentials)
    }

    /// An adapter that signs with credentials from `credentials`, which others may share.
    pub fn with_credentials(
        settings: AwsSettings,
        credentials: Arc<AwsCredentialsProvider>,
    ) -> ProviderResult<Self> {
        Ok(Self {
            client: query::QueryClient::new(settings, credentials)?,
            templates: Mutex::new(HashMap::new()),
        })
    }

    /// The adapter's credentials, for other AWS callers (event pollers) to share.
    pub fn credentials(&self) -> &Arc<AwsCredentialsProvider> {
        self.client.credentials()
    }

    pub fn settings(&self) -> &AwsSettings {
        self.client.settings()
    }

    /// HTTP requests sent so far (retries included), for metrics and for tests that must show
    /// a call was not made.
    pub fn requests_sent(&self) -> u64 {
        self.client.requests_sent()
    }

    /// One Query API call in the settings' region: `Action` and `Version` are added, the
    /// request is signed and throttling retried; the answer is the XML body. Public so tests
    /// and tools can make calls the adapter itself does not need.
    pub async fn call(
        &self,
        service: Service,
        action: &str,
        params: &[(&str, &str)],
    ) -> ProviderResult<String> {
        let params: Vec<(String, String)> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let region = self.settings().region.clone();
        self.client.call(service, &region, action, &params).await
    }

    async fn describe_group(&self, group: &GroupRef) -> ProviderResult<Group> {
        let body = self
            .client
            .call(
                Service::AutoScaling,
                &group.region,
                "DescribeAutoScalingGroups",
                &autoscaling::describe_params(&group.group),
            )
            .await?;
        let response: autoscaling::DescribeAutoScalingGroupsResponse =
            xml::parse("DescribeAutoScalingGroups", &body)?;
        let found = response
            .result
            .groups
            .member
            .into_iter()
            .find(|g| g.name == group.group)
            .ok_or_else(|| {
                ProviderError::NotFound(format!(
                    "auto scaling group {:?} in {}",
                    group.group, group.region
                ))
            })?;
        if let Some(template) = found.launch_template() {
            self.remember_template(group, template);
        }
        Ok(found)
    }

    fn remember_template(&self, group: &GroupRef, template: LaunchTemplateSpec) {
        // A poisoned lock only means another thread panicked mid-insert; the map is still usable.
        let mut map = self.templates.lock().unwrap_or_else(|e| e.into_inner());
        map.insert((group.region.clone(), group.group.clone()), template);
    }

    fn known_template(&self, group: &GroupRef) -> Option<LaunchTemplateSpec> {
        let map = self.templates.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(group.region.clone(), group.group.clone()))
            .cloned()
    }

    /// Market and launch time of the given instances, one DescribeInstances per batch.
    async fn instance_facts(
        &self,
        region: &str,
        ids: &[String],
    ) -> ProviderResult<HashMap<String, InstanceFacts>> {
        let mut facts = HashMap::new();
        for batch in ids.chunks(INSTANCE_IDS_PER_CALL) {
            let by_id: Vec<(String, String)> = batch
                .iter()
                .enumerate()
                .map(|(i, id)| (format!("InstanceId.{}", i + 1), id.clone()))
                .collect();
            let found = match self.describe_instances(region, by_id).await {
                // An instance Auto Scaling still lists may already be gone from EC2; naming it
                // fails the whole call, while a filter simply leaves it out.
                Err(ProviderError::NotFound(_)) => {
                    let mut by_filter =
                        vec![("Filter.1.Name".to_string(), "instance-id".to_string())];
                    by_filter.extend(
                        batch
                            .iter()
                            .enumerate()
                            .map(|(i, id)| (format!("Filter.1.Value.{}", i + 1), id.clone())),
                    );
                    self.describe_instances(region, by_filter).await?
                }
                other => other?,
            };
            facts.extend(found);
        }
        Ok(facts)
    }

    async fn describe_instances(
        &self,
        region: &str,
        params: Vec<(String, String)>,
    ) -> ProviderResult<Vec<(String, InstanceFacts)>> {
        let mut out = Vec::new();
        self.paginate(Service::Ec2, region, "DescribeInstances", params, |body| {
            let r: ec2::DescribeInstancesResponse = xml::parse("DescribeInstances", body)?;
            for reservation in r.reservations.item {
                for instance in reservation.instances.item {
                    out.push((instance.id.clone(), instance.facts()));
                }
            }
            Ok(xml::non_empty(r.next_token))
        })
        .await?;
        Ok(out)
    }

    /// Calls `action` page after page, handing each body to `page`, which returns the next
    /// page's token.
    async fn paginate(
        &self,
        service: Service,
        region: &str,
        action: &str,
        params: Vec<(String, String)>,
        mut page: impl FnMut(&str) -> ProviderResult<Option<String>>,
    ) -> ProviderResult<()> {
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut p = params.clone();
            if let Some(t) = &token {
                p.push(("NextToken".into(), t.clone()));
            }
            let body = self.client.call(service, region, action, &p).await?;
            match page(&body)? {
                Some(next) if token.as_ref() != Some(&next) => token = Some(next),
                _ => return Ok(()),
            }
        }
        Err(ProviderError::Other(format!(
            "{action} still had more pages after {MAX_PAGES}"
        )))
    }

    /// The named types, or every type with a GPU when none are named.
    async fn instance_types(
        &self,
        region: &str,
        names: &[String],
    ) -> ProviderResult<Vec<crate::provider::InstanceTypeInfo>> {
        let mut types = Vec::new();
        let mut collect = |body: &str| {
            let r: ec2::DescribeInstanceTypesResponse = xml::parse("DescribeInstanceTypes", body)?;
            types.extend(r.instance_types.item);
            Ok(xml::non_empty(r.next_token))
        };
        if names.is_empty() {
            let params = vec![("MaxResults".to_string(), "100".to_string())];
            self.paginate(
                Service::Ec2,
                region,
                "DescribeInstanceTypes",
                params,
                &mut collect,
            )
            .await?;
            types.retain(ec2::InstanceType::has_gpu);
        } else {
            for batch in names.chunks(TYPES_PER_CALL) {
                let params = numbered("InstanceType", batch);
                self.paginate(
                    Service::Ec2,
                    region,
                    "DescribeInstanceTypes",
                    params,
                    &mut collect,
                )
                .await?;
            }
        }
        let mut infos: Vec<_> = types
            .into_iter()
            .map(ec2::InstanceType::into_info)
            .collect();
        infos.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
        infos.dedup_by(|a, b| a.instance_type == b.instance_type);
        Ok(infos)
    }

    /// Linux spot prices of the types since `since_ms`, newest per type and zone.
    async fn spot_prices(
        &self,
        region: &str,
        names: &[String],
        since_ms: i64,
    ) -> ProviderResult<Vec<crate::provider::PriceQuote>> {
        let mut history = Vec::new();
        for batch in names.chunks(TYPES_PER_CALL) {
            let mut params = numbered("InstanceType", batch);
            params.push(("ProductDescription.1".into(), "Linux/UNIX".into()));
            params.push(("StartTime".into(), crate::timefmt::format_ms(since_ms)));
            params.push(("MaxResults".into(), "1000".into()));
            self.paginate(
                Service::Ec2,
                region,
                "DescribeSpotPriceHistory",
                params,
                |body| {
                    let r: ec2::DescribeSpotPriceHistoryResponse =
                        xml::parse("DescribeSpotPriceHistory", body)?;
                    history.extend(r.history.item);
                    Ok(xml::non_empty(r.next_token))
                },
            )
            .await?;
        }
        Ok(ec2::newest_spot_quotes(history))
    }
}

/// `Name.1=…&Name.2=…`, the Query API's way of sending a list.
fn numbered(name: &str, values: &[String]) -> Vec<(String, String)> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("{name}.{}", i + 1), v.clone()))
        .collect()
}

#[async_trait]
impl Provider for AwsProvider {
    fn name(&self) -> &'static str {
        crate::provider::AWS
    }

    fn credentials(&self) -> Option<crate::provider::credentials::CredentialReport> {
        Some(self.client.credentials().report())
    }

    /// Instance types from DescribeInstanceTypes and spot prices from DescribeSpotPriceHistory.
    /// No on-demand prices: EC2 has no API for them (see [`ec2`]).
    async fn refresh(
        &self,
        region: &str,
        instance_types: &[String],
        since_ms: i64,
    ) -> ProviderResult<Refresh> {
        let types = self.instance_types(region, instance_types).await?;
        let names: Vec<String> = types.iter().map(|t| t.instance_type.clone()).collect();
        let prices = if names.is_empty() {
            Vec::new()
        } else {
            self.spot_prices(region, &names, since_ms).await?
        };
        Ok(Refresh { types, prices })
    }

    async fn describe(&self, group: &GroupRef) -> ProviderResult<Capacity> {
        let found = self.describe_group(group).await?;
        let ids = found.instance_ids();
        let facts = if ids.is_empty() {
            HashMap::new()
        } else {
            self.instance_facts(&group.region, &ids).await?
        };
        Ok(found.into_capacity(|id| facts.get(id).cloned()))
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        current: &Capacity,
        spec: &CapacitySpec,
    ) -> ProviderResult<()> {
        let (action, params) = match autoscaling::change(current, spec) {
            Change::None => return Ok(()),
            Change::Desired => (
                "SetDesiredCapacity",
                autoscaling::set_desired_params(&group.group, spec.desired),
            ),
            Change::Update => {
                let template = match self.known_template(group) {
                    Some(t) => Some(t),
                    None => self.describe_group(group).await?.launch_template(),
                };
                let template = template.ok_or_else(|| {
                    ProviderError::InvalidRequest(format!(
                        "auto scaling group {:?} launches from a launch configuration, not a \
                         launch template, so it cannot take a mixed-instances policy",
                        group.group
                    ))
                })?;
                (
                    "UpdateAutoScalingGroup",
                    autoscaling::update_params(&group.group, spec, &template),
                )
            }
        };
        self.client
            .call(Service::AutoScaling, &group.region, action, &params)
            .await
            .map(drop)
    }

    /// One TerminateInstanceInAutoScalingGroup per instance. All are tried even when one fails
    /// (an instance already gone must not keep the others running); the first error is returned.
    async fn terminate(
        &self,
        group: &GroupRef,
        workers: &[String],
        decrement: bool,
    ) -> ProviderResult<()> {
        let mut first_error = None;
        for id in workers {
            let params = autoscaling::terminate_params(id, decrement);
            if let Err(e) = self
                .client
                .call(
                    Service::AutoScaling,
                    &group.region,
                    "TerminateInstanceInAutoScalingGroup",
                    &params,
                )
                .await
            {
                tracing::warn!(instance = %id, group = %group.group, error = %e, "cannot terminate instance");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
