//! A provider's refresh into the catalog: the instance types and prices a cloud reports now,
//! as a catalog import (offerings upserted, each price that changed appended to history).
//!
//! An instance type the catalog already knows keeps the catalog's hardware facts (they are
//! curated, with GPU names the selection core matches on); a type new to the catalog gets the
//! facts the cloud reported. Spot prices are per zone; on-demand prices are per region (the
//! zone-less offering), and a zone's offering carries the region's on-demand price as well, so
//! each offering can be priced in both markets. A price stated for the whole region (GCP's
//! list prices, both markets) also reaches the zones of the region the catalog already has
//! offerings in (the bundled GCP catalog is per zone).

use std::collections::HashMap;

use crate::catalog::ImportedOffering;
use crate::core::catalog::{CatalogSnapshot, InstanceSpec, Interconnect, Market, OfferingKey};
use crate::core::money::Micros;
use crate::store::{CatalogImport, ImportReport, Store, StoreError};

use super::{InstanceTypeInfo, Provider, ProviderError, Refresh};

/// Spot price history looked back on at each refresh.
pub const SPOT_LOOKBACK_MS: i64 = 24 * 3_600_000;

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Asks `provider` for `region`'s types (`instance_types`, or every GPU type when empty) and
/// prices, and imports them into the catalog as of `now_ms`.
pub async fn refresh_region(
    store: &Store,
    catalog: &CatalogSnapshot,
    provider: &dyn Provider,
    region: &str,
    instance_types: &[String],
    now_ms: i64,
) -> Result<ImportReport, RefreshError> {
    let refresh = provider
        .refresh(region, instance_types, now_ms - SPOT_LOOKBACK_MS)
        .await?;
    let offerings = to_import(catalog, provider.name(), region, &refresh);
    let source = format!("{}-api", provider.name());
    Ok(store
        .import_catalog(
            CatalogImport {
                provider: provider.name(),
                offerings: &offerings,
                observed_at_ms: now_ms,
                source: &source,
            },
            now_ms,
        )
        .await?)
}

