//! Control of running messages: cancelling an in-flight message (`cancels`) and the progress its
//! handler reports (`progress`). What to cancel and when is the engine's (`queue/manage.rs`,
//! `worker/cancel.rs`); these are its statements.
//!
//! A cancel moves the message's lease row out of `leases` into `cancels`, in the transaction
//! that locks the message row. Every settlement of a receipt reads `leases` (the acks, the
//! nacks, the extensions, a durable step's record), so each finds no lease and fails as for a
//! lost lease, whatever path it takes; the failure path asks `cancels` why ([`SqlStore::
//! cancel_reason`]). The message stays in `messages`, its key's head and its concurrency slot
//! held, until its handler gives up (the worker's settle ends it) or its lease would have ended
//! (housekeeping ends it): a handler that ignores the cancel never runs beside a successor.

use super::flows::Ending;
use super::slots::line_key;
use super::{Columns, SqlStore, Statement};
use crate::domain::{MessageId, Receipt, Result};
use crate::store::Backend;

/// The statements of running messages whose text differs by backend. Times are the database
/// clock.
pub struct RunningSql {
    /// Copy a lease into `cancels` (reason, id, queue): one row, or none when the message is not
    /// in flight in that queue.
    pub move_lease: &'static str,
    /// The cancels of a queue whose leases have ended, locked, skipping locked ones (queue, n):
    /// `id, token`.
    pub ended_cancels: &'static str,
    /// Whether a queue has a cancel whose lease has ended (queue): a row or none.
    pub any_ended_cancel: &'static str,
    /// Store a handler's progress while its lease holds (value, id, token): inserts or replaces
    /// one row, none when the lease is gone.
    pub set_progress: &'static str,
    /// The progress of a message's current delivery (id): `value, updated_at (µs)`.
    pub progress: &'static str,
    /// The progress of a queue's in-flight messages (queue, n): `id, value, updated_at (µs)`.
    pub queue_progress: &'static str,
}

/// Delete the lease of a message (id).
const DELETE_LEASE: &str = "DELETE FROM {p}leases WHERE id = ?";
/// A queue's cancelled in-flight messages (queue): `id, token`. The index's prefix: nothing to
/// read when none is cancelled, which is nearly always.
const CANCELLED: &str = "SELECT id, token FROM {p}cancels WHERE queue_id = ?";
/// Why a message was cancelled (id): `reason`.
const REASON: &str = "SELECT reason FROM {p}cancels WHERE id = ?";
/// End a cancel (id, token): one row, or none when it ended already.
const TAKE: &str = "DELETE FROM {p}cancels WHERE id = ? AND token = ?";
/// Forget a message's progress (id).
const CLEAR_PROGRESS: &str = "DELETE FROM {p}progress WHERE id = ?";
/// Progress rows whose delivery ended (queue, n): `id`.
const STALE_PROGRESS: &str = "SELECT p.id FROM {p}progress p LEFT JOIN {p}leases l \
    ON l.id = p.id AND l.token = p.token WHERE p.queue_id = ? AND l.id IS NULL LIMIT ?";
/// Forget progress rows by id (`{list}`).
const DELETE_PROGRESS: &str = "DELETE FROM {p}progress WHERE id IN ({list})";

/// A cancel's `id, token` row as the receipt it withdrew.
fn receipt_of<R: Columns>(row: &R) -> Result<Receipt>
where
    R::Database: super::Types,
{
    Ok(Receipt {
        id: row.id_at(0)?,
        token: row.col::<i64>(1)? as u64,
    })
}

impl<B: Backend> SqlStore<B> {
    /// Cancel the in-flight message `id` of `queue_id` (its row locked by the caller): move its
    /// lease to `cancels`. False when it is not in flight.
    pub(crate) async fn cancel_lease(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        id: MessageId,
        reason: &str,
    ) -> Result<bool> {
        let moved = self
            .query(B::RUNNING.move_lease)
            .arg(reason.as_bytes())
            .arg(id.bytes())
            .arg(queue_id)
            .run(conn)
            .await?;
        if moved == 0 {
            return Ok(false);
        }
        self.query(DELETE_LEASE).arg(id.bytes()).run(conn).await?;
        Ok(true)
    }

