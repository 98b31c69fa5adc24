//! Which instance for this job: every offering × node count × market is checked against the
//! job's constraints, estimated (throughput, hours, cost, interruptions), and ranked by the
//! objective. Pure: the catalog snapshot, spot risk and job in; a decision with reasons out.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::benchmark::measured_samples_per_sec;
use super::catalog::{CatalogSnapshot, GpuFacts, Interconnect, Market, Offering};
use super::decision::{
    Assumptions, Candidate, InstanceDecision, Profile, RejectReason, Rejections, Suggestion,
    ThroughputSource,
};
use super::job::{DataLayout, Job, MemoryNeed, Objective, Precision, Work};
use super::spot::{RateSource, SpotRisk, stretch};

/// Efficiency per doubling of nodes, by fabric. Measured scaling replaces these once
/// benchmarks exist for a workload.
pub const FAST_FABRIC_EFFICIENCY: f64 = 0.92;
pub const TCPX_EFFICIENCY: f64 = 0.88;
pub const ETHERNET_EFFICIENCY: f64 = 0.6;
/// Within a node, GPUs without NVLink lose some of their speed to PCIe all-reduce.
pub const PCIE_MULTI_GPU_EFFICIENCY: f64 = 0.9;
/// Multi-node training wants at least this much network per node.
pub const MIN_FABRIC_GBPS: f64 = 100.0;
const EXAMPLES_PER_REASON: usize = 3;

/// Rejections counted by reason, keeping a few examples of each.
#[derive(Default)]
struct RejectTally {
    by_reason: BTreeMap<RejectReason, (u64, Vec<String>)>,
}

impl RejectTally {
    fn add(&mut self, reason: RejectReason, example: impl FnOnce() -> String) {
        let entry = self.by_reason.entry(reason).or_default();
        entry.0 += 1;
        if entry.1.len() < EXAMPLES_PER_REASON {
            entry.1.push(example());
        }
    }

    fn count(&self, reason: RejectReason) -> u64 {
        self.by_reason.get(&reason).map_or(0, |e| e.0)
    }

    fn into_list(self) -> Vec<Rejections> {
        self.by_reason
            .into_iter()
            .map(|(reason, (count, examples))| Rejections {
                reason,
                count,
                examples,
            })
            .collect()
    }
}

/// What would have made rejected configurations pass, for the suggestions.
#[derive(Default)]
struct NearMisses {
    largest_gpu_memory_gib: f64,
    fastest_hours: Option<f64>,
    cheapest_cost: Option<f64>,
}

fn matches_any(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v.eq_ignore_ascii_case(value))
}

fn label(o: &Offering, nodes: u32, market: Market) -> String {
    let zone = if o.key.zone.is_empty() {
        "-"
    } else {
        &o.key.zone
    };
    format!(
        "{}/{}/{}/{} ×{nodes} {}",
        o.key.provider, o.key.region, zone, o.key.instance_type, market
    )
}

/// The node counts worth evaluating: all of a small range, else powers of two and the ends.
pub fn node_counts(min: u32, max: u32) -> Vec<u32> {
    if max - min < 16 {
        return (min..=max).collect();
    }
    let mut counts: Vec<u32> = std::iter::successors(Some(1u32), |n| n.checked_mul(2))
        .take_while(|n| *n <= max)
        .filter(|n| *n >= min)
        .collect();
    counts.push(min);
    counts.push(max);
    counts.sort_unstable();
    counts.dedup();
    counts
}

fn fabric_ok(o: &Offering) -> bool {
    let fast = matches!(
        o.spec.interconnect,
        Interconnect::Efa
            | Interconnect::Infiniband
            | Interconnect::Roce
            | Interconnect::GpudirectTcpx
    );
    // A fabric the provider names but whose bandwidth it does not state is taken at its word.
    fast && o.spec.network_gbps.is_none_or(|g| g >= MIN_FABRIC_GBPS)
}

