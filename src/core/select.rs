//! Which instance for this job: every offering × node count × market is checked against the
//! job's constraints, estimated (throughput, hours with start-up, billed cost,
//! interruptions), and ranked by the objective. Pure: the catalog snapshot, spot risk and job
//! in; a decision with reasons out. The words people read are in [`explain`].
//!
//! [`select`] is a pipeline over the catalog shape by shape (an instance type with one spec,
//! sold in many places): the request's region and zone lists ([`filter`]); what the shape
//! offers the job, worked out once for all its offerings ([`plan`]: machine checks, memory,
//! throughput and the on-demand run per node count); each offering's price and spot rate,
//! its run in each market and its cost and caps ([`market`]); the best `top_k` kept as the
//! scan goes ([`rank`]), with shapes that cannot reach them counted in bulk
//! ([`outranked`]); and rejections counted once per shape where the shape refuses, with
//! the first few in offering order as examples ([`reject`]), written out as text only at the
//! end.

mod explain;
mod filter;
mod market;
mod outranked;
mod plan;
mod rank;
mod reject;
mod throughput;

use std::borrow::Cow;

use super::benchmark::{Benchmark, MeasuredHow};
use super::catalog::{CatalogSnapshot, Market, PriceRange};
use super::decision::{InstanceDecision, RejectReason, ThroughputSource};
use super::estimate::Estimate;
use super::job::{Job, Work};
use super::spot::{RateSource, SpotRisk, TypeRisk};
use market::{RateSourcesSeen, Timed};
use plan::{Fit, NodeVerdict, ShapePlan};
use rank::{Standing, TopK};
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
/// Names are borrowed from the catalog: a selection notes a few hundred shapes and keeps
/// only a handful of them.
#[derive(Default)]
struct NearMisses<'a> {
    /// The most usable memory per GPU among GPUs the job may use (every filter but memory
    /// passed), the GPU's own memory, and its name.
    largest: Option<(f64, f64, &'a str)>,
    fastest_hours: Option<f64>,
    cheapest_cost: Option<f64>,
    /// GPUs without bf16 that a bf16 job was refused on.
    without_bf16: Vec<&'a str>,
    /// GPUs with no datasheet facts and no benchmark, refused for a job that states work.
    without_facts: Vec<&'a str>,
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
        self.standing().value()
    }

    /// What it is ranked by.
    fn standing(&self) -> Standing {
        Standing {
            cost: self.cost,
            total_price: self.total_price,
            hours: self.hours,
            rate: self.rate,
            spot_factor: self.spot_rate.map_or(1.0, |(_, _, f)| f),
        }
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
    /// The verdicts per node count of the shape being scanned.
    fits: Vec<NodeVerdict<'a>>,
    /// The last spot run per node count of the shape being scanned.
    spot_runs: Vec<SpotRun>,
    rejected: RejectTally,
    near: NearMisses<'a>,
    best: TopK<'a>,
    rate_sources: RateSourcesSeen,
}

impl Scan<'_> {
    fn new(req: &Request) -> Self {
        Self {
            considered: (req.catalog.offerings().len() * req.nodes.len() * MARKETS.len()) as u64,
            fits: Vec::with_capacity(req.nodes.len()),
            spot_runs: Vec::with_capacity(req.nodes.len()),
            rejected: RejectTally::default(),
            near: NearMisses::default(),
            best: TopK::new(req.job),
            rate_sources: (false, false),
        }
    }
}

/// Chooses instances for `job` from `catalog`.
pub fn select(catalog: &CatalogSnapshot, risk: &SpotRisk, job: &Job) -> InstanceDecision {
    let req = Request::new(catalog, job);
    let mut scan = Scan::new(&req);
    for shape in scan_order(&req) {
        scan_shape(&req, risk, &mut scan, shape);
    }
    summarise(&req, scan)
}

