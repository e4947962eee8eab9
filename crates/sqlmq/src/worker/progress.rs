//! A running handler's progress ([`JobContext::progress`]): written at most once per
//! [`PROGRESS_INTERVAL`], the latest value of a quicker series written when the interval ends,
//! and forgotten when the message is settled.

use std::time::{Duration, Instant};

use super::context::JobContext;
use crate::domain::{Error, Result, progress_text};
use crate::store::Backend;

/// Least time between two writes of one job's progress: a handler may report as often as it
/// likes, the database sees one write per interval at most.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// One job's progress as the worker holds it.
#[derive(Default)]
pub(crate) struct ProgressState {
    /// When it was last written.
    written: Option<Instant>,
    /// A value reported since, not written yet (its checked JSON text; a write is scheduled
    /// for it).
    pending: Option<String>,
    /// Whether anything was written: its settlement clears it.
    stored: bool,
}

impl<B: Backend> JobContext<B> {
    /// Report how far the handler got: `value` (JSON of at most
    /// [`MAX_PROGRESS`](crate::worker::MAX_PROGRESS) bytes) is kept with the in-flight message
    /// and shown by `sqlmq show`, the HTTP API and the dashboard until the message is settled.
    /// Call it as often as you like: it is written at most once a second (the latest value
    /// when the second ends), so a report costs nothing most of the time. Queue messages only
    /// (elsewhere it is ignored).
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
        let Some(queue) = self.queue() else {
            return Ok(());
        };
        let now = Instant::now();
        {
            let mut p = self.progress_state().lock().expect("poisoned");
            match p.written {
                Some(at) if now.duration_since(at) < PROGRESS_INTERVAL => {
                    // Written within the interval: keep the latest, and write it when the
                    // interval ends (one write scheduled at a time).
                    if p.pending.replace(text.clone()).is_none() {
                        let ctx = self.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep_until((at + PROGRESS_INTERVAL).into()).await;
                            ctx.write_pending().await;
                        });
                    }
                    return Ok(());
                }
                _ => {
                    p.written = Some(now);
                    p.stored = true;
                }
            }
        }
        match queue.write_progress(self.receipt(), &text).await {
            Err(e @ (Error::LeaseLost { .. } | Error::Cancelled { .. })) => Err(e),
            Err(e) => {
                // Progress is for people watching: a failed write is not the handler's
                // failure.
                tracing::debug!(message = %self.id(), "progress not written: {e}");
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// Write the value reported within the last interval, unless the job was settled since.
    async fn write_pending(&self) {
        let text = {
            let mut p = self.progress_state().lock().expect("poisoned");
            let Some(text) = p.pending.take() else { return };
            p.written = Some(Instant::now());
            text
        };
        let (Some(queue), true) = (self.queue(), self.in_hand()) else {
            return;
        };
        if let Err(e) = queue.write_progress(self.receipt(), &text).await {
            tracing::debug!(message = %self.id(), "progress not written: {e}");
        }
    }

    /// Forget the progress once the message is settled, if any was written.
    pub(crate) async fn clear_progress(&self) {
        let stored = {
            let mut p = self.progress_state().lock().expect("poisoned");
            p.pending = None;
            std::mem::take(&mut p.stored)
        };
        if let (true, Some(queue)) = (stored, self.queue())
            && let Err(e) = queue.clear_progress(self.id()).await
        {
            // Housekeeping removes what is left over.
            tracing::debug!(message = %self.id(), "progress not cleared: {e}");
        }
    }
}
