//! A message id sent again is a no-op that returns the original (guarantee 8, idempotent
//! produce), paid for on the rare path only.
//!
//! The message INSERT carries no existence check: a SELECT before every send would cost a
//! round trip on the hottest path. When a multi-row INSERT fails on the primary key, only that
//! statement has been undone (InnoDB and SQLite roll back the statement that violates a
//! constraint, not the transaction), so the rows inserted before it stay, and the backend asks
//! which ids of the rows not yet inserted are stored. It drops those, and every later repeat of
//! an id within the batch, marks them as duplicates and goes on. This works the same in the
//! engine's transaction and in the caller's (`send_in`).
//!
//! An id is only known while its message is stored: after the message is acked (deleted) the
//! same id is accepted again. `idempotency_key` with the queue's dedup window covers a resend
//! after consumption.

use std::collections::HashSet;

use crate::domain::{Error, Message, MessageId, Result, Sent};

/// A message row waiting for its INSERT: its index in the batch, the message, and its headers
/// as JSON.
pub(crate) type PendingRow<'m> = (usize, &'m Message, Option<&'m String>);

/// The ids of `rows[start..]`: what to look up after a primary-key conflict.
pub(crate) fn pending_ids(rows: &[PendingRow<'_>], start: usize) -> Vec<MessageId> {
    rows[start..].iter().map(|r| r.1.id).collect()
}

/// After `conflict` (a primary-key violation of the INSERT of `rows[start..]`'s first
/// statement): drop the rows whose id is `stored` or repeated, adding their batch indices to
/// `known`, so that the caller inserts the rest. `Err(conflict)` when no row was dropped: the
/// violation was not about ids.
pub(crate) fn skip_known(
    conflict: Error,
    rows: &mut Vec<PendingRow<'_>>,
    start: usize,
    stored: &HashSet<MessageId>,
    known: &mut Vec<usize>,
) -> Result<()> {
    let dropped = drop_known(rows, start, stored, |r| r.1.id);
    if dropped.is_empty() {
        return Err(conflict);
    }
    known.extend(dropped.into_iter().map(|r| r.0));
    Ok(())
}

/// Mark the batch's messages at `known` (indices into it) as duplicates in `out`, and take them
/// out of `fresh` (the indices still to be routed into `ready`, `scheduled` or a key's queue).
pub(crate) fn mark_known(known: Vec<usize>, out: &mut [Sent], fresh: &mut Vec<usize>) {
    if known.is_empty() {
        return;
    }
    for &i in &known {
        out[i].duplicate = true;
    }
    let known: HashSet<usize> = known.into_iter().collect();
    fresh.retain(|i| !known.contains(i));
}

/// Remove from `rows[start..]` every row whose id is in `stored` or repeats the id of an
/// earlier row of that range, keeping the order of the rest; return the removed rows. Rows
/// before `start` (already inserted) are kept as they are; a later row repeating one of them is
/// dropped because the lookup that filled `stored` sees the transaction's own inserts. An empty
/// answer means the violation was not about ids: the caller returns its error.
fn drop_known<R>(
    rows: &mut Vec<R>,
    start: usize,
    stored: &HashSet<MessageId>,
    id: impl Fn(&R) -> MessageId,
) -> Vec<R> {
    let tail = rows.split_off(start);
    let mut seen = HashSet::with_capacity(tail.len());
    let mut dropped = Vec::new();
    for row in tail {
        let i = id(&row);
        if stored.contains(&i) || !seen.insert(i) {
            dropped.push(row);
        } else {
            rows.push(row);
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_ids_and_repeats_are_dropped_in_order() {
        let [a, b, c, d] = [1u128, 2, 3, 4].map(|n| MessageId::from_uuid(uuid::Uuid::from_u128(n)));
        // (position, id): `a` at 0 is already inserted; c is stored; b repeats at 4.
        let mut rows = vec![(0, a), (1, b), (2, c), (3, d), (4, b)];
        let gone = drop_known(&mut rows, 1, &HashSet::from([c]), |r| r.1);
        assert_eq!(rows, vec![(0, a), (1, b), (3, d)]);
        assert_eq!(gone, vec![(2, c), (4, b)]);
    }

    #[test]
    fn nothing_to_drop_means_the_violation_was_elsewhere() {
        let a = MessageId::from_uuid(uuid::Uuid::from_u128(1));
        let mut rows = vec![(0, a)];
        assert!(drop_known(&mut rows, 0, &HashSet::new(), |r| r.1).is_empty());
        assert_eq!(rows.len(), 1);
    }
}
