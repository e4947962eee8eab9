//! Operator statements: counts, cancel, purge.

use std::collections::HashMap;

use sqlx::{MySqlConnection, Row};

use super::claim::{DELETE_READY, READY_KEY_ROW};
use super::keys::ORPHANED_KEYS;
use super::maintain::DELETE_SCHEDULED;
use super::settle::{DELETE_LEASES, DELETE_MESSAGES};
use super::{MySqlStore, exec_id_list, id_at};
use crate::domain::MessageId;
use crate::domain::{Error, Result};
use crate::store::Admin;
use crate::store::rows::{PurgeScope, QueueCounts};
use crate::store::statements::padded;
use crate::store::statements::{MAX_LIST, bucket};
use sqlx::MySql;

const COUNTS: [&str; 5] = [
    "SELECT queue_id, COUNT(*) FROM {p}ready GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}scheduled GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}blocked GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}leases GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}dead GROUP BY queue_id",
];
/// The oldest ready message is among the first of each priority (ids are time-ordered): a
/// loose index scan over `ready`'s primary key, then one lookup per priority.
pub(crate) const OLDEST_READY: &str = concat!(
    "SELECT TIMESTAMPDIFF(MICROSECOND, MIN(m.created_at), UTC_TIMESTAMP(6)) ",
    "FROM (SELECT priority, MIN(id) AS id FROM {p}ready FORCE INDEX (PRIMARY) WHERE queue_id = ? GROUP BY priority) h ",
    "STRAIGHT_JOIN {p}messages m FORCE INDEX (PRIMARY) ON m.id = h.id"
);
pub(crate) const ANY_MESSAGE: &str =
    "SELECT id FROM {p}messages FORCE INDEX (PRIMARY) WHERE id IN ({list})";
pub(crate) const LOCK_MESSAGE: &str =
    "SELECT queue_id, priority, ordering_key FROM {p}messages WHERE id = ? FOR UPDATE";
pub(crate) const CANCEL_READY: &str =
    "DELETE FROM {p}ready WHERE queue_id = ? AND priority = ? AND id = ?";
pub(crate) const DELETE_BLOCKED: &str =
    "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}blocked t FORCE INDEX (id) ON t.id = v.id";
pub(crate) const DELETE_DEAD: &str =
    "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}dead t FORCE INDEX (PRIMARY) ON t.id = v.id";

/// A table purged by id: (select a batch of the queue's ids, delete them).
pub(crate) const PURGE_BY_ID: [(&str, &str); 4] = [
    (
        "SELECT id FROM {p}scheduled FORCE INDEX (due) WHERE queue_id = ? LIMIT ? FOR UPDATE SKIP LOCKED",
        DELETE_SCHEDULED,
    ),
    (
        "SELECT id FROM {p}blocked FORCE INDEX (PRIMARY) WHERE queue_id = ? LIMIT ? FOR UPDATE SKIP LOCKED",
        DELETE_BLOCKED,
    ),
    (
        "SELECT id FROM {p}leases FORCE INDEX (expiry) WHERE queue_id = ? LIMIT ? FOR UPDATE SKIP LOCKED",
        DELETE_LEASES,
    ),
    (
        "SELECT id FROM {p}dead FORCE INDEX (queue_died) WHERE queue_id = ? LIMIT ? FOR UPDATE SKIP LOCKED",
        DELETE_DEAD,
    ),
];
pub(crate) const PURGE_READY: &str = "SELECT priority, id FROM {p}ready FORCE INDEX (PRIMARY) WHERE queue_id = ? LIMIT ? FOR UPDATE SKIP LOCKED";

impl Admin<MySql> for MySqlStore {
    async fn counts(&self, conn: &mut MySqlConnection) -> Result<HashMap<i32, QueueCounts>> {
        let mut counts: HashMap<i32, QueueCounts> = HashMap::new();
        for (i, template) in COUNTS.iter().enumerate() {
            for row in sqlx::query(self.st.get(template))
                .fetch_all(&mut *conn)
                .await?
            {
                let entry = counts.entry(row.try_get(0)?).or_default();
                let n = row.try_get::<i64, _>(1)?.max(0) as u64;
                match i {
                    0 => entry.ready = n,
                    1 => entry.scheduled = n,
                    2 => entry.blocked = n,
                    3 => entry.in_flight = n,
                    _ => entry.dead = n,
                }
            }
        }
        Ok(counts)
    }

