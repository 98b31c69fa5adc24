//! Auto Scaling groups: reading `DescribeAutoScalingGroups` into a [`Capacity`], and writing
//! the parameters of `UpdateAutoScalingGroup` and `SetDesiredCapacity`.

use serde::Deserialize;

use super::xml::{Members, non_empty};
use crate::core::catalog::Market;
use crate::provider::{Capacity, CapacitySpec, CloudWorker, Distribution, WorkerState};

use super::ec2::InstanceFacts;

#[derive(Debug, Deserialize)]
pub struct DescribeAutoScalingGroupsResponse {
    #[serde(rename = "DescribeAutoScalingGroupsResult")]
    pub result: DescribeAutoScalingGroupsResult,
}

#[derive(Debug, Deserialize)]
pub struct DescribeAutoScalingGroupsResult {
    #[serde(rename = "AutoScalingGroups", default)]
    pub groups: Members<Group>,
}

#[derive(Debug, Deserialize)]
pub struct Group {
    #[serde(rename = "AutoScalingGroupName")]
    pub name: String,
    #[serde(rename = "MinSize")]
    min: u32,
    #[serde(rename = "MaxSize")]
    max: u32,
    #[serde(rename = "DesiredCapacity")]
    desired: u32,
    #[serde(rename = "MixedInstancesPolicy")]
    mixed: Option<MixedInstancesPolicy>,
    #[serde(rename = "LaunchTemplate")]
    launch_template: Option<LaunchTemplateSpec>,
    #[serde(rename = "Instances", default)]
    pub instances: Members<GroupInstance>,
}

#[derive(Debug, Deserialize)]
struct MixedInstancesPolicy {
    #[serde(rename = "LaunchTemplate")]
    launch_template: Option<MixedLaunchTemplate>,
    #[serde(rename = "InstancesDistribution")]
    distribution: Option<InstancesDistribution>,
}

#[derive(Debug, Deserialize)]
struct MixedLaunchTemplate {
    #[serde(rename = "LaunchTemplateSpecification")]
    spec: Option<LaunchTemplateSpec>,
    #[serde(rename = "Overrides", default)]
    overrides: Members<Override>,
}

#[derive(Debug, Deserialize)]
struct Override {
    #[serde(rename = "InstanceType")]
    instance_type: Option<String>,
}

#[derive(Debug, Deserialize)]
struct InstancesDistribution {
    #[serde(rename = "OnDemandBaseCapacity")]
    on_demand_base: Option<u32>,
    #[serde(rename = "OnDemandPercentageAboveBaseCapacity")]
    on_demand_percentage: Option<u32>,
}

/// The launch template a group launches from; kept so an update of the mixed-instances policy
/// can name it again (AWS wants the whole policy, template included, on every update).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LaunchTemplateSpec {
    #[serde(rename = "LaunchTemplateId")]
    pub id: Option<String>,
    #[serde(rename = "LaunchTemplateName")]
    pub name: Option<String>,
    #[serde(rename = "Version")]
    pub version: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct GroupInstance {
    #[serde(rename = "InstanceId")]
    pub id: String,
    #[serde(rename = "InstanceType")]
    instance_type: Option<String>,
    #[serde(rename = "AvailabilityZone")]
    zone: Option<String>,
    #[serde(rename = "LifecycleState")]
    lifecycle_state: String,
}

/// Auto Scaling's lifecycle states in the three the reconciler counts. Standby, detaching and
/// warm-pool instances are not serving the group, so they count as on their way out.
pub fn worker_state(lifecycle_state: &str) -> WorkerState {
    match lifecycle_state {
        "InService" => WorkerState::Running,
        s if s.starts_with("Pending") => WorkerState::Pending,
        _ => WorkerState::Terminating,
    }
}

impl Group {
    /// The launch template of the mixed-instances policy, or of the group itself.
    pub fn launch_template(&self) -> Option<LaunchTemplateSpec> {
        self.mixed
            .as_ref()
            .and_then(|m| m.launch_template.as_ref())
            .and_then(|lt| lt.spec.clone())
            .or_else(|| self.launch_template.clone())
    }

    /// The instance ids EC2 must be asked about.
    pub fn instance_ids(&self) -> Vec<String> {
        self.instances.member.iter().map(|i| i.id.clone()).collect()
    }

