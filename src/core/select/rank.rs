//! Ranking feasible configurations by the job's objective, keeping only the best `top_k`
//! while the scan runs: every other feasible configuration is only counted.

use std::cmp::Ordering;

use super::Scored;
use crate::core::catalog::Market;
use crate::core::job::{Job, Objective};

/// What a configuration is ranked by: known as soon as it is costed, before the rest of it
/// is gathered, so that a configuration that cannot enter the best `top_k` costs no more.
#[derive(Debug, Clone, Copy)]
pub(super) struct Standing {
    pub cost: Option<f64>,
    pub total_price: f64,
    pub hours: Option<f64>,
    pub rate: Option<f64>,
    /// How much spot interruptions stretch the run (1 on demand).
    pub spot_factor: f64,
}

impl Standing {
    /// Throughput per hourly dollar; on spot, net of the work interruptions make redo.
    pub(super) fn value(&self) -> Option<f64> {
        Some(self.rate? / self.spot_factor / self.total_price)
    }
}

/// Which configuration it is, for ties: offering, node count, market.
pub(super) type Identity = (i64, u32, Market);

/// The sort key of a configuration under the objective; lower is better. Configurations
/// whose throughput is unknown sort after the others, by price.
pub(super) fn objective_key(objective: Objective, c: &Standing) -> (f64, f64) {
    match objective {
        Objective::Cheapest => (c.cost.unwrap_or(c.total_price), c.hours.unwrap_or(0.0)),
        Objective::Fastest => (
            c.hours.or(c.rate.map(|r| -r)).unwrap_or(f64::INFINITY),
            c.cost.unwrap_or(c.total_price),
        ),
        Objective::BestValue => (c.value().map_or(f64::INFINITY, |v| -v), c.total_price),
    }
}

/// A total order: the objective, then offering, node count and market, so that equal keys
/// still rank the same way every time.
fn compare(a_key: (f64, f64), a: Identity, b: &Ranked) -> Ordering {
    a_key
        .0
        .total_cmp(&b.key.0)
        .then(a_key.1.total_cmp(&b.key.1))
        .then(a.cmp(&b.identity))
}

struct Ranked<'a> {
    key: (f64, f64),
    identity: Identity,
    scored: Scored<'a>,
}

/// The best `top_k` feasible configurations so far, best first, and how many were offered.
pub(super) struct TopK<'a> {
    objective: Objective,
    top_k: usize,
    best: Vec<Ranked<'a>>,
    offered: u64,
}

impl<'a> TopK<'a> {
    pub(super) fn new(job: &Job) -> Self {
        let top_k = job.top_k.max(1);
        Self {
            objective: job.objective,
            top_k,
            best: Vec::with_capacity(top_k.min(128) + 1),
            offered: 0,
        }
    }

    /// Offers one feasible configuration; `scored` gathers the whole of it only when it
    /// ranks among the best.
    #[inline]
    pub(super) fn offer(
        &mut self,
        standing: &Standing,
        identity: Identity,
        scored: impl FnOnce() -> Scored<'a>,
    ) {
        self.offered += 1;
        let key = objective_key(self.objective, standing);
        if self.best.len() == self.top_k
            && self
                .best
                .last()
                .is_some_and(|worst| compare(key, identity, worst) != Ordering::Less)
        {
            return;
        }
        self.insert(key, identity, scored());
    }

    /// Keeps a configuration that ranks among the best.
    fn insert(&mut self, key: (f64, f64), identity: Identity, scored: Scored<'a>) {
        let at = self
            .best
            .partition_point(|b| compare(key, identity, b) == Ordering::Greater);
        self.best.insert(
            at,
            Ranked {
                key,
                identity,
                scored,
            },
        );
        self.best.truncate(self.top_k);
    }

    /// The key a configuration must rank before to enter, once the best `top_k` are full.
    pub(super) fn worst_key(&self) -> Option<(f64, f64)> {
        if self.best.len() < self.top_k {
            return None;
        }
        self.best.last().map(|worst| worst.key)
    }

    /// Counts feasible configurations known to rank after every kept one.
    pub(super) fn count_outranked(&mut self, configurations: u64) {
        self.offered += configurations;
    }

    /// How many feasible configurations were offered.
    pub(super) fn feasible(&self) -> u64 {
        self.offered
    }

    /// The kept configurations, best first.
    pub(super) fn into_ranked(self) -> Vec<Scored<'a>> {
        self.best.into_iter().map(|r| r.scored).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::select::Basis;

    fn scored(offering_id: i64, market: Market, cost: f64, total_price: f64) -> Scored<'static> {
        // The position stands in for the offering in these tests.
        Scored {
            position: offering_id as usize,
            nodes: 1,
            market,
            degree: 1,
            need: 1.0,
            usable: 10.0,
            basis: Basis::Unknown,
            rate: Some(100.0),
            unit: "tokens_per_sec",
            startup_min: 4.0,
            hours: Some(cost / total_price),
            billed_hours: Some(cost / total_price),
            cost: Some(cost),
            interruptions: 0.0,
            spot_rate: None,
            node_price: total_price,
            total_price,
        }
    }

    fn offer<'a>(top: &mut TopK<'a>, s: Scored<'a>) {
        top.offer(&s.standing(), (s.position as i64, s.nodes, s.market), || s);
    }

    fn ids(top: TopK) -> Vec<(i64, Market)> {
        top.into_ranked()
            .iter()
            .map(|s| (s.position as i64, s.market))
            .collect()
    }

    #[test]
    fn keeps_the_cheapest_k_best_first_and_counts_the_rest() {
        let job = Job {
            top_k: 2,
            ..Job::default()
        };
        let mut top = TopK::new(&job);
        for (id, cost) in [(1, 30.0), (2, 10.0), (3, 20.0), (4, 5.0), (5, 50.0)] {
            offer(&mut top, scored(id, Market::OnDemand, cost, 2.0));
        }
        assert_eq!(top.feasible(), 5);
        assert_eq!(ids(top), [(4, Market::OnDemand), (2, Market::OnDemand)]);
    }

    #[test]
    fn equal_keys_rank_by_offering_then_market_whatever_the_order_offered() {
        let job = Job {
            top_k: 3,
            ..Job::default()
        };
        let mut top = TopK::new(&job);
        offer(&mut top, scored(7, Market::Spot, 10.0, 2.0));
        offer(&mut top, scored(7, Market::OnDemand, 10.0, 2.0));
        offer(&mut top, scored(3, Market::Spot, 10.0, 2.0));
        offer(&mut top, scored(9, Market::OnDemand, 10.0, 2.0));
        assert_eq!(
            ids(top),
            [(3, Market::Spot), (7, Market::OnDemand), (7, Market::Spot)]
        );
    }

    #[test]
    fn fastest_ranks_by_hours_and_best_value_by_throughput_per_dollar() {
        let quick = scored(1, Market::OnDemand, 40.0, 8.0);
        let slow = scored(2, Market::OnDemand, 12.0, 1.0);
        assert!(
            objective_key(Objective::Fastest, &quick.standing()).0
                < objective_key(Objective::Fastest, &slow.standing()).0
        );
        assert!(
            objective_key(Objective::BestValue, &slow.standing()).0
                < objective_key(Objective::BestValue, &quick.standing()).0
        );
        assert!(
            objective_key(Objective::Cheapest, &slow.standing()).0
                < objective_key(Objective::Cheapest, &quick.standing()).0
        );
    }
}