/// Scaling efficiency of `nodes` nodes of `gpus` GPUs each.
/// Efficiency per doubling of nodes on this offering's fabric.
fn fabric_per_doubling(o: &Offering) -> f64 {
    match o.spec.interconnect {
        Interconnect::Efa | Interconnect::Infiniband | Interconnect::Roce => FAST_FABRIC_EFFICIENCY,
        Interconnect::GpudirectTcpx => TCPX_EFFICIENCY,
        Interconnect::None => ETHERNET_EFFICIENCY,
    }
}

fn scaling_efficiency(o: &Offering, facts: &GpuFacts, nodes: u32) -> f64 {
    let intra = if o.spec.gpu_count > 1.0 && facts.gpu_link_gbps <= 0.0 {
        PCIE_MULTI_GPU_EFFICIENCY
    } else {
        1.0
    };
    if nodes <= 1 {
        return intra;
    }
    intra * fabric_per_doubling(o).powf(f64::from(nodes).log2())
}

/// Per-GPU dense throughput at the job's precision, TFLOPS.
fn gpu_tflops(facts: &GpuFacts, precision: Precision) -> Option<f64> {
    match precision {
        Precision::Fp32 => Some(facts.fp32_tflops),
        Precision::Bf16 if !facts.bf16_supported => None,
        // FP8 is counted at the 16-bit rate: a conservative floor where FP8 tensor cores exist.
        Precision::Bf16 | Precision::Fp16 | Precision::Fp8 => Some(facts.fp16_bf16_dense_tflops),
    }
}

/// Throughput in the work's unit, and the estimated hours when the amount of work is known.
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
            let reference = catalog.gpu(gpu)?;
            let reference_tflops = gpu_tflops(reference, job.precision)? * job.utilisation;
            let rate = effective_tflops / reference_tflops;
            (rate, "reference_gpus", Some(hours / rate))
        }
        Work::Unknown => (effective_tflops, "effective_tflops", None),
    })
}

/// Total FLOPs of the job's work, when it can be told.
fn total_flops(job: &Job, catalog: &CatalogSnapshot) -> Option<f64> {
    match &job.work {
        Work::Samples {
            total,
            flops_per_sample,
        } => Some(total * (*flops_per_sample)?),
        Work::Tokens { tokens, params } => Some(6.0 * params * tokens),
        Work::ReferenceHours { hours, gpu } => {
            let facts = catalog.gpu(gpu)?;
            Some(hours * 3600.0 * gpu_tflops(facts, job.precision)? * 1e12 * job.utilisation)
        }
        Work::Unknown => None,
    }
}

/// A feasible configuration, kept small and allocation-free during the scan; only the top
/// `top_k` become [`Candidate`]s with names and reasons.
#[derive(Debug, Clone, Copy)]
struct Scored {
    position: usize,
    offering_id: i64,
    nodes: u32,
    market: Market,
    degree: u32,
    need: f64,
    per_gpu_tflops: f64,
    efficiency: f64,
    source: ThroughputSource,
    rate: f64,
    unit: &'static str,
    hours: Option<f64>,
    cost: Option<f64>,
    interruptions: f64,
    /// Interruptions per node-hour, their source, and the factor they stretch time by.
    spot_rate: Option<(f64, RateSource, f64)>,
    node_price: f64,
    total_price: f64,
}

impl Scored {
    /// Throughput per hourly dollar; on spot, net of the work interruptions make redo.
    fn value(&self) -> f64 {
        let factor = self.spot_rate.map_or(1.0, |(_, _, f)| f);
        self.rate / factor / self.total_price
    }
}

/// The sort key of a configuration under the objective; lower is better.
fn objective_key(job: &Job, c: &Scored) -> (f64, f64) {
    match job.objective {
        Objective::Cheapest => (c.cost.unwrap_or(c.total_price), c.hours.unwrap_or(0.0)),
        Objective::Fastest => (c.hours.unwrap_or(-c.rate), c.cost.unwrap_or(c.total_price)),
        Objective::BestValue => (-c.value(), c.total_price),
    }
}

