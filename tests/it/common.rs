//! Test scaffolding: a fresh database of either kind per test, and [`TestApp`], the real
//! server started on a random port against it.

use std::net::SocketAddr;
use std::sync::Arc;

use sqlx::Connection;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use trainscaler::app;
use trainscaler::config::{Config, DatabaseUrl, LogFormat, ServeConfig};

pub const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// A database that exists for one test: a new PostgreSQL database (dropped afterwards) or an
/// SQLite file in a temporary folder.
pub struct TestDb {
    pub url: String,
    /// The admin token the first server on this database made at its first start.
    pub admin_token: std::sync::OnceLock<String>,
    pg: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_string())
}

/// The start of every test database's name: `TRAINSCALER_TEST_DB_PREFIX`, which `.ci/run`
/// sets per run so that on a shared server it drops only the databases it made.
fn db_prefix() -> String {
    let prefix =
        std::env::var("TRAINSCALER_TEST_DB_PREFIX").unwrap_or_else(|_| "trainscaler_t".into());
    // The name is spliced into CREATE/DROP DATABASE, so it must be a plain identifier.
    assert!(
        !prefix.is_empty()
            && prefix.len() <= 40
            && prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "TRAINSCALER_TEST_DB_PREFIX must be 1 to 40 of a-z, 0-9 and _, not {prefix:?}"
    );
    prefix
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temporary folder");
                let url = format!("sqlite://{}/nested/trainscaler.db", dir.path().display());
                Self {
                    url,
                    admin_token: Default::default(),
                    pg: None,
                    _dir: Some(dir),
                }
            }
            Backend::Postgres => {
                let admin = admin_url();
                let mut conn = sqlx::PgConnection::connect(&admin)
                    .await
                    .unwrap_or_else(|e| {
                        panic!(
                            "PostgreSQL is not reachable at {admin} ({e}). Start it with \
                         `pg_ctlcluster --skip-systemctl-redirect 15 main start` (or \
                         `docker compose up -d postgres` and set TEST_DATABASE_URL), or run \
                         `bash .ci/run`, which starts it."
                        )
                    });
                let name = format!(
                    "{}_{}_{}",
                    db_prefix(),
                    std::process::id(),
                    NEXT_DB.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                );
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut conn)
                    .await
                    .expect("drop stale test database");
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .expect("create test database");
                let url = match admin.rsplit_once('/') {
                    Some((base, _)) => format!("{base}/{name}"),
                    None => panic!("TEST_DATABASE_URL must end with /<database>"),
                };
                Self {
                    url,
                    admin_token: Default::default(),
                    pg: Some((admin, name)),
                    _dir: None,
                }
            }
        }
    }

    pub fn config(&self) -> Config {
        Config {
            database_url: DatabaseUrl::new(self.url.clone()),
            log_format: LogFormat::Pretty,
            log_level: "warn".into(),
            db_acquire_timeout_ms: 2000,
            db_startup_wait_sec: 0,
        }
    }
}

static NEXT_DB: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((admin, name)) = self.pg.take() else {
            return;
        };
        // Drop runs outside any runtime guarantee; use a private one on a plain thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&admin).await.ok()?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut conn)
                    .await
                    .ok()
            })
        })
        .join();
    }
}

pub fn serve_config(no_seed: bool) -> ServeConfig {
    ServeConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        max_body_bytes: 1024 * 1024,
        max_catalog_bytes: 8 * 1024 * 1024,
        request_timeout_secs: 30,
        catalog_poll_ms: 200,
        no_seed,
        max_ingest_bytes: 16 * 1024 * 1024,
        max_simulate_bytes: 8 * 1024 * 1024,
        remote_write_pool_label: "pool".into(),
        remote_write_worker_label: "Hostname".into(),
        sample_retention_hours: 48,
        grpc_bind: "127.0.0.1:0".parse().unwrap(),
        grpc_tls_cert: None,
        grpc_tls_key: None,
        grpc_client_ca: None,
        grpc_insecure: false,
        grpc_max_streams: 256,
        reconcile_interval_sec: 15,
        reconcile: false,
        leader_lease_sec: 15,
        static_startup_delay_sec: 0,
        static_capacity: String::new(),
        catalog_refresh_interval_sec: 0,
        insecure_no_auth: false,
        // Replaced per server by spawn_with, which reads the token back.
        admin_key_file: std::path::PathBuf::new(),
        metrics_public: false,
        webhook_secrets: String::new(),
        webhook_replay_window_sec: 300,
        aws_events_queue_urls: Vec::new(),
        sns_topic_arns: Vec::new(),
        sns_trusted_url_prefix: None,
        pubsub_audience: None,
        pubsub_service_account: None,
        pubsub_jwks_url: String::new(),
        max_concurrent_requests: 512,
        header_read_timeout_secs: 10,
        max_connections: 4096,
        ingest_rate_per_sec: 0,
        ingest_burst: 100,
        auth_outage_grace_sec: 300,
        ingest_samples_per_sec: 0,
        idempotency_ttl_sec: 86_400,
        tls_cert: None,
        tls_key: None,
    }
}

