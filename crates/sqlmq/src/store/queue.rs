//! Queue statements: rows, enqueue, claim, time-driven moves, operator actions, dead letters.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::Duration;

use super::Backend;
use super::rows::{
    ClaimRequest, Entry, GateRead, Keyed, MessageRow, PurgeScope, QueueCounts, QueueRow, SendBatch,
};
use crate::domain::{
    After, DeadLetter, Delivery, MessageId, MessageState, QueueConfig, QueuedMessage, Result,
};

/// Queue rows. Names are compared by the backend's rules (MySQL's `ascii_bin` ignores
/// trailing spaces, SQLite compares bytes); the engine passes validated names only, which have
/// no spaces.
pub trait Queues<B: Backend> {
    /// Create the queue, or update the configuration of an existing one.
    fn upsert_queue(
        &self,
        conn: &mut B::Connection,
        name: &str,
        config: &QueueConfig,
    ) -> impl Future<Output = Result<QueueRow>> + Send;

    fn queue_by_name(
        &self,
        conn: &mut B::Connection,
        name: &str,
    ) -> impl Future<Output = Result<Option<QueueRow>>> + Send;

    fn queue_by_id(
        &self,
        conn: &mut B::Connection,
        id: i32,
    ) -> impl Future<Output = Result<Option<QueueRow>>> + Send;

    /// Every queue, by name.
    fn all_queues(
        &self,
        conn: &mut B::Connection,
    ) -> impl Future<Output = Result<Vec<QueueRow>>> + Send;

