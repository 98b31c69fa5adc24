//! Start-up: connect (waiting for a database that is not up yet), migrate, seed the bundled
//! catalog, make the first admin key, load the catalog snapshot and build the [`AppState`]
//! with its background tasks running.

use std::sync::Arc;

use anyhow::Context;
use backon::{ExponentialBuilder, Retryable};
use tokio::sync::broadcast;

use super::background::{follow_activity, prune_idempotency_keys, prune_samples};
use super::state::{AppState, IngestBodyLimits, Shared};
use crate::auth::Auth;
use crate::catalog::bundled::BUNDLED;
use crate::catalog::gpu_facts::{BUNDLED_GPUS_CSV, parse_gpu_facts};
use crate::catalog::skypilot;
use crate::config::{Config, ServeConfig};
use crate::ingest::remote_write::LabelMapping;
use crate::metrics::Metrics;
use crate::snapshot::CatalogCache;
use crate::store::{CatalogImport, Fault, ImportReport, Store, StoreError, StoreOptions};
use crate::timefmt::{now_ms, parse_rfc3339_ms};

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
    Ok(AppState::new(Shared {
        activity,
        dirty,
        store,
        clock: Arc::default(),
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
    }))
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
