//! The claim: move up to n ready messages into `leases` with fresh fencing tokens.
//!
//! One short READ COMMITTED transaction: a `SKIP LOCKED` read of the head of the queue's range
//! of `ready`'s primary key `(queue_id, priority, vt, id)` — the clustered index is the claim
//! order (a fair queue's messages by virtual start time within a priority, every other queue's,
//! at vt 0, by arrival), so the scan stops after n unlocked rows, takes one lock per row and
//! never sorts — joined to the message rows for their bodies; then a delete of those `ready`
//! rows and an insert into `leases`. In a transaction of its own that is one prepared `CALL
//! {p}claim_vt(…)` (`claim_vt.sql`, see `procedures.rs`), one statement and one round trip,
//! answering one result set with the claim read's columns; where the server refuses it, and in
//! the caller's transaction, two text scripts (see `script.rs`): the read, then the moves with
//! the COMMIT. Nothing stays open while a handler runs.
//!
//! The take (`Queue::take_in`) is the same read in the caller's transaction followed by the
//! deletes of the `ready` and `messages` rows: receive-and-delete, two row changes per message
//! instead of the claim's and ack's four, with the caller's commit making it final.

use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlx::MySqlConnection;
use sqlx::mysql::MySqlRow;

use super::procedures;
use super::script::{Lit, Script, rolled_back};
use super::settle::DELETE_MESSAGES;
use super::{MySqlStore, micros};
use crate::domain::{Delivery, Result, micros_of, micros_of_time};
use crate::store::Claim;
use crate::store::body::Columns;
use crate::store::body::claim::deliveries;
use crate::store::body::slots::stored_key_of;
use crate::store::rows::ClaimRequest;
use crate::store::statements::MAX_LIST;

/// The claim read. The paused check is an uncorrelated subquery: a locking read does not lock
/// rows of a subquery, so claims never contend on the queue row (checked in tests).
pub(crate) const CLAIM: &str = concat!(
    "SELECT r.id, r.priority, r.attempts, r.token, m.ordering_key, m.idempotency_key, ",
    "m.headers, m.body, ",
    micros!("m.created_at"),
    ", ",
    micros!("UTC_TIMESTAMP(6)"),
    ", ",
    micros!("m.deadline_at"),
    ", m.run_timeout_us, r.vt FROM {p}ready r FORCE INDEX (PRIMARY) ",
    "STRAIGHT_JOIN {p}messages m ON m.id = r.id ",
    "WHERE r.queue_id = ? AND NOT EXISTS ",
    "(SELECT 1 FROM {p}queues q WHERE q.id = ? AND q.paused <> 0) ",
    "ORDER BY r.priority, r.vt, r.id LIMIT ? FOR UPDATE SKIP LOCKED"
);
/// The claim read's column of a row's start time (after the columns `deliveries` reads): the
/// moves delete the `ready` rows by primary key.
const VT_COLUMN: usize = 12;
/// Delete claimed `ready` rows by primary key.
pub(super) const DELETE_CLAIMED: &str = "DELETE t FROM ({rows}) v STRAIGHT_JOIN {p}ready t \
    FORCE INDEX (PRIMARY) ON t.queue_id = v.q AND t.priority = v.p AND t.vt = v.vt \
    AND t.id = v.id";
/// One row of [`DELETE_CLAIMED`]'s derived table: a `ready` primary key.
pub(super) const CLAIMED_ROW: &str = "SELECT CAST(? AS SIGNED) AS q, CAST(? AS SIGNED) AS p, \
    CAST(? AS SIGNED) AS vt, CAST(? AS BINARY) AS id";
/// The internal procedure's call (schema version 16, `claim_vt.sql`): queue, n, lease (µs),
/// owner. It answers one result set with the claim read's columns, before its COMMIT.
const CALL_CLAIM: &str = "CALL {p}claim_vt(?, ?, ?, ?)";
const INSERT_LEASES: &str = "INSERT INTO {p}leases \
    (id, queue_id, priority, token, attempts, ordering_key, lease_until, claimed_at, owner) \
    VALUES {list}";
