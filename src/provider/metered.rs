//! A [`Provider`] that counts every call of the one it wraps: calls by method and outcome
//! (`ok` or the error kind) and latency by method, retries included, on `GET /metrics`.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::credentials::CredentialReport;
use super::status::StatusBoard;
use super::{Capacity, CapacitySpec, GroupRef, Provider, ProviderResult, Refresh};
use crate::metrics::{Metrics, ProviderCallLabels, ProviderMethodLabels};

#[derive(Debug)]
pub struct Metered {
    inner: Arc<dyn Provider>,
    metrics: Arc<Metrics>,
    status: Option<Arc<StatusBoard>>,
}

impl Metered {
    pub fn new(inner: Arc<dyn Provider>, metrics: Arc<Metrics>) -> Self {
        Self {
            inner,
            metrics,
            status: None,
        }
    }

    /// Also records each call's outcome on `board`, for `GET /v1/providers/status`.
    pub fn with_status(mut self, board: Arc<StatusBoard>) -> Self {
        self.status = Some(board);
        self
    }

    fn record<T>(&self, method: &'static str, started: Instant, out: &ProviderResult<T>) {
        let provider = self.inner.name();
        let outcome = match out {
            Ok(_) => "ok",
            Err(e) => e.kind().as_str(),
        };
        self.metrics
            .provider_calls
            .get_or_create(&ProviderCallLabels {
                provider,
                method,
                outcome,
            })
            .inc();
        self.metrics
            .provider_call_seconds
            .get_or_create(&ProviderMethodLabels { provider, method })
            .observe(started.elapsed().as_secs_f64());
        if let Some(board) = &self.status {
            board.record(provider, method, outcome, crate::timefmt::now_ms());
        }
    }
}

#[async_trait]
impl Provider for Metered {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn credentials(&self) -> Option<CredentialReport> {
        self.inner.credentials()
    }

    async fn refresh(
        &self,
        region: &str,
        instance_types: &[String],
        since_ms: i64,
    ) -> ProviderResult<Refresh> {
        let started = Instant::now();
        let out = self.inner.refresh(region, instance_types, since_ms).await;
        self.record("refresh", started, &out);
        out
    }

    async fn describe(&self, group: &GroupRef) -> ProviderResult<Capacity> {
        let started = Instant::now();
        let out = self.inner.describe(group).await;
        self.record("describe", started, &out);
        out
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        current: &Capacity,
        spec: &CapacitySpec,
    ) -> ProviderResult<()> {
        let started = Instant::now();
        let out = self.inner.set_capacity(group, current, spec).await;
        self.record("set_capacity", started, &out);
        out
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        workers: &[String],
        decrement: bool,
    ) -> ProviderResult<()> {
        let started = Instant::now();
        let out = self.inner.terminate(group, workers, decrement).await;
        self.record("terminate", started, &out);
        out
    }
}