/// A client that sends `token` as its bearer key on every request.
pub fn client_with_key(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
        .expect("a token is a valid header value");
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("HTTP client")
}

/// The real server on a random loopback port, with its own database.
pub struct TestApp {
    pub addr: SocketAddr,
    /// The gRPC (KEDA external scaler) address.
    pub grpc_addr: SocketAddr,
    pub client: reqwest::Client,
    pub db: Arc<TestDb>,
    /// The server's shared state, for starting a reconciler on it.
    pub state: app::AppState,
    pub serve: ServeConfig,
    shutdown: Option<oneshot::Sender<()>>,
}

impl TestApp {
    /// A server over a fresh database seeded with the bundled catalog.
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_on(Arc::new(TestDb::new(backend).await), false).await
    }

    /// A server over a fresh, empty database.
    pub async fn spawn_empty(backend: Backend) -> Self {
        Self::spawn_on(Arc::new(TestDb::new(backend).await), true).await
    }

    /// Another server (replica) over `db`.
    pub async fn spawn_on(db: Arc<TestDb>, no_seed: bool) -> Self {
        Self::spawn_with(db, serve_config(no_seed)).await
    }

    /// A server over `db` with these settings.
    pub async fn spawn_with(db: Arc<TestDb>, serve: ServeConfig) -> Self {
        let config = db.config();
        Self::spawn_configured(db, config, serve).await
    }

    /// A server over `db` reached as `config` says (through a proxy, say), with these
    /// settings.
    pub async fn spawn_configured(db: Arc<TestDb>, config: Config, mut serve: ServeConfig) -> Self {
        let key_dir = tempfile::tempdir().expect("temporary folder");
        if serve.admin_key_file.as_os_str().is_empty() {
            serve.admin_key_file = key_dir.path().join("admin.key");
        }
        let state = app::prepare(&config, &serve).await.expect("start-up");
        // The first server on a database writes the admin key; replicas use the same one.
        if let Ok(token) = std::fs::read_to_string(&serve.admin_key_file) {
            let _ = db.admin_token.set(token.trim().to_string());
        }
        let client = match db.admin_token.get() {
            Some(token) if !serve.insecure_no_auth => client_with_key(token),
            _ => reqwest::Client::new(),
        };
        // Bound before the server task starts, so the first request cannot race it.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind gRPC");
        let grpc_addr = grpc.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let (grpc_tx, grpc_rx) = oneshot::channel::<()>();
        let grpc_state = state.clone();
        let kept_state = state.clone();
        let kept_serve = serve.clone();
        tokio::spawn(async move {
            trainscaler::keda::server::serve_grpc(grpc, grpc_state, None, async {
                let _ = grpc_rx.await;
            })
            .await
            .expect("gRPC server");
        });
        tokio::spawn(async move {
            app::serve(listener, state, &serve, async {
                let _ = rx.await;
            })
            .await
            .expect("server");
            let _ = grpc_tx.send(());
        });
        Self {
            addr,
            grpc_addr,
            client,
            db,
            state: kept_state,
            serve: kept_serve,
            shutdown: Some(tx),
        }
    }

    /// Starts a reconciler on this server with these adapters.
    pub fn start_reconciler_with(
        &self,
        replica: &str,
        providers: trainscaler::provider::registry::Providers,
    ) -> app::ReconcilerHandle {
        app::start_reconciler_named(&self.state, &self.serve, providers, replica.to_string())
    }

    /// Starts a reconciler on this server with the static provider `serve` configures,
    /// named `replica` in the events it records.
    pub fn start_reconciler(&self, replica: &str) -> app::ReconcilerHandle {
        let providers = app::providers_from_env(&self.state, &self.serve).expect("providers");
        app::start_reconciler_named(&self.state, &self.serve, providers, replica.to_string())
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.expect("GET")
    }

    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let response = self.get(path).await;
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().await.expect("JSON body")
    }

    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.client
            .delete(self.url(path))
            .send()
            .await
            .expect("DELETE")
    }

    pub async fn post_json(&self, path: &str, body: &serde_json::Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("POST")
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A response header as text; empty when it is absent or not text.
pub fn header_text(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Asserts an RFC 9457 problem response with `status` whose `errors` name `field`; returns it.
pub async fn assert_problem(
    response: reqwest::Response,
    status: u16,
    field: &str,
) -> serde_json::Value {
    assert_eq!(response.status(), status, "status");
    let content_type = header_text(&response, "content-type");
    assert_eq!(content_type, "application/problem+json");
    let body: serde_json::Value = response.json().await.expect("problem body");
    assert_eq!(body["status"], status);
    assert!(
        body["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("/problems/")),
        "{body}"
    );
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .expect("errors array")
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    assert!(
        fields.contains(&field),
        "expected field `{field}` in {body}"
    );
    body
}

/// Generates one `#[tokio::test]` per backend for each named `async fn(Backend)`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Backend::Postgres).await
                }
            )*
        }
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Backend::Sqlite).await
                }
            )*
        }
    };
}