    /// The group as a [`Capacity`]; `facts` gives each instance's market and launch time
    /// (from EC2), and instances it does not know are taken for on-demand, the default market.
    pub fn into_capacity(self, facts: impl Fn(&str) -> Option<InstanceFacts>) -> Capacity {
        let distribution = self.mixed.map(|m| {
            let d = m.distribution;
            Distribution {
                // AWS's documented defaults when a field is left out.
                on_demand_base: d.as_ref().and_then(|d| d.on_demand_base).unwrap_or(0),
                on_demand_percentage_above_base: d
                    .as_ref()
                    .and_then(|d| d.on_demand_percentage)
                    // A percentage over 100 is not one AWS accepts; read as "all on-demand".
                    .map_or(100, |p| p.min(100)),
                instance_types: m
                    .launch_template
                    .map(|lt| {
                        lt.overrides
                            .member
                            .into_iter()
                            .filter_map(|o| non_empty(o.instance_type))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        });
        let workers = self
            .instances
            .member
            .into_iter()
            .map(|i| {
                let known = facts(&i.id);
                CloudWorker {
                    instance_type: i.instance_type.unwrap_or_default(),
                    market: known.as_ref().map_or(Market::OnDemand, |f| f.market),
                    zone: non_empty(i.zone),
                    state: worker_state(&i.lifecycle_state),
                    launched_at_ms: known.as_ref().and_then(|f| f.launched_at_ms),
                    aliases: known.map(|f| f.aliases).unwrap_or_default(),
                    id: i.id,
                }
            })
            .collect();
        Capacity {
            desired: self.desired,
            min: self.min,
            max: self.max,
            distribution,
            workers,
        }
    }
}

/// Which call, if any, brings a group from `current` to `spec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    None,
    /// Only the desired capacity differs.
    Desired,
    /// Bounds or distribution differ: the whole group is updated.
    Update,
}

pub fn change(current: &Capacity, spec: &CapacitySpec) -> Change {
    if current.min != spec.min
        || current.max != spec.max
        || current.distribution.as_ref() != Some(&spec.distribution)
    {
        Change::Update
    } else if current.desired != spec.desired {
        Change::Desired
    } else {
        Change::None
    }
}

pub type Params = Vec<(String, String)>;

fn param(params: &mut Params, name: impl Into<String>, value: impl ToString) {
    params.push((name.into(), value.to_string()));
}

pub fn describe_params(group: &str) -> Params {
    vec![("AutoScalingGroupNames.member.1".into(), group.into())]
}

pub fn set_desired_params(group: &str, desired: u32) -> Params {
    let mut p = Params::new();
    param(&mut p, "AutoScalingGroupName", group);
    param(&mut p, "DesiredCapacity", desired);
    // The reconciler decided already; a cooldown must not silently swallow the change.
    param(&mut p, "HonorCooldown", "false");
    p
}

/// One `UpdateAutoScalingGroup` with bounds, desired capacity and the whole mixed-instances
/// policy, launching from the template the group already uses.
pub fn update_params(group: &str, spec: &CapacitySpec, template: &LaunchTemplateSpec) -> Params {
    const MIP: &str = "MixedInstancesPolicy";
    let mut p = Params::new();
    param(&mut p, "AutoScalingGroupName", group);
    param(&mut p, "MinSize", spec.min);
    param(&mut p, "MaxSize", spec.max);
    param(&mut p, "DesiredCapacity", spec.desired);
    let d = &spec.distribution;
    let dist = format!("{MIP}.InstancesDistribution");
    param(
        &mut p,
        format!("{dist}.OnDemandBaseCapacity"),
        d.on_demand_base,
    );
    param(
        &mut p,
        format!("{dist}.OnDemandPercentageAboveBaseCapacity"),
        d.on_demand_percentage_above_base,
    );
    // Spot from the pools least likely to be interrupted at a low price; on-demand in the
    // order of the overrides, which is the decision's preference.
    param(
        &mut p,
        format!("{dist}.SpotAllocationStrategy"),
        "price-capacity-optimized",
    );
    param(
        &mut p,
        format!("{dist}.OnDemandAllocationStrategy"),
        "prioritized",
    );
    let spec_prefix = format!("{MIP}.LaunchTemplate.LaunchTemplateSpecification");
    // AWS refuses a specification naming the template both by id and by name.
    if let Some(id) = &template.id {
        param(&mut p, format!("{spec_prefix}.LaunchTemplateId"), id);
    } else if let Some(name) = &template.name {
        param(&mut p, format!("{spec_prefix}.LaunchTemplateName"), name);
    }
    if let Some(version) = &template.version {
        param(&mut p, format!("{spec_prefix}.Version"), version);
    }
    for (i, t) in d.instance_types.iter().enumerate() {
        param(
            &mut p,
            format!(
                "{MIP}.LaunchTemplate.Overrides.member.{}.InstanceType",
                i + 1
            ),
            t,
        );
    }
    p
}

pub fn terminate_params(instance_id: &str, decrement: bool) -> Params {
    let mut p = Params::new();
    param(&mut p, "InstanceId", instance_id);
    param(&mut p, "ShouldDecrementDesiredCapacity", decrement);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::aws::xml::parse;

    const GROUPS: &str =
        include_str!("../../../tests/fixtures/aws/autoscaling_describe_auto_scaling_groups.xml");
    const EMPTY: &str = include_str!(
        "../../../tests/fixtures/aws/autoscaling_describe_auto_scaling_groups_empty.xml"
    );

    fn groups(body: &str) -> Vec<Group> {
        let r: DescribeAutoScalingGroupsResponse =
            parse("DescribeAutoScalingGroups", body).expect("parses");
        r.result.groups.member
    }

    #[test]
    fn a_mixed_instances_group_reads_as_capacity_with_distribution_and_workers() {
        let mut gs = groups(GROUPS);
        assert_eq!(gs.len(), 1);
        let g = gs.remove(0);
        assert_eq!(g.name, "training-g5");
        assert_eq!(
            g.launch_template(),
            Some(LaunchTemplateSpec {
                id: Some("lt-0a20c965061f64abc".into()),
                name: Some("training-gpu".into()),
                version: Some("$Latest".into()),
            })
        );
        assert_eq!(
            g.instance_ids(),
            [
                "i-0598c7d356eba48d7",
                "i-1234567890abcdef0",
                "i-0fedcba9876543210"
            ]
        );
        let spot = InstanceFacts {
            market: Market::Spot,
            launched_at_ms: Some(1_767_690_000_000),
            aliases: vec!["ip-10-0-1-23.ec2.internal".into()],
        };
        let cap = g.into_capacity(|id| (id == "i-0598c7d356eba48d7").then(|| spot.clone()));
        assert_eq!((cap.desired, cap.min, cap.max), (3, 0, 8));
        assert_eq!(
            cap.distribution,
            Some(Distribution {
                on_demand_base: 1,
                on_demand_percentage_above_base: 25,
                instance_types: vec![
                    "g5.xlarge".into(),
                    "g5.2xlarge".into(),
                    "g4dn.xlarge".into()
                ],
            })
        );
        let w = &cap.workers;
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].id, "i-0598c7d356eba48d7");
        assert_eq!(w[0].instance_type, "g5.xlarge");
        assert_eq!(w[0].zone.as_deref(), Some("us-east-1a"));
        assert_eq!(w[0].state, WorkerState::Running);
        assert_eq!(w[0].market, Market::Spot);
        assert_eq!(w[0].launched_at_ms, Some(1_767_690_000_000));
        assert_eq!(w[0].aliases, ["ip-10-0-1-23.ec2.internal"]);
        assert_eq!(w[1].state, WorkerState::Pending);
        assert!(w[1].aliases.is_empty());
        assert_eq!(w[1].market, Market::OnDemand);
        assert_eq!(w[1].launched_at_ms, None);
        assert_eq!(w[2].state, WorkerState::Terminating);
    }

