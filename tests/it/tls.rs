//! Native TLS on the HTTP port: with a certificate and key configured the server speaks only
//! TLS, a client that trusts the certificate gets the API (auth included), one client that
//! never finishes its handshake does not hold up anyone else, and one that finishes it but
//! stalls in its request head is disconnected.

use std::sync::Arc;
use std::time::Duration;

use trainscaler::config::ServeConfig;

use crate::common::{Backend, TestApp, TestDb, serve_config};

/// A server on SQLite that speaks TLS with a new self-signed certificate for `localhost`,
/// its settings changed by `adjust`; the certificate, and the folder holding its files.
async fn spawn_tls(
    adjust: impl FnOnce(&mut ServeConfig),
) -> (TestApp, rcgen::Certificate, tempfile::TempDir) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let mut serve = serve_config(false);
    serve.tls_cert = Some(cert_path);
    serve.tls_key = Some(key_path);
    adjust(&mut serve);
    let app = TestApp::spawn_with(Arc::new(TestDb::new(Backend::Sqlite).await), serve).await;
    (app, cert.cert, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_port_speaks_tls_with_the_configured_certificate() {
    let (app, cert, _dir) = spawn_tls(|_| {}).await;
    let token = app.db.admin_token.get().expect("admin key written").clone();
    let base = format!("https://localhost:{}", app.addr.port());

    // A stalled client: connected, never says a word. Handshakes run in their own tasks, so
    // the requests below must not wait behind it.
    let _stalled = tokio::net::TcpStream::connect(app.addr).await.unwrap();

    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.pem().as_bytes()).unwrap())
        .resolve("localhost", app.addr)
        // Under the server's 10 s handshake timeout: a loop blocked on the stalled client
        // would fail this, not merely slow it.
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let get = |path: &str| trusting.get(format!("{base}{path}"));
    let r = get("/healthz").send().await.unwrap();
    assert_eq!(r.status(), 200);
    // Auth works the same over TLS: refused without the key, answered with it.
    let r = get("/v1/pools").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = get("/v1/pools").bearer_auth(&token).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());

    // A client that does not trust the certificate is refused in the handshake.
    let untrusting = reqwest::Client::builder()
        .resolve("localhost", app.addr)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let err = untrusting
        .get(format!("{base}/healthz"))
        .send()
        .await
        .expect_err("self-signed certificate accepted without trust");
    assert!(err.is_connect(), "{err:?}");

    // Plain HTTP on the TLS port gets no HTTP answer.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let answer = plain
        .get(format!("http://{}/healthz", app.addr))
        .send()
        .await;
    assert!(answer.is_err(), "plaintext answered: {answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_that_stalls_in_its_request_head_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;

    let (app, cert, _dir) = spawn_tls(|serve| serve.header_read_timeout_secs = 1).await;

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let tcp = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    // The handshake finishes; then half a request head, and nothing more.
    let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
    tls.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: ")
        .await
        .unwrap();
    tls.flush().await.unwrap();

    // Bounded only so that a server that never closes fails instead of hanging.
    let mut sent = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        // A close without TLS close_notify is an error to rustls; either way it is closed.
        let _ = tls.read_to_end(&mut sent).await;
    })
    .await;
    assert!(closed.is_ok(), "TLS connection still open");
    assert!(sent.is_empty(), "{}", String::from_utf8_lossy(&sent));
}
