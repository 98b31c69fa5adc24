//! Which instance for this job: every offering × node count × market is checked against the
//! job's constraints, estimated (throughput, hours with start-up, billed cost,
//! interruptions), and ranked by the objective. Pure: the catalog snapshot, spot risk and job
//! in; a decision with reasons out. The words people read are in [`explain`].

mod explain;

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::benchmark::{Benchmark, MeasuredHow, measured_samples_per_sec};
use super::catalog::{CatalogSnapshot, GpuFacts, Interconnect, Market, Offering};
use super::decision::{InstanceDecision, RejectReason, Rejections, ThroughputSource};
use super::estimate::{Estimate, Setup, estimate, fabric_per_doubling};
use super::job::{DataLayout, Job, Work, usable_gib};
use super::spot::{RateSource, SpotRisk, loss_per_interruption_hours, stretch};
use super::terms::{Billing, default_startup_min};

pub use super::estimate::{
    ETHERNET_EFFICIENCY, FAST_FABRIC_EFFICIENCY, PCIE_MULTI_GPU_EFFICIENCY, TCPX_EFFICIENCY,
    gpu_tflops,
};

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
    /// The most usable memory per GPU among GPUs the job may use (every filter but memory
    /// passed), the GPU's own memory, and its name.
    largest: Option<(f64, f64, String)>,
    fastest_hours: Option<f64>,
    cheapest_cost: Option<f64>,
    /// GPUs without bf16 that a bf16 job was refused on.
    without_bf16: Vec<String>,
    /// GPUs with no datasheet facts and no benchmark, refused for a job that states work.
    without_facts: Vec<String>,
    /// Work in samples without FLOPs per sample, on GPUs with datasheet facts only.
    needs_flops_per_sample: bool,
}

fn note_gpu(list: &mut Vec<String>, gpu: &str) {
    if !list.iter().any(|g| g.eq_ignore_ascii_case(gpu)) {
        list.push(gpu.to_string());
    }
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
fn total_flops(job: &Job, catalog: &CatalogSnapshot) -> Option<f64> {
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

/// How the throughput of a configuration was reached.
#[derive(Debug, Clone, Copy)]
enum Basis<'a> {
    Measured {
        how: MeasuredHow,
        baseline: &'a Benchmark,
        efficiency: f64,
    },
    Datasheet(Estimate),
    /// No facts and no benchmark: ranked by price only.
    Unknown,
}

/// A feasible configuration, kept small and allocation-free during the scan; only the top
/// `top_k` become candidates with names and reasons.
#[derive(Debug, Clone, Copy)]
struct Scored<'a> {
    position: usize,
    offering_id: i64,
    nodes: u32,
    market: Market,
    degree: u32,
    need: f64,
    usable: f64,
    basis: Basis<'a>,
    rate: Option<f64>,
    unit: &'static str,
    startup_min: f64,
    /// Start-up plus the run, stretched on spot.
    hours: Option<f64>,
    billed_hours: Option<f64>,
    cost: Option<f64>,
    interruptions: f64,
    /// Interruptions per node-hour, their source, and the factor they stretch the run by.
    spot_rate: Option<(f64, RateSource, f64)>,
    node_price: f64,
    total_price: f64,
}

impl Scored<'_> {
    /// Throughput per hourly dollar; on spot, net of the work interruptions make redo.
    fn value(&self) -> Option<f64> {
        let factor = self.spot_rate.map_or(1.0, |(_, _, f)| f);
        Some(self.rate? / factor / self.total_price)
    }

    fn source(&self) -> ThroughputSource {
        match self.basis {
            Basis::Measured { .. } => ThroughputSource::Benchmark,
            Basis::Datasheet(_) => ThroughputSource::Datasheet,
            Basis::Unknown => ThroughputSource::Unknown,
        }
    }
}

