//! One configuration in one market: the run stretched by spot interruptions (or refused on
//! spot), then its price, hours with start-up, billed cost, and the job's caps on price,
//! time and money.

use super::reject::{Detail, Refusal};
use crate::core::catalog::Offering;
use crate::core::decision::RejectReason;
use crate::core::job::Job;
use crate::core::spot::{RateSource, TypeRisk, loss_per_interruption_hours, stretch};
use crate::core::terms::Billing;

/// The run in one market.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct MarketRun {
    /// The run's hours, stretched on spot.
    pub run_hours: Option<f64>,
    pub interruptions: f64,
    /// Interruptions per node-hour, their source, and the factor they stretch the run by.
    pub spot_rate: Option<(f64, RateSource, f64)>,
}

/// Which interruption-rate sources any spot configuration used: (advisor, provider default).
pub(super) type RateSourcesSeen = (bool, bool);

/// The interruption rate of spot `o` for the job, from the rates of its instance type
/// (`risk`): refused without the job's permission or checkpoints. Notes which source
/// answered.
pub(super) fn spot_rate(
    job: &Job,
    risk: &TypeRisk,
    o: &Offering,
    seen: &mut RateSourcesSeen,
) -> Result<(f64, RateSource), Refusal> {
    if !job.spot_allowed || job.checkpoint_interval_min.is_none() {
        return Err((RejectReason::SpotNotAllowed, Detail::None));
    }
    let (per_hour, source) = risk.rate(&o.key.region);
    match source {
        RateSource::Advisor => seen.0 = true,
        RateSource::ProviderDefault => seen.1 = true,
    }
    Ok((per_hour, source))
}

/// The run on demand: as estimated.
pub(super) fn on_demand(run_hours: Option<f64>) -> MarketRun {
    MarketRun {
        run_hours,
        interruptions: 0.0,
        spot_rate: None,
    }
}

/// The run of `nodes` spot nodes interrupted `per_hour` per node-hour: stretched by the work
/// interruptions redo, or refused where they would redo half the run or more.
pub(super) fn on_spot(
    job: &Job,
    (per_hour, source): (f64, RateSource),
    nodes: u32,
    run_hours: Option<f64>,
) -> Result<MarketRun, Refusal> {
    let checkpoint = job.checkpoint_interval_min.unwrap_or(f64::INFINITY);
    let loss = loss_per_interruption_hours(run_hours, checkpoint, job.restart_overhead_min);
    let Some((stretched, expected)) = stretch(run_hours.unwrap_or(1.0), per_hour, nodes, loss)
    else {
        return Err((RejectReason::SpotNotAllowed, Detail::InterruptionsTooCostly));
    };
    Ok(match run_hours {
        Some(h) => MarketRun {
            run_hours: Some(stretched),
            interruptions: expected,
            spot_rate: Some((per_hour, source, stretched / h)),
        },
        None => MarketRun {
            run_hours: None,
            interruptions: 0.0,
            spot_rate: Some((per_hour, source, stretched)),
        },
    })
}

/// A run's hours with start-up and as billed per node: the same for every offering of a
/// shape in one market at one interruption rate, whatever its price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Timed {
    pub run: MarketRun,
    pub hours: Option<f64>,
    pub billed_hours: Option<f64>,
}

pub(super) fn timed(billing: Billing, startup_min: f64, run: MarketRun) -> Timed {
    let hours = run.run_hours.map(|h| h + startup_min / 60.0);
    Timed {
        run,
        hours,
        billed_hours: hours.map(|h| billing.billed_hours(h)),
    }
}

/// Price and cost of a configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Costed {
    /// Dollars per hour for all nodes.
    pub total_price: f64,
    pub cost: Option<f64>,
}