const LEASE_ROW: &str =
    "(?,?,?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),UTC_TIMESTAMP(6),?)";

impl Claim for sqlx::MySql {
    /// One round trip: the procedure's call; or, where the server refuses it, two (see
    /// `script.rs`): the transaction's start with the claim read, then the moves from `ready`
    /// to `leases` with the COMMIT (an empty claim commits alone).
    async fn claim(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        request: &ClaimRequest<'_>,
        op: &'static str,
    ) -> Result<Vec<Delivery>> {
        store.claim_statements(conn, request, Some(op)).await
    }

    /// The same statements in the caller's transaction: the claim read, then (when it found
    /// anything) the moves, without BEGIN or COMMIT.
    async fn claim_in(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        request: &ClaimRequest<'_>,
    ) -> Result<Vec<Delivery>> {
        store.claim_statements(conn, request, None).await
    }

    /// Two round trips, as the claim: the claim read, then (when it found anything) the
    /// deletes of the `ready` and `messages` rows; messages with an ordering key release it
    /// with statements of their own, as an ack does; late ones are moved into `leases` in the
    /// same round trip, as a claim moves them.
    async fn take_in(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        request: &ClaimRequest<'_>,
        late: &(dyn Fn(&Delivery) -> bool + Sync),
    ) -> Result<(Vec<Delivery>, Vec<Delivery>)> {
        let queue_id = request.queue_id;
        let rows = store
            .claim_read(queue_id, request.n, false)
            .fetch_in(conn)
            .await?;
        let (late, taken): (Vec<_>, Vec<_>) = claimed_rows(&rows, request.lease)?
            .into_iter()
            .partition(|(d, _)| late(d));
        if rows.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut write = store.claim_moves(queue_id, &late, request.owner);
        for chunk in taken.chunks(MAX_LIST) {
            store.push_delete_ready(&mut write, queue_id, chunk);
            let ids: Vec<Lit<'_>> = chunk
                .iter()
                .map(|(d, _)| Lit::Bytes(d.id.bytes()))
                .collect();
            write.push(&store.st.list_text(DELETE_MESSAGES, "", chunk.len()), &ids);
        }
        write.run_in(conn).await?;
        let (taken, _): (Vec<Delivery>, Vec<i64>) = taken.into_iter().unzip();
        store.release_keys_of(conn, queue_id, &taken).await?;
        Ok((taken, late.into_iter().map(|(d, _)| d).collect()))
    }
}

impl MySqlStore {
    /// The claim; with `own` (the unit's name) in a transaction of its own — the procedure's
    /// call while the server allows it, else two scripts that open and commit it and roll it
    /// back on an error — without it, the two scripts in the caller's transaction.
    async fn claim_statements(
        &self,
        conn: &mut MySqlConnection,
        request: &ClaimRequest<'_>,
        own: Option<&'static str>,
    ) -> Result<Vec<Delivery>> {
        let ClaimRequest {
            queue_id,
            n,
            lease,
            owner,
        } = *request;
        let Some(op) = own else {
            let rows = self.claim_read(queue_id, n, false).fetch_in(conn).await?;
            let claimed = claimed_rows(&rows, lease)?;
            if !claimed.is_empty() {
                self.claim_moves(queue_id, &claimed, owner)
                    .run_in(conn)
                    .await?;
            }
            return Ok(claimed.into_iter().map(|(d, _)| d).collect());
        };
        if self.state.claim.load(Ordering::Relaxed) {
            crate::failpoints::before_commit(op).await;
            match self.claim_call(conn, request).await {
                // The final answer came: the claim committed.
                Ok(rows) => return deliveries(&rows, lease),
                Err(e) if procedures::refused(&e) => {
                    procedures::give_up(&self.state.claim, "claim", 16, &e);
                }
                // The procedure may have begun its transaction: end it.
                Err(e) => return Err(rolled_back(conn, e).await),
            }
        }
        let rows = self.claim_read(queue_id, n, true).fetch(conn).await?;
        let claimed = match claimed_rows(&rows, lease) {
            Ok(claimed) => claimed,
            Err(e) => return Err(rolled_back(conn, e).await),
        };
        let mut write = self.claim_moves(queue_id, &claimed, owner);
        write.commit();
        crate::failpoints::before_commit(op).await;
        write.run(conn).await?;
        Ok(claimed.into_iter().map(|(d, _)| d).collect())
    }