fn compare(job: &Job, a: &Scored, b: &Scored) -> Ordering {
    let (ka, kb) = (objective_key(job, a), objective_key(job, b));
    ka.0.total_cmp(&kb.0)
        .then(ka.1.total_cmp(&kb.1))
        .then(a.offering_id.cmp(&b.offering_id))
        .then(a.nodes.cmp(&b.nodes))
        .then(a.market.cmp(&b.market))
}

/// Chooses instances for `job` from `catalog`.
pub fn select(catalog: &CatalogSnapshot, risk: &SpotRisk, job: &Job) -> InstanceDecision {
    let mut rejected = RejectTally::default();
    let mut near = NearMisses::default();
    let mut feasible: Vec<Scored> = Vec::new();
    let mut considered = 0u64;
    let mut rate_sources = (false, false);
    let nodes = node_counts(job.nodes_min, job.nodes_max);
    let markets = [Market::OnDemand, Market::Spot];
    // Measured throughput is in samples per second: it answers jobs whose work is in samples.
    // Other jobs are estimated from datasheets, so one ranking never mixes units.
    let measured_workload = job
        .workload
        .as_deref()
        .filter(|_| matches!(job.work, Work::Samples { .. }))
        .filter(|w| catalog.has_benchmarks_for(w));

    for (position, o) in catalog.offerings().iter().enumerate() {
        considered += (nodes.len() * markets.len()) as u64;
        let reject_all = |reason: RejectReason, rejected: &mut RejectTally| {
            for &n in &nodes {
                for m in markets {
                    rejected.add(reason, || label(o, n, m));
                }
            }
        };
        if !(matches_any(&job.providers, &o.key.provider)
            && matches_any(&job.regions, &o.key.region)
            && matches_any(&job.zones, &o.key.zone)
            && matches_any(&job.gpus, &o.spec.gpu)
            && (job.exclude_gpus.is_empty() || !matches_any(&job.exclude_gpus, &o.spec.gpu)))
        {
            reject_all(RejectReason::FilteredByConstraint, &mut rejected);
            continue;
        }
        if o.spec.gpu_count < 1.0 {
            reject_all(RejectReason::FractionalGpu, &mut rejected);
            continue;
        }
        if o.spec.gpu_count < job.gpus_per_node_min {
            reject_all(RejectReason::TooFewGpusPerNode, &mut rejected);
            continue;
        }
        near.largest_gpu_memory_gib = near.largest_gpu_memory_gib.max(o.spec.gpu_memory_gib);
        // Many small files want the dataset on local NVMe: present, and large enough when the
        // dataset's size is given (GiB to the providers' GB).
        let dataset_gb = job.dataset_gib.unwrap_or(0.0) * 1.073_741_824;
        if job.data_layout == DataLayout::ManySmallFiles
            && o.spec
                .local_nvme_gb
                .is_none_or(|gb| gb <= 0.0 || gb < dataset_gb)
        {
            reject_all(RejectReason::NoLocalNvme, &mut rejected);
            continue;
        }
        let facts = catalog.gpu_facts_of(position);
        let datasheet = facts.and_then(|f| gpu_tflops(f, job.precision).map(|t| (f, t)));
        let measured_workload = measured_workload.filter(|w| {
            catalog
                .benchmarks_for(w, &o.key.provider, &o.key.instance_type)
                .next()
                .is_some()
        });
        if datasheet.is_none() && measured_workload.is_none() {
            let reason = if facts.is_some() {
                RejectReason::PrecisionUnsupported
            } else {
                RejectReason::NoThroughputData
            };
            reject_all(reason, &mut rejected);
            continue;
        }
        let gpus_per_node = o.spec.gpu_count;
        // A job that fits on one node runs there: more nodes only add communication.
        let one_node_fits = job.nodes_min == 1
            && job.memory.gib_per_gpu(gpus_per_node as u32) <= o.spec.gpu_memory_gib;
        for &n in &nodes {
            if n > 1 && one_node_fits {
                for m in markets {
                    rejected.add(RejectReason::SingleNodeSuffices, || label(o, n, m));
                }
                continue;
            }
            let degree = (gpus_per_node as u32).saturating_mul(n);
            let need = job.memory.gib_per_gpu(degree);
            if need > o.spec.gpu_memory_gib {
                for m in markets {
                    rejected.add(RejectReason::MemoryDoesNotFit, || {
                        format!(
                            "{}: needs {need:.1} GiB per GPU, has {:.1}",
                            label(o, n, m),
                            o.spec.gpu_memory_gib
                        )
                    });
                }
                continue;
            }
            if n > 1 && job.require_fast_interconnect && !fabric_ok(o) {
                for m in markets {
                    rejected.add(RejectReason::NoFastInterconnect, || {
                        format!("{}: {}", label(o, n, m), o.spec.interconnect.as_str())
                    });
                }
                continue;
            }
            let measured = measured_workload
                .and_then(|w| measured_samples_per_sec(catalog, w, o, n, fabric_per_doubling(o)));
            let (rate, unit, hours, source, per_gpu_tflops, efficiency) = if let Some(sps) =
                measured
            {
                let hours = match &job.work {
                    Work::Samples { total, .. } => Some(total / sps / 3600.0),
                    _ => None,
                };
                (
                    sps,
                    "samples_per_sec",
                    hours,
                    ThroughputSource::Benchmark,
                    0.0,
                    1.0,
                )
            } else if let Some((facts, per_gpu_tflops)) = datasheet {
                let efficiency = scaling_efficiency(o, facts, n);
                let effective_tflops =
                    per_gpu_tflops * job.utilisation * gpus_per_node * f64::from(n) * efficiency;
                let Some((rate, unit, hours)) = work_rate(job, effective_tflops, catalog) else {
                    for m in markets {
                        rejected.add(RejectReason::NoThroughputData, || label(o, n, m));
                    }
                    continue;
                };
                (
                    rate,
                    unit,
                    hours,
                    ThroughputSource::Datasheet,
                    per_gpu_tflops,
                    efficiency,
                )
            } else {
                // Measured at other GPU counts only: nothing to scale from.
                for m in markets {
                    rejected.add(RejectReason::NoThroughputData, || label(o, n, m));
                }
                continue;
            };
            for market in markets {
                let Some(price) = o.price(market) else {
                    rejected.add(RejectReason::NoPrice, || label(o, n, market));
                    continue;
                };
                let (hours, interruptions, spot_rate) = match market {
                    Market::OnDemand => (hours, 0.0, None),
                    Market::Spot => {
                        let Some(checkpoint) =
                            job.checkpoint_interval_min.filter(|_| job.spot_allowed)
                        else {
                            rejected.add(RejectReason::SpotNotAllowed, || label(o, n, market));
                            continue;
                        };
                        let (per_hour, source) =
                            risk.rate(&o.key.provider, &o.key.region, &o.key.instance_type);
                        match source {
                            RateSource::Advisor => rate_sources.0 = true,
                            RateSource::ProviderDefault => rate_sources.1 = true,
                        }
                        // The stretch is proportional, so an hour stands in for unknown work.
                        let Some((stretched, expected)) = stretch(
                            hours.unwrap_or(1.0),
                            per_hour,
                            n,
                            checkpoint,
                            job.restart_overhead_min,
                        ) else {
                            rejected.add(RejectReason::SpotNotAllowed, || {
                                format!(
                                    "{}: interruptions would cost half the run or more",
                                    label(o, n, market)
                                )
                            });
                            continue;
                        };
                        match hours {
                            Some(h) => (
                                Some(stretched),
                                expected,
                                Some((per_hour, source, stretched / h)),
                            ),
                            None => (None, 0.0, Some((per_hour, source, stretched))),
                        }
                    }
                };
                let node_price = price.dollars();
                let total_price = node_price * f64::from(n);
                if job.max_price_per_hour.is_some_and(|cap| total_price > cap) {
                    rejected.add(RejectReason::OverPriceCap, || {
                        format!("{}: ${total_price:.2}/h", label(o, n, market))
                    });
                    continue;
                }
                let cost = hours.map(|h| h * total_price);
                if let (Some(deadline), Some(h)) = (job.deadline_hours, hours)
                    && h > deadline
                {
                    near.fastest_hours = Some(near.fastest_hours.map_or(h, |f: f64| f.min(h)));
                    rejected.add(RejectReason::MissesDeadline, || {
                        format!("{}: {h:.1} h", label(o, n, market))
                    });
                    continue;
                }
                if let (Some(budget), Some(c)) = (job.budget, cost)
                    && c > budget
                {
                    near.cheapest_cost = Some(near.cheapest_cost.map_or(c, |f: f64| f.min(c)));
                    rejected.add(RejectReason::OverBudget, || {
                        format!("{}: ${c:.0}", label(o, n, market))
                    });
                    continue;
                }
                feasible.push(Scored {
                    position,
                    offering_id: o.id,
                    nodes: n,
                    market,
                    degree,
                    need,
                    per_gpu_tflops,
                    efficiency,
                    source,
                    rate,
                    unit,
                    hours,
                    cost,
                    interruptions,
                    spot_rate,
                    node_price,
                    total_price,
                });
            }
        }
    }

    let feasible_count = feasible.len() as u64;
    let top_k = job.top_k.max(1);
    if feasible.len() > top_k {
        feasible.select_nth_unstable_by(top_k - 1, |a, b| compare(job, a, b));
        feasible.truncate(top_k);
    }
    feasible.sort_by(|a, b| compare(job, a, b));
    let best_key = feasible.first().map(|c| objective_key(job, c).0);
    let candidates = feasible
        .iter()
        .enumerate()
        .map(|(i, s)| candidate(catalog, job, s, i + 1, feasible_count, best_key))
        .collect::<Vec<_>>();

    let memory_rejections = rejected.count(RejectReason::MemoryDoesNotFit);
    let suggestions = if candidates.is_empty() {
        suggest(job, &near, memory_rejections)
    } else {
        Vec::new()
    };
    // Whether memory is the binding need is judged among configurations the request allows.
    let allowed = considered
        - rejected.count(RejectReason::FilteredByConstraint)
        - rejected.count(RejectReason::FractionalGpu)
        - rejected.count(RejectReason::TooFewGpusPerNode);
    let profile = profile(job, catalog, memory_rejections, allowed);
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
    InstanceDecision {
        candidates,
        considered,
        feasible: feasible_count,
        profile,
        rejected: rejected.into_list(),
        suggestions,
        assumptions: Assumptions {
            utilisation: job.utilisation,
            fast_fabric_efficiency_per_doubling: FAST_FABRIC_EFFICIENCY,
            tcpx_efficiency_per_doubling: TCPX_EFFICIENCY,
            ethernet_efficiency_per_doubling: ETHERNET_EFFICIENCY,
            pcie_multi_gpu_efficiency: PCIE_MULTI_GPU_EFFICIENCY,
            interruption_rates,
            restart_overhead_min: job.restart_overhead_min,
        },
    }
}

