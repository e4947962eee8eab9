//! Settling a cluster group's claims: ack, failure (retry on the ladder, or dead), extend, and
//! the releases of expired leases and of dead members' leases.
//!
//! As for queues, the lease row is the authority: each operation locks its lease rows by
//! primary key and proceeds only for a receipt whose token matches a live lease. Every
//! settlement appends one event to the record's history in the group (`group_history`: state,
//! attempts, and the last 20 events with member, delivery time, outcome and error), which is
//! what `trace` and the dead letters' error lists read.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::{MySqlStore, id_at, insert_values, micros, opt_text_at};
use crate::domain::{Decide, NackOutcome, Released, Settlement};
use crate::domain::{DeliveryEvent, rfc3339};
use crate::domain::{Error, Result, micros_of};
use crate::domain::{MessageId, Receipt};
use crate::store::statements::padded;
use crate::store::statements::{MAX_LIST, bucket};

macro_rules! lease_columns {
    () => {
        concat!(
            "SELECT id, partition_no, msg_offset, token, attempts, owner, ",
            micros!("claimed_at"),
            ", lease_until > UTC_TIMESTAMP(6), ",
            micros!("UTC_TIMESTAMP(6)"),
            " FROM {p}group_leases "
        )
    };
}
pub(crate) const LOCK_GROUP_LEASES: &str = concat!(
    lease_columns!(),
    "FORCE INDEX (PRIMARY) WHERE group_id = ? AND id IN ({list}) FOR UPDATE"
);
pub(crate) const CLAIM_GROUP_EXPIRED: &str = concat!(
    lease_columns!(),
    "FORCE INDEX (expiry) WHERE group_id = ? AND lease_until <= UTC_TIMESTAMP(6) ",
    "ORDER BY lease_until LIMIT ? FOR UPDATE SKIP LOCKED"
);
/// A group's leases held by one owner: the group's in-flight rows, filtered (rare: a member
/// died or left).
pub(crate) const CLAIM_GROUP_OWNED: &str = concat!(
    lease_columns!(),
    "FORCE INDEX (expiry) WHERE group_id = ? AND owner = ? LIMIT ? FOR UPDATE SKIP LOCKED"
);
pub(crate) const DELETE_GROUP_LEASES: &str = "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}group_leases t \
    FORCE INDEX (PRIMARY) ON t.group_id = ? AND t.id = v.id";
pub(crate) const UPSERT_HISTORY: &str = "INSERT INTO {p}group_history \
    (group_id, partition_no, msg_offset, id, state, attempts, token, settled_at, events) \
    VALUES {list} ON DUPLICATE KEY UPDATE state = VALUES(state), attempts = VALUES(attempts), \
    token = VALUES(token), settled_at = VALUES(settled_at), \
    events = SUBSTRING_INDEX(CONCAT(events, VALUES(events)), CHAR(10), -21)";
const HISTORY_ROW: &str =
    "(?,?,?,?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),?)";
pub(crate) const UPSERT_RETRIES: &str = "INSERT INTO {p}group_retries \
    (group_id, id, partition_no, msg_offset, run_at, attempts, token) VALUES {list} \
    ON DUPLICATE KEY UPDATE run_at = VALUES(run_at), attempts = VALUES(attempts), \
    token = GREATEST(token, VALUES(token))";
const RETRY_ROW: &str = "(?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),?,?)";
pub(crate) const UPSERT_DEAD: &str = "INSERT INTO {p}group_dead \
    (group_id, id, partition_no, msg_offset, attempts, token, died_at) VALUES {list} \
    ON DUPLICATE KEY UPDATE attempts = VALUES(attempts), token = GREATEST(token, VALUES(token)), \
    died_at = VALUES(died_at)";
const DEAD_ROW: &str = "(?,?,?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND))";
pub(crate) const GROUP_EXTEND: &str = "UPDATE {p}group_leases FORCE INDEX (PRIMARY) \
    SET lease_until = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND) \
    WHERE group_id = ? AND id = ? AND token = ? AND lease_until > UTC_TIMESTAMP(6)";
/// `group_history.state`: waiting for a retry.
pub(crate) const STATE_RETRYING: i8 = 0;
/// `group_history.state`: acked.
pub(crate) const STATE_ACKED: i8 = 1;
/// `group_history.state`: dead-lettered.
pub(crate) const STATE_DEAD: i8 = 2;

