//! Retries of throttled calls with exponential backoff and jitter (the `backon` crate), as the
//! AWS and Alibaba Cloud guides ask of clients. Only [`ProviderError::is_retryable`] errors
//! are retried; the last error is returned when the attempts run out.

use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use super::{ProviderError, ProviderResult};

/// How hard to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: usize,
    pub min_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// Runs `call` until it succeeds, fails for good, or the retries run out.
    pub async fn run<T, F, Fut>(&self, call: F) -> ProviderResult<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ProviderResult<T>>,
    {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_retries)
            .with_jitter();
        call.retry(backoff)
            .sleep(tokio::time::sleep)
            .when(ProviderError::is_retryable)
            .notify(
                |e, after| tracing::warn!(error = %e, ?after, "provider call throttled, retrying"),
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn quick(max_retries: usize) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        }
    }

    #[tokio::test]
    async fn throttling_is_retried_until_it_passes() {
        let calls = AtomicUsize::new(0);
        let out = quick(4)
            .run(|| async {
                if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                    Err(ProviderError::Throttled("Rate exceeded".into()))
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(out, Ok(7));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn other_errors_are_not_retried_and_retries_run_out() {
        let calls = AtomicUsize::new(0);
        let out: ProviderResult<()> = quick(4)
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(ProviderError::InvalidRequest("bad".into()))
            })
            .await;
        assert!(matches!(out, Err(ProviderError::InvalidRequest(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = AtomicUsize::new(0);
        let out: ProviderResult<()> = quick(2)
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(ProviderError::Throttled("slow down".into()))
            })
            .await;
        assert!(matches!(out, Err(ProviderError::Throttled(_))));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "first attempt and two retries"
        );
    }
}
