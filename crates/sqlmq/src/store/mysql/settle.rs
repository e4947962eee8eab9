//! Ack, nack and extend: compare-and-set on the lease's fencing token.
//!
//! The lease row is the authority. Each operation first locks the `leases` rows of its receipts
//! (`FOR UPDATE`, by primary key) and proceeds only for rows whose token equals the receipt's and
//! whose lease has not ended by the database clock. A receipt that fails the check changes
//! nothing. Because the expiry sweep takes the same row locks (with `SKIP LOCKED`), an ack and a
//! release of the same message serialise: whichever commits first wins, the other sees a changed
//! or missing row.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use sqlx::mysql::MySqlRow;
use sqlx::{MySql, MySqlConnection, Row};

use super::script::{Lit, Script, rolled_back};
use super::{MySqlStore, exec_id_list, fetch_id_list, id_at, insert_values};
use crate::domain::{Decide, NackOutcome, Released, Settlement};
use crate::domain::{Error, Result};
use crate::domain::{MessageId, Receipt};
use crate::store::rows::Entry;
use crate::store::statements::MAX_LIST;
use crate::store::{Enqueue, QueueSettle, receipts_except};

pub(crate) const LOCK_LEASES: &str = "SELECT id, queue_id, priority, token, attempts, ordering_key, \
    lease_until > UTC_TIMESTAMP(6) FROM {p}leases FORCE INDEX (PRIMARY) WHERE id IN ({list}) FOR UPDATE";
pub(crate) const DELETE_LEASES: &str =
    "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}leases t FORCE INDEX (PRIMARY) ON t.id = v.id";
pub(crate) const DELETE_MESSAGES: &str =
    "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}messages t FORCE INDEX (PRIMARY) ON t.id = v.id";
pub(crate) const EXTEND: &str = "UPDATE {p}leases FORCE INDEX (PRIMARY) \
    SET lease_until = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND) \
    WHERE id = ? AND token = ? AND queue_id = ? AND lease_until > UTC_TIMESTAMP(6)";
const INSERT_DEAD: &str =
    "INSERT INTO {p}dead (id, queue_id, priority, token, attempts, died_at) VALUES {list}";
const DEAD_ROW: &str = "(?,?,?,?,?,UTC_TIMESTAMP(6))";
/// Append one JSON line to the error history and keep the last 20 (the trailing newline makes
/// the 21st field empty). CHAR(10) rather than '\n': NO_BACKSLASH_ESCAPES may be on.
pub(crate) const APPEND_ERROR: &str = "UPDATE {p}messages SET errors = SUBSTRING_INDEX(CONCAT(\
    COALESCE(errors, ''), '{\"attempt\":', ?, ',\"at\":\"', \
    DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ'), '\",\"error\":', ?, '}', CHAR(10)), \
    CHAR(10), -21) WHERE id = ?";

/// Longest error text kept per attempt.
const MAX_ERROR_BYTES: usize = 4096;

/// A locked lease row.
pub(crate) struct Lease {
    pub entry: Entry,
    pub queue_id: i32,
    pub ordering_key: Option<Vec<u8>>,
    pub live: bool,
}

impl Lease {
    /// Decode a row of `id, queue_id, priority, token, attempts, ordering_key, live`.
    pub(crate) fn decode(row: &MySqlRow) -> Result<Lease> {
        Ok(Lease {
            entry: Entry {
                id: id_at(row, 0)?,
                priority: row.try_get(2)?,
                token: row.try_get(3)?,
                attempts: row.try_get(4)?,
            },
            queue_id: row.try_get(1)?,
            ordering_key: row.try_get(5)?,
            live: row.try_get::<i64, _>(6)? != 0,
        })
    }

    /// Whether `receipt` holds this lease.
    fn held_by(&self, receipt: &Receipt, queue_id: i32) -> bool {
        self.live && self.queue_id == queue_id && self.entry.token as u64 == receipt.token
    }
}