    #[test]
    fn an_unknown_group_name_reads_as_no_group() {
        assert!(groups(EMPTY).is_empty());
    }

    #[test]
    fn lifecycle_states_map_to_pending_running_and_terminating() {
        for (s, want) in [
            ("Pending", WorkerState::Pending),
            ("Pending:Wait", WorkerState::Pending),
            ("Pending:Proceed", WorkerState::Pending),
            ("InService", WorkerState::Running),
            ("Terminating", WorkerState::Terminating),
            ("Terminating:Wait", WorkerState::Terminating),
            ("Terminated", WorkerState::Terminating),
            ("Detaching", WorkerState::Terminating),
            ("Detached", WorkerState::Terminating),
            ("EnteringStandby", WorkerState::Terminating),
            ("Standby", WorkerState::Terminating),
            ("Warmed:Running", WorkerState::Terminating),
        ] {
            assert_eq!(worker_state(s), want, "{s}");
        }
    }

    fn capacity(desired: u32, types: &[&str]) -> Capacity {
        Capacity {
            desired,
            min: 0,
            max: 8,
            distribution: Some(Distribution {
                on_demand_base: 0,
                on_demand_percentage_above_base: 100,
                instance_types: types.iter().map(|t| t.to_string()).collect(),
            }),
            workers: vec![],
        }
    }

