//! The SQL for samples, written once for both backends. A batch is stored all or nothing:
//! every sample goes into `metric_samples` (a re-sent one is a no-op) and the newest value
//! and activity of each series into `signal_latest`, which decisions read. Ingestion never
//! touches the pool's row, so it never waits for a decision.

use std::collections::{BTreeMap, BTreeSet};

use super::backend::{Backend, Tx, decode_error};
use super::stmt::Stmt;
use super::worker_names::WorkerNames;
use super::{IngestReport, LatestSignal, NewSample, Once, StoreError, StoreResult, idempotency};
use crate::core::idle::SeriesActivity;
use crate::core::policy::Policy;

/// Rows per multi-row statement: well under both backends' bind-parameter limits.
pub(super) const CHUNK: usize = 1000;

/// The newest sample of a series in a batch, with the latest time it showed work.
#[derive(Debug, Clone)]
pub(super) struct LatestRow {
    pub pool: String,
    pub worker: String,
    pub name: &'static str,
    pub at_ms: i64,
    pub value: f64,
    /// The batch's own activity for the series, merged with the stored one by the upsert.
    pub activity: SeriesActivity,
}

/// Keeps the newest value per series and merges its activity as
/// [`SeriesActivity::merge`](crate::core::idle::SeriesActivity::merge) does: the later busy
/// time, and the earlier of the two idle times that fall after it. The SET expressions all
/// read the row as it was, which both backends guarantee.
pub(super) static UPSERT_LATEST_TAIL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| {
        let busy = "CASE WHEN excluded.last_busy_at_ms IS NOT NULL
        AND (signal_latest.last_busy_at_ms IS NULL
             OR excluded.last_busy_at_ms > signal_latest.last_busy_at_ms)
        THEN excluded.last_busy_at_ms ELSE signal_latest.last_busy_at_ms END";
        let after =
            |idle: &str| format!("CASE WHEN ({busy}) IS NULL OR {idle} > ({busy}) THEN {idle} END");
        let (x, y) = (
            after("excluded.idle_since_ms"),
            after("signal_latest.idle_since_ms"),
        );
        format!(
            " ON CONFLICT (pool, worker, name) DO UPDATE SET
    value = CASE WHEN excluded.at_ms > signal_latest.at_ms
        THEN excluded.value ELSE signal_latest.value END,
    at_ms = CASE WHEN excluded.at_ms > signal_latest.at_ms
        THEN excluded.at_ms ELSE signal_latest.at_ms END,
    last_busy_at_ms = {busy},
    idle_since_ms = CASE WHEN ({x}) IS NULL THEN {y} WHEN ({y}) IS NULL THEN {x}
        WHEN ({x}) < ({y}) THEN {x} ELSE {y} END"
        )
    });

/// A sample to store, with when its batch was received.
pub(super) type Received<'a> = (&'a NewSample, i64);

/// A stored sample's key: pool, worker, name and time.
pub(super) type SampleKey = (String, String, String, i64);

/// One multi-row insert of samples; a sample already stored is skipped, and the keys of those
/// stored are returned.
pub(super) fn insert_samples_values<'q>(rows: &[Received<'q>]) -> Stmt<'q> {
    let mut q =
        Stmt::new("INSERT INTO metric_samples (pool, worker, name, at_ms, value, received_at_ms) ");
    q.push_values(rows.iter().copied(), |t, (s, received_at_ms)| {
        t.bind(&s.pool)
            .bind(&s.worker)
            .bind(s.name)
            .bind(s.at_ms)
            .bind(s.value)
            .bind(received_at_ms);
    });
    q.push(
        " ON CONFLICT (pool, worker, name, at_ms) DO NOTHING RETURNING pool, worker, name, at_ms",
    );
    q
}

/// One multi-row upsert of series into `signal_latest`.
pub(super) fn upsert_latest_values(rows: &[LatestRow]) -> Stmt<'_> {
    let mut q = Stmt::new(
        "INSERT INTO signal_latest
             (pool, worker, name, at_ms, value, last_busy_at_ms, idle_since_ms) ",
    );
    q.push_values(rows, |t, s| {
        t.bind(&s.pool)
            .bind(&s.worker)
            .bind(s.name)
            .bind(s.at_ms)
            .bind(s.value)
            .bind(s.activity.last_busy_at_ms)
            .bind(s.activity.idle_since_ms);
    });
    q.push(&UPSERT_LATEST_TAIL);
    q
}

