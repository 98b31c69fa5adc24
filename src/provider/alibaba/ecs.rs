//! ECS calls: instance types (DescribeInstanceTypes), on-demand prices (DescribePrice), spot
//! price history (DescribeSpotPriceHistory) and per-instance facts (DescribeInstances).
//! Response shapes follow the ECS API reference (2014-05-26); fields the adapter does not use
//! are not modelled, and every used field is optional because Alibaba omits empty ones.

use std::collections::HashMap;

use serde::Deserialize;
use time::OffsetDateTime;

use super::rpc::{self, RpcClient, Service};
use crate::core::catalog::Market;
use crate::provider::{InstanceTypeInfo, PriceQuote, ProviderResult, amount};

/// `InstanceTypes.N` takes at most 10 values per call.
const TYPES_PER_CALL: usize = 10;
/// The documented maximum of `MaxResults` since November 2023.
const MAX_RESULTS: &str = "100";
/// `InstanceIds` takes a JSON array of at most 100 ids.
const IDS_PER_CALL: usize = 100;
/// Guards against a server that keeps returning a next page forever.
const MAX_PAGES: usize = 100;

#[derive(Debug, Deserialize)]
struct InstanceTypesResponse {
    #[serde(rename = "InstanceTypes", default)]
    instance_types: Option<InstanceTypeList>,
    #[serde(rename = "NextToken", default)]
    next_token: Option<String>,
}

