//! The catalog as the decision core sees it: GPU facts, offerings with their latest prices,
//! and [`CatalogSnapshot`], an immutable index over them that is rebuilt and swapped whole.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::benchmark::{Benchmark, latest};
use super::estimate::Roofline;
use super::job::{PRECISIONS, Precision};
use super::money::Micros;
use super::shape::Shapes;
use super::terms::Terms;

/// The provider whose workers are trainscaler's own records: no cloud account needed. Its
/// pools are priced from every provider's offerings of their instance types.
pub const STATIC_PROVIDER: &str = "static";

// Named apart from the `provider::Provider` trait (the adapter that drives a cloud's
// groups); the schema keeps its published name.
/// A cloud (or marketplace) that sells GPU instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Provider)]
pub struct ProviderEntry {
    pub name: String,
    pub display_name: String,
}

/// Datasheet facts for one GPU model, per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GpuFacts {
    /// Accelerator name as the catalogs spell it (SkyPilot's names: `A100-80GB`, `H100`...).
    pub name: String,
    pub variant: String,
    pub memory_gib: f64,
    pub memory_bandwidth_gbps: f64,
    /// Dense (no 2:4 sparsity) BF16/FP16 tensor throughput.
    pub fp16_bf16_dense_tflops: f64,
    pub bf16_supported: bool,
    pub fp32_tflops: f64,
    /// GPU-to-GPU NVLink bandwidth in GB/s; 0 means PCIe only.
    pub gpu_link_gbps: f64,
    pub tdp_w: f64,
}

/// The node-to-node fabric an instance offers for multi-node training.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Interconnect {
    /// AWS Elastic Fabric Adapter (OS-bypass, GPUDirect RDMA on p4/p5).
    Efa,
    /// InfiniBand (Azure ND-series, Nebius GPU clusters).
    Infiniband,
    /// RDMA over Converged Ethernet (GCP A3 Ultra and A4 GPUDirect RDMA).
    Roce,
    /// GCP GPUDirect-TCPX/TCPXO on A3 High and A3 Mega: a fast fabric, but not RDMA.
    GpudirectTcpx,
    /// Ordinary Ethernet only.
    None,
}

impl Interconnect {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Efa => "efa",
            Self::Infiniband => "infiniband",
            Self::Roce => "roce",
            Self::GpudirectTcpx => "gpudirect_tcpx",
            Self::None => "none",
        }
    }
}

impl FromStr for Interconnect {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "efa" => Ok(Self::Efa),
            "infiniband" => Ok(Self::Infiniband),
            "roce" => Ok(Self::Roce),
            "gpudirect_tcpx" => Ok(Self::GpudirectTcpx),
            "none" => Ok(Self::None),
            other => Err(format!("unknown interconnect `{other}`")),
        }
    }
}

/// How an instance is bought.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Market {
    OnDemand,
    Spot,
}

impl Market {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => "on_demand",
            Self::Spot => "spot",
        }
    }
}

impl fmt::Display for Market {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Market {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "on_demand" => Ok(Self::OnDemand),
            "spot" => Ok(Self::Spot),
            other => Err(format!("must be `on_demand` or `spot`, not `{other}`")),
        }
    }
}

/// What an instance type is: everything about it that does not depend on where it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceSpec {
    pub gpu: String,
    /// Fractional on a few Azure sizes that slice one GPU.
    pub gpu_count: f64,
    /// Memory of one GPU as the instance sees it (a fraction of it on sliced GPUs).
    pub gpu_memory_gib: f64,
    pub vcpus: f64,
    pub memory_gib: f64,
    /// Network bandwidth in Gbit/s; `None` where the provider does not document it.
    pub network_gbps: Option<f64>,
    pub interconnect: Interconnect,
    /// Instance-store NVMe/SSD in GB; 0 means network storage only, `None` unknown.
    pub local_nvme_gb: Option<f64>,
    pub arch: String,
}

/// Where an offering is sold. `zone` is empty where the catalog prices a whole region.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OfferingKey {
    pub provider: String,
    pub region: String,
    pub zone: String,
    pub instance_type: String,
}

/// One instance type in one region/zone of one provider, with its latest known prices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offering {
    pub id: i64,
    pub key: OfferingKey,
    pub spec: InstanceSpec,
    pub on_demand: Option<Micros>,
    pub spot: Option<Micros>,
    /// When the newest of the two prices was observed, epoch milliseconds.
    pub price_observed_at_ms: Option<i64>,
}

impl Offering {
    pub fn price(&self, market: Market) -> Option<Micros> {
        match market {
            Market::OnDemand => self.on_demand,
            Market::Spot => self.spot,
        }
    }

