//! Which instance for this job: every offering × node count × market is checked against the
//! job's constraints, estimated (throughput, hours with start-up, billed cost,
//! interruptions), and ranked by the objective. Pure: the catalog snapshot, spot risk and job
//! in; a decision with reasons out. The words people read are in [`explain`].
//!
//! [`select`] is a pipeline over the catalog in offering order: the request's region and
//! zone lists ([`filter`]); what the offering's shape offers the job, worked out once per
//! shape ([`plan`]: machine checks, memory and throughput per node count); the run in each
//! market and its cost and time ([`market`]); the best `top_k` kept as the scan goes
//! ([`rank`]); and rejections counted with a few examples ([`reject`]), written out as text
//! only at the end.

mod explain;
mod filter;
mod market;
mod plan;
mod rank;
mod reject;
mod throughput;

use super::benchmark::{Benchmark, MeasuredHow};
use super::catalog::{CatalogSnapshot, Market, Offering};
use super::decision::{InstanceDecision, RejectReason, ThroughputSource};
use super::estimate::Estimate;
use super::job::{Job, Work};
use super::spot::{RateSource, SpotRisk};
use market::RateSourcesSeen;
use plan::{Fit, ShapePlan, ShapePlans};
use rank::TopK;
use reject::{Refusal, RejectTally};

pub use super::estimate::{
    ETHERNET_EFFICIENCY, FAST_FABRIC_EFFICIENCY, PCIE_MULTI_GPU_EFFICIENCY, TCPX_EFFICIENCY,
    gpu_tflops,
};

/// Multi-node training wants at least this much network per node.
pub const MIN_FABRIC_GBPS: f64 = 100.0;
/// The markets every offering and node count is tried in, in this order.
const MARKETS: [Market; 2] = [Market::OnDemand, Market::Spot];

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

/// The job and what follows from it alone, worked out once per selection.
struct Request<'a> {
    catalog: &'a CatalogSnapshot,
    job: &'a Job,
    nodes: Vec<u32>,
    /// The job's workload where measurements of it can answer the job (see [`Request::new`]).
    measured_workload: Option<&'a str>,
    /// Whether the job names regions or zones, checked per offering; the rest of its lists
    /// are checked once per shape.
    names_places: bool,
}

impl<'a> Request<'a> {
    fn new(catalog: &'a CatalogSnapshot, job: &'a Job) -> Self {
        // Measured throughput is in samples per second: it answers jobs whose work is in
        // samples. Other jobs are estimated from datasheets, so one ranking never mixes units.
        let measured_workload = job
            .workload
            .as_deref()
            .filter(|_| matches!(job.work, Work::Samples { .. }))
            .filter(|w| catalog.has_benchmarks_for(w));
        Self {
            catalog,
            job,
            nodes: node_counts(job.nodes_min, job.nodes_max),
            measured_workload,
            names_places: !(job.regions.is_empty() && job.zones.is_empty()),
        }
    }
}

/// What the scan over the catalog gathers.
struct Scan<'a> {
    considered: u64,
    plans: ShapePlans<'a>,
    rejected: RejectTally,
    near: NearMisses,
    best: TopK<'a>,
    rate_sources: RateSourcesSeen,
}

/// Chooses instances for `job` from `catalog`.
pub fn select(catalog: &CatalogSnapshot, risk: &SpotRisk, job: &Job) -> InstanceDecision {
    let req = Request::new(catalog, job);
    let mut scan = Scan {
        considered: 0,
        plans: ShapePlans::new(&req),
        rejected: RejectTally::default(),
        near: NearMisses::default(),
        best: TopK::new(job),
        rate_sources: (false, false),
    };
    for (position, o) in catalog.offerings().iter().enumerate() {
        scan_offering(&req, risk, &mut scan, position, o);
    }
    summarise(&req, scan)
}

/// Every node count and market of one offering: rejected, or offered to the ranking.
fn scan_offering<'a>(
    req: &Request<'a>,
    risk: &SpotRisk,
    scan: &mut Scan<'a>,
    position: usize,
    o: &'a Offering,
) {
    scan.considered += (req.nodes.len() * MARKETS.len()) as u64;
    if req.names_places && !filter::sold_where_asked(req.job, o) {
        let refusal = (RejectReason::FilteredByConstraint, reject::Detail::None);
        scan.rejected.add_all(refusal, position, &req.nodes);
        return;
    }
    let (shape, fits) = match scan.plans.of(req, &mut scan.near, position) {
        Ok(planned) => planned,
        Err(refusal) => {
            scan.rejected.add_all(refusal, position, &req.nodes);
            return;
        }
    };
    for (&n, fit) in req.nodes.iter().zip(fits) {
        let fit = match fit {
            Ok(fit) => fit,
            Err(refusal) => {
                for market in MARKETS {
                    scan.rejected.add(*refusal, position, n, market);
                }
                continue;
            }
        };
        let at = At {
            position,
            o,
            shape,
            fit,
            nodes: n,
        };
        for market in MARKETS {
            match configure(req, risk, &mut scan.rate_sources, &at, market) {
                Ok(scored) => scan.best.offer(&scored),
                Err(refusal) => {
                    note_near_miss(&mut scan.near, refusal);
                    scan.rejected.add(refusal, position, n, market);
                }
            }
        }
    }
}

