//! `trainscaler simulate` and `POST /v1/simulate`: input checked and defaulted, the core's
//! replay run for every policy and the baselines, and the results as JSON, a terminal table
//! or an SVG chart.

pub mod assumptions;
pub mod chart;
pub mod cli;
pub mod files;
pub mod input;
pub mod table;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::catalog::spot_advisor::BUNDLED_SPOT_RISK;
use crate::core::catalog::CatalogSnapshot;
use crate::core::sim::report::{PolicyReport, PolicyRun};
use crate::core::sim::settings::Settings;
use crate::core::sim::trace::{Trace, TraceEvent};
use crate::core::sim::{Candidate, run, with_baselines};
use crate::timefmt::format_ms;
use input::{
    NamedPolicy, Problems, SettingsIn, TraceRow, parse_policies, parse_row, parse_settings,
};

/// The most trace lines, policies and evaluations one HTTP request may ask for: enough for
/// a month of a busy pool at one-minute ticks, small enough to answer within seconds.
pub const MAX_TRACE_LINES: usize = 100_000;
pub const MAX_POLICIES: usize = 10;
pub const MAX_EVALUATIONS: u64 = 2_000_000;
pub const MAX_RATE_AND_CAPACITY_LINES: usize = 1_000;
pub const MAX_SIMULATED_WORKERS: u32 = 1_000;

/// `POST /v1/simulate`: a trace, the policies to compare, and settings.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "trace": [{"at": "2026-12-01T00:00:00Z", "kind": "job", "gpus": 4, "duration_sec": 3600}],
    "policies": [{"name": "default", "policy": {"provider": "aws", "region": "us-east-1",
        "max_workers": 4, "instance_types": ["g4dn.12xlarge"]}}]
}))]
pub struct SimulateRequest {
    /// Trace lines, in any order: 1 to 100000.
    #[schema(min_items = 1, max_items = 100000)]
    pub trace: Vec<TraceRow>,
    /// One to ten policies, by name.
    #[schema(min_items = 1, max_items = 10)]
    pub policies: Vec<NamedPolicy>,
    #[serde(default)]
    pub settings: SettingsIn,
    /// Also replay `fixed_on_demand`, `autoscale_on_demand` and `autoscale_spot_mix`, derived
    /// from the first policy (default true).
    #[serde(default = "yes")]
    pub baselines: bool,
}

fn yes() -> bool {
    true
}

/// The results, one report per policy in the order given, baselines last.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SimulateResponse {
    /// The replayed window (RFC 3339); every policy is billed over the same one.
    pub start: String,
    pub end: String,
    pub tick_sec: f64,
    pub policies: Vec<PolicyReport>,
    /// The prices, start-up, notice, restart overhead, billing and fixed cluster the
    /// figures rest on.
    pub assumptions: assumptions::SimAssumptions,
}

/// A checked simulation, ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub trace: Trace,
    pub candidates: Vec<Candidate>,
    pub settings: Settings,
}

impl Plan {
    /// Checks a trace, policies and settings; `Err` names every bad field.
    pub fn new(
        trace: Trace,
        policies: Vec<NamedPolicy>,
        settings: &SettingsIn,
        baselines: bool,
        catalog: &CatalogSnapshot,
        problems: &mut Problems,
    ) -> Option<Self> {
        if policies.is_empty() {
            problems.add("policies", "must name at least one policy");
        }
        let candidates = parse_policies(policies, catalog, baselines, problems);
        let settings = parse_settings(settings, &trace, problems);
        let candidates = if baselines {
            with_baselines(candidates, &trace)
        } else {
            candidates
        };
        match settings {
            Some(settings) if problems.is_empty() => Some(Self {
                trace,
                candidates,
                settings,
            }),
            _ => None,
        }
    }

    /// Pool evaluations the run will make.
    pub fn evaluations(&self) -> u64 {
        self.settings
            .ticks()
            .saturating_mul(self.candidates.len() as u64)
    }

    /// Replays every candidate; `prices_from` says where the catalog's prices come from.
    pub fn run(
        &self,
        catalog: &CatalogSnapshot,
        prices_from: &str,
    ) -> (SimulateResponse, Vec<PolicyRun>) {
        let runs = run(
            catalog,
            &BUNDLED_SPOT_RISK,
            &self.trace,
            &self.candidates,
            &self.settings,
        );
        let response = SimulateResponse {
            start: format_ms(self.settings.start_ms),
            end: format_ms(self.settings.end_ms),
            tick_sec: self.settings.tick_ms as f64 / 1000.0,
            policies: runs.iter().map(|r| r.report.clone()).collect(),
            assumptions: assumptions::assumptions(
                catalog,
                prices_from,
                &self.trace,
                &self.candidates,
                &self.settings,
            ),
        };
        (response, runs)
    }
}

/// Checks an HTTP request: trace lines named `trace[i]`, policies `policies[i]`.
pub fn plan_request(req: SimulateRequest, catalog: &CatalogSnapshot) -> Result<Plan, Problems> {
    let mut problems = Problems::default();
    if req.trace.len() > MAX_TRACE_LINES {
        problems.add(
            "trace",
            format!("has {} lines; at most {MAX_TRACE_LINES}", req.trace.len()),
        );
    }
    if req.policies.len() > MAX_POLICIES {
        problems.add(
            "policies",
            format!(
                "has {} policies; at most {MAX_POLICIES}",
                req.policies.len()
            ),
        );
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let events = req
        .trace
        .iter()
        .enumerate()
        .filter_map(|(i, row)| parse_row(row, &format!("trace[{i}]"), None, i, &mut problems))
        .collect();
    let plan = Plan::new(
        Trace::new(events),
        req.policies,
        &req.settings,
        req.baselines,
        catalog,
        &mut problems,
    );
    match plan {
        Some(plan) if problems.is_empty() => {
            // Ticks alone do not bound the work: rate and capacity lines and large pools
            // multiply it, so they are bounded too.
            let incidents = plan
                .trace
                .events()
                .iter()
                .filter(|e| {
                    matches!(
                        e,
                        TraceEvent::InterruptionRate { .. } | TraceEvent::CapacityError { .. }
                    )
                })
                .count();
            if incidents > MAX_RATE_AND_CAPACITY_LINES {
                problems.add(
                    "trace",
                    format!("has {incidents} interruption_rate and capacity_error lines; at most {MAX_RATE_AND_CAPACITY_LINES}"),
                );
            }
            for (i, c) in plan.candidates.iter().enumerate() {
                if c.policy.max_workers > MAX_SIMULATED_WORKERS {
                    problems.add(
                        format!("policies[{i}].policy.max_workers"),
                        format!("is {}; a simulation request allows at most {MAX_SIMULATED_WORKERS} (the command has no limit)", c.policy.max_workers),
                    );
                }
            }
            if !problems.is_empty() {
                return Err(problems);
            }
            if plan.evaluations() > MAX_EVALUATIONS {
                problems.add(
                    "settings.tick_sec",
                    format!(
                        "the window at this tick needs {} pool evaluations over {} policies; at most {MAX_EVALUATIONS} per request (raise tick_sec, shorten the window, or use the `trainscaler simulate` command, which has no limit)",
                        plan.evaluations(),
                        plan.candidates.len()
                    ),
                );
                return Err(problems);
            }
            Ok(plan)
        }
        _ => Err(problems),
    }
}