    /// The price lists sort by: on-demand, or spot where no on-demand offer exists
    /// (AWS sells p5e.48xlarge through capacity blocks and spot only).
    pub fn list_price(&self) -> Option<Micros> {
        self.on_demand.or(self.spot)
    }
}

/// An offering's id and prices in dollars an hour, kept apart from the rest of it: the
/// selection scan reads only these for most configurations it weighs, and at 40 bytes each
/// they stay in the CPU's caches where whole offerings do not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quote {
    pub id: i64,
    pub on_demand: Option<f64>,
    pub spot: Option<f64>,
}

impl Quote {
    fn of(o: &Offering) -> Self {
        Self {
            id: o.id,
            on_demand: o.on_demand.map(Micros::dollars),
            spot: o.spot.map(Micros::dollars),
        }
    }

    pub fn price(&self, market: Market) -> Option<f64> {
        match market {
            Market::OnDemand => self.on_demand,
            Market::Spot => self.spot,
        }
    }
}

/// The prices of a set of offerings (a shape's, or those of it a request allows), per
/// market in the order on demand, spot.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PriceRange {
    /// The lowest and highest price per node-hour, in dollars.
    pub range: [Option<(f64, f64)>; 2],
    /// How many of the offerings have a price.
    pub priced: [u64; 2],
}

impl PriceRange {
    /// The prices of the offerings at `positions` in `quotes`.
    pub fn of(quotes: &[Quote], positions: &[u32]) -> Self {
        let mut prices = Self::default();
        for &p in positions {
            let q = &quotes[p as usize];
            for (i, price) in [q.on_demand, q.spot].into_iter().enumerate() {
                if let Some(price) = price {
                    prices.priced[i] += 1;
                    prices.range[i] = Some(
                        prices.range[i]
                            .map_or((price, price), |(l, h)| (l.min(price), h.max(price))),
                    );
                }
            }
        }
        prices
    }
}

/// An immutable, indexed view of the whole catalog. Built once per catalog change and shared
/// read-only by every request; never mutated in place.
#[derive(Debug, Default)]
pub struct CatalogSnapshot {
    offerings: Vec<Offering>,
    gpus: Vec<GpuFacts>,
    providers: Vec<ProviderEntry>,
    /// Positions into `offerings`, all sorted by (list price, id) with unpriced ones last.
    by_list_price: Vec<u32>,
    by_gpu: HashMap<String, Vec<u32>>,
    by_provider: HashMap<String, Vec<u32>>,
    by_id: HashMap<i64, u32>,
    /// For each offering, its GPU's position in `gpus` (matched case-insensitively).
    gpu_of: Vec<Option<u32>>,
    /// For each GPU in `gpus`, its [`Roofline`] at each precision ([`PRECISIONS`] order).
    rooflines: Vec<[Option<Roofline>; PRECISIONS.len()]>,
    /// The newest measurement of each workload × instance type × size.
    benchmarks: Vec<Benchmark>,
    /// (lower-case workload, provider, instance type) -> positions in `benchmarks`.
    benchmarks_by_type: HashMap<(String, String, String), Vec<u32>>,
    /// (lower-case workload, lower-case GPU model) -> positions in `benchmarks`, for the
    /// measurements whose instance type the catalog knows.
    benchmarks_by_gpu: HashMap<(String, String), Vec<u32>>,
    /// The store's catalog version these rows were read at; 0 when not from a store.
    version: i64,
    /// Offerings grouped by instance type and spec, for instance selection.
    shapes: Shapes,
    /// Each offering's id and prices, by position.
    quotes: Vec<Quote>,
    /// Each shape's prices, by shape.
    shape_prices: Vec<PriceRange>,
    /// Each shape's provider terms, by shape.
    shape_terms: Vec<Terms>,
}

impl CatalogSnapshot {
    pub fn new(
        providers: Vec<ProviderEntry>,
        gpus: Vec<GpuFacts>,
        offerings: Vec<Offering>,
    ) -> Self {
        Self::with_benchmarks(providers, gpus, offerings, Vec::new())
    }

