//! The checks that refuse a whole offering, for every node count and market: the request's
//! lists of providers, regions, zones and GPUs, whole GPUs, GPUs per node, local NVMe for
//! small-file data, and something to estimate the time from.

use super::reject::{Detail, Refusal};
use crate::core::catalog::{GpuFacts, Offering};
use crate::core::decision::RejectReason;
use crate::core::estimate::gpu_tflops;
use crate::core::job::{DataLayout, Job, Work};

fn matches_any(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v.eq_ignore_ascii_case(value))
}

/// Whether the offering is sold where the request allows (its regions and zones).
pub(super) fn sold_where_asked(job: &Job, o: &Offering) -> bool {
    matches_any(&job.regions, &o.key.region) && matches_any(&job.zones, &o.key.zone)
}

/// The checks that depend only on the machine: the request's providers and GPUs, whole
/// GPUs, enough of them per node, and local NVMe for many small files.
pub(super) fn machine_allowed(job: &Job, o: &Offering) -> Result<(), Refusal> {
    let refuse = |reason| Err((reason, Detail::None));
    if !(matches_any(&job.providers, &o.key.provider)
        && matches_any(&job.gpus, &o.spec.gpu)
        && (job.exclude_gpus.is_empty() || !matches_any(&job.exclude_gpus, &o.spec.gpu)))
    {
        return refuse(RejectReason::FilteredByConstraint);
    }
    if o.spec.gpu_count < 1.0 {
        return refuse(RejectReason::FractionalGpu);
    }
    if o.spec.gpu_count < job.gpus_per_node_min {
        return refuse(RejectReason::TooFewGpusPerNode);
    }
    // Many small files want the dataset on local NVMe: present, and large enough when the
    // dataset's size is given (GiB to the providers' GB).
    let dataset_gb = job.dataset_gib.unwrap_or(0.0) * 1.073_741_824;
    if job.data_layout == DataLayout::ManySmallFiles
        && o.spec
            .local_nvme_gb
            .is_none_or(|gb| gb <= 0.0 || gb < dataset_gb)
    {
        return refuse(RejectReason::NoLocalNvme);
    }
    Ok(())
}

/// What the time can be estimated from: the datasheet (`None` without facts for the
/// job's precision) and whether the workload was measured on this GPU model.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sources<'a, 'j> {
    pub datasheet: Option<&'a GpuFacts>,
    pub measured_workload: Option<&'j str>,
}

/// Refuses a GPU the job's work cannot be estimated on: facts without the job's precision,
/// or neither facts nor a benchmark for a job that states its work.
pub(super) fn throughput_sources<'a, 'j>(
    job: &Job,
    facts: Option<&'a GpuFacts>,
    measured_workload: Option<&'j str>,
) -> Result<Sources<'a, 'j>, Refusal> {
    let datasheet = facts.filter(|f| gpu_tflops(f, job.precision).is_some());
    if datasheet.is_none() && measured_workload.is_none() {
        if facts.is_some() {
            return Err((RejectReason::PrecisionUnsupported, Detail::NoBf16));
        }
        if !matches!(job.work, Work::Unknown) {
            return Err((RejectReason::NoThroughputData, Detail::NoFacts));
        }
    }
    Ok(Sources {
        datasheet,
        measured_workload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::catalog::Interconnect;
    use crate::core::job::Precision;
    use crate::core::test_support::p4d;

    fn offering(gpu_count: f64, local_nvme_gb: Option<f64>) -> Offering {
        p4d()
            .at("azure", "eastus")
            .instance_type("Standard_NC24ads_A100_v4")
            .gpus("A100-80GB", gpu_count, 80.0)
            .host(24.0, 220.0)
            .fabric(Interconnect::None, None)
            .local_nvme_gb(local_nvme_gb)
            .build()
    }

    fn facts(bf16: bool) -> GpuFacts {
        GpuFacts {
            name: "V100".into(),
            variant: String::new(),
            memory_gib: 16.0,
            memory_bandwidth_gbps: 900.0,
            fp16_bf16_dense_tflops: 125.0,
            bf16_supported: bf16,
            fp32_tflops: 15.7,
            gpu_link_gbps: 300.0,
            tdp_w: 300.0,
        }
    }

    #[test]
    fn lists_match_without_case_and_exclusions_win() {
        let o = offering(1.0, None);
        let job = |providers: &[&str], gpus: &[&str], exclude: &[&str]| Job {
            providers: providers.iter().map(|s| s.to_string()).collect(),
            gpus: gpus.iter().map(|s| s.to_string()).collect(),
            exclude_gpus: exclude.iter().map(|s| s.to_string()).collect(),
            ..Job::default()
        };
        assert_eq!(
            machine_allowed(&job(&["AZURE"], &["a100-80gb"], &[]), &o),
            Ok(())
        );
        let filtered = Err((RejectReason::FilteredByConstraint, Detail::None));
        assert_eq!(machine_allowed(&job(&["aws"], &[], &[]), &o), filtered);
        assert_eq!(
            machine_allowed(&job(&[], &[], &["A100-80GB"]), &o),
            filtered
        );
        let regions = Job {
            regions: vec!["westus".into()],
            ..Job::default()
        };
        assert!(!sold_where_asked(&regions, &o));
        assert!(sold_where_asked(&Job::default(), &o));
    }

    #[test]
    fn slices_of_gpus_small_nodes_and_missing_nvme_are_refused_in_that_order() {
        let many_files = Job {
            data_layout: DataLayout::ManySmallFiles,
            dataset_gib: Some(100.0),
            gpus_per_node_min: 2.0,
            ..Job::default()
        };
        let reason = |o: &Offering| machine_allowed(&many_files, o).map_err(|r| r.0);
        assert_eq!(
            reason(&offering(0.5, None)),
            Err(RejectReason::FractionalGpu)
        );
        assert_eq!(
            reason(&offering(1.0, None)),
            Err(RejectReason::TooFewGpusPerNode)
        );
        // 100 GiB is 107.4 GB: 100 GB of NVMe is not enough.
        assert_eq!(
            reason(&offering(2.0, Some(100.0))),
            Err(RejectReason::NoLocalNvme)
        );
        assert_eq!(reason(&offering(2.0, Some(108.0))), Ok(()));
    }

    #[test]
    fn work_needs_a_datasheet_with_the_precision_or_a_measurement() {
        let tokens = Job {
            work: Work::Tokens {
                tokens: 1e9,
                params: 1e8,
            },
            ..Job::default()
        };
        let no_bf16 = facts(false);
        assert_eq!(
            throughput_sources(&tokens, Some(&no_bf16), None).map(|_| ()),
            Err((RejectReason::PrecisionUnsupported, Detail::NoBf16))
        );
        let fp16 = Job {
            precision: Precision::Fp16,
            ..tokens.clone()
        };
        assert!(
            throughput_sources(&fp16, Some(&no_bf16), None).is_ok_and(|s| s.datasheet.is_some())
        );
        assert_eq!(
            throughput_sources(&tokens, None, None).map(|_| ()),
            Err((RejectReason::NoThroughputData, Detail::NoFacts))
        );
        assert!(throughput_sources(&tokens, None, Some("bert")).is_ok());
        assert!(
            throughput_sources(&Job::default(), None, None).is_ok_and(|s| s.datasheet.is_none())
        );
    }
}