/// The ids of `receipts` that hold their leases (each once), and the receipts that do not.
fn split_acks(
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

/// Truncate an error text to the kept length (on a character boundary) and JSON-encode it.
pub(crate) fn error_json(error: &str) -> String {
    let mut end = error.len().min(MAX_ERROR_BYTES);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    serde_json::Value::from(&error[..end]).to_string()
}

impl MySqlStore {
    /// Lock the lease rows of `ids`.
    pub(crate) async fn lock_leases(
        &self,
        conn: &mut MySqlConnection,
        ids: &[MessageId],
    ) -> Result<HashMap<MessageId, Lease>> {
        let rows = fetch_id_list(&self.st, conn, LOCK_LEASES, ids).await?;
        rows.iter()
            .map(|r| Lease::decode(r).map(|l| (l.entry.id, l)))
            .collect()
    }

    /// Ack: delete the message for every receipt that holds its lease. Returns the receipts
    /// that did not (stale token, expired, unknown), which changed nothing.
    pub(crate) async fn ack_queue(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        let ids: Vec<MessageId> = receipts.iter().map(|r| r.id).collect();
        let leases = self.lock_leases(conn, &ids).await?;
        let (acked, lost) = split_acks(&leases, queue_id, receipts);
        self.delete_acked(conn, queue_id, &acked, &leases).await?;
        Ok(lost)
    }

    /// Delete the acked messages and their leases, one prepared statement each, and release
    /// their ordering keys.
    async fn delete_acked(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        acked: &[MessageId],
        leases: &HashMap<MessageId, Lease>,
    ) -> Result<()> {
        if acked.is_empty() {
            return Ok(());
        }
        exec_id_list(&self.st, conn, DELETE_LEASES, acked).await?;
        exec_id_list(&self.st, conn, DELETE_MESSAGES, acked).await?;
        for id in acked {
            if let Some(key) = &leases[id].ordering_key {
                self.release_key(conn, queue_id, key, *id).await?;
            }
        }
        Ok(())
    }

    /// An ack of a queue's receipts in a transaction of its own, in two round trips (see
    /// `script.rs`): the transaction's start with the lease locks, then the deletes with the
    /// COMMIT. Messages with an ordering key release it with statements of their own before
    /// the COMMIT.
    async fn ack_queue_own(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        receipts: &[Receipt],
        acked_out: &Mutex<Vec<Receipt>>,
        op: &'static str,
    ) -> Result<Vec<Receipt>> {
        let ids: Vec<MessageId> = receipts.iter().map(|r| r.id).collect();
        let mut read = Script::begin();
        for chunk in ids.chunks(MAX_LIST) {
            let args: Vec<Lit<'_>> = chunk.iter().map(|id| Lit::Bytes(id.bytes())).collect();
            read.push(&self.st.list_text(LOCK_LEASES, "?", chunk.len()), &args);
        }
        let rows = read.fetch(conn).await?;
        let leases: Result<HashMap<MessageId, Lease>> = rows
            .iter()
            .map(|r| Lease::decode(r).map(|l| (l.entry.id, l)))
            .collect();
        let leases = match leases {
            Ok(leases) => leases,
            Err(e) => return Err(rolled_back(conn, e).await),
        };
        let (acked, lost) = split_acks(&leases, queue_id, receipts);
        *acked_out.lock().expect("poisoned") = receipts_except(receipts, &lost);
        let mut write = Script::default();
        if acked.iter().any(|id| leases[id].ordering_key.is_some()) {
            if let Err(e) = self.delete_acked(conn, queue_id, &acked, &leases).await {
                return Err(rolled_back(conn, e).await);
            }
        } else {
            for chunk in acked.chunks(MAX_LIST) {
                let args: Vec<Lit<'_>> = chunk.iter().map(|id| Lit::Bytes(id.bytes())).collect();
                write.push(&self.st.list_text(DELETE_LEASES, "", chunk.len()), &args);
                write.push(&self.st.list_text(DELETE_MESSAGES, "", chunk.len()), &args);
            }
        }
        write.commit();
        crate::failpoints::before_commit(op).await;
        write.run(conn).await?;
        Ok(lost)
    }

    /// Settle a failed or postponed claim: compare-and-set on the lease, then apply the
    /// engine's decision (retry after a delay, or dead-letter).
    pub(crate) async fn fail_queue(
        &self,
        conn: &mut MySqlConnection,
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

    /// End leases (locked by the caller) without an ack: delete them, record each error, then
    /// put each message back (in `ready` or `scheduled`) or bury it, as settled.
    pub(crate) async fn end_leases(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        endings: Vec<(Lease, Settlement<'_>)>,
    ) -> Result<Released> {
        if endings.is_empty() {
            return Ok(Released::default());
        }
        let ids: Vec<MessageId> = endings.iter().map(|(l, _)| l.entry.id).collect();
        exec_id_list(&self.st, conn, DELETE_LEASES, &ids).await?;
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
                Some(after) => {
                    back.push((lease.entry, after.as_micros().min(i64::MAX as u128) as i64))
                }
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
    pub(crate) async fn bury(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        leases: &[Lease],
    ) -> Result<()> {
        insert_values(
            &self.st,
            conn,
            INSERT_DEAD,
            DEAD_ROW,
            leases,
            MAX_LIST,
            |q, l| {
                q.bind(l.entry.id.bytes())
                    .bind(queue_id)
                    .bind(l.entry.priority)
                    .bind(l.entry.token)
                    .bind(l.entry.attempts)
            },
        )
        .await?;
        for l in leases {
            if let Some(key) = &l.ordering_key {
                self.release_key(conn, queue_id, key, l.entry.id).await?;
            }
        }
        Ok(())
    }

    /// Add an entry to a message's error history.
    pub(crate) async fn append_error(
        &self,
        conn: &mut MySqlConnection,
        id: MessageId,
        attempt: i32,
        error: &str,
    ) -> Result<()> {
        sqlx::query(self.st.get(APPEND_ERROR))
            .bind(attempt)
            .bind(error_json(error))
            .bind(id.bytes())
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Extend a live lease to `lease` from now. Returns false when the receipt does not hold it.
    pub(crate) async fn extend_queue(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> Result<bool> {
        let done = sqlx::query(self.st.get(EXTEND))
            .bind(lease.as_micros().min(i64::MAX as u128) as i64)
            .bind(receipt.id.bytes())
            .bind(receipt.token as i64)
            .bind(queue_id)
            .execute(&mut *conn)
            .await?;
        // sqlx sets CLIENT_FOUND_ROWS, so this counts matched rows; lease_until changes anyway.
        Ok(done.rows_affected() == 1)
    }
}

impl QueueSettle<MySql> for MySqlStore {
    async fn ack_queue(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        MySqlStore::ack_queue(self, conn, queue_id, receipts).await
    }

    async fn ack_queue_own(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        receipts: &[Receipt],
        acked: &Mutex<Vec<Receipt>>,
        op: &'static str,
    ) -> Result<Vec<Receipt>> {
        MySqlStore::ack_queue_own(self, conn, queue_id, receipts, acked, op).await
    }

    async fn queue_acks_committed(
        &self,
        conn: &mut MySqlConnection,
        acked: &[Receipt],
    ) -> Result<bool> {
        let ids: Vec<MessageId> = acked.iter().map(|r| r.id).collect();
        if ids.is_empty() {
            return Ok(true);
        }
        // An ack deletes the message: its rows are gone iff the ack committed. The ack
        // locks the leases from its first round trip on, so locking them first waits out
        // an ack whose COMMIT is still on its way (or in progress) on the lost connection.
        self.lock_leases(conn, &ids).await?;
        Ok(self.count_stored_messages(conn, &ids).await? == 0)
    }

    async fn fail_queue(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> Result<NackOutcome> {
        MySqlStore::fail_queue(self, conn, queue_id, receipt, decide).await
    }

    async fn extend_queue(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> Result<bool> {
        MySqlStore::extend_queue(self, conn, queue_id, receipt, lease).await
    }

    async fn release_queue_expired(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        MySqlStore::release_queue_expired(self, conn, queue_id, limit, decide).await
    }

    async fn release_queue_owned(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        MySqlStore::release_queue_owned(self, conn, queue_id, owner, limit, decide).await
    }
}

#[cfg(test)]
mod tests {
    use super::error_json;

    #[test]
    fn error_texts_are_json_and_bounded() {
        assert_eq!(error_json("a\"b\nc"), r#""a\"b\nc""#);
        let long = "é".repeat(5000);
        let j = error_json(&long);
        assert!(j.len() <= 4096 + 2);
        assert!(serde_json::from_str::<String>(&j).is_ok());
    }
}
