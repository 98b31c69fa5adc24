//! The words and figures of a selection that people read: each candidate's reasons, the job's
//! profile, the suggestions for a job that fits nowhere, and the assumptions behind the
//! estimates.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::{Basis, NearMisses, Scored};
use crate::core::benchmark::MeasuredHow;
use crate::core::catalog::CatalogSnapshot;
use crate::core::decision::{
    Assumptions, Candidate, MemoryReserve, Profile, ProviderTerms, Suggestion,
    UtilisationAssumption,
};
use crate::core::estimate::{
    self, CEILING_AT_REFERENCE, CEILING_CAP, ETHERNET_EFFICIENCY, FAST_FABRIC_EFFICIENCY,
    FILL_PER_DECADE, FULL_SIZE_AT_REFERENCE, MIN_FILL, PCIE_MULTI_GPU_EFFICIENCY, REFERENCE_RIDGE,
    REFERENCE_TFLOPS, RIDGE_EXPONENT, SMALL_MODEL_LOSS_PER_DOUBLING, TCPX_EFFICIENCY,
};
use crate::core::fixed::fixed;
use crate::core::job::{
    ALLOCATOR_OVERHEAD, CUDA_CONTEXT_GIB, DataLayout, Job, MemoryNeed, Objective, Precision,
    SizeFrom,
};
use crate::core::spot::RateSource;
use crate::core::terms::Billing;
use crate::core::text::{Piece, Shortest, push};

/// A parameter count as people write it: 25M, 1.3B.
struct ParamsText(f64);

impl Piece for ParamsText {
    fn push_to(&self, out: &mut String) {
        let (value, unit) = if self.0 >= 1e9 {
            (self.0 / 1e9, "B")
        } else {
            (self.0 / 1e6, "M")
        };
        let start = out.len();
        push!(out, fixed(value, 2));
        let digits = out[start..]
            .trim_end_matches('0')
            .trim_end_matches('.')
            .len();
        out.truncate(start + digits);
        out.push_str(unit);
    }
}

