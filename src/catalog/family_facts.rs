//! Facts the SkyPilot CSVs lack -- network bandwidth, fast interconnect, local NVMe -- filled
//! in per instance type or family from what each provider documents.
//!
//! Sources, per provider:
//! - AWS: `catalog/aws/instance_details.csv` (per type, from instances.vantage.sh via
//!   `tsaol/aws-gpu`), plus the EC2 User Guide's list of instance types that support EFA
//!   ("Supported instance types" under Elastic Fabric Adapter), which also covers g4dn, g5,
//!   g6, g6e and p3dn sizes whose network column does not say EFA.
//! - GCP: the Compute Engine "GPU machine types" page (A2, A3, A4, G2 tables: NIC bandwidth,
//!   bundled Local SSD, GPUDirect-TCPX/TCPXO on A3 High/Mega, GPUDirect RDMA over RoCE on
//!   A3 Ultra/A4).
//! - Azure: the VM size naming convention (`r` = RDMA/InfiniBand capable) and the ND-series
//!   pages (ND A100 v4, ND H100 v5, ND H200 v5, ND MI300X v5: 8 InfiniBand links per VM).
//! - Nebius: GPU platform docs -- 8-GPU H100/H200/B200 VMs join InfiniBand GPU clusters.
//! - Lambda, Vast: no fabric documented for on-demand instances.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::core::catalog::Interconnect;

/// The network, fabric and local storage facts of one instance type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FamilyFacts {
    pub network_gbps: Option<f64>,
    pub interconnect: Interconnect,
    pub local_nvme_gb: Option<f64>,
}

const UNKNOWN: FamilyFacts = FamilyFacts {
    network_gbps: None,
    interconnect: Interconnect::None,
    local_nvme_gb: None,
};

/// Facts for `instance_type` of `provider`; unknown fields stay `None`.
pub fn facts(provider: &str, instance_type: &str) -> FamilyFacts {
    match provider {
        "aws" => aws(instance_type),
        "gcp" => gcp(instance_type),
        "azure" => azure(instance_type),
        "nebius" => nebius(instance_type),
        _ => UNKNOWN,
    }
}

const AWS_INSTANCE_DETAILS_CSV: &str = include_str!("../../catalog/aws/instance_details.csv");

static AWS_DETAILS: LazyLock<HashMap<String, FamilyFacts>> = LazyLock::new(|| {
    let mut reader = csv::Reader::from_reader(AWS_INSTANCE_DETAILS_CSV.as_bytes());
    reader
        .records()
        .filter_map(Result::ok)
        .map(|r| {
            let network = r.get(1).unwrap_or_default();
            let storage = r.get(2).unwrap_or_default();
            let facts = FamilyFacts {
                network_gbps: parse_aws_network_gbps(network),
                interconnect: if network.contains("EFA") {
                    Interconnect::Efa
                } else {
                    Interconnect::None
                },
                local_nvme_gb: parse_aws_storage_gb(storage),
            };
            (r.get(0).unwrap_or_default().to_string(), facts)
        })
        .collect()
});

/// Types whose EFA support the EC2 User Guide lists although the network column omits it.
const AWS_EFA_TYPES: &[&str] = &[
    "p3dn.24xlarge",
    "g4dn.8xlarge",
    "g4dn.12xlarge",
    "g4dn.16xlarge",
    "g4dn.metal",
    "g5.8xlarge",
    "g5.12xlarge",
    "g5.16xlarge",
    "g5.24xlarge",
    "g5.48xlarge",
    "g6.8xlarge",
    "g6.12xlarge",
    "g6.16xlarge",
    "g6.24xlarge",
    "g6.48xlarge",
    "g6e.8xlarge",
    "g6e.12xlarge",
    "g6e.16xlarge",
    "g6e.24xlarge",
    "g6e.48xlarge",
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
];

fn aws(instance_type: &str) -> FamilyFacts {
    let mut facts = AWS_DETAILS
        .get(instance_type)
        .copied()
        .unwrap_or(match instance_type {
            // Not in the details table; figures from the EC2 accelerated-computing pages.
            "p6-b200.48xlarge" | "p6-b300.48xlarge" => FamilyFacts {
                network_gbps: Some(3200.0),
                interconnect: Interconnect::Efa,
                local_nvme_gb: Some(8.0 * 3840.0),
            },
            _ => UNKNOWN,
        });
    if AWS_EFA_TYPES.contains(&instance_type) {
        facts.interconnect = Interconnect::Efa;
    }
    facts
}

