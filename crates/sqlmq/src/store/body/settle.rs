//! Ack, nack and extend of a queue's leases: compare-and-set on the lease's fencing token; and
//! what becomes of a lease that ends without an ack (error history, back in line or dead).
//!
//! The lease row is the authority. Each operation first reads the `leases` rows of its
//! receipts — on a server locking them (`FOR UPDATE`, by primary key); on SQLite the write
//! transaction has the database to itself — and proceeds only for rows whose token equals the
//! receipt's and whose lease has not ended by the database clock. A receipt that fails the
//! check changes nothing. Because the expiry sweep takes the same row locks (with `SKIP
//! LOCKED`), an ack and a release of the same message serialise: whichever commits first wins,
//! the other sees a changed or missing row.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::flows::Ending;
use super::{Columns, SqlStore, Statement};
use crate::domain::{
    Decide, Error, MAX_ERROR_HISTORY, MessageId, NackOutcome, Receipt, Released, Result,
    Settlement, append_error, error_json, micros_of,
};
use crate::store::Backend;
use crate::store::rows::Entry;

/// How a backend adds an entry to a message's error history (keeping the last
/// [`MAX_ERROR_HISTORY`]).
pub enum ErrorHistory {
    /// One statement does it: attempt, the error as JSON text, how many newline-ended fields
    /// to keep counting from the end (the last entries, plus the empty field after the final
    /// newline) as a negative number, id.
    InSql(&'static str),
    /// Read the history and the database clock as RFC 3339 text with `read` (id:
    /// `errors, now`), append in Rust, write it back with `write` (history, id).
    ReadWrite {
        read: &'static str,
        write: &'static str,
    },
}

/// The settling statements that differ by backend.
pub struct SettleSql {
    /// Lease rows by id, locked (`{list}` of ids): `id, queue_id, priority, token, attempts,
    /// ordering_key, whether the lease is live`.
    pub lock_leases: &'static str,
    /// Delete leases by id (`{list}` or `{ids}`).
    pub delete_leases: &'static str,
    /// Delete messages by id (`{list}` or `{ids}`).
    pub delete_messages: &'static str,
    /// Push a live lease's end to now plus a duration: µs, id, token, queue.
    pub extend: &'static str,
    /// One row of [`INSERT_DEAD`]: id, queue, priority, token, attempts (it died now).
    pub dead_row: &'static str,
    /// Adding to a message's error history.
    pub error_history: ErrorHistory,
}

const INSERT_DEAD: &str =
    "INSERT INTO {p}dead (id, queue_id, priority, token, attempts, died_at) VALUES {list}";
const DEAD_PARAMS: usize = 5;

/// A lease row, read (locked, on a server) by its settlement.
pub(crate) struct Lease {
    pub entry: Entry,
    pub queue_id: i32,
    pub ordering_key: Option<Vec<u8>>,
    pub live: bool,
}

impl Lease {
    /// Decode a row of `id, queue_id, priority, token, attempts, ordering_key, live`.
    pub(crate) fn decode<R: Columns>(row: &R) -> Result<Lease>
    where
        R::Database: super::Types,
    {
        Ok(Lease {
            entry: Entry {
                id: row.id_at(0)?,
                priority: row.col(2)?,
                token: row.col(3)?,
                attempts: row.col(4)?,
            },
            queue_id: row.col(1)?,
            ordering_key: row.col(5)?,
            live: row.col::<i64>(6)? != 0,
        })
    }

    /// Whether `receipt` holds this lease.
    fn held_by(&self, receipt: &Receipt, queue_id: i32) -> bool {
        self.live && self.queue_id == queue_id && self.entry.token as u64 == receipt.token
    }
}

/// The ids of `receipts` that hold their leases (each once), and the receipts that do not.
pub(crate) fn split_acks(
    leases: &HashMap<MessageId, Lease>,
    queue_id: i32,
    receipts: &[Receipt],
) -> (Vec<MessageId>, Vec<Receipt>) {
    let mut acked = Vec::with_capacity(receipts.len());
    let mut lost = Vec::new();
    for r in receipts {
        match leases.get(&r.id) {
            Some(l) if l.held_by(r, queue_id) && !acked.contains(&r.id) => acked.push(r.id),
            _ => lost.push(*r),
        }
    }
    (acked, lost)
}

/// Ack, fail, extend and release the leases of a queue's messages.
impl<B: Backend> SqlStore<B> {
    /// Ack every receipt that holds its lease. Returns the receipts that did not (stale token,
    /// expired, unknown): nothing was done for them.
    pub(crate) async fn ack_queue(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        let ids: Vec<MessageId> = receipts.iter().map(|r| r.id).collect();
        let leases = self.lock_leases(conn, &ids).await?;
        let (acked, lost) = split_acks(&leases, queue_id, receipts);
        self.delete_acked(conn, queue_id, &acked, &leases).await?;
        Ok(lost)
    }

