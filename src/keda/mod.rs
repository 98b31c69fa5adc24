//! KEDA's external scaler over gRPC (`externalscaler.ExternalScaler`): KEDA asks for a pool's
//! metric spec, its value and whether it is active, and trainscaler answers from the same pool
//! decision `POST /decide` makes (recorded the same way), so KEDA, schedulers and the fleet
//! view agree. `StreamIsActive` pushes `true` as soon as an idle pool gets work and `false`
//! as soon as a busy pool goes idle, for `external-push` triggers (see `stream_is_active`).
//!
//! KEDA shares one connection between ScaledObjects, so everything is keyed by the request's
//! metadata (`pool`), never by connection.

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod externalscaler;
pub mod server;
pub mod wake;

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::app::AppState;
use crate::fleet::pool_decision::PoolDecision;
use crate::store::{Fault, StoreError};
use externalscaler::external_scaler_server::ExternalScaler;
use externalscaler::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};
use wake::Wake;

/// The trigger metadata key that names the pool.
pub const POOL_KEY: &str = "pool";

/// The metric KEDA puts on the HPA for a pool. With `targetSize` 1 and an `AverageValue`
/// target, the HPA's replica count is exactly the desired workers we return.
pub fn metric_name(pool: &str) -> String {
    format!("trainscaler-{pool}")
}

/// The external scaler service.
#[derive(Debug, Clone)]
pub struct Scaler {
    state: AppState,
    /// Becomes true when the server shuts down, so open streams end and shutdown can finish.
    stopping: watch::Receiver<bool>,
}

impl Scaler {
    pub fn new(state: AppState, stopping: watch::Receiver<bool>) -> Self {
        Self { state, stopping }
    }

    async fn decide(&self, pool: &str) -> Result<PoolDecision, Status> {
        let catalog = self
            .state
            .catalog
            .get()
            .ok_or_else(|| Status::unavailable("the catalog is not loaded yet"))?;
        self.state
            .decide_pool(&catalog, pool)
            .await
            .map_err(store_status)?
            .ok_or_else(|| Status::not_found(format!("no pool `{pool}` in trainscaler")))
    }
}

fn store_status(e: StoreError) -> Status {
    // Outages and write conflicts pass; KEDA asks again at its next poll.
    match e.fault() {
        Fault::Unavailable | Fault::Conflict => {
            tracing::warn!(error = %e, "database unavailable answering KEDA");
            Status::unavailable("the database is unavailable; KEDA will ask again")
        }
        Fault::Other => {
            tracing::error!(error = %e, "failed to answer KEDA");
            Status::internal("trainscaler failed to decide; it has been logged")
        }
    }
}

/// The pool named by the trigger's metadata. Keys are matched without regard to case, as
/// people write `pool` and `Pool` alike.
pub fn pool_of(r: &ScaledObjectRef) -> Result<String, Status> {
    r.scaler_metadata
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(POOL_KEY))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "trigger metadata needs `{POOL_KEY}`: the name of a trainscaler pool (ScaledObject {}/{})",
                r.namespace, r.name
            ))
        })
}

/// Counts an open subscription in `/metrics` for as long as it lives.
struct OpenStream(prometheus_client::metrics::gauge::Gauge);

