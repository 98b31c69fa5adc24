//! A pool's scaling policy: what the pool is bound to (provider, region, zones, instance types
//! by priority), how its need is measured (queue, utilisation or one elastic job), and the
//! limits that keep scaling safe (bounds, steps, cooldowns, idle, market mix, budget).
//!
//! Every number has a default; the API fills them in before storing, so a stored policy is
//! always complete and the decision never guesses.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::catalog::Market;

pub const DEFAULT_MAX_STEP_PERCENT: f64 = 50.0;
pub const DEFAULT_MIN_STEP: u32 = 1;
pub const DEFAULT_SCALE_UP_COOLDOWN_SEC: u64 = 0;
pub const DEFAULT_SCALE_DOWN_COOLDOWN_SEC: u64 = 300;
pub const DEFAULT_STABILIZATION_WINDOW_SEC: u64 = 300;
pub const DEFAULT_IDLE_TO_ZERO_AFTER_SEC: u64 = 600;
pub const DEFAULT_IDLE_UTILIZATION_THRESHOLD: f64 = 0.1;
pub const DEFAULT_SPOT_PERCENTAGE: u32 = 80;
pub const DEFAULT_TARGET_UTILIZATION: f64 = 0.7;
pub const DEFAULT_TOLERANCE: f64 = 0.1;
pub const DEFAULT_SIGNAL_MAX_AGE_SEC: u64 = 300;
/// Karpenter keeps an instance type that ran out of capacity off its list for three minutes.
pub const DEFAULT_CAPACITY_ERROR_BACKOFF_SEC: u64 = 180;
pub const DEFAULT_INTERRUPTION_WINDOW_SEC: u64 = 3600;
pub const DEFAULT_MAX_INTERRUPTION_RATE: f64 = 0.2;

pub use super::catalog::STATIC_PROVIDER;

/// What the reconciler does with a pool's decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Actuation {
    /// Change the pool's capacity to what the decisions say.
    #[default]
    Act,
    /// Decide and record what would be changed, change nothing (a dry run).
    Observe,
}

/// One instance type the pool may run, in priority order, with the markets it may be bought in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InstanceChoice {
    pub instance_type: String,
    pub markets: Vec<Market>,
}

impl InstanceChoice {
    pub fn allows(&self, market: Market) -> bool {
        self.markets.contains(&market)
    }
}

/// How the pool's need for workers is measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Mode {
    /// Batch jobs: enough workers for the running and waiting jobs.
    Queue { gpus_per_job: u32 },
    /// HPA-style: current × utilisation / target, ignored within the tolerance.
    Utilization {
        target_utilization: f64,
        tolerance: f64,
    },
    /// One distributed job that runs on `min_nodes..=max_nodes` workers, grown in whole gangs
    /// of `node_step`; it never runs on fewer than `min_nodes` (all or nothing).
    Elastic {
        min_nodes: u32,
        max_nodes: u32,
        node_step: u32,
    },
}

/// What happens when the day's projected spend passes `daily_budget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum BudgetAction {
    /// Record an alarm and keep scaling.
    #[default]
    Alarm,
    /// Refuse scale-ups that would take the projected spend over budget (never terminates).
    Cap,
}

/// A complete policy, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Policy {
    /// The catalog (and, with `group`, the cloud API) of the pool: `aws`, `alibaba`, ...; or
    /// `static`, whose workers are records that trainscaler creates itself.
    pub provider: String,
    pub region: String,
    /// The cloud group holding the pool's instances: the AWS auto scaling group name, the
    /// Alibaba Cloud scaling group id, the GCP managed instance group's path (its standard
    /// MIG). Without it a cloud pool is decided for, not actuated (KEDA or a scheduler acts on
    /// the decisions).
    #[serde(default)]
    pub group: Option<String>,
    /// GCP only: the path of the Spot MIG that takes the spot share of the pool.
    #[serde(default)]
    pub spot_group: Option<String>,
    #[serde(default)]
    pub actuation: Actuation,
    /// Zones the pool may use; empty means any zone of the region.
    pub zones: Vec<String>,
    /// Instance types by priority, first preferred.
    pub instance_types: Vec<InstanceChoice>,
    pub gpus_per_worker: u32,
    #[serde(flatten)]
    pub mode: Mode,
    pub min_workers: u32,
    pub max_workers: u32,
    pub max_step_percent: f64,
    pub min_step: u32,
    pub scale_up_cooldown_sec: u64,
    pub scale_down_cooldown_sec: u64,
    pub stabilization_window_sec: u64,
    pub idle_to_zero_after_sec: u64,
    pub idle_utilization_threshold: f64,
    /// A worker whose GPUs all hold less memory than this (GiB) counts as idle whatever its
    /// utilisation; unset, memory is not an idle signal.
    #[serde(default)]
    pub idle_gpu_memory_gib: Option<f64>,
    pub on_demand_base: u32,
    pub spot_percentage: u32,
    /// US dollars per UTC day.
    pub daily_budget: Option<f64>,
    pub budget_action: BudgetAction,
    /// Signals older than this are ignored.
    pub signal_max_age_sec: u64,
    /// An instance type (in a zone) that reported insufficient capacity is skipped this long.
    pub capacity_error_backoff_sec: u64,
    /// The window over which interruptions are counted.
    pub interruption_window_sec: u64,
    /// Interruptions in the window per spot worker above which replacements go on-demand.
    pub max_interruption_rate: f64,
}

