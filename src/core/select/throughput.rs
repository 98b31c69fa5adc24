//! How fast one shape trains the job at one node count: measured where the job's workload
//! was benchmarked on the GPU model, else estimated from the datasheet, else (for a job
//! that states no work) unknown. Also the job's total FLOPs for its profile.

use super::Basis;
use crate::core::benchmark::{Benchmark, measured_samples_per_sec};
use crate::core::catalog::{CatalogSnapshot, GpuFacts, Interconnect, Offering};
use crate::core::estimate::{
    Estimate, Roofline, Setup, estimate, estimate_on, fabric_per_doubling,
};
use crate::core::job::{Job, Work};

/// The throughput of one shape at one node count, before markets.
#[derive(Debug, Clone, Copy)]
pub(super) struct Throughput<'a> {
    pub basis: Basis<'a>,
    pub rate: Option<f64>,
    pub unit: &'static str,
    /// Hours of the run itself, when the amount of work is known.
    pub run_hours: Option<f64>,
}

/// Why the job's work cannot be estimated on a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unestimated {
    /// Work in samples, datasheet facts only, and no FLOPs per sample to convert.
    NeedsFlopsPerSample,
    Otherwise,
}

/// The datasheet estimate of a reference GPU running alone, for work given in reference
/// hours.
fn reference_estimate(job: &Job, catalog: &CatalogSnapshot, gpu: &str) -> Option<Estimate> {
    let facts = catalog.gpu(gpu)?;
    estimate(
        job.model_size().0,
        Setup {
            facts,
            precision: job.precision,
            gpus_per_node: 1,
            nodes: 1,
            interconnect: Interconnect::None,
        },
        job.utilisation,
    )
}

/// Throughput in the work's unit, and the run's hours when the amount of work is known.
fn work_rate(
    job: &Job,
    effective_tflops: f64,
    catalog: &CatalogSnapshot,
) -> Option<(f64, &'static str, Option<f64>)> {
    let flops_per_sec = effective_tflops * 1e12;
    Some(match &job.work {
        Work::Samples {
            total,
            flops_per_sample,
        } => {
            let rate = flops_per_sec / (*flops_per_sample)?;
            (rate, "samples_per_sec", Some(total / rate / 3600.0))
        }
        Work::Tokens { tokens, params } => {
            let rate = flops_per_sec / (6.0 * params);
            (rate, "tokens_per_sec", Some(tokens / rate / 3600.0))
        }
        Work::ReferenceHours { hours, gpu } => {
            let reference = reference_estimate(job, catalog, gpu)?.effective_tflops(1.0);
            let rate = effective_tflops / reference;
            (rate, "reference_gpus", Some(hours / rate))
        }
        Work::Unknown => (effective_tflops, "effective_tflops", None),
    })
}

/// Total FLOPs of the job's work, when it can be told.
pub(super) fn total_flops(job: &Job, catalog: &CatalogSnapshot) -> Option<f64> {
    match &job.work {
        Work::Samples {
            total,
            flops_per_sample,
        } => Some(total * (*flops_per_sample)?),
        Work::Tokens { tokens, params } => Some(6.0 * params * tokens),
        Work::ReferenceHours { hours, gpu } => Some(
            hours * 3600.0 * reference_estimate(job, catalog, gpu)?.effective_tflops(1.0) * 1e12,
        ),
        Work::Unknown => None,
    }
}

