//! Pool rows as the database returns them, decoded by column name (`FromRow`), and their
//! conversion to the store's and the core's types. The decision read returns workers, series
//! and incidents as JSON arrays of arrays (one round trip under the lock); each inner array
//! decodes into the same record as a table row, its values in the record's field order.

use serde::Deserialize;

use super::backend::decode_error;
use super::{DecisionRead, EventRow, LatestSignal, PoolRow};
use crate::core::idle::{SeriesActivity, SeriesIdle};
use crate::core::policy::secs_to_ms;
use crate::core::scale::{Incident, IncidentKind, Warning, WarningKind, Worker};

/// The columns of `pools` a [`PoolRecord`] is decoded from.
pub(super) const POOL_COLUMNS: &str = "name, policy, state, last_decision, last_decision_key, \
    last_decision_at_ms, since_ms, created_at_ms, updated_at_ms";

#[derive(Debug, sqlx::FromRow)]
pub(super) struct PoolRecord {
    name: String,
    policy: String,
    state: String,
    last_decision: Option<String>,
    last_decision_key: Option<String>,
    last_decision_at_ms: Option<i64>,
    since_ms: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl TryFrom<PoolRecord> for PoolRow {
    type Error = sqlx::Error;

    fn try_from(r: PoolRecord) -> Result<Self, Self::Error> {
        Ok(Self {
            name: r.name,
            policy: serde_json::from_str(&r.policy).map_err(decode_error)?,
            state: serde_json::from_str(&r.state).map_err(decode_error)?,
            last_decision: r
                .last_decision
                .map(|s| serde_json::from_str(&s))
                .transpose()
                .map_err(decode_error)?,
            last_decision_key: r.last_decision_key,
            last_decision_at_ms: r.last_decision_at_ms,
            since_ms: r.since_ms,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
        })
    }
}

/// A pool with how many of its workers are live.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct PoolListRecord {
    #[sqlx(flatten)]
    pub pool: PoolRecord,
    pub live_workers: i64,
}

/// The columns of `workers` a [`WorkerRecord`] is decoded from, in its field order.
pub(super) const WORKER_COLUMNS: &str = "id, instance_type, market, zone, started_at_ms, \
    stopped_at_ms, warning_kind, warning_at_ms, warning_action_at_ms";

#[derive(Debug, sqlx::FromRow, Deserialize)]
pub(super) struct WorkerRecord {
    id: String,
    instance_type: String,
    market: String,
    zone: Option<String>,
    started_at_ms: i64,
    stopped_at_ms: Option<i64>,
    warning_kind: Option<String>,
    warning_at_ms: Option<i64>,
    warning_action_at_ms: Option<i64>,
}

impl TryFrom<WorkerRecord> for Worker {
    type Error = sqlx::Error;

    fn try_from(r: WorkerRecord) -> Result<Self, Self::Error> {
        Ok(Self {
            id: r.id,
            instance_type: r.instance_type,
            market: r.market.parse().map_err(decode_error)?,
            zone: r.zone,
            started_at_ms: r.started_at_ms,
            stopped_at_ms: r.stopped_at_ms,
            warning: r.warning_kind.map(|kind| Warning {
                kind: WarningKind::from_stored(&kind),
                at_ms: r.warning_at_ms.unwrap_or(0),
                action_at_ms: r.warning_action_at_ms,
            }),
            utilization: None,
            gpu_memory_gib: None,
        })
    }
}

/// The newest value of one series and its activity, as the decision read returns it.
#[derive(Debug, Deserialize)]
struct SeriesRecord {
    worker: String,
    name: String,
    value: f64,
    at_ms: i64,
    last_busy_at_ms: Option<i64>,
    idle_since_ms: Option<i64>,
}

/// A recent interruption or capacity error, as the decision read returns it.
#[derive(Debug, Deserialize)]
struct IncidentRecord {
    kind: String,
    instance_type: String,
    zone: Option<String>,
    at_ms: i64,
}

impl From<IncidentRecord> for Incident {
    fn from(r: IncidentRecord) -> Self {
        Self {
            kind: if r.kind == "capacity_error" {
                IncidentKind::CapacityError
            } else {
                IncidentKind::Interruption
            },
            instance_type: r.instance_type,
            zone: r.zone,
            at_ms: r.at_ms,
        }
    }
}

