//! What one shape (an instance type with its spec, in any region) can do for the job: the
//! machine checks, usable memory, and for each node count whether the job fits and how fast
//! it runs. None of it depends on where the offering is sold or what it costs, so it is
//! worked out once per shape, for all its offerings.

use super::filter::{machine_allowed, throughput_sources};
use super::market::{Timed, on_demand, timed};
use super::reject::{Detail, Refusal};
use super::throughput::{Throughput, Unestimated, throughput};
use super::{MIN_FABRIC_GBPS, NearMisses, Request};
use crate::core::catalog::{Interconnect, Offering};
use crate::core::decision::RejectReason;
use crate::core::job::{Job, usable_gib};
use crate::core::terms::Billing;

/// Whether the offering's network carries multi-node training.
pub(super) fn fabric_ok(o: &Offering) -> bool {
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

/// Whether the job fits `nodes` nodes of the offering: the data-parallel degree and the GiB
/// per GPU it needs.
pub(super) fn fit_nodes(
    job: &Job,
    o: &Offering,
    usable: f64,
    one_node_fits: bool,
    nodes: u32,
) -> Result<(u32, f64), Refusal> {
    if nodes > 1 && one_node_fits {
        return Err((RejectReason::SingleNodeSuffices, Detail::None));
    }
    let degree = (o.spec.gpu_count as u32).saturating_mul(nodes);
    let need = job.memory.gib_per_gpu(degree);
    if need > usable {
        return Err((
            RejectReason::MemoryDoesNotFit,
            Detail::Memory { need, usable },
        ));
    }
    if nodes > 1 && job.require_fast_interconnect && !fabric_ok(o) {
        return Err((RejectReason::NoFastInterconnect, Detail::Interconnect));
    }
    Ok((degree, need))
}

/// A node count the job fits and can be estimated at.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fit<'a> {
    pub degree: u32,
    pub need: f64,
    pub throughput: Throughput<'a>,
    /// The run on demand, which every offering of the shape shares.
    pub on_demand: Timed,
}

/// A node count's verdict: the fit, or why the job cannot run at that size.
pub(super) type NodeVerdict<'a> = Result<Fit<'a>, Refusal>;

/// What a shape offers the job, whatever the region and market.
#[derive(Debug, Clone, Copy)]
pub(super) struct ShapePlan {
    pub usable: f64,
    pub billing: Billing,
    pub startup_min: f64,
}

/// Works out what the shape of the offering at `position` offers the job, noting near misses
/// for the suggestions. `fits` receives one verdict per node count of the request.
pub(super) fn plan_shape<'a>(
    req: &Request<'a>,
    position: usize,
    near: &mut NearMisses<'a>,
    fits: &mut Vec<NodeVerdict<'a>>,
) -> Result<ShapePlan, Refusal> {
    let (job, catalog) = (req.job, req.catalog);
    let o = &catalog.offerings()[position];
    let facts = catalog.gpu_facts_of(position);
    let roofline = catalog.roofline_of(position, job.precision);
    let terms = catalog.terms_of(position);
    machine_allowed(job, o)?;
    let measured_workload = req.measured_workload.filter(|w| {
        req.catalog
            .benchmarks_of_gpu(w, &o.spec.gpu)
            .any(|b| b.samples_per_sec.is_some())
    });
    let sources = throughput_sources(job, facts, measured_workload).inspect_err(|refusal| {
        match refusal.1 {
            Detail::NoBf16 => note_gpu(&mut near.without_bf16, &o.spec.gpu),
            Detail::NoFacts => note_gpu(&mut near.without_facts, &o.spec.gpu),
            _ => {}
        }
    })?;
    let usable = usable_gib(o.spec.gpu_memory_gib);
    if near.largest.as_ref().is_none_or(|(u, _, _)| usable > *u) {
        near.largest = Some((usable, o.spec.gpu_memory_gib, &o.spec.gpu));
    }
    // A job that fits on one node runs there (more nodes only add communication), unless
    // it is in a hurry.
    let one_node_fits = job.nodes_min == 1
        && !job.spreads_for_speed()
        && job.memory.gib_per_gpu(o.spec.gpu_count as u32) <= usable;
    let billing = terms.billing;
    let startup_min = job.startup_min.unwrap_or(terms.default_startup_min);
    for &n in &req.nodes {
        let fit = fit_nodes(job, o, usable, one_node_fits, n).and_then(|(degree, need)| {
            let t = throughput(
                req.catalog,
                job,
                o,
                sources.datasheet,
                roofline,
                sources.measured_workload,
                n,
            );
            match t {
                Ok(throughput) => Ok(Fit {
                    degree,
                    need,
                    throughput,
                    on_demand: timed(billing, startup_min, on_demand(throughput.run_hours)),
                }),
                Err(why) => {
                    if why == Unestimated::NeedsFlopsPerSample {
                        near.needs_flops_per_sample = true;
                    }
                    Err((RejectReason::NoThroughputData, Detail::None))
                }
            }
        });
        fits.push(fit);
    }
    Ok(ShapePlan {
        usable,
        billing,
        startup_min,
    })
}