#[derive(Debug, Deserialize)]
struct InstanceTypeList {
    #[serde(rename = "InstanceType", default)]
    items: Vec<InstanceTypeItem>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InstanceTypeItem {
    instance_type_id: String,
    #[serde(default)]
    cpu_core_count: Option<f64>,
    #[serde(default)]
    memory_size: Option<f64>,
    #[serde(rename = "GPUSpec", default)]
    gpu_spec: Option<String>,
    #[serde(rename = "GPUAmount", default)]
    gpu_amount: Option<f64>,
    #[serde(rename = "GPUMemorySize", default)]
    gpu_memory_size: Option<f64>,
    #[serde(default)]
    instance_bandwidth_rx: Option<f64>,
    #[serde(default)]
    eri_quantity: Option<f64>,
    #[serde(default)]
    local_storage_capacity: Option<f64>,
    #[serde(default)]
    local_storage_amount: Option<f64>,
    #[serde(default)]
    local_storage_category: Option<String>,
    #[serde(default)]
    cpu_architecture: Option<String>,
}

impl InstanceTypeItem {
    fn into_info(self) -> InstanceTypeInfo {
        let gpu_model = self
            .gpu_spec
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        InstanceTypeInfo {
            instance_type: self.instance_type_id,
            vcpus: amount(self.cpu_core_count).unwrap_or(0.0),
            memory_gib: amount(self.memory_size).unwrap_or(0.0),
            gpu_model,
            gpu_count: amount(self.gpu_amount).unwrap_or(0.0),
            gpu_memory_gib: amount(self.gpu_memory_size).unwrap_or(0.0),
            network: amount(self.instance_bandwidth_rx).and_then(network_text),
            // Elastic RDMA interfaces (ERI) are how ECS offers eRDMA.
            rdma: self.eri_quantity.unwrap_or(0.0) > 0.0,
            local_nvme_gb: local_nvme_gb(
                self.local_storage_category.as_deref(),
                amount(self.local_storage_amount),
                amount(self.local_storage_capacity),
            ),
            arch: self.cpu_architecture.as_deref().map(arch),
        }
    }
}

/// ECS states bandwidth in Kbit/s counting 1 Gbit/s as 1,024,000 Kbit/s (a 1.5 Gbit/s type
/// reports 1536000), and the catalog reads AWS-style text, so render "N Gigabit".
fn network_text(kbit_per_s: f64) -> Option<String> {
    if kbit_per_s <= 0.0 {
        return None;
    }
    let gbit = kbit_per_s / 1_024_000.0;
    let rounded = (gbit * 100.0).round() / 100.0;
    Some(format!("{rounded} Gigabit"))
}

/// Local disks: `LocalStorageAmount` disks of `LocalStorageCapacity` GiB each. Only SSD/NVMe
/// categories count as fast scratch; HDD-only and diskless types report 0.
fn local_nvme_gb(
    category: Option<&str>,
    amount: Option<f64>,
    capacity: Option<f64>,
) -> Option<f64> {
    let category = category.unwrap_or("").to_ascii_lowercase();
    if category.is_empty() || !(category.contains("ssd") || category.contains("nvme")) {
        return Some(0.0);
    }
    let gib = amount.unwrap_or(1.0) * capacity?;
    // Two finite figures can still multiply past f64's range.
    Some((gib * 1.073_741_824).round()).filter(|gb| gb.is_finite())
}

fn arch(cpu_architecture: &str) -> String {
    match cpu_architecture.to_ascii_uppercase().as_str() {
        "X86" => "x86_64".to_string(),
        "ARM" => "arm64".to_string(),
        other => other.to_ascii_lowercase(),
    }
}

/// The region's instance types: `types` only when given, otherwise every type with a GPU.
pub async fn instance_types(
    client: &RpcClient,
    region: &str,
    types: &[String],
) -> ProviderResult<Vec<InstanceTypeInfo>> {
    let mut out = Vec::new();
    if types.is_empty() {
        let filter = rpc::params([("MinimumGPUAmount", "1".to_string())]);
        out.extend(instance_type_pages(client, region, filter).await?);
    } else {
        for chunk in types.chunks(TYPES_PER_CALL) {
            let filter: Vec<(String, String)> = chunk
                .iter()
                .enumerate()
                .map(|(i, t)| (format!("InstanceTypes.{}", i + 1), t.clone()))
                .collect();
            out.extend(instance_type_pages(client, region, filter).await?);
        }
    }
    Ok(out)
}

async fn instance_type_pages(
    client: &RpcClient,
    region: &str,
    filter: Vec<(String, String)>,
) -> ProviderResult<Vec<InstanceTypeInfo>> {
    let mut out = Vec::new();
    let mut next: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut params = filter.clone();
        params.push(("MaxResults".into(), MAX_RESULTS.into()));
        if let Some(token) = &next {
            params.push(("NextToken".into(), token.clone()));
        }
        let page: InstanceTypesResponse = client
            .call(Service::Ecs, "DescribeInstanceTypes", region, &params)
            .await?;
        if let Some(list) = page.instance_types {
            out.extend(list.items.into_iter().map(InstanceTypeItem::into_info));
        }
        match page.next_token.filter(|t| !t.is_empty()) {
            Some(token) => next = Some(token),
            None => break,
        }
    }
    Ok(out)
}

#[derive(Debug, Deserialize)]
struct PriceResponse {
    #[serde(rename = "PriceInfo")]
    price_info: PriceInfo,
}

