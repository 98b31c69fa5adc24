//! The SQL for cloud notices (interruption warnings, rebalance recommendations, capacity
//! errors, saved checkpoints), written once for both backends. A batch is recorded all or
//! nothing: each notice is matched to a pool (by name or by the worker's id), logged once per
//! sender id, and marks its worker.

use super::backend::{Backend, Tx};
use super::pool_sql::insert_event;
use super::stmt::Stmt;
use super::{CloudNotice, NewEvent, NoticeOutcome, Once, StoreError, StoreResult, idempotency};
use crate::auth::pools::PoolScope;

/// Where a notice belongs: (pool, the worker's instance type, the worker's zone).
type Match = (String, Option<String>, Option<String>);

pub(super) async fn record_notices<B: Backend>(
    db: &B,
    notices: &[CloudNotice],
    now_ms: i64,
    once: Option<Once<'_, Vec<NoticeOutcome>>>,
    pools: &PoolScope,
) -> StoreResult<Vec<NoticeOutcome>> {
    let mut tx = db.begin_write().await?;
    idempotency::begin_once::<B, _>(&mut tx, &once).await?;
    // One lock order for every writer (by pool and worker), so that two overlapping batches
    // cannot deadlock; outcomes go back in the caller's order.
    let mut order: Vec<usize> = (0..notices.len()).collect();
    order.sort_by(|&a, &b| {
        (&notices[a].pool, &notices[a].worker).cmp(&(&notices[b].pool, &notices[b].worker))
    });
    let mut outcomes: Vec<NoticeOutcome> = vec![NoticeOutcome::Unmatched; notices.len()];
    for index in order {
        outcomes[index] = record_one::<B>(&mut tx, &notices[index], index, now_ms, pools).await?;
    }
    idempotency::finish_once::<B, _>(&mut tx, &once, &outcomes).await?;
    tx.commit().await?;
    Ok(outcomes)
}

async fn record_one<B: Backend>(
    tx: &mut Tx<B>,
    n: &CloudNotice,
    index: usize,
    now_ms: i64,
    pools: &PoolScope,
) -> StoreResult<NoticeOutcome> {
    let Some((pool, worker_type, worker_zone)) = find_match::<B>(tx, n).await? else {
        return Ok(NoticeOutcome::Unmatched);
    };
    // Returning the error drops the transaction: nothing of the batch is kept.
    if !pools.allows(&pool) {
        return Err(StoreError::PoolNotAllowed { index, pool });
    }
    let instance_type = n.instance_type.clone().or(worker_type);
    let zone = n.zone.clone().or(worker_zone);
    let key = n.id.clone().unwrap_or_else(|| {
        format!(
            "{}:{}:{}:{}:{}",
            n.kind,
            n.worker.as_deref().unwrap_or(""),
            instance_type.as_deref().unwrap_or(""),
            zone.as_deref().unwrap_or(""),
            n.at_ms
        )
    });
    let event = NewEvent {
        kind: n.kind,
        at_ms: n.at_ms,
        worker: n.worker.clone(),
        instance_type,
        zone,
        detail: n.detail.clone(),
        dedupe_key: Some(key),
    };
    if insert_event::<B>(tx, &pool, &event, now_ms).await? == 0 {
        return Ok(NoticeOutcome::Duplicate { pool });
    }
    if let (Some(worker), "checkpoint_saved") = (&n.worker, n.kind) {
        let mark = Stmt::new(
            "UPDATE workers SET checkpoint_at_ms = $3, updated_at_ms = $4
             WHERE pool = $1 AND id = $2
               AND (checkpoint_at_ms IS NULL OR checkpoint_at_ms < $3)",
        )
        .bind(&pool)
        .bind(worker)
        .bind(n.at_ms)
        .bind(now_ms);
        B::execute(tx, mark).await?;
    } else if let (Some(worker), true) = (&n.worker, n.kind != "capacity_error") {
        // An interruption warning outranks a rebalance recommendation.
        let mark = Stmt::new(
            "UPDATE workers SET warning_kind = $3, warning_at_ms = $4,
                 warning_action_at_ms = $5, updated_at_ms = $6
             WHERE pool = $1 AND id = $2
               AND (warning_kind IS NULL OR warning_kind <> 'interruption_warning')",
        )
        .bind(&pool)
        .bind(worker)
        .bind(n.kind)
        .bind(n.at_ms)
        .bind(n.action_at_ms)
        .bind(now_ms);
        B::execute(tx, mark).await?;
    }
    Ok(NoticeOutcome::Recorded { pool })
}

/// The pool a notice belongs to: the named one (with the named worker, if any), else the
/// worker's (live first, then the latest started).
async fn find_match<B: Backend>(tx: &mut Tx<B>, n: &CloudNotice) -> StoreResult<Option<Match>> {
    let find = match (&n.pool, &n.worker) {
        (Some(pool), Some(worker)) => {
            Stmt::new("SELECT pool, instance_type, zone FROM workers WHERE pool = $1 AND id = $2")
                .bind(pool)
                .bind(worker)
        }
        (None, Some(worker)) => Stmt::new(
            "SELECT pool, instance_type, zone FROM workers WHERE id = $1
             ORDER BY stopped_at_ms IS NULL DESC, started_at_ms DESC LIMIT 1",
        )
        .bind(worker),
        (Some(pool), None) => Stmt::new(
            "SELECT name, CAST(NULL AS TEXT), CAST(NULL AS TEXT) FROM pools WHERE name = $1",
        )
        .bind(pool),
        (None, None) => return Ok(None),
    };
    B::fetch_optional(tx, find).await
}