/// A store opened (and migrated) on a fresh database of `backend`; keep the database as long
/// as the store.
pub async fn fresh_store(backend: Backend) -> (TestDb, trainscaler::store::Store) {
    let db = TestDb::new(backend).await;
    let store = trainscaler::app::open_store(&db.config())
        .await
        .expect("open store");
    (db, store)
}

/// A complete policy for spot g5.xlarge workers in us-east-1, for tests that call the store
/// directly (the API fills in defaults; the store takes whole policies).
pub fn g5_spot_policy(max_workers: u32) -> trainscaler::core::policy::Policy {
    serde_json::from_value(serde_json::json!({
        "provider": "aws", "region": "us-east-1", "zones": [],
        "instance_types": [{"instance_type": "g5.xlarge", "markets": ["spot"]}],
        "gpus_per_worker": 1, "mode": "utilization", "target_utilization": 0.7,
        "tolerance": 0.1, "min_workers": 0, "max_workers": max_workers, "max_step_percent": 50.0,
        "min_step": 1, "scale_up_cooldown_sec": 0, "scale_down_cooldown_sec": 300,
        "stabilization_window_sec": 300, "idle_to_zero_after_sec": 600,
        "idle_utilization_threshold": 0.05, "on_demand_base": 0, "spot_percentage": 100,
        "daily_budget": null, "budget_action": "alarm", "signal_max_age_sec": 120,
        "capacity_error_backoff_sec": 600, "interruption_window_sec": 3600,
        "max_interruption_rate": 0.2
    }))
    .expect("a complete policy")
}

/// A spot g5.xlarge worker in us-east-1a that started at `started_at_ms`, going by `aliases`
/// as well as its id.
pub fn g5_spot_worker(
    id: &str,
    aliases: &[&str],
    started_at_ms: i64,
) -> trainscaler::store::NewWorker {
    trainscaler::store::NewWorker {
        id: id.into(),
        instance_type: "g5.xlarge".into(),
        market: trainscaler::core::catalog::Market::Spot,
        zone: Some("us-east-1a".into()),
        started_at_ms,
        aliases: aliases.iter().map(|a| (*a).to_string()).collect(),
    }
}

/// Runs the `trainscaler` command with `args` on `db`, logging warnings only.
pub fn trainscaler(db: &TestDb, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_trainscaler"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env("TRAINSCALER_LOG", "warn")
        .output()
        .expect("run trainscaler")
}

