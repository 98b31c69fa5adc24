//! Catalog rows as the database returns them, decoded by column name (`FromRow`), and their
//! conversion to the core's types, which parses what the database keeps as text.

use super::PricePoint;
use super::backend::decode_error;
use crate::core::benchmark::Benchmark;
use crate::core::catalog::{GpuFacts, InstanceSpec, Market, Offering, OfferingKey, ProviderEntry};
use crate::core::money::Micros;

/// The nine spec columns of `offerings`, in the order [`spec_args`](super::catalog_sql) binds
/// them.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct SpecRecord {
    gpu: String,
    gpu_count: f64,
    gpu_memory_gib: f64,
    vcpus: f64,
    memory_gib: f64,
    network_gbps: Option<f64>,
    interconnect: String,
    local_nvme_gb: Option<f64>,
    arch: String,
}

impl TryFrom<SpecRecord> for InstanceSpec {
    type Error = sqlx::Error;

    fn try_from(r: SpecRecord) -> Result<Self, Self::Error> {
        Ok(Self {
            gpu: r.gpu,
            gpu_count: r.gpu_count,
            gpu_memory_gib: r.gpu_memory_gib,
            vcpus: r.vcpus,
            memory_gib: r.memory_gib,
            network_gbps: r.network_gbps,
            interconnect: r.interconnect.parse().map_err(decode_error)?,
            local_nvme_gb: r.local_nvme_gb,
            arch: r.arch,
        })
    }
}

/// A row of [`OFFERINGS_WITH_LATEST_PRICES`](super::catalog_sql::OFFERINGS_WITH_LATEST_PRICES).
#[derive(Debug, sqlx::FromRow)]
pub(super) struct OfferingRecord {
    id: i64,
    provider: String,
    region: String,
    zone: String,
    instance_type: String,
    #[sqlx(flatten)]
    spec: SpecRecord,
    on_demand: Option<i64>,
    spot: Option<i64>,
    observed_at: Option<i64>,
}

impl TryFrom<OfferingRecord> for Offering {
    type Error = sqlx::Error;

    fn try_from(r: OfferingRecord) -> Result<Self, Self::Error> {
        Ok(Self {
            id: r.id,
            key: OfferingKey {
                provider: r.provider,
                region: r.region,
                zone: r.zone,
                instance_type: r.instance_type,
            },
            spec: r.spec.try_into()?,
            on_demand: r.on_demand.map(Micros),
            spot: r.spot.map(Micros),
            price_observed_at_ms: r.observed_at,
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct ProviderRecord {
    name: String,
    display_name: String,
}

impl From<ProviderRecord> for ProviderEntry {
    fn from(r: ProviderRecord) -> Self {
        Self {
            name: r.name,
            display_name: r.display_name,
        }
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct GpuRecord {
    name: String,
    variant: String,
    memory_gib: f64,
    memory_bandwidth_gbps: f64,
    fp16_bf16_dense_tflops: f64,
    bf16_supported: bool,
    fp32_tflops: f64,
    gpu_link_gbps: f64,
    tdp_w: f64,
}

impl From<GpuRecord> for GpuFacts {
    fn from(r: GpuRecord) -> Self {
        Self {
            name: r.name,
            variant: r.variant,
            memory_gib: r.memory_gib,
            memory_bandwidth_gbps: r.memory_bandwidth_gbps,
            fp16_bf16_dense_tflops: r.fp16_bf16_dense_tflops,
            bf16_supported: r.bf16_supported,
            fp32_tflops: r.fp32_tflops,
            gpu_link_gbps: r.gpu_link_gbps,
            tdp_w: r.tdp_w,
        }
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct BenchmarkRecord {
    id: i64,
    workload: String,
    provider: String,
    instance_type: String,
    gpus: i64,
    nodes: i64,
    steps: Option<i64>,
    samples_per_sec: Option<f64>,
    step_time_sec: Option<f64>,
    measured_at_ms: i64,
}

impl From<BenchmarkRecord> for Benchmark {
    fn from(r: BenchmarkRecord) -> Self {
        Self {
            id: r.id,
            workload: r.workload,
            provider: r.provider,
            instance_type: r.instance_type,
            gpus: u32::try_from(r.gpus).unwrap_or(u32::MAX),
            nodes: u32::try_from(r.nodes).unwrap_or(u32::MAX),
            steps: r.steps,
            samples_per_sec: r.samples_per_sec,
            step_time_sec: r.step_time_sec,
            measured_at_ms: r.measured_at_ms,
        }
    }
}

/// What a benchmark already recorded measured, to tell a re-sent one from a conflicting one.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct MeasurementRecord {
    pub samples_per_sec: Option<f64>,
    pub step_time_sec: Option<f64>,
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct PricePointRecord {
    id: i64,
    provider: String,
    region: String,
    zone: String,
    instance_type: String,
    market: String,
    price_micros: i64,
    observed_at_ms: i64,
    source: String,
}

impl TryFrom<PricePointRecord> for PricePoint {
    type Error = sqlx::Error;

    fn try_from(r: PricePointRecord) -> Result<Self, Self::Error> {
        Ok(Self {
            id: r.id,
            key: OfferingKey {
                provider: r.provider,
                region: r.region,
                zone: r.zone,
                instance_type: r.instance_type,
            },
            market: r.market.parse().map_err(decode_error)?,
            price: Micros(r.price_micros),
            observed_at_ms: r.observed_at_ms,
            source: r.source,
        })
    }
}

/// A price recorded for an offering and market at one time.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct RecordedPriceRecord {
    offering_id: i64,
    market: String,
    price_micros: i64,
}

impl RecordedPriceRecord {
    /// ((offering, market), price).
    pub fn keyed(self) -> Result<((i64, Market), i64), sqlx::Error> {
        let market = self.market.parse().map_err(decode_error)?;
        Ok(((self.offering_id, market), self.price_micros))
    }
}

/// An offering just inserted, with its key (multi-row `RETURNING` does not promise order).
#[derive(Debug, sqlx::FromRow)]
pub(super) struct InsertedOfferingRecord {
    pub id: i64,
    pub region: String,
    pub zone: String,
    pub instance_type: String,
}
