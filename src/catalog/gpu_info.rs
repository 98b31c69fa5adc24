//! The `GpuInfo` column: a Python dict literal such as
//! `{'Gpus': [{'Name': 'A100', 'Count': 8, 'MemoryInfo': {'SizeInMiB': 40960}}], ...}`.
//!
//! Only the per-GPU memory is taken from it. It is a Python literal, not JSON, and clouds fill
//! it differently (Azure puts only a name here, Lambda's total is really per-GPU), so the first
//! `SizeInMiB` -- which is always inside the first GPU entry -- is the one fact read.

/// Per-GPU memory in MiB, when the column states it.
pub fn per_gpu_memory_mib(gpu_info: &str) -> Option<f64> {
    let rest = &gpu_info[gpu_info.find("'SizeInMiB'")? + "'SizeInMiB'".len()..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    // A run of 400 digits parses to infinity, which is no size at all.
    rest[..end]
        .parse::<f64>()
        .ok()
        .filter(|m| m.is_finite() && *m > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_gpu_memory_size() {
        let aws = "{'Gpus': [{'Name': 'A100', 'Manufacturer': 'NVIDIA', 'Count': 8, 'MemoryInfo': {'SizeInMiB': 40960}}], 'TotalGpuMemoryInMiB': 327680}";
        assert_eq!(per_gpu_memory_mib(aws), Some(40960.0));
        assert_eq!(
            per_gpu_memory_mib("{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}"),
            Some(81920.0)
        );
    }

    #[test]
    fn gives_nothing_for_a_bare_name_or_garbage() {
        assert_eq!(per_gpu_memory_mib("V100"), None);
        assert_eq!(per_gpu_memory_mib(""), None);
        assert_eq!(per_gpu_memory_mib("{'SizeInMiB': x}"), None);
        let huge = format!("{{'SizeInMiB': {}}}", "9".repeat(400));
        assert_eq!(per_gpu_memory_mib(&huge), None);
    }
}