/// [`trainscaler`], asserting that it succeeded (showing its stderr if not).
pub fn trainscaler_ok(db: &TestDb, args: &[&str]) -> std::process::Output {
    let out = trainscaler(db, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A small AWS catalog in SkyPilot's layout with hand-picked numbers.
pub fn aws_fixture(p4d_spot: &str) -> String {
    let gpu_info = "\"{'Gpus': [{'Name': 'A100', 'MemoryInfo': {'SizeInMiB': 40960}}]}\"";
    format!(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n\
         p4d.24xlarge,A100,8.0,96.0,1152.0,{gpu_info},21.957642,{p4d_spot},us-east-1,use1-az1,x86_64\n\
         p4d.24xlarge,A100,8.0,96.0,1152.0,{gpu_info},21.957642,,us-east-1,use1-az2,x86_64\n\
         g5.xlarge,A10G,1.0,4.0,16.0,,1.006,0.45,us-east-1,,x86_64\n"
    )
}

/// The listed spot price of p4d.24xlarge in us-east-1 zone use1-az1 (bundled: $2.4655/h).
pub async fn p4d_use1_az1_spot(app: &TestApp) -> Option<f64> {
    let body = app
        .get_json("/v1/offerings?provider=aws&region=us-east-1&gpu=A100&min_gpus=8&limit=1000")
        .await;
    body["items"]
        .as_array()?
        .iter()
        .find(|i| i["instance_type"] == "p4d.24xlarge" && i["zone"] == "use1-az1")
        .and_then(|i| i["spot_price"].as_f64())
}

/// Sends only the head of a POST that declares a `content_length`-byte body, and returns the
/// response status, content type and body. A server that refuses oversized bodies answers
/// without reading them; a real client would then fail writing the rest (broken pipe), which
/// is why this is done on a raw socket.
pub async fn post_declaring_length(
    app: &TestApp,
    path: &str,
    content_type: &str,
    content_length: usize,
) -> (u16, String, serde_json::Value) {
    let authorization = app
        .db
        .admin_token
        .get()
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    post_head_only(app, path, content_type, &authorization, content_length).await
}

/// Sends only the head of a POST declaring `content_length` bytes (with `extra_headers`, each
/// ending in CRLF) and waits for the answer: the server must answer without the body.
pub async fn post_head_only(
    app: &TestApp,
    path: &str,
    content_type: &str,
    extra_headers: &str,
    content_length: usize,
) -> (u16, String, serde_json::Value) {
    use tokio::io::AsyncWriteExt;

    let mut stream = tokio::net::TcpStream::connect(app.addr)
        .await
        .expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: {content_type}\r\n\
         {extra_headers}content-length: {content_length}\r\n\r\n",
        app.addr
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    let (status, content_type, body) = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        read_response(&mut stream),
    )
    .await
    .expect("the server answered an oversized body within 10 s");
    let body = serde_json::from_slice(&body).expect("JSON body");
    (status, content_type, body)
}

/// Reads one HTTP/1.1 response with a Content-Length body from `stream`, leaving the
/// connection open: its status, content type and body. Callers bound the wait.
pub async fn read_response(stream: &mut tokio::net::TcpStream) -> (u16, String, Vec<u8>) {
    use tokio::io::AsyncReadExt;

    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.expect("read response");
        assert!(n > 0, "connection closed before a full response");
        received.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&received).to_string();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let headers = text[..end].to_ascii_lowercase();
        let header = |name: &str| {
            headers
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_string))
        };
        let length: usize = header("content-length")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if received.len() < end + 4 + length {
            continue;
        }
        let status: u16 = headers
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let body = received[end + 4..end + 4 + length].to_vec();
        return (status, header("content-type").unwrap_or_default(), body);
    }
}

/// Waits for `child` to end, at most `bound`, and then for `log` to have read all it wrote;
/// `None` if it is still running.
pub async fn wait_exit(
    child: &mut std::process::Child,
    log: &ServerLog,
    bound: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            log.until_closed().await;
            return Some(status);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The JSON log a server child process writes to stderr, read to its end on a thread of its
/// own: the listening address comes from its "listening" line, and all of it is kept to show
/// when a test fails.
pub struct ServerLog {
    lines: Arc<std::sync::Mutex<Vec<String>>>,
    addr: Option<std::sync::mpsc::Receiver<Option<String>>>,
    /// Set once the reader has reached the end of the stream.
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl ServerLog {
    pub fn follow(stderr: std::process::ChildStderr) -> Self {
        use std::io::{BufRead, BufReader};
        let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<Option<String>>();
        let kept = Arc::clone(&lines);
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let at_end = Arc::clone(&closed);
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent
                    && let Ok(event) = serde_json::from_str::<serde_json::Value>(&line)
                    && event["message"] == "listening"
                {
                    let _ = addr_tx.send(event["addr"].as_str().map(str::to_string));
                    sent = true;
                }
                kept.lock().expect("log lock").push(line);
            }
            let _ = addr_tx.send(None);
            at_end.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        Self {
            lines,
            addr: Some(addr_rx),
            closed,
        }
    }

    /// The address of the "listening" line, once it comes; `None` if the process ended
    /// without one (or it was asked for before).
    pub async fn listening_addr(&mut self) -> Option<String> {
        let rx = self.addr.take()?;
        tokio::task::spawn_blocking(move || rx.recv().ok().flatten())
            .await
            .ok()
            .flatten()
    }

    /// Waits (at most 10 s) until the reader has read everything the process wrote. Call it
    /// after the process exited, before reading its last lines: the reader thread may still be
    /// behind the exit.
    pub async fn until_closed(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.closed.load(std::sync::atomic::Ordering::SeqCst)
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        self.lines.lock().expect("log lock").join("\n")
    }
}
