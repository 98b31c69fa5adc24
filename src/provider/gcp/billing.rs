//! Prices from the Cloud Billing Catalog API: the public SKUs of Compute Engine
//! (`services/6F81-5844-456A/skus`, in USD), read page by page and kept as the few rates a GPU
//! offering is priced from.
//!
//! An offering is priced the way the bundled catalog prices GCP (`catalog::skypilot`): the
//! GPUs (`Nvidia Tesla T4 GPU running in Americas`, per GPU-hour) plus the host's vCPUs and
//! memory at its series' rates (`N1 Predefined Instance Core ...` per vCPU-hour, `... Ram ...`
//! per GiB-hour). On-demand uses the `OnDemand` SKUs, spot the `Preemptible` ones (described
//! `Spot Preemptible ...`). A SKU matches only on its whole normalised description, so
//! look-alikes (`... GPU Virtual Workstation`, `Commitment v1: ...`, custom and sole-tenant
//! SKUs) are never taken for the plain rate, and two different prices for one rate in one
//! region leave that rate unknown rather than guessed.

use std::collections::HashMap;

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use super::api::{Api, Service};
use super::errors::ErrorContext;
use super::shapes::{Series, Shape};
use crate::core::catalog::Market;
use crate::provider::{InstanceTypeInfo, PriceQuote, ProviderError, ProviderResult};

