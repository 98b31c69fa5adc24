//! The process's Prometheus registry: request latency by route, decision, ingestion,
//! cloud-event, provider-call and reconciler counters. It lives below the HTTP layer so the
//! reconciler and the provider adapters can count without depending on `api`; `api::metrics`
//! serves it at `GET /metrics`.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::fleet::view::PoolView;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// One of `api::metrics::method_label`'s answers, never the method as sent.
    pub method: &'static str,
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub kind: &'static str,
    pub pool: String,
    pub changed: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

/// What became of a message from an events queue.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueOutcomeLabels {
    /// `recorded`, `duplicate`, `unmatched`, `ignored` or `poison`.
    pub outcome: &'static str,
}

/// Why a message from an events queue was poison.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueuePoisonLabels {
    /// `not_json`, `invalid_event` or `too_many_notices`.
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    pub pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderCallLabels {
    pub provider: &'static str,
    pub method: &'static str,
    /// `ok` or the error kind (`throttled`, `insufficient_capacity`, ...).
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderMethodLabels {
    pub provider: &'static str,
    pub method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `unchanged`, `changed`, `observed` or `failed`.
    pub outcome: &'static str,
}

/// A live worker of an existing pool: bounded by the pools' `max_workers`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabels {
    pub pool: String,
    pub worker: String,
}

type PoolGauge = Family<PoolLabels, Gauge<f64, AtomicU64>>;

/// The service's metrics and the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub http: Family<HttpLabels, Histogram>,
    pub decisions: Family<DecisionLabels, Counter>,
    pub samples: Family<SourceLabels, Counter>,
    /// Samples that arrived and were not stored, by [`crate::ingest::limits::DropReason`].
    pub samples_dropped: Family<ReasonLabels, Counter>,
    /// For each stored sample batch, how many batches its group commit held.
    ingest_group_batches: Histogram,
    pub cloud_events: Family<KindLabels, Counter>,
    /// Messages taken from events queues (SQS), by what became of them.
    pub event_queue_messages: Family<QueueOutcomeLabels, Counter>,
    /// Poison messages taken from events queues, by reason.
    pub event_queue_poison: Family<QueuePoisonLabels, Counter>,
    /// Open KEDA `StreamIsActive` subscriptions on this replica.
    pub keda_streams: Gauge,
    pub provider_calls: Family<ProviderCallLabels, Counter>,
    pub provider_call_seconds: Family<ProviderMethodLabels, Histogram>,
    pub reconciles: Family<ReconcileLabels, Counter>,
    /// 1 while this replica holds the reconciler's leader lease.
    pub reconcile_leader: Gauge,
    current: PoolGauge,
    desired: PoolGauge,
    cost_per_hour: PoolGauge,
    spent_today: PoolGauge,
    queue_depth: PoolGauge,
    gpu_utilization: PoolGauge,
    daily_budget: PoolGauge,
    worker_gpu_memory: Family<WorkerLabels, Gauge<f64, AtomicU64>>,
    /// Pools named in `decisions`, so that a deleted pool's series go at the next scrape.
    decided_pools: Mutex<HashSet<String>>,
    /// One scrape at a time refreshes the pool gauges.
    scrape: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("trainscaler");
        let http = Family::<HttpLabels, Histogram>::new_with_constructor(|| {
            // 0.5 ms to 10 s: decisions are sub-millisecond, imports take seconds.
            Histogram::new([
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ])
        });
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request, by method, matched route and status",
            http.clone(),
        );
        let decisions = Family::default();
        registry.register(
            "decisions",
            "Decisions made: kind job or pool, and whether a pool's target changed",
            decisions.clone(),
        );
        let samples = Family::default();
        registry.register(
            "samples_ingested",
            "Metric samples accepted, by source",
            samples.clone(),
        );
        let samples_dropped = Family::default();
        registry.register(
            "samples_dropped",
            "Metric samples that arrived and were not stored, by reason",
            samples_dropped.clone(),
        );
        // Powers of two up to the queue's 1,024 batches.
        let ingest_group_batches = Histogram::new(exponential_buckets(1.0, 2.0, 11));
        registry.register(
            "ingest_group_batches",
            "For each sample batch stored, the batches committed in the same transaction (1 when alone)",
            ingest_group_batches.clone(),
        );
        let cloud_events = Family::default();
        registry.register(
            "cloud_events",
            "Cloud notices recorded, by kind",
            cloud_events.clone(),
        );
        let event_queue_messages = Family::default();
        registry.register(
            "event_queue_messages",
            "Messages taken from the events queues and deleted, by outcome",
            event_queue_messages.clone(),
        );
        let event_queue_poison = Family::default();
        registry.register(
            "event_queue_poison_messages",
            "Poison messages on the events queues (counted, logged once, deleted), by reason",
            event_queue_poison.clone(),
        );
        let keda_streams = Gauge::default();
        registry.register(
            "keda_streams",
            "Open KEDA StreamIsActive subscriptions on this replica",
            keda_streams.clone(),
        );
        let provider_calls = Family::default();
        registry.register(
            "provider_calls",
            "Calls to cloud provider adapters, by provider, method and outcome",
            provider_calls.clone(),
        );
        let provider_call_seconds =
            Family::<ProviderMethodLabels, Histogram>::new_with_constructor(|| {
                Histogram::new([
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                ])
            });
        registry.register(
            "provider_call_duration_seconds",
            "Time a provider adapter call took, retries included",
            provider_call_seconds.clone(),
        );
        let reconciles = Family::default();
        registry.register(
            "reconciles",
            "Pool reconciliations, by outcome",
            reconciles.clone(),
        );
        let reconcile_leader = Gauge::default();
        registry.register(
            "reconcile_leader",
            "1 while this replica leads the reconciler",
            reconcile_leader.clone(),
        );
        let mut gauge = |name: &str, help: &str| {
            let g = PoolGauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let current = gauge("pool_workers_current", "Live workers of the pool");
        let desired = gauge(
            "pool_workers_desired",
            "The pool's target from its last decision",
        );
        let cost_per_hour = gauge(
            "pool_cost_per_hour_dollars",
            "Dollars per hour of the pool's live workers at catalog prices",
        );
        let spent_today = gauge(
            "pool_spent_today_dollars",
            "Dollars the pool has spent since 00:00 UTC",
        );
        let queue_depth = gauge("pool_queue_depth", "Jobs waiting in the pool's queue");
        let gpu_utilization = gauge(
            "pool_gpu_utilization",
            "Mean GPU utilisation of the pool's live workers, 0 to 1",
        );
        let daily_budget = gauge("pool_daily_budget_dollars", "The pool's daily budget");
        let worker_gpu_memory = Family::<WorkerLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "worker_gpu_memory_used_gib",
            "GPU memory in use on the fullest GPU of a live worker, GiB, from fresh signals",
            worker_gpu_memory.clone(),
        );
        Self {
            registry,
            http,
            decisions,
            samples,
            samples_dropped,
            ingest_group_batches,
            cloud_events,
            event_queue_messages,
            event_queue_poison,
            keda_streams,
            provider_calls,
            provider_call_seconds,
            reconciles,
            reconcile_leader,
            current,
            desired,
            cost_per_hour,
            spent_today,
            queue_depth,
            gpu_utilization,
            daily_budget,
            worker_gpu_memory,
            decided_pools: Mutex::default(),
            scrape: Mutex::new(()),
        }
    }
}