/// The import for `refresh` of `provider`'s `region`.
pub fn to_import(
    catalog: &CatalogSnapshot,
    provider: &str,
    region: &str,
    refresh: &Refresh,
) -> Vec<ImportedOffering> {
    let spec_of = |info: &InstanceTypeInfo| -> InstanceSpec {
        catalog
            .offerings_of(provider, &info.instance_type)
            .next()
            .map(|o| o.spec.clone())
            .unwrap_or_else(|| spec_from(provider, info))
    };
    let specs: HashMap<&str, InstanceSpec> = refresh
        .types
        .iter()
        .map(|t| (t.instance_type.as_str(), spec_of(t)))
        .collect();
    let price = |dollars: f64| Micros::from_dollars(dollars).ok();
    let on_demand: HashMap<&str, Micros> = refresh
        .prices
        .iter()
        .filter(|p| p.market == Market::OnDemand && p.zone.is_none())
        .filter_map(|p| Some((p.instance_type.as_str(), price(p.dollars_per_hour)?)))
        .collect();

    let mut out: Vec<ImportedOffering> = Vec::new();
    let key = |instance_type: &str, zone: &str| OfferingKey {
        provider: provider.to_string(),
        region: region.to_string(),
        zone: zone.to_string(),
        instance_type: instance_type.to_string(),
    };
    for (instance_type, spec) in &specs {
        out.push(ImportedOffering {
            key: key(instance_type, ""),
            spec: spec.clone(),
            on_demand: on_demand.get(instance_type).copied(),
            spot: None,
        });
    }
    for p in refresh.prices.iter().filter(|p| p.market == Market::Spot) {
        let Some(spec) = specs.get(p.instance_type.as_str()) else {
            continue;
        };
        let zone = p.zone.as_deref().unwrap_or("");
        let spot = price(p.dollars_per_hour);
        if let Some(o) = out
            .iter_mut()
            .find(|o| o.key == key(&p.instance_type, zone))
        {
            o.spot = spot;
            continue;
        }
        out.push(ImportedOffering {
            key: key(&p.instance_type, zone),
            spec: spec.clone(),
            on_demand: on_demand.get(p.instance_type.as_str()).copied(),
            spot,
        });
    }
    let region_spot: HashMap<&str, Micros> = refresh
        .prices
        .iter()
        .filter(|p| p.market == Market::Spot && p.zone.is_none())
        .filter_map(|p| Some((p.instance_type.as_str(), price(p.dollars_per_hour)?)))
        .collect();
    for (instance_type, spec) in &specs {
        let on_demand = on_demand.get(instance_type).copied();
        let spot = region_spot.get(instance_type).copied();
        if on_demand.is_none() && spot.is_none() {
            continue;
        }
        let zonal = catalog
            .offerings_of(provider, instance_type)
            .filter(|o| o.key.region == region && !o.key.zone.is_empty());
        for o in zonal {
            match out.iter_mut().find(|x| x.key == o.key) {
                // A zone's own quote is more precise than the region's.
                Some(x) => x.spot = x.spot.or(spot),
                None => out.push(ImportedOffering {
                    key: o.key.clone(),
                    spec: spec.clone(),
                    on_demand,
                    spot,
                }),
            }
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// Hardware facts of a type the catalog does not know yet, from the cloud's description.
fn spec_from(provider: &str, info: &InstanceTypeInfo) -> InstanceSpec {
    let interconnect = match (info.rdma, provider) {
        (true, super::AWS) => Interconnect::Efa,
        (true, _) => Interconnect::Roce,
        (false, _) => Interconnect::None,
    };
    InstanceSpec {
        gpu: info.gpu_model.clone().unwrap_or_default(),
        gpu_count: info.gpu_count,
        gpu_memory_gib: info.gpu_memory_gib,
        vcpus: info.vcpus,
        memory_gib: info.memory_gib,
        network_gbps: info.network.as_deref().and_then(gbps),
        interconnect,
        local_nvme_gb: info.local_nvme_gb,
        arch: info.arch.clone().unwrap_or_else(|| "x86_64".into()),
    }
}

/// `25 Gigabit`, `Up to 10 Gigabit`, `4x 100 Gigabit` → Gbit/s; `None` for words like `High`.
fn gbps(text: &str) -> Option<f64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let unit = words
        .iter()
        .position(|w| w.eq_ignore_ascii_case("gigabit"))?;
    let number = words.get(unit.checked_sub(1)?)?;
    let value: f64 = number.parse().ok()?;
    let times = words
        .first()
        .and_then(|w| w.strip_suffix('x'))
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|_| unit >= 2)
        .unwrap_or(1.0);
    // `inf Gigabit` parses as a number.
    super::amount(Some(value * times))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::bundled::bundled_snapshot;
    use crate::provider::PriceQuote;

    fn info(name: &str, model: &str, count: f64) -> InstanceTypeInfo {
        InstanceTypeInfo {
            instance_type: name.into(),
            vcpus: 48.0,
            memory_gib: 192.0,
            gpu_model: Some(model.into()),
            gpu_count: count,
            gpu_memory_gib: 16.0,
            network: Some("50 Gigabit".into()),
            rdma: false,
            local_nvme_gb: Some(900.0),
            arch: Some("x86_64".into()),
        }
    }

    fn spot(name: &str, zone: &str, dollars: f64) -> PriceQuote {
        PriceQuote {
            instance_type: name.into(),
            zone: Some(zone.into()),
            market: Market::Spot,
            dollars_per_hour: dollars,
            at_ms: 0,
        }
    }

    #[test]
    fn known_types_keep_catalog_facts_and_new_types_get_the_clouds() {
        let catalog = bundled_snapshot();
        let refresh = Refresh {
            types: vec![
                info("g4dn.12xlarge", "T4", 4.0),
                info("g9z.mega", "Z100", 8.0),
            ],
            prices: vec![
                spot("g4dn.12xlarge", "us-east-1a", 1.5),
                spot("g4dn.12xlarge", "us-east-1b", 1.7),
                spot("unknown.type", "us-east-1a", 9.0),
            ],
        };
        let import = to_import(&catalog, "aws", "us-east-1", &refresh);
        let known = catalog.offerings_of("aws", "g4dn.12xlarge").next().unwrap();
        let g4 = import
            .iter()
            .find(|o| o.key.instance_type == "g4dn.12xlarge" && o.key.zone == "us-east-1a")
            .unwrap();
        assert_eq!(g4.spec, known.spec);
        assert_eq!(g4.spot, Some(Micros::from_dollars(1.5).unwrap()));
        let new = import
            .iter()
            .find(|o| o.key.instance_type == "g9z.mega")
            .unwrap();
        assert_eq!((new.spec.gpu.as_str(), new.spec.gpu_count), ("Z100", 8.0));
        assert_eq!(new.spec.network_gbps, Some(50.0));
        assert_eq!((new.on_demand, new.spot), (None, None));
        assert!(
            import.iter().all(|o| o.key.instance_type != "unknown.type"),
            "a price for a type not described is dropped"
        );
        // One region-wide offering per type plus one per zone with a spot price.
        assert_eq!(import.len(), 4);
    }

    #[test]
    fn region_wide_prices_reach_the_zones_the_catalog_lists() {
        let catalog = bundled_snapshot();
        let zones: Vec<String> = catalog
            .offerings_of("gcp", "n1-highmem-4+T4x1")
            .filter(|o| o.key.region == "us-central1")
            .map(|o| o.key.zone.clone())
            .collect();
        assert!(
            zones.len() >= 2,
            "the bundle lists T4 hosts per zone: {zones:?}"
        );
        let quote = |market, dollars| PriceQuote {
            instance_type: "n1-highmem-4+T4x1".into(),
            zone: None,
            market,
            dollars_per_hour: dollars,
            at_ms: 0,
        };
        let refresh = Refresh {
            types: vec![info("n1-highmem-4+T4x1", "T4", 1.0)],
            prices: vec![
                quote(Market::OnDemand, 0.586606),
                quote(Market::Spot, 0.195902),
            ],
        };
        let import = to_import(&catalog, "gcp", "us-central1", &refresh);
        // The region-wide offering and one per listed zone, all at the region's prices.
        assert_eq!(import.len(), zones.len() + 1);
        for o in &import {
            assert!(
                o.key.zone.is_empty() || zones.contains(&o.key.zone),
                "{:?}",
                o.key
            );
            assert_eq!(o.on_demand, Some(Micros(586_606)));
            assert_eq!(o.spot, Some(Micros(195_902)));
        }
    }

    #[test]
    fn network_text_becomes_gbps() {
        assert_eq!(gbps("25 Gigabit"), Some(25.0));
        assert_eq!(gbps("Up to 10 Gigabit"), Some(10.0));
        assert_eq!(gbps("4x 100 Gigabit"), Some(400.0));
        assert_eq!(gbps("High"), None);
    }
}