/// Compute Engine's service id in the catalog.
pub const COMPUTE_SERVICE: &str = "6F81-5844-456A";
/// The documented largest page.
const PAGE_SIZE: &str = "5000";
const MAX_PAGES: usize = 100;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SkuPage {
    #[serde(default)]
    skus: Vec<Sku>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Sku {
    #[serde(default)]
    description: String,
    #[serde(default)]
    category: Category,
    #[serde(default)]
    service_regions: Vec<String>,
    #[serde(default)]
    pricing_info: Vec<PricingInfo>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Category {
    #[serde(default)]
    resource_family: String,
    #[serde(default)]
    usage_type: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PricingInfo {
    #[serde(default)]
    effective_time: Option<String>,
    #[serde(default)]
    pricing_expression: PricingExpression,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PricingExpression {
    #[serde(default)]
    usage_unit: String,
    #[serde(default)]
    tiered_rates: Vec<TieredRate>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TieredRate {
    #[serde(default)]
    start_usage_amount: f64,
    #[serde(default)]
    unit_price: Money,
}

/// `google.type.Money`: `units` is an int64, which JSON carries as a string.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Money {
    #[serde(default)]
    currency_code: String,
    #[serde(default)]
    units: Option<Value>,
    #[serde(default)]
    nanos: i64,
}

impl Money {
    fn dollars(&self) -> Option<f64> {
        if self.currency_code != "USD" {
            return None;
        }
        let units = match &self.units {
            None => 0,
            Some(Value::String(s)) => s.parse::<i64>().ok()?,
            Some(Value::Number(n)) => n.as_i64()?,
            Some(_) => return None,
        };
        let d = units as f64 + self.nanos as f64 / 1e9;
        (d.is_finite() && d >= 0.0).then_some(d)
    }
}

/// What one SKU prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// One GPU of this catalog model for an hour.
    Gpu(&'static str),
    /// One vCPU of the series for an hour.
    Core(Series),
    /// One GiB of the series' memory for an hour.
    Ram(Series),
}

#[derive(Debug, Clone)]
struct Entry {
    rate: Rate,
    market: Market,
    regions: Vec<String>,
    dollars: f64,
    effective_ms: Option<i64>,
}

/// The rates of the SKUs that price GPU offerings.
#[derive(Debug, Clone, Default)]
pub struct SkuIndex {
    entries: Vec<Entry>,
}

/// GPU model words of a SKU description and the catalog's names.
const GPU_MODELS: &[(&str, &str)] = &[
    ("t4", "T4"),
    ("v100", "V100"),
    ("p100", "P100"),
    ("p4", "P4"),
    ("a100", "A100"),
    ("a100 80gb", "A100-80GB"),
    ("l4", "L4"),
    ("h100 80gb", "H100"),
    ("h100 80gb mega", "H100-MEGA"),
    ("h100 mega 80gb", "H100-MEGA"),
    ("h100 80gb plus", "H100-MEGA"),
    ("h200 141gb", "H200"),
    ("b200", "B200"),
];

const SERIES: [Series; 5] = [Series::N1, Series::A2, Series::A3, Series::A4, Series::G2];

/// What a description prices, if it is one of the rates offerings are built from.
pub fn classify(description: &str) -> Option<Rate> {
    let d = description.trim().to_ascii_lowercase();
    // Other ways of buying the same hardware, priced differently.
    const OTHER_OFFERS: &[&str] = &[
        "commitment",
        "custom",
        "sole tenan",
        "reserved",
        "premium",
        "dws",
        "flex",
        "calendar",
    ];
    if OTHER_OFFERS.iter().any(|w| d.contains(w)) {
        return None;
    }
    let d = d
        .strip_prefix("spot preemptible ")
        .or_else(|| d.strip_prefix("preemptible "))
        .unwrap_or(&d);
    let head = d
        .split_once(" running in ")
        .map_or(d, |(head, _)| head)
        .trim();
    if let Some(model) = head.strip_suffix(" gpu") {
        let model = model.strip_prefix("nvidia ")?;
        let model = model.strip_prefix("tesla ").unwrap_or(model);
        return GPU_MODELS
            .iter()
            .find(|(words, _)| *words == model)
            .map(|(_, gpu)| Rate::Gpu(gpu));
    }
    SERIES.into_iter().find_map(|s| {
        let rest = head.strip_prefix(s.sku_prefix())?;
        match rest {
            " core" => Some(Rate::Core(s)),
            " ram" => Some(Rate::Ram(s)),
            _ => None,
        }
    })
}

impl SkuIndex {
    fn add(&mut self, sku: Sku) {
        if sku.category.resource_family != "Compute" {
            return;
        }
        let market = match sku.category.usage_type.as_str() {
            "OnDemand" => Market::OnDemand,
            "Preemptible" => Market::Spot,
            _ => return,
        };
        let Some(rate) = classify(&sku.description) else {
            return;
        };
        // The timeline's newest entry is the price now.
        let Some(info) = sku.pricing_info.last() else {
            return;
        };
        let expr = &info.pricing_expression;
        let unit_ok = match rate {
            Rate::Ram(_) => expr.usage_unit == "GiBy.h",
            _ => expr.usage_unit == "h",
        };
        // The first tier (from 0 units) is the list price.
        let tier = expr
            .tiered_rates
            .iter()
            .min_by(|a, b| a.start_usage_amount.total_cmp(&b.start_usage_amount));
        let Some(dollars) = tier
            .and_then(|t| t.unit_price.dollars())
            .filter(|_| unit_ok)
        else {
            tracing::debug!(description = %sku.description, unit = %expr.usage_unit, "billing sku skipped: unit or currency");
            return;
        };
        self.entries.push(Entry {
            rate,
            market,
            regions: sku.service_regions,
            dollars,
            effective_ms: info
                .effective_time
                .as_deref()
                .and_then(|t| crate::timefmt::parse_rfc3339_ms(t).ok()),
        });
    }

    /// SKUs kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The rate in `region`, and when it took effect; `None` when no SKU (or two SKUs with
    /// different prices) price it there.
    pub fn rate(&self, rate: Rate, market: Market, region: &str) -> Option<(f64, Option<i64>)> {
        let mut found = self.entries.iter().filter(|e| {
            e.rate == rate && e.market == market && e.regions.iter().any(|r| r == region)
        });
        let first = found.next()?;
        if found.any(|e| e.dollars != first.dollars) {
            tracing::warn!(
                ?rate,
                ?market,
                region,
                "two billing skus price one rate differently; no price"
            );
            return None;
        }
        Some((first.dollars, first.effective_ms))
    }

    /// The hourly price of `shape` in `region` and market: GPUs plus vCPUs plus memory.
    pub fn price(&self, shape: &Shape, market: Market, region: &str) -> Option<(f64, Option<i64>)> {
        let (gpu, t1) = self.rate(Rate::Gpu(shape.gpu), market, region)?;
        let (core, t2) = self.rate(Rate::Core(shape.series), market, region)?;
        let (ram, t3) = self.rate(Rate::Ram(shape.series), market, region)?;
        let dollars = gpu * f64::from(shape.gpus) + core * shape.vcpus + ram * shape.memory_gib;
        Some((dollars, [t1, t2, t3].into_iter().flatten().max()))
    }
}

/// Reads every page of Compute Engine's SKUs into an index.
pub async fn fetch(api: &Api) -> ProviderResult<SkuIndex> {
    let path = format!("services/{COMPUTE_SERVICE}/skus");
    let ctx = ErrorContext {
        what: format!("list of {path}"),
        ..ErrorContext::default()
    };
    let mut index = SkuIndex::default();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut query = vec![
            ("currencyCode", "USD".to_string()),
            ("pageSize", PAGE_SIZE.to_string()),
        ];
        if let Some(t) = &token {
            query.push(("pageToken", t.clone()));
        }
        let page: SkuPage = api
            .call(Method::GET, Service::Billing, &path, &query, None, &ctx)
            .await?;
        for sku in page.skus {
            index.add(sku);
        }
        match page.next_page_token.filter(|t| !t.is_empty()) {
            Some(next) if token.as_ref() != Some(&next) => token = Some(next),
            _ => return Ok(index),
        }
    }
    Err(ProviderError::Other(format!(
        "{}: still more pages after {MAX_PAGES}",
        ctx.what
    )))
}

/// The instance types and region-wide prices of `shapes` in `region`; a shape with no price
/// in either market is not sold there and is left out.
pub fn quotes(
    index: &SkuIndex,
    shapes: &[Shape],
    region: &str,
    now_ms: i64,
) -> (Vec<InstanceTypeInfo>, Vec<PriceQuote>) {
    let mut types = Vec::new();
    let mut prices = Vec::new();
    let mut seen: HashMap<&str, ()> = HashMap::new();
    for shape in shapes {
        if seen.insert(&shape.instance_type, ()).is_some() {
            continue;
        }
        let mut any = false;
        for market in [Market::OnDemand, Market::Spot] {
            if let Some((dollars, at)) = index.price(shape, market, region) {
                any = true;
                prices.push(PriceQuote {
                    instance_type: shape.instance_type.clone(),
                    zone: None,
                    market,
                    dollars_per_hour: dollars,
                    at_ms: at.unwrap_or(now_ms).min(now_ms),
                });
            }
        }
        if any {
            // A3 Mega's GPU is an H100 on a faster fabric; the catalog names it so.
            let gpu = if shape.gpu == "H100-MEGA" {
                "H100"
            } else {
                shape.gpu
            };
            types.push(InstanceTypeInfo {
                instance_type: shape.instance_type.clone(),
                vcpus: shape.vcpus,
                memory_gib: shape.memory_gib,
                gpu_model: Some(gpu.to_string()),
                gpu_count: f64::from(shape.gpus),
                gpu_memory_gib: crate::catalog::gpu_facts::memory_gib_by_name(shape.gpu)
                    .unwrap_or(0.0),
                network: None,
                rdma: false,
                local_nvme_gb: None,
                arch: Some("x86_64".into()),
            });
        }
    }
    (types, prices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_matched_whole() {
        assert_eq!(
            classify("Nvidia Tesla T4 GPU running in Americas"),
            Some(Rate::Gpu("T4"))
        );
        assert_eq!(
            classify("Spot Preemptible Nvidia Tesla T4 GPU running in Americas"),
            Some(Rate::Gpu("T4"))
        );
        assert_eq!(
            classify("NVIDIA L4 GPU running in Virginia"),
            Some(Rate::Gpu("L4"))
        );
        assert_eq!(
            classify("Nvidia Tesla A100 80GB GPU running in Americas"),
            Some(Rate::Gpu("A100-80GB"))
        );
        assert_eq!(
            classify("Nvidia Tesla A100 GPU running in Americas"),
            Some(Rate::Gpu("A100"))
        );
        assert_eq!(
            classify("Nvidia H100 80GB Mega GPU running in Americas"),
            Some(Rate::Gpu("H100-MEGA"))
        );
        assert_eq!(
            classify("N1 Predefined Instance Core running in Americas"),
            Some(Rate::Core(Series::N1))
        );
        assert_eq!(
            classify("Preemptible N1 Predefined Instance Ram running in Americas"),
            Some(Rate::Ram(Series::N1))
        );
        assert_eq!(
            classify("G2 Instance Ram running in Netherlands"),
            Some(Rate::Ram(Series::G2))
        );
        for other in [
            "Nvidia L4 GPU Virtual Workstation running in Americas",
            "Commitment v1: Nvidia L4 GPU running in Americas",
            "G2 Custom Instance Core running in Americas",
            "N1 Predefined Instance Core running in Americas for Sole Tenancy",
            "Nvidia L40 GPU running in Netherlands",
            "Network Internet Egress from Americas to Americas",
        ] {
            assert_eq!(classify(other), None, "{other}");
        }
    }

    #[test]
    fn money_reads_units_as_a_string_or_a_number() {
        let m: Money = serde_json::from_value(
            serde_json::json!({"currencyCode": "USD", "units": "1", "nanos": 250000000}),
        )
        .unwrap();
        assert_eq!(m.dollars(), Some(1.25));
        let m: Money =
            serde_json::from_value(serde_json::json!({"currencyCode": "USD", "nanos": 31611000}))
                .unwrap();
        assert_eq!(m.dollars(), Some(0.031611));
        let m: Money =
            serde_json::from_value(serde_json::json!({"currencyCode": "EUR", "units": "1"}))
                .unwrap();
        assert_eq!(m.dollars(), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

        /// Whatever a SKU's money says, a price read from it is finite and not negative.
        #[test]
        fn prices_read_from_any_money_are_in_range(units in proptest::prelude::any::<i64>(), nanos in proptest::prelude::any::<i64>(), as_text in proptest::prelude::any::<bool>()) {
            let units = if as_text { serde_json::json!(units.to_string()) } else { serde_json::json!(units) };
            let m: Money = serde_json::from_value(serde_json::json!({"currencyCode": "USD", "units": units, "nanos": nanos})).unwrap();
            if let Some(d) = m.dollars() {
                proptest::prop_assert!(d.is_finite() && d >= 0.0, "{d}");
            }
        }

        /// Arbitrary bytes as a SKU page: an error or an index, no panic.
        #[test]
        fn arbitrary_sku_pages_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            if let Ok(page) = serde_json::from_slice::<SkuPage>(&bytes) {
                let mut index = SkuIndex::default();
                for sku in page.skus {
                    index.add(sku);
                }
            }
        }
    }
}
