//! The HTTP server loop: accept connections on a bound listener (plain or TLS) and serve the
//! router on each until shut down, letting in-flight requests finish.
//!
//! Two limits protect the server from clients that open connections and then say nothing
//! (`axum::serve` has neither): a connection must send a request's head within the
//! header-read timeout or it is closed, and at most `max_connections` are open at once. The
//! next connection past the limit is not accepted: it waits in the kernel's listen backlog
//! until an open one closes, as it would behind a web server whose worker connections are all
//! taken, and is then served as usual. A full backlog is the kernel's to refuse.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use super::state::AppState;
use crate::config::ServeConfig;

/// How long to pause after an accept error that is not about one connection (out of file
/// descriptors, say): retrying at once would spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// Serves `state` on an already-bound listener until `shutdown` resolves; in-flight requests
/// are allowed to finish. Tests bind port 0 and pass the listener in.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    serve: &ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = crate::api::router(state, serve);
    let tls = match (&serve.tls_cert, &serve.tls_key) {
        (Some(cert), Some(key)) => Some(TlsAcceptor::from(crate::tls::server_config(cert, key)?)),
        _ => None,
    };
    let max_connections = serve.max_connections();
    tracing::info!(
        addr = %listener.local_addr()?,
        tls = tls.is_some(),
        max_connections,
        header_read_timeout_secs = serve.header_read_timeout().as_secs(),
        "listening"
    );
    let server = Server {
        app,
        tls,
        http: Arc::new(http1_builder(serve.header_read_timeout())),
    };
    server
        .run(
            listener,
            Arc::new(Semaphore::new(max_connections)),
            shutdown,
        )
        .await;
    Ok(())
}

/// HTTP/1.1 only, as the TLS side advertises (ALPN `http/1.1`). `axum::serve` also answered
/// plaintext HTTP/2 with prior knowledge, which nothing documented or used, and an HTTP/2
/// connection has no header-read timeout to bound it. The timeout needs a timer to run on.
fn http1_builder(header_read_timeout: Duration) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    builder
}

/// What every connection is served with.
struct Server {
    app: axum::Router,
    tls: Option<TlsAcceptor>,
    http: Arc<http1::Builder>,
}

impl Server {
    /// Accepts connections while a permit of `limit` is free, until `shutdown`; then stops
    /// accepting and waits for the open connections to finish their requests and close.
    async fn run(
        &self,
        listener: TcpListener,
        limit: Arc<Semaphore>,
        shutdown: impl Future<Output = ()>,
    ) {
        let graceful = GracefulShutdown::new();
        let mut shutdown = pin!(shutdown);
        loop {
            // The permit is taken before accepting, so that a connection past the limit stays
            // in the backlog instead of being accepted and left unanswered.
            let permit = tokio::select! {
                permit = limit.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    // The semaphore is never closed.
                    Err(_) => break,
                },
                () = &mut shutdown => break,
            };
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = &mut shutdown => break,
            };
            match accepted {
                Ok((tcp, peer)) => {
                    let connection = self.connection(tcp, peer, graceful.watcher(), permit);
                    tokio::spawn(connection);
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    tracing::error!(error = %e, "accept failed");
                    tokio::select! {
                        () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => {}
                        () = &mut shutdown => break,
                    }
                }
            }
        }
        // Closing the listener refuses new connections while the open ones drain.
        drop(listener);
        tracing::debug!(open = graceful.count(), "draining connections");
        graceful.shutdown().await;
    }

    /// Serves one accepted connection (after its TLS handshake, if any), holding `permit`
    /// until it closes.
    fn connection(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
        watcher: Watcher,
        permit: OwnedSemaphorePermit,
    ) -> impl Future<Output = ()> + Send + 'static {
        let app = self.app.clone();
        let tls = self.tls.clone();
        let http = self.http.clone();
        async move {
            match tls {
                None => serve_connection(&http, tcp, app, watcher, peer).await,
                Some(acceptor) => {
                    if let Some(stream) = crate::tls::handshake(&acceptor, tcp, peer).await {
                        serve_connection(&http, stream, app, watcher, peer).await
                    }
                }
            }
            drop(permit);
        }
    }
}

/// Serves HTTP/1.1 on `io` until the client closes, the header-read timeout ends it or
/// shutdown lets its last request finish.
async fn serve_connection<I>(
    http: &http1::Builder,
    io: I,
    app: axum::Router,
    watcher: Watcher,
    peer: SocketAddr,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = http.serve_connection(TokioIo::new(io), TowerToHyperService::new(app));
    if let Err(e) = watcher.watch(connection).await {
        // Timeouts, resets and malformed requests: the client's doing, not worth a warning.
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Errors about one connection that went away before it was accepted: accept the next.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
