//! Settling a cluster group's claims: ack, failure (retry on the ladder, or dead), extend, and
//! the releases of expired leases and of dead members' leases.
//!
//! As for queues, the lease row is the authority: each operation reads its lease rows by
//! primary key, locking them (MySQL `FOR UPDATE`; SQLite's settling transaction has the
//! database to itself), and proceeds only for a receipt whose token matches a live lease.
//! Every settlement appends one event to the record's history in the group (`group_history`:
//! state, attempts, and the last `domain::GROUP_EVENTS_KEPT` events with member, delivery
//! time, outcome and error), which is what `trace` and the dead letters' error lists read. How
//! the event joins the events already stored differs by backend: MySQL appends and trims in
//! its upsert; SQLite reads the events first ([`Dialect::group_history_events`]).
//!
//! [`Dialect::group_history_events`]: super::Dialect::group_history_events

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::group_state::{STATE_ACKED, STATE_DEAD, STATE_RETRYING};
use super::{Beside, Columns, SqlStore, Statement};
use crate::domain::{
    Decide, DeliveryEvent, Error, MessageId, NackOutcome, Receipt, Released, Result, Settlement,
    micros_of, rfc3339,
};
use crate::store::{Backend, ack_in_own_transaction};

/// The statements of settling a group's claims. Times are the database clock; durations and
/// times are bound as microseconds (since the epoch for times).
///
/// The lease columns, in order: `id, partition, offset, token, attempts, owner, claimed (µs),
/// live (1 while the lease has not ended), now (µs)`.
pub struct GroupSettleSql {
    /// The group's leases of some ids, locked: group id, then `{list}` of ids → lease columns.
    pub lock_leases: &'static str,
    /// Up to `limit` expired leases of the group, soonest expired first, locked (skipping those
    /// another transaction holds): group id, limit → lease columns.
    pub claim_expired: &'static str,
    /// Up to `limit` of the group's leases held by one owner, locked (skipping those another
    /// transaction holds): group id, owner, limit → lease columns.
    pub claim_owned: &'static str,
    /// Delete the group's leases of some ids: the ids (`{ids}` or `{list}`), then group id.
    pub delete_leases: &'static str,
    /// Insert or update history rows (`VALUES {list}` of `history_row`): per row group id,
    /// partition, offset, id, state, attempts, token, settled (µs), events. An update sets the
    /// row's events to the stored ones followed by the bound ones, the last
    /// `domain::GROUP_EVENTS_KEPT` kept, unless the backend's
    /// [`Dialect::group_history_events`](super::Dialect::group_history_events) did that
    /// already (then it sets the bound ones).
    pub upsert_history: &'static str,
    /// One row of `upsert_history`.
    pub history_row: &'static str,
    /// Insert or update retries (`VALUES {list}` of `retry_row`): per row group id, id,
    /// partition, offset, due (µs), attempts, token. An update keeps the larger token.
    pub upsert_retries: &'static str,
    /// One row of `upsert_retries`.
    pub retry_row: &'static str,
    /// Insert or update dead letters (`VALUES {list}` of `dead_row`): per row group id, id,
    /// partition, offset, attempts, token, died (µs). An update keeps the larger token.
    pub upsert_dead: &'static str,
    /// One row of `upsert_dead`.
    pub dead_row: &'static str,
    /// Push a live lease's end to now plus a duration, if the token matches: duration (µs),
    /// group id, id, token.
    pub extend: &'static str,
}

/// Parameters of a `history_row`, a `retry_row`, a `dead_row`.
const HISTORY_PARAMS: usize = 9;
const RETRY_PARAMS: usize = 7;
const DEAD_PARAMS: usize = 7;

/// Longest error text kept per event.
const MAX_ERROR_BYTES: usize = 4096;

/// A group's lease, as read (and locked) for settling it.
#[derive(Clone, Debug)]
pub struct GroupLease {
    pub id: MessageId,
    pub partition: i32,
    pub offset: i64,
    pub token: i64,
    pub attempts: i32,
    pub owner: Option<String>,
    pub claimed_us: i64,
    pub live: bool,
    /// The database clock when it was read.
    pub now_us: i64,
}

impl GroupLease {
    /// Decode the lease columns.
    fn decode<B: Backend>(row: &B::Row) -> Result<GroupLease> {
        Ok(GroupLease {
            id: row.id_at(0)?,
            partition: row.col(1)?,
            offset: row.col(2)?,
            token: row.col(3)?,
            attempts: row.col(4)?,
            owner: row.opt_text_at(5)?,
            claimed_us: row.col(6)?,
            live: row.col::<i64>(7)? != 0,
            now_us: row.col(8)?,
        })
    }

