//! A cache of temporary credentials. They are fetched on first use, reused until a margin
//! before they expire, then fetched again by one caller while the others wait for it. When a
//! refresh fails while the old credentials are still valid, the old ones keep serving (the
//! endpoint may be briefly down) and the error is logged; once they have expired the error is
//! returned.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Clock;
use crate::provider::ProviderResult;

/// Fetch new credentials this long before the cached ones expire: room for a slow endpoint
/// and for clock skew between us and the cloud.
pub const REFRESH_MARGIN_MS: i64 = 5 * 60_000;

/// Credentials and when they stop working (`None`: long-lived, never refreshed).
#[derive(Debug, Clone)]
pub struct Expiring<T> {
    pub value: T,
    pub expires_at_ms: Option<i64>,
}

struct Entry<T> {
    value: T,
    expires_at_ms: Option<i64>,
    refresh_at_ms: Option<i64>,
}

pub struct CredentialCache<T> {
    clock: Clock,
    cached: Mutex<Option<Entry<T>>>,
    /// Held while credentials are fetched, so that concurrent callers wait for one fetch.
    refreshing: tokio::sync::Mutex<()>,
    fetches: AtomicU64,
}

impl<T: Clone> std::fmt::Debug for CredentialCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialCache")
            .field("expires_at_ms", &self.expires_at_ms())
            .field("fetches", &self.fetches())
            .finish_non_exhaustive()
    }
}

impl<T: Clone> CredentialCache<T> {
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            cached: Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
            fetches: AtomicU64::new(0),
        }
    }

    /// Cached credentials that need no refresh yet, else the result of `fetch`.
    pub async fn get<F, Fut>(&self, fetch: F) -> ProviderResult<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ProviderResult<Expiring<T>>>,
    {
        if let Some(v) = self.fresh() {
            return Ok(v);
        }
        let _one_at_a_time = self.refreshing.lock().await;
        // Another caller may have fetched them while this one waited.
        if let Some(v) = self.fresh() {
            return Ok(v);
        }
        self.fetches.fetch_add(1, Ordering::SeqCst);
        match fetch().await {
            Ok(got) => {
                let now = (self.clock)();
                // Credentials that live shorter than twice the margin are refreshed halfway.
                let refresh_at_ms = got.expires_at_ms.map(|exp| {
                    let left = exp.saturating_sub(now).max(0);
                    exp.saturating_sub(REFRESH_MARGIN_MS.min(left / 2))
                });
                let value = got.value.clone();
                *self.lock() = Some(Entry {
                    value: got.value,
                    expires_at_ms: got.expires_at_ms,
                    refresh_at_ms,
                });
                Ok(value)
            }
            Err(e) => match self.unexpired() {
                Some(v) => {
                    tracing::warn!(error = %e, "cannot refresh cloud credentials; using the current ones until they expire");
                    Ok(v)
                }
                None => Err(e),
            },
        }
    }

    /// When the cached credentials expire; `None` when none are cached or they never expire.
    pub fn expires_at_ms(&self) -> Option<i64> {
        self.lock().as_ref().and_then(|e| e.expires_at_ms)
    }

    /// Fetches made so far (failed ones included).
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::SeqCst)
    }

    /// Forgets the cached credentials (the cloud refused them), so the next call fetches.
    pub fn invalidate(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Entry<T>>> {
        // A poisoned lock only means another thread panicked mid-update; the value is whole.
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fresh(&self) -> Option<T> {
        let now = (self.clock)();
        self.lock()
            .as_ref()
            .filter(|e| e.refresh_at_ms.is_none_or(|at| now < at))
            .map(|e| e.value.clone())
    }

    fn unexpired(&self) -> Option<T> {
        let now = (self.clock)();
        self.lock()
            .as_ref()
            .filter(|e| e.expires_at_ms.is_none_or(|at| now < at))
            .map(|e| e.value.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProviderError;
    use std::sync::Arc;
    use std::sync::atomic::AtomicI64;

    fn clock_at(now: &Arc<AtomicI64>) -> Clock {
        let now = now.clone();
        Arc::new(move || now.load(Ordering::SeqCst))
    }

    async fn ok(value: &str, expires_at_ms: i64) -> ProviderResult<Expiring<String>> {
        Ok(Expiring {
            value: value.to_string(),
            expires_at_ms: Some(expires_at_ms),
        })
    }

    #[tokio::test]
    async fn credentials_are_reused_until_five_minutes_before_they_expire() {
        let now = Arc::new(AtomicI64::new(0));
        let cache = CredentialCache::new(clock_at(&now));
        let hour = 3_600_000;
        assert_eq!(cache.get(|| ok("first", hour)).await.unwrap(), "first");
        now.store(hour - REFRESH_MARGIN_MS - 1, Ordering::SeqCst);
        assert_eq!(cache.get(|| ok("second", 2 * hour)).await.unwrap(), "first");
        assert_eq!(cache.fetches(), 1);
        now.store(hour - REFRESH_MARGIN_MS, Ordering::SeqCst);
        assert_eq!(
            cache.get(|| ok("second", 2 * hour)).await.unwrap(),
            "second"
        );
        assert_eq!(cache.fetches(), 2);
        assert_eq!(cache.expires_at_ms(), Some(2 * hour));
    }

    #[tokio::test]
    async fn short_lived_credentials_are_refreshed_halfway() {
        let now = Arc::new(AtomicI64::new(0));
        let cache = CredentialCache::new(clock_at(&now));
        cache.get(|| ok("a", 120_000)).await.unwrap();
        now.store(59_999, Ordering::SeqCst);
        assert_eq!(cache.get(|| ok("b", 240_000)).await.unwrap(), "a");
        now.store(60_000, Ordering::SeqCst);
        assert_eq!(cache.get(|| ok("b", 240_000)).await.unwrap(), "b");
    }

    #[tokio::test]
    async fn a_failed_refresh_keeps_unexpired_credentials_and_fails_once_they_expired() {
        let now = Arc::new(AtomicI64::new(0));
        let cache = CredentialCache::new(clock_at(&now));
        cache.get(|| ok("a", 3_600_000)).await.unwrap();
        let fail = || async { Err(ProviderError::Unauthorized("down".into())) };
        now.store(3_500_000, Ordering::SeqCst);
        assert_eq!(cache.get(fail).await.unwrap(), "a");
        now.store(3_600_000, Ordering::SeqCst);
        let e = cache.get(fail).await.unwrap_err();
        assert!(matches!(e, ProviderError::Unauthorized(_)), "{e:?}");
    }

    #[tokio::test]
    async fn credentials_without_an_expiry_are_fetched_once() {
        let cache = CredentialCache::new(Arc::new(|| i64::MAX - 1));
        let never = || async {
            Ok(Expiring {
                value: 1,
                expires_at_ms: None,
            })
        };
        cache.get(never).await.unwrap();
        cache.get(never).await.unwrap();
        assert_eq!(cache.fetches(), 1);
        cache.invalidate();
        cache.get(never).await.unwrap();
        assert_eq!(cache.fetches(), 2);
    }
}
