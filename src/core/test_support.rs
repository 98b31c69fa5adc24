//! Fixtures for the core's unit tests: one [`OfferingBuilder`] instead of a hand-written
//! `Offering { key: OfferingKey { .. }, spec: InstanceSpec { .. }, .. }` in every test module.
//!
//! The builder starts from an AWS p4d.24xlarge (8 × A100 40 GB, EFA, no prices) in
//! us-east-1, the offering most tests want, and each test states only what it changes.

use super::catalog::{GpuFacts, InstanceSpec, Interconnect, Offering, OfferingKey};
use super::money::Micros;

/// A test offering under construction; [`OfferingBuilder::build`] hands it out.
#[derive(Debug, Clone)]
pub(crate) struct OfferingBuilder(Offering);

/// An AWS p4d.24xlarge in us-east-1 with id 1: 8 × A100 (40 GB), 96 vCPUs, 1152 GiB,
/// 400 Gbit/s EFA, no local NVMe figure, no prices.
pub(crate) fn p4d() -> OfferingBuilder {
    OfferingBuilder(Offering {
        id: 1,
        key: OfferingKey {
            provider: "aws".into(),
            region: "us-east-1".into(),
            zone: String::new(),
            instance_type: "p4d.24xlarge".into(),
        },
        spec: InstanceSpec {
            gpu: "A100".into(),
            gpu_count: 8.0,
            gpu_memory_gib: 40.0,
            vcpus: 96.0,
            memory_gib: 1152.0,
            network_gbps: Some(400.0),
            interconnect: Interconnect::Efa,
            local_nvme_gb: None,
            arch: "x86_64".into(),
        },
        on_demand: None,
        spot: None,
        price_observed_at_ms: None,
    })
}

/// The datasheet facts of an A100 (40 GB): 312 dense bf16 TFLOPS, 1,555 GB/s, NVLink.
pub(crate) fn a100_facts() -> GpuFacts {
    GpuFacts {
        name: "A100".into(),
        variant: String::new(),
        memory_gib: 40.0,
        memory_bandwidth_gbps: 1555.0,
        fp16_bf16_dense_tflops: 312.0,
        bf16_supported: true,
        fp32_tflops: 19.5,
        gpu_link_gbps: 600.0,
        tdp_w: 400.0,
    }
}

/// A test price in dollars per hour; the fixtures only use valid ones.
fn dollars(value: f64) -> Micros {
    Micros::from_dollars(value).expect("a test price is a valid price")
}

impl OfferingBuilder {
    pub(crate) fn id(mut self, id: i64) -> Self {
        self.0.id = id;
        self
    }

    /// Where it is sold: provider and region, priced for the whole region.
    pub(crate) fn at(mut self, provider: &str, region: &str) -> Self {
        self.0.key.provider = provider.into();
        self.0.key.region = region.into();
        self
    }

    pub(crate) fn zone(mut self, zone: &str) -> Self {
        self.0.key.zone = zone.into();
        self
    }

    pub(crate) fn instance_type(mut self, instance_type: &str) -> Self {
        self.0.key.instance_type = instance_type.into();
        self
    }

    /// The GPUs: model, how many, and the memory of each.
    pub(crate) fn gpus(mut self, gpu: &str, count: f64, memory_gib: f64) -> Self {
        self.0.spec.gpu = gpu.into();
        self.0.spec.gpu_count = count;
        self.0.spec.gpu_memory_gib = memory_gib;
        self
    }

    /// The host around the GPUs: vCPUs and memory.
    pub(crate) fn host(mut self, vcpus: f64, memory_gib: f64) -> Self {
        self.0.spec.vcpus = vcpus;
        self.0.spec.memory_gib = memory_gib;
        self
    }

    /// The node-to-node fabric and the documented network bandwidth.
    pub(crate) fn fabric(mut self, interconnect: Interconnect, network_gbps: Option<f64>) -> Self {
        self.0.spec.interconnect = interconnect;
        self.0.spec.network_gbps = network_gbps;
        self
    }

    pub(crate) fn local_nvme_gb(mut self, local_nvme_gb: Option<f64>) -> Self {
        self.0.spec.local_nvme_gb = local_nvme_gb;
        self
    }

    /// The on-demand and spot prices in dollars per hour, where sold.
    pub(crate) fn prices(mut self, on_demand: Option<f64>, spot: Option<f64>) -> Self {
        self.0.on_demand = on_demand.map(dollars);
        self.0.spot = spot.map(dollars);
        self
    }

    pub(crate) fn observed_at_ms(mut self, at_ms: i64) -> Self {
        self.0.price_observed_at_ms = Some(at_ms);
        self
    }

    pub(crate) fn build(self) -> Offering {
        self.0
    }
}
