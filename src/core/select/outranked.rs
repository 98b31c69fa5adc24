//! Shapes that cannot reach the best `top_k`, counted in bulk instead of weighed offering by
//! offering.
//!
//! Once the best `top_k` are full, most shapes of a large catalog cannot enter them. A shape's
//! configurations at one node count and market differ only in price and, on spot, in the
//! interruption rate of their region. Every figure they are refused or ranked by rises with
//! both, so two configurations stand for all the others:
//! - the dearest offering at the highest rate the instance type has anywhere: if the job's
//!   price cap, deadline and budget let it pass and spot does not refuse it, they refuse none;
//! - the cheapest offering on demand, its run unstretched: if even it ranks after the worst
//!   kept configuration, under any objective, all of them do.
//!
//! Then every priced configuration is feasible and outranked. Only the counts, the unpriced
//! offerings and the spot rates' sources remain to be told, the same as the scan offering by
//! offering would tell them.

use std::cmp::Ordering;

use super::plan::{NodeVerdict, ShapePlan};
use super::rank::{Standing, objective_key};
use super::reject::Detail;
use super::{MARKETS, Request, Scan, market};
use crate::core::catalog::{Market, PriceRange};
use crate::core::decision::RejectReason;
use crate::core::spot::TypeRisk;

/// Above this many hours (a billion), billing rounds no more and the bound is not relied on.
const BOUNDED_HOURS: f64 = 1e9;

/// Counts the shape's configurations in bulk when none of them can reach the best `top_k`
/// and none is refused by the job's caps; returns false, having counted nothing, when they
/// must be weighed one by one. `fits` holds the shape's verdict per node count of the
/// request, at least one of them a fit; `prices` are those of the offerings `sold`.
pub(super) fn count_if_outranked(
    req: &Request,
    risk: &TypeRisk,
    scan: &mut Scan,
    shape: &ShapePlan,
    fits: &[NodeVerdict],
    sold: &[u32],
    prices: &PriceRange,
) -> bool {
    let job = req.job;
    let Some(worst) = scan.best.worst_key() else {
        return false;
    };
    let spot_allowed = job.spot_allowed && job.checkpoint_interval_min.is_some();
    let highest_rate = risk.highest_rate();
    for (&n, fit) in req.nodes.iter().zip(fits) {
        let Ok(fit) = fit else {
            continue;
        };
        if fit
            .on_demand
            .hours
            .is_some_and(|h| h.is_nan() || h >= BOUNDED_HOURS)
        {
            return false;
        }
        // Spot at the highest rate the type has anywhere: if it is refused, which offerings
        // are depends on their regions; if not, it is the longest spot run of the shape.
        let longest_spot = if spot_allowed && prices.priced[1] > 0 {
            match market::on_spot(job, highest_rate, n, fit.throughput.run_hours) {
                Ok(run) => Some(market::timed(shape.billing, shape.startup_min, run)),
                Err(_) => return false,
            }
        } else {
            None
        };
        for (range, longest) in prices
            .range
            .into_iter()
            .zip([Some(fit.on_demand), longest_spot])
        {
            let (Some((lowest, highest)), Some(longest)) = (range, longest) else {
                continue;
            };
            // The caps refuse by price, hours and cost, each rising with the price and the
            // spot rate: the dearest offering's longest run passing them means all pass.
            if market::cost_and_time(job, &longest, highest, n).is_err() {
                return false;
            }
            // Spot stretches the run (factor ≥ 1) and so its hours, billed hours and cost,
            // all rounded monotonically: the on-demand run at the lowest price bounds both
            // markets from below.
            let total_price = lowest * f64::from(n);
            let timed = &fit.on_demand;
            let bound = Standing {
                cost: timed.billed_hours.map(|h| h * total_price),
                total_price,
                hours: timed.hours,
                rate: fit.throughput.rate,
                spot_factor: 1.0,
            };
            let key = objective_key(job.objective, &bound);
            if key.0.total_cmp(&worst.0).then(key.1.total_cmp(&worst.1)) != Ordering::Greater {
                return false;
            }
        }
    }
    count(req, risk, scan, fits, sold, prices, spot_allowed);
    true
}

