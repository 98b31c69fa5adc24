//! The shared [`AppState`] every request handler holds, and the small helpers on it.

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::auth::Auth;
use crate::ingest::remote_write::LabelMapping;
use crate::metrics::Metrics;
use crate::provider::status::StatusBoard;
use crate::snapshot::CatalogCache;
use crate::store::Store;

/// What every request handler shares: one reference-counted [`Shared`], read through
/// `Deref` (`state.store`, `state.metrics`).
///
/// axum clones the state for every middleware layer and handler a request passes through
/// (about ten times per request here). A struct of a dozen `Arc`s made each clone and drop a
/// dozen atomic updates on counters that both cores touch: profiled under load, cloning and
/// dropping the state took half of the CPU of a `/healthz` request. One `Arc` makes it one.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
#[derive(Debug)]
pub struct Shared {
    /// The database, for writes and history reads.
    pub store: Store,
    /// The time pool decisions are made at (see [`super::clock`]).
    pub clock: Arc<super::Clock>,
    /// The in-memory catalog every catalog read is served from.
    pub catalog: Arc<CatalogCache>,
    pub metrics: Arc<Metrics>,
    /// How remote-write series map to pools and workers.
    pub remote_write: Arc<LabelMapping>,
    /// Largest decompressed remote-write body.
    pub max_decompressed_bytes: usize,
    /// Names of pools that just got work, want workers or may have gone idle, for KEDA's
    /// `StreamIsActive` and the reconciler.
    pub activity: broadcast::Sender<String>,
    /// Names of pools whose target or cloud state just changed, for the reconciler.
    pub dirty: broadcast::Sender<String>,
    /// API keys, webhook signatures and ingestion rate limits.
    pub auth: Arc<Auth>,
    /// How long an ingestion batch's idempotency key is remembered.
    pub idempotency_ttl_ms: i64,
    /// Body limits of the ingestion routes, for the middleware that reads their bodies before
    /// the route's own limit layer does (signatures, idempotency keys).
    pub ingest_body_limits: IngestBodyLimits,
    /// Permits for open `StreamIsActive` streams, one each (`TRAINSCALER_GRPC_MAX_STREAMS`).
    pub grpc_streams: Arc<tokio::sync::Semaphore>,
    /// Which pools' dropped samples were logged already.
    pub drop_log: Arc<crate::ingest::limits::DropLog>,
    /// The cloud adapters this replica runs and their last calls.
    pub provider_status: Arc<StatusBoard>,
}

/// The body limits of the routes that need the `ingest` scope: the webhooks have their own,
/// the others (`/v1/prices`, `/v1/benchmarks`) the JSON routes'.
#[derive(Debug, Clone, Copy)]
pub struct IngestBodyLimits {
    pub json: usize,
    pub webhooks: usize,
}

impl IngestBodyLimits {
    /// The limit of `route` (a matched route template), as its own limit layer applies it.
    pub fn for_route(&self, route: &str) -> usize {
        if route.starts_with("/v1/webhooks/") {
            self.webhooks
        } else {
            self.json
        }
    }
}

impl AppState {
    /// Tells `StreamIsActive` subscribers of this replica that `pool` may have become active.
    /// Other replicas hear of it through the store (PostgreSQL NOTIFY) when samples arrive.
    pub fn announce_activity(&self, pool: &str) {
        // No subscriber is not an error.
        let _ = self.activity.send(pool.to_string());
    }

    /// Asks this replica's reconciler to look at `pool` now rather than at its next pass.
    pub fn mark_dirty(&self, pool: &str) {
        let _ = self.dirty.send(pool.to_string());
    }
}
