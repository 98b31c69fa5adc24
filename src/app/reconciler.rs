//! Starting and stopping the reconciler with its leader lease (and the AWS event queue poller
//! that runs beside it while this replica leads).

use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use super::state::AppState;
use crate::config::ServeConfig;
use crate::provider::aws::sqs::{Queue, SqsClient};
use crate::provider::registry::Providers;
use crate::reconcile::leader::hold_lease;
use crate::reconcile::{ReconcileSettings, Reconciler, replica_name};

/// The running reconciler and its leader lease.
#[derive(Debug)]
pub struct ReconcilerHandle {
    /// Whether this replica leads right now.
    pub leader: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ReconcilerHandle {
    /// Stops the loop and releases the lease, waiting for both.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }

    /// Polls `queues` for spot and capacity events while this replica leads, until stopped.
    pub fn poll_event_queues(
        &mut self,
        state: &AppState,
        client: Arc<SqsClient>,
        queues: Vec<Queue>,
    ) {
        let run = crate::ingest::event_queue::run(
            state.clone(),
            client,
            queues,
            self.leader.clone(),
            self.stop.subscribe(),
        );
        self.tasks.push(tokio::spawn(run));
    }

    /// Kills the loop and the lease's session without releasing anything, as a crash would.
    pub fn abort(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

/// Starts the leader lease and the reconciler loop in the background.
pub fn start_reconciler(
    state: &AppState,
    serve: &ServeConfig,
    providers: Providers,
) -> ReconcilerHandle {
    start_reconciler_named(state, serve, providers, replica_name())
}

/// [`start_reconciler`] with this replica's name in events given.
pub fn start_reconciler_named(
    state: &AppState,
    serve: &ServeConfig,
    providers: Providers,
    replica: String,
) -> ReconcilerHandle {
    let (stop, stopped) = watch::channel(false);
    let (leader_tx, leader) = watch::channel(false);
    let lease = tokio::spawn(hold_lease(
        state.store.clone(),
        serve.leader_lease(),
        leader_tx,
        stopped.clone(),
    ));
    let reconciler = Reconciler {
        store: state.store.clone(),
        catalog: state.catalog.clone(),
        metrics: state.metrics.clone(),
        providers,
        settings: ReconcileSettings {
            interval: serve.reconcile_interval(),
            lease: serve.leader_lease(),
            replica,
            catalog_refresh: (serve.catalog_refresh_interval_sec > 0)
                .then(|| std::time::Duration::from_secs(serve.catalog_refresh_interval_sec)),
        },
        repeats: Arc::default(),
    };
    let dirty = state.dirty.subscribe();
    let activity = state.activity.subscribe();
    let (merged_tx, merged) = broadcast::channel(1024);
    let forward = forward_both(dirty, activity, merged_tx, stopped.clone());
    let run = tokio::spawn(reconciler.run(leader.clone(), merged, stopped));
    ReconcilerHandle {
        leader,
        stop,
        tasks: vec![run, lease, tokio::spawn(forward)],
    }
}

/// The reconciler hears of dirty pools and of pools that just got work.
async fn forward_both(
    mut dirty: broadcast::Receiver<String>,
    mut activity: broadcast::Receiver<String>,
    out: broadcast::Sender<String>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let next = tokio::select! {
            _ = crate::reconcile::until_true(&mut stopped) => return,
            d = dirty.recv() => d,
            a = activity.recv() => a,
        };
        match next {
            Ok(pool) => {
                let _ = out.send(pool);
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