/// The newest sample of each series of a pool at or after `since_ms`.
pub(super) async fn latest_signals<B: Backend>(
    db: &B,
    pool: &str,
    since_ms: i64,
) -> StoreResult<Vec<LatestSignal>> {
    let stmt = Stmt::new(
        "SELECT worker, name, value, at_ms FROM signal_latest
         WHERE pool = $1 AND at_ms >= $2 ORDER BY worker, name",
    )
    .bind(pool)
    .bind(since_ms);
    B::fetch_all(&mut *db.conn().await?, stmt).await
}

/// Whether a sample shows work under its pool's policy (for idle-to-zero).
pub type Busy = fn(&Policy, &NewSample) -> bool;

/// One batch of a write: its samples, whether each shows work, and when it was received.
pub(super) struct Batch<'a> {
    pub samples: &'a [NewSample],
    pub busy: Busy,
    pub now_ms: i64,
}

/// Stores a batch of samples all or nothing. Every pool must exist.
pub(super) async fn ingest<B: Backend>(
    db: &B,
    samples: &[NewSample],
    busy: Busy,
    now_ms: i64,
    once: Option<Once<'_, IngestReport>>,
) -> StoreResult<IngestReport> {
    let mut tx = db.begin_write().await?;
    // The key before any write: a duplicate waits here, not halfway through.
    idempotency::begin_once::<B, _>(&mut tx, &once).await?;
    let batch = Batch {
        samples,
        busy,
        now_ms,
    };
    let report = write_batches::<B>(&mut tx, std::slice::from_ref(&batch))
        .await?
        .pop()
        .unwrap_or_else(|| Ok(IngestReport::default()))?;
    idempotency::finish_once::<B, _>(&mut tx, &once, &report).await?;
    tx.commit().await?;
    db.announce_activity_soon(report.active_pools.iter().chain(&report.quiet_pools));
    Ok(report)
}