/// Names, numbers and reasons of one ranked configuration.
fn candidate(
    catalog: &CatalogSnapshot,
    job: &Job,
    s: &Scored,
    rank: usize,
    of: u64,
    best_key: Option<f64>,
) -> Candidate {
    let o = &catalog.offerings()[s.position];
    let key = objective_key(job, s).0;
    let what = match job.objective {
        Objective::Cheapest if s.cost.is_some() => format!("estimated cost ${key:.2}"),
        Objective::Cheapest => format!("${key:.2} per hour (no amount of work given)"),
        Objective::Fastest if s.hours.is_some() => format!("{key:.2} estimated hours"),
        Objective::Fastest => format!("{:.1} {} throughput", -key, s.unit),
        Objective::BestValue => format!("{:.3} {} per $/h", -key, s.unit),
    };
    let gap = match best_key {
        Some(best) if rank > 1 => format!(", {:+.2} against #1", key - best),
        _ => String::new(),
    };
    let mut reasons = vec![
        format!("rank {rank} of {of} by {:?}: {what}{gap}", job.objective),
        format!(
            "fits: needs {:.1} GiB of {:.1} GiB per GPU ({} GPUs share the model states)",
            s.need, o.spec.gpu_memory_gib, s.degree
        ),
        match s.source {
            ThroughputSource::Benchmark => format!(
                "throughput measured: {:.1} samples/s for workload `{}` at {} nodes (scaled from the nearest measured node count when not measured at this one)",
                s.rate,
                job.workload.as_deref().unwrap_or_default(),
                s.nodes
            ),
            ThroughputSource::Datasheet => format!(
                "throughput from datasheet: {} TFLOPS × {} utilisation × {} GPUs × {} nodes × {:.3} scaling",
                s.per_gpu_tflops, job.utilisation, o.spec.gpu_count, s.nodes, s.efficiency
            ),
        },
    ];
    if let Some((per_hour, source, factor)) = s.spot_rate {
        let origin = match source {
            RateSource::Advisor => "AWS Spot Advisor",
            RateSource::ProviderDefault => "provider default",
        };
        reasons.push(format!(
            "spot: {per_hour:.5} interruptions per node-hour ({origin}), {:.2} expected over the run, time ×{factor:.4}",
            s.interruptions
        ));
    }
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
        throughput_source: s.source,
        est_hours: s.hours,
        est_cost: s.cost,
        expected_interruptions: s.interruptions,
        value: s.value(),
        memory_needed_gib: s.need,
        memory_headroom_gib: o.spec.gpu_memory_gib - s.need,
        reasons,
    }
}

