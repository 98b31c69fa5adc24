//! The one HTTP client each adapter owns: connection reuse across calls, and timeouts so that
//! a cloud endpoint that stops answering cannot stall the reconciler.

use std::time::Duration;

use super::{ProviderError, ProviderResult};

/// Limits of an adapter's HTTP client.
#[derive(Debug, Clone, Copy)]
pub struct HttpSettings {
    pub connect_timeout: Duration,
    /// For a whole request, response body included.
    pub timeout: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
        }
    }
}

pub fn client(settings: HttpSettings) -> ProviderResult<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.timeout)
        .user_agent(concat!("trainscaler/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProviderError::Other(format!("cannot build the HTTP client: {e}")))
}
