//! Auto Scaling (ESS, API 2014-08-28) calls: read a scaling group and its instances, change its
//! bounds and distribution, remove chosen instances.
//!
//! What is read of a group: MinSize, MaxSize, DesiredCapacity, OnDemandBaseCapacity,
//! OnDemandPercentageAboveBaseCapacity, MultiAZPolicy and the instance types of its
//! `LaunchTemplateOverrides` (in their listed order). Instance types of a group built on a
//! scaling configuration (rather than a launch template with overrides) are not read, so such
//! a group reports an empty type list and type changes are not sent to it.

use serde::Deserialize;

use super::rpc::{self, RpcClient, Service};
use crate::provider::{
    Capacity, CapacitySpec, Distribution, ProviderError, ProviderResult, WorkerState,
};

/// Documented maximum page size of DescribeScalingInstances.
const INSTANCES_PAGE_SIZE: usize = 50;
/// `InstanceIds.N` of RemoveInstances: the smallest limit any edition of the reference gave.
const REMOVE_PER_CALL: usize = 20;
const MAX_PAGES: usize = 200;

#[derive(Debug, Deserialize)]
struct ScalingGroupsResponse {
    #[serde(rename = "ScalingGroups", default)]
    scaling_groups: Option<ScalingGroupList>,
}

#[derive(Debug, Deserialize)]
struct ScalingGroupList {
    #[serde(rename = "ScalingGroup", default)]
    items: Vec<ScalingGroupItem>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ScalingGroupItem {
    #[serde(default)]
    min_size: Option<u32>,
    #[serde(default)]
    max_size: Option<u32>,
    #[serde(default)]
    desired_capacity: Option<u32>,
    #[serde(default)]
    total_capacity: Option<u32>,
    #[serde(default)]
    on_demand_base_capacity: Option<u32>,
    #[serde(default)]
    on_demand_percentage_above_base_capacity: Option<u32>,
    #[serde(rename = "MultiAZPolicy", default)]
    multi_az_policy: Option<String>,
    #[serde(default)]
    launch_template_overrides: Option<OverrideList>,
}

#[derive(Debug, Deserialize)]
struct OverrideList {
    #[serde(rename = "LaunchTemplateOverride", default)]
    items: Vec<OverrideItem>,
}

#[derive(Debug, Deserialize)]
struct OverrideItem {
    #[serde(rename = "InstanceType", default)]
    instance_type: Option<String>,
}

/// The group's bounds and distribution, without its workers.
pub async fn group(client: &RpcClient, region: &str, group_id: &str) -> ProviderResult<Capacity> {
    let params = rpc::params([("ScalingGroupId.1", group_id.to_string())]);
    let answer: ScalingGroupsResponse = client
        .call(Service::Ess, "DescribeScalingGroups", region, &params)
        .await?;
    // An unknown id is not an error to DescribeScalingGroups: the list is just empty.
    let Some(group) = answer
        .scaling_groups
        .and_then(|g| g.items.into_iter().next())
    else {
        return Err(ProviderError::NotFound(format!(
            "scaling group {group_id} in {region}"
        )));
    };
    let types: Vec<String> = group
        .launch_template_overrides
        .map(|o| o.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|o| o.instance_type)
        .filter(|t| !t.is_empty())
        .collect();
    // Only cost-optimised groups split on-demand and spot; a group with overrides mixes types.
    let mixed = group.multi_az_policy.as_deref() == Some("COST_OPTIMIZED") || !types.is_empty();
    let distribution = mixed.then(|| Distribution {
        on_demand_base: group.on_demand_base_capacity.unwrap_or(0),
        on_demand_percentage_above_base: group
            .on_demand_percentage_above_base_capacity
            .unwrap_or(100),
        instance_types: types,
    });
    Ok(Capacity {
        // Groups created without an expected count have no DesiredCapacity; what they run now
        // is the closest meaning.
        desired: group.desired_capacity.or(group.total_capacity).unwrap_or(0),
        min: group.min_size.unwrap_or(0),
        max: group.max_size.unwrap_or(0),
        distribution,
        workers: Vec::new(),
    })
}

#[derive(Debug, Deserialize)]
struct ScalingInstancesResponse {
    #[serde(rename = "ScalingInstances", default)]
    scaling_instances: Option<ScalingInstanceList>,
    #[serde(rename = "TotalCount", default)]
    total_count: Option<usize>,
}

#[derive(Debug, Deserialize)]
struct ScalingInstanceList {
    #[serde(rename = "ScalingInstance", default)]
    items: Vec<ScalingInstanceItem>,
}

/// One instance of a group as ESS lists it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ScalingInstanceItem {
    #[serde(default)]
    pub instance_id: Option<String>,
    #[serde(default)]
    pub lifecycle_state: Option<String>,
    #[serde(default)]
    pub zone_id: Option<String>,
    #[serde(default)]
    pub instance_type: Option<String>,
    #[serde(default)]
    pub spot_strategy: Option<String>,
    #[serde(default)]
    pub creation_time: Option<String>,
}

