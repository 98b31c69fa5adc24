//! Wiring: the shared [`AppState`], start-up (connect, migrate, seed the bundled catalog, load
//! the snapshot, follow changes) and the server loop with graceful shutdown.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use backon::{ExponentialBuilder, Retryable};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};

use crate::api::auth::Auth;
use crate::catalog::bundled::BUNDLED;
use crate::catalog::gpu_facts::{BUNDLED_GPUS_CSV, parse_gpu_facts};
use crate::catalog::skypilot;
use crate::config::{Config, ServeConfig};
use crate::ingest::remote_write::LabelMapping;
use crate::metrics::Metrics;
use crate::provider::Provider;
use crate::provider::alibaba::{AlibabaProvider, AlibabaSettings};
use crate::provider::aws::sqs::{Queue, SqsClient};
use crate::provider::aws::{AwsProvider, AwsSettings};
use crate::provider::gcp::{GcpProvider, GcpSettings};
use crate::provider::metered::Metered;
use crate::provider::registry::Providers;
use crate::provider::static_provider::{StaticProvider, StaticSettings};
use crate::provider::status::StatusBoard;
use crate::reconcile::leader::hold_lease;
use crate::reconcile::{ReconcileSettings, Reconciler, replica_name};
use crate::snapshot::CatalogCache;
use crate::store::{
    CatalogImport, Fault, Heard, ImportReport, KEYS_CHANNEL, LISTENER_CHECK, PgStore, Store,
    StoreError, StoreOptions,
};
use crate::timefmt::{now_ms, parse_rfc3339_ms};

/// What every request handler shares. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database, for writes and history reads.
    pub store: Store,
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

/// Connects to the configured database and applies pending migrations.
pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let store = connect_when_up(config)
        .await
        .with_context(|| format!("cannot open database {}", config.database_url))?;
    store.migrate().await.context("cannot apply migrations")?;
    Ok(store)
}

/// Connects, retrying with backoff for up to [`Config::db_startup_wait`] while the database is
/// unreachable. Containers start in any order (and a database restarts slower than we do), so
/// failing at once would only hand the wait to a supervisor's slower, noisier restart loop.
/// Errors a retry cannot fix (credentials, a missing database, a bad URL) end it at once.
async fn connect_when_up(config: &Config) -> Result<Store, StoreError> {
    let options = StoreOptions {
        acquire_timeout: config.db_acquire_timeout(),
    };
    let wait = config.db_startup_wait();
    let backoff = ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(250))
        .with_max_delay(std::time::Duration::from_secs(5))
        .without_max_times()
        .with_total_delay(Some(wait))
        .with_jitter();
    let url = config.database_url.clone();
    (|| Store::connect_with(url.expose(), options.clone()))
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(|e| !wait.is_zero() && e.fault() == Fault::Unavailable)
        .notify(|e, after| {
            tracing::warn!(
                database = %url,
                error = %e,
                retry_in_ms = after.as_millis() as u64,
                wait_sec = wait.as_secs(),
                "database not reachable yet, waiting for it"
            )
        })
        .await
}

/// Loads the bundled GPU facts and provider catalogs into `store` if it holds no offering yet.
pub async fn seed_bundled_catalog(store: &Store) -> anyhow::Result<Option<ImportReport>> {
    let gpus = parse_gpu_facts(BUNDLED_GPUS_CSV).context("bundled gpus.csv")?;
    let mut parsed = Vec::with_capacity(BUNDLED.len());
    for b in BUNDLED {
        let offerings = skypilot::parse(b.provider, b.csv)
            .with_context(|| format!("bundled catalog for {}", b.provider))?;
        let observed_at_ms = parse_rfc3339_ms(b.observed_at).map_err(anyhow::Error::msg)?;
        parsed.push((b.provider, offerings, observed_at_ms));
    }
    let imports: Vec<CatalogImport<'_>> = parsed
        .iter()
        .map(|(provider, offerings, observed_at_ms)| CatalogImport {
            provider,
            offerings,
            observed_at_ms: *observed_at_ms,
            source: "bundled",
        })
        .collect();
    Ok(store.seed_if_empty(&gpus, &imports, now_ms()).await?)
}

