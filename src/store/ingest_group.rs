//! Group commit for sample batches. Senders that report the same series at once (every
//! exporter of a pool writes the pool's queue depth; a Prometheus sends its shards in
//! parallel) would each update the series' row in `signal_latest` and queue on it until the
//! one before commits: their batches would be written one at a time, each paying for its own
//! lock wait and commit. Instead a few writers per store ([`WRITERS`]) each take every batch
//! waiting when it is free and write them in one transaction: one insert of the samples in
//! key order, one upsert per series, one commit. Each sender gets its own answer once that
//! commit lands. So a 2xx still means committed, a batch that names an unknown pool still
//! fails alone, and under load the groups grow instead of the queue of lock waiters. Writers
//! take rows in key order, so two groups that overlap wait for each other but never deadlock.
//!
//! Batches with an idempotency key are not grouped: their key is claimed in the batch's own
//! transaction ([`super::signal_sql::ingest`]).

use std::sync::{Arc, OnceLock};

use tokio::sync::{Mutex, mpsc, oneshot};

use super::backend::Backend;
use super::signal_sql::{Batch, Busy, write_batches};
use super::{Fault, IngestReport, NewSample, StoreError, StoreResult};

/// Samples a group takes at most, beyond its first batch: the transaction and its statements
/// stay short enough that a sender waits at most about one group.
pub(super) const MAX_GROUP_SAMPLES: usize = 20_000;
/// Batches waiting for the writer before senders wait to hand theirs over.
const QUEUE: usize = 1024;
/// Writers per store: while one group waits for its commit, or for the rows another group's
/// upsert holds, the others insert their samples (docs/performance.md has the figures).
pub(super) const WRITERS: usize = 4;

/// One sender's batch and where its answer goes.
pub(super) struct Job {
    samples: Vec<NewSample>,
    busy: Busy,
    now_ms: i64,
    answer: oneshot::Sender<StoreResult<IngestReport>>,
}

/// The queue to a store's writers, started by the first batch. The writers hold a clone of
/// the store without this queue, so they end when the store's last clone is dropped.
#[derive(Debug, Default)]
pub(crate) struct IngestQueue {
    sender: OnceLock<mpsc::Sender<Job>>,
}

/// Stores `samples` all or nothing in the next group `db`'s writer commits.
pub(super) async fn ingest<B: Backend>(
    db: &B,
    samples: Vec<NewSample>,
    busy: Busy,
    now_ms: i64,
) -> StoreResult<IngestReport> {
    let sender = db.ingest_queue().sender.get_or_init(|| {
        let (sender, receiver) = mpsc::channel(QUEUE);
        let jobs: Jobs = Arc::new(Mutex::new(receiver));
        for _ in 0..WRITERS {
            db.spawn_ingest_writer(jobs.clone());
        }
        sender
    });
    let (answer, answered) = oneshot::channel();
    let job = Job {
        samples,
        busy,
        now_ms,
        answer,
    };
    if sender.send(job).await.is_err() {
        return Err(writer_gone());
    }
    answered.await.unwrap_or_else(|_| Err(writer_gone()))
}

fn writer_gone() -> StoreError {
    StoreError::Shared {
        fault: Fault::Unavailable,
        message: "the ingestion writer stopped".into(),
    }
}

/// The batches waiting for a writer; writers take turns to take them.
pub(super) type Jobs = Arc<Mutex<mpsc::Receiver<Job>>>;

/// One writer: a group is every batch waiting when it is free, up to
/// [`MAX_GROUP_SAMPLES`].
pub(super) async fn write_groups<B: Backend>(db: B, jobs: Jobs) {
    loop {
        let group = {
            let mut receiver = jobs.lock().await;
            let Some(first) = receiver.recv().await else {
                return;
            };
            let mut size = first.samples.len();
            let mut group = vec![first];
            while size < MAX_GROUP_SAMPLES {
                match receiver.try_recv() {
                    Ok(job) => {
                        size += job.samples.len();
                        group.push(job);
                    }
                    Err(_) => break,
                }
            }
            group
        };
        answer(&db, group).await;
    }
}