/// Writes `batches` in one transaction, with the answers and rows writing them one after
/// another would give: a batch that names an unknown pool gets its error and writes nothing,
/// the others their reports. All their samples go in as one insert and the newest value of
/// each series into `signal_latest` as one upsert. A database error fails every batch (the
/// caller rolls back).
pub(super) async fn write_batches<B: Backend>(
    tx: &mut Tx<B>,
    batches: &[Batch<'_>],
) -> StoreResult<Vec<StoreResult<IngestReport>>> {
    let pools = batches
        .iter()
        .flat_map(|b| b.samples)
        .map(|s| s.pool.as_str());
    let policies = policies_of::<B>(tx, pools.collect()).await?;
    let mut names: BTreeSet<&str> = BTreeSet::new();
    let mut results = Vec::with_capacity(batches.len());
    for b in batches {
        match b
            .samples
            .iter()
            .enumerate()
            .find(|(_, s)| !policies.contains_key(s.pool.as_str()))
        {
            Some((index, s)) => results.push(Err(StoreError::UnknownPool {
                index,
                pool: s.pool.clone(),
            })),
            None => {
                names.extend(
                    b.samples
                        .iter()
                        .filter(|s| !s.worker.is_empty())
                        .map(|s| s.pool.as_str()),
                );
                results.push(Ok(IngestReport::default()));
            }
        }
    }
    let names = if names.is_empty() {
        BTreeMap::new()
    } else {
        WorkerNames::load_many::<B>(tx, &names.into_iter().collect::<Vec<_>>()).await?
    };
    // Each batch with its workers named by their ids, and whether each sample shows work.
    let mut kept: Vec<(usize, Vec<NewSample>, i64, Busy)> = Vec::new();
    for (slot, (b, result)) in batches.iter().zip(&results).enumerate() {
        if result.is_ok() {
            kept.push((slot, by_worker_ids(b.samples, &names), b.now_ms, b.busy));
        }
    }
    // Every sample of the group in one order (sorted keys), whichever batch it came from: so
    // that concurrent writes that overlap take their row locks in the same order and cannot
    // deadlock. The sort is stable: of samples with one key, the earlier batch's comes first
    // and is the one stored, as it would be had the batches been written in turn.
    let policies = &policies;
    let sorted = in_series_order(kept.iter().flat_map(|(slot, samples, now_ms, busy)| {
        samples
            .iter()
            .map(move |s| (s, (*slot, *now_ms, shows(policies, *busy, s))))
    }));
    let mut inserted = vec![0u64; batches.len()];
    for chunk in sorted.chunks(CHUNK) {
        let rows: Vec<Received> = chunk.iter().map(|(s, (_, now, _))| (*s, *now)).collect();
        let mut new = B::insert_samples(tx, &rows).await?;
        new.sort_unstable();
        // Both lists are in key order: each key stored counts for the first sample that has it.
        let mut new = new.iter().peekable();
        for (s, (slot, _, _)) in chunk {
            if new.next_if(|k| same_key(k, s)).is_some() {
                inserted[*slot] += 1;
            }
        }
    }
    // Each batch's own samples, still in key order, for its report.
    let mut own: Vec<Vec<(&NewSample, bool)>> = vec![Vec::new(); batches.len()];
    for &(s, (slot, _, busy)) in &sorted {
        own[slot].push((s, busy));
    }
    for (slot, samples, _, _) in &kept {
        results[*slot] = Ok(batch_report(
            &newest_per_series(own[*slot].iter().copied()),
            samples.len() as u64,
            inserted[*slot],
        ));
    }
    let latest = newest_per_series(sorted.iter().map(|&(s, (_, _, busy))| (s, busy)));
    for chunk in latest.chunks(CHUNK) {
        B::upsert_latest(tx, chunk).await?;
    }
    Ok(results)
}

/// Whether a stored key is the sample's.
fn same_key(k: &SampleKey, s: &NewSample) -> bool {
    k.0 == s.pool && k.1 == s.worker && k.2 == s.name && k.3 == s.at_ms
}

/// Whether `s` shows work under its pool's policy.
fn shows(policies: &BTreeMap<&str, Policy>, busy: Busy, s: &NewSample) -> bool {
    policies.get(s.pool.as_str()).is_some_and(|p| busy(p, s))
}

/// Samples sorted by series and time (a stable sort), each with what goes with it.
fn in_series_order<'s, T>(
    samples: impl Iterator<Item = (&'s NewSample, T)>,
) -> Vec<(&'s NewSample, T)> {
    let mut sorted: Vec<(&NewSample, T)> = samples.collect();
    sorted.sort_by(|(a, _), (b, _)| {
        (&a.pool, &a.worker, a.name, a.at_ms).cmp(&(&b.pool, &b.worker, b.name, b.at_ms))
    });
    sorted
}

/// What a batch did, from its own newest values per series.
fn batch_report(latest: &[LatestRow], total: u64, inserted: u64) -> IngestReport {
    let mut active_pools: Vec<String> = latest
        .iter()
        .filter(|l| l.activity.last_busy_at_ms.is_some())
        .map(|l| l.pool.clone())
        .collect();
    active_pools.dedup();
    let mut quiet_pools: Vec<String> = latest
        .iter()
        .filter(|l| crate::core::idle::counts_jobs(l.name) && l.activity.last_busy_at_ms.is_none())
        .map(|l| l.pool.clone())
        .filter(|p| !active_pools.contains(p))
        .collect();
    quiet_pools.dedup();
    IngestReport {
        accepted: total,
        duplicates: total.saturating_sub(inserted),
        active_pools,
        quiet_pools,
        group_batches: 1,
    }
}

/// `samples` with each worker named by its id: a sample may name its worker by an alias
/// (dcgm-exporter's `Hostname` is a host name, not an instance id). A name no worker of the
/// pool goes by is kept as sent.
fn by_worker_ids(samples: &[NewSample], names: &BTreeMap<String, WorkerNames>) -> Vec<NewSample> {
    samples
        .iter()
        .map(|s| {
            let id = names
                .get(s.pool.as_str())
                .and_then(|n| n.match_worker(&s.worker));
            match id {
                Some(id) if id != s.worker => NewSample {
                    worker: id.to_owned(),
                    ..s.clone()
                },
                _ => s.clone(),
            }
        })
        .collect()
}

/// The policy of every pool in `names` that exists, in one statement.
async fn policies_of<'s, B: Backend>(
    tx: &mut Tx<B>,
    names: BTreeSet<&'s str>,
) -> StoreResult<BTreeMap<&'s str, Policy>> {
    let mut policies: BTreeMap<&str, Policy> = BTreeMap::new();
    if names.is_empty() {
        return Ok(policies);
    }
    let mut find = Stmt::new("SELECT name, policy FROM pools WHERE name IN ");
    find.push_list(names.iter().copied());
    let rows: Vec<(String, String)> = B::fetch_all(tx, find).await?;
    let mut found: BTreeMap<String, String> = rows.into_iter().collect();
    for name in names {
        if let Some(json) = found.remove(name) {
            policies.insert(name, serde_json::from_str(&json).map_err(decode_error)?);
        }
    }
    Ok(policies)
}

