//! Consumer group rows and their cursors.
//!
//! A cursor per group and partition: the next offset the group hands out, and `high_offset`,
//! the furthest it ever was (below it, after a reset back, offsets may have been handed out
//! before, which the claim then checks for). Deleting a group is a series of steps, one table
//! each, like deleting a topic (`topics.rs`).

use std::time::Duration;

use super::{Columns, SqlStore, Statement};
use crate::domain::{Backoff, Error, GroupConfig, GroupMode, RateLimit, Result, millis_of};
use crate::store::Backend;
use crate::store::rows::GroupRow;

/// The group statements whose texts differ by backend.
pub struct GroupSql {
    /// Insert a group unless it exists: `topic id, name, mode (1 broadcast, 0 cluster), max
    /// attempts, backoff (JSON), consume timeout (ms, NULL for none)`. Changes one row when it
    /// inserted.
    pub insert: &'static str,
    /// Create or move cursors, keeping the furthest each went in `high_offset`: `{list}` of
    /// `(?,?,?,?)`, each `group id, partition, next offset, next offset`.
    pub set_cursors: &'static str,
    /// Cursors at offset 0 for the partitions of a topic that its groups have none for (so
    /// that a group gets every record of a partition added later): topic id.
    pub add_cursors: &'static str,
    /// The steps of deleting a group, in order: each deletes at most a thousand of the
    /// group's rows of one table (dead letters, leases, retries, history, positions,
    /// cursors), the last the group row. Each binds the group id (once).
    pub delete: &'static [&'static str],
    /// Create or replace a group's rate limit: group id, count, window (µs).
    pub upsert_limits: &'static str,
    /// A group's rate limit, its row locked until the transaction ends (group id):
    /// `rate_count, rate_window_us`.
    pub lock_limits: &'static str,
}

const DELETE_LIMITS: &str = "DELETE FROM {p}group_limits WHERE group_id = ?";
const FORGET_DELIVERIES: &str = "DELETE FROM {p}group_deliveries WHERE group_id = ? AND at_us <= ?";
/// `SUM` is a DECIMAL on MySQL: cast back to an integer (`SIGNED` is an integer to SQLite too).
const RECENT_DELIVERIES: &str = "SELECT CAST(COALESCE(SUM(n), 0) AS SIGNED), MIN(at_us) \
    FROM {p}group_deliveries WHERE group_id = ? AND at_us > ?";
const RECORD_DELIVERIES: &str =
    "INSERT INTO {p}group_deliveries (group_id, at_us, n) VALUES (?, ?, ?)";

/// Update an existing group's retry settings: `max attempts, backoff (JSON), consume timeout
/// (ms), topic id, name`.
const UPDATE: &str = "UPDATE {p}consumer_groups SET max_attempts = ?, backoff = ?, \
    consume_timeout_ms = ? WHERE topic_id = ? AND name = ?";

/// Columns of a group row: `id, topic id, name, mode, max attempts, backoff, consume timeout
/// (ms)`.
macro_rules! group_columns {
    () => {
        "SELECT id, topic_id, name, mode, max_attempts, backoff, \
         consume_timeout_ms, l.rate_count, l.rate_window_us FROM {p}consumer_groups \
         LEFT JOIN {p}group_limits l ON l.group_id = id "
    };
}

/// A group by name: `topic id, name`. Returns the group columns.
const BY_NAME: &str = concat!(group_columns!(), "WHERE topic_id = ? AND name = ?");
/// A group by id: id. Returns the group columns.
const BY_ID: &str = concat!(group_columns!(), "WHERE id = ?");
/// A topic's groups by name: topic id. Returns the group columns.
const OF_TOPIC: &str = concat!(group_columns!(), "WHERE topic_id = ? ORDER BY name");
/// A group's cursors: group id. Returns `partition, next offset`.
const CURSORS: &str = "SELECT partition_no, next_offset FROM {p}group_cursors \
    WHERE group_id = ? ORDER BY partition_no";
/// One row of `GroupSql::set_cursors`.
const CURSOR_ROW: &str = "(?,?,?,?)";

fn decode<B: Backend>(row: &B::Row) -> Result<GroupRow> {
    let backoff: String = row.col(5)?;
    Ok(GroupRow {
        id: row.col(0)?,
        topic_id: row.col(1)?,
        name: row.col(2)?,
        config: GroupConfig {
            mode: if row.col::<i64>(3)? == 1 {
                GroupMode::Broadcast
            } else {
                GroupMode::Cluster
            },
            max_attempts: row.col::<i32>(4)?.max(1) as u32,
            backoff: serde_json::from_str::<Backoff>(&backoff)
                .map_err(|e| Error::Corrupt(format!("group backoff {backoff:?}: {e}")))?,
            consume_timeout: row
                .col::<Option<i64>>(6)?
                .map(|ms| Duration::from_millis(ms.max(0) as u64)),
            rate_limit: match (row.col::<Option<i64>>(7)?, row.col::<Option<i64>>(8)?) {
                (Some(count), Some(us)) => Some(RateLimit::new(
                    count.clamp(1, u32::MAX as i64) as u32,
                    Duration::from_micros(us.max(1) as u64),
                )),
                _ => None,
            },
        },
    })
}

