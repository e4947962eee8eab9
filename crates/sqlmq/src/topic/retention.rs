//! Applying a topic's retention (the statements are `store/body/retention.rs`): where to
//! cut each partition (by age, by bytes, never past what a group still has to consume when
//! the topic keeps unconsumed records), then the removal in chunks.

use std::collections::HashMap;

use super::Topic;
use super::position::offset_for_time;
use crate::domain::GroupMode;
use crate::domain::Result;
use crate::domain::{RetentionReport, TopicConfig};
use crate::store::Backend;
use crate::store::rows::{GroupTable, RangeRemoval};
use crate::tx;

/// Offsets removed per retention transaction.
const RETENTION_CHUNK: i64 = 500;

/// Body sizes read per statement while looking for the cut by bytes.
const BODY_SIZES_CHUNK: usize = 500;

impl<B: Backend> Topic<B> {
    /// Remove the records the topic's retention (age, bytes) no longer keeps, oldest first,
    /// in transactions of at most 500 offsets. With `retention_keeps_unconsumed`, records a
    /// group has not consumed (not handed out, in flight, retrying, dead) or a broadcast
    /// member's checkpoint has not passed are kept. Group maintenance runs it once a minute
    /// ([`TopicConfig::RETENTION_INTERVAL`]).
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// t.apply_retention().await?;
    /// # Ok(()) }
    /// ```
    pub async fn apply_retention(&self) -> Result<RetentionReport> {
        self.client.require_schema()?;
        let store = self.client.store();
        let mut report = RetentionReport::default();
        let (config, parts, now_us, floors, group_ids) = {
            let mut conn = self.client.conns().read().await?;
            let config = match store.topic_by_id(&mut conn, self.id()).await? {
                Some(row) => row.config,
                None => return Ok(report),
            };
            if config.retention.is_none() && config.retention_bytes.is_none() {
                return Ok(report);
            }
            let parts = store.partitions(&mut conn, self.id()).await?;
            let now_us = B::now_us(store, &mut conn).await?;
            let floors = if config.retention_keeps_unconsumed {
                Some(self.unconsumed_floors(&mut conn).await?)
            } else {
                None
            };
            let groups = store.groups_of_topic(&mut conn, self.id()).await?;
            let ids: Vec<i32> = groups.iter().map(|g| g.id).collect();
            (config, parts, now_us, floors, ids)
        };
        for part in parts {
            let p = part.partition;
            let mut cut = part.low_offset;
            let mut conn = self.client.conns().read().await?;
            if let Some(age) = config.retention {
                let before = now_us - age.as_micros().min(i64::MAX as u128) as i64;
                cut = cut
                    .max(offset_for_time::<B>(store, &mut conn, self.id(), &part, before).await?);
            }
            if let Some(limit) = config.retention_bytes {
                let limit = limit.min(i64::MAX as u64) as i64;
                if part.bytes > limit {
                    let by_bytes = self
                        .offset_for_bytes(&mut conn, p, part.low_offset, part.bytes, limit)
                        .await?;
                    cut = cut.max(by_bytes);
                }
            }
            drop(conn);
            if let Some(floor) = floors.as_ref().and_then(|f| f.get(&p))
                && cut > *floor
            {
                report.kept_unconsumed += (cut - floor.max(&part.low_offset)) as u64;
                cut = (*floor).max(part.low_offset);
            }
            let mut at = part.low_offset;
            while at < cut {
                let end = cut.min(at + RETENTION_CHUNK);
                let group_ids = &group_ids;
                let (records, bytes) = tx::run(self.client.conns(), "retention", |conn, _| {
                    let range = RangeRemoval {
                        topic_id: self.id(),
                        partition: p,
                        from: at,
                        to: end,
                        group_ids,
                    };
                    Box::pin(async move { store.remove_range(conn, &range).await })
                })
                .await?;
                report.records += records;
                report.bytes += bytes.max(0) as u64;
                report.transactions += 1;
                at = end;
            }
        }
        if report.records > 0 {
            tracing::info!(topic = self.name(), ?report, "retention applied");
            metrics::counter!(crate::telemetry::catalogue::RECORDS_EXPIRED.name(), "topic" => self.name().to_owned())
                .increment(report.records);
        }
        Ok(report)
    }

    /// The first offset of `partition` at or after `from` such that the bodies from there on
    /// total at most `keep` bytes, given `total` bytes from `from` on: the body sizes are
    /// read in order, [`BODY_SIZES_CHUNK`] a statement, until the excess is passed.
    async fn offset_for_bytes(
        &self,
        conn: &mut B::Connection,
        partition: i32,
        from: i64,
        total: i64,
        keep: i64,
    ) -> Result<i64> {
        let store = self.client.store();
        let mut excess = total - keep;
        let mut at = from;
        while excess > 0 {
            let sizes = store
                .body_sizes(conn, self.id(), partition, at, BODY_SIZES_CHUNK)
                .await?;
            if sizes.is_empty() {
                break;
            }
            for (offset, bytes) in sizes {
                if excess <= 0 {
                    break;
                }
                excess -= bytes;
                at = offset + 1;
            }
        }
        Ok(at)
    }

    /// Per partition, the smallest offset some group still has to consume.
    async fn unconsumed_floors(&self, conn: &mut B::Connection) -> Result<HashMap<i32, i64>> {
        let store = self.client.store();
        let mut floors: HashMap<i32, i64> = HashMap::new();
        let mut lower = |p: i32, o: i64| {
            let f = floors.entry(p).or_insert(o);
            *f = (*f).min(o);
        };
        let cursors = store.cursors_of_topic(conn, self.id()).await?;
        let groups = store.groups_of_topic(conn, self.id()).await?;
        for g in &groups {
            let own = cursors.iter().filter(|c| c.group_id == g.id);
            if g.config.mode == GroupMode::Broadcast {
                let checkpoints = store.min_positions(conn, g.id).await?;
                for c in own {
                    let at = checkpoints.get(&c.partition).copied();
                    lower(c.partition, at.unwrap_or(c.next_offset));
                }
                continue;
            }
            for c in own {
                lower(c.partition, c.next_offset);
            }
            for table in [GroupTable::Leases, GroupTable::Retries, GroupTable::Dead] {
                for (p, (_, min)) in store.by_partition(conn, table, g.id).await? {
                    lower(p, min);
                }
            }
        }
        Ok(floors)
    }

    /// Apply retention if this client has not done so for this topic in the last minute.
    pub(crate) async fn retention_if_due(&self) -> Result<()> {
        if self.client.due(
            crate::client::Subject::Topic(self.id()),
            TopicConfig::RETENTION_INTERVAL,
        ) {
            self.apply_retention().await?;
        }
        Ok(())
    }
}
