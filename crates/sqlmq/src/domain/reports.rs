//! What an operation did: acks, nacks, maintenance, migrations, retention.

use std::time::Duration;

use serde::Serialize;

use super::id::Receipt;

/// What a batch ack did.
///
/// ```no_run
/// # async fn f(q: sqlmq::Queue, receipts: Vec<sqlmq::queue::Receipt>) -> sqlmq::Result<()> {
/// let report = q.ack_batch(&receipts).await?;
/// for r in &report.lost { eprintln!("lease lost for {}", r.id) }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AckReport {
    /// Messages acked (deleted).
    pub acked: usize,
    /// Receipts whose lease was no longer theirs: nothing was done for them.
    pub lost: Vec<Receipt>,
}

/// The result of a nack.
///
/// ```
/// # async fn f(queue: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
/// match queue.nack(d.receipt(), None, "smtp timeout").await? {
///     sqlmq::queue::NackOutcome::Retry { after } => println!("retry in {after:?}"),
///     sqlmq::queue::NackOutcome::DeadLettered => println!("gave up"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NackOutcome {
    /// The message will be delivered again after this wait.
    Retry {
        /// The wait before the next attempt.
        after: Duration,
    },
    /// The message ran out of attempts and is now a dead letter.
    DeadLettered,
}

/// What one maintenance run did.
///
/// ```no_run
/// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
/// let r = q.maintain().await?;
/// println!("{} promoted, {} released, {} dead", r.promoted, r.released, r.dead_lettered);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MaintenanceReport {
    /// Delayed or backed-off messages that became ready.
    pub promoted: usize,
    /// Expired leases whose messages went back to ready.
    pub released: usize,
    /// Expired leases whose messages had no attempts left.
    pub dead_lettered: usize,
    /// Messages cancelled in flight whose leases ended (their handlers ignored the cancel or
    /// died): removed.
    pub cancelled: usize,
}

/// What `migrate` did.
///
/// ```
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// let report = client.migrate().await?;
/// println!("schema {} -> {}", report.from_version, report.to_version);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct MigrationReport {
    /// Version before (0: no schema).
    pub from_version: i64,
    /// Version after.
    pub to_version: i64,
    /// Versions applied by this call.
    pub applied: Vec<i64>,
    /// Versions reversed by this call (`migrate_to` a lower version), newest first.
    pub reverted: Vec<i64>,
}

/// What one retention run removed.
///
/// ```no_run
/// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
/// let r = t.apply_retention().await?;
/// println!("removed {} records ({} bytes) in {} transactions", r.records, r.bytes, r.transactions);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RetentionReport {
    /// Records removed.
    pub records: u64,
    /// Bytes of bodies removed.
    pub bytes: u64,
    /// Transactions used (each removes at most 500 offsets of one partition).
    pub transactions: u64,
    /// Records retention would have removed but kept because a group has not consumed them
    /// (`retention_keeps_unconsumed`).
    pub kept_unconsumed: u64,
}

/// What one maintenance run of a group did.
///
/// ```no_run
/// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
/// let r = g.maintain().await?;
/// println!("{} expired leases released, {} records held too long", r.released, r.consume_timeouts);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GroupMaintenance {
    /// Records that got their offsets (their producers' sequencers had not run).
    pub sequenced: usize,
    /// Expired leases released (due again at once, or dead on their last attempt).
    pub released: usize,
    /// Records held longer than the group's consume timeout.
    pub consume_timeouts: usize,
}
