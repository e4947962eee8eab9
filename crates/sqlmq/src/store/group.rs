//! Consumer group statements: rows and cursors, the cluster claim's reads and writes, dead
//! letters and retries, and what lag and trace read.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use super::Backend;
use super::rows::{
    Cursor, CursorScan, DueRetry, GroupRow, GroupTable, HeldTooLong, LoggedRow, NewGroupLeases,
    PartitionCounts, RecordRows,
};
use crate::domain::{
    DeadLetter, Decide, GroupConfig, MessageId, NackOutcome, PendingRetry, RateLimit, Receipt,
    Released, Result,
};

/// Group rows and cursors.
pub trait Groups<B: Backend> {
    /// Insert the group, or update an existing group's retry settings (never its mode or
    /// position). Returns the row and whether it was created.
    fn create_group(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        name: &str,
        config: &GroupConfig,
    ) -> impl Future<Output = Result<(GroupRow, bool)>> + Send;

    fn group_by_name(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        name: &str,
    ) -> impl Future<Output = Result<Option<GroupRow>>> + Send;

    fn group_by_id(
        &self,
        conn: &mut B::Connection,
        id: i32,
    ) -> impl Future<Output = Result<Option<GroupRow>>> + Send;

    /// Every group of the topic, by name.
    fn groups_of_topic(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
    ) -> impl Future<Output = Result<Vec<GroupRow>>> + Send;

    /// The group's cursor of every partition that has one: `(partition, next offset)`.
    fn cursors(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
    ) -> impl Future<Output = Result<Vec<(i32, i64)>>> + Send;