    pub fn with_benchmarks(
        providers: Vec<ProviderEntry>,
        gpus: Vec<GpuFacts>,
        offerings: Vec<Offering>,
        benchmarks: Vec<Benchmark>,
    ) -> Self {
        let benchmarks = latest(benchmarks);
        let mut benchmarks_by_type: HashMap<(String, String, String), Vec<u32>> = HashMap::new();
        for (i, b) in benchmarks.iter().enumerate() {
            benchmarks_by_type
                .entry((
                    b.workload.to_lowercase(),
                    b.provider.clone(),
                    b.instance_type.clone(),
                ))
                .or_default()
                .push(i as u32);
        }
        let mut gpu_of_type: HashMap<(&str, &str), &str> = HashMap::new();
        for o in &offerings {
            gpu_of_type
                .entry((o.key.provider.as_str(), o.key.instance_type.as_str()))
                .or_insert(o.spec.gpu.as_str());
        }
        let mut benchmarks_by_gpu: HashMap<(String, String), Vec<u32>> = HashMap::new();
        for (i, b) in benchmarks.iter().enumerate() {
            if let Some(gpu) = gpu_of_type.get(&(b.provider.as_str(), b.instance_type.as_str())) {
                benchmarks_by_gpu
                    .entry((b.workload.to_lowercase(), gpu.to_lowercase()))
                    .or_default()
                    .push(i as u32);
            }
        }
        let mut order: Vec<u32> = (0..offerings.len() as u32).collect();
        order.sort_by_key(|&i| list_sort_key(&offerings[i as usize]));
        let mut by_gpu: HashMap<String, Vec<u32>> = HashMap::new();
        let mut by_provider: HashMap<String, Vec<u32>> = HashMap::new();
        for &i in &order {
            let o = &offerings[i as usize];
            by_gpu.entry(o.spec.gpu.to_lowercase()).or_default().push(i);
            by_provider
                .entry(o.key.provider.clone())
                .or_default()
                .push(i);
        }
        let by_id = offerings
            .iter()
            .enumerate()
            .map(|(i, o)| (o.id, i as u32))
            .collect();
        let gpu_pos: HashMap<String, u32> = gpus
            .iter()
            .enumerate()
            .map(|(i, g)| (g.name.to_lowercase(), i as u32))
            .collect();
        let gpu_of = offerings
            .iter()
            .map(|o| gpu_pos.get(&o.spec.gpu.to_lowercase()).copied())
            .collect();
        let rooflines = gpus
            .iter()
            .map(|g| PRECISIONS.map(|p| Roofline::of(g, p)))
            .collect();
        let shapes = Shapes::build(&offerings);
        let quotes: Vec<Quote> = offerings.iter().map(Quote::of).collect();
        let shape_prices = (0..shapes.len())
            .map(|shape| PriceRange::of(&quotes, shapes.members(shape)))
            .collect();
        let shape_terms = (0..shapes.len())
            .map(|shape| Terms::for_provider(&offerings[shapes.first(shape)].key.provider))
            .collect();
        Self {
            offerings,
            gpus,
            providers,
            by_list_price: order,
            by_gpu,
            by_provider,
            by_id,
            gpu_of,
            rooflines,
            benchmarks,
            benchmarks_by_type,
            benchmarks_by_gpu,
            version: 0,
            shapes,
            quotes,
            shape_prices,
            shape_terms,
        }
    }

    pub fn offerings(&self) -> &[Offering] {
        &self.offerings
    }

    pub fn gpus(&self) -> &[GpuFacts] {
        &self.gpus
    }

    pub fn providers(&self) -> &[ProviderEntry] {
        &self.providers
    }

    pub fn has_provider(&self, name: &str) -> bool {
        self.providers.iter().any(|p| p.name == name)
    }

    pub fn gpu(&self, name: &str) -> Option<&GpuFacts> {
        self.gpus.iter().find(|g| g.name.eq_ignore_ascii_case(name))
    }

    /// Datasheet facts for the GPU of the offering at `position` in [`offerings`](Self::offerings).
    pub fn gpu_facts_of(&self, position: usize) -> Option<&GpuFacts> {
        self.gpu_of
            .get(position)
            .copied()
            .flatten()
            .map(|g| &self.gpus[g as usize])
    }

    /// The [`Roofline`] of the GPU of the offering at `position` at `precision`: `None`
    /// without datasheet facts or where the GPU cannot train at the precision.
    pub fn roofline_of(&self, position: usize, precision: Precision) -> Option<Roofline> {
        let gpu = self.gpu_of.get(position).copied().flatten()?;
        let at = PRECISIONS.iter().position(|p| *p == precision)?;
        self.rooflines[gpu as usize][at]
    }

    /// Tags the snapshot with the catalog version it was read at.
    pub fn at_version(mut self, version: i64) -> Self {
        self.version = version;
        self
    }

    pub fn version(&self) -> i64 {
        self.version
    }

    /// Every offering's id and prices, by position.
    pub fn quotes(&self) -> &[Quote] {
        &self.quotes
    }

    /// The prices of every offering of `shape`.
    pub fn shape_prices(&self, shape: usize) -> &PriceRange {
        &self.shape_prices[shape]
    }

    /// The provider terms of the offering at `position`.
    pub fn terms_of(&self, position: usize) -> Terms {
        self.shape_terms[self.shapes.of(position)]
    }