/// Measured throughput where the job's workload was measured on this GPU model, else the
/// datasheet estimate, else (for a job with no work) unknown. `roofline` is the GPU's at the
/// job's precision, from the snapshot.
pub(super) fn throughput<'a>(
    catalog: &'a CatalogSnapshot,
    job: &Job,
    o: &Offering,
    facts: Option<&GpuFacts>,
    roofline: Option<Roofline>,
    measured_workload: Option<&str>,
    nodes: u32,
) -> Result<Throughput<'a>, Unestimated> {
    let params = job.model_size().0;
    let gpus_per_node = o.spec.gpu_count as u32;
    let setup = |facts, gpus_per_node, nodes| Setup {
        facts,
        precision: job.precision,
        gpus_per_node,
        nodes,
        interconnect: o.spec.interconnect,
    };
    // With a single measured size, the datasheet model's scaling (or the fabric's) carries
    // it to other sizes.
    let fallback = |base: &Benchmark| match facts {
        Some(f) => {
            let to = estimate(params, setup(f, gpus_per_node, nodes), None);
            let from = estimate(params, setup(f, base.gpus, base.nodes), None);
            match (to, from) {
                (Some(to), Some(from)) if from.scaling > 0.0 => to.scaling / from.scaling,
                _ => 1.0,
            }
        }
        None => fabric_per_doubling(o.spec.interconnect).powf(
            (f64::from(nodes) / f64::from(base.nodes.max(1)))
                .log2()
                .max(0.0),
        ),
    };
    if let Some(m) =
        measured_workload.and_then(|w| measured_samples_per_sec(catalog, w, o, nodes, fallback))
    {
        let run_hours = match &job.work {
            Work::Samples { total, .. } => Some(total / m.samples_per_sec / 3600.0),
            _ => None,
        };
        return Ok(Throughput {
            basis: Basis::Measured {
                how: m.how,
                baseline: m.baseline,
                efficiency: m.efficiency,
            },
            rate: Some(m.samples_per_sec),
            unit: "samples_per_sec",
            run_hours,
        });
    }
    match facts {
        Some(f) => {
            let roofline = roofline.ok_or(Unestimated::Otherwise)?;
            let e = estimate_on(
                roofline,
                params,
                setup(f, gpus_per_node, nodes),
                job.utilisation,
            );
            let gpus = f64::from(gpus_per_node) * f64::from(nodes);
            let Some((rate, unit, run_hours)) = work_rate(job, e.effective_tflops(gpus), catalog)
            else {
                return Err(if matches!(job.work, Work::Samples { .. }) {
                    Unestimated::NeedsFlopsPerSample
                } else {
                    Unestimated::Otherwise
                });
            };
            Ok(Throughput {
                basis: Basis::Datasheet(e),
                rate: Some(rate),
                unit,
                run_hours,
            })
        }
        None if matches!(job.work, Work::Unknown) => Ok(Throughput {
            basis: Basis::Unknown,
            rate: None,
            unit: "effective_tflops",
            run_hours: None,
        }),
        None => Err(Unestimated::Otherwise),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::test_support::{a100_facts, p4d};

    fn offering() -> Offering {
        p4d()
            .at("lambda", "us-east-1")
            .instance_type("gpu_1x_a100")
            .gpus("A100", 1.0, 40.0)
            .host(30.0, 200.0)
            .fabric(Interconnect::None, None)
            .build()
    }

    #[test]
    fn tokens_on_a_datasheet_run_at_six_flops_per_parameter_and_token() {
        let catalog = CatalogSnapshot::new(Vec::new(), vec![a100_facts()], vec![offering()]);
        let job = Job {
            work: Work::Tokens {
                tokens: 1e9,
                params: 1e8,
            },
            ..Job::default()
        };
        let facts = a100_facts();
        let roofline = Roofline::of(&facts, job.precision);
        let t = throughput(&catalog, &job, &offering(), Some(&facts), roofline, None, 1)
            .expect("estimated");
        let Basis::Datasheet(e) = t.basis else {
            panic!("a datasheet estimate");
        };
        let rate = e.effective_tflops(1.0) * 1e12 / 6e8;
        assert!((t.rate.expect("a rate") - rate).abs() < 1e-6 * rate);
        assert_eq!(t.unit, "tokens_per_sec");
        let hours = t.run_hours.expect("hours");
        assert!((hours - 1e9 / rate / 3600.0).abs() < 1e-9 * hours);
        assert_eq!(total_flops(&job, &catalog), Some(6.0 * 1e8 * 1e9));
    }

    #[test]
    fn samples_need_flops_per_sample_and_unknown_work_needs_nothing() {
        let catalog = CatalogSnapshot::new(Vec::new(), vec![a100_facts()], vec![offering()]);
        let facts = a100_facts();
        let samples = Job {
            work: Work::Samples {
                total: 1e6,
                flops_per_sample: None,
            },
            ..Job::default()
        };
        let roofline = Roofline::of(&facts, samples.precision);
        let t = throughput(
            &catalog,
            &samples,
            &offering(),
            Some(&facts),
            roofline,
            None,
            1,
        );
        assert_eq!(t.map(|_| ()), Err(Unestimated::NeedsFlopsPerSample));
        assert_eq!(total_flops(&samples, &catalog), None);
        let unknown = throughput(&catalog, &Job::default(), &offering(), None, None, None, 1)
            .expect("unknown work is ranked by price");
        assert!(matches!(unknown.basis, Basis::Unknown));
        assert_eq!((unknown.rate, unknown.run_hours), (None, None));
        let tokens = Job {
            work: Work::Tokens {
                tokens: 1e9,
                params: 1e8,
            },
            ..Job::default()
        };
        let t = throughput(&catalog, &tokens, &offering(), None, None, None, 1);
        assert_eq!(t.map(|_| ()), Err(Unestimated::Otherwise));
    }
}
