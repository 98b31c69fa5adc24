//! Reading provider catalogs into offerings: the SkyPilot CSV layout, the facts a CSV lacks
//! (interconnect, local NVMe, network) filled in from each provider's instance-family
//! documentation, and the real catalog snapshot bundled into the binary.

pub mod bundled;
pub mod calibration;
pub mod family_facts;
pub mod gpu_facts;
mod gpu_info;
pub mod skypilot;
pub mod spot_advisor;

use crate::core::catalog::{InstanceSpec, OfferingKey};
use crate::core::money::Micros;

/// One offering as a catalog file describes it, before it has a database id.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedOffering {
    pub key: OfferingKey,
    pub spec: InstanceSpec,
    pub on_demand: Option<Micros>,
    pub spot: Option<Micros>,
}

/// A catalog file that cannot be read, with the line (1-based, the header is line 1) and
/// column at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}{}: {problem}", column.as_ref().map(|c| format!(", column {c}")).unwrap_or_default())]
pub struct ImportError {
    pub line: u64,
    pub column: Option<String>,
    pub problem: String,
}

/// The catalog formats `catalog import` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatalogFormat {
    /// SkyPilot's `vms.csv` layout (columns read by header name).
    Skypilot,
}
