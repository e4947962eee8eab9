//! The claim: move up to n ready messages into `leases` with fresh fencing tokens.
//!
//! One short write transaction, as on MySQL: read the head of the queue's range of `ready`'s
//! primary key `(queue_id, priority, id)` (a `WITHOUT ROWID` table is stored in that order, so
//! the scan stops after n rows and never sorts) joined to the message rows for their bodies;
//! delete those `ready` rows; insert the leases.
//!
//! What SQLite makes simpler: the transaction has the database to itself (`BEGIN IMMEDIATE`),
//! so there is nothing to skip (`SKIP LOCKED`) and nothing can take the rows between the read
//! and the delete. The delete therefore selects the same rows again, in one statement, instead of
//! listing their keys.
//!
//! The take (`Queue::take_in`) is the same read and delete in the caller's transaction, then
//! the delete of the messages (no lease).

use std::time::Duration;

use sqlx::{Connection, Sqlite, SqliteConnection};

use super::{SqliteStore, now_us};
use crate::domain::{Delivery, Error, MessageId, Result, micros_of};
use crate::store::body::claim::deliveries;
use crate::store::body::slots::stored_key_of;
use crate::store::body::{Columns, Dialect, Statement};
use crate::store::rows::ClaimRequest;
use crate::store::{Claim, begin_pooled};

/// The claim read and the delete of the rows it read, in an order of `ready`.
macro_rules! claim_statements {
    ($order:literal) => {
        (
            concat!(
                "SELECT r.id, r.priority, r.attempts, r.token, m.ordering_key, m.idempotency_key, ",
                "m.headers, m.body, m.created_at, ",
                now_us!(),
                ", m.deadline_at, m.run_timeout_us",
                " FROM {p}ready r JOIN {p}messages m ON m.id = r.id ",
                "WHERE r.queue_id = ?1 AND NOT EXISTS ",
                "(SELECT 1 FROM {p}queues q WHERE q.id = ?1 AND q.paused <> 0) ",
                "ORDER BY ",
                $order,
                " LIMIT ?2"
            ),
            concat!(
                "DELETE FROM {p}ready WHERE queue_id = ?1 AND (priority, id) IN ",
                "(SELECT r.priority, r.id FROM {p}ready r JOIN {p}messages m ON m.id = r.id ",
                "WHERE r.queue_id = ?1 ORDER BY ",
                $order,
                " LIMIT ?2)"
            ),
        )
    };
}
/// The claim read (nothing when the queue is paused), and the delete of the rows it just read:
/// the same selection again (same join, order and limit, `?2` being how many it returned),
/// which nothing else can have changed in between.
const CLAIM: (&str, &str) = claim_statements!("r.priority, r.id");
/// A fair queue's: in start-time order within a priority (`store/body/fair.rs`).
const CLAIM_FAIR: (&str, &str) = claim_statements!("r.priority, r.vt, r.id");
const INSERT_LEASES: &str = "INSERT INTO {p}leases \
    (id, queue_id, priority, token, attempts, ordering_key, lease_until, claimed_at, owner) \
    VALUES {list}";
const LEASE_ROW: &str = "(?,?,?,?,?,?,?,?,?)";
const LEASE_PARAMS: usize = 9;

impl Claim for sqlx::Sqlite {
    /// BEGIN IMMEDIATE, the claim's statements, COMMIT: SQLite runs in this process, there are
    /// no round trips to save.
    async fn claim(
        store: &SqliteStore,
        conn: &mut SqliteConnection,
        request: &ClaimRequest<'_>,
        op: &'static str,
    ) -> Result<Vec<Delivery>> {
        let mut tx = conn.begin_with(begin_pooled::<Sqlite>()).await?;
        let claimed = sqlx::Sqlite::claim_in(store, &mut tx, request).await?;
        crate::failpoints::before_commit(op).await;
        tx.commit().await?;
        Ok(claimed)
    }

    /// The claim's statements, in the caller's transaction.
    async fn claim_in(
        store: &SqliteStore,
        conn: &mut SqliteConnection,
        request: &ClaimRequest<'_>,
    ) -> Result<Vec<Delivery>> {
        let ClaimRequest {
            queue_id,
            n,
            lease,
            owner,
        } = *request;
        let order = store.claim_order(conn, queue_id).await?;
        let (claimed, now_us) = store.claim_read(conn, order, queue_id, n, lease).await?;
        if claimed.is_empty() {
            return Ok(claimed);
        }
        store
            .delete_head(conn, order, queue_id, claimed.len())
            .await?;
        store
            .insert_leases(conn, queue_id, &claimed, now_us, lease, owner)
            .await?;
        Ok(claimed)
    }

