//! Operating a group: dead letters, waiting retries, reset, replay, maintenance and
//! consume-timeout alerts.

use std::collections::HashSet;

use super::group::Group;
use super::position::offsets_at;
use crate::domain::GroupMaintenance;
use crate::domain::PendingRetry;
use crate::domain::{DeadLetter, MessageId};
use crate::domain::{Error, Result};
use crate::domain::{GroupMode, StartAt};
use crate::store::Backend;
use crate::tx;

/// Records replayed per transaction.
const REPLAY_CHUNK: i64 = 1000;
/// Leases released per transaction.
const RELEASE_BATCH: usize = 500;

impl<B: Backend> Group<B> {
    /// The oldest `limit` dead letters, with their error histories.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// for d in g.dead_letters(100).await? { println!("{} offset {:?}: {:?}", d.id, d.offset, d.errors.last()) }
    /// # Ok(()) }
    /// ```
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>> {
        self.topic.client.require_schema()?;
        let mut conn = self.topic.client.conns().read().await?;
        self.topic
            .client
            .inner
            .db
            .store
            .group_dead_letters(&mut conn, self.topic.id(), self.id(), limit.min(10_000))
            .await
    }

    /// Redrive dead letters: each is delivered again at once, with fresh attempts. Returns the
    /// ids that were dead (others are ignored).
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// g.redrive(&[id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn redrive(&self, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        self.require_cluster()?;
        self.topic.client.require_schema()?;
        let store = self.topic.client.store();
        let group_id = self.id();
        let mut out = Vec::new();
        for chunk in ids.chunks(1000) {
            out.extend(
                tx::run(self.topic.client.conns(), "group_redrive", |conn, _| {
                    Box::pin(store.redrive_group(conn, group_id, chunk))
                })
                .await?,
            );
        }
        self.wake();
        Ok(out)
    }

    /// Redrive every dead letter (in transactions of 1 000). Returns how many.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// println!("{} redriven", g.redrive_all().await?);
    /// # Ok(()) }
    /// ```
    pub async fn redrive_all(&self) -> Result<u64> {
        self.require_cluster()?;
        self.topic.client.require_schema()?;
        let store = self.topic.client.store();
        let group_id = self.id();
        let mut total = 0;
        loop {
            let n = tx::run(self.topic.client.conns(), "group_redrive", |conn, _| {
                Box::pin(async move {
                    let ids = store.oldest_group_dead(conn, group_id, 1000).await?;
                    Ok(store.redrive_group(conn, group_id, &ids).await?.len())
                })
            })
            .await?;
            total += n as u64;
            if n < 1000 {
                break;
            }
        }
        self.wake();
        Ok(total)
    }

    /// Delete every dead letter of the group (in transactions of 1 000). Returns how many.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// g.purge_dead_letters().await?;
    /// # Ok(()) }
    /// ```
    pub async fn purge_dead_letters(&self) -> Result<u64> {
        self.topic.client.require_schema()?;
        let store = self.topic.client.store();
        let group_id = self.id();
        let mut total = 0;
        loop {
            let n = tx::run(self.topic.client.conns(), "group_purge_dead", |conn, _| {
                Box::pin(async move {
                    let ids = store.oldest_group_dead(conn, group_id, 1000).await?;
                    store.delete_group_dead(conn, group_id, &ids).await?;
                    Ok(ids.len())
                })
            })
            .await?;
            total += n as u64;
            if n < 1000 {
                return Ok(total);
            }
        }
    }

    /// The first `limit` records waiting for their next attempt, soonest first.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// for r in g.retries(10).await? { println!("{} due {:?}", r.id, r.run_at) }
    /// # Ok(()) }
    /// ```
    pub async fn retries(&self, limit: usize) -> Result<Vec<PendingRetry>> {
        self.topic.client.require_schema()?;
        let mut conn = self.topic.client.conns().read().await?;
        self.topic
            .client
            .inner
            .db
            .store
            .group_retries(&mut conn, self.id(), limit.min(10_000))
            .await
    }

    /// Make waiting retries due now (Sidekiq's "retry now"), instead of at their ladder step.
    /// Returns how many were waiting.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// g.retry_now(&[id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn retry_now(&self, ids: &[MessageId]) -> Result<u64> {
        self.topic.client.require_schema()?;
        let store = self.topic.client.store();
        let group_id = self.id();
        let n = tx::run(self.topic.client.conns(), "group_retry_now", |conn, _| {
            Box::pin(store.retry_now(conn, group_id, ids))
        })
        .await?;
        self.wake();
        Ok(n)
    }

    /// Move the group's position in every partition to `start` (records in flight or waiting
    /// to retry are not affected). A cluster group then hands out records from there, again if
    /// they were consumed before; a broadcast group's checkpoints are dropped, so that members
    /// that (re)start read from there. Returns the new position of each partition.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    /// g.reset(sqlmq::topic::StartAt::Time(an_hour_ago)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn reset(&self, start: StartAt) -> Result<Vec<(u32, i64)>> {
        self.topic.client.require_schema()?;
        let store = self.topic.client.store();
        let row = &self.inner.row;
        let broadcast = row.config.mode == GroupMode::Broadcast;
        let moved = tx::run(self.topic.client.conns(), "group_reset", |conn, _| {
            Box::pin(async move {
                let moved =
                    super::position::move_cursors::<B>(store, conn, row.topic_id, row.id, start)
                        .await?;
                if broadcast {
                    store.delete_positions(conn, row.id, None).await?;
                }
                Ok(moved)
            })
        })
        .await?;
        tracing::info!(group = self.label(), ?start, "group reset");
        self.wake();
        Ok(moved.into_iter().map(|(p, o)| (p as u32, o)).collect())
    }

    /// Deliver the records between `from` (inclusive) and `to` (exclusive) again, in every
    /// partition; records the group has not been handed yet are left to come in their turn.
    /// Returns how many were queued for delivery. Cluster groups only.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// use std::time::{Duration, SystemTime};
    /// let now = SystemTime::now();
    /// g.replay(sqlmq::topic::StartAt::Time(now - Duration::from_secs(600)), sqlmq::topic::StartAt::Time(now)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replay(&self, from: StartAt, to: StartAt) -> Result<u64> {
        self.require_cluster()?;
        self.topic.client.require_schema()?;
        let store = self.topic.client.store();
        let (starts, ends, cursors) = {
            let mut conn = self.topic.client.conns().read().await?;
            let topic_id = self.topic.id();
            (
                offsets_at::<B>(store, &mut conn, topic_id, from).await?,
                offsets_at::<B>(store, &mut conn, topic_id, to).await?,
                store.cursors(&mut conn, self.id()).await?,
            )
        };
        let mut total = 0;
        for ((p, a), (_, b)) in starts.into_iter().zip(ends) {
            let cursor = cursors.iter().find(|c| c.0 == p).map_or(0, |c| c.1);
            total += self.replay_offsets(p, a, b.min(cursor)).await?;
        }
        Ok(total)
    }

    /// Deliver offsets `range` of one partition again (see [`Group::replay`]).
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// g.replay_partition(0, 100..200).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replay_partition(
        &self,
        partition: u32,
        range: std::ops::Range<i64>,
    ) -> Result<u64> {
        self.require_cluster()?;
        self.topic.client.require_schema()?;
        let cursor = {
            let mut conn = self.topic.client.conns().read().await?;
            let cursors = self
                .topic
                .client
                .inner
                .db
                .store
                .cursors(&mut conn, self.id())
                .await?;
            cursors
                .iter()
                .find(|c| c.0 == partition as i32)
                .map(|c| c.1)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "topic {} has no partition {partition}",
                        self.topic.name()
                    ))
                })?
        };
        self.replay_offsets(partition as i32, range.start, range.end.min(cursor))
            .await
    }

    async fn replay_offsets(&self, partition: i32, from: i64, to: i64) -> Result<u64> {
        let store = self.topic.client.store();
        let (topic_id, group_id) = (self.topic.id(), self.id());
        let mut total = 0;
        let mut at = from.max(0);
        while at < to {
            let end = to.min(at + REPLAY_CHUNK);
            total += tx::run(self.topic.client.conns(), "group_replay", |conn, _| {
                Box::pin(store.replay_range(conn, topic_id, group_id, partition, at..end))
            })
            .await?;
            at = end;
        }
        if total > 0 {
            tracing::info!(
                group = self.label(),
                partition,
                from,
                to,
                total,
                "replay queued"
            );
            self.wake();
        }
        Ok(total)
    }

    /// Maintenance: give offsets to records whose producers' sequencers did not run, release
    /// expired leases, and report records held longer than the consume timeout (gauge
    /// `sqlmq_group_consume_timeouts{group}` and one warning per delivery). `receive` runs it
    /// at most every housekeeping interval; the worker runs it as a service.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// g.maintain().await?;
    /// # Ok(()) }
    /// ```
    pub async fn maintain(&self) -> Result<GroupMaintenance> {
        self.topic.client.require_schema()?;
        // A sequencing failure must not keep expired leases from being released below.
        let sequenced = self.topic.sequence_pending().await.unwrap_or_else(|e| {
            tracing::warn!(
                group = self.label(),
                "sequencing pending records failed: {e}"
            );
            0
        });
        let mut report = GroupMaintenance {
            sequenced,
            ..GroupMaintenance::default()
        };
        if self.config().mode == GroupMode::Broadcast {
            return Ok(report);
        }
        loop {
            let r = self.consumer().release_expired(RELEASE_BATCH).await?;
            let released = r.released + r.dead_lettered;
            report.released += released;
            if released < RELEASE_BATCH {
                break;
            }
        }
        if report.released > 0 {
            self.wake();
        }
        report.consume_timeouts = self.check_consume_timeouts().await?;
        self.topic.retention_if_due().await?;
        Ok(report)
    }

    async fn check_consume_timeouts(&self) -> Result<usize> {
        let Some(limit) = self.config().consume_timeout else {
            return Ok(0);
        };
        let held = {
            let mut conn = self.topic.client.conns().read().await?;
            self.topic
                .client
                .inner
                .db
                .store
                .held_too_long(&mut conn, self.id(), limit)
                .await?
        };
        metrics::gauge!(crate::telemetry::catalogue::GROUP_CONSUME_TIMEOUTS.name(), "group" => self.label())
            .set(held.len() as f64);
        let mut reported = self.inner.reported.lock().expect("poisoned");
        let current: HashSet<_> = held.iter().map(|h| h.receipt).collect();
        reported.retain(|r| current.contains(r));
        for h in &held {
            if reported.insert(h.receipt) {
                tracing::warn!(
                    group = self.label(),
                    id = %h.receipt.id,
                    partition = h.partition,
                    offset = h.offset,
                    member = h.owner.as_deref().unwrap_or("?"),
                    held_s = h.held.as_secs_f64(),
                    timeout_s = limit.as_secs_f64(),
                    "record held longer than the group's consume timeout"
                );
            }
        }
        Ok(held.len())
    }

    /// Wake this process's members of the group's topic.
    pub(crate) fn wake(&self) {
        self.topic
            .client
            .notify_local(crate::client::Subject::Topic(self.topic.id()));
    }
}
