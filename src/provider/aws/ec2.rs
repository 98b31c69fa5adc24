//! EC2 responses the adapter reads: instance types (`DescribeInstanceTypes`), spot prices
//! (`DescribeSpotPriceHistory`) and the market and launch time of a group's instances
//! (`DescribeInstances`), turned into the provider's own types.
//!
//! On-demand prices are not here: EC2 does not serve them. They live only in the separate AWS
//! Pricing API (a large JSON price list in us-east-1), which this adapter does not call, so a
//! refresh reports spot prices alone.

use std::collections::HashMap;

use serde::Deserialize;

use super::xml::{Items, non_empty, time_ms};
use crate::core::catalog::Market;
use crate::provider::{InstanceTypeInfo, PriceQuote, amount};

const MIB_PER_GIB: f64 = 1024.0;

#[derive(Debug, Deserialize)]
pub struct DescribeInstanceTypesResponse {
    #[serde(rename = "instanceTypeSet", default)]
    pub instance_types: Items<InstanceType>,
    #[serde(rename = "nextToken")]
    pub next_token: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct InstanceType {
    #[serde(rename = "instanceType")]
    pub instance_type: String,
    #[serde(rename = "vCpuInfo")]
    vcpu: Option<VCpuInfo>,
    #[serde(rename = "memoryInfo")]
    memory: Option<MemoryInfo>,
    #[serde(rename = "gpuInfo")]
    pub gpu: Option<GpuInfo>,
    #[serde(rename = "networkInfo")]
    network: Option<NetworkInfo>,
    #[serde(rename = "instanceStorageSupported")]
    storage_supported: Option<bool>,
    #[serde(rename = "instanceStorageInfo")]
    storage: Option<StorageInfo>,
    #[serde(rename = "processorInfo")]
    processor: Option<ProcessorInfo>,
}

#[derive(Debug, Deserialize)]
struct VCpuInfo {
    #[serde(rename = "defaultVCpus")]
    default_vcpus: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct MemoryInfo {
    #[serde(rename = "sizeInMiB")]
    size_mib: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct GpuInfo {
    #[serde(rename = "gpus", default)]
    gpus: Items<Gpu>,
}

#[derive(Debug, Deserialize)]
struct Gpu {
    name: Option<String>,
    count: Option<f64>,
    /// The share of one GPU a fractional type gets (0.125 for g6f.large), whose `count` is 0.
    #[serde(rename = "gpuPartitionSize")]
    partition: Option<f64>,
    #[serde(rename = "memoryInfo")]
    memory: Option<MemoryInfo>,
}

impl Gpu {
    /// GPUs per instance, fractional for types that get a slice of one: a slice is still
    /// capacity a scheduler can place work on, and `count` alone would call it none.
    fn count(&self) -> f64 {
        match (amount(self.count), amount(self.partition)) {
            (Some(c), _) if c > 0.0 => c,
            (_, Some(p)) if p > 0.0 && p < 1.0 => p,
            (c, _) => c.unwrap_or(0.0),
        }
    }

    /// Memory of one whole GPU, GiB. EC2 gives a slice's memory for fractional types, so it is
    /// scaled back up, keeping count × memory equal to what the instance gets.
    fn memory_gib(&self) -> f64 {
        let mib = amount(self.memory.as_ref().and_then(|m| m.size_mib)).unwrap_or(0.0);
        let count = self.count();
        let whole = if count > 0.0 && count < 1.0 {
            mib / count
        } else {
            mib
        };
        // Scaling a slice up can overflow a size that was itself finite; an overflowed size
        // is no more stated than an infinite one.
        amount(Some(whole / MIB_PER_GIB)).unwrap_or(0.0)
    }
}

#[derive(Debug, Deserialize)]
struct NetworkInfo {
    #[serde(rename = "networkPerformance")]
    performance: Option<String>,
    #[serde(rename = "efaSupported")]
    efa: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct StorageInfo {
    #[serde(rename = "totalSizeInGB")]
    total_gb: Option<f64>,
    #[serde(rename = "nvmeSupport")]
    nvme: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ProcessorInfo {
    #[serde(rename = "supportedArchitectures", default)]
    architectures: Items<String>,
}

impl InstanceType {
    /// Whether EC2 lists an accelerator of any kind (GPU) for the type.
    pub fn has_gpu(&self) -> bool {
        self.gpu.as_ref().is_some_and(|g| !g.gpus.item.is_empty())
    }

    pub fn into_info(self) -> InstanceTypeInfo {
        // Types with several GPU models do not exist today; the first one names the type.
        let gpu = self.gpu.and_then(|g| g.gpus.item.into_iter().next());
        // Instance store without NVMe (old HDD types) is not the fast scratch disk training
        // wants, so it counts as none.
        let local_nvme_gb = match (&self.storage, self.storage_supported) {
            (Some(s), _) if s.nvme.as_deref() != Some("unsupported") => {
                amount(s.total_gb).or(Some(0.0))
            }
            (Some(_), _) | (None, Some(false)) => Some(0.0),
            (None, _) => None,
        };
        InstanceTypeInfo {
            instance_type: self.instance_type,
            vcpus: amount(self.vcpu.and_then(|v| v.default_vcpus)).unwrap_or(0.0),
            memory_gib: amount(self.memory.and_then(|m| m.size_mib))
                .map_or(0.0, |mib| mib / MIB_PER_GIB),
            gpu_model: gpu.as_ref().and_then(|g| non_empty(g.name.clone())),
            gpu_count: gpu.as_ref().map_or(0.0, Gpu::count),
            gpu_memory_gib: gpu.as_ref().map_or(0.0, Gpu::memory_gib),
            network: self
                .network
                .as_ref()
                .and_then(|n| non_empty(n.performance.clone())),
            rdma: self.network.as_ref().and_then(|n| n.efa).unwrap_or(false),
            local_nvme_gb,
            arch: self
                .processor
                .and_then(|p| p.architectures.item.into_iter().next()),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct DescribeSpotPriceHistoryResponse {
    #[serde(rename = "spotPriceHistorySet", default)]
    pub history: Items<SpotPrice>,
    #[serde(rename = "nextToken")]
    pub next_token: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct SpotPrice {
    #[serde(rename = "instanceType")]
    instance_type: String,
    #[serde(rename = "availabilityZone")]
    zone: Option<String>,
    #[serde(rename = "spotPrice")]
    price: String,
    timestamp: String,
}

/// The newest quote per (instance type, zone), sorted by type then zone. Entries AWS sent
/// with a price or time that does not parse are dropped rather than failing the refresh.
pub fn newest_spot_quotes(history: impl IntoIterator<Item = SpotPrice>) -> Vec<PriceQuote> {
    let mut newest: HashMap<(String, Option<String>), PriceQuote> = HashMap::new();
    for entry in history {
        let (Ok(dollars), Some(at_ms)) =
            (entry.price.trim().parse::<f64>(), time_ms(&entry.timestamp))
        else {
            continue;
        };
        if !dollars.is_finite() || dollars < 0.0 {
            continue;
        }
        let zone = non_empty(entry.zone);
        let key = (entry.instance_type.clone(), zone.clone());
        if newest.get(&key).is_some_and(|q| q.at_ms >= at_ms) {
            continue;
        }
        newest.insert(
            key,
            PriceQuote {
                instance_type: entry.instance_type,
                zone,
                market: Market::Spot,
                dollars_per_hour: dollars,
                at_ms,
            },
        );
    }
    let mut quotes: Vec<PriceQuote> = newest.into_values().collect();
    quotes.sort_by(|a, b| (&a.instance_type, &a.zone).cmp(&(&b.instance_type, &b.zone)));
    quotes
}

#[derive(Debug, Deserialize)]
pub struct DescribeInstancesResponse {
    #[serde(rename = "reservationSet", default)]
    pub reservations: Items<Reservation>,
    #[serde(rename = "nextToken")]
    pub next_token: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Reservation {
    #[serde(rename = "instancesSet", default)]
    pub instances: Items<Instance>,
}

#[derive(Debug, Deserialize)]
pub struct Instance {
    #[serde(rename = "instanceId")]
    pub id: String,
    #[serde(rename = "instanceLifecycle")]
    lifecycle: Option<String>,
    #[serde(rename = "launchTime")]
    launch_time: Option<String>,
    #[serde(rename = "privateDnsName")]
    private_dns_name: Option<String>,
    #[serde(rename = "privateIpAddress")]
    private_ip_address: Option<String>,
}

/// What EC2 knows about an instance that Auto Scaling does not say.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceFacts {
    pub market: Market,
    pub launched_at_ms: Option<i64>,
    /// Its private DNS name, that name's host part and its private IP: what a node, and so
    /// dcgm-exporter's `Hostname`, is called on EKS (the DNS name) or a plain EC2 host (the
    /// host part, on images that set the short name).
    pub aliases: Vec<String>,
}

impl Instance {
    pub fn facts(&self) -> InstanceFacts {
        InstanceFacts {
            // EC2 sets instanceLifecycle only for spot (and scheduled) instances; on-demand
            // instances have none.
            market: if self.lifecycle.as_deref() == Some("spot") {
                Market::Spot
            } else {
                Market::OnDemand
            },
            launched_at_ms: self.launch_time.as_deref().and_then(time_ms),
            aliases: self.aliases(),
        }
    }

    fn aliases(&self) -> Vec<String> {
        let dns = self
            .private_dns_name
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty());
        let host = dns
            .and_then(|d| d.split_once('.'))
            .map(|(host, _)| host)
            .filter(|h| !h.is_empty());
        let ip = self
            .private_ip_address
            .as_deref()
            .map(str::trim)
            .filter(|i| !i.is_empty());
        let mut out: Vec<String> = Vec::new();
        for name in [dns, host, ip].into_iter().flatten() {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_owned());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::aws::xml::parse;

    const TYPES: &str = include_str!("../../../tests/fixtures/aws/ec2_describe_instance_types.xml");
    const SPOT: &str =
        include_str!("../../../tests/fixtures/aws/ec2_describe_spot_price_history.xml");
    const INSTANCES: &str = include_str!("../../../tests/fixtures/aws/ec2_describe_instances.xml");

    #[test]
    fn instance_types_are_read_with_gpus_network_efa_and_local_nvme() {
        let r: DescribeInstanceTypesResponse =
            parse("DescribeInstanceTypes", TYPES).expect("parses");
        assert_eq!(r.next_token.as_deref(), Some("AAEAAbXgexample"));
        let gpu: Vec<bool> = r
            .instance_types
            .item
            .iter()
            .map(InstanceType::has_gpu)
            .collect();
        assert_eq!(gpu, [true, true, false, true]);
        let infos: Vec<InstanceTypeInfo> = r
            .instance_types
            .item
            .into_iter()
            .map(InstanceType::into_info)
            .collect();
        assert_eq!(
            infos[0],
            InstanceTypeInfo {
                instance_type: "g4dn.12xlarge".into(),
                vcpus: 48.0,
                memory_gib: 192.0,
                gpu_model: Some("T4".into()),
                gpu_count: 4.0,
                gpu_memory_gib: 16.0,
                network: Some("50 Gigabit".into()),
                rdma: true,
                local_nvme_gb: Some(900.0),
                arch: Some("x86_64".into()),
            }
        );
        assert_eq!(infos[1].instance_type, "p4d.24xlarge");
        assert_eq!(infos[1].gpu_model.as_deref(), Some("A100"));
        assert_eq!(infos[1].gpu_count, 8.0);
        assert_eq!(infos[1].gpu_memory_gib, 40.0);
        assert!(infos[1].rdma);
        assert_eq!(infos[1].local_nvme_gb, Some(8000.0));
        assert_eq!(infos[2].instance_type, "m5.large");
        assert_eq!(infos[2].gpu_model, None);
        assert_eq!(infos[2].gpu_count, 0.0);
        assert!(!infos[2].rdma);
        assert_eq!(infos[2].local_nvme_gb, Some(0.0));
        assert_eq!(infos[2].network.as_deref(), Some("Up to 10 Gigabit"));
        assert_eq!(infos[3].instance_type, "g6f.large");
        assert_eq!(infos[3].gpu_model.as_deref(), Some("L4"));
        assert_eq!(infos[3].gpu_count, 0.125, "an eighth of an L4");
        assert_eq!(
            infos[3].gpu_memory_gib,
            22888.0 / 1024.0,
            "the whole L4's memory"
        );
    }

    #[test]
    fn only_the_newest_spot_price_per_type_and_zone_is_kept() {
        let r: DescribeSpotPriceHistoryResponse =
            parse("DescribeSpotPriceHistory", SPOT).expect("parses");
        assert_eq!(
            non_empty(r.next_token),
            None,
            "an empty <nextToken/> ends the pages"
        );
        let quotes = newest_spot_quotes(r.history.item);
        let summary: Vec<(&str, Option<&str>, f64)> = quotes
            .iter()
            .map(|q| {
                (
                    q.instance_type.as_str(),
                    q.zone.as_deref(),
                    q.dollars_per_hour,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("g4dn.12xlarge", Some("us-east-1a"), 1.3045),
                ("g4dn.12xlarge", Some("us-east-1b"), 1.2871),
                ("p4d.24xlarge", Some("us-east-1a"), 9.8318),
            ]
        );
        assert!(quotes.iter().all(|q| q.market == Market::Spot));
        assert_eq!(quotes[0].at_ms, 1_767_691_973_000, "2026-01-06T09:32:53Z");
    }

    #[test]
    fn instances_tell_spot_from_on_demand_and_their_launch_time() {
        let r: DescribeInstancesResponse = parse("DescribeInstances", INSTANCES).expect("parses");
        let facts: Vec<(String, InstanceFacts)> = r
            .reservations
            .item
            .iter()
            .flat_map(|res| res.instances.item.iter())
            .map(|i| (i.id.clone(), i.facts()))
            .collect();
        assert_eq!(facts.len(), 2);
        assert_eq!(facts[0].0, "i-0598c7d356eba48d7");
        assert_eq!(facts[0].1.market, Market::Spot);
        assert_eq!(facts[0].1.launched_at_ms, Some(1_767_690_000_000));
        assert_eq!(
            facts[0].1.aliases,
            ["ip-10-0-1-23.ec2.internal", "ip-10-0-1-23", "10.0.1.23"]
        );
        assert_eq!(facts[1].0, "i-1234567890abcdef0");
        assert_eq!(facts[1].1.market, Market::OnDemand);
        assert!(
            facts[1].1.aliases.is_empty(),
            "a pending instance may have no names yet"
        );
    }
}
