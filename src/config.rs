//! One typed configuration, from flags and environment, validated before anything starts.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Where the service keeps its state when nothing else is configured.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/trainscaler.db";

/// Settings shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Database: postgres://user:pass@host/db or sqlite://path/to/file.db.
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL, global = true)]
    pub database_url: DatabaseUrl,

    /// Log format: `pretty` for people, `json` for log pipelines.
    #[arg(long, env = "TRAINSCALER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty, global = true)]
    pub log_format: LogFormat,

    /// Log filter, in tracing's EnvFilter syntax (`info`, `trainscaler=debug,sqlx=warn`).
    #[arg(long, env = "TRAINSCALER_LOG", default_value = "info", global = true)]
    pub log_level: String,

    /// Milliseconds a request waits for a PostgreSQL connection before it is answered 503
    /// with `Retry-After` (while the database is down, every request would otherwise wait
    /// this long anyway). SQLite keeps its own, longer wait for the file's one writer.
    #[arg(
        long,
        env = "TRAINSCALER_DB_ACQUIRE_TIMEOUT_MS",
        default_value_t = 2000,
        global = true
    )]
    pub db_acquire_timeout_ms: u64,

    /// Seconds to keep trying at start while PostgreSQL cannot be reached (refused, not
    /// answering, starting up), so the service can start before its database does; 0 fails at
    /// once. Wrong credentials or a missing database fail at once regardless.
    #[arg(
        long,
        env = "TRAINSCALER_DB_STARTUP_WAIT_SEC",
        default_value_t = 60,
        global = true
    )]
    pub db_startup_wait_sec: u64,
}

impl Config {
    pub fn db_acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.db_acquire_timeout_ms.max(1))
    }

    pub fn db_startup_wait(&self) -> Duration {
        Duration::from_secs(self.db_startup_wait_sec)
    }
}