fn note_gpu<'a>(list: &mut Vec<&'a str>, gpu: &'a str) {
    if !list.iter().any(|g| g.eq_ignore_ascii_case(gpu)) {
        list.push(gpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::catalog::{CatalogSnapshot, GpuFacts};
    use crate::core::job::{MemoryNeed, Work};
    use crate::core::terms::default_startup_min;
    use crate::core::test_support::p4d;

    fn offering(
        id: i64,
        region: &str,
        gpu: &str,
        count: f64,
        interconnect: Interconnect,
        network_gbps: Option<f64>,
    ) -> Offering {
        p4d()
            .id(id)
            .at("aws", region)
            .instance_type(&format!("{gpu}-{count}"))
            .gpus(gpu, count, 40.0)
            .host(8.0, 64.0)
            .fabric(interconnect, network_gbps)
            .build()
    }

    fn fixed(gib_per_gpu: f64) -> Job {
        Job {
            memory: MemoryNeed::Fixed { gib_per_gpu },
            nodes_max: 4,
            ..Job::default()
        }
    }

    #[test]
    fn fabrics_below_100_gbits_do_not_carry_multi_node_training() {
        let efa = |gbps| offering(1, "r", "A100", 8.0, Interconnect::Efa, gbps);
        assert!(fabric_ok(&efa(Some(400.0))));
        assert!(fabric_ok(&efa(None)));
        assert!(!fabric_ok(&efa(Some(50.0))));
        assert!(!fabric_ok(&offering(
            1,
            "r",
            "A100",
            8.0,
            Interconnect::None,
            None
        )));
    }

    #[test]
    fn node_counts_are_refused_for_one_node_sufficing_memory_and_fabric() {
        let o = offering(1, "r", "A100", 8.0, Interconnect::None, None);
        let job = fixed(20.0);
        assert_eq!(fit_nodes(&job, &o, 37.0, false, 1), Ok((8, 20.0)));
        assert_eq!(
            fit_nodes(&job, &o, 37.0, true, 2),
            Err((RejectReason::SingleNodeSuffices, Detail::None))
        );
        assert_eq!(
            fit_nodes(&job, &o, 37.0, false, 2),
            Err((RejectReason::NoFastInterconnect, Detail::Interconnect))
        );
        assert_eq!(
            fit_nodes(&fixed(38.0), &o, 37.0, false, 1),
            Err((
                RejectReason::MemoryDoesNotFit,
                Detail::Memory {
                    need: 38.0,
                    usable: 37.0
                }
            ))
        );
    }

    #[test]
    fn gpus_without_bf16_or_facts_are_refused_and_named_once() {
        use Interconnect::None as Ethernet;
        let t4 = GpuFacts {
            name: "T4".into(),
            variant: String::new(),
            memory_gib: 16.0,
            memory_bandwidth_gbps: 320.0,
            fp16_bf16_dense_tflops: 65.0,
            bf16_supported: false,
            fp32_tflops: 8.1,
            gpu_link_gbps: 0.0,
            tdp_w: 70.0,
        };
        let catalog = CatalogSnapshot::new(
            Vec::new(),
            vec![t4],
            vec![
                offering(1, "us-east-1", "T4", 1.0, Ethernet, None),
                offering(2, "eu-west-1", "T4", 1.0, Ethernet, None),
                offering(3, "us-east-1", "L4", 1.0, Ethernet, None),
            ],
        );
        let job = Job {
            work: Work::Tokens {
                tokens: 1e9,
                params: 1e8,
            },
            ..fixed(10.0)
        };
        let req = Request::new(&catalog, &job);
        let mut near = NearMisses::default();
        let mut plan =
            |position: usize| plan_shape(&req, position, &mut near, &mut Vec::new()).map(|_| ());
        let no_bf16 = Err((RejectReason::PrecisionUnsupported, Detail::NoBf16));
        assert_eq!(plan(0), no_bf16);
        assert_eq!(plan(1), no_bf16);
        assert_eq!(
            plan(2),
            Err((RejectReason::NoThroughputData, Detail::NoFacts))
        );
        assert_eq!(catalog.shapes().len(), 2);
        assert_eq!(near.without_bf16, ["T4"]);
        assert_eq!(near.without_facts, ["L4"]);
    }

    #[test]
    fn a_planned_shape_has_a_verdict_per_node_count() {
        let catalog = CatalogSnapshot::new(
            Vec::new(),
            Vec::new(),
            vec![offering(1, "r", "X1", 8.0, Interconnect::Efa, Some(400.0))],
        );
        // A fixed need is the same per GPU at every node count; the fastest objective tries
        // them all, as the fabric carries them.
        let job = Job {
            objective: crate::core::job::Objective::Fastest,
            ..fixed(30.0)
        };
        let req = Request::new(&catalog, &job);
        let mut near = NearMisses::default();
        let mut fits = Vec::new();
        let plan = plan_shape(&req, 0, &mut near, &mut fits).expect("planned");
        assert_eq!(plan.usable, usable_gib(40.0));
        assert_eq!(plan.startup_min, default_startup_min("aws"));
        assert_eq!(fits.len(), 4);
        assert!(fits.iter().all(|f| f.is_ok_and(|f| f.need == 30.0)));
        assert_eq!(near.largest, Some((usable_gib(40.0), 40.0, "X1")));
    }
}