/// Writes one group and answers each of its senders.
async fn answer<B: Backend>(db: &B, group: Vec<Job>) {
    let results = match write_group(db, &group).await {
        Ok(mut results) => {
            let batches = results.iter().filter(|r| r.is_ok()).count() as u64;
            for report in results.iter_mut().flatten() {
                report.group_batches = batches;
            }
            results
        }
        // A group's batches passed the same checks as a lone batch, so an error that is not
        // the database's state should be rare; each batch is then written alone, so that only
        // the batch that causes it fails.
        Err(e) if e.fault() == Fault::Other && group.len() > 1 => {
            tracing::warn!(error = %e, batches = group.len(), "group write failed; writing its batches one by one");
            let mut alone = Vec::with_capacity(group.len());
            for job in &group {
                alone.push(
                    write_group(db, std::slice::from_ref(job))
                        .await
                        .and_then(|mut r| r.pop().unwrap_or_else(|| Ok(IngestReport::default()))),
                );
            }
            alone
        }
        Err(e) => {
            let (fault, message) = (e.fault(), e.to_string());
            group
                .iter()
                .map(|_| {
                    Err(StoreError::Shared {
                        fault,
                        message: message.clone(),
                    })
                })
                .collect()
        }
    };
    for (job, result) in group.into_iter().zip(results) {
        if let Ok(report) = &result {
            db.announce_activity_soon(report.active_pools.iter().chain(&report.quiet_pools));
        }
        // A sender that went away (its client hung up) is not waiting for the answer; its
        // batch is committed all the same, as it would be had it been written alone.
        let _ = job.answer.send(result);
    }
}

