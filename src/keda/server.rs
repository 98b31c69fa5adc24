//! The gRPC server `serve` starts beside HTTP: KEDA's external scaler, optionally over TLS.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

use super::Scaler;
use super::externalscaler::external_scaler_server::ExternalScalerServer;
use crate::app::AppState;

/// TLS for the gRPC port from PEM files, when both are given; with `client_ca` the port also
/// demands a client certificate signed by that CA (KEDA sends one from its TriggerAuthentication's
/// `tlsClientCert`/`tlsClientKey`), which is how the port is authenticated: gRPC callers carry no
/// API key.
pub fn tls_config(
    cert: Option<&Path>,
    key: Option<&Path>,
    client_ca: Option<&Path>,
) -> anyhow::Result<Option<ServerTlsConfig>> {
    let read = |path: &Path| {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let tls = match (cert, key) {
        (None, None) => {
            if client_ca.is_some() {
                anyhow::bail!(
                    "TRAINSCALER_GRPC_CLIENT_CA needs TLS on the gRPC port (a certificate and key)"
                );
            }
            return Ok(None);
        }
        (Some(cert), Some(key)) => {
            ServerTlsConfig::new().identity(Identity::from_pem(read(cert)?, read(key)?))
        }
        _ => anyhow::bail!(
            "gRPC TLS needs both TRAINSCALER_GRPC_TLS_CERT and TRAINSCALER_GRPC_TLS_KEY"
        ),
    };
    let tls = match client_ca {
        Some(ca) => tls.client_ca_root(Certificate::from_pem(read(ca)?)),
        None => tls,
    };
    Ok(Some(tls))
}

/// Why the gRPC port may not be served as configured.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExposureError {
    #[error(
        "the gRPC port {0} is not on the loopback and has no client CA: anyone who can reach it \
         could commit pool decisions. Set TRAINSCALER_GRPC_CLIENT_CA (with \
         TRAINSCALER_GRPC_TLS_CERT/_KEY; KEDA presents tlsClientCert/tlsClientKey), bind it \
         to 127.0.0.1, or accept anonymous callers with TRAINSCALER_GRPC_INSECURE=true"
    )]
    Anonymous(SocketAddr),
}

/// Whether the gRPC port may serve as configured: gRPC callers carry no API key, so on an
/// address other hosts can reach, a client certificate (mutual TLS) is what authenticates them.
/// On the loopback only this host can call (the same trust as its database file), and
/// `insecure` is the operator saying the network already admits only KEDA. `Ok(true)` means
/// anonymous callers from other hosts will be served, which start-up logs as a warning.
pub fn check_exposure(
    bind: SocketAddr,
    client_ca: bool,
    insecure: bool,
) -> Result<bool, ExposureError> {
    if client_ca || bind.ip().is_loopback() {
        return Ok(false);
    }
    if insecure {
        return Ok(true);
    }
    Err(ExposureError::Anonymous(bind))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_mutual_tls_or_an_explicit_opt_out_is_served() {
        let any: SocketAddr = "0.0.0.0:9090".parse().unwrap();
        let v6: SocketAddr = "[::]:9090".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        let local6: SocketAddr = "[::1]:9090".parse().unwrap();
        assert_eq!(check_exposure(local, false, false), Ok(false));
        assert_eq!(check_exposure(local6, false, false), Ok(false));
        assert_eq!(check_exposure(any, true, false), Ok(false));
        assert_eq!(
            check_exposure(any, false, false),
            Err(ExposureError::Anonymous(any))
        );
        assert!(check_exposure(v6, false, false).is_err());
        assert_eq!(check_exposure(any, false, true), Ok(true));
    }
}