/// Every instance of the group, all pages.
pub async fn instances(
    client: &RpcClient,
    region: &str,
    group_id: &str,
) -> ProviderResult<Vec<ScalingInstanceItem>> {
    let mut out = Vec::new();
    for page_number in 1..=MAX_PAGES {
        let params = rpc::params([
            ("ScalingGroupId", group_id.to_string()),
            ("PageNumber", page_number.to_string()),
            ("PageSize", INSTANCES_PAGE_SIZE.to_string()),
        ]);
        let page: ScalingInstancesResponse = client
            .call(Service::Ess, "DescribeScalingInstances", region, &params)
            .await?;
        let items = page.scaling_instances.map(|l| l.items).unwrap_or_default();
        let got = items.len();
        out.extend(items);
        let total = page.total_count.unwrap_or(0);
        if got < INSTANCES_PAGE_SIZE || out.len() >= total {
            break;
        }
    }
    Ok(out)
}

/// ESS lifecycle states as capacity: launching states are pending, states on the way out (or
/// stopped in economical mode, which serve nothing) are terminating, the rest run. A state
/// this code does not know is treated as pending: neither counted as capacity nor replaced.
pub fn worker_state(lifecycle_state: &str) -> WorkerState {
    match lifecycle_state {
        "InService" | "Protected" | "Standby" | "EnteringStandby" => WorkerState::Running,
        "Removing" | "Removing:Wait" | "Detaching" | "Stopped" => WorkerState::Terminating,
        _ => WorkerState::Pending,
    }
}

/// The ModifyScalingGroup parameters that take `current` to `spec`; empty when nothing differs.
pub fn modify_params(current: &Capacity, spec: &CapacitySpec) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    if spec.min != current.min {
        out.push(("MinSize".into(), spec.min.to_string()));
    }
    if spec.max != current.max {
        out.push(("MaxSize".into(), spec.max.to_string()));
    }
    if spec.desired != current.desired {
        out.push(("DesiredCapacity".into(), spec.desired.to_string()));
    }
    let want = &spec.distribution;
    match &current.distribution {
        Some(have) => {
            if want.on_demand_base != have.on_demand_base {
                out.push((
                    "OnDemandBaseCapacity".into(),
                    want.on_demand_base.to_string(),
                ));
            }
            if want.on_demand_percentage_above_base != have.on_demand_percentage_above_base {
                out.push((
                    "OnDemandPercentageAboveBaseCapacity".into(),
                    want.on_demand_percentage_above_base.to_string(),
                ));
            }
            let types_changed =
                !want.instance_types.is_empty() && want.instance_types != have.instance_types;
            if types_changed && have.instance_types.is_empty() {
                tracing::warn!(
                    "alibaba scaling group has no launch template overrides; instance types are \
                     left as its scaling configuration sets them"
                );
            } else if types_changed {
                for (i, t) in want.instance_types.iter().enumerate() {
                    out.push((
                        format!("LaunchTemplateOverride.{}.InstanceType", i + 1),
                        t.clone(),
                    ));
                }
                // The list is in priority order; ask ESS to honour it for both markets.
                out.push(("AllocationStrategy".into(), "priority".into()));
                out.push(("SpotAllocationStrategy".into(), "priority".into()));
            }
        }
        None => {
            if *want != Distribution::default() {
                tracing::warn!(
                    "alibaba scaling group is not cost-optimised; its market split and types \
                     are left unchanged"
                );
            }
        }
    }
    out
}

