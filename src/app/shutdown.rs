//! The shutdown signal: SIGTERM or SIGINT.

use std::future::Future;

/// Resolves on SIGINT or SIGTERM.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    // The handlers are installed here, before the future is first polled: a signal that
    // arrives between spawning the waiting task and its first poll is not lost to the default
    // action (which would kill the process without a drain).
    #[cfg(unix)]
    let (terminate, interrupt) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let wait = |s: std::io::Result<tokio::signal::unix::Signal>| async move {
                match s {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(terminate) => {},
                _ = wait(interrupt) => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutting down");
    }
}
