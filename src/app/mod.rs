//! Wiring: the shared [`AppState`], start-up (connect, migrate, seed the bundled catalog, load
//! the snapshot, follow changes), the background loops, the reconciler's start and stop, and
//! the server loop with graceful shutdown. Each job has its own module; the items are
//! re-exported here, where the rest of the crate and the tests name them.

mod background;
pub mod clock;
mod decide_pool;
pub mod providers;
pub mod reconciler;
pub mod serve;
pub mod shutdown;
pub mod startup;
pub mod state;

pub use clock::Clock;
pub use providers::{event_queues, event_queues_from_env, metered, providers_from_env};
pub use reconciler::{ReconcilerHandle, start_reconciler, start_reconciler_named};
pub use serve::serve;
pub use shutdown::shutdown_signal;
pub use startup::{open_store, prepare, seed_bundled_catalog};
pub use state::{AppState, IngestBodyLimits, Shared};
