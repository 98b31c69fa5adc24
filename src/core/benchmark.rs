//! Measured benchmarks: a named workload's throughput on an instance type at a size, what the
//! measurements say about scaling, and which sizes to measure next.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::catalog::{CatalogSnapshot, Market, Offering};

/// Scaling efficiency below which a size counts as communication-bound, by default.
pub const DEFAULT_COMMUNICATION_BOUND_BELOW: f64 = 0.8;

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Benchmark {
    pub id: i64,
    pub workload: String,
    pub provider: String,
    pub instance_type: String,
    /// GPUs per node.
    pub gpus: u32,
    pub nodes: u32,
    pub steps: Option<i64>,
    pub samples_per_sec: Option<f64>,
    pub step_time_sec: Option<f64>,
    pub measured_at_ms: i64,
}

impl Benchmark {
    /// Throughput and its unit: samples per second when measured, else steps per second.
    pub fn throughput(&self) -> (f64, &'static str) {
        match (self.samples_per_sec, self.step_time_sec) {
            (Some(s), _) => (s, "samples_per_sec"),
            (None, Some(t)) => (1.0 / t, "steps_per_sec"),
            (None, None) => (0.0, "steps_per_sec"),
        }
    }

    pub fn total_gpus(&self) -> u64 {
        u64::from(self.gpus) * u64::from(self.nodes)
    }
}

/// Keeps the newest measurement of each (workload, provider, instance type, size), in a
/// stable order.
pub fn latest(benchmarks: Vec<Benchmark>) -> Vec<Benchmark> {
    let mut newest: BTreeMap<(String, String, String, u32, u32), Benchmark> = BTreeMap::new();
    for b in benchmarks {
        let key = (
            b.workload.to_lowercase(),
            b.provider.clone(),
            b.instance_type.clone(),
            b.gpus,
            b.nodes,
        );
        match newest.get(&key) {
            Some(old) if (old.measured_at_ms, old.id) >= (b.measured_at_ms, b.id) => {}
            _ => {
                newest.insert(key, b);
            }
        }
    }
    newest.into_values().collect()
}

/// One measured size of one instance type, with what it is worth.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SizeSummary {
    pub gpus: u32,
    pub nodes: u32,
    pub throughput: f64,
    pub throughput_unit: &'static str,
    /// Throughput per USD of hourly price at the cheapest on-demand price listed.
    pub per_dollar_on_demand: Option<f64>,
    pub per_dollar_spot: Option<f64>,
    /// Throughput per GPU against the smallest size measured (1.0 = linear).
    pub scaling_efficiency: f64,
    pub communication_bound: bool,
    pub measured_at_ms: i64,
}

/// All measured sizes of one instance type for one workload.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct InstanceSummary {
    pub provider: String,
    pub instance_type: String,
    pub gpu: Option<String>,
    pub sizes: Vec<SizeSummary>,
}

fn cheapest(
    catalog: &CatalogSnapshot,
    provider: &str,
    instance_type: &str,
    market: Market,
) -> Option<f64> {
    catalog
        .offerings_of(provider, instance_type)
        .filter_map(|o| o.price(market))
        .min()
        .map(|m| m.dollars())
}

