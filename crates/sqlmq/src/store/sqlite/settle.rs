//! Ack, nack and extend of queue leases: compare-and-set on the lease's fencing token (the
//! group half is `group_settle.rs`; queue lease releases are in `maintain.rs`).
//!
//! The lease row is the authority, as on MySQL: each operation reads the `leases` rows of its
//! receipts and proceeds only for rows whose token equals the receipt's and whose lease has not
//! ended by the database clock. A receipt that fails the check changes nothing.
//!
//! What SQLite makes simpler: the engine runs these in a write transaction that has the
//! database to itself, so the lease rows need no lock (`FOR UPDATE`): an ack and a release of
//! the same message are serialised by the write lock, and the second sees a changed or missing
//! row. The error history is trimmed in Rust (MySQL uses `SUBSTRING_INDEX`), read and written
//! back inside the transaction.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};

use super::{SqliteStore, exec_id_list, fetch_id_list, id_at, insert_values, now_text, now_us};
use crate::domain::{Decide, Error, MessageId, NackOutcome, Receipt, Released, Result, Settlement};
use crate::store::rows::Entry;
use std::sync::Mutex;

use crate::store::{Enqueue, QueueSettle, ack_in_own_transaction};

const LEASES: &str = concat!(
    "SELECT id, queue_id, priority, token, attempts, ordering_key, lease_until > ",
    now_us!(),
    " FROM {p}leases WHERE id IN ({list})"
);
pub(crate) const DELETE_LEASES: &str = "DELETE FROM {p}leases WHERE id IN ({list})";
pub(crate) const DELETE_MESSAGES: &str = "DELETE FROM {p}messages WHERE id IN ({list})";
const EXTEND: &str = concat!(
    "UPDATE {p}leases SET lease_until = ",
    now_us!(),
    " + ? WHERE id = ? AND token = ? AND queue_id = ? AND lease_until > ",
    now_us!()
);
const INSERT_DEAD: &str =
    "INSERT INTO {p}dead (id, queue_id, priority, token, attempts, died_at) VALUES {list}";
const DEAD_ROW: &str = concat!("(?,?,?,?,?,", now_us!(), ")");
const DEAD_PARAMS: usize = 5;
/// A message's error history and the database clock as the history records it.
const ERRORS_OF: &str = concat!(
    "SELECT errors, ",
    now_text!(),
    " FROM {p}messages WHERE id = ?"
);
const SET_ERRORS: &str = "UPDATE {p}messages SET errors = ? WHERE id = ?";

/// Longest error text kept per attempt.
const MAX_ERROR_BYTES: usize = 4096;
/// Entries kept in a message's error history (the latest).
const MAX_ERRORS: usize = 20;

/// A lease row, read inside the write transaction.
pub(crate) struct Lease {
    pub entry: Entry,
    pub queue_id: i32,
    pub ordering_key: Option<Vec<u8>>,
    pub live: bool,
}

