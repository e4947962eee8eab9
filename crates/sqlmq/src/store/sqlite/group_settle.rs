//! Settling a cluster group's claims: ack, failure (retry on the ladder, or dead), extend, and
//! the releases of expired leases and of dead members' leases. Called by the `Settle`
//! dispatcher (`settle.rs`) for `SourceId::Group`.
//!
//! As for queues, the lease row is the authority: each operation reads its lease rows by
//! primary key and proceeds only for a receipt whose token matches a live lease. The reads
//! need no lock: the settling transaction (`BEGIN IMMEDIATE`) has the database to itself until
//! it commits. Every settlement appends one event to the record's history in the group
//! (`group_history`: state, attempts, and the last 20 events with member, delivery time,
//! outcome and error), which is what `trace` and the dead letters' error lists read. MySQL
//! trims the events in its upsert (`SUBSTRING_INDEX`); here the history rows are read, the
//! event appended and trimmed in Rust, and written back, in the same transaction.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::{SqliteStore, id_at, insert_values, now_us, opt_text_at};
use crate::domain::{
    Decide, DeliveryEvent, Error, MessageId, NackOutcome, Receipt, Released, Result, Settlement,
    micros_of, rfc3339,
};
use crate::store::statements::{MAX_LIST, bucket, padded};

macro_rules! lease_columns {
    () => {
        concat!(
            "SELECT id, partition_no, msg_offset, token, attempts, owner, claimed_at, ",
            "lease_until > ",
            now_us!(),
            ", ",
            now_us!(),
            " FROM {p}group_leases "
        )
    };
}
pub(crate) const GROUP_LEASES: &str =
    concat!(lease_columns!(), "WHERE group_id = ? AND id IN ({list})");
pub(crate) const GROUP_EXPIRED: &str = concat!(
    lease_columns!(),
    "WHERE group_id = ? AND lease_until <= ",
    now_us!(),
    " ORDER BY lease_until LIMIT ?"
);
/// A group's leases held by one owner: the group's in-flight rows, filtered (rare: a member
/// died or left).
const GROUP_OWNED: &str = concat!(lease_columns!(), "WHERE group_id = ? AND owner = ? LIMIT ?");
const DELETE_GROUP_LEASES: &str =
    "DELETE FROM {p}group_leases WHERE group_id = ? AND id IN ({list})";
/// The events of history rows about to get one more (row values through a subquery, for the
/// full primary key lookup, as `LOG_AT` in `group_claim.rs`).
pub(crate) const HISTORY_EVENTS: &str = "SELECT partition_no, msg_offset, events FROM {p}group_history \
    WHERE group_id = ? AND (partition_no, msg_offset) IN \
    (SELECT column1, column2 FROM (VALUES {list}))";
const POSITION_ROW: &str = "(?,?)";
const UPSERT_HISTORY: &str = "INSERT INTO {p}group_history \
    (group_id, partition_no, msg_offset, id, state, attempts, token, settled_at, events) \
    VALUES {list} ON CONFLICT (group_id, partition_no, msg_offset) DO UPDATE SET \
    state = excluded.state, attempts = excluded.attempts, \
    token = excluded.token, settled_at = excluded.settled_at, events = excluded.events";
const HISTORY_ROW: &str = "(?,?,?,?,?,?,?,?,?)";
const UPSERT_RETRIES: &str = "INSERT INTO {p}group_retries \
    (group_id, id, partition_no, msg_offset, run_at, attempts, token) VALUES {list} \
    ON CONFLICT (group_id, id) DO UPDATE SET run_at = excluded.run_at, \
    attempts = excluded.attempts, token = max(token, excluded.token)";
const RETRY_ROW: &str = "(?,?,?,?,?,?,?)";
const UPSERT_DEAD: &str = "INSERT INTO {p}group_dead \
    (group_id, id, partition_no, msg_offset, attempts, token, died_at) VALUES {list} \
    ON CONFLICT (group_id, id) DO UPDATE SET attempts = excluded.attempts, \
    token = max(token, excluded.token), died_at = excluded.died_at";
const DEAD_ROW: &str = "(?,?,?,?,?,?,?)";
const GROUP_EXTEND: &str = concat!(
    "UPDATE {p}group_leases SET lease_until = ",
    now_us!(),
    " + ? WHERE group_id = ? AND id = ? AND token = ? AND lease_until > ",
    now_us!()
);
/// `group_history.state`: waiting for a retry.
pub(crate) const STATE_RETRYING: i64 = 0;
/// `group_history.state`: acked.
pub(crate) const STATE_ACKED: i64 = 1;
/// `group_history.state`: dead-lettered.
pub(crate) const STATE_DEAD: i64 = 2;

/// Events kept per history row (the last ones).
const EVENTS_KEPT: usize = 20;

/// A lease of a group, as read for settling it.
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
    fn decode(row: &SqliteRow) -> Result<GroupLease> {
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

/// `events` with `line` appended, keeping the last [`EVENTS_KEPT`] lines.
fn append_event(events: &[u8], line: &str) -> Vec<u8> {
    let mut all = Vec::with_capacity(events.len() + line.len());
    all.extend_from_slice(events);
    all.extend_from_slice(line.as_bytes());
    let lines = all.split_inclusive(|b| *b == b'\n').count();
    if lines <= EVENTS_KEPT {
        return all;
    }
    all.split_inclusive(|b| *b == b'\n')
        .skip(lines - EVENTS_KEPT)
        .flatten()
        .copied()
        .collect()
}

/// A history row to write: the lease settled, its new state and attempts, the event line.
type HistoryRow<'a> = (&'a GroupLease, i64, i32, String);