/// Everything `serve` needs before it accepts connections.
pub async fn prepare(config: &Config, serve: &ServeConfig) -> anyhow::Result<AppState> {
    let store = open_store(config).await?;
    if !serve.no_seed
        && let Some(report) = seed_bundled_catalog(&store).await?
    {
        tracing::info!(
            offerings = report.offerings_added,
            prices = report.prices_appended,
            "loaded the bundled catalog into an empty database"
        );
    }
    let auth = Arc::new(Auth::new(&store, serve)?);
    secure_by_default(&store, serve, &auth).await?;
    let catalog = Arc::new(CatalogCache::default());
    catalog
        .reload(&store)
        .await
        .context("cannot load the catalog")?;
    catalog.follow_changes(store.clone(), serve.catalog_poll());
    prune_samples(store.clone(), serve.sample_retention_hours);
    prune_idempotency_keys(store.clone());
    let remote_write = LabelMapping {
        pool_label: serve.remote_write_pool_label.clone(),
        worker_label: serve.remote_write_worker_label.clone(),
        ..LabelMapping::default()
    };
    let (activity, _) = broadcast::channel(1024);
    follow_activity(store.clone(), activity.clone(), auth.clone());
    let (dirty, _) = broadcast::channel(1024);
    Ok(AppState {
        activity,
        dirty,
        store,
        catalog,
        metrics: Arc::new(Metrics::default()),
        remote_write: Arc::new(remote_write),
        max_decompressed_bytes: serve.max_ingest_bytes.saturating_mul(4),
        auth,
        idempotency_ttl_ms: serve.idempotency_ttl_ms(),
        ingest_body_limits: IngestBodyLimits {
            json: serve.max_body_bytes,
            webhooks: serve.max_ingest_bytes,
        },
        drop_log: Arc::default(),
        grpc_streams: Arc::new(tokio::sync::Semaphore::new(
            serve
                .grpc_max_streams
                .clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
        )),
        provider_status: Arc::default(),
    })
}

/// Makes the first admin key on a database that never had one, or says loudly that
/// authentication is off.
async fn secure_by_default(store: &Store, serve: &ServeConfig, auth: &Auth) -> anyhow::Result<()> {
    if !auth.enabled() {
        tracing::warn!(
            "AUTHENTICATION IS OFF (--insecure-no-auth): anyone who can reach this server can \
             change pools, the catalog and cloud capacity. Use it for local experiments only."
        );
        return Ok(());
    }
    let path = &serve.admin_key_file;
    if crate::auth::issue::first_admin_key(store, path, now_ms())
        .await
        .with_context(|| format!("cannot create the first admin key in {}", path.display()))?
    {
        tracing::warn!(
            path = %path.display(),
            "no API key existed: made an admin key and wrote its token to this file (owner-only); \
             use it to create narrower keys, then move or delete the file"
        );
    }
    Ok(())
}

/// The provider adapters this process can drive: the static provider always, AWS and
/// Alibaba Cloud when their credentials are in the environment, GCP always (with a key file
/// from `GOOGLE_APPLICATION_CREDENTIALS`, or else the metadata server, asked at first use).
pub fn providers_from_env(state: &AppState, serve: &ServeConfig) -> anyhow::Result<Providers> {
    let capacity = StaticSettings::parse_capacity(&serve.static_capacity)
        .map_err(|e| anyhow::anyhow!("TRAINSCALER_STATIC_CAPACITY: {e}"))?;
    let static_provider = StaticProvider::new(
        state.store.clone(),
        StaticSettings {
            startup_delay: std::time::Duration::from_secs(serve.static_startup_delay_sec),
            capacity,
        },
    );
    let alibaba = match AlibabaSettings::from_env() {
        Some(settings) => Some(metered(
            state,
            Arc::new(AlibabaProvider::new(settings).context("Alibaba Cloud provider")?),
        )),
        None => None,
    };
    let aws_settings = AwsSettings::from_env()
        .map_err(anyhow::Error::msg)
        .context("AWS credentials")?;
    let aws = match aws_settings {
        Some(settings) => Some(metered(
            state,
            Arc::new(AwsProvider::new(settings).context("AWS provider")?),
        )),
        None => None,
    };
    let gcp = GcpProvider::new(GcpSettings::from_env()).context("GCP provider")?;
    let gcp = metered(state, Arc::new(gcp));
    for adapter in [&aws, &alibaba, &Some(gcp.clone())].into_iter().flatten() {
        state.provider_status.register(adapter.clone());
    }
    Ok(Providers {
        static_provider: metered(state, Arc::new(static_provider)),
        aws,
        alibaba,
        gcp: Some(gcp),
    })
}

