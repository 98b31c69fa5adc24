//! Which replica may change cloud capacity: the holder of a leader lease.
//!
//! On PostgreSQL the lease is a session advisory lock (`pg_try_advisory_lock`) on a
//! connection of its own, outside the pool, so that it lives and dies with that session:
//!
//! - the leader renews it every third of the lease with a round trip; a renewal that fails or
//!   takes longer than a third of the lease makes it step down at once and drop the session;
//! - the session is opened with `idle_session_timeout` set to the lease, so the server ends a
//!   leader's session that stops renewing (hung process, lost network) within the lease, and
//!   the lock with it; a leader that exits or crashes closes the session sooner;
//! - the others try to take the lock every third of the lease, so one of them leads within
//!   about a lease of the old leader going silent, and at once after it exits.
//!
//! A replica that lost its session stops acting before the server frees the lock, so two
//! replicas never act at once. On SQLite the one process that owns the file leads.

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tokio::sync::watch;

use crate::store::LEADER_LOCK_KEY;
use crate::store::Store;

/// Holds or waits for the lease until `shutdown` turns true; `leader` tells whether this
/// process leads right now.
pub async fn hold_lease(
    store: Store,
    lease: Duration,
    leader: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Store::Postgres(pg) = store else {
        let _ = leader.send(true);
        let _ = shutdown.wait_for(|s| *s).await;
        let _ = leader.send(false);
        return;
    };
    let beat = (lease / 3).max(Duration::from_millis(100));
    let options = pg.pool().connect_options().as_ref().clone();
    loop {
        let session = async {
            let mut conn = PgConnection::connect_with(&options).await?;
            sqlx::query(&format!(
                "SET idle_session_timeout = {}",
                lease.as_millis().max(1000)
            ))
            .execute(&mut conn)
            .await?;
            Ok::<_, sqlx::Error>(conn)
        };
        let opened = tokio::select! {
            c = session => Some(c),
            _ = crate::reconcile::until_true(&mut shutdown) => None,
        };
        let mut conn = match opened {
            None => return,
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "leader lease: cannot open a session; retrying");
                if sleep_or_stop(beat, &mut shutdown).await {
                    return;
                }
                continue;
            }
        };
        // Contend, then hold, on this session until it fails.
        loop {
            let acquired = tokio::time::timeout(
                beat,
                sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
                    .bind(LEADER_LOCK_KEY)
                    .fetch_one(&mut conn),
            )
            .await;
            match acquired {
                Ok(Ok(true)) => {
                    tracing::info!("leader lease acquired: this replica reconciles");
                    let _ = leader.send(true);
                    let stopped = renew(&mut conn, beat, &mut shutdown).await;
                    let _ = leader.send(false);
                    if stopped {
                        let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
                            .bind(LEADER_LOCK_KEY)
                            .execute(&mut conn)
                            .await;
                        let _ = conn.close().await;
                        tracing::info!("leader lease released on shutdown");
                        return;
                    }
                    tracing::warn!("leader lease lost: this replica stopped reconciling");
                    break;
                }
                Ok(Ok(false)) => {
                    if sleep_or_stop(beat, &mut shutdown).await {
                        return;
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "leader lease: session failed; reconnecting");
                    break;
                }
                Err(_) => {
                    tracing::warn!("leader lease: the database did not answer in time");
                    break;
                }
            }
        }
        // Dropping the session (and the lock, if the server still holds it) before retrying.
        drop(conn);
        if sleep_or_stop(beat, &mut shutdown).await {
            return;
        }
    }
}

/// Renews until a renewal fails (`false`) or shutdown is asked for (`true`).
async fn renew(
    conn: &mut PgConnection,
    beat: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    loop {
        if sleep_or_stop(beat, shutdown).await {
            return true;
        }
        let ok = tokio::time::timeout(beat, sqlx::query("SELECT 1").execute(&mut *conn)).await;
        if !matches!(ok, Ok(Ok(_))) {
            return false;
        }
    }
}

/// Sleeps `d`; `true` when shutdown was asked for meanwhile.
async fn sleep_or_stop(d: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    if *shutdown.borrow() {
        return true;
    }
    let stopped = tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = crate::reconcile::until_true(shutdown) => true,
    };
    stopped || *shutdown.borrow()
}