/// Per instance type and size: throughput, throughput per hourly dollar, scaling against the
/// smallest size, and whether scaling has become communication-bound.
pub fn summarise(
    catalog: &CatalogSnapshot,
    workload: &str,
    bound_below: f64,
) -> Vec<InstanceSummary> {
    let mut by_type: BTreeMap<(String, String), Vec<&Benchmark>> = BTreeMap::new();
    for b in catalog
        .benchmarks()
        .iter()
        .filter(|b| b.workload.eq_ignore_ascii_case(workload))
    {
        by_type
            .entry((b.provider.clone(), b.instance_type.clone()))
            .or_default()
            .push(b);
    }
    by_type
        .into_iter()
        .map(|((provider, instance_type), mut runs)| {
            runs.sort_by_key(|b| (b.total_gpus(), b.nodes));
            let on_demand = cheapest(catalog, &provider, &instance_type, Market::OnDemand);
            let spot = cheapest(catalog, &provider, &instance_type, Market::Spot);
            let gpu = catalog
                .offerings_of(&provider, &instance_type)
                .next()
                .map(|o| o.spec.gpu.clone());
            let sizes = runs
                .iter()
                .map(|b| {
                    let (throughput, unit) = b.throughput();
                    // The smallest size measured in the same unit is the baseline.
                    let base = runs
                        .iter()
                        .find(|r| r.throughput().1 == unit)
                        .copied()
                        .unwrap_or(b);
                    let efficiency = match (b.samples_per_sec, b.step_time_sec, base.step_time_sec)
                    {
                        // Samples per second: per-GPU throughput against the baseline's.
                        (Some(s), _, _) => {
                            let per_gpu = s / b.total_gpus() as f64;
                            let base_per_gpu = base.throughput().0 / base.total_gpus() as f64;
                            if base_per_gpu > 0.0 {
                                per_gpu / base_per_gpu
                            } else {
                                1.0
                            }
                        }
                        // Step time with a fixed batch per GPU: linear scaling keeps the step
                        // time constant, so efficiency is how much longer a step got.
                        (None, Some(t), Some(t0)) => t0 / t,
                        _ => 1.0,
                    };
                    SizeSummary {
                        gpus: b.gpus,
                        nodes: b.nodes,
                        throughput,
                        throughput_unit: unit,
                        per_dollar_on_demand: on_demand
                            .map(|p| throughput / (p * f64::from(b.nodes))),
                        per_dollar_spot: spot.map(|p| throughput / (p * f64::from(b.nodes))),
                        scaling_efficiency: efficiency,
                        communication_bound: efficiency < bound_below,
                        measured_at_ms: b.measured_at_ms,
                    }
                })
                .collect();
            InstanceSummary {
                provider,
                instance_type,
                gpu,
                sizes,
            }
        })
        .collect()
}

/// Measured throughput, in samples per second, of `workload` on offering `o` at `nodes` nodes:
/// the measurement at that size if there is one, else the nearest measured node count scaled
/// linearly and by the efficiency the measurements show between their sizes (or `fallback`
/// per doubling when only one size was measured).
pub fn measured_samples_per_sec(
    catalog: &CatalogSnapshot,
    workload: &str,
    o: &Offering,
    nodes: u32,
    fallback_per_doubling: f64,
) -> Option<f64> {
    let gpus = o.spec.gpu_count as u32;
    let mut runs: Vec<(u32, f64)> = catalog
        .benchmarks_for(workload, &o.key.provider, &o.key.instance_type)
        .filter(|b| b.gpus == gpus)
        .filter_map(|b| b.samples_per_sec.map(|s| (b.nodes, s)))
        .collect();
    if runs.is_empty() {
        return None;
    }
    runs.sort_by_key(|r| r.0);
    if let Some((_, s)) = runs.iter().find(|r| r.0 == nodes) {
        return Some(*s);
    }
    // Efficiency per doubling between the smallest and largest measured node counts.
    let per_doubling = match (runs.first(), runs.last()) {
        (Some(&(n0, s0)), Some(&(n1, s1))) if n1 > n0 => {
            let ratio = f64::from(n1) / f64::from(n0);
            ((s1 / s0) / ratio).powf(1.0 / ratio.log2()).min(1.0)
        }
        _ => fallback_per_doubling,
    };
    let &(k, s) = runs.iter().rev().find(|r| r.0 <= nodes).unwrap_or(&runs[0]);
    let ratio = f64::from(nodes) / f64::from(k);
    Some(s * ratio * per_doubling.powf(ratio.log2()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(nodes: u32, gpus: u32, sps: f64, at: i64) -> Benchmark {
        Benchmark {
            id: at,
            workload: "llama".into(),
            provider: "aws".into(),
            instance_type: "p4d.24xlarge".into(),
            gpus,
            nodes,
            steps: Some(1000),
            samples_per_sec: Some(sps),
            step_time_sec: None,
            measured_at_ms: at,
        }
    }

    #[test]
    fn only_the_newest_measurement_of_a_size_counts() {
        let kept = latest(vec![
            run(1, 8, 100.0, 1),
            run(1, 8, 120.0, 2),
            run(2, 8, 190.0, 1),
        ]);
        assert_eq!(
            kept.iter()
                .map(|b| b.samples_per_sec.unwrap())
                .collect::<Vec<_>>(),
            vec![120.0, 190.0]
        );
    }

    #[test]
    fn step_time_is_steps_per_second() {
        let mut b = run(1, 8, 1.0, 1);
        b.samples_per_sec = None;
        b.step_time_sec = Some(0.5);
        assert_eq!(b.throughput(), (2.0, "steps_per_sec"));
    }
}

/// One size to measure.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PlannedRun {
    pub instance_type: String,
    pub zone: Option<String>,
    pub gpus: u32,
    pub nodes: u32,
    /// USD per hour for all nodes, at the market the selection preferred.
    pub price_per_hour_total: f64,
    pub market: Market,
}

/// Which three sizes of one family to measure, and for how many steps.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct BenchmarkPlan {
    pub provider: String,
    pub region: String,
    pub gpu: String,
    pub steps: u32,
    pub runs: Vec<PlannedRun>,
    pub why: Vec<String>,
}

