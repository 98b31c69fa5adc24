//! Pools as the service runs them: one decision for a pool (read under the pool's lock, the
//! pure core in the middle, the outcome written back) and the fleet view that dashboards,
//! `/metrics` and the fleet page read. The API, the KEDA scaler and the reconciler share these.

pub mod pool_decision;
pub mod signals;
pub mod view;
