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

/// The measurement another is compared against: the smallest GPU count measured, in the
/// same unit, of the same workload and GPU model (on any instance type or node count).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Baseline {
    pub provider: String,
    pub instance_type: String,
    pub gpus: u32,
    pub nodes: u32,
}

impl Baseline {
    fn of(b: &Benchmark) -> Self {
        Self {
            provider: b.provider.clone(),
            instance_type: b.instance_type.clone(),
            gpus: b.gpus,
            nodes: b.nodes,
        }
    }
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
    /// Throughput per GPU against the baseline's (1.0 = linear); for step times with a fixed
    /// batch per GPU, the baseline's step time over this one's.
    pub scaling_efficiency: f64,
    pub communication_bound: bool,
    /// What `scaling_efficiency` compares against.
    pub baseline: Baseline,
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

/// Throughput per GPU, in the measurement's unit.
fn per_gpu(b: &Benchmark) -> f64 {
    b.throughput().0 / b.total_gpus().max(1) as f64
}

/// Scaling efficiency of `b` against `base`, measured in the same unit: per-GPU samples per
/// second against the baseline's, or, for step times with a fixed batch per GPU (where
/// linear scaling keeps the step time constant), the baseline's step time over this one's.
pub fn efficiency(b: &Benchmark, base: &Benchmark) -> f64 {
    match (b.samples_per_sec, b.step_time_sec, base.step_time_sec) {
        (Some(_), _, _) if per_gpu(base) > 0.0 => per_gpu(b) / per_gpu(base),
        (None, Some(t), Some(t0)) if t > 0.0 => t0 / t,
        _ => 1.0,
    }
}

/// The baseline among `runs` (one workload, one GPU model) for a measurement in `unit`: the
/// smallest total GPU count measured in that unit; among several at that count, the one
/// with the most throughput per GPU, then the fewest nodes, then by name, so that the choice
/// is stable.
fn baseline<'a>(runs: &[&'a Benchmark], unit: &str) -> Option<&'a Benchmark> {
    runs.iter()
        .copied()
        .filter(|r| r.throughput().1 == unit)
        .min_by(|a, b| {
            a.total_gpus()
                .cmp(&b.total_gpus())
                .then(per_gpu(b).total_cmp(&per_gpu(a)))
                .then(a.nodes.cmp(&b.nodes))
                .then((&a.provider, &a.instance_type).cmp(&(&b.provider, &b.instance_type)))
        })
}

