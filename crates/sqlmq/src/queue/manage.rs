//! Operating a queue: pause, cancel, purge, stats, dead letters, maintenance.

use super::Queue;
use crate::client::Subject;
use crate::domain::{DeadLetter, Error, MaintenanceReport, MessageId, QueueStats, Result};
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

    /// Remove a message that is waiting (ready, delayed, blocked behind its key, or dead).
    /// Fails with [`Error::MessageInFlight`] while a consumer holds it and
    /// [`Error::MessageNotFound`] when it is not in this queue.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// q.cancel(id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, id: MessageId) -> Result<()> {
        self.client.require_schema()?;
        let store = self.store();
        tx::run(self.conns(), "cancel", |conn, _| {
            Box::pin(store.cancel(conn, self.id(), id))
        })
        .await
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
        Ok(())
    }
}