    /// The claim read, then the deletes of the same `ready` rows and of the messages; keyed
    /// messages release their keys, as an ack does.
    async fn take_in(
        store: &SqliteStore,
        conn: &mut SqliteConnection,
        request: &ClaimRequest<'_>,
        late: &(dyn Fn(&Delivery) -> bool + Sync),
    ) -> Result<(Vec<Delivery>, Vec<Delivery>)> {
        let ClaimRequest {
            queue_id,
            n,
            lease,
            owner,
        } = *request;
        let order = store.claim_order(conn, queue_id).await?;
        let (read, now_us) = store.claim_read(conn, order, queue_id, n, lease).await?;
        if read.is_empty() {
            return Ok((read, Vec::new()));
        }
        // Before the keys are released: a successor placed in `ready` could fall inside the
        // head range that `delete_head` selects again, and be deleted in a taken one's place.
        store.delete_head(conn, order, queue_id, read.len()).await?;
        let (late, taken): (Vec<_>, Vec<_>) = read.into_iter().partition(|d| late(d));
        store
            .insert_leases(conn, queue_id, &late, now_us, lease, owner)
            .await?;
        if taken.is_empty() {
            return Ok((taken, late));
        }
        let ids: Vec<MessageId> = taken.iter().map(|d| d.id).collect();
        store
            .exec_id_list(conn, Sqlite::SETTLE.delete_messages, &ids)
            .await?;
        store.release_keys_of(conn, queue_id, &taken).await?;
        Ok((taken, late))
    }
}

impl SqliteStore {
    /// The claim's statements for `queue_id`'s mode.
    async fn claim_order(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
    ) -> Result<(&'static str, &'static str)> {
        Ok(if self.is_fair(conn, queue_id).await? {
            CLAIM_FAIR
        } else {
            CLAIM
        })
    }

    /// The claim read of up to `n` messages leased for `lease`, and the database's now (µs).
    async fn claim_read(
        &self,
        conn: &mut SqliteConnection,
        (read, _): (&'static str, &'static str),
        queue_id: i32,
        n: usize,
        lease: Duration,
    ) -> Result<(Vec<Delivery>, i64)> {
        let rows = self
            .query(read)
            .arg(queue_id)
            .arg(n as i64)
            .rows(conn)
            .await?;
        let now_us = match rows.first() {
            Some(row) => row.col(9)?,
            None => 0,
        };
        Ok((deliveries(&rows, lease)?, now_us))
    }

    /// Lease `claimed` (read by the claim at `now_us`) for `lease` to `owner`.
    async fn insert_leases(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        claimed: &[Delivery],
        now_us: i64,
        lease: Duration,
        owner: &str,
    ) -> Result<()> {
        let lease_until_us = now_us.saturating_add(micros_of(lease));
        self.insert_values(
            conn,
            INSERT_LEASES,
            LEASE_ROW,
            LEASE_PARAMS,
            claimed,
            |q, d| {
                q.arg(d.id.bytes())
                    .arg(queue_id)
                    .arg(d.priority)
                    .arg(d.token as i64)
                    .arg(d.attempt as i32)
                    .arg(stored_key_of(d).as_deref().map(str::as_bytes))
                    .arg(lease_until_us)
                    .arg(now_us)
                    .arg(owner.as_bytes())
            },
        )
        .await
    }

    /// Delete the first `count` rows of the queue's `ready` range: the rows the claim read
    /// just returned, which nothing else can have changed in between.
    async fn delete_head(
        &self,
        conn: &mut SqliteConnection,
        (_, delete): (&'static str, &'static str),
        queue_id: i32,
        count: usize,
    ) -> Result<()> {
        let deleted = self
            .query(delete)
            .arg(queue_id)
            .arg(count as i64)
            .run(conn)
            .await?;
        // The transaction had the database to itself since the read: anything else is a bug,
        // and going on would leave messages in no state table.
        if deleted != count as u64 {
            return Err(Error::Corrupt(format!(
                "the claim read {count} ready rows and deleted {deleted}"
            )));
        }
        Ok(())
    }
}
