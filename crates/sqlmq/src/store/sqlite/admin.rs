//! Operator statements: counts, cancel, purge, key repair.
//!
//! What SQLite makes simpler: these run in a write transaction that has the database to itself,
//! so a message needs no lock before it is cancelled (`FOR UPDATE` on MySQL) and a purge skips
//! nothing (`SKIP LOCKED`): each state table gives up a batch of the queue's rows with one
//! `DELETE … WHERE key IN (SELECT … LIMIT ?) RETURNING id`, and their message rows follow.

use std::collections::HashMap;

use sqlx::{Row, Sqlite, SqliteConnection};

use super::keys::ORPHANED_KEYS;
use super::settle::DELETE_MESSAGES;
use super::{SqliteStore, exec_id_list, id_at, now_us};
use crate::domain::{Error, MessageId, Result};
use crate::store::Admin;
use crate::store::rows::{PurgeScope, QueueCounts};
use crate::store::statements::Statements;

const COUNTS: [&str; 5] = [
    "SELECT queue_id, COUNT(*) FROM {p}ready GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}scheduled GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}blocked GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}leases GROUP BY queue_id",
    "SELECT queue_id, COUNT(*) FROM {p}dead GROUP BY queue_id",
];
/// The oldest ready message is among the first of each priority (ids are time-ordered): one
/// `MIN(id)` per priority over `ready`'s primary key, then one lookup each.
const OLDEST_READY: &str = concat!(
    "SELECT ",
    now_us!(),
    " - MIN(m.created_at) FROM ",
    "(SELECT priority, MIN(id) AS id FROM {p}ready WHERE queue_id = ? GROUP BY priority) h ",
    "JOIN {p}messages m ON m.id = h.id"
);
const MESSAGE: &str = "SELECT queue_id, priority, ordering_key FROM {p}messages WHERE id = ?";
const CANCEL_READY: &str = "DELETE FROM {p}ready WHERE queue_id = ? AND priority = ? AND id = ?";
const CANCEL_SCHEDULED: &str = "DELETE FROM {p}scheduled WHERE id = ?";
const CANCEL_BLOCKED: &str = "DELETE FROM {p}blocked WHERE id = ?";
const CANCEL_DEAD: &str = "DELETE FROM {p}dead WHERE id = ?";

/// Remove a batch of a queue's ready rows (`?1`: queue, `?2`: batch size).
const PURGE_READY: &str = "DELETE FROM {p}ready WHERE queue_id = ?1 AND (priority, id) IN \
    (SELECT priority, id FROM {p}ready WHERE queue_id = ?1 LIMIT ?2) RETURNING id";
/// Batches of the queue's rows in the other state tables, live ones first.
const PURGE_BY_ID: [&str; 4] = [
    "DELETE FROM {p}scheduled WHERE id IN \
        (SELECT id FROM {p}scheduled WHERE queue_id = ?1 LIMIT ?2) RETURNING id",
    "DELETE FROM {p}blocked WHERE (queue_id, ordering_key, seq) IN \
        (SELECT queue_id, ordering_key, seq FROM {p}blocked WHERE queue_id = ?1 LIMIT ?2) \
        RETURNING id",
    "DELETE FROM {p}leases WHERE id IN \
        (SELECT id FROM {p}leases WHERE queue_id = ?1 LIMIT ?2) RETURNING id",
    "DELETE FROM {p}dead WHERE id IN \
        (SELECT id FROM {p}dead WHERE queue_id = ?1 LIMIT ?2) RETURNING id",
];

/// Run a single-id delete; whether it removed a row.
async fn delete_one(
    st: &Statements,
    conn: &mut SqliteConnection,
    template: &'static str,
    id: MessageId,
) -> Result<bool> {
    let done = sqlx::query(st.get(template))
        .bind(id.bytes())
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

impl Admin<Sqlite> for SqliteStore {
    async fn counts(&self, conn: &mut SqliteConnection) -> Result<HashMap<i32, QueueCounts>> {
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
        conn: &mut SqliteConnection,
        queue_id: i32,
    ) -> Result<Option<i64>> {
        let row = sqlx::query(self.st.get(OLDEST_READY))
            .bind(queue_id)
            .fetch_one(&mut *conn)
            .await?;
        Ok(row.try_get(0)?)
    }

    /// Remove a message that is not in flight. Its key, if any, moves on.
    async fn cancel(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        id: MessageId,
    ) -> Result<()> {
        let row = sqlx::query(self.st.get(MESSAGE))
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
        let was_head = in_ready || delete_one(&self.st, conn, CANCEL_SCHEDULED, id).await?;
        let removed = was_head
            || delete_one(&self.st, conn, CANCEL_BLOCKED, id).await?
            || delete_one(&self.st, conn, CANCEL_DEAD, id).await?;
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
    async fn purge_batch(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        scope: PurgeScope,
        limit: usize,
    ) -> Result<usize> {
        let tables: &[&str] = match scope {
            PurgeScope::Live => &[PURGE_READY, PURGE_BY_ID[0], PURGE_BY_ID[1], PURGE_BY_ID[2]],
            PurgeScope::Dead => &PURGE_BY_ID[3..],
        };
        let mut removed = Vec::new();
        for template in tables {
            let rows = sqlx::query(self.st.get(template))
                .bind(queue_id)
                .bind(limit as i64)
                .fetch_all(&mut *conn)
                .await?;
            for row in &rows {
                removed.push(id_at(row, 0)?);
            }
        }
        exec_id_list(&self.st, conn, DELETE_MESSAGES, &removed).await?;
        Ok(removed.len())
    }

    /// Release the keys whose head message no longer exists (after a purge, or any path that
    /// removed a head without releasing it). Returns how many keys were repaired.
    async fn repair_keys(&self, conn: &mut SqliteConnection, queue_id: i32) -> Result<usize> {
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