    fn spec(desired: u32, types: &[&str]) -> CapacitySpec {
        let c = capacity(desired, types);
        CapacitySpec {
            desired,
            min: c.min,
            max: c.max,
            distribution: c.distribution.unwrap_or_default(),
            targets: vec![],
        }
    }

    #[test]
    fn only_what_differs_is_changed() {
        let cur = capacity(2, &["g5.xlarge", "g4dn.xlarge"]);
        assert_eq!(
            change(&cur, &spec(2, &["g5.xlarge", "g4dn.xlarge"])),
            Change::None
        );
        assert_eq!(
            change(&cur, &spec(3, &["g5.xlarge", "g4dn.xlarge"])),
            Change::Desired
        );
        assert_eq!(
            change(&cur, &spec(2, &["g4dn.xlarge", "g5.xlarge"])),
            Change::Update
        );
        let mut s = spec(2, &["g5.xlarge", "g4dn.xlarge"]);
        s.max = 9;
        assert_eq!(change(&cur, &s), Change::Update);
        let mut plain = cur.clone();
        plain.distribution = None;
        assert_eq!(
            change(&plain, &spec(2, &["g5.xlarge", "g4dn.xlarge"])),
            Change::Update
        );
    }

    #[test]
    fn an_update_names_the_whole_policy_with_the_groups_launch_template() {
        let mut s = spec(4, &["g5.2xlarge", "g5.xlarge"]);
        s.distribution.on_demand_base = 1;
        s.distribution.on_demand_percentage_above_base = 30;
        let template = LaunchTemplateSpec {
            id: Some("lt-0a20c965061f64abc".into()),
            name: Some("training-gpu".into()),
            version: Some("$Latest".into()),
        };
        let p = update_params("training-g5", &s, &template);
        let want: Vec<(String, String)> = [
            ("AutoScalingGroupName", "training-g5"),
            ("MinSize", "0"),
            ("MaxSize", "8"),
            ("DesiredCapacity", "4"),
            (
                "MixedInstancesPolicy.InstancesDistribution.OnDemandBaseCapacity",
                "1",
            ),
            (
                "MixedInstancesPolicy.InstancesDistribution.OnDemandPercentageAboveBaseCapacity",
                "30",
            ),
            (
                "MixedInstancesPolicy.InstancesDistribution.SpotAllocationStrategy",
                "price-capacity-optimized",
            ),
            (
                "MixedInstancesPolicy.InstancesDistribution.OnDemandAllocationStrategy",
                "prioritized",
            ),
            (
                "MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification.LaunchTemplateId",
                "lt-0a20c965061f64abc",
            ),
            (
                "MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification.Version",
                "$Latest",
            ),
            (
                "MixedInstancesPolicy.LaunchTemplate.Overrides.member.1.InstanceType",
                "g5.2xlarge",
            ),
            (
                "MixedInstancesPolicy.LaunchTemplate.Overrides.member.2.InstanceType",
                "g5.xlarge",
            ),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(p, want);
    }

    #[test]
    fn desired_and_terminate_params_are_as_documented() {
        let p = set_desired_params("g", 3);
        assert_eq!(
            p,
            [
                ("AutoScalingGroupName".to_string(), "g".to_string()),
                ("DesiredCapacity".into(), "3".into()),
                ("HonorCooldown".into(), "false".into()),
            ]
        );
        let p = terminate_params("i-0598c7d356eba48d7", true);
        assert_eq!(
            p,
            [
                ("InstanceId".to_string(), "i-0598c7d356eba48d7".to_string()),
                ("ShouldDecrementDesiredCapacity".into(), "true".into()),
            ]
        );
    }
}