/// The configuration's price and cost at `node_price` a node-hour, refused over the job's
/// price cap, past its deadline or over its budget (checked in that order).
pub(super) fn cost_and_time(
    job: &Job,
    timed: &Timed,
    node_price: f64,
    nodes: u32,
) -> Result<Costed, Refusal> {
    let total_price = node_price * f64::from(nodes);
    if job.max_price_per_hour.is_some_and(|cap| total_price > cap) {
        return Err((
            RejectReason::OverPriceCap,
            Detail::PricePerHour(total_price),
        ));
    }
    let cost = timed.billed_hours.map(|h| h * total_price);
    if let (Some(deadline), Some(h)) = (job.deadline_hours, timed.hours)
        && h > deadline
    {
        return Err((RejectReason::MissesDeadline, Detail::Hours(h)));
    }
    if let (Some(budget), Some(c)) = (job.budget, cost)
        && c > budget
    {
        return Err((RejectReason::OverBudget, Detail::Cost(c)));
    }
    Ok(Costed { total_price, cost })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::spot::SpotRisk;
    use crate::core::test_support::p4d;

    #[test]
    fn spot_needs_permission_and_checkpoints_and_stretches_the_run() {
        let risk = SpotRisk::from_aws_advisor([("us-east-1".into(), "p4d.24xlarge".into(), 4)]);
        let o = p4d().build();
        let mut seen = (false, false);
        assert_eq!(
            spot_rate(
                &Job::default(),
                &risk.of_type("aws", "p4d.24xlarge"),
                &o,
                &mut seen
            ),
            Err((RejectReason::SpotNotAllowed, Detail::None))
        );
        assert_eq!(seen, (false, false));
        assert_eq!(on_demand(Some(10.0)).run_hours, Some(10.0));
        let job = Job {
            checkpoint_interval_min: Some(10.0),
            ..Job::default()
        };
        let rate = spot_rate(&job, &risk.of_type("aws", "p4d.24xlarge"), &o, &mut seen)
            .expect("spot with checkpoints");
        assert_eq!(seen, (true, false));
        let run = on_spot(&job, rate, 2, Some(10.0)).expect("a bearable rate");
        let (per_hour, source, factor) = run.spot_rate.expect("a spot rate");
        assert_eq!(source, RateSource::Advisor);
        assert!((per_hour - 0.25 / 730.0).abs() < 1e-12);
        let hours = run.run_hours.expect("stretched hours");
        assert!(
            factor > 1.0 && (hours - 10.0 * factor).abs() < 1e-9,
            "{hours} {factor}"
        );
        assert!(run.interruptions > 0.0);
    }

    #[test]
    fn spot_is_refused_when_interruptions_would_redo_half_the_run() {
        let risk = SpotRisk::default();
        let weekly = Job {
            checkpoint_interval_min: Some(7.0 * 24.0 * 60.0),
            ..Job::default()
        };
        let mut seen = (false, false);
        let rate = spot_rate(
            &weekly,
            &risk.of_type("aws", "p4d.24xlarge"),
            &p4d().build(),
            &mut seen,
        )
        .expect("allowed");
        assert_eq!(seen, (false, true));
        assert_eq!(
            on_spot(&weekly, rate, 64, Some(1000.0)),
            Err((RejectReason::SpotNotAllowed, Detail::InterruptionsTooCostly))
        );
    }

    #[test]
    fn caps_on_price_time_and_money_refuse_in_that_order() {
        let aws = Billing::for_provider("aws");
        let job = Job {
            max_price_per_hour: Some(50.0),
            deadline_hours: Some(10.0),
            budget: Some(200.0),
            ..Job::default()
        };
        let cost = |node_price, nodes, run| {
            let timed = timed(aws, 6.0, on_demand(run));
            cost_and_time(&job, &timed, node_price, nodes).map(|c| (timed, c))
        };
        assert_eq!(
            cost(30.0, 2, Some(1.0)),
            Err((RejectReason::OverPriceCap, Detail::PricePerHour(60.0)))
        );
        let Err((RejectReason::MissesDeadline, Detail::Hours(h))) = cost(30.0, 1, Some(10.0))
        else {
            panic!("10 h of run and 6 min of start-up miss a 10 h deadline");
        };
        assert!((h - 10.1).abs() < 1e-9, "{h}");
        let Err((RejectReason::OverBudget, Detail::Cost(c))) = cost(30.0, 1, Some(9.0)) else {
            panic!("9.1 h at $30/h is over a $200 budget");
        };
        assert!((c - 273.0).abs() < 1e-6, "{c}");
        let (timed, ok) = cost(10.0, 2, Some(0.4)).expect("within every cap");
        assert_eq!(ok.total_price, 20.0);
        assert_eq!(timed.hours, Some(0.5));
        assert_eq!(ok.cost, Some(10.0));
        let (timed, unknown) = cost(10.0, 1, None).expect("no caps on unknown work but the price");
        assert_eq!((timed.hours, unknown.cost), (None, None));
    }
}
