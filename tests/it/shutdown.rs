//! Graceful shutdown of the real binary: SIGTERM while an ingestion request is half sent. The
//! server must stop taking new connections, still answer the request in flight once its body
//! arrives, keep the sample it carried, and exit 0 soon after.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Row};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Backend, ServerLog, TestDb, client_with_key, wait_exit};
use crate::on_both_backends;

/// How long the server may take from SIGTERM (with nothing left in flight) to exit.
const EXIT_BOUND: Duration = Duration::from_secs(10);

/// The binary running on `db`, its HTTP address, its log so far, and its admin token.
struct Server {
    child: Child,
    addr: SocketAddr,
    log: ServerLog,
    token: String,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `trainscaler serve` and waits for its "listening" log line. Only one request
    /// may be in flight at a time, so a second one answered 503 proves the first is inside
    /// the server.
    async fn start(db: &TestDb) -> Self {
        let dir = tempfile::tempdir().expect("temporary folder");
        let key_file = dir.path().join("admin.key");
        let mut child = Command::new(env!("CARGO_BIN_EXE_trainscaler"))
            .current_dir(dir.path())
            .env("DATABASE_URL", &db.url)
            .env("TRAINSCALER_BIND", "127.0.0.1:0")
            .env("TRAINSCALER_GRPC_BIND", "127.0.0.1:0")
            .env("TRAINSCALER_LOG_FORMAT", "json")
            .env("TRAINSCALER_LOG", "info")
            .env("TRAINSCALER_ADMIN_KEY_FILE", &key_file)
            .env("TRAINSCALER_MAX_CONCURRENT_REQUESTS", "1")
            .env("TRAINSCALER_INGEST_RATE_PER_SEC", "0")
            .stderr(Stdio::piped())
            .spawn()
            .expect("start trainscaler");
        let mut log = ServerLog::follow(child.stderr.take().expect("piped stderr"));
        let addr = log.listening_addr().await;
        let Some(addr) = addr.and_then(|a| a.parse().ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server exited without listening:\n{}", log.text());
        };
        let token = std::fs::read_to_string(&key_file)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", key_file.display(), log.text()))
            .trim()
            .to_string();
        Self {
            child,
            addr,
            log,
            token,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        self.log.text()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits for the process to end, at most `bound`; `None` if it is still running.
    async fn wait_exit(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        wait_exit(&mut self.child, &self.log, bound).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a new connection gets an answer to `GET /healthz`. A refused connect, a reset or a
/// close without a response all mean "not served".
async fn served_on_a_new_connection(addr: SocketAddr) -> bool {
    let attempt = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        response.starts_with(b"HTTP/1.1 200").then_some(())
    };
    // A connection left hanging is not served either.
    matches!(
        tokio::time::timeout(Duration::from_secs(2), attempt).await,
        Ok(Some(()))
    )
}

/// Reads one HTTP/1.1 response with a Content-Length body; returns the status and the body.
async fn read_response(stream: &mut TcpStream) -> (u16, serde_json::Value) {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.expect("read the response");
        assert!(
            n > 0,
            "the connection closed before a full response: {:?}",
            String::from_utf8_lossy(&received)
        );
        received.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&received).to_string();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let head = text[..end].to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("a content-length header");
        if received.len() < end + 4 + length {
            continue;
        }
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status code");
        let body = serde_json::from_slice(&received[end + 4..end + 4 + length]).expect("JSON");
        return (status, body);
    }
}

async fn samples_stored(db: &TestDb, backend: Backend, pool: &str) -> Vec<(String, f64)> {
    let query = "SELECT name, value FROM metric_samples WHERE pool = $1 ORDER BY name";
    match backend {
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&db.url).await.expect("connect");
            sqlx::query(query)
                .bind(pool)
                .fetch_all(&mut conn)
                .await
                .expect("read samples")
                .into_iter()
                .map(|r| (r.get::<String, _>("name"), r.get::<f64, _>("value")))
                .collect()
        }
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&db.url)
                .await
                .expect("connect");
            sqlx::query(query)
                .bind(pool)
                .fetch_all(&mut conn)
                .await
                .expect("read samples")
                .into_iter()
                .map(|r| (r.get::<String, _>("name"), r.get::<f64, _>("value")))
                .collect()
        }
    }
}

