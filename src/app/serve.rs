//! The HTTP server loop: accept connections on a bound listener (plain or TLS) and serve the
//! router until shut down, letting in-flight requests finish.

use std::future::Future;

use anyhow::Context;
use tokio::net::TcpListener;

use super::state::AppState;
use crate::config::ServeConfig;

/// Serves `state` on an already-bound listener until `shutdown` resolves; in-flight requests
/// are allowed to finish. Tests bind port 0 and pass the listener in.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    serve: &ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = crate::api::router(state, serve);
    if let (Some(cert), Some(key)) = (&serve.tls_cert, &serve.tls_key) {
        let tls = crate::tls::server_config(cert, key)?;
        let listener = crate::tls::TlsListener::new(listener, tls)?;
        tracing::info!(addr = %listener.local_addr, tls = true, "listening");
        return axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .context("server failed");
    }
    tracing::info!(addr = %listener.local_addr()?, tls = false, "listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("server failed")
}
