//! Queue statements: rows, enqueue, claim, time-driven moves, operator actions, dead letters.

use std::future::Future;

use super::body::{Dialect, SqlStore};
use super::rows::{ClaimRequest, SendBatch};
use crate::domain::{Delivery, Result};

/// A send that commits by itself in one round trip, where the backend has such a path (MySQL:
/// one script of literals; SQLite, in-process, has nothing to save).
pub trait ScriptedSend: Dialect {
    /// A send that commits by itself in one round trip, prepared: what [`ScriptedSend::send_script`]
    /// runs.
    type SendScript: Send + Sync;

    /// Prepare `batch` as one store-committing round trip, when this backend has such a path and
    /// the batch qualifies for it (`None`: the engine runs the full send in a transaction of
    /// its own). Only ever a plain insert: a batch that needs reads first does not qualify.
    fn prepare_send_script(
        store: &SqlStore<Self>,
        batch: &SendBatch<'_>,
    ) -> Result<Option<Self::SendScript>>;

    /// Run a prepared send on a connection outside any transaction: it begins, writes and
    /// commits. On an error it ends the transaction it opened, unless the connection failed
    /// (whoever holds it then discards it). A message id stored already fails it with a
    /// duplicate-key error and writes nothing.
    fn send_script(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        script: &Self::SendScript,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// The claim.
pub trait Claim: Dialect {
    /// Move up to `n` ready messages (queue not paused), in priority then enqueue order, into
    /// leases with fresh fencing tokens; skips rows other claims hold, never waits for them.
    /// Runs in a transaction of its own, on a pooled connection outside any: it begins, claims
    /// and commits (`<op>.before_commit` is the fail point before the commit), in as few round
    /// trips as the backend can; on an error it ends what it opened unless the connection
    /// failed.
    fn claim(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        request: &ClaimRequest<'_>,
        op: &'static str,
    ) -> impl Future<Output = Result<Vec<Delivery>>> + Send;

    /// The same claim in the caller's transaction (the lock-held mode, `Queue::receive_in`):
    /// the moved rows stay locked until that transaction ends, and a rollback undoes the claim.
    /// An error leaves the transaction to its owner.
    fn claim_in(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        request: &ClaimRequest<'_>,
    ) -> impl Future<Output = Result<Vec<Delivery>>> + Send;

    /// Remove up to `request.n` ready messages of the queue (not paused), in the claim's
    /// order, in the caller's transaction, and return them (`Queue::take_in`): the `ready` and
    /// `messages` rows are deleted, no lease is written, and ordering keys move on to their
    /// next message as an ack would. Except those `late` picks (the engine's decision: past
    /// their deadline), which are claimed instead, leased for `request.lease` to
    /// `request.owner`, for the engine to dead-letter: returned second. A rollback puts
    /// everything back. An error leaves the transaction to its owner. The taken deliveries'
    /// tokens and lease ends mean nothing: the engine marks them.
    fn take_in(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        request: &ClaimRequest<'_>,
        late: &(dyn Fn(&Delivery) -> bool + Sync),
    ) -> impl Future<Output = Result<(Vec<Delivery>, Vec<Delivery>)>> + Send;
}
