//! How much one ingestion request may carry, which values are believable, and why a sample
//! that arrived was not kept. Remote write forwards whatever a Prometheus scrapes, so a sender
//! that is merely careless (or hostile) must not be able to grow a pool's series without bound
//! or push a value no queue or GPU can have into a decision.

use std::collections::HashSet;
use std::sync::Mutex;

use super::remote_write::{GPU_MEMORY_USED_GIB, GPU_UTILIZATION};

/// Most series one remote-write request may carry (Prometheus sends 2,000 per shard by default;
/// dcgm-exporter has about 20 series per GPU).
pub const MAX_SERIES_PER_REQUEST: usize = 20_000;
/// Most samples one remote-write request may carry, over all its series.
pub const MAX_SAMPLES_PER_REQUEST: usize = 100_000;
/// Largest queue depth, pending or running job count believed: more than any real queue, far
/// less than what would overflow a worker count.
pub const MAX_COUNT: f64 = 1_000_000.0;
/// Largest GPU memory in use, GiB.
pub const MAX_GPU_MEMORY_GIB: f64 = 10_000.0;
/// Longest worker id (a DNS name is at most 253 characters).
pub const MAX_WORKER_LEN: usize = 253;

/// Why a sample that arrived was not stored: a fixed set, so that it can be a `/metrics` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The series had no pool label.
    NoPoolLabel,
    /// Not a metric this service reads.
    UnknownMetric,
    /// The pool does not exist here.
    UnknownPool,
    /// Stamped in the future.
    Future,
    /// Negative, or beyond what the metric can be (see [`value_problem`]).
    OutOfRange,
    /// About a worker the pool does not have (see [`worker_belongs`]).
    UnknownWorker,
    /// The pool already had as many workers in this request as it may ever have.
    TooManyWorkers,
}

impl DropReason {
    pub const ALL: [DropReason; 7] = [
        Self::NoPoolLabel,
        Self::UnknownMetric,
        Self::UnknownPool,
        Self::Future,
        Self::OutOfRange,
        Self::UnknownWorker,
        Self::TooManyWorkers,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoPoolLabel => "no_pool_label",
            Self::UnknownMetric => "unknown_metric",
            Self::UnknownPool => "unknown_pool",
            Self::Future => "future",
            Self::OutOfRange => "out_of_range",
            Self::UnknownWorker => "unknown_worker",
            Self::TooManyWorkers => "too_many_workers",
        }
    }
}

/// What is wrong with `value` for the sample `name`, if anything (the value is already in our
/// units: a fraction for utilisation, GiB for memory).
pub fn value_problem(name: &str, value: f64) -> Option<String> {
    if !value.is_finite() || value < 0.0 {
        return Some("must be a finite number at least zero".into());
    }
    match name {
        GPU_UTILIZATION if value > 1.0 => Some(format!(
            "gpu_utilization is a fraction from 0 to 1, not a percentage ({value})"
        )),
        GPU_MEMORY_USED_GIB if value > MAX_GPU_MEMORY_GIB => Some(format!(
            "gpu_memory_used_gib is in GiB; at most {MAX_GPU_MEMORY_GIB}"
        )),
        GPU_UTILIZATION | GPU_MEMORY_USED_GIB => None,
        _ if value > MAX_COUNT => Some(format!("{name} is a count; at most {MAX_COUNT}")),
        _ => None,
    }
}

/// Whether a sample about `worker` belongs to a pool whose registered workers are `known`.
/// The one place that says what "a worker the pool has" means, so that other ways to name a
/// worker (aliases) plug in here.
pub fn worker_belongs(known: &HashSet<String>, worker: &str) -> bool {
    known.contains(worker)
}

/// Remembers which (pool, reason) pairs were logged, so that a sender repeating the same
/// mistake every 15 s is logged once, not forever. Pools are existing pools (or the empty name
/// for all unknown ones), so the set stays small.
#[derive(Debug, Default)]
pub struct DropLog(Mutex<HashSet<(String, DropReason)>>);

impl DropLog {
    /// True the first time `pool` drops samples for `reason`.
    pub fn first(&self, pool: &str, reason: DropReason) -> bool {
        match self.0.lock() {
            Ok(mut seen) => seen.insert((pool.to_string(), reason)),
            // A panic elsewhere while holding it: logging again is harmless.
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::remote_write::{QUEUE_DEPTH, RUNNING_JOBS};

    #[test]
    fn values_beyond_what_the_metric_can_be_are_named() {
        assert!(value_problem(QUEUE_DEPTH, 1e308).is_some());
        assert!(value_problem(QUEUE_DEPTH, -1.0).is_some());
        assert!(value_problem(QUEUE_DEPTH, f64::NAN).is_some());
        assert!(value_problem(RUNNING_JOBS, MAX_COUNT + 1.0).is_some());
        assert_eq!(value_problem(QUEUE_DEPTH, MAX_COUNT), None);
        assert_eq!(value_problem(GPU_UTILIZATION, 1.0), None);
        assert!(value_problem(GPU_UTILIZATION, 1.5).is_some());
        assert!(value_problem(GPU_MEMORY_USED_GIB, 20_000.0).is_some());
    }

    #[test]
    fn each_pool_and_reason_is_logged_once() {
        let log = DropLog::default();
        assert!(log.first("a", DropReason::UnknownWorker));
        assert!(!log.first("a", DropReason::UnknownWorker));
        assert!(log.first("a", DropReason::Future));
        assert!(log.first("b", DropReason::UnknownWorker));
    }
}