/// Per instance type and size: throughput, throughput per hourly dollar, scaling against the
/// smallest measured GPU count of the same GPU model, and whether scaling has become
/// communication-bound.
pub fn summarise(
    catalog: &CatalogSnapshot,
    workload: &str,
    bound_below: f64,
) -> Vec<InstanceSummary> {
    let mine: Vec<&Benchmark> = catalog
        .benchmarks()
        .iter()
        .filter(|b| b.workload.eq_ignore_ascii_case(workload))
        .collect();
    // Sizes compare within a GPU model; an instance type the catalog does not know is its own
    // group.
    let group_of = |b: &Benchmark| -> String {
        match catalog.gpu_of_instance_type(&b.provider, &b.instance_type) {
            Some(gpu) => format!("gpu:{}", gpu.to_lowercase()),
            None => format!("type:{}/{}", b.provider, b.instance_type),
        }
    };
    let mut by_group: BTreeMap<String, Vec<&Benchmark>> = BTreeMap::new();
    let mut by_type: BTreeMap<(String, String), Vec<&Benchmark>> = BTreeMap::new();
    for &b in &mine {
        by_group.entry(group_of(b)).or_default().push(b);
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
                .gpu_of_instance_type(&provider, &instance_type)
                .map(str::to_string);
            let group = by_group
                .get(&group_of(runs[0]))
                .map_or(&[][..], Vec::as_slice);
            let sizes = runs
                .iter()
                .map(|&b| {
                    let (throughput, unit) = b.throughput();
                    let base = baseline(group, unit).unwrap_or(b);
                    let efficiency = efficiency(b, base);
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
                        baseline: Baseline::of(base),
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

/// Measured throughput for one configuration, and what it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured<'a> {
    pub samples_per_sec: f64,
    /// The smallest measured size of this GPU model, that the efficiency compares against.
    pub baseline: &'a Benchmark,
    /// Scaling efficiency at this size against the baseline: measured, interpolated between
    /// measured sizes, or extrapolated beyond them.
    pub efficiency: f64,
    pub how: MeasuredHow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasuredHow {
    /// This instance type was measured at this size.
    Exact,
    /// Another instance type of the same GPU model was measured at this GPU count.
    SameGpuCount,
    /// Between two measured GPU counts.
    Interpolated,
    /// Beyond the measured GPU counts, at the per-doubling efficiency between the smallest
    /// and largest (or the fallback with a single size).
    Extrapolated,
}

/// Measured throughput, in samples per second, of `workload` on offering `o` at `nodes`
/// nodes, from measurements of the same GPU model. The same comparison as [`summarise`]:
/// per-GPU throughput against the smallest measured GPU count, so the estimate is
/// `baseline per GPU × GPUs × efficiency`, with the efficiency that measurements at this GPU
/// count show (this instance type's first), interpolated per doubling between measured
/// counts, or extrapolated beyond the largest by the per-doubling efficiency between the
/// smallest and the largest. With a single measured count, `fallback(baseline)` gives the
/// efficiency from the baseline's size to this one (the datasheet model's scaling).
pub fn measured_samples_per_sec<'a>(
    catalog: &'a CatalogSnapshot,
    workload: &str,
    o: &Offering,
    nodes: u32,
    fallback: impl Fn(&Benchmark) -> f64,
) -> Option<Measured<'a>> {
    let gpus_per_node = o.spec.gpu_count as u32;
    let runs: Vec<&Benchmark> = catalog
        .benchmarks_of_gpu(workload, &o.spec.gpu)
        .filter(|b| b.samples_per_sec.is_some())
        .collect();
    let base = baseline(&runs, "samples_per_sec")?;
    let base_per_gpu = per_gpu(base);
    let total = u64::from(gpus_per_node) * u64::from(nodes);
    let scale = |efficiency: f64, how| Measured {
        samples_per_sec: base_per_gpu * total as f64 * efficiency,
        baseline: base,
        efficiency,
        how,
    };
    let same_type =
        |b: &Benchmark| b.provider == o.key.provider && b.instance_type == o.key.instance_type;
    if let Some(exact) = runs
        .iter()
        .find(|b| same_type(b) && b.gpus == gpus_per_node && b.nodes == nodes)
    {
        return Some(Measured {
            samples_per_sec: exact.throughput().0,
            baseline: base,
            efficiency: efficiency(exact, base),
            how: MeasuredHow::Exact,
        });
    }
    // The efficiency at each measured GPU count: this instance type's where it was measured,
    // else the best other.
    let mut by_count: BTreeMap<u64, (bool, f64)> = BTreeMap::new();
    for b in &runs {
        let candidate = (same_type(b), efficiency(b, base));
        by_count
            .entry(b.total_gpus())
            .and_modify(|e| {
                if (candidate.0, candidate.1) > (e.0, e.1) {
                    *e = candidate;
                }
            })
            .or_insert(candidate);
    }
    if let Some(&(_, e)) = by_count.get(&total) {
        return Some(scale(e, MeasuredHow::SameGpuCount));
    }
    let below = by_count.range(..total).next_back();
    let above = by_count.range(total..).next();
    let log2 = |n: u64| (n as f64).log2();
    match (below, above) {
        (Some((&n0, &(_, e0))), Some((&n1, &(_, e1)))) => {
            let t = (log2(total) - log2(n0)) / (log2(n1) - log2(n0));
            Some(scale(e0 * (e1 / e0).powf(t), MeasuredHow::Interpolated))
        }
        // Fewer GPUs than any measurement: no loss is known below the baseline.
        (None, Some(_)) => Some(scale(1.0, MeasuredHow::Interpolated)),
        (Some((&largest, &(_, e_largest))), None) => {
            let smallest = base.total_gpus();
            let e = if largest > smallest {
                let per_doubling = e_largest
                    .powf(1.0 / (log2(largest) - log2(smallest)))
                    .min(1.0);
                e_largest * per_doubling.powf(log2(total) - log2(largest))
            } else {
                fallback(base)
            };
            Some(scale(e, MeasuredHow::Extrapolated))
        }
        (None, None) => None,
    }
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

    fn p3(id: i64, instance_type: &str, gpus: f64, price: f64) -> Offering {
        use crate::core::catalog::Interconnect;
        use crate::core::test_support::p4d;
        p4d()
            .id(id)
            .instance_type(instance_type)
            .gpus("V100", gpus, 16.0)
            .host(8.0 * gpus, 61.0 * gpus)
            .fabric(Interconnect::None, Some(10.0))
            .local_nvme_gb(Some(0.0))
            .prices(Some(price), None)
            .build()
    }

    fn sized(
        instance_type: &str,
        gpus: u32,
        nodes: u32,
        sps: Option<f64>,
        step: Option<f64>,
    ) -> Benchmark {
        Benchmark {
            id: i64::from(gpus * 10 + nodes),
            workload: "resnet".into(),
            provider: "aws".into(),
            instance_type: instance_type.into(),
            gpus,
            nodes,
            steps: Some(1000),
            samples_per_sec: sps,
            step_time_sec: step,
            measured_at_ms: 1,
        }
    }

    fn p3_catalog(benchmarks: Vec<Benchmark>) -> CatalogSnapshot {
        CatalogSnapshot::with_benchmarks(
            Vec::new(),
            Vec::new(),
            vec![
                p3(1, "p3.2xlarge", 1.0, 3.06),
                p3(2, "p3.8xlarge", 4.0, 12.24),
                p3(3, "p3.16xlarge", 8.0, 24.48),
            ],
            benchmarks,
        )
    }

    #[test]
    fn sizes_on_different_instance_types_compare_per_gpu_against_the_smallest() {
        // 400 samples/s on one V100, 1400 on four, 2600 on eight: per GPU 400, 350, 325.
        let catalog = p3_catalog(vec![
            sized("p3.2xlarge", 1, 1, Some(400.0), None),
            sized("p3.8xlarge", 4, 1, Some(1400.0), None),
            sized("p3.16xlarge", 8, 1, Some(2600.0), None),
        ]);
        let summary = summarise(&catalog, "ResNet", 0.85);
        let efficiency: Vec<(String, f64, bool)> = summary
            .iter()
            .flat_map(|t| {
                t.sizes.iter().map(|s| {
                    (
                        t.instance_type.clone(),
                        s.scaling_efficiency,
                        s.communication_bound,
                    )
                })
            })
            .collect();
        assert_eq!(
            efficiency,
            vec![
                ("p3.16xlarge".into(), 0.8125, true),
                ("p3.2xlarge".into(), 1.0, false),
                ("p3.8xlarge".into(), 0.875, false),
            ]
        );
        assert!(
            summary
                .iter()
                .all(|t| t.sizes[0].baseline.instance_type == "p3.2xlarge")
        );
    }

    #[test]
    fn sizes_that_differ_by_node_count_compare_per_gpu_against_the_smallest() {
        // One V100 on a p3.2xlarge, then p3.16xlarge nodes: 1 (8 GPUs), 2 (16) and 4 (32)
        // at 2600, 4800 and 8960 samples/s, per GPU 325, 300 and 280 against 400.
        let catalog = p3_catalog(vec![
            sized("p3.2xlarge", 1, 1, Some(400.0), None),
            sized("p3.16xlarge", 8, 1, Some(2600.0), None),
            sized("p3.16xlarge", 8, 2, Some(4800.0), None),
            sized("p3.16xlarge", 8, 4, Some(8960.0), None),
        ]);
        let summary = summarise(&catalog, "resnet", 0.8);
        let big = summary
            .iter()
            .find(|t| t.instance_type == "p3.16xlarge")
            .unwrap();
        let sizes: Vec<(u32, f64, bool)> = big
            .sizes
            .iter()
            .map(|s| (s.nodes, s.scaling_efficiency, s.communication_bound))
            .collect();
        assert_eq!(
            sizes,
            vec![(1, 0.8125, false), (2, 0.75, true), (4, 0.7, true)]
        );
        assert!(
            big.sizes
                .iter()
                .all(|s| s.baseline.instance_type == "p3.2xlarge")
        );
        // Throughput per dollar pays for every node: 4800 / (2 × $24.48).
        let two = &big.sizes[1];
        assert!((two.per_dollar_on_demand.unwrap() - 4800.0 / 48.96).abs() < 1e-9);
    }

    #[test]
    fn step_times_compare_against_the_smallest_gpu_count_too() {
        // A fixed batch per GPU: 0.5 s on one V100, 0.6 s on four, 0.8 s on eight.
        let catalog = p3_catalog(vec![
            sized("p3.2xlarge", 1, 1, None, Some(0.5)),
            sized("p3.8xlarge", 4, 1, None, Some(0.6)),
            sized("p3.16xlarge", 8, 1, None, Some(0.8)),
        ]);
        let summary = summarise(&catalog, "resnet", 0.8);
        let e = |t: &str| {
            summary
                .iter()
                .find(|s| s.instance_type == t)
                .map(|s| s.sizes[0].scaling_efficiency)
                .unwrap()
        };
        assert_eq!(e("p3.2xlarge"), 1.0);
        assert!((e("p3.8xlarge") - 0.5 / 0.6).abs() < 1e-12);
        assert_eq!(e("p3.16xlarge"), 0.625);
    }

    #[test]
    fn decide_reads_the_same_comparison_at_unmeasured_sizes() {
        let catalog = p3_catalog(vec![
            sized("p3.2xlarge", 1, 1, Some(400.0), None),
            sized("p3.16xlarge", 8, 1, Some(2600.0), None),
        ]);
        let p3_8 = catalog.offering(2).unwrap().clone();
        let m = measured_samples_per_sec(&catalog, "resnet", &p3_8, 1, |_| 0.5).unwrap();
        // Four GPUs lie between one (1.0) and eight (0.8125): 2 of 3 doublings,
        // 0.8125^(2/3) = 0.87078; 400 × 4 × that.
        assert_eq!(m.how, MeasuredHow::Interpolated);
        assert!((m.efficiency - 0.8125f64.powf(2.0 / 3.0)).abs() < 1e-12);
        assert!((m.samples_per_sec - 1600.0 * 0.8125f64.powf(2.0 / 3.0)).abs() < 1e-9);
        // Two p3.16xlarge nodes (16 GPUs): one doubling past 8 at the per-doubling
        // efficiency from 1 to 8 GPUs, 0.8125^(1/3).
        let p3_16 = catalog.offering(3).unwrap().clone();
        let m = measured_samples_per_sec(&catalog, "resnet", &p3_16, 2, |_| 0.5).unwrap();
        assert_eq!(m.how, MeasuredHow::Extrapolated);
        assert!((m.efficiency - 0.8125f64.powf(4.0 / 3.0)).abs() < 1e-12);
        assert!((m.samples_per_sec - 400.0 * 16.0 * 0.8125f64.powf(4.0 / 3.0)).abs() < 1e-9);
        // Its own size measured: the measurement itself.
        let m = measured_samples_per_sec(&catalog, "resnet", &p3_16, 1, |_| 0.5).unwrap();
        assert_eq!((m.how, m.samples_per_sec), (MeasuredHow::Exact, 2600.0));
        // One size only: the fallback carries it.
        let one = p3_catalog(vec![sized("p3.2xlarge", 1, 1, Some(400.0), None)]);
        let m = measured_samples_per_sec(&one, "resnet", &p3_16, 1, |_| 0.9).unwrap();
        assert_eq!(m.samples_per_sec, 400.0 * 8.0 * 0.9);
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
    /// What the job's workload already measured at this size, compared as `GET
    /// /v1/benchmarks` compares it; null when not measured yet.
    pub measured: Option<SizeSummary>,
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
    workload: Option<&str>,
    fits: impl Fn(u32) -> bool,
) -> BenchmarkPlan {
    let measured = workload
        .map(|w| summarise(catalog, w, DEFAULT_COMMUNICATION_BOUND_BELOW))
        .unwrap_or_default();
    let measured_size = |o: &Offering, nodes: u32| {
        measured
            .iter()
            .filter(|s| s.provider == o.key.provider && s.instance_type == o.key.instance_type)
            .flat_map(|s| &s.sizes)
            .find(|s| s.gpus == o.spec.gpu_count as u32 && s.nodes == nodes)
            .cloned()
    };
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
        measured: measured_size(o, nodes),
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
         scaling efficiency is throughput per GPU against the smallest GPU count measured of this GPU model \
         (on any instance type or node count), and below {DEFAULT_COMMUNICATION_BOUND_BELOW} marks a size as \
         communication-bound"
    ));
    let done = runs.iter().filter(|r| r.measured.is_some()).count();
    if done > 0 {
        why.push(format!(
            "{done} of the {} sizes are already measured for this workload",
            runs.len()
        ));
    }
    BenchmarkPlan {
        provider: best.key.provider.clone(),
        region: best.key.region.clone(),
        gpu: best.spec.gpu.clone(),
        steps,
        runs,
        why,
    }
}