/// Whether the request's regions and zones allow the offering at `position`.
fn sold_where_asked(req: &Request, position: u32) -> bool {
    !req.names_places
        || filter::sold_where_asked(req.job, &req.catalog.offerings()[position as usize])
}

/// The shapes in the order a scan in offering order would plan them: by their first
/// offering sold where the request asks. The near misses keep the first of equals, so the
/// order is part of the answer. Shapes sold nowhere the request asks come last, unplanned.
fn scan_order(req: &Request) -> Vec<usize> {
    let shapes = req.catalog.shapes();
    if !req.names_places {
        return (0..shapes.len()).collect();
    }
    let mut firsts: Vec<(u32, usize)> = (0..shapes.len())
        .map(|shape| {
            let members = shapes.members(shape);
            let first = members.iter().copied().find(|&p| sold_where_asked(req, p));
            (first.unwrap_or(u32::MAX), shape)
        })
        .collect();
    firsts.sort_unstable();
    firsts.into_iter().map(|(_, shape)| shape).collect()
}

/// Every offering of one shape, at every node count and market: rejected, or offered to
/// the ranking. The shape is planned once, and what it refuses is counted once, for all its
/// offerings.
fn scan_shape<'a>(req: &Request<'a>, risk: &SpotRisk, scan: &mut Scan<'a>, shape: usize) {
    let catalog = req.catalog;
    let members = catalog.shapes().members(shape);
    let filtered = (RejectReason::FilteredByConstraint, reject::Detail::None);
    let sold: Cow<[u32]> = if req.names_places {
        let (sold, unsold): (Vec<u32>, Vec<u32>) =
            members.iter().partition(|&&p| sold_where_asked(req, p));
        scan.rejected.add_each(filtered, &unsold, &req.nodes);
        Cow::Owned(sold)
    } else {
        Cow::Borrowed(members)
    };
    let Some(&first) = sold.first() else {
        return;
    };
    let mut fits = std::mem::take(&mut scan.fits);
    fits.clear();
    let first = first as usize;
    let o = &catalog.offerings()[first];
    match plan::plan_shape(req, first, &mut scan.near, &mut fits) {
        Err(refusal) => scan.rejected.add_each(refusal, &sold, &req.nodes),
        Ok(plan) => {
            for (n, fit) in req.nodes.iter().zip(&fits) {
                if let Err(refusal) = fit {
                    scan.rejected
                        .add_each(*refusal, &sold, std::slice::from_ref(n));
                }
            }
            if fits.iter().any(Result::is_ok) {
                scan.spot_runs.clear();
                scan.spot_runs.resize(req.nodes.len(), SpotRun::default());
                // One provider and instance type: its rates are found once, region by region.
                let risk = risk.of_type(&o.key.provider, &o.key.instance_type);
                // Without region or zone lists, a shape's prices are those of the snapshot.
                let prices = if req.names_places {
                    &PriceRange::of(catalog.quotes(), &sold)
                } else {
                    catalog.shape_prices(shape)
                };
                if !outranked::count_if_outranked(req, &risk, scan, &plan, &fits, &sold, prices) {
                    for &p in sold.iter() {
                        scan_offering(req, &risk, scan, &plan, &fits, p as usize);
                    }
                }
            }
        }
    }
    scan.fits = fits;
}

