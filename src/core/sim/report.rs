//! What one policy's replay comes to: the figures people compare policies by, and a thinned
//! timeline of workers, queue and cumulative cost for the chart.

use serde::Serialize;
use utoipa::ToSchema;

/// Dollars by market.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
pub struct CostByMarket {
    pub on_demand: f64,
    pub spot: f64,
}

/// One policy's figures over the replayed window.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PolicyReport {
    pub name: String,
    /// Dollars billed in the window (per-second billing, the provider's minimum).
    pub total_cost: f64,
    pub cost_by_market: CostByMarket,
    /// GPU-hours billed, and GPU-hours jobs held (restarts included).
    pub gpu_hours_paid: f64,
    pub gpu_hours_used: f64,
    /// `1 - used / paid`: the share of paid GPU time nobody used.
    pub idle_share: f64,
    /// From submission to first start, over every job (unstarted jobs count to the end).
    pub wait_p50_sec: f64,
    pub wait_p95_sec: f64,
    /// From the first submission to the last completion; `null` when a job did not finish.
    pub makespan_sec: Option<f64>,
    /// Spot interruption notices received.
    pub interruptions: u32,
    /// Work since the last checkpoint that interruptions (or scale-downs under a job) threw
    /// away, in GPU-hours.
    pub lost_gpu_hours: f64,
    /// Decisions that changed the target: up and down moves. Flapping shows here.
    pub scaling_actions: u32,
    pub launches: u32,
    /// Launches refused for lack of capacity.
    pub capacity_errors: u32,
    /// Days on which the daily budget alarm was raised.
    pub budget_alarms: u32,
    pub jobs_finished: u32,
    pub jobs_unfinished: u32,
    /// Pool evaluations the run made.
    pub evaluations: u64,
    /// `1 - total_cost / fixed_on_demand's total_cost`, when that baseline ran.
    pub saving_vs_fixed_on_demand: Option<f64>,
}

/// Timeline points for one policy: at each point, the most workers and queued jobs seen
/// since the previous point, and the dollars spent so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
pub struct Timeline {
    pub at_ms: Vec<i64>,
    pub workers: Vec<u32>,
    pub queued: Vec<u32>,
    pub cost: Vec<f64>,
}

/// A report with its timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRun {
    pub report: PolicyReport,
    pub timeline: Timeline,
}

/// The nearest-rank percentile of `values` (`q` in 0..=1); 0 for no values.
pub fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = (q.clamp(0.0, 1.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut v = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(percentile(&mut v, 0.5), 3.0);
        assert_eq!(percentile(&mut v, 0.95), 5.0);
        assert_eq!(percentile(&mut v, 0.0), 1.0);
        assert_eq!(percentile(&mut [], 0.5), 0.0);
    }
}