/// Group rows and cursors.
impl<B: Backend> SqlStore<B> {
    /// Insert the group, or update an existing group's retry settings (never its mode or
    /// position). Returns the row and whether it was created.
    pub(crate) async fn create_group(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        name: &str,
        config: &GroupConfig,
    ) -> Result<(GroupRow, bool)> {
        let backoff = serde_json::to_string(&config.backoff)?;
        let timeout = config.consume_timeout.map(millis_of);
        let created = self
            .query(B::GROUPS.insert)
            .arg(topic_id)
            .arg(name)
            .arg(matches!(config.mode, GroupMode::Broadcast) as i32)
            .arg(config.max_attempts as i32)
            .arg(backoff.as_str())
            .arg(timeout)
            .run(conn)
            .await?
            == 1;
        if !created {
            self.query(UPDATE)
                .arg(config.max_attempts as i32)
                .arg(backoff.as_str())
                .arg(timeout)
                .arg(topic_id)
                .arg(name)
                .run(conn)
                .await?;
        }
        let group = self
            .group_by_name(conn, topic_id, name)
            .await?
            .ok_or_else(|| Error::Corrupt(format!("group {name} vanished")))?;
        match &config.rate_limit {
            Some(rate) => {
                self.query(B::GROUPS.upsert_limits)
                    .arg(group.id)
                    .arg(i64::from(rate.count))
                    .arg(rate.per.as_micros() as i64)
                    .run(conn)
                    .await?
            }
            None => self.query(DELETE_LIMITS).arg(group.id).run(conn).await?,
        };
        let group = self
            .group_by_name(conn, topic_id, name)
            .await?
            .ok_or_else(|| Error::Corrupt(format!("group {name} vanished")))?;
        Ok((group, created))
    }

    pub(crate) async fn group_by_name(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        name: &str,
    ) -> Result<Option<GroupRow>> {
        let row = self
            .query(BY_NAME)
            .arg(topic_id)
            .arg(name)
            .first(conn)
            .await?;
        row.as_ref().map(decode::<B>).transpose()
    }

    pub(crate) async fn group_by_id(
        &self,
        conn: &mut B::Connection,
        id: i32,
    ) -> Result<Option<GroupRow>> {
        let row = self.query(BY_ID).arg(id).first(conn).await?;
        row.as_ref().map(decode::<B>).transpose()
    }

    /// Every group of the topic, by name.
    pub(crate) async fn groups_of_topic(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
    ) -> Result<Vec<GroupRow>> {
        let rows = self.query(OF_TOPIC).arg(topic_id).rows(conn).await?;
        rows.iter().map(decode::<B>).collect()
    }

    /// The group's cursor of every partition that has one: `(partition, next offset)`.
    pub(crate) async fn cursors(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
    ) -> Result<Vec<(i32, i64)>> {
        let rows = self.query(CURSORS).arg(group_id).rows(conn).await?;
        rows.iter().map(|r| Ok((r.col(0)?, r.col(1)?))).collect()
    }

    /// Move (or create) cursors to `(partition, next offset)`; each remembers the furthest it
    /// ever was.
    pub(crate) async fn set_cursors(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        targets: &[(i32, i64)],
    ) -> Result<()> {
        self.insert_values(
            conn,
            B::GROUPS.set_cursors,
            CURSOR_ROW,
            4,
            targets,
            |q, (p, o)| q.arg(group_id).arg(*p).arg(*o).arg(*o),
        )
        .await
    }

    /// Step `step` (from 0) of deleting the group: delete up to about a thousand of its rows
    /// of one table (member dead letters, leases, retries, dead letters, history, positions,
    /// cursors), or, at the last step, the group row. Returns rows deleted; `None` past the
    /// last step.
    pub(crate) async fn delete_group_rows(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        step: usize,
    ) -> Result<Option<u64>> {
        self.delete_step(conn, B::GROUPS.delete, step, group_id)
            .await
    }

    /// The group's rate limit, its row locked until the transaction ends (on a backend with
    /// row locks); `None` when it has none.
    pub(crate) async fn lock_group_limit(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
    ) -> Result<Option<RateLimit>> {
        let row = self
            .query(B::GROUPS.lock_limits)
            .arg(group_id)
            .first(conn)
            .await?;
        row.map(|r| {
            Ok(RateLimit::new(
                r.col::<i64>(0)?.clamp(1, u32::MAX as i64) as u32,
                Duration::from_micros(r.col::<i64>(1)?.max(1) as u64),
            ))
        })
        .transpose()
    }

    /// Forget the group's deliveries at or before `before_us`, then count those after it: how
    /// many, and when the oldest of them was (µs).
    pub(crate) async fn recent_group_deliveries(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        before_us: i64,
    ) -> Result<(u64, Option<i64>)> {
        self.query(FORGET_DELIVERIES)
            .arg(group_id)
            .arg(before_us)
            .run(conn)
            .await?;
        let row = self
            .query(RECENT_DELIVERIES)
            .arg(group_id)
            .arg(before_us)
            .first(conn)
            .await?;
        super::limits::window_sum(row)
    }

    /// Record `n` deliveries of the group at `at_us`.
    pub(crate) async fn record_group_deliveries(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        at_us: i64,
        n: usize,
    ) -> Result<()> {
        self.query(RECORD_DELIVERIES)
            .arg(group_id)
            .arg(at_us)
            .arg(n as i64)
            .run(conn)
            .await?;
        Ok(())
    }
}

impl<B: Backend> SqlStore<B> {
    /// Cursors at 0 for the partitions of `topic_id` that its groups have none for.
    pub(crate) async fn add_cursors(&self, conn: &mut B::Connection, topic_id: i32) -> Result<()> {
        self.query(B::GROUPS.add_cursors)
            .arg(topic_id)
            .run(conn)
            .await?;
        Ok(())
    }
}