impl Policy {
    /// Workers one job occupies and jobs one worker holds, from GPUs per job and per worker.
    pub fn workers_for_jobs(&self, jobs: f64) -> u32 {
        let jobs = jobs.max(0.0).ceil();
        match self.mode {
            Mode::Queue { gpus_per_job } => {
                let (per_job, per_worker) = (gpus_per_job.max(1), self.gpus_per_worker.max(1));
                if per_job > per_worker {
                    let workers_per_job = per_job.div_ceil(per_worker);
                    saturate(jobs * f64::from(workers_per_job))
                } else {
                    let jobs_per_worker = per_worker / per_job;
                    saturate((jobs / f64::from(jobs_per_worker)).ceil())
                }
            }
            _ => saturate(jobs),
        }
    }

    /// How far back a decision must read interruptions and capacity errors.
    pub fn incident_lookback_ms(&self) -> i64 {
        secs_to_ms(
            self.capacity_error_backoff_sec
                .max(self.interruption_window_sec),
        )
    }

    /// Whether the reconciler changes this pool's capacity: a cloud pool bound to a group, or
    /// a static pool.
    pub fn is_bound(&self) -> bool {
        self.group.is_some() || self.provider == STATIC_PROVIDER
    }

    /// The spot share only applies to types that may be bought as spot.
    pub fn any_allows(&self, market: Market) -> bool {
        self.instance_types.iter().any(|c| c.allows(market))
    }
}

/// Seconds from a policy as epoch-millisecond offsets, saturating far beyond any real time.
pub fn secs_to_ms(s: u64) -> i64 {
    i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX / 2)
}

fn saturate(x: f64) -> u32 {
    if x >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        x.max(0.0) as u32
    }
}

#[cfg(test)]
pub(crate) fn test_policy() -> Policy {
    Policy {
        provider: "aws".into(),
        region: "us-east-1".into(),
        group: None,
        spot_group: None,
        actuation: Actuation::Act,
        zones: vec![],
        instance_types: vec![
            InstanceChoice {
                instance_type: "g4dn.12xlarge".into(),
                markets: vec![Market::Spot, Market::OnDemand],
            },
            InstanceChoice {
                instance_type: "g5.12xlarge".into(),
                markets: vec![Market::Spot, Market::OnDemand],
            },
        ],
        gpus_per_worker: 4,
        mode: Mode::Queue { gpus_per_job: 4 },
        min_workers: 0,
        max_workers: 4,
        max_step_percent: DEFAULT_MAX_STEP_PERCENT,
        min_step: DEFAULT_MIN_STEP,
        scale_up_cooldown_sec: DEFAULT_SCALE_UP_COOLDOWN_SEC,
        scale_down_cooldown_sec: DEFAULT_SCALE_DOWN_COOLDOWN_SEC,
        stabilization_window_sec: DEFAULT_STABILIZATION_WINDOW_SEC,
        idle_to_zero_after_sec: DEFAULT_IDLE_TO_ZERO_AFTER_SEC,
        idle_utilization_threshold: DEFAULT_IDLE_UTILIZATION_THRESHOLD,
        idle_gpu_memory_gib: None,
        on_demand_base: 0,
        spot_percentage: DEFAULT_SPOT_PERCENTAGE,
        daily_budget: None,
        budget_action: BudgetAction::Alarm,
        signal_max_age_sec: DEFAULT_SIGNAL_MAX_AGE_SEC,
        capacity_error_backoff_sec: DEFAULT_CAPACITY_ERROR_BACKOFF_SEC,
        interruption_window_sec: DEFAULT_INTERRUPTION_WINDOW_SEC,
        max_interruption_rate: DEFAULT_MAX_INTERRUPTION_RATE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_pack_onto_workers_by_gpus() {
        let mut p = test_policy();
        p.mode = Mode::Queue { gpus_per_job: 1 };
        assert_eq!(
            p.workers_for_jobs(5.0),
            2,
            "4 one-GPU jobs per 4-GPU worker"
        );
        p.mode = Mode::Queue { gpus_per_job: 8 };
        assert_eq!(
            p.workers_for_jobs(3.0),
            6,
            "an 8-GPU job spans two 4-GPU workers"
        );
        p.mode = Mode::Queue { gpus_per_job: 3 };
        assert_eq!(
            p.workers_for_jobs(3.0),
            3,
            "a 3-GPU job leaves one GPU no job fits"
        );
        assert_eq!(p.workers_for_jobs(0.0), 0);
    }
}