impl Lease {
    /// Decode a row of `id, queue_id, priority, token, attempts, ordering_key, live`.
    pub(crate) fn decode(row: &SqliteRow) -> Result<Lease> {
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

/// Truncate an error text to the kept length (on a character boundary) and JSON-encode it.
pub(crate) fn error_json(error: &str) -> String {
    let mut end = error.len().min(MAX_ERROR_BYTES);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    serde_json::Value::from(&error[..end]).to_string()
}

/// `history` (one JSON object per line, each ending with a newline) with `line` appended,
/// keeping the last [`MAX_ERRORS`] lines.
fn append_line(history: &str, line: &str) -> String {
    let mut lines: Vec<&str> = history.lines().filter(|l| !l.is_empty()).collect();
    lines.push(line);
    let keep = &lines[lines.len().saturating_sub(MAX_ERRORS)..];
    let mut out = String::with_capacity(keep.iter().map(|l| l.len() + 1).sum());
    for l in keep {
        out.push_str(l);
        out.push('\n');
    }
    out
}

impl SqliteStore {
    /// The lease rows of `ids`.
    pub(crate) async fn queue_leases_of(
        &self,
        conn: &mut SqliteConnection,
        ids: &[MessageId],
    ) -> Result<HashMap<MessageId, Lease>> {
        let rows = fetch_id_list(&self.st, conn, LEASES, ids).await?;
        rows.iter()
            .map(|r| Lease::decode(r).map(|l| (l.entry.id, l)))
            .collect()
    }

    /// Ack: delete the message for every receipt that holds its lease. Returns the receipts
    /// that did not (stale token, expired, unknown), which changed nothing.
    pub(crate) async fn ack_queue(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        let ids: Vec<MessageId> = receipts.iter().map(|r| r.id).collect();
        let leases = self.queue_leases_of(conn, &ids).await?;
        let mut acked = Vec::with_capacity(receipts.len());
        let mut lost = Vec::new();
        for r in receipts {
            match leases.get(&r.id) {
                Some(l) if l.held_by(r, queue_id) && !acked.contains(&r.id) => acked.push(r.id),
                _ => lost.push(*r),
            }
        }
        if acked.is_empty() {
            return Ok(lost);
        }
        exec_id_list(&self.st, conn, DELETE_LEASES, &acked).await?;
        exec_id_list(&self.st, conn, DELETE_MESSAGES, &acked).await?;
        for id in &acked {
            if let Some(key) = &leases[id].ordering_key {
                self.release_key(conn, queue_id, key, *id).await?;
            }
        }
        Ok(lost)
    }

    /// Settle a failed or postponed claim: compare-and-set on the lease, then apply the
    /// engine's decision (retry after a delay, or dead-letter).
    pub(crate) async fn fail_queue(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> Result<NackOutcome> {
        let mut leases = self.queue_leases_of(conn, &[receipt.id]).await?;
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

    /// End leases without an ack: delete them, record each error, then put each message back
    /// (in `ready` or `scheduled`) or bury it, as settled.
    pub(crate) async fn end_leases(
        &self,
        conn: &mut SqliteConnection,
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
    async fn bury(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        leases: &[Lease],
    ) -> Result<()> {
        insert_values(
            &self.st,
            conn,
            INSERT_DEAD,
            DEAD_ROW,
            DEAD_PARAMS,
            leases,
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

    /// Add an entry to a message's error history (`{"attempt":…,"at":"…","error":…}`, the
    /// line MySQL writes), keeping the last 20.
    async fn append_error(
        &self,
        conn: &mut SqliteConnection,
        id: MessageId,
        attempt: i32,
        error: &str,
    ) -> Result<()> {
        let Some(row) = sqlx::query(self.st.get(ERRORS_OF))
            .bind(id.bytes())
            .fetch_optional(&mut *conn)
            .await?
        else {
            return Ok(());
        };
        let history: Option<Vec<u8>> = row.try_get(0)?;
        let at: String = row.try_get(1)?;
        let line = format!(
            "{{\"attempt\":{attempt},\"at\":\"{at}\",\"error\":{}}}",
            error_json(error)
        );
        let history = history.as_deref().map(String::from_utf8_lossy);
        let errors = append_line(history.as_deref().unwrap_or_default(), &line);
        sqlx::query(self.st.get(SET_ERRORS))
            .bind(errors.as_bytes())
            .bind(id.bytes())
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Extend a live lease to `lease` from now. Returns false when the receipt does not hold it.
    pub(crate) async fn extend_queue(
        &self,
        conn: &mut SqliteConnection,
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
        Ok(done.rows_affected() == 1)
    }
}

impl QueueSettle<Sqlite> for SqliteStore {
    async fn ack_queue(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        SqliteStore::ack_queue(self, conn, queue_id, receipts).await
    }

    async fn ack_queue_own(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        receipts: &[Receipt],
        acked: &Mutex<Vec<Receipt>>,
        op: &'static str,
    ) -> Result<Vec<Receipt>> {
        type B = Sqlite;
        ack_in_own_transaction!(conn, receipts, acked, op, |tx| SqliteStore::ack_queue(
            self, &mut tx, queue_id, receipts
        ))
    }

    async fn queue_acks_committed(
        &self,
        conn: &mut SqliteConnection,
        acked: &[Receipt],
    ) -> Result<bool> {
        let ids: Vec<MessageId> = acked.iter().map(|r| r.id).collect();
        if ids.is_empty() {
            return Ok(true);
        }
        // An ack deletes the message: its rows are gone iff the ack committed.
        Ok(self.count_stored_messages(conn, &ids).await? == 0)
    }

    async fn fail_queue(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> Result<NackOutcome> {
        SqliteStore::fail_queue(self, conn, queue_id, receipt, decide).await
    }

    async fn extend_queue(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> Result<bool> {
        SqliteStore::extend_queue(self, conn, queue_id, receipt, lease).await
    }

    async fn release_queue_expired(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        SqliteStore::release_queue_expired(self, conn, queue_id, limit, decide).await
    }

    async fn release_queue_owned(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        SqliteStore::release_queue_owned(self, conn, queue_id, owner, limit, decide).await
    }
}

#[cfg(test)]
mod tests {
    use super::{append_line, error_json};
    use crate::domain::parse_errors;

    #[test]
    fn error_texts_are_json_and_bounded() {
        assert_eq!(error_json("a\"b\nc"), r#""a\"b\nc""#);
        let long = "é".repeat(5000);
        let j = error_json(&long);
        assert!(j.len() <= 4096 + 2);
        assert!(serde_json::from_str::<String>(&j).is_ok());
    }

    #[test]
    fn histories_keep_the_last_twenty_lines() {
        let mut history = String::new();
        for i in 1..=25 {
            let line = format!(
                "{{\"attempt\":{i},\"at\":\"2026-01-01T00:00:00.000Z\",\"error\":{}}}",
                error_json("boom\nline")
            );
            history = append_line(&history, &line);
        }
        let errors = parse_errors(Some(&history));
        assert_eq!(errors.len(), 20);
        assert_eq!(errors[0].attempt, 6);
        assert_eq!(errors[19].attempt, 25);
        assert_eq!(errors[19].error, "boom\nline");
        assert!(history.ends_with('\n'));
    }
}