/// "400 Gbps EFA" -> 400, "Up to 25 Gigabit" -> 25 (the burst figure), "Moderate" -> unknown.
fn parse_aws_network_gbps(text: &str) -> Option<f64> {
    let text = text.trim_start_matches("Up to ").trim();
    let number: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let value: f64 = number.parse().ok()?;
    let unit = text[number.len()..].trim_start();
    (unit.starts_with("Gigabit") || unit.starts_with("Gbps")).then_some(value)
}

/// "8 x 3.84 TB NVMe SSD" -> 30720, "1200 GB (2 × 600 GB SSD)" -> 1200, "EBS Only" -> 0.
fn parse_aws_storage_gb(text: &str) -> Option<f64> {
    if text.starts_with("EBS") {
        return Some(0.0);
    }
    let mut words = text.split_whitespace();
    let first: f64 = words.next()?.parse().ok()?;
    let (count, size, unit) = match words.next()? {
        "x" | "×" => (first, words.next()?.parse::<f64>().ok()?, words.next()?),
        unit => (1.0, first, unit),
    };
    let per_tb = match unit {
        "TB" => 1000.0,
        "GB" => 1.0,
        _ => return None,
    };
    Some(count * size * per_tb)
}

fn gcp(instance_type: &str) -> FamilyFacts {
    // GCP offerings on n1 hosts are named `<host>+<gpu>x<count>`; the host decides the facts.
    let host = instance_type.split('+').next().unwrap_or(instance_type);
    let (network_gbps, interconnect, local_ssd_gb) = match host {
        "a2-highgpu-1g" | "a2-ultragpu-1g" => (24.0, Interconnect::None, None),
        "a2-highgpu-2g" | "a2-ultragpu-2g" => (32.0, Interconnect::None, None),
        "a2-highgpu-4g" | "a2-ultragpu-4g" => (50.0, Interconnect::None, None),
        "a2-highgpu-8g" | "a2-ultragpu-8g" | "a2-megagpu-16g" => (100.0, Interconnect::None, None),
        "a3-highgpu-1g" => (25.0, Interconnect::None, Some(750.0)),
        "a3-highgpu-2g" => (50.0, Interconnect::None, Some(1500.0)),
        "a3-highgpu-4g" => (100.0, Interconnect::None, Some(3000.0)),
        "a3-highgpu-8g" => (1000.0, Interconnect::GpudirectTcpx, Some(6000.0)),
        "a3-megagpu-8g" => (1800.0, Interconnect::GpudirectTcpx, Some(6000.0)),
        "a3-ultragpu-8g" | "a4-highgpu-8g" => (3600.0, Interconnect::Roce, Some(12000.0)),
        "g2-standard-4" => (10.0, Interconnect::None, None),
        "g2-standard-8" | "g2-standard-12" => (16.0, Interconnect::None, None),
        "g2-standard-16" | "g2-standard-24" | "g2-standard-32" => (32.0, Interconnect::None, None),
        "g2-standard-48" => (50.0, Interconnect::None, None),
        "g2-standard-96" => (100.0, Interconnect::None, None),
        _ => return UNKNOWN,
    };
    // A2 Ultra bundles 375 GB Local SSD per GPU; A2 High and G2 attach none by default.
    let local_ssd_gb = local_ssd_gb.or_else(|| {
        let gpus: f64 = host
            .strip_prefix("a2-ultragpu-")?
            .trim_end_matches('g')
            .parse()
            .ok()?;
        Some(375.0 * gpus)
    });
    FamilyFacts {
        network_gbps: Some(network_gbps),
        interconnect,
        local_nvme_gb: local_ssd_gb.or(Some(0.0)),
    }
}

