//! The real catalog snapshot compiled into the binary, loaded into an empty database on first
//! start so that a fresh service answers real questions at once. `catalog/SOURCE.md` says where
//! each file comes from.

/// One provider's bundled file and the day its prices were published.
#[derive(Debug, Clone, Copy)]
pub struct BundledCatalog {
    pub provider: &'static str,
    pub csv: &'static str,
    /// RFC 3339; the price observations it seeds carry this time, not the time of first start,
    /// so that history stays truthful about how old the bundled prices are.
    pub observed_at: &'static str,
}

pub const BUNDLED: &[BundledCatalog] = &[
    BundledCatalog {
        provider: "aws",
        csv: include_str!("../../catalog/aws/vms.csv"),
        observed_at: "2026-01-21T00:00:00Z",
    },
    BundledCatalog {
        provider: "gcp",
        csv: include_str!("../../catalog/gcp/vms.csv"),
        observed_at: "2026-05-20T00:00:00Z",
    },
    BundledCatalog {
        provider: "azure",
        csv: include_str!("../../catalog/azure/vms.csv"),
        observed_at: "2026-05-20T00:00:00Z",
    },
    BundledCatalog {
        provider: "lambda",
        csv: include_str!("../../catalog/lambda/vms.csv"),
        observed_at: "2026-05-07T00:00:00Z",
    },
    BundledCatalog {
        provider: "nebius",
        csv: include_str!("../../catalog/nebius/vms.csv"),
        observed_at: "2025-12-01T00:00:00Z",
    },
    BundledCatalog {
        provider: "vast",
        csv: include_str!("../../catalog/vast/vms.csv"),
        observed_at: "2026-04-29T00:00:00Z",
    },
];

/// The bundled catalog as an in-memory snapshot with ids in file order, without a database:
/// for benchmarks and tests of the decision core.
pub fn bundled_snapshot() -> crate::core::catalog::CatalogSnapshot {
    use crate::core::catalog::{CatalogSnapshot, Offering, ProviderEntry};
    let mut offerings = Vec::new();
    for b in BUNDLED {
        let observed = crate::timefmt::parse_rfc3339_ms(b.observed_at).ok();
        for o in crate::catalog::skypilot::parse(b.provider, b.csv).unwrap_or_default() {
            offerings.push(Offering {
                id: offerings.len() as i64 + 1,
                key: o.key,
                spec: o.spec,
                on_demand: o.on_demand,
                spot: o.spot,
                price_observed_at_ms: observed,
            });
        }
    }
    let providers = BUNDLED
        .iter()
        .map(|b| ProviderEntry {
            name: b.provider.into(),
            display_name: b.provider.into(),
        })
        .collect();
    let gpus =
        crate::catalog::gpu_facts::parse_gpu_facts(crate::catalog::gpu_facts::BUNDLED_GPUS_CSV)
            .unwrap_or_default();
    CatalogSnapshot::new(providers, gpus, offerings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::skypilot;

    #[test]
    fn every_bundled_file_parses_into_priced_gpu_offerings() {
        for b in BUNDLED {
            let offerings = skypilot::parse(b.provider, b.csv)
                .unwrap_or_else(|e| panic!("{}: {e}", b.provider));
            assert!(!offerings.is_empty(), "{} has no offerings", b.provider);
            assert!(
                offerings.iter().any(|o| o.on_demand.is_some()),
                "{}",
                b.provider
            );
            assert!(offerings.iter().all(|o| o.spec.gpu_count > 0.0));
        }
    }

    #[test]
    fn bundled_reference_prices_match_the_source_files() {
        let find = |provider: &str, it: &str, region: &str, zone: &str| {
            let b = BUNDLED.iter().find(|b| b.provider == provider).unwrap();
            skypilot::parse(provider, b.csv)
                .unwrap()
                .into_iter()
                .find(|o| o.key.instance_type == it && o.key.region == region && o.key.zone == zone)
                .unwrap_or_else(|| panic!("{provider} {it} {region} {zone} missing"))
        };
        let gcp = find("gcp", "a2-highgpu-8g", "europe-west4", "europe-west4-a");
        assert_eq!(gcp.on_demand.map(|m| m.0), Some(19_421_700));
        let azure = find("azure", "Standard_ND96asr_v4", "eastus", "");
        assert_eq!(azure.on_demand.map(|m| m.0), Some(27_197_000));
        assert_eq!(azure.spot.map(|m| m.0), Some(5_983_340));
        let aws = find("aws", "p4d.24xlarge", "us-east-1", "use1-az1");
        assert_eq!(aws.spot.map(|m| m.0), Some(2_465_500));
    }
}
