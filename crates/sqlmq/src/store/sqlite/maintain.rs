//! Time-driven moves: due messages into `ready`, expired leases back out, old idempotency keys
//! away.
//!
//! What SQLite makes simpler: MySQL takes these rows with `SKIP LOCKED` so that sweepers in
//! several processes never take the same row nor wait on an ack in progress; here each step
//! runs in a write transaction that has the database to itself, so two sweepers simply run one
//! after the other, and the second finds the work done. Promotion and pruning take their rows
//! with one `DELETE … WHERE key IN (SELECT … LIMIT ?)` (with `RETURNING` where the rows move on)
//! instead of a locking read and a delete by key.

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};

use super::settle::Lease;
use super::{SqliteStore, id_at, now_us};
use crate::domain::{Decide, Released, Result};
use crate::store::Maintain;
use crate::store::rows::Entry;

const ANY_DUE: &str = concat!(
    "SELECT 1 FROM {p}scheduled WHERE queue_id = ? AND run_at <= ",
    now_us!(),
    " LIMIT 1"
);
/// Take up to `?2` due messages of the queue, earliest first.
const TAKE_DUE: &str = concat!(
    "DELETE FROM {p}scheduled WHERE id IN (SELECT id FROM {p}scheduled ",
    "WHERE queue_id = ?1 AND run_at <= ",
    now_us!(),
    " ORDER BY run_at, id LIMIT ?2) RETURNING id, priority, attempts, token"
);

const ANY_EXPIRED: &str = concat!(
    "SELECT 1 FROM {p}leases WHERE queue_id = ? AND lease_until <= ",
    now_us!(),
    " LIMIT 1"
);
const EXPIRED: &str = concat!(
    "SELECT id, queue_id, priority, token, attempts, ordering_key, 0 FROM {p}leases ",
    "WHERE queue_id = ? AND lease_until <= ",
    now_us!(),
    " ORDER BY lease_until LIMIT ?"
);
/// The leases of a queue held by one owner: the queue's in-flight rows (bounded by its
/// consumers' concurrency) read through `leases_expiry`, filtered by owner. Rare (a process
/// died or left), so no index on the hot table for it.
const OWNED: &str = "SELECT id, queue_id, priority, token, attempts, ordering_key, 0 \
    FROM {p}leases WHERE queue_id = ? AND owner = ? LIMIT ?";

const PRUNE_DEDUP: &str = concat!(
    "DELETE FROM {p}dedup WHERE (queue_id, idempotency_key) IN ",
    "(SELECT queue_id, idempotency_key FROM {p}dedup WHERE expires_at <= ",
    now_us!(),
    " ORDER BY expires_at LIMIT ?)"
);

impl Maintain<Sqlite> for SqliteStore {
    /// Whether `queue_id` has scheduled messages that are due (a plain read).
    async fn any_due(&self, conn: &mut SqliteConnection, queue_id: i32) -> Result<bool> {
        let row = sqlx::query(self.st.get(ANY_DUE))
            .bind(queue_id)
            .fetch_optional(&mut *conn)
            .await?;
        Ok(row.is_some())
    }

    /// Move up to `limit` due scheduled messages into `ready`.
    async fn promote_due(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        limit: usize,
    ) -> Result<usize> {
        let rows = sqlx::query(self.st.get(TAKE_DUE))
            .bind(queue_id)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        let due = rows
            .iter()
            .map(|row| {
                let entry = Entry {
                    id: id_at(row, 0)?,
                    priority: row.try_get(1)?,
                    attempts: row.try_get(2)?,
                    token: row.try_get(3)?,
                };
                Ok((entry, 0))
            })
            .collect::<Result<Vec<_>>>()?;
        self.place(conn, queue_id, &due).await?;
        Ok(due.len())
    }

    /// Whether `queue_id` has leases that ended (a plain read).
    async fn any_expired(&self, conn: &mut SqliteConnection, queue_id: i32) -> Result<bool> {
        let row = sqlx::query(self.st.get(ANY_EXPIRED))
            .bind(queue_id)
            .fetch_optional(&mut *conn)
            .await?;
        Ok(row.is_some())
    }

    /// Delete up to `limit` idempotency keys whose window has passed. Returns how many.
    async fn prune_dedup(&self, conn: &mut SqliteConnection, limit: usize) -> Result<usize> {
        let done = sqlx::query(self.st.get(PRUNE_DEDUP))
            .bind(limit as i64)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() as usize)
    }
}

impl SqliteStore {
    /// Release up to `limit` expired leases of `queue_id`, as `decide` settles each (back in
    /// line at once, or dead on the last attempt).
    pub(crate) async fn release_queue_expired(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = sqlx::query(self.st.get(EXPIRED))
            .bind(queue_id)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        self.release(conn, queue_id, &rows, decide).await
    }

    /// Release up to `limit` leases of `queue_id` held by `owner` (a dead or departing
    /// process), whatever their expiry, as `decide` settles each.
    pub(crate) async fn release_queue_owned(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = sqlx::query(self.st.get(OWNED))
            .bind(queue_id)
            .bind(owner.as_bytes())
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        self.release(conn, queue_id, &rows, decide).await
    }

    /// Release lease rows (`id, queue_id, priority, token, attempts, ordering_key, live`).
    async fn release(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        rows: &[SqliteRow],
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let endings = rows
            .iter()
            .map(|r| {
                let lease = Lease::decode(r)?;
                let settlement = decide(lease.entry.attempts.max(0) as u32);
                Ok((lease, settlement))
            })
            .collect::<Result<Vec<_>>>()?;
        self.end_leases(conn, queue_id, endings).await
    }
}
