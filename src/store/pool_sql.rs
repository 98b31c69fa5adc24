//! The SQL for pools, their workers and their event logs, written once for both backends.
//! Samples are in `signal_sql.rs`, cloud notices in `notice_sql.rs` and the decision
//! transaction in `decision_sql.rs`.

use super::backend::{Backend, Tx, encode_error, exists, fetch_all_as};
use super::pool_rows::{
    EventRecord, POOL_COLUMNS, PoolListRecord, PoolRecord, WORKER_COLUMNS, WorkerRecord,
};
use super::stmt::Stmt;
use super::worker_names::{aliases, replace_aliases};
use super::{EventPage, EventRow, NewEvent, NewWorker, PoolRow, StoreResult, SyncReport};
use crate::core::policy::Policy;
use crate::core::scale::Worker;

/// Logs one event of `pool`, unless it already has one with the event's dedupe key; 1 when
/// logged, 0 when a duplicate.
pub(super) async fn insert_event<B: Backend>(
    tx: &mut Tx<B>,
    pool: &str,
    e: &NewEvent,
    now_ms: i64,
) -> StoreResult<u64> {
    let insert = Stmt::new(
        "INSERT INTO pool_events
             (pool, at_ms, kind, worker, instance_type, zone, detail, dedupe_key, recorded_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (pool, dedupe_key) DO NOTHING",
    )
    .bind(pool)
    .bind(e.at_ms)
    .bind(e.kind)
    .bind(&e.worker)
    .bind(&e.instance_type)
    .bind(&e.zone)
    .bind(e.detail.to_string())
    .bind(&e.dedupe_key)
    .bind(now_ms);
    B::execute(tx, insert).await
}

/// Whether the pool exists, read in `tx`.
async fn pool_exists<B: Backend>(tx: &mut Tx<B>, pool: &str) -> StoreResult<bool> {
    exists::<B>(
        tx,
        Stmt::new("SELECT 1 FROM pools WHERE name = $1").bind(pool),
    )
    .await
}

/// Creates or replaces a pool's policy; `true` when it was created. Replacing keeps the
/// decision state and restarts the idle clock.
pub(super) async fn put_pool<B: Backend>(
    db: &B,
    name: &str,
    policy: &Policy,
    now_ms: i64,
) -> StoreResult<bool> {
    let json = serde_json::to_string(policy).map_err(encode_error)?;
    let lookback_ms = policy.incident_lookback_ms();
    let mut tx = db.begin_write().await?;
    let update = Stmt::new(
        "UPDATE pools SET policy = $2, since_ms = $3, updated_at_ms = $3,
             incident_lookback_ms = $4
         WHERE name = $1",
    )
    .bind(name)
    .bind(&json)
    .bind(now_ms)
    .bind(lookback_ms);
    let updated = B::execute(&mut tx, update).await?;
    if updated == 0 {
        let insert = Stmt::new(
            "INSERT INTO pools
                 (name, policy, state, since_ms, created_at_ms, updated_at_ms, incident_lookback_ms)
             VALUES ($1, $2, '{}', $3, $3, $3, $4)",
        )
        .bind(name)
        .bind(&json)
        .bind(now_ms)
        .bind(lookback_ms);
        B::execute(&mut tx, insert).await?;
    }
    tx.commit().await?;
    Ok(updated == 0)
}

pub(super) async fn pools<B: Backend>(db: &B) -> StoreResult<Vec<PoolRow>> {
    let all = Stmt::new(format!("SELECT {POOL_COLUMNS} FROM pools ORDER BY name"));
    fetch_all_as::<B, PoolRecord, _>(&mut *db.conn().await?, all).await
}

/// Every pool with how many live workers it has, in one statement.
pub(super) async fn pools_with_live_workers<B: Backend>(
    db: &B,
) -> StoreResult<Vec<(PoolRow, u64)>> {
    let all = Stmt::new(format!(
        "SELECT {POOL_COLUMNS},
             (SELECT COUNT(*) FROM workers w
               WHERE w.pool = pools.name AND w.stopped_at_ms IS NULL) AS live_workers
         FROM pools ORDER BY name"
    ));
    let rows: Vec<PoolListRecord> = B::fetch_all(&mut *db.conn().await?, all).await?;
    rows.into_iter()
        .map(|r| {
            let live = u64::try_from(r.live_workers).unwrap_or(0);
            Ok((PoolRow::try_from(r.pool)?, live))
        })
        .collect()
}

pub(super) async fn find_pool<B: Backend>(db: &B, name: &str) -> StoreResult<Option<PoolRow>> {
    let one = Stmt::new(format!("SELECT {POOL_COLUMNS} FROM pools WHERE name = $1")).bind(name);
    let row: Option<PoolRecord> = B::fetch_optional(&mut *db.conn().await?, one).await?;
    Ok(row.map(PoolRow::try_from).transpose()?)
}

/// Deletes a pool with its workers, samples and events; `false` if there was none.
pub(super) async fn delete_pool<B: Backend>(db: &B, name: &str) -> StoreResult<bool> {
    let mut tx = db.begin_write().await?;
    for table in ["metric_samples", "signal_latest", "worker_aliases"] {
        let delete = Stmt::new(format!("DELETE FROM {table} WHERE pool = $1")).bind(name);
        B::execute(&mut tx, delete).await?;
    }
    let delete = Stmt::new("DELETE FROM pools WHERE name = $1").bind(name);
    let n = B::execute(&mut tx, delete).await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// `sql` with a worker's row bound as `$1`..`$7`: pool, id, instance type, market, zone,
/// start, and `now_ms` as the time of the update.
fn worker_row<'q>(sql: &'q str, pool: &'q str, w: &'q NewWorker, now_ms: i64) -> Stmt<'q> {
    Stmt::new(sql)
        .bind(pool)
        .bind(&w.id)
        .bind(&w.instance_type)
        .bind(w.market.as_str())
        .bind(&w.zone)
        .bind(w.started_at_ms)
        .bind(now_ms)
}