impl SqliteStore {
    /// Read the group's lease rows of `ids`.
    async fn group_leases(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<HashMap<MessageId, GroupLease>> {
        let mut out = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_LIST) {
            let mut q =
                sqlx::query(self.st.list(GROUP_LEASES, "?", bucket(chunk.len()))).bind(group_id);
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

    /// Run `template` (the group id, then `{list}` of `?`) over `ids` in padded chunks.
    pub(crate) async fn exec_group_ids(
        &self,
        conn: &mut SqliteConnection,
        template: &'static str,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        let mut affected = 0;
        for chunk in ids.chunks(MAX_LIST) {
            let mut q =
                sqlx::query(self.st.list(template, "?", bucket(chunk.len()))).bind(group_id);
            for id in padded(chunk) {
                q = q.bind(id.bytes());
            }
            affected += q.execute(&mut *conn).await?.rows_affected();
        }
        Ok(affected)
    }

    /// Ack: end every lease a receipt holds, recording it in the history. Returns the receipts
    /// that did not hold theirs (nothing was done for them).
    pub(crate) async fn ack_group(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        let ids: Vec<MessageId> = receipts.iter().map(|r| r.id).collect();
        let mut leases = self.group_leases(conn, group_id, &ids).await?;
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

    /// Upsert the history rows of settled leases, each with its event appended to the events
    /// it had (the last [`EVENTS_KEPT`] kept).
    async fn write_history(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        rows: &[HistoryRow<'_>],
    ) -> Result<()> {
        let mut before: HashMap<(i32, i64), Vec<u8>> = HashMap::new();
        for chunk in rows.chunks(MAX_LIST) {
            let mut q = sqlx::query(self.st.list(
                HISTORY_EVENTS,
                POSITION_ROW,
                bucket(chunk.len()),
            ))
            .bind(group_id);
            for (l, ..) in padded(chunk) {
                q = q.bind(l.partition).bind(l.offset);
            }
            for row in q.fetch_all(&mut *conn).await? {
                before.insert((row.try_get(0)?, row.try_get(1)?), row.try_get(2)?);
            }
        }
        let rows: Vec<(&HistoryRow<'_>, Vec<u8>)> = rows
            .iter()
            .map(|r| {
                let old = before
                    .get(&(r.0.partition, r.0.offset))
                    .map_or(&[][..], Vec::as_slice);
                (r, append_event(old, &r.3))
            })
            .collect();
        insert_values(
            &self.st,
            conn,
            UPSERT_HISTORY,
            HISTORY_ROW,
            9,
            &rows,
            |q, ((l, state, attempts, _), events)| {
                q.bind(group_id)
                    .bind(l.partition)
                    .bind(l.offset)
                    .bind(l.id.bytes())
                    .bind(*state)
                    .bind(*attempts)
                    .bind(l.token)
                    .bind(l.now_us)
                    .bind(events.as_slice())
            },
        )
        .await
    }

    /// Settle a failed or postponed claim: compare-and-set on the lease, then apply the
    /// engine's decision (retry on the group's ladder, or dead-letter).
    pub(crate) async fn fail_group(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> Result<NackOutcome> {
        let mut leases = self.group_leases(conn, group_id, &[receipt.id]).await?;
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

    /// End leases (already read) without an ack: delete them, then retry or bury each as
    /// settled, and record the event.
    async fn end_group_leases(
        &self,
        conn: &mut SqliteConnection,
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
            7,
            &retry,
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
            7,
            &dead,
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
        conn: &mut SqliteConnection,
        group_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> Result<bool> {
        let done = sqlx::query(self.st.get(GROUP_EXTEND))
            .bind(micros_of(lease))
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
        conn: &mut SqliteConnection,
        group_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = sqlx::query(self.st.get(GROUP_EXPIRED))
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
        conn: &mut SqliteConnection,
        group_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = sqlx::query(self.st.get(GROUP_OWNED))
            .bind(group_id)
            .bind(owner.as_bytes())
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        self.release_group_rows(conn, group_id, &rows, decide).await
    }

    async fn release_group_rows(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        rows: &[SqliteRow],
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

    /// After a COMMIT with unknown outcome: whether the ack of `acked` committed. An ack
    /// deletes the lease: it is gone (or belongs to a later claim) iff the ack committed.
    pub(crate) async fn group_acks_committed(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        acked: &[Receipt],
    ) -> Result<bool> {
        let ids: Vec<MessageId> = acked.iter().map(|r| r.id).collect();
        let left = self.group_leases(conn, group_id, &ids).await?;
        Ok(acked
            .iter()
            .all(|r| left.get(&r.id).is_none_or(|l| l.token as u64 != r.token)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_keeps_the_last_twenty_events() {
        let mut events = Vec::new();
        for i in 0..25 {
            events = append_event(&events, &format!("{{\"n\":{i}}}\n"));
        }
        let text = String::from_utf8(events).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), EVENTS_KEPT);
        assert_eq!(lines[0], "{\"n\":5}");
        assert_eq!(lines[19], "{\"n\":24}");
        assert!(text.ends_with('\n'));
        assert_eq!(append_event(b"", "a\n"), b"a\n");
    }
}
