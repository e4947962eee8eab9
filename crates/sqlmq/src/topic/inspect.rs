//! Looking at a topic's records: query by position, key or time, and trace one record through
//! every group.

use std::time::SystemTime;

use super::Topic;
use super::position::offsets_at;
use crate::domain::GroupMode;
use crate::domain::MessageId;
use crate::domain::{Error, Result, json_time_of as rfc};
use crate::domain::{GroupTrace, StartAt, StreamRecord, TopicConfig, Trace, TraceState};
use crate::store::Backend;
use crate::store::rows::HistoryState;

/// The limit of a query, the same on every backend (declared on the default backend's `Topic`
/// so that `Topic::MAX_QUERY` needs no type annotation).
impl Topic {
    /// Most records one query returns: 10 000. A larger `limit` of [`Topic::query_offsets`],
    /// [`Topic::query_key`] or [`Topic::query_time`] is lowered to it; page through more with
    /// `query_offsets`.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// use sqlmq::Topic;
    /// assert_eq!(Topic::MAX_QUERY, 10_000);
    /// let mut next = 0;
    /// loop {
    ///     let page = t.query_offsets(0, next, Topic::MAX_QUERY).await?;
    ///     let Some(last) = page.last() else { break };
    ///     next = last.offset + 1;
    /// }
    /// # Ok(()) }
    /// ```
    pub const MAX_QUERY: usize = 10_000;
}

impl<B: Backend> Topic<B> {
    /// Up to `limit` records of `partition` from `offset` on (at most [`Topic::MAX_QUERY`]).
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let records = t.query_offsets(0, 1000, 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query_offsets(
        &self,
        partition: u32,
        offset: i64,
        limit: usize,
    ) -> Result<Vec<StreamRecord>> {
        self.check_partition(partition)?;
        self.client.require_schema()?;
        let mut conn = self.client.conns().read().await?;
        self.client
            .inner
            .db
            .store
            .read_from(
                &mut conn,
                self.id(),
                partition as i32,
                offset,
                limit.min(Topic::MAX_QUERY),
            )
            .await
    }

    /// Up to `limit` records with `key` (at most [`Topic::MAX_QUERY`]), by partition and offset.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let history = t.query_key("customer-7", 100).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query_key(&self, key: &str, limit: usize) -> Result<Vec<StreamRecord>> {
        self.client.require_schema()?;
        let mut conn = self.client.conns().read().await?;
        self.client
            .inner
            .db
            .store
            .records_by_key(&mut conn, self.id(), key, limit.min(Topic::MAX_QUERY))
            .await
    }

    /// Up to `limit` records (at most [`Topic::MAX_QUERY`]) sequenced in `[from, to)`, oldest
    /// first across partitions.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// use std::time::{Duration, SystemTime};
    /// let now = SystemTime::now();
    /// let last_minute = t.query_time(now - Duration::from_secs(60), now, 1000).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query_time(
        &self,
        from: SystemTime,
        to: SystemTime,
        limit: usize,
    ) -> Result<Vec<StreamRecord>> {
        self.client.require_schema()?;
        let limit = limit.min(Topic::MAX_QUERY);
        let store = self.client.store();
        let mut conn = self.client.conns().read().await?;
        let starts = offsets_at::<B>(store, &mut conn, self.id(), StartAt::Time(from)).await?;
        let mut out = Vec::new();
        for (p, start) in starts {
            let rows = store
                .read_from(&mut conn, self.id(), p, start, limit)
                .await?;
            out.extend(rows.into_iter().take_while(|r| r.sequenced_at < to));
        }
        out.sort_by_key(|r| (r.sequenced_at, r.partition, r.offset));
        out.truncate(limit);
        Ok(out)
    }

    /// Trace one record: where it is (partition, offset) and, in every group of the topic,
    /// its state, attempts and deliveries (member, times, outcome, error). None if the topic
    /// has no such record (never published, or removed by retention).
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// let trace = t.trace(id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn trace(&self, id: MessageId) -> Result<Option<Trace>> {
        self.client.require_schema()?;
        let store = self.client.store();
        let mut conn = self.client.conns().read().await?;
        let record = store.record_by_id(&mut conn, self.id(), id).await?;
        let (partition, offset) = match &record {
            Some(r) => (r.partition, Some(r.offset)),
            None => match B::pending_by_id(store, &mut conn, id).await? {
                Some((topic_id, p)) if topic_id == self.id() => (p as u32, None),
                _ => return Ok(None),
            },
        };
        let groups = store.groups_of_topic(&mut conn, self.id()).await?;
        let cursors = store.cursors_of_topic(&mut conn, self.id()).await?;
        let mut out = Vec::with_capacity(groups.len());
        for g in groups {
            let cursor = cursors
                .iter()
                .find(|c| c.group_id == g.id && c.partition == partition as i32)
                .map_or(0, |c| c.next_offset);
            let mut trace = GroupTrace {
                group: g.name.clone(),
                mode: g.config.mode,
                state: TraceState::NotDelivered,
                attempts: 0,
                events: Vec::new(),
                read_by: Vec::new(),
                dead_for: Vec::new(),
            };
            let Some(offset) = offset else {
                out.push(trace);
                continue;
            };
            if g.config.mode == GroupMode::Broadcast {
                trace.state = TraceState::Broadcast;
                trace.read_by = store
                    .all_positions(&mut conn, g.id)
                    .await?
                    .into_iter()
                    .filter(|p| p.partition == partition as i32 && p.next_offset > offset)
                    .map(|p| p.member)
                    .collect();
                trace.dead_for = store
                    .member_deaths(&mut conn, g.id, id)
                    .await?
                    .into_iter()
                    .map(|d| d.member)
                    .collect();
                out.push(trace);
                continue;
            }
            let rows = store
                .record_rows(&mut conn, g.id, id, (partition as i32, offset))
                .await?;
            if let Some((state, attempts, events, settled_us)) = rows.history {
                trace.attempts = attempts.max(0) as u32;
                trace.events = events;
                let at = rfc(settled_us);
                trace.state = match state {
                    HistoryState::Acked => TraceState::Acked { at },
                    HistoryState::Dead => TraceState::Dead { at },
                    HistoryState::Retrying => TraceState::WaitingRetry { at },
                    HistoryState::Other => TraceState::Consumed,
                };
            } else if offset < cursor {
                trace.state = TraceState::Consumed;
            }
            if let Some((_, attempts, owner, claimed_us, until_us)) = rows.lease {
                trace.attempts = attempts.max(0) as u32;
                trace.state = TraceState::InFlight {
                    member: owner,
                    since: rfc(claimed_us),
                    lease_until: rfc(until_us),
                };
            } else if let Some((attempts, run_us)) = rows.retry {
                trace.attempts = attempts.max(0) as u32;
                trace.state = TraceState::WaitingRetry { at: rfc(run_us) };
            } else if let Some((attempts, died_us)) = rows.dead {
                trace.attempts = attempts.max(0) as u32;
                trace.state = TraceState::Dead { at: rfc(died_us) };
            }
            out.push(trace);
        }
        Ok(Some(Trace {
            id,
            partition,
            offset,
            record,
            groups: out,
        }))
    }

    pub(crate) fn check_partition(&self, partition: u32) -> Result<()> {
        if partition >= TopicConfig::MAX_PARTITIONS {
            return Err(Error::InvalidArgument(format!(
                "partition {partition} is out of range"
            )));
        }
        Ok(())
    }
}
