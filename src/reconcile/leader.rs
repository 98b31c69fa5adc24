//! Which replica may change cloud capacity: the holder of a leader lease.
//!
//! On PostgreSQL the lease is a session advisory lock (`pg_try_advisory_lock`) on a
//! connection of its own, outside the pool, so that it lives and dies with that session. Time
//! is counted in beats of a quarter of the lease:
//!
//! - the leader renews every beat with a round trip; a renewal that fails or takes longer than
//!   a beat makes it step down at once and drop the session. So a leader whose session ended
//!   knows within two beats;
//! - a replica that takes the lock waits two beats and a little more (renewing meanwhile)
//!   before it acts, so the one that held it before has stepped down by then, even if the
//!   server ended its session a moment before the lock changed hands;
//! - the session runs with `idle_session_timeout` set to the lease, so the server ends the
//!   session of a leader that stops renewing (hung process, lost network) and frees the lock;
//!   a leader that exits or crashes closes its session at once;
//! - the others try to take the lock every beat, so after a crash one of them acts within
//!   three beats and a little more: inside the lease.
//!
//! On SQLite the one process that owns the file leads.

use std::time::{Duration, Instant};

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
    let beat = (lease / 4).max(Duration::from_millis(100));
    // The previous holder's own renewal has failed by then.
    let grace = beat * 2 + Duration::from_millis(100);
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
        // A server that accepts the connection and never answers (a partition) must not
        // hold this loop for ever.
        let session = tokio::time::timeout(lease, session);
        let opened = tokio::select! {
            c = session => Some(c.unwrap_or_else(|_| {
                Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the database did not answer the lease session in time",
                )))
            })),
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
                    let mut held =
                        renew(&mut conn, beat, Some(Instant::now() + grace), &mut shutdown).await;
                    if held == Renewal::Held {
                        tracing::info!("leader lease acquired: this replica reconciles");
                        let _ = leader.send(true);
                        held = renew(&mut conn, beat, None, &mut shutdown).await;
                        let _ = leader.send(false);
                    }
                    if held == Renewal::Stopped {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renewal {
    /// Renewed until the deadline.
    Held,
    /// A renewal failed or took longer than a beat.
    Lost,
    /// Shutdown was asked for.
    Stopped,
}

/// Renews every beat until `until` (or for ever), a renewal fails, or shutdown.
async fn renew(
    conn: &mut PgConnection,
    beat: Duration,
    until: Option<Instant>,
    shutdown: &mut watch::Receiver<bool>,
) -> Renewal {
    loop {
        let wait = match until {
            Some(end) => match end.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(beat),
                _ => return Renewal::Held,
            },
            None => beat,
        };
        if sleep_or_stop(wait, shutdown).await {
            return Renewal::Stopped;
        }
        let ok = tokio::time::timeout(beat, sqlx::query("SELECT 1").execute(&mut *conn)).await;
        if !matches!(ok, Ok(Ok(_))) {
            return Renewal::Lost;
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
