//! When an open `StreamIsActive` stream decides again for its pool. Whether a pool is active
//! changes for three kinds of reasons, and the stream listens for each:
//!
//! - work arrives (samples that show work, a decision that wants workers): the activity
//!   channel, which crosses replicas on PostgreSQL (LISTEN/NOTIFY);
//! - something moves the pool's target or policy on this replica (a decision by `POST
//!   /decide`, the metrics-api route or another KEDA call, a policy change, a cloud notice):
//!   the channel that tells the reconciler a pool is dirty;
//! - time alone: the idle timer reaches `idle_to_zero_after_sec` after the queue went to zero,
//!   a cooldown or stabilisation window ends. Nobody asks then, so the stream decides again at
//!   the last decision's `next_evaluation_at` (at most 30 s away), which is when the core says
//!   the answer may change without new signals. This is how `false` reaches KEDA when a pool
//!   goes idle, without waiting for KEDA's next poll.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use crate::app::{AppState, Clock};
use crate::fleet::pool_decision::PoolDecision;

/// A timer that fires sooner than this would only repeat the same decision: the core's next
/// evaluation is always after "now", but clocks are read in whole milliseconds.
const MIN_RECHECK: Duration = Duration::from_millis(100);

/// The reasons a stream has to decide again, subscribed before its first decision so that
/// nothing between the two is missed.
#[derive(Debug)]
pub struct Wake {
    activity: broadcast::Receiver<String>,
    dirty: broadcast::Receiver<String>,
    /// The clock decisions are made at, so that "until the next evaluation" is measured on it.
    clock: Arc<Clock>,
}

impl Wake {
    pub fn new(state: &AppState) -> Self {
        Self {
            activity: state.activity.subscribe(),
            dirty: state.dirty.subscribe(),
            clock: state.clock.clone(),
        }
    }

    /// When to decide again if nothing else happens: the decision's next evaluation.
    pub fn recheck_at(&self, d: &PoolDecision) -> Instant {
        let wait_ms =
            u64::try_from(d.decision.next_evaluation_at_ms - self.clock.now_ms()).unwrap_or(0);
        Instant::now() + Duration::from_millis(wait_ms).max(MIN_RECHECK)
    }

    /// Waits until `pool` should be decided again: `true`, or `false` once this replica is
    /// shutting its channels down.
    pub async fn next(&mut self, pool: &str, recheck_at: Instant) -> bool {
        loop {
            let heard = tokio::select! {
                _ = tokio::time::sleep_until(recheck_at) => return true,
                m = self.activity.recv() => m,
                m = self.dirty.recv() => m,
            };
            match heard {
                Ok(p) if p == pool => return true,
                Ok(_) => {}
                // Missed some: one of them may have been this pool.
                Err(RecvError::Lagged(_)) => return true,
                Err(RecvError::Closed) => return false,
            }
        }
    }
}
