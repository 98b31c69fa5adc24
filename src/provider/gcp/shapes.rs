//! GCP machine types in the catalog's naming. The bundled catalog (`catalog::skypilot`) names
//! a GPU offering by its host machine type, with the GPUs added for N1 hosts, which take
//! several GPU models (`n1-highmem-8+T4x1`); accelerator-optimised types imply their GPUs
//! (`a2-highgpu-1g` is one A100). This module goes both ways: from an instance template's
//! machine type and accelerators to that name, and from the name to the host's vCPUs, memory
//! and GPUs, which is what the Billing catalog's per-vCPU, per-GiB and per-GPU SKUs price.

use crate::catalog::skypilot::{GcpHost, N1_FAMILIES, N1_MEMORY_PER_VCPU, gcp_host};

/// A machine series as Cloud Billing describes its vCPU and memory SKUs
/// (`N1 Predefined Instance Core running in Americas`, `A2 Instance Ram running in ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    N1,
    A2,
    A3,
    A4,
    G2,
}

impl Series {
    /// The SKU description before ` Core` / ` Ram`, lowercase.
    pub fn sku_prefix(self) -> &'static str {
        match self {
            Self::N1 => "n1 predefined instance",
            Self::A2 => "a2 instance",
            Self::A3 => "a3 instance",
            Self::A4 => "a4 instance",
            Self::G2 => "g2 instance",
        }
    }
}

/// A priced unit: the host's vCPUs and memory, and its GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub instance_type: String,
    pub machine_type: String,
    pub series: Series,
    pub vcpus: f64,
    pub memory_gib: f64,
    /// The GPU's catalog name (`T4`, `A100-80GB`, `H100-MEGA`).
    pub gpu: &'static str,
    pub gpus: u32,
}

/// Compute Engine accelerator types and the catalog's names for them.
const ACCELERATORS: &[(&str, &str)] = &[
    ("nvidia-tesla-t4", "T4"),
    ("nvidia-tesla-v100", "V100"),
    ("nvidia-tesla-p100", "P100"),
    ("nvidia-tesla-p4", "P4"),
    ("nvidia-tesla-a100", "A100"),
    ("nvidia-a100-80gb", "A100-80GB"),
    ("nvidia-l4", "L4"),
    ("nvidia-h100-80gb", "H100"),
    ("nvidia-h100-mega-80gb", "H100-MEGA"),
    ("nvidia-h200-141gb", "H200"),
    ("nvidia-b200", "B200"),
];

/// The catalog's GPU name of an accelerator type (a name or a URL ending in one).
pub fn gpu_of_accelerator(accelerator_type: &str) -> Option<&'static str> {
    let name = accelerator_type
        .rsplit('/')
        .next()
        .unwrap_or(accelerator_type);
    ACCELERATORS
        .iter()
        .find(|(a, _)| *a == name)
        .map(|(_, gpu)| *gpu)
}

/// The catalog's instance type for a machine type with these attached accelerators.
pub fn catalog_type(machine_type: &str, accelerators: &[(String, u32)]) -> String {
    let machine_type = machine_type.rsplit('/').next().unwrap_or(machine_type);
    if !machine_type.starts_with("n1-") {
        return machine_type.to_string();
    }
    match accelerators.iter().find(|(_, n)| *n > 0) {
        Some((accelerator, count)) => {
            let gpu = gpu_of_accelerator(accelerator).map_or_else(
                || {
                    accelerator
                        .rsplit('/')
                        .next()
                        .unwrap_or(accelerator)
                        .to_string()
                },
                str::to_string,
            );
            format!("{machine_type}+{gpu}x{count}")
        }
        None => machine_type.to_string(),
    }
}