    /// After a COMMIT with unknown outcome, on a new connection: whether the ack of `acked`
    /// (receipts that held their leases) committed.
    ///
    /// An ack deletes the message: its rows are gone iff the ack committed. The ack locks the
    /// leases from its first statement on, so locking them first waits out an ack whose COMMIT
    /// is still on its way (or in progress) on the lost connection.
    pub(crate) async fn queue_acks_committed(
        &self,
        conn: &mut B::Connection,
        acked: &[Receipt],
    ) -> Result<bool> {
        let ids: Vec<MessageId> = acked.iter().map(|r| r.id).collect();
        if ids.is_empty() {
            return Ok(true);
        }
        self.lock_leases(conn, &ids).await?;
        Ok(self.count_stored_messages(conn, &ids).await? == 0)
    }

    /// End a claim without an ack, as `decide` settles it: `LeaseLost` (and nothing changed)
    /// when the receipt does not hold the lease.
    pub(crate) async fn fail_queue(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> Result<NackOutcome> {
        let mut leases = self.lock_leases(conn, &[receipt.id]).await?;
        let lease = match leases.remove(&receipt.id) {
            Some(l) if l.held_by(receipt, queue_id) => l,
            _ => {
                return Err(Error::LeaseLost {
                    id: receipt.id,
                    token: receipt.token,
                });
            }
        };
        let settlement = decide(lease.entry.attempts.max(0) as u32);
        self.end_leases(conn, queue_id, vec![(lease, settlement)])
            .await?;
        Ok(settlement.nack_outcome())
    }

    /// Extend a live lease to `lease` from now. False when the receipt does not hold it.
    pub(crate) async fn extend_queue(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> Result<bool> {
        // On MySQL sqlx sets CLIENT_FOUND_ROWS, so this counts matched rows even when the new
        // end equals the old.
        let done = self
            .query(B::SETTLE.extend)
            .arg(micros_of(lease))
            .arg(receipt.id.bytes())
            .arg(receipt.token as i64)
            .arg(queue_id)
            .run(conn)
            .await?;
        Ok(done == 1)
    }

    /// Release up to `limit` expired leases, as `decide` settles each.
    pub(crate) async fn release_queue_expired(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = self
            .query(B::MAINTAIN.claim_expired)
            .arg(queue_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        self.release(conn, queue_id, &rows, decide).await
    }

    /// Release up to `limit` leases held by `owner` (a process that died or left), whatever
    /// their expiry, as `decide` settles each.
    pub(crate) async fn release_queue_owned(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = self
            .query(B::MAINTAIN.claim_owned)
            .arg(queue_id)
            .arg(owner.as_bytes())
            .arg(limit as i64)
            .rows(conn)
            .await?;
        self.release(conn, queue_id, &rows, decide).await
    }
}

impl<B: Backend> SqlStore<B> {
    /// The lease rows of `ids`, locked on a server.
    pub(crate) async fn lock_leases(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> Result<HashMap<MessageId, Lease>> {
        let rows = self.fetch_id_list(conn, B::SETTLE.lock_leases, ids).await?;
        rows.iter()
            .map(|r| Lease::decode(r).map(|l| (l.entry.id, l)))
            .collect()
    }

    /// Delete the acked messages and their leases, one statement each, and release their
    /// ordering keys.
    pub(crate) async fn delete_acked(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        acked: &[MessageId],
        leases: &HashMap<MessageId, Lease>,
    ) -> Result<()> {
        if acked.is_empty() {
            return Ok(());
        }
        self.exec_id_list(conn, B::SETTLE.delete_leases, acked)
            .await?;
        self.exec_id_list(conn, B::SETTLE.delete_messages, acked)
            .await?;
        let gone = acked
            .iter()
            .filter_map(|id| Some((leases[id].ordering_key.clone()?, *id)));
        self.release_keys(conn, queue_id, gone.collect(), Ending::Acked)
            .await
    }

    /// Release locked lease rows (`id, queue_id, priority, token, attempts, ordering_key,
    /// live`), as `decide` settles each (back in line, or dead on the last attempt).
    async fn release(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        rows: &[B::Row],
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

    /// End leases (locked by the caller) without an ack: delete them, record each error, then
    /// put each message back (in `ready` or `scheduled`) or bury it, as settled.
    pub(crate) async fn end_leases(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        endings: Vec<(Lease, Settlement<'_>)>,
    ) -> Result<Released> {
        if endings.is_empty() {
            return Ok(Released::default());
        }
        let ids: Vec<MessageId> = endings.iter().map(|(l, _)| l.entry.id).collect();
        self.exec_id_list(conn, B::SETTLE.delete_leases, &ids)
            .await?;
        for (l, s) in &endings {
            if let Some(error) = s.error {
                self.append_error(conn, l.entry.id, l.entry.attempts, error)
                    .await?;
            }
        }
        let mut back = Vec::new();
        let mut dead = Vec::new();
        for (mut lease, s) in endings {
            lease.entry.attempts = s.attempts.min(i32::MAX as u32) as i32;
            match s.retry_after {
                Some(after) => back.push((lease.entry, micros_of(after))),
                None => dead.push(lease),
            }
        }
        self.place(conn, queue_id, &back).await?;
        self.bury(conn, queue_id, &dead).await?;
        Ok(Released {
            released: back.len(),
            dead_lettered: dead.len(),
        })
    }

    /// Move leased messages (already deleted from `leases`) to the dead letters, and let their
    /// keys move on.
    async fn bury(&self, conn: &mut B::Connection, queue_id: i32, leases: &[Lease]) -> Result<()> {
        self.insert_values(
            conn,
            INSERT_DEAD,
            B::SETTLE.dead_row,
            DEAD_PARAMS,
            leases,
            |q, l| {
                q.arg(l.entry.id.bytes())
                    .arg(queue_id)
                    .arg(l.entry.priority)
                    .arg(l.entry.token)
                    .arg(l.entry.attempts)
            },
        )
        .await?;
        let gone = leases
            .iter()
            .filter_map(|l| Some((l.ordering_key.clone()?, l.entry.id)));
        self.release_keys(conn, queue_id, gone.collect(), Ending::Dead)
            .await
    }

    /// Add an entry to a message's error history (`{"attempt":…,"at":"…","error":…}`), keeping
    /// the last [`MAX_ERROR_HISTORY`].
    async fn append_error(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
        attempt: i32,
        error: &str,
    ) -> Result<()> {
        match B::SETTLE.error_history {
            ErrorHistory::InSql(statement) => {
                self.query(statement)
                    .arg(attempt)
                    .arg(error_json(error))
                    .arg(-(MAX_ERROR_HISTORY as i64 + 1))
                    .arg(id.bytes())
                    .run(conn)
                    .await?;
            }
            ErrorHistory::ReadWrite { read, write } => {
                let Some(row) = self.query(read).arg(id.bytes()).first(conn).await? else {
                    return Ok(());
                };
                let history: Option<Vec<u8>> = row.col(0)?;
                let at: String = row.col(1)?;
                let history = history.as_deref().map(String::from_utf8_lossy);
                let errors =
                    append_error(history.as_deref().unwrap_or_default(), attempt, &at, error);
                self.query(write)
                    .arg(errors.as_bytes())
                    .arg(id.bytes())
                    .run(conn)
                    .await?;
            }
        }
        Ok(())
    }
}

/// `SqlStore::ack_queue_own` as BEGIN, `SqlStore::ack_queue` and COMMIT: what a
/// backend without a shorter path runs.
pub(crate) async fn ack_queue_in_own_transaction<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    queue_id: i32,
    receipts: &[Receipt],
    acked: &Mutex<Vec<Receipt>>,
    op: &'static str,
) -> Result<Vec<Receipt>> {
    crate::store::ack_in_own_transaction!(conn, receipts, acked, op, |tx| store
        .ack_queue(&mut tx, queue_id, receipts))
}