    /// The offerings grouped by instance type and spec.
    pub fn shapes(&self) -> &Shapes {
        &self.shapes
    }

    pub fn benchmarks(&self) -> &[Benchmark] {
        &self.benchmarks
    }

    /// Measurements of `workload` (case-insensitive) on one instance type.
    pub fn benchmarks_for<'a>(
        &'a self,
        workload: &str,
        provider: &str,
        instance_type: &str,
    ) -> impl Iterator<Item = &'a Benchmark> + 'a {
        let key = (
            workload.to_lowercase(),
            provider.to_string(),
            instance_type.to_string(),
        );
        self.benchmarks_by_type
            .get(&key)
            .into_iter()
            .flatten()
            .map(|&i| &self.benchmarks[i as usize])
    }

    /// Measurements of `workload` (case-insensitive) on any instance type of one GPU model.
    pub fn benchmarks_of_gpu<'a>(
        &'a self,
        workload: &str,
        gpu: &str,
    ) -> impl Iterator<Item = &'a Benchmark> + 'a {
        self.benchmarks_by_gpu
            .get(&(workload.to_lowercase(), gpu.to_lowercase()))
            .into_iter()
            .flatten()
            .map(|&i| &self.benchmarks[i as usize])
    }

    /// The GPU model of an instance type, from any of its offerings.
    pub fn gpu_of_instance_type(&self, provider: &str, instance_type: &str) -> Option<&str> {
        self.offerings_of(provider, instance_type)
            .next()
            .map(|o| o.spec.gpu.as_str())
    }

    /// GPU model names the catalog knows, from its offerings and its datasheet facts, sorted
    /// and without case duplicates.
    pub fn gpu_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .by_gpu
            .values()
            .filter_map(|positions| positions.first())
            .map(|&i| self.offerings[i as usize].spec.gpu.as_str())
            .chain(self.gpus.iter().map(|g| g.name.as_str()))
            .collect();
        names.sort_by_key(|n| n.to_lowercase());
        names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
        names
    }

    /// Whether `name` is a GPU model of the catalog (case-insensitive).
    pub fn knows_gpu(&self, name: &str) -> bool {
        self.by_gpu.contains_key(&name.to_lowercase()) || self.gpu(name).is_some()
    }

    /// Whether any measurement of `workload` exists, to skip lookups for unmeasured jobs.
    pub fn has_benchmarks_for(&self, workload: &str) -> bool {
        self.benchmarks
            .iter()
            .any(|b| b.workload.eq_ignore_ascii_case(workload))
    }

    /// Every region and zone of one instance type.
    pub fn offerings_of<'a>(
        &'a self,
        provider: &str,
        instance_type: &str,
    ) -> impl Iterator<Item = &'a Offering> + 'a {
        // Owned, so callers may keep the offerings after giving up the name.
        let instance_type = instance_type.to_string();
        self.by_provider
            .get(provider)
            .into_iter()
            .flatten()
            .map(|&i| &self.offerings[i as usize])
            .filter(move |o| o.key.instance_type == instance_type)
    }

    /// The offerings that price a pool's instance type: its provider's, or for a `static`
    /// pool (simulated workers, no cloud of its own) every provider's.
    pub fn offerings_for_pool<'a>(
        &'a self,
        provider: &str,
        instance_type: &str,
    ) -> Box<dyn Iterator<Item = &'a Offering> + 'a> {
        if provider == STATIC_PROVIDER {
            let instance_type = instance_type.to_string();
            Box::new(
                self.offerings
                    .iter()
                    .filter(move |o| o.key.instance_type == instance_type),
            )
        } else {
            Box::new(self.offerings_of(provider, instance_type))
        }
    }

    pub fn offering(&self, id: i64) -> Option<&Offering> {
        self.by_id.get(&id).map(|&i| &self.offerings[i as usize])
    }

    /// Offerings in list-price order, narrowed by the most selective index available.
    pub(crate) fn candidates(&self, gpu: Option<&str>, provider: Option<&str>) -> &[u32] {
        if let Some(gpu) = gpu {
            return self
                .by_gpu
                .get(&gpu.to_lowercase())
                .map_or(&[], Vec::as_slice);
        }
        if let Some(provider) = provider {
            return self.by_provider.get(provider).map_or(&[], Vec::as_slice);
        }
        &self.by_list_price
    }

    pub(crate) fn at(&self, position: u32) -> &Offering {
        &self.offerings[position as usize]
    }
}

/// Unpriced offerings sort after every priced one; ids break ties so order is total.
pub(crate) fn list_sort_key(o: &Offering) -> (i64, i64) {
    (o.list_price().map_or(i64::MAX, |m| m.0), o.id)
}
