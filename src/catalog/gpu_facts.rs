//! GPU datasheet facts: the bundled `catalog/gpus.csv` and per-GPU memory for catalog rows that
//! do not state it.

use crate::core::catalog::GpuFacts;

/// The bundled datasheet table (see `catalog/SOURCE.md`).
pub const BUNDLED_GPUS_CSV: &str = include_str!("../../catalog/gpus.csv");

#[derive(Debug, serde::Deserialize)]
struct GpuRow {
    name: String,
    variant: String,
    memory_gib: f64,
    memory_bandwidth_gbps: f64,
    fp16_bf16_dense_tflops: f64,
    bf16_supported: bool,
    fp32_tflops: f64,
    gpu_link_gbps: f64,
    tdp_w: f64,
}

/// Parses a GPU facts table with the columns of `catalog/gpus.csv`.
pub fn parse_gpu_facts(text: &str) -> Result<Vec<GpuFacts>, csv::Error> {
    csv::Reader::from_reader(text.as_bytes())
        .deserialize::<GpuRow>()
        .map(|row| {
            row.map(|r| GpuFacts {
                name: r.name,
                variant: r.variant,
                memory_gib: r.memory_gib,
                memory_bandwidth_gbps: r.memory_bandwidth_gbps,
                fp16_bf16_dense_tflops: r.fp16_bf16_dense_tflops,
                bf16_supported: r.bf16_supported,
                fp32_tflops: r.fp32_tflops,
                gpu_link_gbps: r.gpu_link_gbps,
                tdp_w: r.tdp_w,
            })
        })
        .collect()
}

/// Per-GPU memory in GiB by accelerator name, for rows (Azure's) whose `GpuInfo` holds only
/// the name. Datasheet values; the older and AMD parts are not in `gpus.csv`.
pub fn memory_gib_by_name(name: &str) -> Option<f64> {
    let gib = match name {
        "V100" | "T4" | "MI25" | "P100" => 16.0,
        "V100-32GB" => 32.0,
        "A10" | "A10G" | "L4" => 24.0,
        "L40S" | "A6000" | "RTXA6000" => 48.0,
        "RTX6000" => 24.0,
        "GH200" => 96.0,
        "A100" => 40.0,
        "A100-80GB" | "H100" | "H100-MEGA" => 80.0,
        "H200" => 141.0,
        "B200" => 180.0,
        "MI300X" => 192.0,
        "M60" | "P4" => 8.0,
        "K80" => 12.0,
        _ => return None,
    };
    Some(gib)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_table_has_the_models_the_service_promises() {
        let gpus = parse_gpu_facts(BUNDLED_GPUS_CSV).unwrap();
        for name in [
            "V100",
            "V100-32GB",
            "T4",
            "A10G",
            "A10",
            "L4",
            "L40S",
            "A100",
            "A100-80GB",
            "H100",
            "H200",
            "B200",
            "P100",
            "K80",
            "A6000",
            "RTXA6000",
            "RTX6000",
            "GH200",
        ] {
            assert!(gpus.iter().any(|g| g.name == name), "{name} missing");
        }
        let h100 = gpus.iter().find(|g| g.name == "H100").unwrap();
        assert_eq!(
            (
                h100.memory_gib,
                h100.fp16_bf16_dense_tflops,
                h100.fp32_tflops
            ),
            (80.0, 989.0, 67.0)
        );
        let v100 = gpus.iter().find(|g| g.name == "V100").unwrap();
        assert!(!v100.bf16_supported);
    }
}
