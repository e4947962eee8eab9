//! Time-driven moves: due messages into `ready`, expired leases back out, old idempotency keys
//! away. Each step claims its rows with `SKIP LOCKED`, so any number of processes may run them at
//! once: two sweepers never take the same row, and a sweeper never waits on an ack in progress.

use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::settle::Lease;
use super::{MySqlStore, exec_id_list, id_at};
use crate::domain::MessageId;
use crate::domain::{Decide, Released, Result};
use crate::store::Maintain;
use crate::store::rows::Entry;
use crate::store::statements::bucket;
use crate::store::statements::padded;
use sqlx::MySql;

pub(crate) const ANY_DUE: &str = "SELECT 1 FROM {p}scheduled FORCE INDEX (due) WHERE queue_id = ? AND run_at <= UTC_TIMESTAMP(6) LIMIT 1";
pub(crate) const CLAIM_DUE: &str = "SELECT id, priority, attempts, token FROM {p}scheduled FORCE INDEX (due) \
    WHERE queue_id = ? AND run_at <= UTC_TIMESTAMP(6) ORDER BY run_at, id LIMIT ? \
    FOR UPDATE SKIP LOCKED";
pub(crate) const DELETE_SCHEDULED: &str =
    "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}scheduled t FORCE INDEX (PRIMARY) ON t.id = v.id";

pub(crate) const ANY_EXPIRED: &str = "SELECT 1 FROM {p}leases FORCE INDEX (expiry) WHERE queue_id = ? AND lease_until <= UTC_TIMESTAMP(6) LIMIT 1";
pub(crate) const CLAIM_EXPIRED: &str = "SELECT id, queue_id, priority, token, attempts, ordering_key, 0 \
    FROM {p}leases FORCE INDEX (expiry) WHERE queue_id = ? AND lease_until <= UTC_TIMESTAMP(6) \
    ORDER BY lease_until LIMIT ? FOR UPDATE SKIP LOCKED";

/// The leases of a queue held by one owner: the queue's in-flight rows (bounded by its
/// consumers' concurrency) read through `expiry`, filtered by owner. Rare (a process died or
/// left), so no index on the hot table for it.
pub(crate) const CLAIM_OWNED: &str = "SELECT id, queue_id, priority, token, attempts, ordering_key, 0 \
    FROM {p}leases FORCE INDEX (expiry) WHERE queue_id = ? AND owner = ? \
    LIMIT ? FOR UPDATE SKIP LOCKED";

pub(crate) const CLAIM_OLD_DEDUP: &str = "SELECT queue_id, idempotency_key FROM {p}dedup FORCE INDEX (expiry) \
    WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED";
pub(crate) const DELETE_DEDUP: &str = "DELETE t FROM ({rows}) v STRAIGHT_JOIN {p}dedup t FORCE INDEX (PRIMARY) \
    ON t.queue_id = v.q AND t.idempotency_key = v.k";
/// One row of a derived table of `dedup` primary keys.
pub(crate) const DEDUP_KEY_ROW: &str = "SELECT CAST(? AS SIGNED) AS q, CAST(? AS BINARY) AS k";

impl Maintain<MySql> for MySqlStore {
    /// Whether `queue_id` has scheduled messages that are due (a plain, non-locking read).
    async fn any_due(&self, conn: &mut MySqlConnection, queue_id: i32) -> Result<bool> {
        let row = sqlx::query(self.st.get(ANY_DUE))
            .bind(queue_id)
            .fetch_optional(&mut *conn)
            .await?;
        Ok(row.is_some())
    }

    /// Move up to `limit` due scheduled messages into `ready`.
    async fn promote_due(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        limit: usize,
    ) -> Result<usize> {
        let rows = sqlx::query(self.st.get(CLAIM_DUE))
            .bind(queue_id)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        let mut due = Vec::with_capacity(rows.len());
        for row in &rows {
            let entry = Entry {
                id: id_at(row, 0)?,
                priority: row.try_get(1)?,
                attempts: row.try_get(2)?,
                token: row.try_get(3)?,
            };
            due.push((entry, 0));
        }
        let ids: Vec<MessageId> = due.iter().map(|(e, _)| e.id).collect();
        exec_id_list(&self.st, conn, DELETE_SCHEDULED, &ids).await?;
        self.place(conn, queue_id, &due).await?;
        Ok(due.len())
    }

    /// Whether `queue_id` has leases that ended (a plain, non-locking read).
    async fn any_expired(&self, conn: &mut MySqlConnection, queue_id: i32) -> Result<bool> {
        let row = sqlx::query(self.st.get(ANY_EXPIRED))
            .bind(queue_id)
            .fetch_optional(&mut *conn)
            .await?;
        Ok(row.is_some())
    }

    /// Delete up to `limit` idempotency keys whose window has passed. Returns how many.
    async fn prune_dedup(&self, conn: &mut MySqlConnection, limit: usize) -> Result<usize> {
        let rows = sqlx::query(self.st.get(CLAIM_OLD_DEDUP))
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        let keys = rows
            .iter()
            .map(|r| Ok((r.try_get::<i32, _>(0)?, r.try_get::<Vec<u8>, _>(1)?)))
            .collect::<Result<Vec<_>>>()?;
        for chunk in keys.chunks(crate::store::statements::MAX_LIST) {
            let mut q = sqlx::query(
                self.st
                    .list(DELETE_DEDUP, DEDUP_KEY_ROW, bucket(chunk.len())),
            );
            for (queue_id, key) in padded(chunk) {
                q = q.bind(*queue_id).bind(key.as_slice());
            }
            q.execute(&mut *conn).await?;
        }
        Ok(keys.len())
    }
}

impl MySqlStore {
    /// Release up to `limit` expired leases of `queue_id`, as `decide` settles each (back in
    /// line at once, or dead on the last attempt).
    pub(crate) async fn release_queue_expired(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = sqlx::query(self.st.get(CLAIM_EXPIRED))
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
        conn: &mut MySqlConnection,
        queue_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = sqlx::query(self.st.get(CLAIM_OWNED))
            .bind(queue_id)
            .bind(owner.as_bytes())
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        self.release(conn, queue_id, &rows, decide).await
    }

    /// Release locked lease rows (`id, queue_id, priority, token, attempts, ordering_key, live`).
    async fn release(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        rows: &[MySqlRow],
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