/// An offering at a node count the job fits.
struct At<'x, 'a> {
    position: usize,
    o: &'x Offering,
    shape: &'x ShapePlan,
    fit: &'x Fit<'a>,
    nodes: u32,
}

/// One feasible configuration in `market`, or why not.
fn configure<'a>(
    req: &Request<'a>,
    risk: &SpotRisk,
    rate_sources: &mut RateSourcesSeen,
    at: &At<'_, 'a>,
    market: Market,
) -> Result<Scored<'a>, Refusal> {
    let At {
        position,
        o,
        shape,
        fit,
        nodes: n,
    } = *at;
    let price = o
        .price(market)
        .ok_or((RejectReason::NoPrice, reject::Detail::None))?;
    let t = &fit.throughput;
    let run = market::run_in_market(req.job, risk, o, n, t.run_hours, market, rate_sources)?;
    let node_price = price.dollars();
    let costed = market::cost_and_time(
        req.job,
        shape.billing,
        shape.startup_min,
        node_price,
        n,
        run.run_hours,
    )?;
    Ok(Scored {
        position,
        offering_id: o.id,
        nodes: n,
        market,
        degree: fit.degree,
        need: fit.need,
        usable: shape.usable,
        basis: t.basis,
        rate: t.rate,
        unit: t.unit,
        startup_min: shape.startup_min,
        hours: costed.hours,
        billed_hours: costed.billed_hours,
        cost: costed.cost,
        interruptions: run.interruptions,
        spot_rate: run.spot_rate,
        node_price,
        total_price: costed.total_price,
    })
}

/// A deadline or budget missed says how far off the best such option was.
fn note_near_miss(near: &mut NearMisses, (reason, detail): Refusal) {
    match (reason, detail) {
        (RejectReason::MissesDeadline, reject::Detail::Hours(h)) => {
            near.fastest_hours = Some(near.fastest_hours.map_or(h, |f: f64| f.min(h)));
        }
        (RejectReason::OverBudget, reject::Detail::Cost(c)) => {
            near.cheapest_cost = Some(near.cheapest_cost.map_or(c, |f: f64| f.min(c)));
        }
        _ => {}
    }
}

/// The decision: the ranked candidates with their reasons, the job's profile, rejections,
/// suggestions where nothing fits, and the assumptions behind the figures.
fn summarise(req: &Request, scan: Scan) -> InstanceDecision {
    let (catalog, job) = (req.catalog, req.job);
    let feasible_count = scan.best.feasible();
    let ranked = scan.best.into_ranked();
    let best_key = ranked
        .first()
        .map(|c| rank::objective_key(job.objective, c).0);
    let candidates = ranked
        .iter()
        .enumerate()
        .map(|(i, s)| explain::candidate(catalog, job, s, i + 1, feasible_count, best_key))
        .collect::<Vec<_>>();
    let memory_rejections = scan.rejected.count(RejectReason::MemoryDoesNotFit);
    let suggestions = if candidates.is_empty() {
        explain::suggest(job, &scan.near, memory_rejections)
    } else {
        Vec::new()
    };
    // Whether memory is the binding need is judged among configurations the request allows.
    let allowed = scan.considered
        - scan.rejected.count(RejectReason::FilteredByConstraint)
        - scan.rejected.count(RejectReason::FractionalGpu)
        - scan.rejected.count(RejectReason::TooFewGpusPerNode);
    let total_flops = throughput::total_flops(job, catalog);
    let profile = explain::profile(job, total_flops, memory_rejections, allowed);
    let assumptions = explain::assumptions(catalog, job, &ranked, scan.rate_sources);
    InstanceDecision {
        candidates,
        considered: scan.considered,
        feasible: feasible_count,
        profile,
        rejected: scan.rejected.into_list(catalog),
        suggestions,
        assumptions,
    }
}

#[cfg(test)]
mod tests;