/// A count and its unit as people write them, singular for one: 1 GPU, 0.5 GPUs, 4 nodes.
struct Count(f64, &'static str);

impl Piece for Count {
    fn push_to(&self, out: &mut String) {
        if self.0 == 1.0 {
            push!(out, "1 ", self.1);
        } else {
            push!(out, Shortest(self.0), " ", self.1, "s");
        }
    }
}

fn gpu_count(count: f64) -> Count {
    Count(count, "GPU")
}

fn node_count(count: u32) -> Count {
    Count(f64::from(count), "node")
}

/// Hours as minutes below two hours, else hours.
struct Hours(f64);

impl Piece for Hours {
    fn push_to(&self, out: &mut String) {
        if self.0 < 2.0 {
            push!(out, fixed(self.0 * 60.0, 1), " min");
        } else {
            push!(out, fixed(self.0, 2), " h");
        }
    }
}

fn ranking_reason(job: &Job, s: &Scored, rank: usize, of: u64, best_key: Option<f64>) -> String {
    let key = super::rank::objective_key(job.objective, &s.standing()).0;
    let mut out = String::with_capacity(96);
    let text = &mut out;
    push!(
        text,
        "rank ",
        rank,
        " of ",
        of,
        " by ",
        job.objective.ranked_by(),
        ": "
    );
    match (job.objective, s.cost, s.hours, s.rate, s.value()) {
        (Objective::Cheapest, Some(c), _, _, _) => push!(text, "estimated cost $", fixed(c, 2)),
        (Objective::Cheapest, None, _, _, _) => push!(
            text,
            "$",
            fixed(s.total_price, 2),
            " per hour (no amount of work given)"
        ),
        (Objective::Fastest, _, Some(h), _, _) => push!(text, "done in ", Hours(h)),
        (Objective::Fastest, _, None, Some(r), _) => {
            push!(text, fixed(r, 1), " ", s.unit, " throughput");
        }
        (Objective::BestValue, _, _, _, Some(v)) => {
            push!(text, fixed(v, 3), " ", s.unit, " per $/h");
        }
        _ => push!(
            text,
            "throughput unknown, ranked after the others by its $",
            fixed(s.total_price, 2),
            " per hour"
        ),
    }
    if let Some(best) = best_key
        && rank > 1
        && key.is_finite()
        && best.is_finite()
    {
        let d = key - best;
        match job.objective {
            Objective::Cheapest if s.cost.is_some() => {
                push!(text, ", $", fixed(d, 2), " more than #1");
            }
            Objective::Cheapest => push!(text, ", $", fixed(d, 2), "/h more than #1"),
            Objective::Fastest if s.hours.is_some() => {
                push!(text, ", ", Hours(d), " later than #1");
            }
            _ => {}
        }
    }
    out
}

fn memory_reason(job: &Job, s: &Scored, gpu_memory_gib: f64) -> String {
    let mut out = String::with_capacity(160);
    let text = &mut out;
    push!(
        text,
        "fits: needs ",
        fixed(s.need, 1),
        " GiB of the ",
        fixed(s.usable, 1),
        " GiB usable per GPU (",
        fixed(gpu_memory_gib, 1),
        " GiB less the CUDA context and allocator overhead); "
    );
    match &job.memory {
        MemoryNeed::Fixed { .. } => push!(text, "as the job states"),
        MemoryNeed::Model { sharding, .. } => match sharding.what_is_split() {
            None => push!(text, "each GPU holds all model states"),
            Some(split) => push!(text, split, " over ", s.degree, " GPUs"),
        },
    }
    out
}

fn throughput_reason(job: &Job, s: &Scored, gpu: &str, gpus: f64) -> String {
    let workload = job.workload.as_deref().unwrap_or_default();
    let mut out = String::with_capacity(224);
    let text = &mut out;
    match s.basis {
        Basis::Measured {
            how: MeasuredHow::Exact,
            ..
        } => push!(
            text,
            "throughput measured: ",
            fixed(s.rate.unwrap_or_default(), 1),
            " samples/s for workload `",
            workload,
            "` on this instance type at this size"
        ),
        Basis::Measured {
            how,
            baseline,
            efficiency,
        } => {
            let per_gpu = baseline.throughput().0 / baseline.total_gpus().max(1) as f64;
            let how = match how {
                MeasuredHow::SameGpuCount => "measured at this GPU count on another instance type",
                MeasuredHow::Interpolated => "interpolated between measured sizes",
                _ => "extrapolated beyond the largest measured size",
            };
            push!(
                text,
                "throughput from measurements of workload `",
                workload,
                "` on ",
                gpu,
                ": ",
                fixed(per_gpu, 1),
                " samples/s per GPU on ",
                baseline.instance_type,
                " (",
                gpu_count(f64::from(baseline.gpus)),
                " × ",
                node_count(baseline.nodes),
                ", the smallest size measured) × ",
                gpu_count(gpus),
                " × ",
                fixed(efficiency, 3),
                " scaling efficiency (",
                how,
                ")"
            );
        }
        Basis::Datasheet(e) => {
            push!(
                text,
                "throughput from datasheet: ",
                Shortest(e.peak_tflops),
                " TFLOPS at ",
                job.precision.as_str(),
                " × "
            );
            if e.overridden {
                push!(
                    text,
                    Shortest(e.utilisation),
                    " utilisation (given by the job)"
                );
            } else {
                push!(
                    text,
                    fixed(e.utilisation, 3),
                    " utilisation (",
                    fixed(e.ceiling, 3),
                    " ceiling × ",
                    fixed(e.fill, 3),
                    " fill for ",
                    ParamsText(job.model_size().0),
                    " parameters)"
                );
            }
            push!(
                text,
                " × ",
                gpu_count(gpus),
                " × ",
                fixed(e.scaling, 3),
                " scaling"
            );
        }
        Basis::Unknown => push!(
            text,
            "throughput unknown: no datasheet facts or benchmark for ",
            gpu,
            ", ranked by price"
        ),
    }
    out
}

/// `billing` is the one the run was billed by: its shape's terms in the snapshot.
fn time_reason(s: &Scored, billing: Billing) -> Option<String> {
    let (hours, billed, cost) = (s.hours?, s.billed_hours?, s.cost?);
    let run = hours - s.startup_min / 60.0;
    let mut out = String::with_capacity(160);
    push!(
        &mut out,
        "time: ",
        Hours(s.startup_min / 60.0),
        " start-up + ",
        Hours(run),
        " run = ",
        Hours(hours),
        "; billed ",
        Hours(billed),
        " per node (",
        Shortest(billing.increment_sec()),
        " s increments, ",
        Shortest(billing.minimum_sec()),
        " s minimum) × $",
        fixed(s.total_price, 2),
        "/h = $",
        fixed(cost, 2)
    );
    Some(out)
}

/// Names, numbers and reasons of one ranked configuration.
pub(super) fn candidate(
    catalog: &CatalogSnapshot,
    job: &Job,
    s: &Scored,
    rank: usize,
    of: u64,
    best_key: Option<f64>,
) -> Candidate {
    let o = &catalog.offerings()[s.position];
    let gpus = o.spec.gpu_count * f64::from(s.nodes);
    let mut reasons = Vec::with_capacity(5);
    reasons.extend([
        ranking_reason(job, s, rank, of, best_key),
        memory_reason(job, s, o.spec.gpu_memory_gib),
        throughput_reason(job, s, &o.spec.gpu, gpus),
    ]);
    reasons.extend(time_reason(s, catalog.terms_of(s.position).billing));
    if let Some((per_hour, source, factor)) = s.spot_rate {
        let origin = match source {
            RateSource::Advisor => "AWS Spot Advisor",
            RateSource::ProviderDefault => "provider default",
        };
        let mut spot = String::with_capacity(128);
        push!(
            &mut spot,
            "spot: ",
            fixed(per_hour, 5),
            " interruptions per node-hour (",
            origin,
            "), ",
            fixed(s.interruptions, 2),
            " expected over the run, run time ×",
            fixed(factor, 4)
        );
        reasons.push(spot);
    }
    let (utilisation, scaling) = match s.basis {
        Basis::Measured { efficiency, .. } => (None, Some(efficiency)),
        Basis::Datasheet(e) => (Some(e.utilisation), Some(e.scaling)),
        Basis::Unknown => (None, None),
    };
    Candidate {
        rank,
        offering_id: o.id,
        provider: o.key.provider.clone(),
        region: o.key.region.clone(),
        zone: (!o.key.zone.is_empty()).then(|| o.key.zone.clone()),
        instance_type: o.key.instance_type.clone(),
        gpu: o.spec.gpu.clone(),
        gpus_per_node: o.spec.gpu_count,
        nodes: s.nodes,
        market: s.market,
        price_per_hour: s.node_price,
        price_per_hour_total: s.total_price,
        throughput: s.rate,
        throughput_unit: s.unit,
        throughput_source: s.source(),
        utilisation,
        scaling_efficiency: scaling,
        startup_min: s.startup_min,
        est_hours: s.hours,
        billed_hours: s.billed_hours,
        est_cost: s.cost,
        expected_interruptions: s.interruptions,
        value: s.value(),
        memory_needed_gib: s.need,
        memory_usable_gib: s.usable,
        memory_headroom_gib: s.usable - s.need,
        reasons,
    }
}

pub(super) fn profile(
    job: &Job,
    total_flops: Option<f64>,
    memory_rejections: u64,
    allowed: u64,
) -> Profile {
    let single = job.memory.gib_per_gpu(1);
    let memory_formula = match &job.memory {
        MemoryNeed::Fixed { gib_per_gpu } => format!("given: {gib_per_gpu} GiB per GPU"),
        MemoryNeed::Model {
            params,
            bytes,
            sharding,
            activation_gib,
            activation_reserve,
        } => {
            let activations = match activation_gib {
                Some(a) => format!(" + {a} GiB activations"),
                None => format!(" + {activation_reserve} × weights for activations"),
            };
            let sharding = match sharding.what_is_split() {
                None => "not sharded".to_string(),
                Some(split) => format!("{split} over the GPUs"),
            };
            format!(
                "{params:.3e} params × ({} weights + {} gradients + {} optimizer) bytes, {sharding}{activations}",
                bytes.weights, bytes.gradients, bytes.optimizer
            )
        }
    };
    Profile {
        memory_per_gpu_gib_single: single,
        memory_formula,
        bound: if allowed > 0 && memory_rejections * 2 > allowed {
            "memory"
        } else {
            "compute"
        },
        distributed: job.nodes_max > 1,
        io_sensitive: job.data_layout == DataLayout::ManySmallFiles,
        total_flops,
    }
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

pub(super) fn suggest(job: &Job, near: &NearMisses<'_>, memory_rejections: u64) -> Vec<Suggestion> {
    let mut out = Vec::new();
    if let Some((usable, memory, gpu)) = near.largest.as_ref().filter(|_| memory_rejections > 0) {
        let largest = format!(
            "{gpu} ({} GiB, {} usable)",
            fixed(*memory, 0),
            fixed(*usable, 1)
        );
        if let Some(gpus) = job.memory.min_fully_sharded_gpus(*usable)
            && job.memory.fully_sharded()
        {
            out.push(Suggestion {
                change: "nodes".into(),
                detail: format!(
                    "the states are already fully sharded; they need at least {gpus} GPUs like the largest \
                     this job may use, {largest}: raise nodes (nodes × GPUs per node ≥ {gpus})"
                ),
            });
        } else if let Some(gpus) = job.memory.min_fully_sharded_gpus(*usable) {
            out.push(Suggestion {
                change: "sharding".into(),
                detail: format!(
                    "shard fully (fsdp or zero3) across at least {gpus} GPUs like the largest this job may use, \
                     {largest}: {} GiB per GPU unsharded is more than it has",
                    fixed(job.memory.gib_per_gpu(1), 1)
                ),
            });
        } else {
            out.push(Suggestion {
                change: "gpu_memory".into(),
                detail: format!(
                    "needs {} GiB per GPU; the largest GPU this job may use is {largest}",
                    fixed(job.memory.gib_per_gpu(1), 1)
                ),
            });
        }
    }
    if job.precision == Precision::Bf16 && !near.without_bf16.is_empty() {
        out.push(Suggestion {
            change: "precision".into(),
            detail: format!(
                "{} {} no bf16 tensor cores: use precision fp16 (the same memory, with loss scaling) or fp32",
                list(&near.without_bf16),
                if near.without_bf16.len() == 1 { "has" } else { "have" }
            ),
        });
    }
    if !near.without_facts.is_empty() {
        let benchmark = match job.workload.as_deref() {
            Some(w) => {
                format!("record a benchmark of workload `{w}` on them (POST /v1/benchmarks)")
            }
            None => "name a workload and record a benchmark of it on them (POST /v1/benchmarks)"
                .to_string(),
        };
        out.push(Suggestion {
            change: "gpus".into(),
            detail: format!(
                "the time cannot be estimated on {}: there are no datasheet TFLOPS for {} (catalog/gpus.csv) \
                 and no benchmark; {benchmark}, or allow GPUs with datasheet facts",
                list(&near.without_facts),
                if near.without_facts.len() == 1 { "it" } else { "them" }
            ),
        });
    }
    if near.needs_flops_per_sample {
        out.push(Suggestion {
            change: "flops_per_sample".into(),
            detail: "work in samples is estimated from a benchmark of the workload on the same GPU model, \
                     or from datasheets with flops_per_sample: give flops_per_sample or measure the workload"
                .into(),
        });
    }
    if let Some(h) = near.fastest_hours {
        out.push(Suggestion {
            change: "deadline_hours".into(),
            detail: format!(
                "the fastest option needs {} hours, start-up included",
                fixed(h, 1)
            ),
        });
    }
    if let Some(c) = near.cheapest_cost {
        out.push(Suggestion {
            change: "budget".into(),
            detail: format!("the cheapest option costs ${}", fixed(c, 2)),
        });
    }
    out
}

/// The utilisation model in words, up to where the model size came from: the same for every
/// selection, and a dozen figures to format, so it is written once.
static MODEL_RULE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "per GPU: ceiling ({CEILING_AT_REFERENCE} × ({REFERENCE_RIDGE} / the GPU's FLOPs per byte of \
         memory bandwidth)^{RIDGE_EXPONENT}, at most {CEILING_CAP}) × fill (1 + {FILL_PER_DECADE} × \
         log10(parameters / ({FULL_SIZE_AT_REFERENCE:e} × sqrt(TFLOPS / {REFERENCE_TFLOPS}))), \
         {MIN_FILL} to 1), with the model size from "
    )
});