/// A row of the backend's decision read (`Backend::read_pool_sql`).
#[derive(Debug, sqlx::FromRow)]
pub(super) struct DecisionRecord {
    #[sqlx(flatten)]
    pool: PoolRecord,
    workers_json: Option<String>,
    latest_json: Option<String>,
    incidents_json: Option<String>,
}

/// A JSON array aggregated by the database; no rows aggregate to NULL.
fn json_rows<T: for<'de> Deserialize<'de>>(json: Option<String>) -> Result<Vec<T>, sqlx::Error> {
    json.map_or(Ok(Vec::new()), |j| {
        serde_json::from_str(&j).map_err(decode_error)
    })
}

impl DecisionRecord {
    /// What a decision at `now_ms` reads; series older than the policy's signal age limit
    /// are left out of `latest` (but not out of `series_idle`).
    pub fn into_read(self, now_ms: i64) -> Result<DecisionRead, sqlx::Error> {
        let pool = PoolRow::try_from(self.pool)?;
        let workers = json_rows::<WorkerRecord>(self.workers_json)?
            .into_iter()
            .map(Worker::try_from)
            .collect::<Result<_, _>>()?;
        let series = json_rows::<SeriesRecord>(self.latest_json)?;
        let series_idle = series
            .iter()
            .map(|s| SeriesIdle {
                worker: s.worker.clone(),
                name: s.name.clone(),
                activity: SeriesActivity {
                    last_busy_at_ms: s.last_busy_at_ms,
                    idle_since_ms: s.idle_since_ms,
                },
            })
            .collect();
        let fresh_since = now_ms.saturating_sub(secs_to_ms(pool.policy.signal_max_age_sec));
        let latest = series
            .into_iter()
            .filter(|s| s.at_ms >= fresh_since)
            .map(|s| LatestSignal {
                worker: s.worker,
                name: s.name,
                value: s.value,
                at_ms: s.at_ms,
            })
            .collect();
        let incidents = json_rows::<IncidentRecord>(self.incidents_json)?
            .into_iter()
            .map(Incident::from)
            .collect();
        Ok(DecisionRead {
            pool,
            workers,
            latest,
            series_idle,
            incidents,
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct EventRecord {
    id: i64,
    pool: String,
    at_ms: i64,
    kind: String,
    worker: Option<String>,
    instance_type: Option<String>,
    zone: Option<String>,
    detail: String,
}

impl TryFrom<EventRecord> for EventRow {
    type Error = sqlx::Error;

    fn try_from(r: EventRecord) -> Result<Self, Self::Error> {
        Ok(Self {
            id: r.id,
            pool: r.pool,
            at_ms: r.at_ms,
            kind: r.kind,
            worker: r.worker,
            instance_type: r.instance_type,
            zone: r.zone,
            detail: serde_json::from_str(&r.detail).map_err(decode_error)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_arrays_decode_in_field_order() {
        let workers: Vec<WorkerRecord> = json_rows(Some(
            r#"[["i-1","p4d.24xlarge","spot","us-east-1a",10,null,"interruption_warning",20,30]]"#
                .into(),
        ))
        .unwrap();
        let w = Worker::try_from(workers.into_iter().next().unwrap()).unwrap();
        assert_eq!(w.id, "i-1");
        assert_eq!(w.zone.as_deref(), Some("us-east-1a"));
        assert_eq!(w.started_at_ms, 10);
        let warning = w.warning.unwrap();
        assert_eq!(warning.kind, WarningKind::InterruptionWarning);
        assert_eq!((warning.at_ms, warning.action_at_ms), (20, Some(30)));
        let incidents: Vec<IncidentRecord> =
            json_rows(Some(r#"[["capacity_error","g5.xlarge",null,5]]"#.into())).unwrap();
        assert_eq!(
            Incident::from(incidents.into_iter().next().unwrap()).kind,
            IncidentKind::CapacityError
        );
    }

    #[test]
    fn no_aggregated_rows_is_an_empty_list_and_bad_json_a_decode_error() {
        assert!(json_rows::<SeriesRecord>(None).unwrap().is_empty());
        let bad = json_rows::<SeriesRecord>(Some("[[1]]".into())).unwrap_err();
        assert!(matches!(bad, sqlx::Error::Decode(_)), "{bad:?}");
    }
}