    /// Returns false when the queue does not exist.
    fn set_paused(
        &self,
        conn: &mut B::Connection,
        name: &str,
        paused: bool,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Delete the queue row (its messages must already be gone).
    fn delete_queue_row(
        &self,
        conn: &mut B::Connection,
        id: i32,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Enqueue: the statements of a send, in the caller's transaction (the engine's
/// `queue/enqueue.rs` decides which to run: idempotency keys first, then the message rows,
/// then each message where it belongs).
pub trait Enqueue<B: Backend> {
    /// The idempotency keys of `queue_id` among `keys` that are recorded: key → (the message
    /// id recorded, whether its window is still open).
    fn recorded_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        keys: &[&str],
    ) -> impl Future<Output = Result<HashMap<String, (MessageId, bool)>>> + Send;

    /// Forget recorded idempotency keys (whose window has passed) so that they can be
    /// recorded again.
    fn forget_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        keys: &[&str],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Record idempotency keys (key, the message it names) for `window`. A key recorded
    /// meanwhile by a concurrent sender fails it with a duplicate-key error; the failed
    /// statement wrote nothing.
    fn record_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        keys: &[(&str, MessageId)],
        window: Duration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Insert message rows with one statement: at most [`MAX_LIST`] rows, a bucket size (see
    /// `statements.rs`). An id stored already fails it with a duplicate-key error, and the
    /// failed statement inserted nothing (earlier statements of the transaction stay).
    ///
    /// [`MAX_LIST`]: super::statements::MAX_LIST
    fn insert_messages(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        rows: &[MessageRow<'_>],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Which of `ids` are stored messages (a plain read that sees the transaction's own rows).
    fn stored_messages(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<HashSet<MessageId>>> + Send;

    /// Put messages in line: `ready` when no delay is left, else `scheduled` (delay in µs).
    fn place(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        entries: &[(Entry, i64)],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Put keyed messages in line behind their keys: each becomes its key's head if the key
    /// has no pending message, otherwise it waits in `blocked` behind the messages already
    /// there.
    fn enqueue_keyed(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        items: Vec<Keyed>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// How many of `ids` (distinct) are stored messages (resolves a COMMIT with unknown
    /// outcome). The read must wait for a transaction that still holds those rows: when the client lost the
    /// connection right after sending COMMIT, the server may not have finished that COMMIT
    /// (or noticed the lost connection and rolled back) by the time the question arrives on
    /// another connection, and a consistent read would answer from before it.
    fn count_stored_messages(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<usize>> + Send;
}

/// A send that commits by itself in one round trip, where the backend has such a path (MySQL:
/// one script of literals; SQLite, in-process, has nothing to save).
pub trait ScriptedSend<B: Backend> {
    /// A send that commits by itself in one round trip, prepared: what [`ScriptedSend::send_script`]
    /// runs.
    type SendScript: Send + Sync;

    /// Prepare `batch` as one self-committing round trip, when this backend has such a path and
    /// the batch qualifies for it (`None`: the engine runs the full send in a transaction of
    /// its own). Only ever a plain insert: a batch that needs reads first does not qualify.
    fn prepare_send_script(&self, batch: &SendBatch<'_>) -> Result<Option<Self::SendScript>>;

    /// Run a prepared send on a connection outside any transaction: it begins, writes and
    /// commits. On an error it ends the transaction it opened, unless the connection failed
    /// (whoever holds it then discards it). A message id stored already fails it with a
    /// duplicate-key error and writes nothing.
    fn send_script(
        &self,
        conn: &mut B::Connection,
        script: &Self::SendScript,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// The claim.
pub trait Claim<B: Backend> {
    /// Move up to `n` ready messages (queue not paused), in priority then enqueue order, into
    /// leases with fresh fencing tokens; skips rows other claims hold, never waits for them.
    /// Runs in a transaction of its own, on a pooled connection outside any: it begins, claims
    /// and commits (`<op>.before_commit` is the fail point before the commit), in as few round
    /// trips as the backend can; on an error it ends what it opened unless the connection
    /// failed.
    fn claim(
        &self,
        conn: &mut B::Connection,
        request: &ClaimRequest<'_>,
        op: &'static str,
    ) -> impl Future<Output = Result<Vec<Delivery>>> + Send;

    /// The same claim in the caller's transaction (the lock-held mode, `Queue::receive_in`):
    /// the moved rows stay locked until that transaction ends, and a rollback undoes the claim.
    /// An error leaves the transaction to its owner.
    fn claim_in(
        &self,
        conn: &mut B::Connection,
        request: &ClaimRequest<'_>,
    ) -> impl Future<Output = Result<Vec<Delivery>>> + Send;

    /// Remove up to `n` ready messages of the queue (not paused), in the claim's order, in the
    /// caller's transaction, and return them (`Queue::take_in`): the `ready` and `messages`
    /// rows are deleted, no lease is written, and ordering keys move on to their next message
    /// as an ack would. A rollback puts everything back. An error leaves the transaction to
    /// its owner. The deliveries' tokens and lease ends mean nothing: the engine marks them.
    fn take_in(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        n: usize,
    ) -> impl Future<Output = Result<Vec<Delivery>>> + Send;
}

/// Time-driven moves. Each takes its rows so that any number of processes may run it at once.
pub trait Maintain<B: Backend> {
    /// Whether the queue has delayed messages that are due (a plain, non-locking read).
    fn any_due(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Move up to `limit` due delayed messages into `ready`.
    fn promote_due(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Whether the queue has leases that ended (a plain, non-locking read).
    fn any_expired(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Delete up to `limit` idempotency keys whose window has passed. Returns how many.
    fn prune_dedup(
        &self,
        conn: &mut B::Connection,
        limit: usize,
    ) -> impl Future<Output = Result<usize>> + Send;
}

/// Operator actions and counts.
pub trait Admin<B: Backend> {
    /// Per-queue counts for every queue id present in the state tables.
    fn counts(
        &self,
        conn: &mut B::Connection,
    ) -> impl Future<Output = Result<HashMap<i32, QueueCounts>>> + Send;

    /// Age of the oldest ready message of the queue, in microseconds.
    fn oldest_ready_us(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;

    /// Remove a message that is not in flight (`MessageInFlight` otherwise,
    /// `MessageNotFound` when it is not in this queue). Its key, if any, moves on.
    fn cancel(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        id: MessageId,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Delete up to `limit` messages of each state in `scope`. Returns how many went; rows
    /// locked by others are skipped (the caller loops).
    fn purge_batch(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        scope: PurgeScope,
        limit: usize,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Let ordering keys whose head message no longer exists move on (after a purge).
    /// Returns how many keys were repaired (the caller loops until 0).
    fn repair_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> impl Future<Output = Result<usize>> + Send;
}

/// A queue's dead letters (purged through [`Admin::purge_batch`]).
pub trait DeadLetters<B: Backend> {
    /// The oldest `limit` dead letters, with their error histories.
    fn dead_letters(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<DeadLetter>>> + Send;

    /// Put dead letters back with their attempts reset: `ids`, or the oldest `limit` when
    /// `None`. Returns the ids redriven.
    fn redrive(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<MessageId>>> + Send;
}

/// Looking at a queue's messages: plain reads that take no lock and no lease, each a bounded
/// walk of one index.
pub trait Browse<B: Backend> {
    /// Up to `limit` messages of `state` (not [`MessageState::Dead`]) past `after`, in the
    /// order the state hands them out.
    fn browse(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        state: MessageState,
        after: Option<&After>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<(QueuedMessage, After)>>> + Send;

    /// The message `id` of the queue in whatever state it is; `None` when the queue has no
    /// such message (never sent, acked, taken, purged or cancelled).
    fn find_message(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        id: MessageId,
    ) -> impl Future<Output = Result<Option<QueuedMessage>>> + Send;

    /// The ids of the queue's messages that carry `key`: the head and the waiting line of
    /// that ordering key (up to `limit`), and the message the idempotency key names while its
    /// window is open.
    fn ids_by_key(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<MessageId>>> + Send;
}

/// A limited queue's gate: what its claims may take, read and counted under the lock of its
/// limits row, so that the claims of every process are counted one after the other.
pub trait Limits<B: Backend> {
    /// The queue's limits, their row locked until the transaction ends (on a backend with
    /// row locks), with its leases, the clock and the whole queue's deliveries in its rate
    /// window (see [`GateRead`]); `None` when it has no limits.
    fn gate(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> impl Future<Output = Result<Option<GateRead>>> + Send;

    /// Forget `key`'s deliveries at or before `before_us` (as for
    /// [`Limits::recent_deliveries`]).
    fn forget_deliveries(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        before_us: i64,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Forget deliveries at or before `before_us`, then count those after it: how many, and
    /// when the oldest of them was (µs). `key`: the whole queue's (empty) or one concurrency
    /// key's (stored form).
    fn recent_deliveries(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        before_us: i64,
    ) -> impl Future<Output = Result<(u64, Option<i64>)>> + Send;

    /// Record `n` deliveries at `at_us` (of `key`, as for [`Limits::recent_deliveries`]).
    fn record_deliveries(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        at_us: i64,
        n: usize,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Put back messages this transaction claimed, undelivered: each due again after its
    /// delay (µs), its attempt not counted.
    fn put_back(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        claimed: &[(Delivery, i64)],
    ) -> impl Future<Output = Result<()>> + Send;
}