pub(super) fn assumptions(
    catalog: &CatalogSnapshot,
    job: &Job,
    returned: &[Scored],
    rate_sources: (bool, bool),
) -> Assumptions {
    let (model_params, model_params_from) = job.model_size();
    let mut interruption_rates = Vec::new();
    if rate_sources.0 {
        interruption_rates.push(
            "AWS Spot Advisor bucket midpoints / 730 h (bundled snapshot, early 2024)".into(),
        );
    }
    if rate_sources.1 {
        interruption_rates.push(
            "provider defaults per node-hour: aws 12.5 %/month, gcp/azure/nebius 15 %/month, vast 30 %/month (assumed)".into(),
        );
    }
    let mut providers: BTreeMap<&str, ProviderTerms> = BTreeMap::new();
    for s in returned {
        let provider = catalog.offerings()[s.position].key.provider.as_str();
        providers.entry(provider).or_insert_with(|| {
            let billing = Billing::for_provider(provider);
            ProviderTerms {
                provider: provider.to_string(),
                startup_min: s.startup_min,
                startup_from: if job.startup_min.is_some() {
                    "job"
                } else {
                    "provider_default"
                },
                billing_increment_sec: billing.increment_sec(),
                billing_minimum_sec: billing.minimum_sec(),
            }
        });
    }
    let utilisations = returned.iter().filter_map(|s| match s.basis {
        Basis::Datasheet(e) => Some(e.utilisation),
        _ => None,
    });
    let range = utilisations.fold(None, |r: Option<[f64; 2]>, u| {
        Some(r.map_or([u, u], |[lo, hi]| [lo.min(u), hi.max(u)]))
    });
    let size = match model_params_from {
        SizeFrom::Given => "the job's params_billion",
        SizeFrom::Memory => "the job's gpu_memory_gib_min at 16 bytes per parameter",
        SizeFrom::Assumed => "an assumed 1B parameters (the job states neither size nor memory)",
    };
    Assumptions {
        utilisation: UtilisationAssumption {
            rule: match job.utilisation {
                Some(u) => format!(
                    "{u} of datasheet TFLOPS per GPU, as the job states; scaling across GPUs and nodes still applies"
                ),
                None => format!("{}{size}", *MODEL_RULE),
            },
            source: estimate::SOURCE.to_string(),
            job_override: job.utilisation,
            model_params,
            model_params_from,
            range,
        },
        fast_fabric_efficiency_per_doubling: FAST_FABRIC_EFFICIENCY,
        tcpx_efficiency_per_doubling: TCPX_EFFICIENCY,
        ethernet_efficiency_per_doubling: ETHERNET_EFFICIENCY,
        pcie_multi_gpu_efficiency: PCIE_MULTI_GPU_EFFICIENCY,
        small_model_loss_per_doubling: SMALL_MODEL_LOSS_PER_DOUBLING,
        memory_reserve: MemoryReserve {
            cuda_context_gib: CUDA_CONTEXT_GIB,
            allocator_overhead: ALLOCATOR_OVERHEAD,
        },
        providers: providers.into_values().collect(),
        interruption_rates,
        restart_overhead_min: job.restart_overhead_min,
        spot_loss: "each interruption loses half of the shorter of the checkpoint interval and the run, \
                    plus the restart overhead; the run is stretched by 1 / (1 - interruptions per hour × loss)"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_read_as_people_write_them() {
        let text = |params| {
            let mut out = String::from("for ");
            push!(&mut out, ParamsText(params));
            out
        };
        assert_eq!(text(2.5e7), "for 25M");
        assert_eq!(text(1.25e8), "for 125M");
        assert_eq!(text(1.3e9), "for 1.3B");
        assert_eq!(text(7e9), "for 7B");
        assert_eq!(text(1e11), "for 100B");
        assert_eq!(text(0.0), "for 0M");
    }
}