/// Plans the measure-three-sizes practice around `best`, the top candidate of a selection:
/// the same provider, region and GPU model at three sizes that fit the job. Where the family
/// offers fewer than three GPU counts, the largest size is measured at 1, 2 and 4 nodes.
/// `fits(gpus)` says whether the job fits when `gpus` GPUs share its states.
pub fn plan(
    catalog: &CatalogSnapshot,
    best: &Offering,
    market: Market,
    steps: u32,
    fits: impl Fn(u32) -> bool,
) -> BenchmarkPlan {
    // The cheapest offering of each whole GPU count of this GPU in this provider and region.
    let mut by_count: BTreeMap<u32, &Offering> = BTreeMap::new();
    for o in catalog.offerings().iter().filter(|o| {
        o.key.provider == best.key.provider
            && o.key.region == best.key.region
            && o.spec.gpu == best.spec.gpu
            && o.spec.gpu_count >= 1.0
            && o.price(market).is_some()
    }) {
        let count = o.spec.gpu_count as u32;
        if !fits(count) {
            continue;
        }
        let cheaper = by_count
            .get(&count)
            .is_none_or(|c| o.price(market) < c.price(market));
        if cheaper {
            by_count.insert(count, o);
        }
    }
    let run = |o: &Offering, nodes: u32| PlannedRun {
        instance_type: o.key.instance_type.clone(),
        zone: (!o.key.zone.is_empty()).then(|| o.key.zone.clone()),
        gpus: o.spec.gpu_count as u32,
        nodes,
        price_per_hour_total: o.price(market).map_or(0.0, |p| p.dollars()) * f64::from(nodes),
        market,
    };
    let mut why = vec![format!(
        "the best candidate is {} {} in {}: measure its GPU ({}) at three sizes",
        best.key.provider, best.key.instance_type, best.key.region, best.spec.gpu
    )];
    let runs: Vec<PlannedRun> = if by_count.len() >= 3 {
        why.push(
            "three single-node sizes: throughput per GPU across them shows intra-node scaling"
                .into(),
        );
        by_count.values().take(3).map(|o| run(o, 1)).collect()
    } else {
        let largest = by_count.values().last().copied().unwrap_or(best);
        why.push(format!(
            "fewer than three GPU counts fit here: {} at 1, 2 and 4 nodes shows multi-node scaling",
            largest.key.instance_type
        ));
        [1, 2, 4].into_iter().map(|n| run(largest, n)).collect()
    };
    why.push(format!(
        "run {steps} fixed steps at each size, record samples_per_sec, and compare throughput per hourly price; \
         scaling efficiency below {DEFAULT_COMMUNICATION_BOUND_BELOW} marks a size as communication-bound"
    ));
    BenchmarkPlan {
        provider: best.key.provider.clone(),
        region: best.key.region.clone(),
        gpu: best.spec.gpu.clone(),
        steps,
        runs,
        why,
    }
}