impl OpenStream {
    fn new(state: &AppState) -> Self {
        state.metrics.keda_streams.inc();
        Self(state.metrics.keda_streams.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

type Stream2<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl ExternalScaler for Scaler {
    async fn is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<IsActiveResponse>, Status> {
        let pool = pool_of(request.get_ref())?;
        let d = self.decide(&pool).await?;
        Ok(Response::new(IsActiveResponse {
            result: d.decision.desired > 0,
        }))
    }

    type StreamIsActiveStream = Stream2<IsActiveResponse>;

    /// Sends the pool's activity now, then again whenever it changes, until the client goes.
    /// The stream decides again when it is woken (see [`Wake`]) and sends only a change.
    async fn stream_is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<Self::StreamIsActiveStream>, Status> {
        let pool = pool_of(request.get_ref())?;
        // Each stream holds a task and a subscription for as long as the client likes: bounded.
        let permit = Arc::clone(&self.state.grpc_streams)
            .try_acquire_owned()
            .map_err(|_| {
                Status::resource_exhausted(
                    "too many open StreamIsActive streams (TRAINSCALER_GRPC_MAX_STREAMS); \
                     poll IsActive or retry later",
                )
            })?;
        // Subscribe before the first decision, so work arriving in between is not missed.
        let mut wake = Wake::new(&self.state);
        let first = self.decide(&pool).await?;
        let (tx, rx) = mpsc::channel(4);
        let scaler = self.clone();
        let open = OpenStream::new(&self.state);
        let mut stopping = self.stopping.clone();
        tokio::spawn(async move {
            let _open = (open, permit);
            let mut last = first.decision.desired > 0;
            let mut recheck_at = wake.recheck_at(&first);
            if tx
                .send(Ok(IsActiveResponse { result: last }))
                .await
                .is_err()
            {
                return;
            }
            loop {
                let woken = tokio::select! {
                    _ = tx.closed() => break,
                    _ = stopping.wait_for(|stop| *stop) => break,
                    w = wake.next(&pool, recheck_at) => w,
                };
                if !woken {
                    break;
                }
                let d = match scaler.decide(&pool).await {
                    Ok(d) => d,
                    Err(status) => {
                        let _ = tx.send(Err(status)).await;
                        break;
                    }
                };
                let active = d.decision.desired > 0;
                recheck_at = wake.recheck_at(&d);
                if active != last {
                    last = active;
                    if tx
                        .send(Ok(IsActiveResponse { result: active }))
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
            tracing::debug!(pool, "StreamIsActive subscriber gone");
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn get_metric_spec(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<GetMetricSpecResponse>, Status> {
        let pool = pool_of(request.get_ref())?;
        // Only to answer NOT_FOUND for an unknown pool; the spec itself is fixed.
        if self
            .state
            .store
            .find_pool(&pool)
            .await
            .map_err(store_status)?
            .is_none()
        {
            return Err(Status::not_found(format!(
                "no pool `{pool}` in trainscaler"
            )));
        }
        Ok(Response::new(GetMetricSpecResponse {
            metric_specs: vec![MetricSpec {
                metric_name: metric_name(&pool),
                target_size: 1,
                target_size_float: 1.0,
            }],
        }))
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let r = request.into_inner();
        let object = r
            .scaled_object_ref
            .ok_or_else(|| Status::invalid_argument("scaledObjectRef is required"))?;
        let pool = pool_of(&object)?;
        let expected = metric_name(&pool);
        // KEDA strips its `sN-` prefix before asking; names are compared without case.
        if !r.metric_name.is_empty() && !r.metric_name.eq_ignore_ascii_case(&expected) {
            return Err(Status::invalid_argument(format!(
                "unknown metric `{}` for pool `{pool}`: this scaler serves `{expected}`",
                r.metric_name
            )));
        }
        let d = self.decide(&pool).await?;
        let desired = d.decision.desired;
        let name = if r.metric_name.is_empty() {
            expected
        } else {
            r.metric_name
        };
        Ok(Response::new(GetMetricsResponse {
            metric_values: vec![MetricValue {
                metric_name: name,
                metric_value: i64::from(desired),
                metric_value_float: f64::from(desired),
            }],
        }))
    }

    type StreamMetricSpecStream = Stream2<GetMetricSpecResponse>;

    /// KEDA falls back to `GetMetricSpec` when this is unimplemented.
    async fn stream_metric_spec(
        &self,
        _request: Request<ScaledObjectRef>,
    ) -> Result<Response<Self::StreamMetricSpecStream>, Status> {
        Err(Status::unimplemented(
            "StreamMetricSpec is not supported; use GetMetricSpec",
        ))
    }
}