impl Metrics {
    /// Sets the per-pool gauges from `pools` (read from the database at scrape time) and
    /// encodes the whole registry as OpenMetrics text.
    pub fn encode_with_fleet(&self, pools: &[PoolView]) -> Result<String, std::fmt::Error> {
        let m = self;
        let mut text = String::new();
        {
            let _one = m.scrape.lock().unwrap_or_else(|e| e.into_inner());
            for g in [
                &m.current,
                &m.desired,
                &m.cost_per_hour,
                &m.spent_today,
                &m.queue_depth,
                &m.gpu_utilization,
                &m.daily_budget,
            ] {
                g.clear();
            }
            m.worker_gpu_memory.clear();
            m.forget_pools_except(&pools.iter().map(|p| p.name.as_str()).collect());
            for p in pools {
                let l = PoolLabels {
                    pool: p.name.clone(),
                };
                m.current.get_or_create(&l).set(f64::from(p.current));
                m.desired
                    .get_or_create(&l)
                    .set(f64::from(p.desired.unwrap_or(p.current)));
                m.cost_per_hour
                    .get_or_create(&l)
                    .set(unsigned_zero(p.cost_per_hour));
                m.spent_today
                    .get_or_create(&l)
                    .set(unsigned_zero(p.spent_today));
                if let Some(q) = p.queue_depth {
                    m.queue_depth.get_or_create(&l).set(unsigned_zero(q));
                }
                if let Some(u) = p.gpu_utilization {
                    m.gpu_utilization.get_or_create(&l).set(unsigned_zero(u));
                }
                if let Some(b) = &p.budget {
                    m.daily_budget
                        .get_or_create(&l)
                        .set(unsigned_zero(b.daily_budget));
                }
                for w in &p.worker_signals {
                    if let Some(gib) = w.gpu_memory_used_gib {
                        let l = WorkerLabels {
                            pool: p.name.clone(),
                            worker: w.id.clone(),
                        };
                        m.worker_gpu_memory
                            .get_or_create(&l)
                            .set(unsigned_zero(gib));
                    }
                }
            }
            encode(&mut text, &m.registry)?;
        }
        Ok(text)
    }

    /// Counts a stored sample batch from `source`: its samples, and the size of the group
    /// commit it was written in.
    pub fn samples_stored(&self, source: &'static str, report: &crate::store::IngestReport) {
        self.samples
            .get_or_create(&SourceLabels { source })
            .inc_by(report.accepted);
        self.ingest_group_batches
            .observe(report.group_batches as f64);
    }

    /// Counts a decision. Callers name only pools that exist (a decision for an unknown pool
    /// is a 404 first); a pool deleted since is dropped from the labels at the next scrape.
    pub fn decision(&self, kind: &'static str, pool: &str, changed: bool) {
        if !pool.is_empty() {
            let mut pools = self.decided_pools.lock().unwrap_or_else(|e| e.into_inner());
            if !pools.contains(pool) {
                pools.insert(pool.to_string());
            }
        }
        self.decisions
            .get_or_create(&DecisionLabels {
                kind,
                pool: pool.to_string(),
                changed,
            })
            .inc();
    }

    /// Drops the decision series of pools not in `existing`.
    fn forget_pools_except(&self, existing: &HashSet<&str>) {
        let mut pools = self.decided_pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.retain(|pool| {
            if existing.contains(pool.as_str()) {
                return true;
            }
            for changed in [false, true] {
                self.decisions.remove(&DecisionLabels {
                    kind: "pool",
                    pool: pool.clone(),
                    changed,
                });
            }
            false
        });
    }
}

/// `x` with a negative zero made positive: a sum of costs or a sample of `-0` would otherwise
/// be exposed as `-0.0`, which reads like a refund.
pub fn unsigned_zero(x: f64) -> f64 {
    x + 0.0
}