/// A locked lease of a group.
#[derive(Clone, Debug)]
pub(crate) struct GroupLease {
    pub id: MessageId,
    pub partition: i32,
    pub offset: i64,
    pub token: i64,
    pub attempts: i32,
    pub owner: Option<String>,
    pub claimed_us: i64,
    pub live: bool,
    pub now_us: i64,
}

impl GroupLease {
    fn decode(row: &MySqlRow) -> Result<GroupLease> {
        Ok(GroupLease {
            id: id_at(row, 0)?,
            partition: row.try_get(1)?,
            offset: row.try_get(2)?,
            token: row.try_get(3)?,
            attempts: row.try_get(4)?,
            owner: opt_text_at(row, 5)?,
            claimed_us: row.try_get(6)?,
            live: row.try_get::<i64, _>(7)? != 0,
            now_us: row.try_get(8)?,
        })
    }

    fn held_by(&self, receipt: &Receipt) -> bool {
        self.live && self.token as u64 == receipt.token
    }
}

/// The history line (one JSON object and a newline) of a lease settled with `outcome`.
fn event_line(lease: &GroupLease, outcome: &str, error: Option<&str>) -> Result<String> {
    let event = DeliveryEvent {
        attempt: lease.attempts.max(0) as u32,
        member: lease.owner.clone(),
        delivered_at: rfc3339(lease.claimed_us),
        at: rfc3339(lease.now_us),
        outcome: outcome.to_owned(),
        error: error.map(truncate_error),
    };
    Ok(serde_json::to_string(&event)? + "\n")
}

/// Longest error text kept per event.
const MAX_ERROR_BYTES: usize = 4096;

fn truncate_error(error: &str) -> String {
    let mut end = error.len().min(MAX_ERROR_BYTES);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    error[..end].to_owned()
}

impl MySqlStore {
    /// Lock the group's lease rows of `ids`.
    pub(crate) async fn lock_group_leases(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<HashMap<MessageId, GroupLease>> {
        let mut out = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_LIST) {
            let mut q = sqlx::query(self.st.list(LOCK_GROUP_LEASES, "?", bucket(chunk.len())))
                .bind(group_id);
            for id in padded(chunk) {
                q = q.bind(id.bytes());
            }
            for row in q.fetch_all(&mut *conn).await? {
                let lease = GroupLease::decode(&row)?;
                out.insert(lease.id, lease);
            }
        }
        Ok(out)
    }

    /// Ack: end every lease a receipt holds, recording it in the history. Returns the receipts
    /// that did not hold theirs (nothing was done for them).
    pub(crate) async fn ack_group(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        let ids: Vec<MessageId> = receipts.iter().map(|r| r.id).collect();
        let mut leases = self.lock_group_leases(conn, group_id, &ids).await?;
        let mut acked = Vec::with_capacity(receipts.len());
        let mut lost = Vec::new();
        for r in receipts {
            match leases.remove(&r.id) {
                Some(l) if l.held_by(r) => acked.push(l),
                _ => lost.push(*r),
            }
        }
        if acked.is_empty() {
            return Ok(lost);
        }
        let ids: Vec<MessageId> = acked.iter().map(|l| l.id).collect();
        self.exec_group_ids(conn, DELETE_GROUP_LEASES, group_id, &ids)
            .await?;
        let history = acked
            .iter()
            .map(|l| Ok((l, STATE_ACKED, l.attempts, event_line(l, "acked", None)?)))
            .collect::<Result<Vec<_>>>()?;
        self.write_history(conn, group_id, &history).await?;
        Ok(lost)
    }

    async fn write_history(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        rows: &[(&GroupLease, i8, i32, String)],
    ) -> Result<()> {
        insert_values(
            &self.st,
            conn,
            UPSERT_HISTORY,
            HISTORY_ROW,
            rows,
            MAX_LIST,
            |q, (l, state, attempts, line)| {
                q.bind(group_id)
                    .bind(l.partition)
                    .bind(l.offset)
                    .bind(l.id.bytes())
                    .bind(*state)
                    .bind(*attempts)
                    .bind(l.token)
                    .bind(l.now_us)
                    .bind(line.as_bytes())
            },
        )
        .await
    }