    fn held_by(&self, receipt: &Receipt) -> bool {
        self.live && self.token as u64 == receipt.token
    }
}

/// A history row to write: a settled lease, the record's new state and attempts, and the
/// events to bind — the new event's line (one JSON object and a newline), which
/// [`Dialect::group_history_events`](super::Dialect::group_history_events) may turn into the
/// whole column.
pub struct HistoryRow<'a> {
    pub lease: &'a GroupLease,
    pub state: i8,
    pub attempts: i32,
    pub events: Vec<u8>,
}

impl<'a> HistoryRow<'a> {
    /// The row of `lease` settled into `state` with `outcome`.
    fn new(
        lease: &'a GroupLease,
        state: i8,
        attempts: i32,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<HistoryRow<'a>> {
        let event = DeliveryEvent {
            attempt: lease.attempts.max(0) as u32,
            member: lease.owner.clone(),
            delivered_at: rfc3339(lease.claimed_us),
            at: rfc3339(lease.now_us),
            outcome: outcome.to_owned(),
            error: error.map(truncate_error),
        };
        let mut events = serde_json::to_vec(&event)?;
        events.push(b'\n');
        Ok(HistoryRow {
            lease,
            state,
            attempts,
            events,
        })
    }
}

fn truncate_error(error: &str) -> String {
    let mut end = error.len().min(MAX_ERROR_BYTES);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    error[..end].to_owned()
}