    /// The claim as the procedure's call: its answer rows, read to the final OK (which says
    /// it committed).
    async fn claim_call(
        &self,
        conn: &mut MySqlConnection,
        request: &ClaimRequest<'_>,
    ) -> Result<Vec<sqlx::mysql::MySqlRow>> {
        Ok(sqlx::query(self.st.get(CALL_CLAIM))
            .bind(request.queue_id)
            .bind(request.n as i32)
            .bind(micros_of(request.lease))
            .bind(request.owner.as_bytes())
            .fetch_all(&mut *conn)
            .await?)
    }

    /// The claim read of up to `n` messages, after a `START TRANSACTION` when `begin`.
    fn claim_read(&self, queue_id: i32, n: usize, begin: bool) -> Script {
        let q = i64::from(queue_id);
        let mut read = if begin {
            Script::begin(self)
        } else {
            Script::new(self)
        };
        read.push(
            self.st.get(CLAIM).as_str(),
            &[Lit::Int(q), Lit::Int(q), Lit::Int(n as i64)],
        );
        read
    }

    /// The moves of `claimed` (with their start times) from `ready` into `leases`.
    fn claim_moves(&self, queue_id: i32, claimed: &[(Delivery, i64)], owner: &str) -> Script {
        let q = i64::from(queue_id);
        let mut write = Script::new(self);
        for chunk in claimed.chunks(MAX_LIST) {
            self.push_delete_ready(&mut write, queue_id, chunk);
            let keys: Vec<Option<String>> = chunk.iter().map(|(d, _)| stored_key_of(d)).collect();
            let leases: Vec<Lit<'_>> = chunk
                .iter()
                .zip(&keys)
                .flat_map(|((d, _), key)| {
                    [
                        Lit::Bytes(d.id.bytes()),
                        Lit::Int(q),
                        Lit::Int(d.priority.into()),
                        Lit::Int(d.token as i64),
                        Lit::Int(d.attempt.into()),
                        key.as_deref().map(str::as_bytes).into(),
                        Lit::Int(micros_of_time(d.lease_expires_at)),
                        Lit::Bytes(owner.as_bytes()),
                    ]
                })
                .collect();
            write.push(
                &self.st.list_text(INSERT_LEASES, LEASE_ROW, chunk.len()),
                &leases,
            );
        }
        write
    }

    /// Add to `script` the delete of the `ready` rows of `chunk` (at most `MAX_LIST`), by
    /// primary key.
    fn push_delete_ready(&self, script: &mut Script, queue_id: i32, chunk: &[(Delivery, i64)]) {
        let q = i64::from(queue_id);
        let keys: Vec<Lit<'_>> = chunk
            .iter()
            .flat_map(|(d, vt)| {
                [
                    Lit::Int(q),
                    Lit::Int(d.priority.into()),
                    Lit::Int(*vt),
                    Lit::Bytes(d.id.bytes()),
                ]
            })
            .collect();
        script.push(
            &self.st.list_text(DELETE_CLAIMED, CLAIMED_ROW, chunk.len()),
            &keys,
        );
    }
}

/// The claim read's rows as deliveries, each with its start time.
fn claimed_rows(rows: &[MySqlRow], lease: Duration) -> Result<Vec<(Delivery, i64)>> {
    deliveries(rows, lease)?
        .into_iter()
        .zip(rows)
        .map(|(d, row)| Ok((d, row.col(VT_COLUMN)?)))
        .collect()
}