#[derive(Debug, Deserialize)]
struct PriceInfo {
    #[serde(rename = "Price")]
    price: Price,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Price {
    trade_price: f64,
    #[serde(default)]
    currency: Option<String>,
}

/// The on-demand (pay-as-you-go) hourly price of `instance_type`, for the whole region. The
/// amount is in the account's currency (`Currency`: CNY on China-site accounts, USD on
/// international ones); it is passed on unconverted and the currency is logged.
pub async fn on_demand_price(
    client: &RpcClient,
    region: &str,
    instance_type: &str,
    now_ms: i64,
) -> ProviderResult<PriceQuote> {
    let params = rpc::params([
        ("ResourceType", "instance".to_string()),
        ("InstanceType", instance_type.to_string()),
        ("PriceUnit", "Hour".to_string()),
        // GPU families do not take the default basic/efficiency disks; ESSD prices everywhere.
        ("SystemDisk.Category", "cloud_essd".to_string()),
    ]);
    let answer: PriceResponse = client
        .call(Service::Ecs, "DescribePrice", region, &params)
        .await?;
    let price = answer.price_info.price;
    if let Some(currency) = price.currency.as_deref()
        && currency != "USD"
    {
        tracing::debug!(instance_type, currency, "alibaba price is not in USD");
    }
    Ok(PriceQuote {
        instance_type: instance_type.to_string(),
        zone: None,
        market: Market::OnDemand,
        dollars_per_hour: price.trade_price,
        at_ms: now_ms,
    })
}

#[derive(Debug, Deserialize)]
struct SpotHistoryResponse {
    #[serde(rename = "NextOffset", default)]
    next_offset: Option<i64>,
    #[serde(rename = "SpotPrices", default)]
    spot_prices: Option<SpotPriceList>,
}

#[derive(Debug, Deserialize)]
struct SpotPriceList {
    #[serde(rename = "SpotPriceType", default)]
    items: Vec<SpotPriceItem>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SpotPriceItem {
    zone_id: String,
    #[serde(default)]
    instance_type: Option<String>,
    spot_price: f64,
    timestamp: String,
}

/// The spot history only reaches 30 days back; ask for a little less so the clock of this
/// server and Alibaba's may differ.
const SPOT_HISTORY_MAX_MS: i64 = 29 * 24 * 60 * 60 * 1000;

/// The newest spot price per zone of `instance_type` since `since_ms` (VPC, Linux).
pub async fn spot_prices(
    client: &RpcClient,
    region: &str,
    instance_type: &str,
    since_ms: i64,
    now_ms: i64,
) -> ProviderResult<Vec<PriceQuote>> {
    let start_ms = since_ms.max(now_ms - SPOT_HISTORY_MAX_MS);
    let start = OffsetDateTime::from_unix_timestamp(start_ms.div_euclid(1000))
        .map(rpc::format_timestamp)
        .map_err(|e| crate::provider::ProviderError::InvalidRequest(format!("since: {e}")))?;
    let mut newest: HashMap<String, PriceQuote> = HashMap::new();
    let mut offset: i64 = 0;
    for _ in 0..MAX_PAGES {
        let mut params = rpc::params([
            ("NetworkType", "vpc".to_string()),
            ("InstanceType", instance_type.to_string()),
            ("StartTime", start.clone()),
        ]);
        if offset > 0 {
            params.push(("Offset".into(), offset.to_string()));
        }
        let page: SpotHistoryResponse = client
            .call(Service::Ecs, "DescribeSpotPriceHistory", region, &params)
            .await?;
        let items = page.spot_prices.map(|p| p.items).unwrap_or_default();
        let empty = items.is_empty();
        for item in items {
            let Some(at_ms) = rpc::parse_time_ms(&item.timestamp) else {
                continue;
            };
            let quote = PriceQuote {
                instance_type: item
                    .instance_type
                    .unwrap_or_else(|| instance_type.to_string()),
                zone: Some(item.zone_id.clone()),
                market: Market::Spot,
                dollars_per_hour: item.spot_price,
                at_ms,
            };
            match newest.get(&item.zone_id) {
                Some(kept) if kept.at_ms >= at_ms => {}
                _ => {
                    newest.insert(item.zone_id, quote);
                }
            }
        }
        // NextOffset is where the next page starts; no progress means the history is done.
        match page.next_offset {
            Some(next) if !empty && next > offset => offset = next,
            _ => break,
        }
    }
    let mut out: Vec<PriceQuote> = newest.into_values().collect();
    out.sort_by(|a, b| a.zone.cmp(&b.zone));
    Ok(out)
}

/// What DescribeInstances says about one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceFacts {
    pub instance_type: String,
    pub zone: Option<String>,
    pub market: Market,
    pub launched_at_ms: Option<i64>,
    /// Its host name and VPC private IPs: what the OS, and so dcgm-exporter's `Hostname`,
    /// calls it.
    pub aliases: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct InstancesResponse {
    #[serde(rename = "Instances", default)]
    instances: Option<InstanceList>,
    #[serde(rename = "NextToken", default)]
    next_token: Option<String>,
}

#[derive(Debug, Deserialize)]
struct InstanceList {
    #[serde(rename = "Instance", default)]
    items: Vec<InstanceItem>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InstanceItem {
    instance_id: String,
    #[serde(default)]
    instance_type: Option<String>,
    #[serde(default)]
    zone_id: Option<String>,
    #[serde(default)]
    spot_strategy: Option<String>,
    #[serde(default)]
    creation_time: Option<String>,
    #[serde(default)]
    host_name: Option<String>,
    #[serde(default)]
    vpc_attributes: Option<VpcAttributes>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct VpcAttributes {
    #[serde(default)]
    private_ip_address: Option<IpAddressList>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct IpAddressList {
    #[serde(default)]
    ip_address: Vec<String>,
}

impl InstanceItem {
    fn aliases(&self) -> Vec<String> {
        let ips = self
            .vpc_attributes
            .as_ref()
            .and_then(|v| v.private_ip_address.as_ref())
            .map(|l| l.ip_address.as_slice())
            .unwrap_or_default();
        let mut out: Vec<String> = Vec::new();
        for name in self.host_name.iter().chain(ips).map(|n| n.trim()) {
            if !name.is_empty() && !out.iter().any(|n| n == name) {
                out.push(name.to_owned());
            }
        }
        out
    }
}

/// `NoSpot` (or nothing) is pay-as-you-go; `SpotWithPriceLimit` and `SpotAsPriceGo` are spot.
pub fn market_of(spot_strategy: Option<&str>) -> Market {
    match spot_strategy {
        Some("SpotWithPriceLimit") | Some("SpotAsPriceGo") => Market::Spot,
        _ => Market::OnDemand,
    }
}

/// Facts of the given instances, keyed by id; ids ECS no longer knows are simply absent.
pub async fn instances(
    client: &RpcClient,
    region: &str,
    ids: &[String],
) -> ProviderResult<HashMap<String, InstanceFacts>> {
    let mut out = HashMap::new();
    for chunk in ids.chunks(IDS_PER_CALL) {
        // Documented as a JSON array in one parameter, e.g. ["i-bp1…","i-bp2…"].
        let ids_json = serde_json::to_string(chunk)
            .map_err(|e| crate::provider::ProviderError::Other(e.to_string()))?;
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut params = rpc::params([
                ("InstanceIds", ids_json.clone()),
                ("MaxResults", MAX_RESULTS.to_string()),
            ]);
            if let Some(token) = &next {
                params.push(("NextToken".into(), token.clone()));
            }
            let page: InstancesResponse = client
                .call(Service::Ecs, "DescribeInstances", region, &params)
                .await?;
            for item in page.instances.map(|l| l.items).unwrap_or_default() {
                let aliases = item.aliases();
                out.insert(
                    item.instance_id,
                    InstanceFacts {
                        aliases,
                        instance_type: item.instance_type.unwrap_or_default(),
                        zone: item.zone_id.filter(|z| !z.is_empty()),
                        market: market_of(item.spot_strategy.as_deref()),
                        launched_at_ms: item.creation_time.as_deref().and_then(rpc::parse_time_ms),
                    },
                );
            }
            match page.next_token.filter(|t| !t.is_empty()) {
                Some(token) => next = Some(token),
                None => break,
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bandwidth_uses_alibabas_1024_kbit_gigabit() {
        assert_eq!(network_text(1_536_000.0).as_deref(), Some("1.5 Gigabit"));
        assert_eq!(network_text(32_768_000.0).as_deref(), Some("32 Gigabit"));
        assert_eq!(network_text(0.0), None);
    }

    #[test]
    fn only_ssd_and_nvme_local_disks_count() {
        assert_eq!(
            local_nvme_gb(Some("local_nvme_ssd"), Some(2.0), Some(1788.0)),
            Some(3840.0)
        );
        assert_eq!(
            local_nvme_gb(Some("local_hdd_pro"), Some(12.0), Some(5500.0)),
            Some(0.0)
        );
        assert_eq!(local_nvme_gb(Some(""), None, None), Some(0.0));
        assert_eq!(local_nvme_gb(None, None, None), Some(0.0));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

        /// Any numbers in a DescribeInstanceTypes item: the facts read are finite and not
        /// negative, whatever the JSON said.
        #[test]
        fn instance_type_figures_are_in_range(
            figures in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<f64>().prop_filter("JSON has no NaN or infinity", |v| v.is_finite()),
                    proptest::prelude::Just(f64::MAX),
                    proptest::prelude::Just(-1.0),
                    proptest::prelude::Just(0.0),
                ],
                8,
            ),
            category in proptest::sample::select(vec!["local_nvme_ssd", "local_hdd_pro", "cloud_essd", ""]),
        ) {
            let item = serde_json::json!({
                "InstanceTypeId": "ecs.gn7i-c8g1.2xlarge",
                "CpuCoreCount": figures[0],
                "MemorySize": figures[1],
                "GPUSpec": "NVIDIA A10",
                "GPUAmount": figures[2],
                "GPUMemorySize": figures[3],
                "InstanceBandwidthRx": figures[4],
                "EriQuantity": figures[5],
                "LocalStorageCapacity": figures[6],
                "LocalStorageAmount": figures[7],
                "LocalStorageCategory": category,
            });
            let body = serde_json::json!({"InstanceTypes": {"InstanceType": [item]}}).to_string();
            let page: InstanceTypesResponse = serde_json::from_str(&body).expect("valid JSON numbers");
            for info in page.instance_types.into_iter().flat_map(|l| l.items).map(InstanceTypeItem::into_info) {
                for v in [info.vcpus, info.memory_gib, info.gpu_count, info.gpu_memory_gib] {
                    prop_assert!(v.is_finite() && v >= 0.0, "{info:?}");
                }
                if let Some(gb) = info.local_nvme_gb {
                    prop_assert!(gb.is_finite() && gb >= 0.0, "{info:?}");
                }
            }
        }

        /// Arbitrary bytes as a DescribeInstanceTypes body: an error or an answer, no panic.
        #[test]
        fn arbitrary_bodies_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Ok(page) = serde_json::from_slice::<InstanceTypesResponse>(&bytes) {
                let _ = page.instance_types.map(|l| l.items.into_iter().map(InstanceTypeItem::into_info).count());
            }
        }
    }

    #[test]
    fn negative_or_overflowing_figures_count_as_not_stated() {
        let item: InstanceTypeItem = serde_json::from_value(serde_json::json!({
            "InstanceTypeId": "ecs.x", "MemorySize": -8.0, "GPUAmount": -1.0,
            "LocalStorageCategory": "local_nvme_ssd", "LocalStorageAmount": 1e300,
            "LocalStorageCapacity": 1e300,
        }))
        .unwrap();
        let info = item.into_info();
        assert_eq!((info.memory_gib, info.gpu_count), (0.0, 0.0));
        assert_eq!(info.local_nvme_gb, None);
    }

    #[test]
    fn spot_strategies_map_to_markets() {
        assert_eq!(market_of(Some("NoSpot")), Market::OnDemand);
        assert_eq!(market_of(None), Market::OnDemand);
        assert_eq!(market_of(Some("SpotWithPriceLimit")), Market::Spot);
        assert_eq!(market_of(Some("SpotAsPriceGo")), Market::Spot);
    }
}