    /// Move (or create) cursors to `(partition, next offset)`; each remembers the furthest it
    /// ever was.
    fn set_cursors(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        targets: &[(i32, i64)],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Step `step` (from 0) of deleting the group: delete up to about a thousand of its rows
    /// of one table (member dead letters, leases, retries, dead letters, history, positions,
    /// cursors), or, at the last step, the group row. Returns rows deleted; `None` past the
    /// last step.
    fn delete_group_rows(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        step: usize,
    ) -> impl Future<Output = Result<Option<u64>>> + Send;

    /// The group's rate limit, its row locked until the transaction ends (on a backend with
    /// row locks); `None` when it has none.
    fn lock_group_limit(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
    ) -> impl Future<Output = Result<Option<RateLimit>>> + Send;

    /// Forget the group's deliveries at or before `before_us`, then count those after it: how
    /// many, and when the oldest of them was (µs).
    fn recent_group_deliveries(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        before_us: i64,
    ) -> impl Future<Output = Result<(u64, Option<i64>)>> + Send;

    /// Record `n` deliveries of the group at `at_us`.
    fn record_group_deliveries(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        at_us: i64,
        n: usize,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// The reads and writes of a cluster-group claim (its decisions are the engine's).
pub trait GroupClaim<B: Backend> {
    /// Take up to `n` due retries: locked (skipping those other claims hold) and deleted.
    fn take_due_retries(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        n: usize,
    ) -> impl Future<Output = Result<Vec<DueRetry>>> + Send;

    /// Which of `ids` the group has in flight (waits for a lease being written).
    fn held(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<HashSet<MessageId>>> + Send;

    /// The records at `(partition, offset)` positions (those retention has not removed).
    fn records_at(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        positions: &[(i32, i64)],
    ) -> impl Future<Output = Result<Vec<LoggedRow>>> + Send;

    /// Lock up to `scan.limit` cursors with work among partitions `[scan.from, scan.to)`, by
    /// partition: a locked cursor is the right to hand out its partition's next offsets.
    /// Cursors other claims hold are skipped.
    fn lock_cursors(
        &self,
        conn: &mut B::Connection,
        scan: &CursorScan,
    ) -> impl Future<Output = Result<Vec<Cursor>>> + Send;

    /// A partition with work, whoever holds its cursor (after [`GroupClaim::lock_cursors`]
    /// found none free: one whose cursor another claim holds).
    fn busy_cursor(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        topic_id: i32,
    ) -> impl Future<Output = Result<Option<i32>>> + Send;

    /// Lock one partition's cursor, waiting for another claim's to end; with the partition's
    /// end and first offset as they are after the wait. `None` when the cursor is gone.
    fn wait_cursor(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        topic_id: i32,
        partition: i32,
    ) -> impl Future<Output = Result<Option<Cursor>>> + Send;

    /// Partitions among `parts` with a record in flight or waiting to retry.
    fn occupied(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        parts: &[i32],
    ) -> impl Future<Output = Result<HashSet<i32>>> + Send;

    /// The records of one partition in `[from, to)`.
    fn log_range(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Result<Vec<LoggedRow>>> + Send;

    /// The last token each offset of `[from, to)` had in the group: `offset -> token`.
    fn past_tokens(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        partition: i32,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Result<HashMap<i64, i64>>> + Send;

    /// Write the lease rows of a claim's deliveries.
    fn insert_group_leases(
        &self,
        conn: &mut B::Connection,
        leases: &NewGroupLeases<'_>,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Ack, fail, extend and release the leases of a cluster group's records, as
/// [`QueueSettle`](super::QueueSettle) does for a queue's messages.
pub trait GroupSettle<B: Backend> {
    /// Ack every receipt that holds its lease. Returns the receipts that did not.
    fn ack_group(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        receipts: &[Receipt],
    ) -> impl Future<Output = Result<Vec<Receipt>>> + Send;

    /// [`GroupSettle::ack_group`] in a transaction of its own (see
    /// [`QueueSettle::ack_queue_own`](super::QueueSettle::ack_queue_own)).
    fn ack_group_own(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        receipts: &[Receipt],
        acked: &Mutex<Vec<Receipt>>,
        op: &'static str,
    ) -> impl Future<Output = Result<Vec<Receipt>>> + Send;

    /// After a COMMIT with unknown outcome, on a new connection: whether the ack of `acked`
    /// committed (each lease is gone, or belongs to a later claim).
    fn group_acks_committed(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        acked: &[Receipt],
    ) -> impl Future<Output = Result<bool>> + Send;

    /// End a claim without an ack, as `decide` settles it: `LeaseLost` (and nothing changed)
    /// when the receipt does not hold the lease.
    fn fail_group(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> impl Future<Output = Result<NackOutcome>> + Send;

    /// Extend a live lease to `lease` from now. False when the receipt does not hold it.
    fn extend_group(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Release up to `limit` expired leases, as `decide` settles each.
    fn release_group_expired(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> impl Future<Output = Result<Released>> + Send;

    /// Release up to `limit` leases held by `owner`, whatever their expiry, as `decide`
    /// settles each.
    fn release_group_owned(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> impl Future<Output = Result<Released>> + Send;
}

/// A cluster group's dead letters, waiting retries and replays.
pub trait GroupDead<B: Backend> {
    /// The oldest `limit` dead letters, with their records and error histories.
    fn group_dead_letters(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        group_id: i32,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<DeadLetter>>> + Send;

    /// Due again now with fresh attempts. Returns the ids that were dead.
    fn redrive_group(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<Vec<MessageId>>> + Send;

    /// Ids of the oldest `limit` dead letters.
    fn oldest_group_dead(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<MessageId>>> + Send;

    /// Delete dead letters. Returns how many.
    fn delete_group_dead(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<u64>> + Send;

    /// The first `limit` waiting retries, soonest first.
    fn group_retries(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<PendingRetry>>> + Send;

    /// Make waiting retries due now. Returns how many were waiting.
    fn retry_now(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Queue offsets `[from, to)` of one partition for delivery again (attempts restart,
    /// tokens continue; dead letters of the range are delivered again too). Returns how many.
    fn replay_range(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        group_id: i32,
        partition: i32,
        range: std::ops::Range<i64>,
    ) -> impl Future<Output = Result<u64>> + Send;
}

/// What lag, trace, consume-timeout alerts and liveness read.
pub trait GroupState<B: Backend> {
    /// Count and smallest offset per partition of one of the group's tables.
    fn by_partition(
        &self,
        conn: &mut B::Connection,
        table: GroupTable,
        group_id: i32,
    ) -> impl Future<Output = Result<PartitionCounts>> + Send;

    /// Microseconds since a record was published, if it is still retained.
    fn age_of(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        offset: i64,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;

    /// One record's rows in a cluster group.
    fn record_rows(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        id: MessageId,
        position: (i32, i64),
    ) -> impl Future<Output = Result<RecordRows>> + Send;

    /// The group's leases held longer than `limit`.
    fn held_too_long(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        limit: Duration,
    ) -> impl Future<Output = Result<Vec<HeldTooLong>>> + Send;

    /// The groups in which `owner` holds leases.
    fn groups_of_owner(
        &self,
        conn: &mut B::Connection,
        owner: &str,
    ) -> impl Future<Output = Result<Vec<i32>>> + Send;
}
