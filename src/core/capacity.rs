//! A cloud group's capacity as values: what a provider reports (workers, desired capacity,
//! distribution over markets and types) and what the reconciler asks of it. Plain data, shared
//! by the pure planning in `core::reconcile` and the adapters in `crate::provider`.

use serde::Serialize;

use super::catalog::Market;

/// One cloud group a pool is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupRef {
    /// The pool the group belongs to (the static provider keys its workers by it).
    pub pool: String,
    pub region: String,
    /// The AWS auto scaling group name, the Alibaba scaling group id, the GCP managed
    /// instance group's path (its standard, on-demand MIG); empty for `static`.
    pub group: String,
    /// GCP only: the Spot MIG of a pool that mixes markets. A MIG runs one provisioning
    /// model, so the decision's market split is kept as two group sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spot_group: Option<String>,
}

/// How a group spreads its capacity over markets and instance types: the shape of an AWS
/// MixedInstancesPolicy, which Alibaba's scaling groups share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Distribution {
    /// Workers that are always on-demand, before any spot.
    pub on_demand_base: u32,
    /// Of the capacity above the base, the percentage that is on-demand (100 − spot share).
    pub on_demand_percentage_above_base: u32,
    /// Instance types in priority order, first preferred.
    pub instance_types: Vec<String>,
}

/// What a group should run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacitySpec {
    pub desired: u32,
    pub min: u32,
    pub max: u32,
    pub distribution: Distribution,
    /// The decision's exact split, for providers that launch per type and market themselves
    /// (the static provider); cloud groups split by `distribution` on their own.
    pub targets: Vec<Target>,
}

/// Workers of one instance type in one market, with the zones to launch them in (empty: any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    pub instance_type: String,
    pub market: Market,
    pub count: u32,
    pub zones: Vec<String>,
}

/// Where a worker is in its life, as the cloud reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Launched, not yet in service.
    Pending,
    Running,
    /// Being terminated or detached: no longer capacity.
    Terminating,
}

/// One instance of a group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CloudWorker {
    /// The cloud's instance id (`i-0abc…`, `i-bp1…`).
    pub id: String,
    pub instance_type: String,
    pub market: Market,
    pub zone: Option<String>,
    pub state: WorkerState,
    /// When the instance was launched, epoch milliseconds, if the cloud said.
    pub launched_at_ms: Option<i64>,
    /// Other names the cloud gives it (private DNS name and IP, host name): what metrics
    /// exporters call it.
    pub aliases: Vec<String>,
}

/// A group's capacity as the cloud holds it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    pub desired: u32,
    pub min: u32,
    pub max: u32,
    /// `None` when the group has no mixed-instances policy (a single launch template).
    pub distribution: Option<Distribution>,
    pub workers: Vec<CloudWorker>,
}

/// An instance type as the cloud describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceTypeInfo {
    pub instance_type: String,
    pub vcpus: f64,
    pub memory_gib: f64,
    /// The accelerator's model as the cloud names it (`T4`, `A10G`, `H100`); `None` without one.
    pub gpu_model: Option<String>,
    pub gpu_count: f64,
    /// Memory of one GPU, GiB.
    pub gpu_memory_gib: f64,
    /// The cloud's network performance text (`25 Gigabit`, `Up to 10 Gigabit`).
    pub network: Option<String>,
    /// Elastic Fabric Adapter (AWS) or eRDMA (Alibaba) support.
    pub rdma: bool,
    /// Instance-store NVMe in GB (0 when none).
    pub local_nvme_gb: Option<f64>,
    pub arch: Option<String>,
}

/// One price the cloud quoted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PriceQuote {
    pub instance_type: String,
    /// `None` where the price holds for the whole region.
    pub zone: Option<String>,
    pub market: Market,
    pub dollars_per_hour: f64,
    /// When the cloud says the price took effect, epoch milliseconds.
    pub at_ms: i64,
}

/// Instance types and prices of one region.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Refresh {
    pub types: Vec<InstanceTypeInfo>,
    pub prices: Vec<PriceQuote>,
}