    /// Why `id` was cancelled, while its cancel has not ended.
    pub(crate) async fn cancel_reason(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<Option<String>> {
        let row = self.query(REASON).arg(id.bytes()).first(conn).await?;
        let reason: Option<Vec<u8>> = row.map(|r| r.col(0)).transpose()?;
        Ok(reason.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// The receipts of a queue's cancelled in-flight messages.
    pub(crate) async fn cancelled_receipts(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<Vec<Receipt>> {
        let rows = self.query(CANCELLED).arg(queue_id).rows(conn).await?;
        rows.iter().map(receipt_of).collect()
    }

    /// End the cancel of `receipt`: the message is removed for good, its key moves on and its
    /// flow counts it cancelled. False when it had ended already.
    pub(crate) async fn end_cancel(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        receipt: Receipt,
    ) -> Result<bool> {
        let taken = self
            .query(TAKE)
            .arg(receipt.id.bytes())
            .arg(receipt.token as i64)
            .run(conn)
            .await?;
        if taken == 0 {
            return Ok(false);
        }
        self.query(CLEAR_PROGRESS)
            .arg(receipt.id.bytes())
            .run(conn)
            .await?;
        let row = self
            .query(B::ADMIN.lock_message)
            .arg(receipt.id.bytes())
            .first(conn)
            .await?;
        // A purge may have removed the message meanwhile: the cancel was all that was left.
        let Some(row) = row else { return Ok(true) };
        let key: Option<Vec<u8>> = row.col(2)?;
        self.forget_message(conn, queue_id, receipt.id, key, true)
            .await?;
        Ok(true)
    }

    /// End up to `limit` cancels of a queue whose leases have ended. Returns how many.
    pub(crate) async fn end_ended_cancels(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
    ) -> Result<usize> {
        let rows = self
            .query(B::RUNNING.ended_cancels)
            .arg(queue_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        let mut ended = 0;
        for r in &rows {
            if self.end_cancel(conn, queue_id, receipt_of(r)?).await? {
                ended += 1;
            }
        }
        Ok(ended)
    }

    /// Whether a queue has a cancel whose lease has ended (a plain read).
    pub(crate) async fn any_ended_cancel(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<bool> {
        let row = self
            .query(B::RUNNING.any_ended_cancel)
            .arg(queue_id)
            .first(conn)
            .await?;
        Ok(row.is_some())
    }

    /// Remove a message that left its state table for good (cancelled): its row, its key's
    /// turn (`was_head`: it held it), its flow's count.
    pub(crate) async fn forget_message(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        id: MessageId,
        key: Option<Vec<u8>>,
        was_head: bool,
    ) -> Result<()> {
        self.exec_id_list(conn, B::SETTLE.delete_messages, &[id])
            .await?;
        let Some(key) = key else { return Ok(()) };
        let (tracked, line) = line_key(&key);
        if let (true, Some(line)) = (was_head, line) {
            self.release_key(conn, queue_id, line, id).await?;
        }
        if tracked {
            self.end_flow(conn, vec![(id, Ending::Cancelled)]).await?;
        }
        Ok(())
    }

    /// Store `value` as the progress of `receipt`'s delivery. False when the lease is gone.
    pub(crate) async fn set_progress(
        &self,
        conn: &mut B::Connection,
        receipt: Receipt,
        value: &[u8],
    ) -> Result<bool> {
        let done = self
            .query(B::RUNNING.set_progress)
            .arg(value)
            .arg(receipt.id.bytes())
            .arg(receipt.token as i64)
            .run(conn)
            .await?;
        Ok(done > 0)
    }

    /// Forget the progress of a message.
    pub(crate) async fn clear_progress(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<()> {
        self.query(CLEAR_PROGRESS).arg(id.bytes()).run(conn).await?;
        Ok(())
    }

    /// The progress of `id`'s current delivery: the stored JSON and when it was written (µs).
    pub(crate) async fn progress_of(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<Option<(Vec<u8>, i64)>> {
        let row = self
            .query(B::RUNNING.progress)
            .arg(id.bytes())
            .first(conn)
            .await?;
        row.map(|r| Ok((r.col(0)?, r.col(1)?))).transpose()
    }

    /// The progress of up to `limit` in-flight messages of a queue.
    pub(crate) async fn queue_progress(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
    ) -> Result<Vec<(MessageId, Vec<u8>, i64)>> {
        let rows = self
            .query(B::RUNNING.queue_progress)
            .arg(queue_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.id_at(0)?, r.col(1)?, r.col(2)?)))
            .collect()
    }

    /// Up to `limit` progress rows of a queue whose delivery ended without the worker
    /// clearing them (a handler killed, an ack from elsewhere).
    pub(crate) async fn stale_progress(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
    ) -> Result<Vec<MessageId>> {
        let rows = self
            .query(STALE_PROGRESS)
            .arg(queue_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter().map(|r| r.id_at(0)).collect()
    }

    /// Forget the progress rows of `ids`.
    pub(crate) async fn delete_progress(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> Result<()> {
        self.exec_id_list(conn, DELETE_PROGRESS, ids).await?;
        Ok(())
    }
}