/// One transaction for the group: a result per batch, or the error that rolled it back.
async fn write_group<B: Backend>(
    db: &B,
    group: &[Job],
) -> StoreResult<Vec<StoreResult<IngestReport>>> {
    let batches: Vec<Batch> = group
        .iter()
        .map(|j| Batch {
            samples: &j.samples,
            busy: j.busy,
            now_ms: j.now_ms,
        })
        .collect();
    let mut tx = db.begin_write().await?;
    let results = write_batches::<B>(&mut tx, &batches).await?;
    tx.commit().await?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::policy::Policy;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{Store, signal_sql};

    const T0: i64 = 1_796_112_000_000;

    fn sample(pool: &str, worker: &str, name: &'static str, second: i64, value: f64) -> NewSample {
        NewSample {
            pool: pool.into(),
            worker: worker.into(),
            name,
            value,
            at_ms: T0 + second * 1_000,
        }
    }

    fn busy(_: &Policy, s: &NewSample) -> bool {
        s.value > 0.0
    }

    /// Overlapping batches: work and idleness in different orders, re-sent samples (one sent
    /// twice in one batch), a later batch with older samples, and one batch that names a pool
    /// that does not exist.
    fn batches() -> Vec<Vec<NewSample>> {
        vec![
            vec![
                sample("p", "w1", "gpu_utilization", 1, 0.0),
                sample("p", "w1", "gpu_utilization", 2, 0.8),
                sample("p", "", "queue_depth", 2, 3.0),
            ],
            vec![
                sample("p", "w1", "gpu_utilization", 3, 0.0),
                sample("p", "w1", "gpu_utilization", 2, 0.8),
                sample("p", "w1", "gpu_utilization", 5, 0.0),
                sample("p", "w1", "gpu_utilization", 5, 0.0),
                sample("p", "", "queue_depth", 4, 0.0),
                sample("q", "", "queue_depth", 4, 0.0),
            ],
            vec![
                sample("p", "w1", "gpu_utilization", 2, 0.8),
                sample("nowhere", "", "queue_depth", 2, 1.0),
            ],
            vec![
                sample("p", "w1", "gpu_utilization", 4, 0.0),
                sample("p", "w2", "gpu_utilization", 1, 0.5),
                sample("p", "", "queue_depth", 1, 9.0),
            ],
        ]
    }

    async fn sqlite(dir: &tempfile::TempDir, name: &str) -> SqliteStore {
        let url = format!("sqlite://{}", dir.path().join(name).display());
        let store = SqliteStore::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let policy = crate::core::policy::test_policy();
        let store = Store::Sqlite(store);
        for pool in ["p", "q"] {
            store.put_pool(pool, &policy, T0).await.expect("pool");
        }
        match store {
            Store::Sqlite(s) => s,
            Store::Postgres(_) => unreachable!(),
        }
    }

    type Latest = Vec<(String, String, String, i64, f64, Option<i64>, Option<i64>)>;

    async fn stored(db: &SqliteStore) -> (Latest, i64) {
        let latest = sqlx::query_as(
            "SELECT pool, worker, name, at_ms, value, last_busy_at_ms, idle_since_ms
             FROM signal_latest ORDER BY pool, worker, name",
        )
        .fetch_all(db.pool())
        .await
        .expect("signal_latest");
        let (samples,): (i64,) = sqlx::query_as("SELECT count(*) FROM metric_samples")
            .fetch_one(db.pool())
            .await
            .expect("metric_samples");
        (latest, samples)
    }

    /// One group commit stores and reports what the same batches written one transaction
    /// after another do, and the batch with an unknown pool fails alone.
    #[tokio::test]
    async fn a_group_is_the_same_as_its_batches_in_turn() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let (grouped, in_turn) = (sqlite(&dir, "g.db").await, sqlite(&dir, "t.db").await);
        let batches = batches();
        let jobs: Vec<Job> = batches
            .iter()
            .map(|samples| Job {
                samples: samples.clone(),
                busy,
                now_ms: T0 + 60_000,
                answer: oneshot::channel().0,
            })
            .collect();
        let group = write_group(&grouped, &jobs).await.expect("group commit");
        let mut alone = Vec::new();
        for samples in &batches {
            alone.push(signal_sql::ingest(&in_turn, samples, busy, T0 + 60_000, None).await);
        }
        assert_eq!(group.len(), alone.len());
        for (i, (g, a)) in group.iter().zip(&alone).enumerate() {
            match (g, a) {
                (Ok(g), Ok(a)) => assert_eq!(
                    IngestReport {
                        group_batches: 1,
                        ..g.clone()
                    },
                    *a,
                    "batch {i}"
                ),
                (Err(g), Err(a)) => assert_eq!(g.to_string(), a.to_string(), "batch {i}"),
                _ => panic!("batch {i}: {g:?} grouped, {a:?} alone"),
            }
        }
        assert!(
            matches!(&group[2], Err(StoreError::UnknownPool { index: 1, pool }) if pool == "nowhere"),
            "{:?}",
            group[2]
        );
        // The second batch re-sends one of the first's samples and sends one twice.
        let duplicates: Vec<Option<u64>> = group
            .iter()
            .map(|r| r.as_ref().ok().map(|r| r.duplicates))
            .collect();
        assert_eq!(duplicates, [Some(0), Some(2), None, Some(0)]);
        let (g, a) = (stored(&grouped).await, stored(&in_turn).await);
        assert_eq!(g, a);
        // w1 was busy at 2 s and idle from 3 s on; the queue's newest value is the 4 s zero.
        let w1 = g.0.iter().find(|r| r.1 == "w1").expect("w1");
        assert_eq!(
            (w1.3, w1.5, w1.6),
            (T0 + 5_000, Some(T0 + 2_000), Some(T0 + 3_000))
        );
        assert_eq!(g.1, 10, "the re-sent sample is stored once");
    }
}
