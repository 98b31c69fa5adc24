//! What a simulation assumed, stated beside its results: the prices it billed at and where
//! they came from, start-up, the spot notice, the restart overhead, the billing of each
//! policy's provider and the size of the fixed cluster it compares against.

use std::collections::BTreeSet;

use serde::Serialize;
use utoipa::ToSchema;

use crate::core::catalog::{CatalogSnapshot, Market};
use crate::core::sim::Candidate;
use crate::core::sim::baseline::FIXED_ON_DEMAND;
use crate::core::sim::settings::{Billing, Settings};
use crate::core::sim::trace::{Trace, TraceEvent};
use crate::timefmt::format_ms;

/// The catalog price of one instance type in one market, across the zones of the region.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PriceAssumption {
    pub provider: String,
    pub region: String,
    pub instance_type: String,
    pub market: Market,
    /// USD per instance-hour, the cheapest and dearest zone (equal for a region-wide price).
    pub min_per_hour: f64,
    pub max_per_hour: f64,
    /// When the newest of these prices was observed (RFC 3339).
    pub observed_at: Option<String>,
}

/// How one policy's provider bills.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct BillingAssumption {
    pub policy: String,
    pub provider: String,
    pub increment_sec: f64,
    pub minimum_sec: f64,
    /// `settings` when the request set it, else `provider` (what the provider documents).
    pub from: &'static str,
}

/// The always-on cluster `fixed_on_demand` stands for.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FixedCluster {
    pub workers: u32,
    pub instance_type: String,
    pub gpus_per_worker: u32,
}

/// Everything the figures rest on that is not in the trace or the policies.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SimAssumptions {
    /// Where the prices come from.
    pub prices_from: String,
    pub prices: Vec<PriceAssumption>,
    /// `spot_price` lines of the trace, which replace the catalog's spot price from their
    /// moment on.
    pub spot_price_changes: usize,
    pub startup_sec: f64,
    pub notice_sec: f64,
    pub restart_overhead_sec: f64,
    pub billing: Vec<BillingAssumption>,
    /// Null without baselines.
    pub fixed_cluster: Option<FixedCluster>,
}

fn secs(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

/// The assumptions of a run of `candidates` over `trace`, priced from `catalog`.
pub fn assumptions(
    catalog: &CatalogSnapshot,
    prices_from: &str,
    trace: &Trace,
    candidates: &[Candidate],
    settings: &Settings,
) -> SimAssumptions {
    let mut types = BTreeSet::new();
    for c in candidates {
        for choice in &c.policy.instance_types {
            types.insert((
                c.policy.provider.clone(),
                c.policy.region.clone(),
                choice.instance_type.clone(),
            ));
        }
    }
    let mut prices = Vec::new();
    for (provider, region, instance_type) in types {
        let offerings: Vec<_> = catalog
            .offerings_for_pool(&provider, &instance_type)
            .filter(|o| o.key.region == region)
            .collect();
        for market in [Market::OnDemand, Market::Spot] {
            let priced: Vec<f64> = offerings
                .iter()
                .filter_map(|o| o.price(market).map(|p| p.dollars()))
                .collect();
            let (Some(min), Some(max)) = (
                priced.iter().copied().reduce(f64::min),
                priced.iter().copied().reduce(f64::max),
            ) else {
                continue;
            };
            prices.push(PriceAssumption {
                provider: provider.clone(),
                region: region.clone(),
                instance_type: instance_type.clone(),
                market,
                min_per_hour: min,
                max_per_hour: max,
                observed_at: offerings
                    .iter()
                    .filter_map(|o| o.price_observed_at_ms)
                    .max()
                    .map(format_ms),
            });
        }
    }
    let billing = candidates
        .iter()
        .map(|c| {
            let (b, from) = match settings.billing {
                Some(b) => (b, "settings"),
                None => (Billing::for_provider(&c.policy.provider), "provider"),
            };
            BillingAssumption {
                policy: c.name.clone(),
                provider: c.policy.provider.clone(),
                increment_sec: b.increment_sec(),
                minimum_sec: b.minimum_sec(),
                from,
            }
        })
        .collect();
    let fixed_cluster = candidates
        .iter()
        .find(|c| c.name == FIXED_ON_DEMAND)
        .map(|c| FixedCluster {
            workers: c.policy.min_workers,
            instance_type: c
                .policy
                .instance_types
                .first()
                .map(|t| t.instance_type.clone())
                .unwrap_or_default(),
            gpus_per_worker: c.policy.gpus_per_worker,
        });
    SimAssumptions {
        prices_from: prices_from.to_string(),
        prices,
        spot_price_changes: trace
            .events()
            .iter()
            .filter(|e| matches!(e, TraceEvent::SpotPrice { .. }))
            .count(),
        startup_sec: secs(settings.startup_ms),
        notice_sec: secs(settings.notice_ms),
        restart_overhead_sec: secs(settings.restart_overhead_ms),
        billing,
        fixed_cluster,
    }
}

/// The assumptions as lines under the table.
pub fn render(a: &SimAssumptions) -> String {
    let mut out = String::from("assumptions:\n");
    out.push_str(&format!("  prices from {}:\n", a.prices_from));
    for p in &a.prices {
        let price = if p.min_per_hour == p.max_per_hour {
            format!("${}/h", p.min_per_hour)
        } else {
            format!("${} to ${}/h by zone", p.min_per_hour, p.max_per_hour)
        };
        out.push_str(&format!(
            "    {} {} {} {}: {price}{}\n",
            p.provider,
            p.region,
            p.instance_type,
            p.market,
            p.observed_at
                .as_deref()
                .map(|t| format!(" (observed {t})"))
                .unwrap_or_default()
        ));
    }
    if a.spot_price_changes > 0 {
        out.push_str(&format!(
            "    and {} spot price changes from the trace\n",
            a.spot_price_changes
        ));
    }
    out.push_str(&format!(
        "  start-up {} s, spot notice {} s, restart overhead {} s\n",
        a.startup_sec, a.notice_sec, a.restart_overhead_sec
    ));
    let mut seen = BTreeSet::new();
    for b in &a.billing {
        if seen.insert((b.provider.clone(), b.from)) {
            let from = if b.from == "settings" {
                "as the settings say"
            } else {
                "as the provider bills"
            };
            out.push_str(&format!(
                "  billing {}: per {} s, at least {} s ({from})\n",
                b.provider, b.increment_sec, b.minimum_sec
            ));
        }
    }
    if let Some(f) = &a.fixed_cluster {
        out.push_str(&format!(
            "  {FIXED_ON_DEMAND}: {} × {} ({} GPUs each), on demand all the time\n",
            f.workers, f.instance_type, f.gpus_per_worker
        ));
    }
    out
}