/// The shape of a catalog instance type; `None` for names this module cannot price.
pub fn shape(instance_type: &str) -> Option<Shape> {
    let (machine_type, n1_gpus) = match instance_type.split_once('+') {
        Some((host, gpus)) => (host, Some(gpus)),
        None => (instance_type, None),
    };
    let (family, size) = machine_type.rsplit_once('-')?;
    let shape = |series, vcpus: f64, memory_gib: f64, gpu, gpus| Shape {
        instance_type: instance_type.to_string(),
        machine_type: machine_type.to_string(),
        series,
        vcpus,
        memory_gib,
        gpu,
        gpus,
    };
    let gpus_of = |size: &str| size.strip_suffix('g').and_then(|n| n.parse::<u32>().ok());
    match family {
        "n1-standard" | "n1-highmem" | "n1-highcpu" => {
            let vcpus: u32 = size.parse().ok()?;
            if !N1_SIZES.contains(&vcpus) {
                return None;
            }
            let per_vcpu = match family {
                "n1-standard" => 3.75,
                "n1-highmem" => 6.5,
                _ => 0.9,
            };
            let (gpu, count) = n1_gpus?.split_once('x')?;
            let gpu = ACCELERATORS.iter().map(|(_, g)| *g).find(|g| *g == gpu)?;
            // Compute Engine states memory in whole MiB (n1-highcpu-16: 14746 MiB).
            let memory_gib = (f64::from(vcpus) * per_vcpu * 1024.0).round() / 1024.0;
            Some(shape(
                Series::N1,
                f64::from(vcpus),
                memory_gib,
                gpu,
                count.parse().ok()?,
            ))
        }
        _ if n1_gpus.is_some() => None,
        "a2-highgpu" => gpus_of(size).filter(|n| [1, 2, 4, 8].contains(n)).map(|n| {
            shape(
                Series::A2,
                12.0 * f64::from(n),
                85.0 * f64::from(n),
                "A100",
                n,
            )
        }),
        "a2-megagpu" if size == "16g" => Some(shape(Series::A2, 96.0, 1360.0, "A100", 16)),
        "a2-ultragpu" => gpus_of(size).filter(|n| [1, 2, 4, 8].contains(n)).map(|n| {
            shape(
                Series::A2,
                12.0 * f64::from(n),
                170.0 * f64::from(n),
                "A100-80GB",
                n,
            )
        }),
        "a3-highgpu" => gpus_of(size).filter(|n| [1, 2, 4, 8].contains(n)).map(|n| {
            shape(
                Series::A3,
                26.0 * f64::from(n),
                234.0 * f64::from(n),
                "H100",
                n,
            )
        }),
        "a3-megagpu" if size == "8g" => Some(shape(Series::A3, 208.0, 1872.0, "H100-MEGA", 8)),
        "a3-ultragpu" if size == "8g" => Some(shape(Series::A3, 224.0, 2952.0, "H200", 8)),
        "a4-highgpu" if size == "8g" => Some(shape(Series::A4, 224.0, 3968.0, "B200", 8)),
        "g2-standard" => {
            let vcpus: u32 = size.parse().ok()?;
            let l4 = match vcpus {
                4 | 8 | 12 | 16 | 32 => 1,
                24 => 2,
                48 => 4,
                96 => 8,
                _ => return None,
            };
            Some(shape(
                Series::G2,
                f64::from(vcpus),
                4.0 * f64::from(vcpus),
                "L4",
                l4,
            ))
        }
        _ => None,
    }
}

/// N1 predefined sizes, vCPUs.
const N1_SIZES: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 96];

/// GPU models and the counts each comes in on one VM.
const GPU_COUNTS: &[(&str, &[u32])] = &[
    ("T4", &[1, 2, 4]),
    ("V100", &[1, 2, 4, 8]),
    ("P100", &[1, 2, 4]),
    ("P4", &[1, 2, 4]),
    ("A100", &[1, 2, 4, 8, 16]),
    ("A100-80GB", &[1, 2, 4, 8]),
    ("L4", &[1, 2, 4, 8]),
    ("H100", &[1, 2, 4, 8]),
    ("H100-MEGA", &[8]),
    ("H200", &[8]),
    ("B200", &[8]),
];

