//! The shutdown protocol: who signals, who waits, and how completion is proven.
//!
//! 1. **Who signals**: whoever holds the token given to [`WorkerBuilder::run`] (see
//!    [`shutdown_on_signals`](super::shutdown_on_signals) for SIGTERM and Ctrl-C), or a
//!    consumer that met an error retrying cannot fix, which cancels the worker's own token
//!    (and so does the prober when a source was deleted, or its id went to another one).
//!    Consumers that drained their queue or spent the message budget stop on their own; once
//!    all have, the worker stops as if signalled.
//! 2. **Stop claiming**: every claim loop checks the token before each claim and wakes from
//!    its waits when it is cancelled. By the slot rule no message is claimed without having been
//!    started, so nothing claimed is left waiting.
//! 3. **Drain**: in-flight handlers run on, leases still extended, for up to the grace period;
//!    then the `kill` signal stops the rest, and each of their messages is released (nack with
//!    no delay) for another worker to take at once.
//! 4. **Flush acks**: when the last job has settled, the runtimes (and their acker handles)
//!    are gone; each acker commits what it has queued and ends; the worker awaits them.
//! 5. **Deregister**: the prober and heartbeat stop; leases this process still holds (none in
//!    a clean run) are released; its process row is deleted.
//!
//! Completion is proven by joining every claim loop, job (through the slots), acker and
//! service task before [`WorkerBuilder::run`] returns.
//!
//! [`WorkerBuilder::run`]: super::WorkerBuilder::run

use crate::domain::{Error, Result};
use crate::store::Backend;

use super::start::Running;
use super::tally::WorkerReport;

impl<B: Backend> Running<B> {
    /// Run until the worker is told to stop, then shut down by the protocol above. A fatal
    /// consumer error is returned after the shutdown, never instead of it.
    pub(super) async fn until_stopped(mut self) -> Result<WorkerReport> {
        // A newer schema (seen by the heartbeat) stopped the claims like a signal; it is
        // reported after the clean shutdown, like a consumer's fatal error.
        let fatal = self.stop_claiming().await;
        let fatal = fatal
            .or_else(|| self.registration.schema.take())
            .or_else(|| self.poll.take_gone());
        self.drain().await;
        // 4. Flush acks: every runtime (and acker handle) went with its jobs and claim loop.
        for acker in std::mem::take(&mut self.ackers) {
            let _ = acker.await;
        }
        self.deregister().await;
        let report = self.tally.report();
        tracing::info!(?report, "worker stopped");
        match fatal {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    /// Steps 1 and 2: wait for the signal (or for every claim loop to end by itself), stop
    /// every claim loop and join them. Returns the first fatal error among them.
    async fn stop_claiming(&mut self) -> Option<Error> {
        let mut finished = Vec::new();
        tokio::select! {
            _ = self.stop.cancelled() => {}
            _ = async {
                while let Some(joined) = self.consumers.join_next().await {
                    finished.push(joined);
                }
            } => {}
        }
        self.stop.cancel();
        tracing::info!("worker stopping: no new claims; draining in-flight handlers");
        let mut fatal = None;
        while let Some(joined) = match finished.pop() {
            Some(joined) => Some(joined),
            None => self.consumers.join_next().await,
        } {
            // A claim loop that panicked is an error to report, after the shutdown: returning
            // now would skip the drain, the ack flush and the deregistration.
            let result = joined
                .unwrap_or_else(|e| Err(Error::Corrupt(format!("consumer task failed: {e}"))));
            fatal = fatal.or(result.err());
        }
        fatal
    }

    /// Step 3: let in-flight handlers finish within the grace period (leases still extended),
    /// then stop the rest: each stopped handler's message is released.
    async fn drain(&self) {
        let grace = async {
            tokio::select! {
                _ = tokio::time::sleep(self.grace) => {}
                _ = self.kill_early.cancelled() => {}
            }
        };
        let drained = async {
            for slots in &self.slots {
                slots.all_done().await;
            }
        };
        tokio::pin!(drained);
        tokio::select! {
            _ = &mut drained => {}
            _ = grace => {
                tracing::warn!("shutdown grace period over: stopping the handlers still running");
                let _ = self.kill.send(true);
                drained.await;
            }
        }
    }

    /// Step 5: stop the services, release what is still held, remove the process's row.
    async fn deregister(&mut self) {
        self.services.cancel();
        let _ = (&mut self.prober).await;
        let _ = (&mut self.heartbeat).await;
        if let Some(scheduler) = &mut self.scheduler {
            let _ = scheduler.await;
        }
        match self.registration.deregister().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(released = n, "released leases still held at exit"),
            Err(e) => tracing::warn!("deregistration failed (peers will release our claims): {e}"),
        }
    }
}
