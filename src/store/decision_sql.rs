//! One pool decision as a transaction, written once for both backends. The decision reads
//! the pool with its workers, series and incidents in one statement (each backend writes that
//! statement in its own JSON dialect) and writes what the decision returns under the pool's
//! row lock, so that concurrent decisions for one pool that write happen one after another.

use super::backend::{Backend, encode_error};
use super::pool_rows::DecisionRecord;
use super::pool_sql::insert_event;
use super::stmt::Stmt;
use super::{DecisionRead, DecisionWrite, StoreResult};
use crate::core::cost::day_start;

/// The decision read at `now_ms`, as a statement: `sql` is the backend's read (or locking
/// read).
fn read_pool<'q>(sql: &'static str, name: &'q str, now_ms: i64) -> Stmt<'q> {
    Stmt::new(sql)
        .bind(name)
        .bind(day_start(now_ms))
        .bind(now_ms)
}

/// Runs one pool decision: reads what the decision needs, lets `decide` compute (pure, no
/// awaits inside), writes what it returns, commits. `None` when the pool does not exist.
pub(super) async fn decide_pool<B: Backend, R>(
    db: &B,
    name: &str,
    now_ms: i64,
    decide: impl Fn(&DecisionRead) -> (DecisionWrite, R),
) -> StoreResult<Option<R>> {
    // Most decisions change nothing. One that changes nothing can take its place in the
    // order at the moment of its (consistent, committed) read, so it needs no lock; only a
    // decision that would write is made again under the pool's lock.
    let read = read_pool(B::read_pool_sql(), name, now_ms);
    let Some(row) = B::fetch_optional::<DecisionRecord>(&mut *db.conn().await?, read).await? else {
        return Ok(None);
    };
    let (write, answer) = decide(&row.into_read(now_ms)?);
    if write.is_empty() {
        return Ok(Some(answer));
    }
    let mut tx = db.begin_write().await?;
    let lock = read_pool(B::lock_pool_sql(), name, now_ms);
    let Some(row) = B::fetch_optional::<DecisionRecord>(&mut tx, lock).await? else {
        return Ok(None);
    };
    let (write, answer) = decide(&row.into_read(now_ms)?);
    if write.is_empty() {
        // Nothing to write: end the read without a commit record.
        tx.rollback().await?;
        return Ok(Some(answer));
    }
    if let Some(state) = &write.state {
        let json = serde_json::to_string(state).map_err(encode_error)?;
        let update = Stmt::new("UPDATE pools SET state = $2 WHERE name = $1")
            .bind(name)
            .bind(json);
        B::execute(&mut tx, update).await?;
    }
    if let Some((key, rendered)) = &write.last_decision {
        let update = Stmt::new(
            "UPDATE pools SET last_decision = $2, last_decision_key = $3,
                 last_decision_at_ms = $4
             WHERE name = $1",
        )
        .bind(name)
        .bind(rendered.to_string())
        .bind(key)
        .bind(now_ms);
        B::execute(&mut tx, update).await?;
    }
    for e in &write.events {
        insert_event::<B>(&mut tx, name, e, now_ms).await?;
    }
    if write.activated {
        B::announce_activity(&mut tx, name).await?;
    }
    tx.commit().await?;
    Ok(Some(answer))
}
