//! Start-up before the database: the real binary started while PostgreSQL refuses connections
//! (a proxy the test controls, closed) waits for it with backoff and serves once it answers;
//! gives up with an error after `TRAINSCALER_DB_STARTUP_WAIT_SEC`; does not wait at all for
//! errors a retry cannot fix (a database that does not exist); and exits 0 on SIGTERM while
//! it waits.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Backend, ServerLog, TestDb, wait_exit};
use crate::pg_proxy::PgProxy;

/// The log message of each wait between attempts.
const WAITING: &str = "database not reachable yet, waiting for it";

/// Bound on anything these tests wait for, so a broken build fails instead of hanging.
const BOUND: Duration = Duration::from_secs(60);

struct Starting {
    child: Child,
    log: ServerLog,
    dir: tempfile::TempDir,
}

impl Starting {
    fn spawn(database_url: &str, wait_sec: u64) -> Self {
        let dir = tempfile::tempdir().expect("temporary folder");
        let mut child = Command::new(env!("CARGO_BIN_EXE_trainscaler"))
            .current_dir(dir.path())
            .env("DATABASE_URL", database_url)
            .env("TRAINSCALER_BIND", "127.0.0.1:0")
            .env("TRAINSCALER_GRPC_BIND", "127.0.0.1:0")
            .env("TRAINSCALER_LOG_FORMAT", "json")
            .env("TRAINSCALER_LOG", "info")
            .env("TRAINSCALER_DB_STARTUP_WAIT_SEC", wait_sec.to_string())
            .env("TRAINSCALER_ADMIN_KEY_FILE", dir.path().join("admin.key"))
            .stderr(Stdio::piped())
            .spawn()
            .expect("start trainscaler");
        let log = ServerLog::follow(child.stderr.take().expect("piped stderr"));
        Self { child, log, dir }
    }

    fn waits_logged(&self) -> usize {
        self.log.text().matches(WAITING).count()
    }

    /// Polls until the log holds `n` waits; panics with the log if the process ends first.
    async fn until_waits(&mut self, n: usize) {
        let deadline = Instant::now() + BOUND;
        while self.waits_logged() < n {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("exited ({status}) while waiting:\n{}", self.log.text());
            }
            assert!(
                Instant::now() < deadline,
                "no wait logged:\n{}",
                self.log.text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn exit(&mut self) -> ExitStatus {
        wait_exit(&mut self.child, &self.log, BOUND)
            .await
            .unwrap_or_else(|| panic!("still running after {BOUND:?}:\n{}", self.log.text()))
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A new database behind a proxy that refuses connections (as a stopped server does), and
/// the URL that goes through the proxy.
async fn database_down() -> (TestDb, PgProxy, String) {
    let db = TestDb::new(Backend::Postgres).await;
    let proxy = PgProxy::in_front_of(&db.url).await;
    proxy.cut();
    let url = proxy.url_for(&db.url);
    (db, proxy, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_waits_for_a_database_that_comes_up_after_it_and_then_serves() {
    let (_db, proxy, url) = database_down().await;
    let mut server = Starting::spawn(&url, 120);
    server.until_waits(2).await;
    assert!(
        !server.dir.path().join("admin.key").exists(),
        "nothing is written before the database answers"
    );

    proxy.restore();
    let addr = tokio::time::timeout(BOUND, server.log.listening_addr())
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("never listened:\n{}", server.log.text()));
    let ready = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .expect("readyz answers");
    assert_eq!(ready.status(), 200, "{}", server.log.text());
    assert!(
        server.dir.path().join("admin.key").exists(),
        "the first start made its admin key once the database came"
    );
    let waits = server.waits_logged();
    assert!(waits >= 2, "{waits} waits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_stays_down_fails_start_up_once_the_wait_is_over() {
    let (_db, _proxy, url) = database_down().await;
    let mut server = Starting::spawn(&url, 2);
    let status = server.exit().await;
    let log = server.log.text();
    assert!(!status.success(), "{status}:\n{log}");
    assert!(server.waits_logged() >= 1, "it retried first:\n{log}");
    assert!(log.contains("cannot open database"), "{log}");

    // With no wait configured, the same start fails without a single retry.
    let mut at_once = Starting::spawn(&url, 0);
    let status = at_once.exit().await;
    assert!(!status.success(), "{status}");
    assert_eq!(at_once.waits_logged(), 0, "{}", at_once.log.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_does_not_exist_is_not_waited_for() {
    let db = TestDb::new(Backend::Postgres).await;
    let missing = match db.url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/trainscaler_no_such_database"),
        None => panic!("a database URL ends with /<name>: {}", db.url),
    };
    let mut server = Starting::spawn(&missing, 120);
    let status = server.exit().await;
    let log = server.log.text();
    assert!(!status.success(), "{status}:\n{log}");
    assert_eq!(server.waits_logged(), 0, "{log}");
    assert!(log.contains("trainscaler_no_such_database"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_waiting_for_the_database_exits_zero() {
    let (_db, _proxy, url) = database_down().await;
    let mut server = Starting::spawn(&url, 120);
    server.until_waits(1).await;
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM failed");
    let status = server.exit().await;
    let log = server.log.text();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("stopped during start-up"), "{log}");
}
