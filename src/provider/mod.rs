//! The seam between decisions and clouds. A [`Provider`] reads and changes the capacity of one
//! cloud's groups of instances (an AWS auto scaling group, an Alibaba Cloud scaling group, a
//! pair of GCP managed instance groups, or rows of the static provider) and reports the cloud's instance types and prices.
//!
//! The trait is kept as small as Karpenter's `cloudprovider` interface: the reconciler
//! (`crate::reconcile`) owns every decision about *what* to change; an adapter only knows *how*
//! to change it in its cloud, and says what went wrong with a typed [`ProviderError`].

pub mod alibaba;
pub mod aws;
pub mod credentials;
pub mod error;
pub mod gcp;
pub mod http;
pub mod metered;
pub mod refresh;
pub mod registry;
pub mod retry;
pub mod secret;
pub mod static_provider;
pub mod status;

use async_trait::async_trait;

pub use crate::core::capacity::{
    Capacity, CapacitySpec, CloudWorker, Distribution, GroupRef, InstanceTypeInfo, PriceQuote,
    Refresh, Target, WorkerState,
};
pub use error::{ProviderError, ProviderResult};

/// Names of the providers a policy may bind to.
pub const AWS: &str = "aws";
pub const ALIBABA: &str = "alibaba";
pub const GCP: &str = "gcp";
pub use crate::core::policy::STATIC_PROVIDER as STATIC;

/// A size, count or bandwidth from a cloud's answer as the catalog can hold it: finite and not
/// negative. Clouds' numbers are parsed as `f64`, which takes `inf`, `NaN`, `1e999` and `-8`;
/// none of those is a size, so such a figure counts as not stated rather than reaching prices
/// and memory checks.
pub(crate) fn amount(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0)
}

/// A cloud's capacity API, as the reconciler uses it.
#[async_trait]
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// `aws`, `alibaba`, `gcp` or `static`.
    fn name(&self) -> &'static str;

    /// Which credentials the adapter uses and when they expire, without secrets; `None` for
    /// adapters without cloud credentials.
    fn credentials(&self) -> Option<credentials::CredentialReport> {
        None
    }

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

/// An environment for settings readers' tests, without touching the process's own.
#[cfg(test)]
pub(crate) fn test_env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: std::collections::HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}
