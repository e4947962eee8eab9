//! Operator statements: counts, cancel, purge, key repair.

use std::collections::HashMap;

use super::flows::DELETE_WAITING;
use super::{Columns, SqlStore, Statement};
use crate::domain::{Cancelled, Error, MessageId, Result};
use crate::store::Backend;
use crate::store::rows::{PurgeScope, QueueCounts};
use crate::store::statements::{MAX_LIST, bucket, padded};

/// The operator statements that differ by backend.
pub struct AdminSql {
    /// Age of a queue's oldest ready message in µs (queue): one row, NULL when none.
    pub oldest_ready: &'static str,
    /// A message's row, locked (id): `queue_id, priority, ordering_key`.
    pub lock_message: &'static str,
    /// Delete `blocked` rows by id (`{list}` or `{ids}`).
    pub delete_blocked: &'static str,
    /// Delete `dead` rows by id (`{list}` or `{ids}`).
    pub delete_dead: &'static str,
    /// Take up to n of a queue's `ready` rows (queue, n): `priority, id`.
    pub purge_ready: &'static str,
    /// Delete `ready` rows by primary key (`{rows}`/`{list}` of [`AdminSql::ready_key_row`]).
    pub delete_ready: &'static str,
    /// One `ready` primary key: queue, priority, id.
    pub ready_key_row: &'static str,
    /// Take up to n of a queue's rows (queue, n), `id`, of: `scheduled`, `blocked`, `leases`,
    /// `dead` (each deleted with the matching delete by id).
    pub purge_by_id: [&'static str; 4],
}

/// Per-queue row counts of each state table (a message cancelled in flight counts in flight
/// while its handler may still run).
const COUNTS: [&str; 7] = [
    "SELECT queue_id, COUNT(*) FROM {p}ready GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}scheduled GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}blocked GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}leases GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}dead GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}waiting GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}cancels GROUP BY queue_id",
];
/// Take up to n of a queue's `waiting` rows (queue, n): `id`.
const PURGE_WAITING: &str = "SELECT id FROM {p}waiting WHERE queue_id = ? LIMIT ?";

/// Operator actions and counts.
impl<B: Backend> SqlStore<B> {
    /// Delete one `ready` row by its message's key (queue, priority, id); how many went (0 or
    /// 1). The backend's statement names its index (MySQL's primary key holds the start time
    /// too).
    pub(crate) async fn delete_ready_row(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        priority: i16,
        id: MessageId,
    ) -> Result<u64> {
        self.list_query(B::ADMIN.delete_ready, B::ADMIN.ready_key_row, 1)
            .arg(queue_id)
            .arg(priority)
            .arg(id.bytes())
            .run(conn)
            .await
    }

    /// Per-queue counts for every queue id present in the state tables.
    pub(crate) async fn counts(
        &self,
        conn: &mut B::Connection,
    ) -> Result<HashMap<i32, QueueCounts>> {
        let mut counts: HashMap<i32, QueueCounts> = HashMap::new();
        for (i, template) in COUNTS.iter().enumerate() {
            for row in self.query(template).rows(conn).await? {
                let entry = counts.entry(row.col(0)?).or_default();
                let n = row.col::<i64>(1)?.max(0) as u64;
                match i {
                    0 => entry.ready = n,
                    1 => entry.scheduled = n,
                    2 => entry.blocked = n,
                    3 => entry.in_flight = n,
                    4 => entry.dead = n,
                    5 => entry.waiting = n,
                    _ => entry.in_flight += n,
                }
            }
        }
        Ok(counts)
    }

