//! The `trainscaler` command: `serve` (default), `migrate`, `catalog import`, `catalog
//! refresh`, `keys`, `openapi`, `simulate`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio::net::TcpListener;

use trainscaler::app;
use trainscaler::catalog::{CatalogFormat, skypilot};
use trainscaler::config::{Config, ServeConfig};
use trainscaler::store::CatalogImport;
use trainscaler::timefmt::{check_not_future, now_ms, parse_rfc3339_ms};

/// Requests allocate and free many small objects on both cores; mimalloc's per-thread heaps
/// serve them with less contention than glibc's arenas (measured in docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "trainscaler",
    version,
    about = "Scaling decisions for ML training on cloud GPUs"
)]
struct Cli {
    #[command(flatten)]
    config: Config,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP service (the default).
    Serve(Box<ServeConfig>),
    /// Apply pending database migrations and exit.
    Migrate,
    /// Manage the instance catalog.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// Print the OpenAPI document.
    Openapi,
    /// Manage API keys.
    #[command(subcommand)]
    Keys(trainscaler::auth::cli::KeysCommand),
    /// Replay a trace through policies and the built-in baselines: what would it have cost?
    Simulate(trainscaler::sim::cli::SimulateArgs),
}

#[derive(Debug, Subcommand)]
enum CatalogCommand {
    /// Load a provider's catalog file; importing the same file again changes nothing.
    Import {
        /// File layout.
        #[arg(long, value_enum, default_value_t = CatalogFormat::Skypilot)]
        format: CatalogFormat,
        /// Provider the file describes (aws, gcp, azure, lambda, nebius, vast).
        #[arg(long)]
        provider: String,
        /// When the prices were observed (RFC 3339); default: now.
        #[arg(long)]
        observed_at: Option<String>,
        /// The catalog file.
        file: PathBuf,
    },
    /// Ask a cloud for a region's GPU instance types and prices and import them (AWS,
    /// Alibaba Cloud or GCP credentials from the environment).
    Refresh {
        /// `aws`, `alibaba` or `gcp`.
        #[arg(long)]
        provider: String,
        #[arg(long)]
        region: String,
        /// Only these types (repeat the flag); default every GPU type of the region.
        #[arg(long = "instance-type")]
        instance_types: Vec<String>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = cli.config;
    trainscaler::telemetry::init(config.log_format, &config.log_level);
    match cli.command {
        None => run_server(&config, default_serve_config()).await,
        Some(Command::Serve(serve)) => run_server(&config, *serve).await,
        Some(Command::Migrate) => {
            let store = app::open_store(&config).await?;
            tracing::info!(database = %config.database_url, backend = store.backend(), "migrations applied");
            Ok(())
        }
        Some(Command::Catalog(CatalogCommand::Import {
            format,
            provider,
            observed_at,
            file,
        })) => import(&config, format, &provider, observed_at.as_deref(), &file).await,
        Some(Command::Catalog(CatalogCommand::Refresh {
            provider,
            region,
            instance_types,
        })) => refresh(&config, &provider, &region, &instance_types).await,
        Some(Command::Keys(command)) => trainscaler::auth::cli::run(&config, command).await,
        Some(Command::Simulate(args)) => trainscaler::sim::cli::run(args),
        Some(Command::Openapi) => {
            println!("{}", trainscaler::api::openapi().to_pretty_json()?);
            Ok(())
        }
    }
}

/// `serve`'s flags when no subcommand is given: the same defaults and environment variables.
fn default_serve_config() -> ServeConfig {
    #[derive(Parser)]
    struct Only {
        #[command(flatten)]
        serve: ServeConfig,
    }
    Only::parse_from(["trainscaler"]).serve
}

async fn run_server(config: &Config, serve: ServeConfig) -> anyhow::Result<()> {
    tracing::info!(
        database_url = %config.database_url,
        bind = %serve.bind,
        grpc_bind = %serve.grpc_bind,
        tls = serve.tls_cert.is_some(),
        grpc_tls = serve.grpc_tls_cert.is_some() || serve.tls_cert.is_some(),
        grpc_mtls = serve.grpc_client_ca.is_some(),
        grpc_insecure = serve.grpc_insecure,
        grpc_max_streams = serve.grpc_max_streams,
        auth = !serve.insecure_no_auth,
        max_concurrent_requests = serve.max_concurrent_requests,
        max_connections = serve.max_connections(),
        header_read_timeout_secs = serve.header_read_timeout().as_secs(),
        ingest_rate_per_sec = serve.ingest_rate_per_sec,
        db_startup_wait_sec = config.db_startup_wait_sec,
        log_format = ?config.log_format,
        log_level = %config.log_level,
        max_body_bytes = serve.max_body_bytes,
        max_catalog_bytes = serve.max_catalog_bytes,
        request_timeout_secs = serve.request_timeout_secs,
        catalog_poll_ms = serve.catalog_poll_ms,
        no_seed = serve.no_seed,
        "effective configuration"
    );
    if trainscaler::keda::server::check_exposure(
        serve.grpc_bind,
        serve.grpc_client_ca.is_some(),
        serve.grpc_insecure,
    )? {
        tracing::warn!(
            grpc_bind = %serve.grpc_bind,
            "gRPC IS UNAUTHENTICATED (TRAINSCALER_GRPC_INSECURE): anyone who can reach this \
             port can ask for pool decisions, which commits them, and learn pool names"
        );
    }
    // The gRPC port has its own certificate when given one, and the HTTP port's otherwise.
    let (grpc_cert, grpc_key) = match (&serve.grpc_tls_cert, &serve.grpc_tls_key) {
        (None, None) => (serve.tls_cert.as_deref(), serve.tls_key.as_deref()),
        (cert, key) => (cert.as_deref(), key.as_deref()),
    };
    let tls = trainscaler::keda::server::tls_config(
        grpc_cert,
        grpc_key,
        serve.grpc_client_ca.as_deref(),
    )?;
    // One signal stops both servers; each finishes its in-flight requests. It is heard from
    // here on, so a SIGTERM while start-up still waits for the database is a clean exit too.
    let (stop, stopped) = tokio::sync::watch::channel(());
    let signal = app::shutdown_signal();
    tokio::spawn(async move {
        signal.await;
        let _ = stop.send(());
    });
    let mut stopping = stopped.clone();
    let state = tokio::select! {
        state = app::prepare(config, &serve) => state?,
        _ = stopping.changed() => {
            tracing::info!("stopped during start-up, before serving");
            return Ok(());
        }
    };
    let listener = TcpListener::bind(serve.bind)
        .await
        .with_context(|| format!("cannot listen on {}", serve.bind))?;
    let grpc = TcpListener::bind(serve.grpc_bind)
        .await
        .with_context(|| format!("cannot listen on {} (gRPC)", serve.grpc_bind))?;
    let until = |mut rx: tokio::sync::watch::Receiver<()>| async move {
        let _ = rx.changed().await;
    };
    let event_queues = app::event_queues_from_env(&serve)?;
    let reconciler = if serve.reconcile {
        let providers = app::providers_from_env(&state, &serve)?;
        tracing::info!(
            interval_sec = serve.reconcile_interval_sec,
            lease_sec = serve.leader_lease_sec,
            aws = providers.aws.is_some(),
            alibaba = providers.alibaba.is_some(),
            gcp = providers.gcp.is_some(),
            "reconciler on"
        );
        let mut handle = app::start_reconciler(&state, &serve, providers);
        if let Some((client, queues)) = event_queues {
            tracing::info!(
                queues = queues.len(),
                "the leader polls the AWS events queues"
            );
            handle.poll_event_queues(&state, client, queues);
        }
        Some(handle)
    } else {
        if event_queues.is_some() {
            anyhow::bail!(
                "TRAINSCALER_AWS_EVENTS_QUEUE_URL needs the reconciler's leader to poll the \
                 queues, and the reconciler is off (--no-reconcile)"
            );
        }
        tracing::info!("reconciler off (--no-reconcile): decisions are not actuated");
        None
    };
    tokio::try_join!(
        app::serve(listener, state.clone(), &serve, until(stopped.clone())),
        trainscaler::keda::server::serve_grpc(grpc, state, tls, until(stopped)),
    )?;
    if let Some(r) = reconciler {
        r.stop().await;
    }
    Ok(())
}

async fn refresh(
    config: &Config,
    provider: &str,
    region: &str,
    instance_types: &[String],
) -> anyhow::Result<()> {
    use std::sync::Arc;
    use trainscaler::provider::Provider;
    use trainscaler::provider::alibaba::{AlibabaProvider, AlibabaSettings};
    use trainscaler::provider::aws::{AwsProvider, AwsSettings};
    let adapter: Arc<dyn Provider> = match provider {
        "aws" => Arc::new(AwsProvider::new(
            AwsSettings::from_env()
                .map_err(anyhow::Error::msg)
                .context("AWS credentials")?
                .context(
                    "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a \
                     profile, web identity or container credentials, or unset \
                     AWS_EC2_METADATA_DISABLED to use the instance profile",
                )?,
        )?),
        "alibaba" => Arc::new(AlibabaProvider::new(AlibabaSettings::from_env().context(
            "no Alibaba Cloud credentials: set ALIBABA_CLOUD_ACCESS_KEY_ID and \
             ALIBABA_CLOUD_ACCESS_KEY_SECRET, RRSA's ALIBABA_CLOUD_ROLE_ARN, \
             ALIBABA_CLOUD_OIDC_PROVIDER_ARN and ALIBABA_CLOUD_OIDC_TOKEN_FILE, or \
             ALIBABA_CLOUD_ECS_METADATA",
        )?)?),
        "gcp" => Arc::new(
            trainscaler::provider::gcp::GcpProvider::new(
                trainscaler::provider::gcp::GcpSettings::from_env(),
            )
            .context("GCP provider")?,
        ),
        other => anyhow::bail!("--provider must be aws, alibaba or gcp, not `{other}`"),
    };
    let store = app::open_store(config).await?;
    let cache = trainscaler::snapshot::CatalogCache::default();
    cache.reload(&store).await?;
    let catalog = cache.get().context("the catalog did not load")?;
    let report = trainscaler::provider::refresh::refresh_region(
        &store,
        &catalog,
        &*adapter,
        region,
        instance_types,
        now_ms(),
    )
    .await?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

async fn import(
    config: &Config,
    format: CatalogFormat,
    provider: &str,
    observed_at: Option<&str>,
    file: &PathBuf,
) -> anyhow::Result<()> {
    let CatalogFormat::Skypilot = format;
    let observed_at_ms = match observed_at {
        Some(t) => parse_rfc3339_ms(t)
            .and_then(|ms| check_not_future(ms, now_ms()))
            .map_err(|e| anyhow::anyhow!("--observed-at {e}"))?,
        None => now_ms(),
    };
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let offerings =
        skypilot::parse(provider, &text).with_context(|| format!("{}", file.display()))?;
    let store = app::open_store(config).await?;
    let report = store
        .import_catalog(
            CatalogImport {
                provider,
                offerings: &offerings,
                observed_at_ms,
                source: "import",
            },
            now_ms(),
        )
        .await?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
