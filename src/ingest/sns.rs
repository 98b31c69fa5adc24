//! Who may deliver through an SNS HTTPS subscription: an envelope is accepted only from an
//! allowed topic (`TRAINSCALER_SNS_TOPIC_ARN`), signed by SNS (the certificate fetched from an
//! SNS host and cached by URL) and at most [`MAX_AGE_MS`] old. A subscription is confirmed by
//! GETting its `SubscribeURL`, which must be on an SNS host too.
//!
//! Anyone may post an envelope (topic ARNs are not secret), and the signature can only be
//! checked after the certificate is fetched, so each new `SigningCertURL` would make the
//! server fetch for an anonymous caller. Fetches of certificates not yet cached therefore go
//! one at a time, at most [`CERT_FETCHES_PER_MINUTE`] a minute (beyond: 503 with
//! `Retry-After`, which SNS retries), and read at most [`MAX_CERT_BYTES`]. Deliveries signed
//! with a cached certificate are never held up by this.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use governor::{DefaultDirectRateLimiter, Quota};

use super::sns_signature::{self, Envelope, SignatureError};
use crate::timefmt::parse_rfc3339_ms;

/// How old an envelope may be: SNS's default HTTP delivery policy retries for well under an
/// hour; an older envelope is a replay.
pub const MAX_AGE_MS: i64 = 3_600_000;
/// How far ahead of our clock an envelope's time may be.
const MAX_SKEW_MS: i64 = 300_000;
/// Certificates kept; SNS rotates them rarely, so a few suffice.
const MAX_CACHED_CERTS: usize = 16;
/// Fetches of certificates not cached yet, a minute: SNS signs with one certificate per region
/// for months, so a legitimate server fetches a handful in its life.
pub const CERT_FETCHES_PER_MINUTE: NonZeroU32 = NonZeroU32::new(6).expect("not zero");
/// SNS's certificates are under 2 KiB; a larger answer is not one.
pub const MAX_CERT_BYTES: usize = 16 * 1024;

/// What the SNS route is configured with.
#[derive(Debug, Clone, Default)]
pub struct SnsSettings {
    /// Topic ARNs whose deliveries are accepted; empty turns the route off.
    pub topics: Vec<String>,
    /// Certificate and SubscribeURL prefix trusted instead of SNS's hosts (tests, mocks).
    pub trusted_url_prefix: Option<String>,
}

/// Why an envelope is refused.
#[derive(Debug, thiserror::Error)]
pub enum SnsError {
    #[error("TopicArn `{0}` is not one this server accepts (TRAINSCALER_SNS_TOPIC_ARN)")]
    Topic(String),
    #[error(transparent)]
    Signature(#[from] SignatureError),
    #[error("Timestamp {0}")]
    Stale(String),
    #[error("cannot fetch {url}: {problem}")]
    Fetch { url: String, problem: String },
    #[error(
        "more than {CERT_FETCHES_PER_MINUTE} new signing certificates asked for in a minute; \
         try again later"
    )]
    TooManyFetches,
}

/// Checks envelopes and confirms subscriptions; cheap to share.
#[derive(Debug)]
pub struct SnsVerifier {
    settings: SnsSettings,
    http: reqwest::Client,
    certs: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    /// Held while a certificate is fetched: one outbound fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    fetch_budget: DefaultDirectRateLimiter,
}

impl SnsVerifier {
    pub fn new(settings: SnsSettings) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(std::time::Duration::from_secs(10))
            .user_agent(concat!("trainscaler/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            settings,
            http,
            certs: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
            fetch_budget: DefaultDirectRateLimiter::direct(Quota::per_minute(
                CERT_FETCHES_PER_MINUTE,
            )),
        })
    }

    pub fn enabled(&self) -> bool {
        !self.settings.topics.is_empty()
    }

    /// Checks topic, age and signature, in that order (the cheap ones first).
    pub async fn check(&self, e: &Envelope, now_ms: i64) -> Result<(), SnsError> {
        if !self.settings.topics.contains(&e.topic_arn) {
            return Err(SnsError::Topic(e.topic_arn.clone()));
        }
        let at = parse_rfc3339_ms(&e.timestamp).map_err(SnsError::Stale)?;
        if now_ms - at > MAX_AGE_MS {
            return Err(SnsError::Stale(format!(
                "{} is more than an hour old: a replay",
                e.timestamp
            )));
        }
        if at - now_ms > MAX_SKEW_MS {
            return Err(SnsError::Stale(format!("{} is in the future", e.timestamp)));
        }
        let cert = self.certificate(&e.signing_cert_url).await?;
        sns_signature::verify(e, &cert)?;
        Ok(())
    }

    /// Confirms a subscription by GETting its SubscribeURL (checked first).
    pub async fn confirm(&self, e: &Envelope) -> Result<(), SnsError> {
        let url = e
            .subscribe_url
            .as_deref()
            .ok_or(SignatureError::Missing("SubscribeURL"))?;
        let url = self.trusted(url)?;
        let fetch = |problem: String| SnsError::Fetch {
            url: url.to_string(),
            problem,
        };
        let response = self
            .http
            .get(url.clone())
            .send()
            .await
            .map_err(|err| fetch(err.to_string()))?;
        if !response.status().is_success() {
            return Err(fetch(format!("HTTP {}", response.status())));
        }
        Ok(())
    }

    fn trusted(&self, url: &str) -> Result<url::Url, SignatureError> {
        sns_signature::trusted_url(url, self.settings.trusted_url_prefix.as_deref())
    }

    async fn certificate(&self, url: &str) -> Result<Arc<Vec<u8>>, SnsError> {
        if let Some(c) = self.cached(url) {
            return Ok(c);
        }
        let parsed = self.trusted(url)?;
        let _one_at_a_time = self.fetching.lock().await;
        // Another delivery may have fetched it while this one waited.
        if let Some(c) = self.cached(url) {
            return Ok(c);
        }
        if self.fetch_budget.check().is_err() {
            return Err(SnsError::TooManyFetches);
        }
        let fetch = |problem: String| SnsError::Fetch {
            url: url.to_string(),
            problem,
        };
        let mut response = self
            .http
            .get(parsed)
            .send()
            .await
            .map_err(|err| fetch(err.to_string()))?;
        if !response.status().is_success() {
            return Err(fetch(format!("HTTP {}", response.status())));
        }
        let too_large = || fetch(format!("the answer is larger than {MAX_CERT_BYTES} bytes"));
        if response
            .content_length()
            .is_some_and(|n| n > MAX_CERT_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut pem = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| fetch(err.to_string()))?
        {
            if pem.len() + chunk.len() > MAX_CERT_BYTES {
                return Err(too_large());
            }
            pem.extend_from_slice(&chunk);
        }
        let pem = Arc::new(pem);
        let mut certs = self.lock();
        if certs.len() >= MAX_CACHED_CERTS {
            certs.clear();
        }
        certs.insert(url.to_string(), pem.clone());
        Ok(pem)
    }

    fn cached(&self, url: &str) -> Option<Arc<Vec<u8>>> {
        self.lock().get(url).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Vec<u8>>>> {
        self.certs.lock().unwrap_or_else(|e| e.into_inner())
    }
}