/// The newest sample per series of `sorted` (sorted by series, each with whether it shows
/// work), and when each series last showed work; in series order.
fn newest_per_series<'s>(
    sorted: impl IntoIterator<Item = (&'s NewSample, bool)>,
) -> Vec<LatestRow> {
    let mut latest: BTreeMap<(&str, &str, &str), LatestRow> = BTreeMap::new();
    for (s, busy) in sorted {
        let e = latest
            .entry((s.pool.as_str(), s.worker.as_str(), s.name))
            .or_insert_with(|| LatestRow {
                pool: s.pool.clone(),
                worker: s.worker.clone(),
                name: s.name,
                at_ms: s.at_ms,
                value: s.value,
                activity: SeriesActivity::default(),
            });
        if s.at_ms > e.at_ms {
            e.at_ms = s.at_ms;
            e.value = s.value;
        }
        e.activity.observe(s.at_ms, busy);
    }
    latest.into_values().collect()
}

/// Deletes samples received before `before_ms`; the latest per series stays.
pub(super) async fn prune_samples<B: Backend>(db: &B, before_ms: i64) -> StoreResult<u64> {
    let prune = Stmt::new("DELETE FROM metric_samples WHERE received_at_ms < $1").bind(before_ms);
    B::execute(&mut *db.conn().await?, prune).await
}

/// Deletes `pool`'s worker series (not its pool-level ones) last reported before `before_ms`.
pub(super) async fn prune_worker_series<B: Backend>(
    db: &B,
    pool: &str,
    before_ms: i64,
) -> StoreResult<u64> {
    let prune =
        Stmt::new("DELETE FROM signal_latest WHERE pool = $1 AND worker <> '' AND at_ms < $2")
            .bind(pool)
            .bind(before_ms);
    B::execute(&mut *db.conn().await?, prune).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(worker: &str, at_ms: i64, value: f64) -> NewSample {
        NewSample {
            pool: "p".into(),
            worker: worker.into(),
            name: "queue_depth",
            value,
            at_ms,
        }
    }

    #[test]
    fn each_series_keeps_its_newest_value_and_its_latest_busy_time() {
        let samples = [
            sample("a", 10, 3.0),
            sample("a", 20, 5.0),
            sample("a", 30, 0.0),
            sample("b", 5, 1.0),
        ];
        let sorted: Vec<(&NewSample, bool)> = samples.iter().map(|s| (s, s.value > 0.0)).collect();
        let latest = newest_per_series(sorted);
        assert_eq!(latest.len(), 2);
        assert_eq!((latest[0].worker.as_str(), latest[0].at_ms), ("a", 30));
        assert_eq!(latest[0].value, 0.0);
        assert_eq!(latest[0].activity.last_busy_at_ms, Some(20));
        assert_eq!(latest[0].activity.idle_since_ms, Some(30));
        assert_eq!((latest[1].worker.as_str(), latest[1].value), ("b", 1.0));
    }
}
