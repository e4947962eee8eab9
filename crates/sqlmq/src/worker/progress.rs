//! A running handler's progress ([`JobContext::progress`]): kept in memory by the call, written
//! by a task of the job's own — at most once per [`PROGRESS_INTERVAL`], the latest value of a
//! quicker series when the interval ends — and forgotten, off the handler's slot, when the
//! message is settled. The handler never waits for the database: a write costs its slot
//! nothing, and the bench's handlers reporting every 100 ms keep their pace
//! (`worker.running.progress`).

use std::time::{Duration, Instant};

use super::context::JobContext;
use crate::domain::{Result, progress_text};
use crate::store::Backend;

/// Least time between two writes of one job's progress: a handler may report as often as it
/// likes, the database sees one write per interval at most.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// One job's progress as the worker holds it.
#[derive(Default)]
pub(crate) struct ProgressState {
    /// When it was last written.
    written: Option<Instant>,
    /// The latest value reported and not written yet (its checked JSON text).
    pending: Option<String>,
    /// Whether the job's writer task runs (one at a time).
    writing: bool,
    /// Whether anything was written: its settlement clears it.
    stored: bool,
}

impl<B: Backend> JobContext<B> {
    /// Report how far the handler got: `value` (JSON of at most
    /// [`MAX_PROGRESS`](crate::worker::MAX_PROGRESS) bytes) is kept with the in-flight message
    /// and shown by `sqlmq show`, the HTTP API and the dashboard until the message is settled.
    /// Call it as often as you like: it never waits for the database — the value is written in
    /// the background, at most once a second (the latest value when the second ends). Fails
    /// only on a value too large. Queue messages only (elsewhere it is ignored).
    ///
    /// ```
    /// # async fn f(ctx: sqlmq::JobContext) -> sqlmq::Result<()> {
    /// for page in 1..=40 {
    ///     // … one page of work …
    ///     ctx.progress(serde_json::json!({"page": page, "of": 40})).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn progress(&self, value: serde_json::Value) -> Result<()> {
        let text = progress_text(&value)?;
        if self.queue().is_none() {
            return Ok(());
        }
        let mut p = self.progress_state().lock().expect("poisoned");
        p.pending = Some(text);
        if !p.writing {
            p.writing = true;
            tokio::spawn(self.clone().progress_writer());
        }
        Ok(())
    }

    /// The job's writer: writes the latest pending value once its interval allows, until none
    /// is pending or the job is settled.
    async fn progress_writer(self) {
        let Some(queue) = self.queue().cloned() else {
            return;
        };
        loop {
            let next = self
                .progress_state()
                .lock()
                .expect("poisoned")
                .written
                .map(|at| at + PROGRESS_INTERVAL);
            if let Some(at) = next {
                tokio::time::sleep_until(at.into()).await;
            }
            let text = {
                let mut p = self.progress_state().lock().expect("poisoned");
                match (p.pending.take(), self.in_hand()) {
                    (Some(text), true) => {
                        p.written = Some(Instant::now());
                        p.stored = true;
                        text
                    }
                    _ => {
                        p.writing = false;
                        return;
                    }
                }
            };
            // Progress is for people watching: a failed write is not the handler's failure
            // (a cancel or a lost lease reaches it by its own way).
            if let Err(e) = queue.write_progress(self.receipt(), &text).await {
                tracing::debug!(message = %self.id(), "progress not written: {e}");
            }
        }
    }

    /// Forget the progress once the message is settled, if any was written: in the background,
    /// so that the job's slot is free at once (a read shows progress only while its delivery
    /// holds the lease, so the row is invisible meanwhile; housekeeping removes what a failed
    /// delete leaves).
    pub(crate) fn clear_progress(&self) {
        let stored = {
            let mut p = self.progress_state().lock().expect("poisoned");
            p.pending = None;
            std::mem::take(&mut p.stored)
        };
        let (true, Some(queue)) = (stored, self.queue().cloned()) else {
            return;
        };
        let id = self.id();
        tokio::spawn(async move {
            if let Err(e) = queue.clear_progress(id).await {
                tracing::debug!(message = %id, "progress not cleared: {e}");
            }
        });
    }
}