async fn sigterm_finishes_the_request_in_flight_and_keeps_its_sample(backend: Backend) {
    let db = TestDb::new(backend).await;
    let mut server = Server::start(&db).await;
    let client = client_with_key(&server.token);
    let created = client
        .put(server.url("/v1/pools/drain"))
        .json(&serde_json::json!({
            "region": "us-east-1", "instance_types": ["g4dn.12xlarge"], "max_workers": 4}))
        .send()
        .await
        .expect("PUT pool");
    assert_eq!(created.status(), 201, "{}", server.log());

    // An ingestion POST whose head and first half of the body are sent, the rest held back.
    let at = trainscaler::timefmt::format_ms(trainscaler::timefmt::now_ms());
    let body = format!(
        r#"{{"samples": [{{"pool": "drain", "name": "queue_depth", "value": 7, "at": "{at}"}}]}}"#
    );
    let (first, rest) = body.as_bytes().split_at(body.len() / 2);
    let head = format!(
        "POST /v1/webhooks/metrics HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         authorization: Bearer {}\r\ncontent-length: {}\r\n\r\n",
        server.addr,
        server.token,
        body.len()
    );

    // With one request allowed at a time, a 503 for another says the POST holds the slot: the
    // server has taken it in and is waiting for its body. The probe races the POST for that
    // slot; when the probe wins, the POST is the one refused, and it is sent again.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut in_flight = 'send: loop {
        let mut stream = TcpStream::connect(server.addr).await.expect("connect");
        stream.write_all(head.as_bytes()).await.expect("head");
        stream.write_all(first).await.expect("first half");
        loop {
            assert!(
                Instant::now() < deadline,
                "the half-sent POST never became a request in flight:\n{}",
                server.log()
            );
            let probe = client
                .get(server.url("/v1/pools"))
                .send()
                .await
                .expect("GET /v1/pools")
                .status();
            if probe == 503 {
                break 'send stream;
            }
            // Anything the server sent on the POST's connection before its body is a refusal.
            let mut byte = [0u8; 1];
            if let Ok(read) =
                tokio::time::timeout(Duration::from_millis(50), stream.read(&mut byte)).await
            {
                assert!(
                    matches!(read, Ok(1)),
                    "the POST's connection closed unanswered: {read:?}\n{}",
                    server.log()
                );
                continue 'send;
            }
        }
    };

    server.sigterm();

    // New connections stop being served while the POST is still open.
    let deadline = Instant::now() + Duration::from_secs(5);
    while served_on_a_new_connection(server.addr).await {
        assert!(
            Instant::now() < deadline,
            "new connections were still served 5 s after SIGTERM:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        server.child.try_wait().expect("try_wait").is_none(),
        "the server exited with a request in flight:\n{}",
        server.log()
    );

    // The rest of the body: the request completes and is acknowledged.
    in_flight.write_all(rest).await.expect("second half");
    let (status, answer) =
        tokio::time::timeout(Duration::from_secs(10), read_response(&mut in_flight))
            .await
            .unwrap_or_else(|_| panic!("no answer within 10 s:\n{}", server.log()));
    assert_eq!(status, 200, "{answer}\n{}", server.log());
    assert_eq!(answer["accepted"], 1, "{answer}");
    drop(in_flight);

    let Some(exit) = server.wait_exit(EXIT_BOUND).await else {
        panic!(
            "the server did not exit within {EXIT_BOUND:?} of its last request:\n{}",
            server.log()
        );
    };
    assert!(exit.success(), "exit status {exit}:\n{}", server.log());
    assert!(
        server.log().contains("shutting down"),
        "the server logs the signal:\n{}",
        server.log()
    );

    // What was acknowledged is in the database.
    assert_eq!(
        samples_stored(&db, backend, "drain").await,
        vec![("queue_depth".to_string(), 7.0)]
    );
}

/// An idle server (no request in flight, a keep-alive connection open) exits at once.
async fn sigterm_on_an_idle_server_exits_zero_promptly(backend: Backend) {
    let db = TestDb::new(backend).await;
    let mut server = Server::start(&db).await;
    // A keep-alive connection that stays open must not hold the shutdown.
    let mut idle = TcpStream::connect(server.addr).await.expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("write");
    let (status, _) = read_response(&mut idle).await;
    assert_eq!(status, 200);

    let sent = Instant::now();
    server.sigterm();
    let Some(exit) = server.wait_exit(EXIT_BOUND).await else {
        panic!(
            "an idle server did not exit within {EXIT_BOUND:?}:\n{}",
            server.log()
        );
    };
    assert!(exit.success(), "exit status {exit}:\n{}", server.log());
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "exit took {:?}",
        sent.elapsed()
    );
}

on_both_backends!(
    sigterm_finishes_the_request_in_flight_and_keeps_its_sample,
    sigterm_on_an_idle_server_exits_zero_promptly
);
