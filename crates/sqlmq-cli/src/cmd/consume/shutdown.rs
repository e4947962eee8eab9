//! Turning SIGTERM/SIGINT into the worker's stop and kill tokens.

use anyhow::{Context, Result};
use sqlmq::worker::CancellationToken;
use tokio::signal::unix::{SignalKind, signal};

/// The two stages of a shutdown.
pub struct Signals {
    /// Cancelled by the first SIGTERM/SIGINT: claim nothing more, let running commands finish
    /// within the grace period.
    pub stop: CancellationToken,
    /// Cancelled by the second: kill running commands now.
    pub kill: CancellationToken,
}

/// Install the handlers now (so that a signal arriving during start-up is not fatal) and return
/// the tokens; a background task cancels them on the first and the second signal.
pub fn listen() -> Result<Signals> {
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let signals = Signals {
        stop: CancellationToken::new(),
        kill: CancellationToken::new(),
    };
    let (stop, kill) = (signals.stop.clone(), signals.kill.clone());
    tokio::spawn(async move {
        for (i, token) in [stop, kill].into_iter().enumerate() {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            if i == 0 {
                eprintln!(
                    "shutting down: no new messages, waiting for running commands \
                     (signal again to kill them now)"
                );
            }
            token.cancel();
        }
        // Keep the handlers installed: further signals are ignored rather than fatal.
        std::future::pending::<()>().await;
    });
    Ok(signals)
}
