//! What the store keeps for pools of workers: the rows it hands out and takes in. The SQL that
//! reads and writes them is in `pool_sql.rs`, `signal_sql.rs`, `notice_sql.rs` and
//! `decision_sql.rs`; the rows the database returns are decoded in `pool_rows.rs`.

use crate::core::catalog::Market;
use crate::core::policy::Policy;
use crate::core::scale::{Incident, PoolState, Worker};

/// A pool as stored.
#[derive(Debug, Clone)]
pub struct PoolRow {
    pub name: String,
    pub policy: Policy,
    pub state: PoolState,
    /// The last decision that changed something, as the API rendered it.
    pub last_decision: Option<serde_json::Value>,
    pub last_decision_key: Option<String>,
    pub last_decision_at_ms: Option<i64>,
    /// When the policy was last put: the idle clock starts no earlier.
    pub since_ms: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// One accepted sample. Pool-level samples have `worker` empty.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSample {
    pub pool: String,
    pub worker: String,
    pub name: &'static str,
    pub value: f64,
    pub at_ms: i64,
}

/// What an ingestion batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestReport {
    pub accepted: u64,
    /// Samples already stored with the same pool, worker, name and time.
    pub duplicates: u64,
    /// Pools with a sample in the batch that shows work.
    pub active_pools: Vec<String>,
    /// Pools with no sample in the batch that shows work, whose queue or jobs series says
    /// zero: the pool may be going idle, so `StreamIsActive` subscribers decide again.
    pub quiet_pools: Vec<String>,
    /// Batches committed in the same transaction as this one, itself included: 1 for a batch
    /// written alone (see the store's group commits).
    pub group_batches: u64,
}

/// The newest sample of one series.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LatestSignal {
    pub worker: String,
    pub name: String,
    pub value: f64,
    pub at_ms: i64,
}

/// Everything a pool decision reads, read under the pool's lock.
#[derive(Debug, Clone)]
pub struct DecisionRead {
    pub pool: PoolRow,
    /// Live workers and those stopped today.
    pub workers: Vec<Worker>,
    /// Series newer than the policy's signal age limit.
    pub latest: Vec<LatestSignal>,
    /// Every series' activity, stale ones too: a series silent since it was busy keeps the
    /// pool from counting as idle before that time.
    pub series_idle: Vec<crate::core::idle::SeriesIdle>,
    pub incidents: Vec<Incident>,
}

/// What a pool decision writes, in the same transaction.
#[derive(Debug, Clone, Default)]
pub struct DecisionWrite {
    /// The new state, when it differs from the one read.
    pub state: Option<PoolState>,
    pub events: Vec<NewEvent>,
    /// The decision to show as the pool's last, when its outcome changed: (key, rendering).
    pub last_decision: Option<(String, serde_json::Value)>,
    /// The decision took the pool from no workers to some: tell every replica's KEDA streams.
    pub activated: bool,
}

impl DecisionWrite {
    /// Whether the decision changed nothing that is stored.
    pub fn is_empty(&self) -> bool {
        self.state.is_none() && self.events.is_empty() && self.last_decision.is_none()
    }
}

/// An entry for a pool's event log.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: &'static str,
    pub at_ms: i64,
    pub worker: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub detail: serde_json::Value,
    /// Events with the same key in one pool are logged once.
    pub dedupe_key: Option<String>,
}

impl NewEvent {
    /// An event about the pool as a whole: no worker, instance type or zone, logged every
    /// time. Events about more set those fields over it.
    pub fn pool(kind: &'static str, at_ms: i64, detail: serde_json::Value) -> Self {
        Self {
            kind,
            at_ms,
            worker: None,
            instance_type: None,
            zone: None,
            detail,
            dedupe_key: None,
        }
    }
}

/// A logged event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub id: i64,
    pub pool: String,
    pub at_ms: i64,
    pub kind: String,
    pub worker: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub detail: serde_json::Value,
}

/// A worker as a caller registers it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorker {
    pub id: String,
    pub instance_type: String,
    pub market: Market,
    pub zone: Option<String>,
    pub started_at_ms: i64,
    /// Other names it goes by (host name, private DNS name or IP); samples naming it by one
    /// of them are its samples.
    pub aliases: Vec<String>,
}

/// A cloud notice about a worker or about capacity, before it is matched to a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudNotice {
    /// `interruption_warning`, `rebalance_recommendation` or `capacity_error`.
    pub kind: &'static str,
    /// The pool, when the sender knows it; otherwise found from the worker.
    pub pool: Option<String>,
    pub worker: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub at_ms: i64,
    pub action_at_ms: Option<i64>,
    /// The sender's event id, so a re-sent notice is logged once.
    pub id: Option<String>,
    pub detail: serde_json::Value,
}

impl CloudNotice {
    /// A notice about one worker as a cloud's own event names it: no pool, instance type,
    /// zone, deadline, id or detail. Notices that know more set those fields over it.
    pub fn about_worker(kind: &'static str, worker: &str, at_ms: i64) -> Self {
        Self {
            kind,
            pool: None,
            worker: Some(worker.to_string()),
            instance_type: None,
            zone: None,
            at_ms,
            action_at_ms: None,
            id: None,
            detail: serde_json::Value::Null,
        }
    }
}

/// What happened to each notice of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeOutcome {
    Recorded {
        pool: String,
    },
    Duplicate {
        pool: String,
    },
    /// No pool has this worker (or the named pool does not exist).
    Unmatched,
}

/// One page of a pool's events, newest first.
#[derive(Debug, Clone, Copy)]
pub struct EventPage {
    /// Continue after this (at_ms, id).
    pub after: Option<(i64, i64)>,
    pub limit: usize,
}

/// What syncing a pool's workers with its cloud group changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub added: u64,
    pub updated: u64,
    pub stopped: u64,
}