/// The SQS client and queues of `--aws-events-queue-url`, or `None` when none is set. The
/// queues need AWS credentials.
pub fn event_queues_from_env(
    serve: &ServeConfig,
) -> anyhow::Result<Option<(Arc<SqsClient>, Vec<Queue>)>> {
    let urls: Vec<&str> = serve
        .aws_events_queue_urls
        .iter()
        .map(|u| u.trim())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        return Ok(None);
    }
    let settings = AwsSettings::from_env()
        .map_err(|e| anyhow::anyhow!("AWS credentials: {e}"))?
        .context(
            "TRAINSCALER_AWS_EVENTS_QUEUE_URL is set but no AWS credential source is: see \
             docs/providers/aws.md for the chain (environment, profile, web identity, \
             container, instance profile)",
        )?;
    event_queues(settings, &urls).map(Some)
}

/// An SQS client over `settings` and the queues at `urls`.
pub fn event_queues(
    settings: AwsSettings,
    urls: &[&str],
) -> anyhow::Result<(Arc<SqsClient>, Vec<Queue>)> {
    let queues = urls
        .iter()
        .map(|u| Queue::new(u, &settings))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("TRAINSCALER_AWS_EVENTS_QUEUE_URL: {e}"))?;
    let client = SqsClient::new(settings).context("SQS client")?;
    Ok((Arc::new(client), queues))
}

/// Wraps an adapter in the metrics decorator, which also records its calls' outcomes for
/// `GET /v1/providers/status`.
pub fn metered(state: &AppState, p: Arc<dyn Provider>) -> Arc<dyn Provider> {
    Arc::new(Metered::new(p, state.metrics.clone()).with_status(state.provider_status.clone()))
}

