//! Time-driven moves: due messages into `ready`, old idempotency keys away (expired leases are
//! released by `settle.rs`). Each step takes its rows so that any number of processes may run
//! it at once: on a server with `SKIP LOCKED` (two sweepers never take the same row, and a
//! sweeper never waits on an ack in progress); on SQLite the write transaction has the
//! database to itself, so the second sweeper finds the work done.

use super::{Columns, SqlStore, Statement};
use crate::domain::{MessageId, Result};
use crate::store::Backend;
use crate::store::rows::Entry;
use crate::store::statements::{MAX_LIST, bucket, padded};

/// The time-driven moves' statements.
pub struct MaintainSql {
    /// Whether a queue has due delayed messages (queue): a row or none. A plain read.
    pub any_due: &'static str,
    /// Take up to n due delayed messages, earliest first (queue, n): `id, priority, attempts,
    /// token`.
    pub claim_due: &'static str,
    /// Delete `scheduled` rows by id (`{list}` or `{ids}`).
    pub delete_scheduled: &'static str,
    /// Whether a queue has leases that ended (queue): a row or none. A plain read.
    pub any_expired: &'static str,
    /// Take up to n ended leases of a queue, the oldest first (queue, n): the lease columns
    /// `settle.rs` decodes.
    pub claim_expired: &'static str,
    /// Take up to n leases of a queue held by one owner (queue, owner, n): the lease columns.
    pub claim_owned: &'static str,
    /// Take up to n idempotency keys whose window has passed, the oldest first (n):
    /// `queue_id, idempotency_key`.
    pub claim_old_keys: &'static str,
    /// Delete idempotency keys (`{rows}`/`{list}` of the enqueue table's `key_row`).
    pub delete_keys: &'static str,
}

/// Time-driven moves. Each takes its rows so that any number of processes may run it at once.
impl<B: Backend> SqlStore<B> {
    /// Whether the queue has delayed messages that are due (a plain, non-locking read).
    pub(crate) async fn any_due(&self, conn: &mut B::Connection, queue_id: i32) -> Result<bool> {
        let row = self
            .query(B::MAINTAIN.any_due)
            .arg(queue_id)
            .first(conn)
            .await?;
        Ok(row.is_some())
    }

    /// Move up to `limit` due delayed messages into `ready`.
    pub(crate) async fn promote_due(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
    ) -> Result<usize> {
        let rows = self
            .query(B::MAINTAIN.claim_due)
            .arg(queue_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        let due = rows
            .iter()
            .map(|row| {
                let entry = Entry {
                    id: row.id_at(0)?,
                    priority: row.col(1)?,
                    attempts: row.col(2)?,
                    token: row.col(3)?,
                };
                Ok((entry, 0))
            })
            .collect::<Result<Vec<_>>>()?;
        let ids: Vec<MessageId> = due.iter().map(|(e, _)| e.id).collect();
        self.exec_id_list(conn, B::MAINTAIN.delete_scheduled, &ids)
            .await?;
        self.place(conn, queue_id, &due).await?;
        Ok(due.len())
    }

    /// Whether the queue has leases that ended (a plain, non-locking read).
    pub(crate) async fn any_expired(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<bool> {
        let row = self
            .query(B::MAINTAIN.any_expired)
            .arg(queue_id)
            .first(conn)
            .await?;
        Ok(row.is_some())
    }

    /// Delete up to `limit` idempotency keys whose window has passed. Returns how many.
    pub(crate) async fn prune_dedup(
        &self,
        conn: &mut B::Connection,
        limit: usize,
    ) -> Result<usize> {
        let rows = self
            .query(B::MAINTAIN.claim_old_keys)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        let keys = rows
            .iter()
            .map(|r| Ok((r.col::<i32>(0)?, r.col::<Vec<u8>>(1)?)))
            .collect::<Result<Vec<_>>>()?;
        for chunk in keys.chunks(MAX_LIST) {
            let mut q = self.list_query(
                B::MAINTAIN.delete_keys,
                B::ENQUEUE.key_row,
                bucket(chunk.len()),
            );
            for (queue_id, key) in padded(chunk) {
                q = q.arg(*queue_id).arg(key.as_slice());
            }
            q.run(conn).await?;
        }
        Ok(keys.len())
    }
}
