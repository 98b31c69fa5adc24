//! Recording parsed spot and capacity notices: the one path every source of cloud events
//! goes through (the events webhook, the SNS route, the SQS poller), so they all deduplicate
//! by event id, wake the reconciler and count the same way. It sits below the HTTP layer
//! because the queue pollers are not requests.

use crate::app::AppState;
use crate::auth::pools::PoolScope;
use crate::ingest::cloud_events;
use crate::metrics::KindLabels;
use crate::store::{NoticeOutcome, Once, StoreError};

/// The most notices one batch (a request body or a queue message) may hold.
pub const MAX_NOTICES: usize = 1_000;

/// Records parsed notices in one transaction, then asks the reconciler to look at each pool
/// that got one and counts them.
pub async fn record(
    state: &AppState,
    parsed: &cloud_events::Parsed,
    now: i64,
    once: Option<Once<'_, Vec<NoticeOutcome>>>,
) -> Result<Vec<NoticeOutcome>, StoreError> {
    record_within(state, parsed, now, once, &PoolScope::every()).await
}

/// [`record`] for a sender that reaches only `pools`: a notice whose worker belongs to
/// another pool fails the whole batch, nothing written.
pub async fn record_within(
    state: &AppState,
    parsed: &cloud_events::Parsed,
    now: i64,
    once: Option<Once<'_, Vec<NoticeOutcome>>>,
    pools: &PoolScope,
) -> Result<Vec<NoticeOutcome>, StoreError> {
    let notices: Vec<_> = parsed.notices.iter().map(|(_, n)| n.clone()).collect();
    let outcomes = state
        .store
        .record_notices_within(&notices, now, once, pools)
        .await?;
    for ((_, notice), outcome) in parsed.notices.iter().zip(&outcomes) {
        if let NoticeOutcome::Recorded { pool } = outcome {
            state.mark_dirty(pool);
            state
                .metrics
                .cloud_events
                .get_or_create(&KindLabels {
                    kind: notice.kind.to_string(),
                })
                .inc();
        }
    }
    Ok(outcomes)
}
