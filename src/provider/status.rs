//! What `GET /v1/providers/status` reports of each cloud adapter this replica runs: which
//! credentials it uses, when they expire, and how its last call went. The metrics decorator
//! records each call's outcome here; nothing in it is a secret.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use utoipa::ToSchema;

use super::credentials::CredentialReport;
use super::{ALIBABA, AWS, GCP, Provider};

/// How the last call of an adapter went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LastCall {
    /// `refresh`, `describe`, `set_capacity` or `terminate`.
    #[schema(example = "describe")]
    pub method: &'static str,
    /// `ok`, or the error kind: `unauthorized`, `throttled`, `not_found`,
    /// `insufficient_capacity`, `invalid_request`, `other`.
    #[schema(example = "ok")]
    pub outcome: &'static str,
    /// When it ended (RFC 3339).
    #[schema(example = "2026-12-04T17:30:00Z")]
    pub at: String,
}

/// One cloud provider's adapter on this replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ProviderStatus {
    /// `aws`, `alibaba` or `gcp`.
    #[schema(example = "aws")]
    pub provider: &'static str,
    /// Whether this replica runs an adapter for the provider (its credentials are
    /// configured and the reconciler is on).
    pub configured: bool,
    /// The credentials in use; `null` when not configured.
    pub credentials: Option<CredentialReport>,
    /// The adapter's last call since this replica started; `null` before the first one
    /// (only the leader replica calls clouds).
    pub last_call: Option<LastCall>,
}

/// The adapters of this replica and their last calls. Shared by the application state and
/// the metrics decorators.
#[derive(Default)]
pub struct StatusBoard {
    adapters: Mutex<BTreeMap<&'static str, Arc<dyn Provider>>>,
    last: Mutex<HashMap<&'static str, LastCall>>,
}

impl std::fmt::Debug for StatusBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusBoard").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked mid-insert; the map is whole.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl StatusBoard {
    /// Makes `adapter` the one reported under its name.
    pub fn register(&self, adapter: Arc<dyn Provider>) {
        lock(&self.adapters).insert(adapter.name(), adapter);
    }

    /// Records how a call of `provider` ended.
    pub fn record(
        &self,
        provider: &'static str,
        method: &'static str,
        outcome: &'static str,
        at_ms: i64,
    ) {
        lock(&self.last).insert(
            provider,
            LastCall {
                method,
                outcome,
                at: crate::timefmt::format_ms(at_ms),
            },
        );
    }

    /// The three clouds, configured or not, in a fixed order.
    pub fn statuses(&self) -> Vec<ProviderStatus> {
        let adapters = lock(&self.adapters).clone();
        let last = lock(&self.last).clone();
        [AWS, ALIBABA, GCP]
            .into_iter()
            .map(|name| {
                let adapter = adapters.get(name);
                ProviderStatus {
                    provider: name,
                    configured: adapter.is_some(),
                    credentials: adapter.and_then(|a| a.credentials()),
                    last_call: last.get(name).cloned(),
                }
            })
            .collect()
    }
}