/// One ModifyScalingGroup carrying `changes`.
pub async fn modify(
    client: &RpcClient,
    region: &str,
    group_id: &str,
    changes: Vec<(String, String)>,
) -> ProviderResult<()> {
    let mut params = vec![("ScalingGroupId".to_string(), group_id.to_string())];
    params.extend(changes);
    let _: serde_json::Value = client
        .call(Service::Ess, "ModifyScalingGroup", region, &params)
        .await?;
    Ok(())
}

/// RemoveInstances of `ids`, releasing them (not recycling them into economical mode).
pub async fn remove(
    client: &RpcClient,
    region: &str,
    group_id: &str,
    ids: &[String],
    decrement: bool,
) -> ProviderResult<()> {
    for chunk in ids.chunks(REMOVE_PER_CALL) {
        let mut params = rpc::params([
            ("ScalingGroupId", group_id.to_string()),
            ("DecreaseDesiredCapacity", decrement.to_string()),
            ("RemovePolicy", "release".to_string()),
        ]);
        for (i, id) in chunk.iter().enumerate() {
            params.push((format!("InstanceIds.{}", i + 1), id.clone()));
        }
        let _: serde_json::Value = client
            .call(Service::Ess, "RemoveInstances", region, &params)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity(dist: Option<Distribution>) -> Capacity {
        Capacity {
            desired: 2,
            min: 0,
            max: 8,
            distribution: dist,
            workers: vec![],
        }
    }

    fn spec(desired: u32, dist: Distribution) -> CapacitySpec {
        CapacitySpec {
            desired,
            min: 0,
            max: 8,
            distribution: dist,
            targets: vec![],
        }
    }

    #[test]
    fn lifecycle_states_map_to_worker_states() {
        assert_eq!(worker_state("Pending"), WorkerState::Pending);
        assert_eq!(worker_state("Pending:Wait"), WorkerState::Pending);
        assert_eq!(worker_state("InService"), WorkerState::Running);
        assert_eq!(worker_state("Protected"), WorkerState::Running);
        assert_eq!(worker_state("Standby"), WorkerState::Running);
        assert_eq!(worker_state("Removing"), WorkerState::Terminating);
        assert_eq!(worker_state("Removing:Wait"), WorkerState::Terminating);
        assert_eq!(worker_state("Stopped"), WorkerState::Terminating);
        assert_eq!(worker_state("SomethingNew"), WorkerState::Pending);
    }

    #[test]
    fn nothing_differs_means_no_parameters() {
        let dist = Distribution {
            on_demand_base: 1,
            on_demand_percentage_above_base: 0,
            instance_types: vec!["a".into(), "b".into()],
        };
        assert!(modify_params(&capacity(Some(dist.clone())), &spec(2, dist)).is_empty());
    }

    #[test]
    fn a_type_change_rewrites_the_overrides_in_priority_order() {
        let have = Distribution {
            on_demand_base: 0,
            on_demand_percentage_above_base: 0,
            instance_types: vec!["a".into()],
        };
        let want = Distribution {
            instance_types: vec!["b".into(), "a".into()],
            ..have.clone()
        };
        let p = modify_params(&capacity(Some(have)), &spec(2, want));
        let names: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "LaunchTemplateOverride.1.InstanceType",
                "LaunchTemplateOverride.2.InstanceType",
                "AllocationStrategy",
                "SpotAllocationStrategy"
            ]
        );
        assert_eq!(p[0].1, "b");
    }

    #[test]
    fn a_group_without_a_mixed_policy_only_gets_its_bounds_changed() {
        let want = Distribution {
            on_demand_base: 3,
            on_demand_percentage_above_base: 50,
            instance_types: vec!["a".into()],
        };
        let p = modify_params(&capacity(None), &spec(4, want));
        assert_eq!(p, vec![("DesiredCapacity".to_string(), "4".to_string())]);
    }
}