    /// Settle a failed or postponed claim: compare-and-set on the lease, then apply the
    /// engine's decision (retry on the group's ladder, or dead-letter).
    pub(crate) async fn fail_group(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> Result<NackOutcome> {
        let mut leases = self
            .lock_group_leases(conn, group_id, &[receipt.id])
            .await?;
        let lease = match leases.remove(&receipt.id) {
            Some(l) if l.held_by(receipt) => l,
            _ => {
                return Err(Error::LeaseLost {
                    id: receipt.id,
                    token: receipt.token,
                });
            }
        };
        let settlement = decide(lease.attempts.max(0) as u32);
        self.end_group_leases(conn, group_id, &[(lease, settlement)])
            .await?;
        Ok(settlement.nack_outcome())
    }

    /// End leases (already locked) without an ack: delete them, then retry or bury each as
    /// settled, and record the event.
    pub(crate) async fn end_group_leases(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        endings: &[(GroupLease, Settlement<'_>)],
    ) -> Result<Released> {
        if endings.is_empty() {
            return Ok(Released::default());
        }
        let ids: Vec<MessageId> = endings.iter().map(|(l, _)| l.id).collect();
        self.exec_group_ids(conn, DELETE_GROUP_LEASES, group_id, &ids)
            .await?;
        let (retry, dead): (Vec<_>, Vec<_>) =
            endings.iter().partition(|(_, s)| s.retry_after.is_some());
        let run_at = |(l, s): &&(GroupLease, Settlement<'_>)| {
            let after = s.retry_after.unwrap_or_default();
            l.now_us.saturating_add(micros_of(after))
        };
        let attempts = |s: &Settlement<'_>| s.attempts.min(i32::MAX as u32) as i32;
        insert_values(
            &self.st,
            conn,
            UPSERT_RETRIES,
            RETRY_ROW,
            &retry,
            MAX_LIST,
            |q, e| {
                q.bind(group_id)
                    .bind(e.0.id.bytes())
                    .bind(e.0.partition)
                    .bind(e.0.offset)
                    .bind(run_at(e))
                    .bind(attempts(&e.1))
                    .bind(e.0.token)
            },
        )
        .await?;
        insert_values(
            &self.st,
            conn,
            UPSERT_DEAD,
            DEAD_ROW,
            &dead,
            MAX_LIST,
            |q, (l, s)| {
                q.bind(group_id)
                    .bind(l.id.bytes())
                    .bind(l.partition)
                    .bind(l.offset)
                    .bind(attempts(s))
                    .bind(l.token)
                    .bind(l.now_us)
            },
        )
        .await?;
        let history = endings
            .iter()
            .map(|(l, s)| {
                let state = if s.retry_after.is_some() {
                    STATE_RETRYING
                } else {
                    STATE_DEAD
                };
                let line = event_line(l, s.outcome, s.error)?;
                Ok((l, state, attempts(s), line))
            })
            .collect::<Result<Vec<_>>>()?;
        self.write_history(conn, group_id, &history).await?;
        Ok(Released {
            released: retry.len(),
            dead_lettered: dead.len(),
        })
    }

    /// Extend a live lease to `lease` from now. False when the receipt does not hold it.
    pub(crate) async fn extend_group(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> Result<bool> {
        let done = sqlx::query(self.st.get(GROUP_EXTEND))
            .bind(lease.as_micros().min(i64::MAX as u128) as i64)
            .bind(group_id)
            .bind(receipt.id.bytes())
            .bind(receipt.token as i64)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Release up to `limit` expired leases of `group_id`, as `decide` settles each.
    pub(crate) async fn release_group_expired(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = sqlx::query(self.st.get(CLAIM_GROUP_EXPIRED))
            .bind(group_id)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        self.release_group_rows(conn, group_id, &rows, decide).await
    }

    /// Release up to `limit` leases of `group_id` held by `owner` (a member that died or
    /// left), as `decide` settles each.
    pub(crate) async fn release_group_owned(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = sqlx::query(self.st.get(CLAIM_GROUP_OWNED))
            .bind(group_id)
            .bind(owner.as_bytes())
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        self.release_group_rows(conn, group_id, &rows, decide).await
    }

    async fn release_group_rows(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        rows: &[MySqlRow],
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let endings = rows
            .iter()
            .map(|row| {
                let lease = GroupLease::decode(row)?;
                let settlement = decide(lease.attempts.max(0) as u32);
                Ok((lease, settlement))
            })
            .collect::<Result<Vec<_>>>()?;
        self.end_group_leases(conn, group_id, &endings).await
    }
}
