//! Settling a queue's claims (a cluster group's are `group.rs`'s [`GroupSettle`]), and the
//! idle worker's wakeup probe.
//!
//! A lease row is the authority: every operation locks the lease rows of its receipts and
//! proceeds only for those whose fencing token matches and whose lease has not ended by the
//! database clock (compare-and-set). What becomes of a claim that ends without an ack is the
//! engine's decision ([`Decide`]); the store applies it to its rows.
//!
//! [`GroupSettle`]: super::GroupSettle

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use super::Backend;
use super::rows::{GroupSignal, QueueSignal};
use crate::domain::{Decide, NackOutcome, Receipt, Released, Result};

/// `receipts` without those in `except`: the acked ones of an ack that lost `except`, or the
/// lost ones of an ack that acked `except`.
pub(crate) fn receipts_except(receipts: &[Receipt], except: &[Receipt]) -> Vec<Receipt> {
    receipts
        .iter()
        .filter(|r| !except.contains(r))
        .copied()
        .collect()
}

/// BEGIN, `ack` (one of the settle traits' acks, in that transaction), COMMIT: an ack in a
/// transaction of its own. Before it commits it puts the receipts it acks into `acked`, for the
/// resolver of a COMMIT whose outcome is unknown; `<op>.before_commit` is the fail point
/// before the commit.
macro_rules! ack_in_own_transaction {
    ($conn:expr, $receipts:expr, $acked:expr, $op:expr, |$tx:ident| $ack:expr) => {{
        let mut $tx =
            sqlx::Connection::begin_with($conn, crate::store::begin_pooled::<B>()).await?;
        let lost = $ack.await?;
        *$acked.lock().expect("poisoned") = crate::store::receipts_except($receipts, &lost);
        crate::failpoints::before_commit($op).await;
        $tx.commit().await?;
        Ok(lost)
    }};
}
pub(crate) use ack_in_own_transaction;

/// Ack, fail, extend and release the leases of a queue's messages.
pub trait QueueSettle<B: Backend> {
    /// Ack every receipt that holds its lease. Returns the receipts that did not (stale token,
    /// expired, unknown): nothing was done for them.
    fn ack_queue(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        receipts: &[Receipt],
    ) -> impl Future<Output = Result<Vec<Receipt>>> + Send;

    /// [`QueueSettle::ack_queue`] in a transaction of its own, on a pooled connection outside
    /// any: it begins, acks and commits (`<op>.before_commit` is the fail point before the
    /// commit). Before it commits it puts the receipts it acks into `acked`, for the resolver
    /// of a COMMIT whose outcome is unknown. On an error it ends what it opened unless the
    /// connection failed. A backend may spend fewer round trips than a BEGIN, one per
    /// statement and a COMMIT.
    fn ack_queue_own(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        receipts: &[Receipt],
        acked: &Mutex<Vec<Receipt>>,
        op: &'static str,
    ) -> impl Future<Output = Result<Vec<Receipt>>> + Send;

    /// After a COMMIT with unknown outcome, on a new connection: whether the ack of `acked`
    /// (receipts that held their leases) committed.
    fn queue_acks_committed(
        &self,
        conn: &mut B::Connection,
        acked: &[Receipt],
    ) -> impl Future<Output = Result<bool>> + Send;

    /// End a claim without an ack, as `decide` settles it: `LeaseLost` (and nothing changed)
    /// when the receipt does not hold the lease.
    fn fail_queue(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> impl Future<Output = Result<NackOutcome>> + Send;

    /// Extend a live lease to `lease` from now. False when the receipt does not hold it.
    fn extend_queue(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Release up to `limit` expired leases, as `decide` settles each.
    fn release_queue_expired(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> impl Future<Output = Result<Released>> + Send;

    /// Release up to `limit` leases held by `owner` (a process that died or left), whatever
    /// their expiry, as `decide` settles each.
    fn release_queue_owned(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> impl Future<Output = Result<Released>> + Send;
}

/// The idle worker's wakeup probe: one cheap, non-locking read for all of a process's queues
/// (and one for all of its groups).
pub trait Probe<B: Backend> {
    /// What each of `queue_ids` (at most 1 024) has: ready, due and expired rows.
    fn probe(
        &self,
        conn: &mut B::Connection,
        queue_ids: &[i32],
    ) -> impl Future<Output = Result<Vec<QueueSignal>>> + Send;

    /// What each of `group_ids` (at most 1 024) has: records to hand out (with strict order,
    /// only in partitions with nothing in flight or waiting), due retries, expired leases,
    /// records waiting for offsets.
    fn probe_groups(
        &self,
        conn: &mut B::Connection,
        group_ids: &[i32],
    ) -> impl Future<Output = Result<Vec<GroupSignal>>> + Send;
}
