//! Operating a queue: pause, cancel, purge, stats, dead letters, maintenance.

use super::Queue;
use crate::client::Subject;
use crate::domain::{
    CANCELLED_BY_REQUEST, Cancelled, DeadLetter, Error, MaintenanceReport, MessageId, Progress,
    QueueStats, Receipt, Result, progress_text,
};
use crate::store::Backend;
use crate::store::rows::PurgeScope;
use crate::tx;

/// Rows moved per maintenance transaction: small enough to keep transactions short.
const MAINTENANCE_BATCH: usize = 500;
/// Rows deleted per purge transaction (never one huge DELETE).
const PURGE_BATCH: usize = 1000;

impl<B: Backend> Queue<B> {
    /// Stop handing out messages (`receive` returns nothing) until [`Queue::resume`]. Sends are
    /// still accepted; claims in flight are unaffected. Takes effect at once for every consumer.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// q.pause().await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause(&self) -> Result<()> {
        self.set_paused(true).await
    }

    /// Hand out messages again after [`Queue::pause`].
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// q.resume().await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume(&self) -> Result<()> {
        self.set_paused(false).await?;
        self.client.notify_local(Subject::Queue(self.id()));
        Ok(())
    }

    async fn set_paused(&self, paused: bool) -> Result<()> {
        let mut conn = self.conns().acquire().await?;
        if self
            .store()
            .set_paused(&mut conn, self.name(), paused)
            .await?
        {
            Ok(())
        } else {
            Err(Error::UnknownQueue(self.name().to_owned()))
        }
    }

    /// Cancel a message in any state. A waiting one (ready, delayed, blocked behind its key,
    /// or dead) is removed: [`Cancelled::Removed`]. One a consumer holds is cancelled where it
    /// runs ([`Cancelled::Running`]): a worker's handler sees
    /// [`JobContext::cancelled`](crate::JobContext::cancelled) fire within a second (at once
    /// with notifications or in this process), every settlement of its receipt fails with
    /// [`Error::Cancelled`], and the message is removed when its handler ends or its lease
    /// would have ended — never delivered again; its ordering key and concurrency slot stay
    /// held until then. Cancelling it again is harmless. [`Error::MessageNotFound`] when it is
    /// not in this queue.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// q.cancel(id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, id: MessageId) -> Result<Cancelled> {
        self.client.require_schema()?;
        let store = self.store();
        let cancelled = tx::run(self.conns(), "cancel", |conn, _| {
            Box::pin(store.cancel(conn, self.id(), id, CANCELLED_BY_REQUEST))
        })
        .await?;
        if cancelled == Cancelled::Running {
            self.client.notify_cancel(self.id());
        }
        Ok(cancelled)
    }

    /// End the cancel of `receipt` now (its handler gave up): the message is removed, its key
    /// and slot move on. False when it had ended already.
    pub(crate) async fn end_cancel(&self, receipt: Receipt) -> Result<bool> {
        let store = self.store();
        tx::run(self.conns(), "end_cancel", |conn, _| {
            Box::pin(store.end_cancel(conn, self.id(), receipt))
        })
        .await
    }

    /// The progress the handler of in-flight message `id` reported last, while its delivery
    /// holds the lease (`None` otherwise: not reported, or the message is not in flight).
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// if let Some(p) = q.progress(id).await? { println!("{}", p.value) }
    /// # Ok(()) }
    /// ```
    pub async fn progress(&self, id: MessageId) -> Result<Option<Progress>> {
        self.client.require_schema()?;
        let mut conn = self.conns().read().await?;
        match self.store().progress_of(&mut conn, id).await? {
            Some((value, at)) => Progress::decode(id, &value, at).map(Some),
            None => Ok(None),
        }
    }

    /// The progress of up to `limit` of this queue's in-flight messages, by id.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// for p in q.progress_all(100).await? { println!("{}: {}", p.id, p.value) }
    /// # Ok(()) }
    /// ```
    pub async fn progress_all(&self, limit: usize) -> Result<Vec<Progress>> {
        self.client.require_schema()?;
        let mut conn = self.conns().read().await?;
        let rows = self
            .store()
            .queue_progress(&mut conn, self.id(), limit)
            .await?;
        rows.iter()
            .map(|(id, value, at)| Progress::decode(*id, value, *at))
            .collect()
    }

    /// Store `value` as the progress of `receipt`'s delivery: kept until the delivery ends,
    /// and shown by [`Queue::progress`], `sqlmq show`, the HTTP API and the dashboard. A
    /// worker's handler calls [`JobContext::progress`](crate::JobContext::progress), which
    /// limits how often it is written; this writes every call. JSON of at most
    /// [`MAX_PROGRESS`](crate::worker::MAX_PROGRESS) bytes; [`Error::LeaseLost`] (or
    /// [`Error::Cancelled`]) when the receipt no longer holds the lease.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// q.set_progress(d.receipt(), &serde_json::json!({"done": 40, "of": 100})).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_progress(&self, receipt: Receipt, value: &serde_json::Value) -> Result<()> {
        self.client.require_schema()?;
        self.write_progress(receipt, &progress_text(value)?).await
    }

    /// Store a checked progress text (`progress_text`) for `receipt`'s delivery.
    pub(crate) async fn write_progress(&self, receipt: Receipt, text: &str) -> Result<()> {
        let store = self.store();
        let held = tx::run(self.conns(), "progress", |conn, _| {
            Box::pin(store.set_progress(conn, receipt, text.as_bytes()))
        })
        .await?;
        if held {
            return Ok(());
        }
        let lost = Err(Error::LeaseLost {
            id: receipt.id,
            token: receipt.token,
        });
        self.consumer().explained(lost).await
    }

    /// Forget the progress of `id` (its delivery ended).
    pub(crate) async fn clear_progress(&self, id: MessageId) -> Result<()> {
        let store = self.store();
        tx::run(self.conns(), "clear_progress", |conn, _| {
            Box::pin(store.clear_progress(conn, id))
        })
        .await
    }

    /// The receipts of this queue's messages cancelled in flight (a plain read).
    pub(crate) async fn cancelled_receipts(&self) -> Result<Vec<Receipt>> {
        let mut conn = self.conns().read().await?;
        self.store().cancelled_receipts(&mut conn, self.id()).await
    }

    /// Delete every message of the queue except dead letters, in-flight ones included (their
    /// consumers' acks will fail with `LeaseLost`), in batches of small transactions. Messages
    /// sent while the purge runs may or may not be deleted. Returns how many were deleted.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let n = q.purge().await?;
    /// # Ok(()) }
    /// ```
    pub async fn purge(&self) -> Result<u64> {
        let removed = self.purge_scope(PurgeScope::Live).await?;
        self.repair_after_purge().await?;
        Ok(removed)
    }

    /// Keys whose head was purged move on to their next message or disappear; the dependants
    /// of purged messages are cancelled, and batches count their purged members cancelled.
    async fn repair_after_purge(&self) -> Result<()> {
        let store = self.store();
        loop {
            let repaired = tx::run(self.conns(), "repair_keys", |conn, _| {
                Box::pin(store.repair_keys(conn, self.id()))
            })
            .await?;
            if repaired == 0 {
                return Ok(());
            }
        }
    }

    /// Delete every dead letter of the queue. Returns how many.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// q.purge_dead_letters().await?;
    /// # Ok(()) }
    /// ```
    pub async fn purge_dead_letters(&self) -> Result<u64> {
        let removed = self.purge_scope(PurgeScope::Dead).await?;
        self.repair_after_purge().await?;
        Ok(removed)
    }

    async fn purge_scope(&self, scope: PurgeScope) -> Result<u64> {
        self.client.require_schema()?;
        let store = self.store();
        let mut total = 0;
        loop {
            let n = tx::run(self.conns(), "purge", |conn, _| {
                Box::pin(store.purge_batch(conn, self.id(), scope, PURGE_BATCH))
            })
            .await?;
            total += n as u64;
            if n == 0 {
                return Ok(total);
            }
        }
    }

    /// Counts of this queue's messages by state.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let s = q.stats().await?;
    /// println!("{} ready, oldest {:?}", s.ready, s.oldest_ready_age());
    /// # Ok(()) }
    /// ```
    pub async fn stats(&self) -> Result<QueueStats> {
        let all = self.client.queue_stats().await?;
        all.into_iter()
            .find(|s| s.name == self.name())
            .ok_or_else(|| Error::UnknownQueue(self.name().to_owned()))
    }

    /// The oldest `limit` dead letters, with their error history.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// for d in q.dead_letters(50).await? { println!("{} {:?}", d.id, d.errors.last()) }
    /// # Ok(()) }
    /// ```
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>> {
        self.client.require_schema()?;
        let mut conn = self.conns().read().await?;
        self.store()
            .dead_letters(&mut conn, self.id(), limit.min(10_000))
            .await
    }

    /// Put the given dead letters back into the queue, attempts reset. Returns the ids
    /// redriven (ids that are not dead letters of this queue are ignored).
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// q.redrive(&[id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn redrive(&self, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        self.client.require_schema()?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let store = self.store();
        let redriven = tx::run(self.conns(), "redrive", |conn, _| {
            Box::pin(store.redrive(conn, self.id(), Some(ids), 0))
        })
        .await?;
        self.client.notify_local(Subject::Queue(self.id()));
        Ok(redriven)
    }

    /// Put every dead letter back into the queue, in small transactions. Returns how many.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let n = q.redrive_all().await?;
    /// # Ok(()) }
    /// ```
    pub async fn redrive_all(&self) -> Result<u64> {
        self.client.require_schema()?;
        let store = self.store();
        let mut total = 0;
        loop {
            let done = tx::run(self.conns(), "redrive", |conn, _| {
                Box::pin(store.redrive(conn, self.id(), None, MAINTENANCE_BATCH))
            })
            .await?;
            total += done.len() as u64;
            if done.len() < MAINTENANCE_BATCH {
                self.client.notify_local(Subject::Queue(self.id()));
                return Ok(total);
            }
        }
    }

    /// Promote due delayed messages and release expired leases now. `receive` does this on its
    /// own at most every housekeeping interval; a maintenance service calls it on a timer.
    /// Harmless when run by many processes at once.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// q.maintain().await?;
    /// # Ok(()) }
    /// ```
    pub async fn maintain(&self) -> Result<MaintenanceReport> {
        self.client.require_schema()?;
        let store = self.store();
        let mut report = MaintenanceReport::default();
        loop {
            // A plain read first: an idle queue costs one cheap query, no transaction.
            let mut conn = self.conns().read().await?;
            if !store.any_due(&mut conn, self.id()).await? {
                break;
            }
            drop(conn);
            let promoted = tx::run(self.conns(), "promote", |conn, _| {
                Box::pin(store.promote_due(conn, self.id(), MAINTENANCE_BATCH))
            })
            .await?;
            report.promoted += promoted;
            if promoted < MAINTENANCE_BATCH {
                break;
            }
        }
        loop {
            let mut conn = self.conns().read().await?;
            if !store.any_expired(&mut conn, self.id()).await? {
                break;
            }
            drop(conn);
            let expired = self.consumer().release_expired(MAINTENANCE_BATCH).await?;
            report.released += expired.released;
            report.dead_lettered += expired.dead_lettered;
            if expired.released + expired.dead_lettered < MAINTENANCE_BATCH {
                break;
            }
        }
        report.cancelled = self.end_ended_cancels().await?;
        Ok(report)
    }

    /// Run [`Queue::maintain`] if this client has not done so for this queue within the
    /// housekeeping interval.
    pub(crate) async fn housekeeping_if_due(&self) -> Result<()> {
        let interval = self.client.inner.settings.housekeeping_interval;
        if !self.client.due(Subject::Queue(self.id()), interval) {
            return Ok(());
        }
        self.maintain().await?;
        self.client.prune_dedup_if_due().await?;
        // A plain read first: nearly always nothing is left over.
        let store = self.store();
        let mut conn = self.conns().read().await?;
        let stale = store
            .stale_progress(&mut conn, self.id(), MAINTENANCE_BATCH)
            .await?;
        drop(conn);
        if !stale.is_empty() {
            tx::run(self.conns(), "prune_progress", |conn, _| {
                Box::pin(store.delete_progress(conn, &stale))
            })
            .await?;
        }
        Ok(())
    }

    /// End the cancels of in-flight messages whose leases have ended: their handlers ignored
    /// the cancel, or died. Returns how many.
    async fn end_ended_cancels(&self) -> Result<usize> {
        let store = self.store();
        let mut total = 0;
        loop {
            let mut conn = self.conns().read().await?;
            if !store.any_ended_cancel(&mut conn, self.id()).await? {
                return Ok(total);
            }
            drop(conn);
            let ended = tx::run(self.conns(), "end_cancels", |conn, _| {
                Box::pin(store.end_ended_cancels(conn, self.id(), MAINTENANCE_BATCH))
            })
            .await?;
            total += ended;
            if ended < MAINTENANCE_BATCH {
                return Ok(total);
            }
        }
    }
}