/// Settings of the HTTP server.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address and port to listen on.
    #[arg(long, env = "TRAINSCALER_BIND", default_value = "0.0.0.0:8080")]
    pub bind: SocketAddr,

    /// Largest request body accepted, in bytes (catalog uploads have their own limit).
    #[arg(long, env = "TRAINSCALER_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Largest catalog CSV accepted by `POST /v1/catalog/import`, in bytes.
    #[arg(long, env = "TRAINSCALER_MAX_CATALOG_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_catalog_bytes: usize,

    /// Seconds a request may take before it is answered 408.
    #[arg(long, env = "TRAINSCALER_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// Milliseconds between checks for catalog changes made by other processes (PostgreSQL
    /// replicas are also told at once through LISTEN/NOTIFY).
    #[arg(long, env = "TRAINSCALER_CATALOG_POLL_MS", default_value_t = 2000)]
    pub catalog_poll_ms: u64,

    /// Do not load the bundled catalog into an empty database.
    #[arg(long, env = "TRAINSCALER_NO_SEED", default_value_t = false)]
    pub no_seed: bool,

    /// Largest webhook body (metric batches, remote-write, cloud events), in bytes; a
    /// remote-write body may decompress to at most four times this.
    #[arg(long, env = "TRAINSCALER_MAX_INGEST_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_ingest_bytes: usize,

    /// Largest `POST /v1/simulate` body (a trace with its policies), in bytes.
    #[arg(long, env = "TRAINSCALER_MAX_SIMULATE_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_simulate_bytes: usize,

    /// The remote-write label that names a series' pool.
    #[arg(
        long,
        env = "TRAINSCALER_REMOTE_WRITE_POOL_LABEL",
        default_value = "pool"
    )]
    pub remote_write_pool_label: String,

    /// The remote-write label that names a series' worker (dcgm-exporter sets `Hostname`);
    /// `instance_id`, `node` and `instance` are tried when it is absent.
    #[arg(
        long,
        env = "TRAINSCALER_REMOTE_WRITE_WORKER_LABEL",
        default_value = "Hostname"
    )]
    pub remote_write_worker_label: String,

    /// Address and port of the gRPC server (KEDA's external scaler). Loopback by default: on
    /// any other address the port needs mutual TLS (`TRAINSCALER_GRPC_CLIENT_CA`) or
    /// `--grpc-insecure`.
    #[arg(long, env = "TRAINSCALER_GRPC_BIND", default_value = "127.0.0.1:9090")]
    pub grpc_bind: SocketAddr,

    /// Serve gRPC on a non-loopback address without client certificates: anyone who can reach
    /// the port may ask for (and so commit) pool decisions. For networks that already admit
    /// only KEDA; the server logs a warning at start.
    #[arg(long, env = "TRAINSCALER_GRPC_INSECURE", default_value_t = false)]
    pub grpc_insecure: bool,

    /// Most `StreamIsActive` streams open at once; past it a new one gets RESOURCE_EXHAUSTED.
    #[arg(long, env = "TRAINSCALER_GRPC_MAX_STREAMS", default_value_t = 256)]
    pub grpc_max_streams: usize,

    /// PEM certificate chain for TLS on the gRPC port (with the key; default plaintext).
    #[arg(long, env = "TRAINSCALER_GRPC_TLS_CERT")]
    pub grpc_tls_cert: Option<std::path::PathBuf>,

    /// PEM private key for TLS on the gRPC port.
    #[arg(long, env = "TRAINSCALER_GRPC_TLS_KEY")]
    pub grpc_tls_key: Option<std::path::PathBuf>,

    /// PEM CA certificate(s): when set, the gRPC port accepts only clients presenting a
    /// certificate signed by one of them (mutual TLS; needs TLS on the gRPC port).
    #[arg(long, env = "TRAINSCALER_GRPC_CLIENT_CA")]
    pub grpc_client_ca: Option<std::path::PathBuf>,

    /// Hours raw metric samples are kept (the latest per series is always kept).
    #[arg(long, env = "TRAINSCALER_SAMPLE_RETENTION_HOURS", default_value_t = 48)]
    pub sample_retention_hours: u64,

    /// Seconds between the reconciler's passes over every bound pool (it also acts at once
    /// when a pool's target changes).
    #[arg(long, env = "TRAINSCALER_RECONCILE_INTERVAL_SEC", default_value_t = 15)]
    pub reconcile_interval_sec: u64,

    /// Do not run the reconciler: decide, never change capacity (`TRAINSCALER_RECONCILE=false`).
    #[arg(
        long = "no-reconcile",
        env = "TRAINSCALER_RECONCILE",
        action = clap::ArgAction::SetFalse
    )]
    pub reconcile: bool,

    /// Seconds of the reconciler's leader lease on PostgreSQL: another replica takes over
    /// within about this long after the leader goes silent.
    #[arg(long, env = "TRAINSCALER_LEADER_LEASE_SEC", default_value_t = 15)]
    pub leader_lease_sec: u64,

    /// Seconds between refreshes of instance types and prices from the clouds of pools bound
    /// to a cloud group (by the reconciler's leader, first when it becomes leader); 0 never.
    #[arg(
        long,
        env = "TRAINSCALER_CATALOG_REFRESH_INTERVAL_SEC",
        default_value_t = 3600
    )]
    pub catalog_refresh_interval_sec: u64,

    /// Seconds a static-provider worker takes from creation until it runs.
    #[arg(
        long,
        env = "TRAINSCALER_STATIC_STARTUP_DELAY_SEC",
        default_value_t = 30
    )]
    pub static_startup_delay_sec: u64,

    /// Serve without API keys: every request may do everything. For local experiments only;
    /// the server logs a warning at start.
    #[arg(long, env = "TRAINSCALER_INSECURE_NO_AUTH", default_value_t = false)]
    pub insecure_no_auth: bool,

    /// Where the first start writes the admin key it makes when the database has no key yet
    /// (mode 0600; written once, never again).
    #[arg(
        long,
        env = "TRAINSCALER_ADMIN_KEY_FILE",
        default_value = "data/admin.key"
    )]
    pub admin_key_file: std::path::PathBuf,

    /// Serve `GET /metrics` without a key (for scrapers on a private network); by default it
    /// needs a key with the `read` scope.
    #[arg(long, env = "TRAINSCALER_METRICS_PUBLIC", default_value_t = false)]
    pub metrics_public: bool,

    /// Shared secrets for signed webhooks, `source=secret,source=secret` (secrets of 16
    /// characters or more). Prefer the environment variable to the flag.
    #[arg(
        long,
        env = "TRAINSCALER_WEBHOOK_SECRETS",
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub webhook_secrets: String,

    /// Seconds a signed webhook's timestamp may differ from the server's clock.
    #[arg(
        long,
        env = "TRAINSCALER_WEBHOOK_REPLAY_WINDOW_SEC",
        default_value_t = 300
    )]
    pub webhook_replay_window_sec: u64,

    /// SQS queues of spot and capacity events (an EventBridge rule's target), long-polled by
    /// the reconciler's leader; repeat the flag or separate URLs with commas.
    #[arg(
        long = "aws-events-queue-url",
        env = "TRAINSCALER_AWS_EVENTS_QUEUE_URL",
        value_delimiter = ','
    )]
    pub aws_events_queue_urls: Vec<String>,

    /// SNS topics whose HTTPS deliveries `POST /v1/webhooks/sns` accepts (authenticated by
    /// SNS's signature, not an API key); repeat the flag or separate ARNs with commas. None
    /// turns the route off.
    #[arg(
        long = "sns-topic-arn",
        env = "TRAINSCALER_SNS_TOPIC_ARN",
        value_delimiter = ','
    )]
    pub sns_topic_arns: Vec<String>,

    /// Trust signing certificates and SubscribeURLs under this URL prefix instead of SNS's
    /// own hosts (`https://sns.REGION.amazonaws.com`): for tests against a mock.
    #[arg(long, env = "TRAINSCALER_SNS_TRUSTED_URL_PREFIX")]
    pub sns_trusted_url_prefix: Option<String>,

    /// The audience of the OIDC token a Pub/Sub push subscription sends (its
    /// `--push-auth-token-audience`). Set, `POST /v1/webhooks/events` also accepts pushes
    /// authenticated by Google-signed tokens for this audience and the service account below.
    #[arg(
        long,
        env = "TRAINSCALER_PUBSUB_AUDIENCE",
        requires = "pubsub_service_account"
    )]
    pub pubsub_audience: Option<String>,

    /// The service account the push subscription signs its tokens as (its
    /// `--push-auth-service-account`); tokens of any other account are refused.
    #[arg(
        long,
        env = "TRAINSCALER_PUBSUB_SERVICE_ACCOUNT",
        requires = "pubsub_audience"
    )]
    pub pubsub_service_account: Option<String>,

    /// Where Google's token-signing keys are published, as a JWKS.
    #[arg(
        long,
        env = "TRAINSCALER_PUBSUB_JWKS_URL",
        default_value = crate::auth::google_oidc::DEFAULT_JWKS_URL
    )]
    pub pubsub_jwks_url: String,

    /// Requests handled at once (probes excepted); beyond it the server answers 503 with
    /// `Retry-After` instead of queueing.
    #[arg(
        long,
        env = "TRAINSCALER_MAX_CONCURRENT_REQUESTS",
        default_value_t = 512
    )]
    pub max_concurrent_requests: usize,

    /// Seconds a connection has to send a request's line and headers, counted from when the
    /// server starts waiting for them (a new connection, or an idle keep-alive one); past it
    /// the connection is closed. At least 1.
    #[arg(
        long,
        env = "TRAINSCALER_HEADER_READ_TIMEOUT_SECS",
        default_value_t = 10
    )]
    pub header_read_timeout_secs: u64,

    /// Connections open at once on the HTTP port (idle keep-alive ones included); the next one
    /// waits in the listen backlog, unanswered, until one closes. At least 1; keep it under the
    /// process's open-file limit.
    #[arg(long, env = "TRAINSCALER_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,

    /// Ingestion requests per second each API key (or webhook source) may send, on average;
    /// 0 for no limit. Each replica counts its own.
    #[arg(long, env = "TRAINSCALER_INGEST_RATE_PER_SEC", default_value_t = 50)]
    pub ingest_rate_per_sec: u32,

    /// Seconds a key verified within this long keeps working from this replica's memory
    /// while the database cannot be reached (0: refuse every key during an outage). Keys
    /// revoked meanwhile stop working once the database answers again.
    #[arg(long, env = "TRAINSCALER_AUTH_OUTAGE_GRACE_SEC", default_value_t = 300)]
    pub auth_outage_grace_sec: u64,

    /// Ingestion requests a key may send at once above its rate.
    #[arg(long, env = "TRAINSCALER_INGEST_BURST", default_value_t = 100)]
    pub ingest_burst: u32,

    /// Samples per second each API key (or webhook source) may store, on average, with one
    /// second's worth at once; 0 for no limit. Each replica counts its own.
    #[arg(
        long,
        env = "TRAINSCALER_INGEST_SAMPLES_PER_SEC",
        default_value_t = 100_000
    )]
    pub ingest_samples_per_sec: u32,

    /// Seconds an ingestion batch's `Idempotency-Key` is remembered: a retry within this long
    /// gets the first answer again instead of writing again.
    #[arg(
        long,
        env = "TRAINSCALER_IDEMPOTENCY_TTL_SEC",
        default_value_t = 86_400
    )]
    pub idempotency_ttl_sec: u64,

    /// PEM certificate chain: serve HTTPS (with the key) instead of plain HTTP. The gRPC port
    /// uses it too unless it has its own.
    #[arg(long, env = "TRAINSCALER_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// PEM private key for `TRAINSCALER_TLS_CERT`.
    #[arg(long, env = "TRAINSCALER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// Most workers per instance type one static pool may have, as `type=count,type=count`;
    /// asking for more is an insufficient-capacity error (default: no limit).
    #[arg(long, env = "TRAINSCALER_STATIC_CAPACITY", default_value = "")]
    pub static_capacity: String,
}