impl<B: Backend> SqlStore<B> {
    /// Lock the group's lease rows of `ids`.
    async fn lock_group_leases(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<HashMap<MessageId, GroupLease>> {
        let rows = self
            .fetch_ids_beside(
                conn,
                B::GROUP_SETTLE.lock_leases,
                Beside::Before(group_id),
                ids,
            )
            .await?;
        rows.iter()
            .map(|r| GroupLease::decode::<B>(r).map(|l| (l.id, l)))
            .collect()
    }

    /// Delete the group's leases of `ids`.
    async fn delete_group_leases(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<()> {
        self.exec_ids_beside(
            conn,
            B::GROUP_SETTLE.delete_leases,
            Beside::After(group_id),
            ids,
        )
        .await?;
        Ok(())
    }

    /// Upsert the history rows of settled leases, each with its event appended to the events
    /// it had (the last `domain::GROUP_EVENTS_KEPT` kept).
    async fn write_history(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        mut rows: Vec<HistoryRow<'_>>,
    ) -> Result<()> {
        B::group_history_events(self, conn, group_id, &mut rows).await?;
        let sql = &B::GROUP_SETTLE;
        self.insert_values(
            conn,
            sql.upsert_history,
            sql.history_row,
            HISTORY_PARAMS,
            &rows,
            |q, r| {
                q.arg(group_id)
                    .arg(r.lease.partition)
                    .arg(r.lease.offset)
                    .arg(r.lease.id.bytes())
                    .arg(i32::from(r.state))
                    .arg(r.attempts)
                    .arg(r.lease.token)
                    .arg(r.lease.now_us)
                    .arg(r.events.as_slice())
            },
        )
        .await
    }

    /// End leases (already locked) without an ack: delete them, then retry or bury each as
    /// settled, and record the event.
    async fn end_group_leases(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        endings: &[(GroupLease, Settlement<'_>)],
    ) -> Result<Released> {
        if endings.is_empty() {
            return Ok(Released::default());
        }
        let sql = &B::GROUP_SETTLE;
        let ids: Vec<MessageId> = endings.iter().map(|(l, _)| l.id).collect();
        self.delete_group_leases(conn, group_id, &ids).await?;
        let (retry, dead): (Vec<_>, Vec<_>) =
            endings.iter().partition(|(_, s)| s.retry_after.is_some());
        let run_at = |l: &GroupLease, s: &Settlement<'_>| {
            let after = s.retry_after.unwrap_or_default();
            l.now_us.saturating_add(micros_of(after))
        };
        let attempts = |s: &Settlement<'_>| s.attempts.min(i32::MAX as u32) as i32;
        self.insert_values(
            conn,
            sql.upsert_retries,
            sql.retry_row,
            RETRY_PARAMS,
            &retry,
            |q, (l, s)| {
                q.arg(group_id)
                    .arg(l.id.bytes())
                    .arg(l.partition)
                    .arg(l.offset)
                    .arg(run_at(l, s))
                    .arg(attempts(s))
                    .arg(l.token)
            },
        )
        .await?;
        self.insert_values(
            conn,
            sql.upsert_dead,
            sql.dead_row,
            DEAD_PARAMS,
            &dead,
            |q, (l, s)| {
                q.arg(group_id)
                    .arg(l.id.bytes())
                    .arg(l.partition)
                    .arg(l.offset)
                    .arg(attempts(s))
                    .arg(l.token)
                    .arg(l.now_us)
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
                HistoryRow::new(l, state, attempts(s), s.outcome, s.error)
            })
            .collect::<Result<Vec<_>>>()?;
        self.write_history(conn, group_id, history).await?;
        Ok(Released {
            released: retry.len(),
            dead_lettered: dead.len(),
        })
    }

    /// Settle the leases of `rows` (lease columns, locked) as `decide` settles each.
    async fn release_group_rows(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        rows: &[B::Row],
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let endings = rows
            .iter()
            .map(|row| {
                let lease = GroupLease::decode::<B>(row)?;
                let settlement = decide(lease.attempts.max(0) as u32);
                Ok((lease, settlement))
            })
            .collect::<Result<Vec<_>>>()?;
        self.end_group_leases(conn, group_id, &endings).await
    }
}

/// Ack, fail, extend and release the leases of a cluster group's records, as
/// `SqlStore` does for a queue's messages.
impl<B: Backend> SqlStore<B> {
    /// Ack: end every lease a receipt holds, recording it in the history. Returns the receipts
    /// that did not hold theirs (nothing was done for them).
    pub(crate) async fn ack_group(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        // A lone receipt (a job transaction's, the acker's when one is due): in one statement
        // where the backend can.
        if let [receipt] = receipts
            && let Some(held) = B::ack_group_one(self, conn, group_id, receipt).await?
        {
            return Ok(if held { Vec::new() } else { vec![*receipt] });
        }
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
        self.delete_group_leases(conn, group_id, &ids).await?;
        let history = acked
            .iter()
            .map(|l| HistoryRow::new(l, STATE_ACKED, l.attempts, "acked", None))
            .collect::<Result<Vec<_>>>()?;
        self.write_history(conn, group_id, history).await?;
        Ok(lost)
    }

    /// `SqlStore::ack_group` in a transaction of its own (see
    /// `SqlStore::ack_queue_own`).
    pub(crate) async fn ack_group_own(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        receipts: &[Receipt],
        acked: &Mutex<Vec<Receipt>>,
        op: &'static str,
    ) -> Result<Vec<Receipt>> {
        ack_in_own_transaction!(conn, receipts, acked, op, |tx| self
            .ack_group(&mut *tx, group_id, receipts))
    }

    /// After a COMMIT with unknown outcome, on a new connection: whether the ack of `acked`
    /// committed (each lease is gone, or belongs to a later claim).
    ///
    /// An ack deletes the lease: it is gone (or belongs to a later claim) iff the ack
    /// committed.
    pub(crate) async fn group_acks_committed(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        acked: &[Receipt],
    ) -> Result<bool> {
        let ids: Vec<MessageId> = acked.iter().map(|r| r.id).collect();
        if ids.is_empty() {
            return Ok(true);
        }
        let left = self.lock_group_leases(conn, group_id, &ids).await?;
        Ok(acked
            .iter()
            .all(|r| left.get(&r.id).is_none_or(|l| l.token as u64 != r.token)))
    }

    /// End a claim without an ack, as `decide` settles it: `LeaseLost` (and nothing changed)
    /// when the receipt does not hold the lease.
    ///
    /// Settle a failed or postponed claim: compare-and-set on the lease, then apply the
    /// engine's decision (retry on the group's ladder, or dead-letter).
    pub(crate) async fn fail_group(
        &self,
        conn: &mut B::Connection,
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

    /// Extend a live lease to `lease` from now. False when the receipt does not hold it.
    pub(crate) async fn extend_group(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> Result<bool> {
        let done = self
            .query(B::GROUP_SETTLE.extend)
            .arg(micros_of(lease))
            .arg(group_id)
            .arg(receipt.id.bytes())
            .arg(receipt.token as i64)
            .run(conn)
            .await?;
        Ok(done == 1)
    }

    /// Release up to `limit` expired leases, as `decide` settles each.
    pub(crate) async fn release_group_expired(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = self
            .query(B::GROUP_SETTLE.claim_expired)
            .arg(group_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        self.release_group_rows(conn, group_id, &rows, decide).await
    }

    /// Release up to `limit` leases held by `owner`, whatever their expiry, as `decide`
    /// settles each.
    pub(crate) async fn release_group_owned(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        let rows = self
            .query(B::GROUP_SETTLE.claim_owned)
            .arg(group_id)
            .arg(owner.as_bytes())
            .arg(limit as i64)
            .rows(conn)
            .await?;
        self.release_group_rows(conn, group_id, &rows, decide).await
    }
}
