//! The seam between decisions and clouds. A [`Provider`] reads and changes the capacity of one
//! cloud's groups of instances (an AWS auto scaling group, an Alibaba Cloud scaling group, or
//! rows of the static provider) and reports the cloud's instance types and prices.
//!
//! The trait is kept as small as Karpenter's `cloudprovider` interface: the reconciler
//! (`crate::reconcile`) owns every decision about *what* to change; an adapter only knows *how*
//! to change it in its cloud, and says what went wrong with a typed [`ProviderError`].

pub mod alibaba;
pub mod aws;
pub mod error;
pub mod http;
pub mod metered;
pub mod retry;
pub mod static_provider;

use async_trait::async_trait;
use serde::Serialize;

use crate::core::catalog::Market;

pub use error::{ProviderError, ProviderResult};

/// Names of the providers a policy may bind to.
pub const AWS: &str = "aws";
pub const ALIBABA: &str = "alibaba";
pub const STATIC: &str = "static";

/// One cloud group a pool is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupRef {
    /// The pool the group belongs to (the static provider keys its workers by it).
    pub pool: String,
    pub region: String,
    /// The AWS auto scaling group name, the Alibaba scaling group id; empty for `static`.
    pub group: String,
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

/// A cloud's capacity API, as the reconciler uses it.
#[async_trait]
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// `aws`, `alibaba` or `static`.
    fn name(&self) -> &'static str;

    /// The region's instance types (only `instance_types` when not empty; GPU types otherwise)
    /// and their current prices (spot price history since `since_ms`, on-demand where the cloud
    /// has a price API).
    async fn refresh(
        &self,
        region: &str,
        instance_types: &[String],
        since_ms: i64,
    ) -> ProviderResult<Refresh>;

    /// The group's desired capacity, distribution and instances.
    async fn describe(&self, group: &GroupRef) -> ProviderResult<Capacity>;

    /// Makes the group run `spec`: bounds, distribution and desired capacity. Changes only what
    /// differs from `current`, so an unchanged spec makes no call.
    async fn set_capacity(
        &self,
        group: &GroupRef,
        current: &Capacity,
        spec: &CapacitySpec,
    ) -> ProviderResult<()>;

    /// Terminates the chosen instances; with `decrement` the group's desired capacity drops by
    /// as many, so the group does not launch replacements.
    async fn terminate(
        &self,
        group: &GroupRef,
        workers: &[String],
        decrement: bool,
    ) -> ProviderResult<()>;
}
