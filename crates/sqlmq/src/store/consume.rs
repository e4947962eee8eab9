//! Settling a queue's claims: what `body/settle.rs` and the backends share (a cluster
//! group's are `body/group_settle.rs`'s).
//!
//! A lease row is the authority: every operation locks the lease rows of its receipts and
//! proceeds only for those whose fencing token matches and whose lease has not ended by the
//! database clock (compare-and-set). What becomes of a claim that ends without an ack is the
//! engine's decision (`Decide`); the store applies it to its rows.

use crate::domain::Receipt;

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
