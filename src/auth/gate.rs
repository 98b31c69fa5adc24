//! The authentication settings a server runs with, built once at start: the key verifier (or
//! none, with auth off), webhook secrets, Pub/Sub push tokens, SNS envelopes, and the per-key
//! ingestion budgets. The HTTP middleware in `api::auth` asks it; the background tasks tell it
//! of revoked keys. Nothing here knows about HTTP.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use super::google_oidc::{PushAuth, PushAuthSettings};
use super::verifier::{KeyVerifier, Principal};
use super::webhook_signature::WebhookSecrets;
use crate::config::ServeConfig;
use crate::ingest::sns::{SnsSettings, SnsVerifier};
use crate::store::Store;

/// Why a key's ingestion was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetRefusal {
    /// Over the rate: try again after this many seconds.
    #[error("over the ingestion rate; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// One request holds more samples than a second's budget: never acceptable as sent.
    #[error("{samples} samples in one request; the budget is {per_sec} per second")]
    TooManySamples { samples: u32, per_sec: u32 },
}

/// Everything the middleware needs, built once at start.
#[derive(Debug)]
pub struct Auth {
    /// `None` when the server runs with `--insecure-no-auth`.
    pub(crate) verifier: Option<KeyVerifier>,
    pub(crate) webhooks: WebhookSecrets,
    /// Google-signed Pub/Sub push tokens, accepted on the events webhook when configured.
    pub(crate) pubsub: Option<PushAuth>,
    pub(crate) metrics_public: bool,
    limiter: Option<DefaultKeyedRateLimiter<String>>,
    /// Samples per key, beside requests: one request may carry a great many.
    sample_limiter: Option<(DefaultKeyedRateLimiter<String>, NonZeroU32)>,
    /// SNS envelopes authenticate themselves on `/v1/webhooks/sns`.
    sns: SnsVerifier,
}

impl Auth {
    pub fn new(store: &Store, serve: &ServeConfig) -> anyhow::Result<Self> {
        let verifier = if serve.insecure_no_auth {
            None
        } else {
            Some(KeyVerifier::new(
                store.clone(),
                Duration::from_secs(serve.auth_outage_grace_sec),
            )?)
        };
        let webhooks =
            WebhookSecrets::parse(&serve.webhook_secrets, serve.webhook_replay_window_sec)
                .map_err(|e| anyhow::anyhow!("TRAINSCALER_WEBHOOK_SECRETS: {e}"))?;
        let pubsub = match (&serve.pubsub_audience, &serve.pubsub_service_account) {
            (Some(audience), Some(service_account)) => Some(
                PushAuth::new(PushAuthSettings {
                    audience: audience.clone(),
                    service_account: service_account.clone(),
                    jwks_url: serve.pubsub_jwks_url.clone(),
                })
                .map_err(|e| anyhow::anyhow!("TRAINSCALER_PUBSUB_AUDIENCE: {e}"))?,
            ),
            (None, None) => None,
            _ => anyhow::bail!(
                "TRAINSCALER_PUBSUB_AUDIENCE and TRAINSCALER_PUBSUB_SERVICE_ACCOUNT go together"
            ),
        };
        let limiter = NonZeroU32::new(serve.ingest_rate_per_sec).map(|rate| {
            let burst = NonZeroU32::new(serve.ingest_burst).unwrap_or(rate);
            DefaultKeyedRateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        let sample_limiter = NonZeroU32::new(serve.ingest_samples_per_sec).map(|rate| {
            (
                DefaultKeyedRateLimiter::keyed(Quota::per_second(rate)),
                rate,
            )
        });
        let sns = SnsVerifier::new(SnsSettings {
            topics: serve
                .sns_topic_arns
                .iter()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect(),
            trusted_url_prefix: serve.sns_trusted_url_prefix.clone(),
        })?;
        Ok(Self {
            verifier,
            webhooks,
            pubsub,
            metrics_public: serve.metrics_public,
            limiter,
            sample_limiter,
            sns,
        })
    }

    pub fn enabled(&self) -> bool {
        self.verifier.is_some()
    }

    /// The SNS envelope checker of `/v1/webhooks/sns`.
    pub fn sns(&self) -> &SnsVerifier {
        &self.sns
    }

    /// Argon2 verifications of legacy keys run so far (0 with authentication off).
    pub fn slow_checks(&self) -> u64 {
        self.verifier.as_ref().map_or(0, KeyVerifier::slow_checks)
    }

    /// Requests let through from memory during a database outage (0 with authentication off).
    pub fn outage_hits(&self) -> u64 {
        self.verifier.as_ref().map_or(0, KeyVerifier::outage_hits)
    }

    /// Drops a revoked key from this replica's cache.
    pub fn forget(&self, id: &str) {
        if let Some(v) = &self.verifier {
            v.forget(id);
        }
    }

    /// Takes one request from the caller's ingestion budget.
    pub fn check_rate(&self, principal: &Principal) -> Result<(), BudgetRefusal> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter
            .check_key(&principal.name)
            .map_err(|not_until| BudgetRefusal::RateLimited {
                retry_after_secs: whole_secs(
                    not_until.wait_time_from(DefaultClock::default().now()),
                ),
            })
    }

    /// Takes `n` samples from the caller's sample budget.
    pub fn check_samples(
        &self,
        principal: Option<&Principal>,
        n: usize,
    ) -> Result<(), BudgetRefusal> {
        let (Some((limiter, rate)), Some(principal)) = (&self.sample_limiter, principal) else {
            return Ok(());
        };
        let Some(n) = u32::try_from(n).ok().and_then(NonZeroU32::new) else {
            return Ok(());
        };
        match limiter.check_key_n(&principal.name, n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(BudgetRefusal::RateLimited {
                retry_after_secs: whole_secs(
                    not_until.wait_time_from(DefaultClock::default().now()),
                ),
            }),
            Err(_) => Err(BudgetRefusal::TooManySamples {
                samples: n.get(),
                per_sec: rate.get(),
            }),
        }
    }
}

/// A wait rounded up to whole seconds, at least one: what `Retry-After` can say.
fn whole_secs(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}
