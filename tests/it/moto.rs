//! A moto server (a local mock of the AWS APIs) for the AWS adapter's tests: the one CI starts
//! (`TEST_MOTO_URL`), or a private `moto_server` this process spawns on a free port and kills
//! when the last test using it is done.

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const HOW_TO_START: &str = "Start moto with `bash .ci/run` (it installs and starts it), or \
    `pip install 'moto[server]' && moto_server -p 5000 & export TEST_MOTO_URL=http://127.0.0.1:5000`; \
    TEST_MOTO_SERVER may name the moto_server binary when it is not on PATH";

/// A reachable moto server; a spawned one is killed on drop.
pub struct Moto {
    pub url: String,
    child: Option<Child>,
}

impl Drop for Moto {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

static SHARED: Mutex<Weak<Moto>> = Mutex::new(Weak::new());

/// The server tests share: `TEST_MOTO_URL` when set, otherwise one spawned for as long as some
/// test holds it. Tests on it must use unique names ([`unique`]).
pub fn shared() -> Arc<Moto> {
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(moto) = slot.upgrade() {
        return moto;
    }
    let moto = Arc::new(match std::env::var("TEST_MOTO_URL") {
        Ok(url) if !url.trim().is_empty() => external(url.trim().trim_end_matches('/')),
        _ => spawn(),
    });
    *slot = Arc::downgrade(&moto);
    moto
}

/// A server of the caller's own, never shared (for tests that switch authentication on).
pub fn private() -> Moto {
    spawn()
}

fn external(url: &str) -> Moto {
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    if let Err(e) = wait_until_listening(&addr, Duration::from_secs(10)) {
        panic!("TEST_MOTO_URL={url} does not answer ({e}). {HOW_TO_START}.");
    }
    Moto {
        url: url.to_string(),
        child: None,
    }
}

fn spawn() -> Moto {
    let binary = std::env::var("TEST_MOTO_SERVER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| "moto_server".to_string());
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free local port");
        listener.local_addr().expect("local address").port()
    };
    let child = Command::new(&binary)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {binary:?} ({e}). {HOW_TO_START}."));
    let moto = Moto {
        url: format!("http://127.0.0.1:{port}"),
        child: Some(child),
    };
    if let Err(e) = wait_until_listening(&format!("127.0.0.1:{port}"), Duration::from_secs(30)) {
        panic!("{binary} did not start listening on port {port} ({e}). {HOW_TO_START}.");
    }
    moto
}

fn wait_until_listening(addr: &str, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let mut last = String::from("no attempt");
    while Instant::now() < deadline {
        let target = addr
            .to_socket_addrs()
            .map_err(|e| format!("{addr} is not an address: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr} resolves to nothing"))?;
        match TcpStream::connect_timeout(&target, Duration::from_millis(500)) {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("not listening after {within:?}: {last}"))
}

/// A name no other test (or earlier run against the same shared server) has used.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