    /// Age of the oldest ready message of the queue, in microseconds.
    pub(crate) async fn oldest_ready_us(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<Option<i64>> {
        let row = self
            .query(B::ADMIN.oldest_ready)
            .arg(queue_id)
            .first(conn)
            .await?;
        Ok(match row {
            Some(row) => row.col(0)?,
            None => None,
        })
    }

    /// Cancel a message in any state: a waiting one is removed and its key moves on
    /// ([`Cancelled::Removed`]); an in-flight one has its lease moved to `cancels`
    /// ([`Cancelled::Running`], `running.rs`), or stays so when it was cancelled already.
    /// `MessageNotFound` when it is not in this queue.
    pub(crate) async fn cancel(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        id: MessageId,
        reason: &str,
    ) -> Result<Cancelled> {
        let row = self
            .query(B::ADMIN.lock_message)
            .arg(id.bytes())
            .first(conn)
            .await?;
        let Some(row) = row.filter(|r| r.col::<i32>(0).ok() == Some(queue_id)) else {
            return Err(Error::MessageNotFound(id));
        };
        let priority: i16 = row.col(1)?;
        let key: Option<Vec<u8>> = row.col(2)?;
        let in_ready = self.delete_ready_row(conn, queue_id, priority, id).await? == 1;
        // A keyed message in ready or scheduled is its key's head; blocked ones and dead
        // letters are not.
        let was_head = in_ready
            || self
                .exec_id_list(conn, B::MAINTAIN.delete_scheduled, &[id])
                .await?
                == 1;
        let removed = was_head
            || self
                .exec_id_list(conn, B::ADMIN.delete_blocked, &[id])
                .await?
                == 1
            || self.exec_id_list(conn, B::ADMIN.delete_dead, &[id]).await? == 1
            || self.exec_id_list(conn, DELETE_WAITING, &[id]).await? == 1;
        if !removed {
            if self.cancel_lease(conn, queue_id, id, reason).await?
                || self.cancel_reason(conn, id).await?.is_some()
            {
                return Ok(Cancelled::Running);
            }
            return Err(Error::MessageNotFound(id));
        }
        self.forget_message(conn, queue_id, id, key, was_head)
            .await?;
        Ok(Cancelled::Removed)
    }

    /// Delete up to `limit` messages of each state in `scope`. Returns how many went; rows
    /// locked by others are skipped (the caller loops).
    pub(crate) async fn purge_batch(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        scope: PurgeScope,
        limit: usize,
    ) -> Result<usize> {
        let mut removed = Vec::new();
        if scope == PurgeScope::Live {
            let rows = self
                .query(B::ADMIN.purge_ready)
                .arg(queue_id)
                .arg(limit as i64)
                .rows(conn)
                .await?;
            let ready = rows
                .iter()
                .map(|r| Ok((r.col::<i16>(0)?, r.id_at(1)?)))
                .collect::<Result<Vec<_>>>()?;
            for chunk in ready.chunks(MAX_LIST) {
                let mut q = self.list_query(
                    B::ADMIN.delete_ready,
                    B::ADMIN.ready_key_row,
                    bucket(chunk.len()),
                );
                for (priority, id) in padded(chunk) {
                    q = q.arg(queue_id).arg(*priority).arg(id.bytes());
                }
                q.run(conn).await?;
            }
            removed.extend(ready.into_iter().map(|(_, id)| id));
        }
        let [scheduled, blocked, leases, dead] = B::ADMIN.purge_by_id;
        let tables = match scope {
            PurgeScope::Live => vec![
                (scheduled, B::MAINTAIN.delete_scheduled),
                (blocked, B::ADMIN.delete_blocked),
                (leases, B::SETTLE.delete_leases),
                (PURGE_WAITING, DELETE_WAITING),
            ],
            PurgeScope::Dead => vec![(dead, B::ADMIN.delete_dead)],
        };
        for (select, delete) in tables {
            let rows = self
                .query(select)
                .arg(queue_id)
                .arg(limit as i64)
                .rows(conn)
                .await?;
            let ids = rows
                .iter()
                .map(|r| r.id_at(0))
                .collect::<Result<Vec<_>>>()?;
            self.exec_id_list(conn, delete, &ids).await?;
            removed.extend(ids);
        }
        self.exec_id_list(conn, B::SETTLE.delete_messages, &removed)
            .await?;
        Ok(removed.len())
    }

    /// Let ordering keys whose head message no longer exists move on (after a purge).
    /// Returns how many keys were repaired (the caller loops until 0).
    pub(crate) async fn repair_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<usize> {
        let keys = self.repair_orphaned_keys(conn, queue_id).await?;
        Ok(keys + self.repair_flows(conn, queue_id).await?)
    }
}