/// Every node count the shape fits (`fits` holds a verdict per node count of the request)
/// and every market of one offering.
fn scan_offering<'a>(
    req: &Request<'a>,
    risk: &TypeRisk,
    scan: &mut Scan<'a>,
    shape: &ShapePlan,
    fits: &[NodeVerdict<'a>],
    position: usize,
) {
    let q = &req.catalog.quotes()[position];
    // Looked up at the first spot price, once for all node counts.
    let mut rate = None;
    for (i, (&n, fit)) in req.nodes.iter().zip(fits).enumerate() {
        let Ok(fit) = fit else {
            continue;
        };
        let at = At {
            position,
            shape,
            fit,
            nodes: n,
        };
        for market in MARKETS {
            let Some(node_price) = q.price(market) else {
                scan.rejected.add(
                    (RejectReason::NoPrice, reject::Detail::None),
                    position,
                    n,
                    market,
                );
                continue;
            };
            let timed = match market {
                Market::OnDemand => Ok(&fit.on_demand),
                Market::Spot => {
                    let rate = *rate.get_or_insert_with(|| {
                        let o = &req.catalog.offerings()[position];
                        market::spot_rate(req.job, risk, o, &mut scan.rate_sources)
                    });
                    rate.and_then(|rate| spot_run(req, &at, rate, &mut scan.spot_runs[i]))
                }
            };
            let costed = timed.and_then(|timed| {
                market::cost_and_time(req.job, timed, node_price, n).map(|c| (timed, c))
            });
            match costed {
                Ok((timed, costed)) => {
                    let standing = Standing {
                        cost: costed.cost,
                        total_price: costed.total_price,
                        hours: timed.hours,
                        rate: fit.throughput.rate,
                        spot_factor: timed.run.spot_rate.map_or(1.0, |(_, _, f)| f),
                    };
                    scan.best.offer(&standing, (q.id, n, market), || {
                        scored(&at, market, node_price, timed, &costed)
                    });
                }
                Err(refusal) => {
                    note_near_miss(&mut scan.near, refusal);
                    scan.rejected.add(refusal, position, n, market);
                }
            }
        }
    }
}

/// The spot run of the shape being scanned at one node count and one interruption rate.
/// The offerings of a shape share a handful of rates (the advisor's buckets, the provider's
/// default), so the last one is kept per node count.
#[derive(Clone, Copy)]
struct SpotRun {
    /// The rate (its bits) and source the run was worked out for; `None` before the first.
    key: Option<(u64, RateSource)>,
    run: Result<Timed, Refusal>,
}

impl Default for SpotRun {
    fn default() -> Self {
        Self {
            key: None,
            run: Err((RejectReason::SpotNotAllowed, reject::Detail::None)),
        }
    }
}

fn spot_run<'s>(
    req: &Request,
    at: &At,
    rate: (f64, RateSource),
    last: &'s mut SpotRun,
) -> Result<&'s Timed, Refusal> {
    let key = Some((rate.0.to_bits(), rate.1));
    if last.key != key {
        last.run = market::on_spot(req.job, rate, at.nodes, at.fit.throughput.run_hours)
            .map(|run| market::timed(at.shape.billing, at.shape.startup_min, run));
        last.key = key;
    }
    last.run.as_ref().map_err(|refusal| *refusal)
}

/// An offering at a node count the job fits.
struct At<'x, 'a> {
    position: usize,
    shape: &'x ShapePlan,
    fit: &'x Fit<'a>,
    nodes: u32,
}

/// The whole of one feasible configuration in `market` at `node_price`, once it ranks among
/// the best.
fn scored<'a>(
    at: &At<'_, 'a>,
    market: Market,
    node_price: f64,
    timed: &Timed,
    costed: &market::Costed,
) -> Scored<'a> {
    let At {
        position,
        shape,
        fit,
        nodes: n,
    } = *at;
    let t = &fit.throughput;
    Scored {
        position,
        nodes: n,
        market,
        degree: fit.degree,
        need: fit.need,
        usable: shape.usable,
        basis: t.basis,
        rate: t.rate,
        unit: t.unit,
        startup_min: shape.startup_min,
        hours: timed.hours,
        billed_hours: timed.billed_hours,
        cost: costed.cost,
        interruptions: timed.run.interruptions,
        spot_rate: timed.run.spot_rate,
        node_price,
        total_price: costed.total_price,
    }
}

/// A deadline or budget missed says how far off the best such option was.
fn note_near_miss(near: &mut NearMisses<'_>, (reason, detail): Refusal) {
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
        .map(|c| rank::objective_key(job.objective, &c.standing()).0);
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
