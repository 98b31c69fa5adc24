//! What would it have cost: a trace of jobs, spot prices, interruptions and capacity errors
//! replayed through the same decision core the service runs, on a virtual clock, once per
//! policy, with the figures to compare them by.
//!
//! Pure like the rest of the core: the trace, policies, catalog and settings in; reports out.
//! Reading files, the command line and the HTTP endpoint live in `crate::sim`.

pub mod baseline;
pub mod engine;
pub mod report;
pub mod settings;
pub mod speed;
pub mod trace;

use crate::core::catalog::CatalogSnapshot;
use crate::core::cost::PriceBook;
use crate::core::policy::Policy;
use crate::core::spot::SpotRisk;
use engine::{Replay, replay};
use report::PolicyRun;
use settings::Settings;
use trace::Trace;

/// A policy under test, by the name its report carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub name: String,
    pub policy: Policy,
}

/// The candidates, followed by the built-in baselines derived from the first one when
/// `with_baselines`.
pub fn with_baselines(candidates: Vec<Candidate>, trace: &Trace) -> Vec<Candidate> {
    let extra = candidates
        .first()
        .map(|c| baseline::baselines(&c.policy, trace))
        .unwrap_or_default();
    candidates
        .into_iter()
        .chain(
            extra
                .into_iter()
                .map(|(name, policy)| Candidate { name, policy }),
        )
        .collect()
}

/// Replays the trace once per candidate, in order, each priced from the catalog with run
/// times scaled per instance type by the selection's estimates; reports carry their saving
/// against `fixed_on_demand` when it is among the candidates.
pub fn run(
    catalog: &CatalogSnapshot,
    risk: &SpotRisk,
    trace: &Trace,
    candidates: &[Candidate],
    settings: &Settings,
) -> Vec<PolicyRun> {
    let mut runs: Vec<PolicyRun> = candidates
        .iter()
        .map(|c| {
            let prices = PriceBook::for_policy(catalog, &c.policy);
            let speed = speed::speed_table(catalog, risk, &c.policy);
            replay(&Replay {
                name: &c.name,
                policy: &c.policy,
                prices: &prices,
                trace,
                settings,
                speed: &speed,
            })
        })
        .collect();
    let fixed = runs
        .iter()
        .find(|r| r.report.name == baseline::FIXED_ON_DEMAND)
        .map(|r| r.report.total_cost)
        .filter(|c| *c > 0.0);
    if let Some(fixed) = fixed {
        for r in &mut runs {
            r.report.saving_vs_fixed_on_demand = Some(1.0 - r.report.total_cost / fixed);
        }
    }
    runs
}
