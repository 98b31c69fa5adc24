//! A pool decision as every caller makes it (`POST /decide`, the KEDA metrics-api route and
//! the KEDA gRPC scaler): decide under the pool's lock, then tell the rest of the process what
//! happened. One function, so that no caller forgets to wake the reconciler or KEDA's streams.

use super::AppState;
use crate::core::catalog::CatalogSnapshot;
use crate::fleet::pool_decision::{self, PoolDecision};
use crate::store::StoreResult;

impl AppState {
    /// Decides for `pool` now; `None` when there is no such pool. Counts the decision in
    /// `/metrics`, marks the pool for the reconciler when its target moved, and announces
    /// activity to `StreamIsActive` subscribers when the pool went from no workers wanted to
    /// some.
    pub async fn decide_pool(
        &self,
        catalog: &CatalogSnapshot,
        pool: &str,
    ) -> StoreResult<Option<PoolDecision>> {
        let now = self.clock.now_ms();
        let Some(answer) = pool_decision::decide(&self.store, catalog, pool, now).await? else {
            return Ok(None);
        };
        self.metrics.decision("pool", pool, answer.changed);
        if answer.changed {
            self.mark_dirty(pool);
        }
        if answer.activated() {
            self.announce_activity(pool);
        }
        Ok(Some(answer))
    }
}