/// Every GPU offering the bundled catalog can name, for a refresh given no instance types:
/// per GPU model and count, the hosts `catalog::skypilot` picks from (the fixed machine
/// types, or every N1 size with enough vCPUs and memory). The catalog takes the cheapest of
/// each group, and so does the refresh, with the prices it reads.
pub fn candidate_groups() -> Vec<Vec<Shape>> {
    let mut groups = Vec::new();
    for (gpu, counts) in GPU_COUNTS {
        for &n in *counts {
            let names: Vec<String> = match gcp_host(gpu, n) {
                Some(GcpHost::Fixed(types)) => types.iter().map(|t| t.to_string()).collect(),
                Some(GcpHost::N1 { vcpus }) => N1_FAMILIES
                    .iter()
                    .flat_map(|family| N1_SIZES.iter().map(move |size| format!("{family}{size}")))
                    .map(|host| format!("{host}+{gpu}x{n}"))
                    .filter(|name| {
                        shape(name).is_some_and(|s| {
                            s.vcpus >= vcpus && s.memory_gib >= vcpus * N1_MEMORY_PER_VCPU
                        })
                    })
                    .collect(),
                None => Vec::new(),
            };
            let group: Vec<Shape> = names.iter().filter_map(|t| shape(t)).collect();
            if !group.is_empty() {
                groups.push(group);
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_their_catalog_type() {
        let t4 = [("nvidia-tesla-t4".to_string(), 4)];
        assert_eq!(catalog_type("n1-highmem-32", &t4), "n1-highmem-32+T4x4");
        let url = [(
            "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/acceleratorTypes/nvidia-tesla-v100"
                .to_string(),
            1,
        )];
        assert_eq!(
            catalog_type("zones/us-central1-a/machineTypes/n1-highmem-8", &url),
            "n1-highmem-8+V100x1"
        );
        assert_eq!(catalog_type("a2-highgpu-1g", &[]), "a2-highgpu-1g");
        assert_eq!(
            catalog_type("g2-standard-24", &[("nvidia-l4".into(), 2)]),
            "g2-standard-24"
        );
        assert_eq!(catalog_type("n1-standard-4", &[]), "n1-standard-4");
    }

    #[test]
    fn shapes_match_the_bundled_host_rows() {
        // vCPUs and GiB as catalog/gcp/vms.csv lists the hosts.
        for (name, vcpus, gib, gpu, n) in [
            ("n1-highmem-8+T4x1", 8.0, 52.0, "T4", 1),
            ("n1-highmem-64+V100x8", 64.0, 416.0, "V100", 8),
            ("a2-highgpu-8g", 96.0, 680.0, "A100", 8),
            ("a2-megagpu-16g", 96.0, 1360.0, "A100", 16),
            ("a2-ultragpu-2g", 24.0, 340.0, "A100-80GB", 2),
            ("a3-highgpu-4g", 104.0, 936.0, "H100", 4),
            ("a3-megagpu-8g", 208.0, 1872.0, "H100-MEGA", 8),
            ("a3-ultragpu-8g", 224.0, 2952.0, "H200", 8),
            ("a4-highgpu-8g", 224.0, 3968.0, "B200", 8),
            ("g2-standard-48", 48.0, 192.0, "L4", 4),
            ("g2-standard-12", 12.0, 48.0, "L4", 1),
        ] {
            let s = shape(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(
                (s.vcpus, s.memory_gib, s.gpu, s.gpus),
                (vcpus, gib, gpu, n),
                "{name}"
            );
        }
        assert_eq!(
            shape("n1-highmem-8").map(|s| s.gpus),
            None,
            "an N1 host alone is no GPU offering"
        );
        assert_eq!(shape("a2-highgpu-3g"), None);
        assert_eq!(shape("g2-standard-24+L4x2"), None);
        assert_eq!(shape("c3-standard-8"), None);
    }

    #[test]
    fn candidates_are_the_hosts_the_bundled_catalog_picks_from() {
        let groups = candidate_groups();
        let names = |i: usize| -> Vec<&str> {
            groups[i].iter().map(|s| s.instance_type.as_str()).collect()
        };
        // One T4 wants 4 vCPUs and 16 GiB: not n1-standard-4 (15 GiB) or any n1-highcpu of
        // up to 16 vCPUs.
        let one_t4 = names(0);
        assert!(one_t4.contains(&"n1-highmem-4+T4x1"), "{one_t4:?}");
        assert!(one_t4.contains(&"n1-standard-8+T4x1"), "{one_t4:?}");
        assert!(!one_t4.contains(&"n1-standard-4+T4x1"), "{one_t4:?}");
        assert!(!one_t4.contains(&"n1-highcpu-16+T4x1"), "{one_t4:?}");
        let l4: Vec<&str> = groups
            .iter()
            .find(|g| g[0].gpu == "L4")
            .unwrap()
            .iter()
            .map(|s| s.instance_type.as_str())
            .collect();
        assert_eq!(
            l4,
            [
                "g2-standard-4",
                "g2-standard-8",
                "g2-standard-12",
                "g2-standard-16",
                "g2-standard-32"
            ]
        );
        assert!(groups.iter().all(|g| !g.is_empty()));
        assert_eq!(
            shape("n1-highcpu-16+T4x1").map(|s| s.memory_gib),
            Some(14.400390625)
        );
    }
}