fn profile(job: &Job, catalog: &CatalogSnapshot, memory_rejections: u64, allowed: u64) -> Profile {
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
            format!(
                "{params:.3e} params × ({} weights + {} gradients + {} optimizer) bytes, {sharding:?} sharding over the GPUs{activations}",
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
        total_flops: total_flops(job, catalog),
    }
}

fn suggest(job: &Job, near: &NearMisses, memory_rejections: u64) -> Vec<Suggestion> {
    let mut out = Vec::new();
    if memory_rejections > 0 && near.largest_gpu_memory_gib > 0.0 {
        let largest = near.largest_gpu_memory_gib;
        if let Some(gpus) = job.memory.min_fully_sharded_gpus(largest)
            && job.memory.fully_sharded()
        {
            out.push(Suggestion {
                change: "nodes".into(),
                detail: format!(
                    "the states are already fully sharded; they need at least {gpus} GPUs of {largest:.0} GiB \
                     in total: raise nodes (nodes × GPUs per node ≥ {gpus})"
                ),
            });
        } else if let Some(gpus) = job.memory.min_fully_sharded_gpus(largest) {
            out.push(Suggestion {
                change: "sharding".into(),
                detail: format!(
                    "shard fully (fsdp or zero3) across at least {gpus} GPUs of {largest:.0} GiB: \
                     {:.1} GiB per GPU unsharded is more than any allowed GPU has",
                    job.memory.gib_per_gpu(1)
                ),
            });
        } else {
            out.push(Suggestion {
                change: "gpu_memory".into(),
                detail: format!(
                    "needs {:.1} GiB per GPU; the largest allowed GPU has {largest:.0} GiB",
                    job.memory.gib_per_gpu(1)
                ),
            });
        }
    }
    if let Some(h) = near.fastest_hours {
        out.push(Suggestion {
            change: "deadline_hours".into(),
            detail: format!("the fastest option needs {h:.1} hours"),
        });
    }
    if let Some(c) = near.cheapest_cost {
        out.push(Suggestion {
            change: "budget".into(),
            detail: format!("the cheapest option costs ${c:.2}"),
        });
    }
    out
}