/// The running reconciler and its leader lease.
#[derive(Debug)]
pub struct ReconcilerHandle {
    /// Whether this replica leads right now.
    pub leader: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ReconcilerHandle {
    /// Stops the loop and releases the lease, waiting for both.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }

    /// Polls `queues` for spot and capacity events while this replica leads, until stopped.
    pub fn poll_event_queues(
        &mut self,
        state: &AppState,
        client: Arc<SqsClient>,
        queues: Vec<Queue>,
    ) {
        let run = crate::ingest::event_queue::run(
            state.clone(),
            client,
            queues,
            self.leader.clone(),
            self.stop.subscribe(),
        );
        self.tasks.push(tokio::spawn(run));
    }

    /// Kills the loop and the lease's session without releasing anything, as a crash would.
    pub fn abort(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

/// Starts the leader lease and the reconciler loop in the background.
pub fn start_reconciler(
    state: &AppState,
    serve: &ServeConfig,
    providers: Providers,
) -> ReconcilerHandle {
    start_reconciler_named(state, serve, providers, replica_name())
}

/// [`start_reconciler`] with this replica's name in events given.
pub fn start_reconciler_named(
    state: &AppState,
    serve: &ServeConfig,
    providers: Providers,
    replica: String,
) -> ReconcilerHandle {
    let (stop, stopped) = watch::channel(false);
    let (leader_tx, leader) = watch::channel(false);
    let lease = tokio::spawn(hold_lease(
        state.store.clone(),
        serve.leader_lease(),
        leader_tx,
        stopped.clone(),
    ));
    let reconciler = Reconciler {
        store: state.store.clone(),
        catalog: state.catalog.clone(),
        metrics: state.metrics.clone(),
        providers,
        settings: ReconcileSettings {
            interval: serve.reconcile_interval(),
            lease: serve.leader_lease(),
            replica,
            catalog_refresh: (serve.catalog_refresh_interval_sec > 0)
                .then(|| std::time::Duration::from_secs(serve.catalog_refresh_interval_sec)),
        },
        repeats: Arc::default(),
    };
    let dirty = state.dirty.subscribe();
    let activity = state.activity.subscribe();
    let (merged_tx, merged) = broadcast::channel(1024);
    let forward = forward_both(dirty, activity, merged_tx, stopped.clone());
    let run = tokio::spawn(reconciler.run(leader.clone(), merged, stopped));
    ReconcilerHandle {
        leader,
        stop,
        tasks: vec![run, lease, tokio::spawn(forward)],
    }
}

/// The reconciler hears of dirty pools and of pools that just got work.
async fn forward_both(
    mut dirty: broadcast::Receiver<String>,
    mut activity: broadcast::Receiver<String>,
    out: broadcast::Sender<String>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let next = tokio::select! {
            _ = crate::reconcile::until_true(&mut stopped) => return,
            d = dirty.recv() => d,
            a = activity.recv() => a,
        };
        match next {
            Ok(pool) => {
                let _ = out.send(pool);
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Forwards other replicas' pool activity (PostgreSQL NOTIFY on the activity channel) to this
/// replica's subscribers, and forgets keys revoked anywhere (the keys channel) so that no
/// replica serves a revoked key from its cache. SQLite runs one process, which does both
/// locally.
fn follow_activity(store: Store, activity: broadcast::Sender<String>, auth: Arc<Auth>) {
    let Store::Postgres(pg) = store else { return };
    tokio::spawn(async move {
        loop {
            let mut listener = match pg.activity_listener().await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for pool activity; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    continue;
                }
            };
            loop {
                match PgStore::listen_for(&mut listener, LISTENER_CHECK).await {
                    Heard::Notification(Some(n)) if n.channel() == KEYS_CHANNEL => {
                        auth.forget(n.payload())
                    }
                    Heard::Notification(Some(n)) => {
                        let _ = activity.send(n.payload().to_string());
                    }
                    Heard::Notification(None) | Heard::Quiet => {}
                    Heard::Lost(e) => {
                        tracing::warn!(error = ?e, "pool activity listener lost; reconnecting");
                        break;
                    }
                }
            }
        }
    });
}

/// Deletes raw samples past their retention, and worker series silent past their pool's
/// horizon (`ingest::worker_gate`), every ten minutes, in the background.
fn prune_samples(store: Store, retention_hours: u64) {
    let retention_ms = i64::try_from(retention_hours.saturating_mul(3_600_000)).unwrap_or(i64::MAX);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(600));
        loop {
            tick.tick().await;
            match store
                .prune_samples(now_ms().saturating_sub(retention_ms))
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "pruned old metric samples"),
                Err(e) => tracing::warn!(error = %e, "could not prune metric samples"),
            }
            match crate::ingest::worker_gate::prune_stale_series(&store, now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "deleted worker series silent too long"),
                Err(e) => tracing::warn!(error = %e, "could not delete stale worker series"),
            }
        }
    });
}

/// Deletes expired idempotency keys every ten minutes, in the background. Expired keys are
/// already ignored when read and replaced when claimed; this only bounds the table.
fn prune_idempotency_keys(store: Store) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(600));
        loop {
            tick.tick().await;
            match store.prune_idempotency_keys(now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "pruned expired idempotency keys"),
                Err(e) => tracing::warn!(error = %e, "could not prune idempotency keys"),
            }
        }
    });
}

/// Serves `state` on an already-bound listener until `shutdown` resolves; in-flight requests
/// are allowed to finish. Tests bind port 0 and pass the listener in.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    serve: &ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = crate::api::router(state, serve);
    if let (Some(cert), Some(key)) = (&serve.tls_cert, &serve.tls_key) {
        let tls = crate::tls::server_config(cert, key)?;
        let listener = crate::tls::TlsListener::new(listener, tls)?;
        tracing::info!(addr = %listener.local_addr, tls = true, "listening");
        return axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .context("server failed");
    }
    tracing::info!(addr = %listener.local_addr()?, tls = false, "listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("server failed")
}

/// Resolves on SIGINT or SIGTERM.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    // The handlers are installed here, before the future is first polled: a signal that
    // arrives between spawning the waiting task and its first poll is not lost to the default
    // action (which would kill the process without a drain).
    #[cfg(unix)]
    let (terminate, interrupt) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let wait = |s: std::io::Result<tokio::signal::unix::Signal>| async move {
                match s {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(terminate) => {},
                _ = wait(interrupt) => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutting down");
    }
}