/// The sort key of a configuration under the objective; lower is better. Configurations
/// whose throughput is unknown sort after the others, by price.
fn objective_key(job: &Job, c: &Scored) -> (f64, f64) {
    use super::job::Objective;
    match job.objective {
        Objective::Cheapest => (c.cost.unwrap_or(c.total_price), c.hours.unwrap_or(0.0)),
        Objective::Fastest => (
            c.hours.or(c.rate.map(|r| -r)).unwrap_or(f64::INFINITY),
            c.cost.unwrap_or(c.total_price),
        ),
        Objective::BestValue => (c.value().map_or(f64::INFINITY, |v| -v), c.total_price),
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

/// The throughput of one offering at one node count, before markets.
struct Throughput<'a> {
    basis: Basis<'a>,
    rate: Option<f64>,
    unit: &'static str,
    run_hours: Option<f64>,
}

/// Measured throughput where the job's workload was measured on this GPU model, else the
/// datasheet estimate, else (for a job with no work) unknown. `None` (with the reason
/// noted) when the job's work cannot be estimated here.
fn throughput<'a>(
    catalog: &'a CatalogSnapshot,
    job: &Job,
    o: &Offering,
    facts: Option<&GpuFacts>,
    measured_workload: Option<&str>,
    nodes: u32,
    near: &mut NearMisses,
) -> Option<Throughput<'a>> {
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
        return Some(Throughput {
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
            let e = estimate(params, setup(f, gpus_per_node, nodes), job.utilisation)?;
            let gpus = f64::from(gpus_per_node) * f64::from(nodes);
            let Some((rate, unit, run_hours)) = work_rate(job, e.effective_tflops(gpus), catalog)
            else {
                if matches!(job.work, Work::Samples { .. }) {
                    near.needs_flops_per_sample = true;
                }
                return None;
            };
            Some(Throughput {
                basis: Basis::Datasheet(e),
                rate: Some(rate),
                unit,
                run_hours,
            })
        }
        None if matches!(job.work, Work::Unknown) => Some(Throughput {
            basis: Basis::Unknown,
            rate: None,
            unit: "effective_tflops",
            run_hours: None,
        }),
        None => None,
    }
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
        let reject_all = |reason: RejectReason, rejected: &mut RejectTally, why: &str| {
            for &n in &nodes {
                for m in markets {
                    rejected.add(reason, || format!("{}{why}", label(o, n, m)));
                }
            }
        };
        if !(matches_any(&job.providers, &o.key.provider)
            && matches_any(&job.regions, &o.key.region)
            && matches_any(&job.zones, &o.key.zone)
            && matches_any(&job.gpus, &o.spec.gpu)
            && (job.exclude_gpus.is_empty() || !matches_any(&job.exclude_gpus, &o.spec.gpu)))
        {
            reject_all(RejectReason::FilteredByConstraint, &mut rejected, "");
            continue;
        }
        if o.spec.gpu_count < 1.0 {
            reject_all(RejectReason::FractionalGpu, &mut rejected, "");
            continue;
        }
        if o.spec.gpu_count < job.gpus_per_node_min {
            reject_all(RejectReason::TooFewGpusPerNode, &mut rejected, "");
            continue;
        }
        // Many small files want the dataset on local NVMe: present, and large enough when the
        // dataset's size is given (GiB to the providers' GB).
        let dataset_gb = job.dataset_gib.unwrap_or(0.0) * 1.073_741_824;
        if job.data_layout == DataLayout::ManySmallFiles
            && o.spec
                .local_nvme_gb
                .is_none_or(|gb| gb <= 0.0 || gb < dataset_gb)
        {
            reject_all(RejectReason::NoLocalNvme, &mut rejected, "");
            continue;
        }
        let facts = catalog.gpu_facts_of(position);
        let measured_workload = measured_workload.filter(|w| {
            catalog
                .benchmarks_of_gpu(w, &o.spec.gpu)
                .any(|b| b.samples_per_sec.is_some())
        });
        let datasheet = facts.filter(|f| gpu_tflops(f, job.precision).is_some());
        if datasheet.is_none() && measured_workload.is_none() {
            if facts.is_some() {
                note_gpu(&mut near.without_bf16, &o.spec.gpu);
                reject_all(
                    RejectReason::PrecisionUnsupported,
                    &mut rejected,
                    &format!(": {} has no bf16", o.spec.gpu),
                );
                continue;
            }
            if !matches!(job.work, Work::Unknown) {
                note_gpu(&mut near.without_facts, &o.spec.gpu);
                reject_all(
                    RejectReason::NoThroughputData,
                    &mut rejected,
                    &format!(": no datasheet TFLOPS for {} and no benchmark", o.spec.gpu),
                );
                continue;
            }
        }
        let usable = usable_gib(o.spec.gpu_memory_gib);
        if near.largest.as_ref().is_none_or(|(u, _, _)| usable > *u) {
            near.largest = Some((usable, o.spec.gpu_memory_gib, o.spec.gpu.clone()));
        }
        let gpus_per_node = o.spec.gpu_count;
        // A job that fits on one node runs there (more nodes only add communication), unless
        // it is in a hurry.
        let one_node_fits = job.nodes_min == 1
            && !job.spreads_for_speed()
            && job.memory.gib_per_gpu(gpus_per_node as u32) <= usable;
        let billing = Billing::for_provider(&o.key.provider);
        let startup_min = job
            .startup_min
            .unwrap_or_else(|| default_startup_min(&o.key.provider));
        for &n in &nodes {
            if n > 1 && one_node_fits {
                for m in markets {
                    rejected.add(RejectReason::SingleNodeSuffices, || label(o, n, m));
                }
                continue;
            }
            let degree = (gpus_per_node as u32).saturating_mul(n);
            let need = job.memory.gib_per_gpu(degree);
            if need > usable {
                for m in markets {
                    rejected.add(RejectReason::MemoryDoesNotFit, || {
                        format!(
                            "{}: needs {need:.1} GiB per GPU, {usable:.1} of {:.1} usable",
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
            let Some(t) = throughput(catalog, job, o, datasheet, measured_workload, n, &mut near)
            else {
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
                let (run_hours, interruptions, spot_rate) = match market {
                    Market::OnDemand => (t.run_hours, 0.0, None),
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
                        let loss = loss_per_interruption_hours(
                            t.run_hours,
                            checkpoint,
                            job.restart_overhead_min,
                        );
                        // Unknown work: the stretch of an hour stands in for the factor.
                        let Some((stretched, expected)) =
                            stretch(t.run_hours.unwrap_or(1.0), per_hour, n, loss)
                        else {
                            rejected.add(RejectReason::SpotNotAllowed, || {
                                format!(
                                    "{}: interruptions would cost half the run or more",
                                    label(o, n, market)
                                )
                            });
                            continue;
                        };
                        match t.run_hours {
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
                let hours = run_hours.map(|h| h + startup_min / 60.0);
                let billed_hours = hours.map(|h| billing.billed_hours(h));
                let cost = billed_hours.map(|h| h * total_price);
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
                    usable,
                    basis: t.basis,
                    rate: t.rate,
                    unit: t.unit,
                    startup_min,
                    hours,
                    billed_hours,
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
        .map(|(i, s)| explain::candidate(catalog, job, s, i + 1, feasible_count, best_key))
        .collect::<Vec<_>>();

    let memory_rejections = rejected.count(RejectReason::MemoryDoesNotFit);
    let suggestions = if candidates.is_empty() {
        explain::suggest(job, &near, memory_rejections)
    } else {
        Vec::new()
    };
    // Whether memory is the binding need is judged among configurations the request allows.
    let allowed = considered
        - rejected.count(RejectReason::FilteredByConstraint)
        - rejected.count(RejectReason::FractionalGpu)
        - rejected.count(RejectReason::TooFewGpusPerNode);
    let profile = explain::profile(job, total_flops(job, catalog), memory_rejections, allowed);
    let assumptions = explain::assumptions(catalog, job, &feasible, rate_sources);
    InstanceDecision {
        candidates,
        considered,
        feasible: feasible_count,
        profile,
        rejected: rejected.into_list(),
        suggestions,
        assumptions,
    }
}

#[cfg(test)]
mod tests;
