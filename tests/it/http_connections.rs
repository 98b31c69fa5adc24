//! Clients that open connections and then say nothing: the server closes a connection that
//! does not finish its request head within the header-read timeout, and keeps at most
//! `max_connections` open, leaving the next one unanswered in the backlog until one closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Backend, TestApp, TestDb, read_response, serve_config};

/// Only keeps a test from hanging forever when the server never closes or answers; nothing
/// measures how long it took.
const HANG_BOUND: Duration = Duration::from_secs(30);

/// How long a connection past the limit is watched for an answer it must not get.
const UNANSWERED_WINDOW: Duration = Duration::from_millis(1500);

async fn spawn(header_read_timeout_secs: u64, max_connections: usize) -> TestApp {
    let mut serve = serve_config(false);
    serve.header_read_timeout_secs = header_read_timeout_secs;
    serve.max_connections = max_connections;
    TestApp::spawn_with(Arc::new(TestDb::new(Backend::Sqlite).await), serve).await
}

/// Reads until the server closes `stream` (a reset counts as closed); `None` if it is still
/// open after [`HANG_BOUND`]. Returns what the server sent before closing.
async fn read_until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    };
    tokio::time::timeout(HANG_BOUND, read).await.ok()?;
    Some(received)
}

/// Reads one response with a Content-Length body from a kept-alive connection; its status.
async fn read_one_response(stream: &mut TcpStream) -> u16 {
    let (status, _, _) = tokio::time::timeout(HANG_BOUND, read_response(stream))
        .await
        .expect("no response");
    status
}

/// A connection that has sent one request and been answered, and stays open (keep-alive).
async fn held_connection(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("write request");
    assert_eq!(read_one_response(&mut stream).await, 200);
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stalls_in_its_request_head_is_disconnected() {
    let app = spawn(1, 4096).await;

    // Half a request line, half a header block, and nothing at all.
    let mut line = TcpStream::connect(app.addr).await.expect("connect");
    line.write_all(b"GET /heal").await.expect("write");
    let mut headers = TcpStream::connect(app.addr).await.expect("connect");
    headers
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: ")
        .await
        .expect("write");
    let mut silent = TcpStream::connect(app.addr).await.expect("connect");

    for (what, stream) in [
        ("partial request line", &mut line),
        ("partial headers", &mut headers),
        ("silent", &mut silent),
    ] {
        let sent = read_until_closed(stream)
            .await
            .unwrap_or_else(|| panic!("{what}: connection still open after {HANG_BOUND:?}"));
        // Nothing was asked, so nothing is answered: the connection is just closed.
        assert!(
            sent.is_empty(),
            "{what}: {}",
            String::from_utf8_lossy(&sent)
        );
    }

    // The server still answers a client that sends its request in one go.
    let r = app.get("/healthz").await;
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_read_timeout() {
    let app = spawn(1, 4096).await;
    let mut held = held_connection(app.addr).await;
    // Waiting for the next request's head is waiting for headers too.
    let sent = read_until_closed(&mut held)
        .await
        .expect("idle connection still open");
    assert!(sent.is_empty(), "{}", String::from_utf8_lossy(&sent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_the_limit_waits_until_one_closes() {
    // A long header timeout, so that only the limit decides who is served.
    let app = spawn(600, 2).await;
    let first = held_connection(app.addr).await;
    let _second = held_connection(app.addr).await;

    // The third connects (the kernel completes the handshake into the backlog) and asks, but
    // is not accepted while two are open.
    let mut third = TcpStream::connect(app.addr).await.expect("connect");
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .expect("write request");
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(UNANSWERED_WINDOW, third.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "the connection past the limit got {early:?}: {}",
        String::from_utf8_lossy(&buf)
    );

    // One closes: the waiting connection is accepted and answered.
    drop(first);
    let sent = read_until_closed(&mut third)
        .await
        .expect("no answer after a connection closed");
    assert!(
        sent.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&sent)
    );

    // Under the limit again, new connections are served.
    let r = app.get("/healthz").await;
    assert_eq!(r.status(), 200);
}