/// Registers or updates a worker; `None` when the pool does not exist, else whether the
/// worker is new. Re-registering a stopped worker brings it back.
pub(super) async fn put_worker<B: Backend>(
    db: &B,
    pool: &str,
    w: &NewWorker,
    now_ms: i64,
) -> StoreResult<Option<bool>> {
    let mut tx = db.begin_write().await?;
    if !pool_exists::<B>(&mut tx, pool).await? {
        return Ok(None);
    }
    let update = worker_row(
        "UPDATE workers SET instance_type = $3, market = $4, zone = $5, started_at_ms = $6,
             stopped_at_ms = NULL, warning_kind = NULL, warning_at_ms = NULL,
             warning_action_at_ms = NULL, updated_at_ms = $7
         WHERE pool = $1 AND id = $2",
        pool,
        w,
        now_ms,
    );
    let updated = B::execute(&mut tx, update).await?;
    if updated == 0 {
        let insert = worker_row(
            "INSERT INTO workers
                 (pool, id, instance_type, market, zone, started_at_ms, updated_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            pool,
            w,
            now_ms,
        );
        B::execute(&mut tx, insert).await?;
    }
    replace_aliases::<B>(&mut tx, pool, &w.id, &w.aliases).await?;
    tx.commit().await?;
    Ok(Some(updated == 0))
}

/// A live worker as `sync_workers` compares it: (id, instance type, market, zone).
type LiveWorker = (String, String, String, Option<String>);

/// Makes the pool's live workers exactly `workers` (as a cloud reports them): new ones are
/// added, changed ones updated (warnings kept), missing ones stopped.
pub(super) async fn sync_workers<B: Backend>(
    db: &B,
    pool: &str,
    workers: &[NewWorker],
    now_ms: i64,
) -> StoreResult<SyncReport> {
    let mut tx = db.begin_write().await?;
    let live = Stmt::new(
        "SELECT id, instance_type, market, zone FROM workers
         WHERE pool = $1 AND stopped_at_ms IS NULL ORDER BY id",
    )
    .bind(pool);
    let live: Vec<LiveWorker> = B::fetch_all(&mut tx, live).await?;
    let known_aliases = aliases::<B>(&mut tx, pool).await?;
    let mut report = SyncReport::default();
    for w in workers {
        // Compared as sets: clouds need not list a worker's names in the same order twice.
        let mut wanted: Vec<&str> = w.aliases.iter().map(String::as_str).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let had: Vec<&str> = known_aliases
            .iter()
            .filter(|(worker, _)| *worker == w.id)
            .map(|(_, alias)| alias.as_str())
            .collect();
        let aliases_changed = wanted != had;
        // After the row: an alias refers to its worker's row.
        'row: {
            if let Some(l) = live.iter().find(|l| l.0 == w.id) {
                if l.1 == w.instance_type && l.2 == w.market.as_str() && l.3 == w.zone {
                    break 'row;
                }
                let update = Stmt::new(
                    "UPDATE workers SET instance_type = $3, market = $4, zone = $5,
                     updated_at_ms = $6
                 WHERE pool = $1 AND id = $2",
                )
                .bind(pool)
                .bind(&w.id)
                .bind(&w.instance_type)
                .bind(w.market.as_str())
                .bind(&w.zone)
                .bind(now_ms);
                B::execute(&mut tx, update).await?;
                report.updated += 1;
                break 'row;
            }
            // A stopped row with this id is an instance seen again: it lives on.
            let insert = worker_row(
                "INSERT INTO workers
                 (pool, id, instance_type, market, zone, started_at_ms, updated_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (pool, id) DO UPDATE SET instance_type = excluded.instance_type,
                 market = excluded.market, zone = excluded.zone,
                 started_at_ms = excluded.started_at_ms, stopped_at_ms = NULL,
                 warning_kind = NULL, warning_at_ms = NULL, warning_action_at_ms = NULL,
                 checkpoint_at_ms = NULL, updated_at_ms = excluded.updated_at_ms",
                pool,
                w,
                now_ms,
            );
            B::execute(&mut tx, insert).await?;
            report.added += 1;
        }
        if aliases_changed {
            replace_aliases::<B>(&mut tx, pool, &w.id, &w.aliases).await?;
        }
    }
    for l in &live {
        if workers.iter().any(|w| w.id == l.0) {
            continue;
        }
        B::execute(&mut tx, stop_stmt(pool, &l.0, now_ms)).await?;
        report.stopped += 1;
    }
    tx.commit().await?;
    Ok(report)
}

/// Marks the live worker `id` of `pool` stopped at `now_ms`.
fn stop_stmt<'q>(pool: &'q str, id: &'q str, now_ms: i64) -> Stmt<'q> {
    Stmt::new(
        "UPDATE workers SET stopped_at_ms = $3, updated_at_ms = $3
         WHERE pool = $1 AND id = $2 AND stopped_at_ms IS NULL",
    )
    .bind(pool)
    .bind(id)
    .bind(now_ms)
}

/// Live workers whose job reported a saved checkpoint, with when.
pub(super) async fn checkpoints<B: Backend>(db: &B, pool: &str) -> StoreResult<Vec<(String, i64)>> {
    let stmt = Stmt::new(
        "SELECT id, checkpoint_at_ms FROM workers
         WHERE pool = $1 AND stopped_at_ms IS NULL AND checkpoint_at_ms IS NOT NULL
         ORDER BY id",
    )
    .bind(pool);
    B::fetch_all(&mut *db.conn().await?, stmt).await
}

/// Appends events to a pool's log (one with a known dedupe key is logged once); returns how
/// many were new.
pub(super) async fn append_events<B: Backend>(
    db: &B,
    pool: &str,
    events: &[NewEvent],
    now_ms: i64,
) -> StoreResult<u64> {
    let mut tx = db.begin_write().await?;
    // A pool deleted meanwhile has no log to append to.
    if !pool_exists::<B>(&mut tx, pool).await? {
        return Ok(0);
    }
    let mut inserted = 0;
    for e in events {
        inserted += insert_event::<B>(&mut tx, pool, e, now_ms).await?;
    }
    tx.commit().await?;
    Ok(inserted)
}

/// Marks a live worker stopped; `false` if there is no such live worker.
pub(super) async fn stop_worker<B: Backend>(
    db: &B,
    pool: &str,
    id: &str,
    now_ms: i64,
) -> StoreResult<bool> {
    let mut tx = db.begin_write().await?;
    let n = B::execute(&mut tx, stop_stmt(pool, id, now_ms)).await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Live workers and those stopped at or after `stopped_since_ms`.
pub(super) async fn workers<B: Backend>(
    db: &B,
    pool: &str,
    stopped_since_ms: i64,
) -> StoreResult<Vec<Worker>> {
    let stmt = Stmt::new(format!(
        "SELECT {WORKER_COLUMNS} FROM workers
         WHERE pool = $1 AND (stopped_at_ms IS NULL OR stopped_at_ms >= $2)
         ORDER BY started_at_ms, id"
    ))
    .bind(pool)
    .bind(stopped_since_ms);
    fetch_all_as::<B, WorkerRecord, _>(&mut *db.conn().await?, stmt).await
}

/// A page of a pool's events, newest first.
pub(super) async fn events<B: Backend>(
    db: &B,
    pool: &str,
    page: EventPage,
) -> StoreResult<Vec<EventRow>> {
    let mut q = Stmt::new(
        "SELECT id, pool, at_ms, kind, worker, instance_type, zone, detail FROM pool_events
         WHERE pool = ",
    );
    q.push_bind(pool);
    if let Some((at, id)) = page.after {
        q.push(" AND (at_ms < ")
            .push_bind(at)
            .push(" OR (at_ms = ")
            .push_bind(at)
            .push(" AND id < ")
            .push_bind(id)
            .push("))");
    }
    q.push(" ORDER BY at_ms DESC, id DESC LIMIT ")
        .push_bind(i64::try_from(page.limit).unwrap_or(i64::MAX));
    fetch_all_as::<B, EventRecord, _>(&mut *db.conn().await?, q).await
}

/// The aliases of `pool`'s workers, as (worker id, alias), sorted by both.
pub(super) async fn worker_aliases<B: Backend>(
    db: &B,
    pool: &str,
) -> StoreResult<Vec<(String, String)>> {
    aliases::<B>(&mut *db.conn().await?, pool).await
}
