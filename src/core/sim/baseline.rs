//! The built-in policies every replay is compared with, derived from the first policy under
//! test so that they share its instance types, bounds and mode: a fixed on-demand cluster
//! sized for the trace's peak and running all the time, autoscaling on-demand only, and
//! autoscaling with the default spot mix.

use super::trace::{JobSize, Trace};
use crate::core::catalog::Market;
use crate::core::policy::*;

pub const FIXED_ON_DEMAND: &str = "fixed_on_demand";
pub const AUTOSCALE_ON_DEMAND: &str = "autoscale_on_demand";
pub const AUTOSCALE_SPOT_MIX: &str = "autoscale_spot_mix";
pub const BASELINES: [&str; 3] = [FIXED_ON_DEMAND, AUTOSCALE_ON_DEMAND, AUTOSCALE_SPOT_MIX];

/// The most workers the trace's jobs would hold at once if each started on submission,
/// capped at the policy's `max_workers`: what a fixed cluster is sized for.
pub fn peak_workers(trace: &Trace, p: &Policy) -> u32 {
    let gpw = p.gpus_per_worker.max(1);
    // (time, +/- GPUs rounded to whole workers per job that spans workers)
    let mut steps: Vec<(i64, i64)> = Vec::new();
    for j in trace.jobs() {
        let gpus = match j.size {
            JobSize::Gpus(g) if g > gpw => g.div_ceil(gpw).saturating_mul(gpw),
            JobSize::Gpus(g) => g,
            JobSize::Nodes(n) => n.saturating_mul(gpw),
        };
        steps.push((j.at_ms, i64::from(gpus)));
        steps.push((j.at_ms.saturating_add(j.duration_ms), -i64::from(gpus)));
    }
    // Ends before starts at the same moment: a job that finishes frees its GPUs first.
    steps.sort_by_key(|(t, d)| (*t, *d));
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in steps {
        now += d;
        peak = peak.max(now);
    }
    let workers = u32::try_from(peak).unwrap_or(u32::MAX).div_ceil(gpw);
    workers.min(p.max_workers.max(p.min_workers)).max(1)
}

/// The three baselines, named as the JSON output names them.
pub fn baselines(p: &Policy, trace: &Trace) -> Vec<(String, Policy)> {
    let markets = |m: Vec<Market>| {
        let mut q = tuned_to_defaults(p);
        for c in &mut q.instance_types {
            c.markets = m.clone();
        }
        q
    };
    let mut fixed = markets(vec![Market::OnDemand]);
    let peak = peak_workers(trace, p);
    fixed.min_workers = peak;
    fixed.max_workers = peak;
    vec![
        (FIXED_ON_DEMAND.to_string(), fixed),
        (
            AUTOSCALE_ON_DEMAND.to_string(),
            markets(vec![Market::OnDemand]),
        ),
        (
            AUTOSCALE_SPOT_MIX.to_string(),
            markets(vec![Market::Spot, Market::OnDemand]),
        ),
    ]
}

/// The policy's binding, mode and bounds with every tuning knob at its default.
fn tuned_to_defaults(p: &Policy) -> Policy {
    Policy {
        max_step_percent: DEFAULT_MAX_STEP_PERCENT,
        min_step: DEFAULT_MIN_STEP,
        scale_up_cooldown_sec: DEFAULT_SCALE_UP_COOLDOWN_SEC,
        scale_down_cooldown_sec: DEFAULT_SCALE_DOWN_COOLDOWN_SEC,
        stabilization_window_sec: DEFAULT_STABILIZATION_WINDOW_SEC,
        idle_to_zero_after_sec: DEFAULT_IDLE_TO_ZERO_AFTER_SEC,
        idle_utilization_threshold: DEFAULT_IDLE_UTILIZATION_THRESHOLD,
        on_demand_base: 0,
        spot_percentage: DEFAULT_SPOT_PERCENTAGE,
        daily_budget: None,
        budget_action: BudgetAction::Alarm,
        capacity_error_backoff_sec: DEFAULT_CAPACITY_ERROR_BACKOFF_SEC,
        interruption_window_sec: DEFAULT_INTERRUPTION_WINDOW_SEC,
        max_interruption_rate: DEFAULT_MAX_INTERRUPTION_RATE,
        ..p.clone()
    }
}