impl ServeConfig {
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_secs(self.header_read_timeout_secs.max(1))
    }

    /// The connection limit, within what a semaphore can count.
    pub fn max_connections(&self) -> usize {
        self.max_connections
            .clamp(1, tokio::sync::Semaphore::MAX_PERMITS)
    }

    pub fn reconcile_interval(&self) -> Duration {
        Duration::from_secs(self.reconcile_interval_sec.max(1))
    }

    /// How long an idempotency key lives, in milliseconds (at least one second).
    pub fn idempotency_ttl_ms(&self) -> i64 {
        i64::try_from(self.idempotency_ttl_sec.max(1).saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    pub fn leader_lease(&self) -> Duration {
        Duration::from_secs(self.leader_lease_sec.max(1))
    }

    pub fn catalog_poll(&self) -> Duration {
        Duration::from_millis(self.catalog_poll_ms.max(50))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Pretty,
    Json,
}

/// A database URL whose password never reaches a log line or `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL with its secret, for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn redacted(&self) -> String {
        match url::Url::parse(&self.0) {
            Ok(mut u) if u.password().is_some() => {
                let _ = u.set_password(Some("REDACTED"));
                u.to_string()
            }
            _ => self.0.clone(),
        }
    }
}

impl std::str::FromStr for DatabaseUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.starts_with("postgres://")
            || s.starts_with("postgresql://")
            || s.starts_with("sqlite:")
        {
            Ok(Self(s.to_string()))
        } else {
            Err("must start with postgres://, postgresql:// or sqlite:".into())
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_url_hides_its_password() {
        let url: DatabaseUrl = "postgres://app:s3cret@db:5432/trainscaler".parse().unwrap();
        assert_eq!(
            format!("{url:?}"),
            "postgres://app:REDACTED@db:5432/trainscaler"
        );
        assert!(!format!("{url}").contains("s3cret"));
        assert_eq!(url.expose(), "postgres://app:s3cret@db:5432/trainscaler");
    }

    #[test]
    fn database_url_must_name_a_supported_backend() {
        assert!("mysql://x".parse::<DatabaseUrl>().is_err());
        assert!("sqlite://data/t.db".parse::<DatabaseUrl>().is_ok());
    }
}
