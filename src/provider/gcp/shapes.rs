//! GCP machine types in the catalog's naming. The bundled catalog (`catalog::skypilot`) names
//! a GPU offering by its host machine type, with the GPUs added for N1 hosts, which take
//! several GPU models (`n1-highmem-8+T4x1`); accelerator-optimised types imply their GPUs
//! (`a2-highgpu-1g` is one A100). This module goes both ways: from an instance template's
//! machine type and accelerators to that name, and from the name to the host's vCPUs, memory
//! and GPUs, which is what the Billing catalog's per-vCPU, per-GiB and per-GPU SKUs price.

use crate::catalog::skypilot::gcp_host;

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
            let per_vcpu = match family {
                "n1-standard" => 3.75,
                "n1-highmem" => 6.5,
                _ => 0.9,
            };
            let (gpu, count) = n1_gpus?.split_once('x')?;
            let gpu = ACCELERATORS.iter().map(|(_, g)| *g).find(|g| *g == gpu)?;
            Some(shape(
                Series::N1,
                f64::from(vcpus),
                f64::from(vcpus) * per_vcpu,
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

/// Every GPU offering the bundled catalog knows how to name, for a refresh that is given no
/// instance types: the GPU counts each model comes in, on the host `gcp_host` picks for it.
pub fn known_gpu_types() -> Vec<String> {
    const COUNTS: &[(&str, &[u32])] = &[
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
    let mut out = Vec::new();
    for (gpu, counts) in COUNTS {
        for &n in *counts {
            if let Some(host) = gcp_host(gpu, n) {
                out.push(if host.starts_with("n1-") {
                    format!("{host}+{gpu}x{n}")
                } else {
                    host
                });
            }
        }
    }
    out
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
    fn every_known_gpu_type_has_a_shape() {
        let all = known_gpu_types();
        assert!(all.contains(&"n1-highmem-16+T4x2".to_string()), "{all:?}");
        assert!(all.contains(&"a3-megagpu-8g".to_string()), "{all:?}");
        for t in &all {
            assert!(shape(t).is_some(), "{t}");
        }
    }
}