    /// Age of the oldest ready message of `queue_id`, in microseconds.
    async fn oldest_ready_us(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
    ) -> Result<Option<i64>> {
        let row = sqlx::query(self.st.get(OLDEST_READY))
            .bind(queue_id)
            .fetch_one(&mut *conn)
            .await?;
        Ok(row.try_get(0)?)
    }

    /// Remove a message that is not in flight. Its key, if any, moves on.
    async fn cancel(&self, conn: &mut MySqlConnection, queue_id: i32, id: MessageId) -> Result<()> {
        let row = sqlx::query(self.st.get(LOCK_MESSAGE))
            .bind(id.bytes())
            .fetch_optional(&mut *conn)
            .await?;
        let Some(row) = row.filter(|r| r.try_get::<i32, _>(0).ok() == Some(queue_id)) else {
            return Err(Error::MessageNotFound(id));
        };
        let priority: i16 = row.try_get(1)?;
        let key: Option<Vec<u8>> = row.try_get(2)?;
        let in_ready = sqlx::query(self.st.get(CANCEL_READY))
            .bind(queue_id)
            .bind(priority)
            .bind(id.bytes())
            .execute(&mut *conn)
            .await?
            .rows_affected()
            == 1;
        // A keyed message in ready or scheduled is its key's head; blocked ones and dead
        // letters are not.
        let was_head =
            in_ready || exec_id_list(&self.st, conn, DELETE_SCHEDULED, &[id]).await? == 1;
        let removed = was_head
            || exec_id_list(&self.st, conn, DELETE_BLOCKED, &[id]).await? == 1
            || exec_id_list(&self.st, conn, DELETE_DEAD, &[id]).await? == 1;
        if !removed {
            return Err(Error::MessageInFlight(id));
        }
        exec_id_list(&self.st, conn, DELETE_MESSAGES, &[id]).await?;
        if let (true, Some(key)) = (was_head, key) {
            self.release_key(conn, queue_id, &key, id).await?;
        }
        Ok(())
    }

    /// Delete up to `limit` messages of each state table in `scope`. Returns how many went.
    /// Rows locked by a concurrent operation are skipped (the caller loops).
    async fn purge_batch(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        scope: PurgeScope,
        limit: usize,
    ) -> Result<usize> {
        let mut removed = Vec::new();
        if scope == PurgeScope::Live {
            let rows = sqlx::query(self.st.get(PURGE_READY))
                .bind(queue_id)
                .bind(limit as i64)
                .fetch_all(&mut *conn)
                .await?;
            let ready = rows
                .iter()
                .map(|r| Ok((r.try_get::<i16, _>(0)?, id_at(r, 1)?)))
                .collect::<Result<Vec<_>>>()?;
            for chunk in ready.chunks(MAX_LIST) {
                let mut q = sqlx::query(self.st.list(
                    DELETE_READY,
                    READY_KEY_ROW,
                    bucket(chunk.len()),
                ));
                for (priority, id) in padded(chunk) {
                    q = q.bind(queue_id).bind(*priority).bind(id.bytes());
                }
                q.execute(&mut *conn).await?;
            }
            removed.extend(ready.into_iter().map(|(_, id)| id));
        }
        let tables = match scope {
            PurgeScope::Live => &PURGE_BY_ID[..3],
            PurgeScope::Dead => &PURGE_BY_ID[3..],
        };
        for (select, delete) in tables {
            let rows = sqlx::query(self.st.get(select))
                .bind(queue_id)
                .bind(limit as i64)
                .fetch_all(&mut *conn)
                .await?;
            let ids = rows
                .iter()
                .map(|r| id_at(r, 0))
                .collect::<Result<Vec<_>>>()?;
            exec_id_list(&self.st, conn, delete, &ids).await?;
            removed.extend(ids);
        }
        exec_id_list(&self.st, conn, DELETE_MESSAGES, &removed).await?;
        Ok(removed.len())
    }

    /// Release the keys whose head message no longer exists (after a purge, or any path that
    /// removed a head without releasing it). Returns how many keys were repaired.
    async fn repair_keys(&self, conn: &mut MySqlConnection, queue_id: i32) -> Result<usize> {
        let rows = sqlx::query(self.st.get(ORPHANED_KEYS))
            .bind(queue_id)
            .fetch_all(&mut *conn)
            .await?;
        for row in &rows {
            let key: Vec<u8> = row.try_get(0)?;
            self.release_key(conn, queue_id, &key, id_at(row, 1)?)
                .await?;
        }
        Ok(rows.len())
    }
}