/// Counts every configuration of an outranked shape as the scan offering by offering would.
fn count(
    req: &Request,
    risk: &TypeRisk,
    scan: &mut Scan,
    fits: &[NodeVerdict],
    sold: &[u32],
    prices: &PriceRange,
    spot_allowed: bool,
) {
    let fitting = fits.iter().filter(|f| f.is_ok()).count() as u64;
    let spot_feasible = if spot_allowed { prices.priced[1] } else { 0 };
    scan.best
        .count_outranked(fitting * (prices.priced[0] + spot_feasible));
    let offered = sold.len() as u64;
    let unpriced = (offered - prices.priced[0]) + (offered - prices.priced[1]);
    scan.rejected
        .count_many(RejectReason::NoPrice, fitting * unpriced);
    let refused_spot = !spot_allowed && prices.priced[1] > 0;
    if refused_spot {
        scan.rejected
            .count_many(RejectReason::SpotNotAllowed, fitting * prices.priced[1]);
    }
    // Offering by offering only while an example or a rate's source may be left to find.
    let quotes = req.catalog.quotes();
    for &p in sold {
        let position = p as usize;
        let sources_known = scan.rate_sources.0 && scan.rate_sources.1;
        let wants = |reason| scan.rejected.wants_example(reason, position);
        let unpriced_examples = unpriced > 0 && wants(RejectReason::NoPrice);
        let refused_examples = refused_spot && wants(RejectReason::SpotNotAllowed);
        if (sources_known || !spot_allowed) && !unpriced_examples && !refused_examples {
            return;
        }
        let q = &quotes[position];
        if spot_allowed && q.spot.is_some() && !sources_known {
            let o = &req.catalog.offerings()[position];
            // Spot is allowed, so this cannot be refused; it notes the rate's source.
            let _ = market::spot_rate(req.job, risk, o, &mut scan.rate_sources);
        }
        for (&n, fit) in req.nodes.iter().zip(fits) {
            if fit.is_err() {
                continue;
            }
            for market in MARKETS {
                let refusal = match (q.price(market), market) {
                    (None, _) => (RejectReason::NoPrice, Detail::None),
                    (Some(_), Market::Spot) if !spot_allowed => {
                        (RejectReason::SpotNotAllowed, Detail::None)
                    }
                    (Some(_), _) => continue,
                };
                scan.rejected.offer_example(refusal, position, n, market);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Request, Scan, plan, scan_shape, select};
    use super::*;
    use crate::catalog::bundled::bundled_snapshot;
    use crate::catalog::spot_advisor::BUNDLED_SPOT_RISK;
    use crate::core::catalog::CatalogSnapshot;
    use crate::core::job::{Job, MemoryNeed, Objective, Work};
    use crate::core::spot::SpotRisk;
    use crate::core::test_support::{a100_facts, p4d};
    use proptest::prelude::*;

    /// Shape 0: one A100 at $1 ($0.40 spot). Shape 1: eight A100s in three regions, one of
    /// them without spot and one without on-demand.
    fn catalog() -> CatalogSnapshot {
        let cheap = p4d()
            .id(1)
            .instance_type("cheap.1x")
            .gpus("A100", 1.0, 40.0)
            .prices(Some(1.0), Some(0.4))
            .build();
        let dear = |id, region, on_demand, spot| {
            p4d()
                .id(id)
                .at("aws", region)
                .instance_type("dear.8x")
                .prices(on_demand, spot)
                .build()
        };
        CatalogSnapshot::new(
            Vec::new(),
            vec![a100_facts()],
            vec![
                cheap,
                dear(2, "us-east-1", Some(40.0), Some(12.0)),
                dear(3, "us-west-2", Some(41.0), None),
                dear(4, "eu-west-1", None, Some(13.0)),
            ],
        )
    }

    fn risk() -> SpotRisk {
        SpotRisk::from_aws_advisor([("us-east-1".into(), "dear.8x".into(), 2)])
    }

    fn job() -> Job {
        Job {
            memory: MemoryNeed::Fixed { gib_per_gpu: 10.0 },
            work: Work::Tokens {
                tokens: 1e9,
                params: 1e8,
            },
            checkpoint_interval_min: Some(10.0),
            top_k: 1,
            ..Job::default()
        }
    }

    /// Scans `first` as the selection would, then offers shape `then` to the bulk count.
    fn counted_in_bulk(catalog: &CatalogSnapshot, job: &Job, first: usize, then: usize) -> bool {
        let risk = risk();
        let req = Request::new(catalog, job);
        let mut scan = Scan::new(&req);
        scan_shape(&req, &risk, &mut scan, first);
        let members = catalog.shapes().members(then);
        let o = catalog.at(members[0]);
        let mut fits = Vec::new();
        let Ok(shape) = plan::plan_shape(&req, members[0] as usize, &mut scan.near, &mut fits)
        else {
            panic!("the shape fits the job");
        };
        let type_risk = risk.of_type("aws", &o.key.instance_type);
        let prices = catalog.shape_prices(then);
        count_if_outranked(&req, &type_risk, &mut scan, &shape, &fits, members, prices)
    }

    #[test]
    fn an_outranked_shape_is_counted_as_the_scan_would_count_it() {
        let catalog = catalog();
        assert_eq!(catalog.shapes().len(), 2);
        let job = job();
        let risk = risk();
        let req = Request::new(&catalog, &job);
        let mut scan = Scan::new(&req);
        scan_shape(&req, &risk, &mut scan, 0);
        assert_eq!(scan.best.feasible(), 2);
        assert_eq!(scan.rate_sources, (false, true));
        let members = catalog.shapes().members(1);
        let mut fits = Vec::new();
        let shape =
            plan::plan_shape(&req, members[0] as usize, &mut scan.near, &mut fits).expect("fits");
        let type_risk = risk.of_type("aws", "dear.8x");
        let prices = catalog.shape_prices(1);
        assert_eq!(prices.range, [Some((40.0, 41.0)), Some((12.0, 13.0))]);
        assert_eq!(prices.priced, [2, 2]);
        assert!(count_if_outranked(
            &req, &type_risk, &mut scan, &shape, &fits, members, prices
        ));
        // Two on-demand and two spot prices; one of each market unpriced.
        assert_eq!(scan.best.feasible(), 6);
        assert_eq!(scan.rejected.count(RejectReason::NoPrice), 2);
        assert_eq!(scan.rate_sources, (true, true));
        // The whole selection, where nothing is counted in bulk, tells the same.
        let all = select(
            &catalog,
            &risk,
            &Job {
                top_k: 100,
                ..job.clone()
            },
        );
        let one = select(&catalog, &risk, &job);
        assert_eq!((all.feasible, one.feasible), (6, 6));
        assert_eq!(all.rejected, one.rejected);
        assert_eq!(all.candidates[0], one.candidates[0]);
    }

    #[test]
    fn a_shape_that_might_rank_or_be_refused_is_weighed_one_by_one() {
        let catalog = catalog();
        assert!(counted_in_bulk(&catalog, &job(), 0, 1));
        // The cheap shape ranks before the dear one kept.
        assert!(!counted_in_bulk(&catalog, &job(), 1, 0));
        // Nothing is kept yet to rank after.
        let two = Job { top_k: 2, ..job() };
        assert!(!counted_in_bulk(&catalog, &two, 1, 1));
        // A cap the dearest offering passes refuses none; one it misses refuses some.
        let capped = |max| Job {
            max_price_per_hour: Some(max),
            ..job()
        };
        assert!(counted_in_bulk(&catalog, &capped(41.0), 0, 1));
        assert!(!counted_in_bulk(&catalog, &capped(40.5), 0, 1));
        let budget = |budget| Job {
            budget: Some(budget),
            ..job()
        };
        assert!(counted_in_bulk(&catalog, &budget(1e6), 0, 1));
        assert!(!counted_in_bulk(&catalog, &budget(1.0), 0, 1));
        // Checkpoints a year apart on a run of years: spot is refused at some rates.
        let long = Job {
            work: Work::Tokens {
                tokens: 1e16,
                params: 1e8,
            },
            checkpoint_interval_min: Some(365.0 * 24.0 * 60.0),
            ..job()
        };
        let refused = market::on_spot(
            &long,
            risk().of_type("aws", "dear.8x").highest_rate(),
            1,
            Some(1e6),
        );
        assert!(refused.is_err(), "the highest rate refuses spot");
        assert!(!counted_in_bulk(&catalog, &long, 0, 1));
    }

    fn regions() -> impl Strategy<Value = Vec<String>> {
        prop::sample::subsequence(
            vec![
                "us-east-1",
                "us-west-2",
                "eu-west-1",
                "europe-west4",
                "eastus",
            ],
            0..3,
        )
        .prop_map(|r| r.into_iter().map(String::from).collect())
    }

    fn jobs() -> impl Strategy<Value = Job> {
        (
            (0.0..80.0f64, 1u32..3, 0u32..12, 1usize..8),
            (any::<bool>(), prop::option::of(1.0..3000.0f64), 0usize..3),
            (
                prop::option::of(0.5..400.0f64),
                prop::option::of(0.5..800.0f64),
                prop::option::of(10.0..1e5f64),
            ),
            (prop::option::of(1e8..1e12f64), regions()),
        )
            .prop_map(
                |(
                    (gib, min, extra, top_k),
                    (spot, checkpoint, objective),
                    caps,
                    (tokens, regions),
                )| {
                    Job {
                        memory: MemoryNeed::Fixed { gib_per_gpu: gib },
                        work: tokens.map_or(Work::Unknown, |tokens| Work::Tokens {
                            tokens,
                            params: 7e9,
                        }),
                        nodes_min: min,
                        nodes_max: min + extra,
                        spot_allowed: spot,
                        checkpoint_interval_min: checkpoint,
                        objective: [
                            Objective::Cheapest,
                            Objective::Fastest,
                            Objective::BestValue,
                        ][objective],
                        max_price_per_hour: caps.0,
                        deadline_hours: caps.1,
                        budget: caps.2,
                        regions,
                        top_k,
                        ..Job::default()
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// With a top k too large to fill, no shape is ever counted in bulk: the answers
        /// must agree on everything but the candidates past the smaller k.
        #[test]
        fn bulk_counts_agree_with_weighing_every_configuration(job in jobs()) {
            let catalog = bundled_snapshot();
            let risk = &*BUNDLED_SPOT_RISK;
            let few = select(&catalog, risk, &job);
            let all = select(&catalog, risk, &Job { top_k: usize::MAX, ..job.clone() });
            prop_assert_eq!(few.feasible, all.feasible);
            prop_assert_eq!(&few.rejected, &all.rejected);
            prop_assert_eq!(&few.profile, &all.profile);
            prop_assert_eq!(&few.suggestions, &all.suggestions);
            let k = job.top_k.min(all.candidates.len());
            prop_assert_eq!(&few.candidates[..], &all.candidates[..k]);
        }
    }
}