fn azure(instance_type: &str) -> FamilyFacts {
    // ND-series sizes whose pages give the InfiniBand fabric and local NVMe.
    let documented: Option<(f64, f64)> = match instance_type {
        "Standard_ND96asr_v4" | "Standard_ND96amsr_A100_v4" => Some((1600.0, 6500.0 * 1.074)),
        "Standard_ND96isr_H100_v5" | "Standard_ND96isr_H200_v5" | "Standard_ND96isr_MI300X_v5" => {
            Some((3200.0, 28000.0 * 1.074))
        }
        _ => None,
    };
    if let Some((ib_gbps, nvme_gb)) = documented {
        return FamilyFacts {
            network_gbps: Some(ib_gbps),
            interconnect: Interconnect::Infiniband,
            local_nvme_gb: Some(nvme_gb.round()),
        };
    }
    // Standard_<family><vcpus><features>[_<accelerator>]_<version>: `r` in the features marks
    // an RDMA (InfiniBand) capable size.
    let name = instance_type
        .strip_prefix("Standard_")
        .unwrap_or(instance_type);
    let size = name.split('_').next().unwrap_or(name);
    let features: String = size
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .to_string();
    FamilyFacts {
        interconnect: if features.contains('r') {
            Interconnect::Infiniband
        } else {
            Interconnect::None
        },
        ..UNKNOWN
    }
}

fn nebius(instance_type: &str) -> FamilyFacts {
    if instance_type.contains("_8gpu-") {
        FamilyFacts {
            // 8 × 400 Gbit/s NDR InfiniBand per 8-GPU VM.
            network_gbps: Some(3200.0),
            interconnect: Interconnect::Infiniband,
            local_nvme_gb: None,
        }
    } else {
        UNKNOWN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_p4d_has_efa_400_gbps_and_8_tb_of_nvme() {
        let f = facts("aws", "p4d.24xlarge");
        assert_eq!(f.interconnect, Interconnect::Efa);
        assert_eq!(f.network_gbps, Some(400.0));
        assert_eq!(f.local_nvme_gb, Some(8000.0));
    }

    #[test]
    fn aws_g5_48xlarge_has_efa_from_the_user_guide_list() {
        let f = facts("aws", "g5.48xlarge");
        assert_eq!(f.interconnect, Interconnect::Efa);
        assert_eq!(f.network_gbps, Some(100.0));
        assert_eq!(f.local_nvme_gb, Some(3800.0));
        assert_eq!(facts("aws", "g5.xlarge").interconnect, Interconnect::None);
    }

    #[test]
    fn aws_storage_and_network_texts_parse() {
        assert_eq!(parse_aws_storage_gb("8 x 3.84 TB NVMe SSD"), Some(30720.0));
        assert_eq!(
            parse_aws_storage_gb("1200 GB (2 × 600 GB SSD)"),
            Some(1200.0)
        );
        assert_eq!(parse_aws_storage_gb("EBS Only"), Some(0.0));
        assert_eq!(parse_aws_network_gbps("Up to 25 Gigabit"), Some(25.0));
        assert_eq!(parse_aws_network_gbps("3200 Gbps EFAv2"), Some(3200.0));
        assert_eq!(parse_aws_network_gbps("Moderate"), None);
    }

    #[test]
    fn azure_rdma_sizes_are_infiniband() {
        assert_eq!(
            facts("azure", "Standard_NC24rs_v3").interconnect,
            Interconnect::Infiniband
        );
        assert_eq!(
            facts("azure", "Standard_NC24s_v3").interconnect,
            Interconnect::None
        );
        assert_eq!(
            facts("azure", "Standard_NC24ads_A100_v4").interconnect,
            Interconnect::None
        );
        assert_eq!(
            facts("azure", "Standard_ND96asr_v4").network_gbps,
            Some(1600.0)
        );
    }

    #[test]
    fn gcp_a3_mega_uses_tcpxo_and_a2_ultra_bundles_local_ssd() {
        assert_eq!(
            facts("gcp", "a3-megagpu-8g").interconnect,
            Interconnect::GpudirectTcpx
        );
        assert_eq!(facts("gcp", "a2-ultragpu-8g").local_nvme_gb, Some(3000.0));
        assert_eq!(facts("gcp", "n1-highmem-8+T4x1").network_gbps, None);
    }
}
