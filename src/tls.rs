//! Native TLS for the HTTP port (rustls with the ring provider), for deployments without a
//! terminating ingress. Each handshake runs in its connection's own task (see `app::serve`), so
//! that one slow or silent client cannot hold up accepting the others.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's TLS settings from a PEM certificate chain and private key.
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("no PEM certificate in {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "no certificate in {}", cert.display());
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("no PEM private key in {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the certificate and key do not make a TLS identity")?;
    // The server speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Completes the TLS handshake of an accepted connection, or gives up on it (logged at debug:
/// a failed or silent handshake is the client's business) after [`HANDSHAKE_TIMEOUT`].
pub async fn handshake(
    acceptor: &TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}
