//! The gRPC server `serve` starts beside HTTP: KEDA's external scaler, optionally over TLS.

use std::future::Future;
use std::path::Path;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Identity, Server, ServerTlsConfig};

use super::Scaler;
use super::externalscaler::external_scaler_server::ExternalScalerServer;
use crate::app::AppState;

/// TLS for the gRPC port from PEM files, when both are given.
pub fn tls_config(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> anyhow::Result<Option<ServerTlsConfig>> {
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => {
            let cert =
                std::fs::read(cert).with_context(|| format!("cannot read {}", cert.display()))?;
            let key =
                std::fs::read(key).with_context(|| format!("cannot read {}", key.display()))?;
            Ok(Some(
                ServerTlsConfig::new().identity(Identity::from_pem(cert, key)),
            ))
        }
        _ => anyhow::bail!(
            "gRPC TLS needs both TRAINSCALER_GRPC_TLS_CERT and TRAINSCALER_GRPC_TLS_KEY"
        ),
    }
}

/// Serves the external scaler on an already-bound listener until `shutdown` resolves.
pub async fn serve_grpc(
    listener: TcpListener,
    state: AppState,
    tls: Option<ServerTlsConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, tls = tls.is_some(), "gRPC (KEDA external scaler) listening");
    let mut builder = Server::builder();
    if let Some(tls) = tls {
        builder = builder
            .tls_config(tls)
            .context("invalid gRPC TLS configuration")?;
    }
    // Open StreamIsActive streams would hold a graceful shutdown open for good: end them.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    builder
        .add_service(ExternalScalerServer::new(Scaler::new(state, stopping)))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await
        .context("gRPC server failed")
}
